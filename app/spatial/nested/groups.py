"""The group tree of a nested index: rigid transforms, their canonical composition, the
preorder (the bounds built on them: ``bounds.py``).

A group's transform ``M`` (4 x 4, column vectors: ``p_parent = A p_local + t`` with
``A = M[:3, :3]``, ``t = M[:3, 3]``) is a rotation (or reflection) times a uniform scale plus
a translation. Its *world* matrix ``W`` is composed top-down, always in the same order of
float64 operations (:func:`compose`), and an object's world sphere is, by definition,

* centre ``W c`` as :func:`world_point` computes it,
* radius ``ws * r`` and view distance ``ws * vd``, ``ws`` the product of the group scales on
  the path from the world (root first), a group's scale being the length of its first column,
  ``sqrt((a00*a00 + a10*a10) + a20*a20)``.

Those three formulas are the contract's world spheres: the oracle of ``tests/test_nested.py``
writes them in numpy, elementwise, in the same order, and gets the same bits.

Every bound (``bounds.py``) and tolerance (``query.py``, ``local.py``) is widened by a
relative :data:`REL` and an absolute :data:`ABS` times the magnitudes involved, so that it
covers the *computed* world spheres, rounding included.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from app.spatial.nested.state import STATE_TYPE

#: Largest magnitude of a local coordinate, radius, finite view distance or translation, and
#: of a scale (smallest: its inverse). World coordinates then stay far below float64's range.
LIMIT = 1e100
#: How far ``A^T A / s^2`` may stray from the identity: more is shear or non-uniform scale.
RIGID_TOL = 1e-6
#: Relative widening of every bound (about 4,500 float64 roundings).
REL = 1e-12
#: Absolute widening of every bound and tolerance, per unit of the magnitudes involved
#: (about 900 roundings of the largest term).
ABS = 1e-13

# validate / world-limit codes (see MESSAGES in check.py)
WORLD_SCALE_RANGE = 1


@njit(cache=True, inline="always")
def rigid_code(m, k: int):
    """(code, canonical scale) of matrix ``m[k]`` (K, 4, 4): code 0 rigid, else the first
    problem (see :func:`transform_problems`)."""
    finite = True
    for i in range(4):
        for j in range(4):
            finite = finite and np.isfinite(m[k, i, j])
    if not finite:
        return 1, 0.0
    if m[k, 3, 0] != 0.0 or m[k, 3, 1] != 0.0 or m[k, 3, 2] != 0.0 or m[k, 3, 3] != 1.0:
        return 2, 0.0
    c0 = math.sqrt((m[k, 0, 0] * m[k, 0, 0] + m[k, 1, 0] * m[k, 1, 0])
                   + m[k, 2, 0] * m[k, 2, 0])
    zero = c0 < 1.0 / LIMIT
    for j in range(3):
        zero = zero or (m[k, 0, j] == 0.0 and m[k, 1, j] == 0.0 and m[k, 2, j] == 0.0)
    if zero:
        return 3, c0
    if c0 > LIMIT:
        return 4, c0
    s2 = c0 * c0
    diag = 0.0
    off = 0.0
    for j in range(3):
        for l in range(j, 3):
            dot = (m[k, 0, j] * m[k, 0, l] + m[k, 1, j] * m[k, 1, l]) + m[k, 2, j] * m[k, 2, l]
            if j == l:
                diag = max(diag, abs(dot / s2 - 1.0))
            else:
                off = max(off, abs(dot / s2))
    if not diag <= RIGID_TOL:
        return 5, c0
    if not off <= RIGID_TOL:
        return 6, c0
    if max(abs(m[k, 0, 3]), abs(m[k, 1, 3]), abs(m[k, 2, 3])) > LIMIT:
        return 7, c0
    return 0, c0


@njit(cache=True)
def rigid_codes(m, scales) -> np.ndarray:
    """A code per matrix of ``m`` (K, 4, 4): 0 rigid, else the first problem (see
    :func:`transform_problems`); ``scales`` gets the canonical scale of each."""
    K = m.shape[0]
    codes = np.zeros(K, np.int8)
    for k in range(K):
        code, c0 = rigid_code(m, k)
        codes[k] = code
        if code == 0 or code > 2:
            scales[k] = c0
    return codes


def transform_problems(m: np.ndarray) -> list[tuple[int, str]]:
    """(index, reason) for every bad matrix of ``m`` (K, 4, 4); empty when all are rigid."""
    codes = rigid_codes(m, np.empty(m.shape[0]))
    out: list[tuple[int, str]] = []
    for k in np.flatnonzero(codes).tolist():
        a = m[k, :3, :3]
        cols = np.sqrt((a * a).sum(axis=0)).tolist()
        out.append((k, {
            1: "NaN or infinite entries",
            2: f"last row {m[k, 3].tolist()} is not (0, 0, 0, 1) (column vectors: the "
               "translation is the last column; a row-vector matrix such as pyrr's is the "
               "transpose)",
            3: f"zero scale (column lengths {cols})",
            4: f"scale {cols[0]:g} beyond {LIMIT:g}",
            5: f"non-uniform scale (column lengths {cols})",
            6: "shear (the columns are not orthogonal)",
            7: f"translation beyond {LIMIT:g}",
        }[int(codes[k])]))
    return out


def canonical_scale(m: np.ndarray) -> np.ndarray:
    """Scales of rigid matrices ``m`` (K, 4, 4): the lengths of their first columns."""
    return np.sqrt((m[:, 0, 0] * m[:, 0, 0] + m[:, 1, 0] * m[:, 1, 0]) + m[:, 2, 0] * m[:, 2, 0])


@njit(cache=True, inline="always")
def world_point(W: np.ndarray, g: int, x: float, y: float, z: float):
    """``W[g] (x, y, z, 1)``: the canonical world centre (fixed order of operations)."""
    return ((((W[g, 0, 0] * x + W[g, 0, 1] * y) + W[g, 0, 2] * z) + W[g, 0, 3]),
            (((W[g, 1, 0] * x + W[g, 1, 1] * y) + W[g, 1, 2] * z) + W[g, 1, 3]),
            (((W[g, 2, 0] * x + W[g, 2, 1] * y) + W[g, 2, 2] * z) + W[g, 2, 3]))


@njit(cache=True, inline="always")
def compose(W: np.ndarray, p: int, L: np.ndarray, g: int, out: np.ndarray) -> None:
    """``out[g] = W[p] L[g]`` for 3 x 4 affine rows (fixed order of operations)."""
    for i in range(3):
        for j in range(3):
            out[g, i, j] = (W[p, i, 0] * L[g, 0, j] + W[p, i, 1] * L[g, 1, j]) + (
                W[p, i, 2] * L[g, 2, j])
        out[g, i, 3] = ((W[p, i, 0] * L[g, 0, 3] + W[p, i, 1] * L[g, 1, 3]) + (
            W[p, i, 2] * L[g, 2, 3])) + W[p, i, 3]


@njit(cache=True, inline="always")
def world_one(parent, L, scale, W, ws, stretch_hi, stretch_lo, g: int) -> bool:
    """World matrix, scale and stretch bounds of group ``g`` from its parent's (current);
    False when the world scale leaves [1/LIMIT, LIMIT] (``W`` / ``ws`` then written, the
    bounds not)."""
    p = parent[g]
    if p < 0:
        for a in range(3):
            for b in range(4):
                W[g, a, b] = L[g, a, b]
        ws[g] = scale[g]
    else:
        compose(W, p, L, g, W)
        ws[g] = ws[p] * scale[g]
    s = ws[g]
    if not (s >= 1.0 / LIMIT and s <= LIMIT):
        return False
    s2 = s * s
    m = 0.0
    for j in range(3):
        for k in range(j, 3):
            dot = (W[g, 0, j] * W[g, 0, k] + W[g, 1, j] * W[g, 1, k]) + W[g, 2, j] * W[g, 2, k]
            dev = abs(dot / s2 - (1.0 if j == k else 0.0))
            m = max(m, dev)
    stretch_hi[g] = math.sqrt(1.0 + 3.0 * m) - 1.0 + REL
    stretch_lo[g] = 1.0 - math.sqrt(max(0.0, 1.0 - 3.0 * m)) + REL
    return True


@njit(cache=True)
def refresh_world(order, parent, L, scale, W, ws, stretch_hi, stretch_lo):
    """World matrices, scales and stretch bounds of every group, top-down in ``order``.

    ``stretch_hi`` / ``stretch_lo`` bound how far the world matrix's singular values stray
    from ``ws``:
    ``ws (1 - stretch_lo) <= sigma <= ws (1 + stretch_hi)`` (Gershgorin on ``A^T A / ws^2 - I``).
    Returns (code, group): 0 when every world scale lies in [1/LIMIT, LIMIT].
    """
    for i in range(order.shape[0]):
        g = order[i]
        if not world_one(parent, L, scale, W, ws, stretch_hi, stretch_lo, g):
            return WORLD_SCALE_RANGE, g
    return 0, 0


@njit(cache=True)
def set_transforms_batch(st, slots, m):
    """``set_transforms``' whole fast path in one pass, on the index's record ``st``
    (state.py): check every matrix of ``m`` (K, 4, 4) and that no slot repeats, write the
    local matrices and scales, recompose the world matrices of the subtrees of ``slots``
    (preorder) and list their groups as bounds-dirty (``bmark`` / ``blist`` / ``nbl[0]``).
    Returns (code, k): 0 done; 1 matrix ``k`` is not rigid (or ``m`` not (K, 4, 4)), 2 slot
    ``k`` repeats (nothing changed either way); 3 the world scale of group ``k`` leaves range
    (everything put back as it was)."""
    L, scale, W, ws = st.L, st.scale, st.W, st.ws
    stretch_hi, stretch_lo = st.stretch_hi, st.stretch_lo
    order, send, pos, parent = st.order, st.send, st.pos, st.parent
    bmark, blist, nbl = st.bmark, st.blist, st.nbl
    K = slots.shape[0]
    if m.shape[0] != K or m.shape[1] != 4 or m.shape[2] != 4:
        return 1, 0
    ng = order.shape[0]
    new_s = np.empty(K)
    for k in range(K):
        code, c0 = rigid_code(m, k)
        if code:
            return 1, k
        new_s[k] = c0
    mark = np.zeros(ng, np.uint8)
    for k in range(K):
        i = pos[slots[k]]
        if mark[i]:
            return 2, k
        mark[i] = 1
    old_L = np.empty((K, 3, 4))
    old_s = np.empty(K)
    for k in range(K):
        g = slots[k]
        for a in range(3):
            for b in range(4):
                old_L[k, a, b] = L[g, a, b]
                L[g, a, b] = m[k, a, b]
        old_s[k] = scale[g]
        scale[g] = new_s[k]
    end = 0
    bad = -1
    for i in range(ng):
        if mark[i] and i >= end:
            end = send[i]
        if i < end:
            g = order[i]
            if not world_one(parent, L, scale, W, ws, stretch_hi, stretch_lo, g):
                bad = g
                break
    if bad >= 0:
        for k in range(K):
            g = slots[k]
            for a in range(3):
                for b in range(4):
                    L[g, a, b] = old_L[k, a, b]
            scale[g] = old_s[k]
        end = 0
        for i in range(ng):
            if mark[i] and i >= end:
                end = send[i]
            if i < end:
                world_one(parent, L, scale, W, ws, stretch_hi, stretch_lo, order[i])
        return 3, bad
    end = 0
    n = nbl[0]
    for i in range(ng):
        if mark[i] and i >= end:
            end = send[i]
        if i < end:
            g = order[i]
            if not bmark[g]:
                bmark[g] = 1
                blist[n] = g
                n += 1
    nbl[0] = n
    return 0, 0


# Typed entry point (state.py): other argument types raise TypeError instead of compiling.
@njit((STATE_TYPE, types.int64[::1], types.float64[:, :, ::1]), cache=True)
def transforms_hot(st, slots, m):
    """:func:`set_transforms_batch` for ``NestedIndex.set_transforms``' per-frame path."""
    return set_transforms_batch(st, slots, m)


@njit(cache=True)
def subtree_order(order, send, pos, slots):
    """The groups of the subtrees of ``slots``, in preorder (a parent before its children):
    what a change of their transforms makes stale."""
    mark = np.zeros(order.shape[0], np.uint8)
    for q in range(slots.shape[0]):
        i = pos[slots[q]]
        if mark[i]:
            continue  # inside a subtree already taken
        for j in range(i, send[i]):
            mark[j] = 1
    n = 0
    for i in range(order.shape[0]):
        n += mark[i]
    out = np.empty(n, np.int64)
    k = 0
    for i in range(order.shape[0]):
        if mark[i]:
            out[k] = order[i]
            k += 1
    return out


def preorder(parent: np.ndarray, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, subtree end, depth) of the live groups: ``order`` lists each group before its
    descendants, which are ``order[i + 1 : end[i]]``; depth 0 is a child of the world."""
    live = np.flatnonzero(alive)
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    for g in live.tolist():
        p = int(parent[g])
        (roots if p < 0 else children.setdefault(p, [])).append(g)
    order: list[int] = []
    ends = np.zeros(live.shape[0], dtype=np.int64)
    depth = np.zeros(alive.shape[0], dtype=np.int64)
    stack: list[tuple[int, int, int]] = [(g, 0, -1) for g in reversed(roots)]
    while stack:
        g, d, at = stack.pop()
        if at >= 0:  # every descendant listed: the subtree ends here
            ends[at] = len(order)
            continue
        stack.append((g, d, len(order)))
        order.append(g)
        depth[g] = d
        for c in reversed(children.get(g, [])):
            stack.append((c, d + 1, -1))
    return np.array(order, dtype=np.int64), ends, depth
