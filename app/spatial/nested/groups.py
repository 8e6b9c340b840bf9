"""The group tree of a nested index: rigid transforms, their canonical composition, bounds.

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

Bounds (Shagam's R(N)): each group keeps a *local* sphere around its own objects (grown at
once when an object moves out of it, tightened lazily); :func:`refresh_bounds` turns them into
world spheres and merges every subtree bottom-up at query time (O(groups), compiled), each
widened by a relative :data:`REL` and an absolute :data:`ABS` times the magnitudes involved,
so that they cover the *computed* world spheres of everything below, rounding included.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

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


def transform_problems(m: np.ndarray) -> list[tuple[int, str]]:
    """(index, reason) for every bad matrix of ``m`` (K, 4, 4); empty when all are rigid."""
    out: list[tuple[int, str]] = []
    if m.shape[0] == 0:
        return out
    with np.errstate(all="ignore"):
        finite = np.isfinite(m).all(axis=(1, 2))
        bottom = (m[:, 3, :] == np.array([0.0, 0.0, 0.0, 1.0])).all(axis=1)
        a = m[:, :3, :3]
        r0, r1, r2 = a[:, 0, :], a[:, 1, :], a[:, 2, :]
        cols = np.sqrt((r0 * r0 + r1 * r1) + r2 * r2)
        s = cols[:, 0]
        gram = np.einsum("kij,kil->kjl", a, a) / (s * s)[:, None, None] - np.eye(3)
        diag = np.abs(np.diagonal(gram, axis1=1, axis2=2)).max(axis=1)
        off = np.abs(gram - np.einsum("kjj->kj", gram)[:, :, None] * np.eye(3)).max(axis=(1, 2))
        t = np.abs(m[:, :3, 3]).max(axis=1)
    for k in range(m.shape[0]):
        if not finite[k]:
            out.append((k, "NaN or infinite entries"))
        elif not bottom[k]:
            out.append((k, f"last row {m[k, 3].tolist()} is not (0, 0, 0, 1) (column vectors: "
                           "the translation is the last column; a row-vector matrix such as "
                           "pyrr's is the transpose)"))
        elif (cols[k] == 0).any() or s[k] < 1.0 / LIMIT:
            out.append((k, f"zero scale (column lengths {cols[k].tolist()})"))
        elif s[k] > LIMIT:
            out.append((k, f"scale {s[k]:g} beyond {LIMIT:g}"))
        elif not (diag[k] <= RIGID_TOL):
            out.append((k, f"non-uniform scale (column lengths {cols[k].tolist()})"))
        elif not (off[k] <= RIGID_TOL):
            out.append((k, "shear (the columns are not orthogonal)"))
        elif t[k] > LIMIT:
            out.append((k, f"translation beyond {LIMIT:g}"))
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


@njit(cache=True)
def refresh_world(order, parent, L, scale, W, ws, dhi, dlo):
    """World matrices, scales and stretch bounds of every group, top-down in ``order``.

    ``dhi`` / ``dlo`` bound how far the world matrix's singular values stray from ``ws``:
    ``ws (1 - dlo) <= sigma <= ws (1 + dhi)`` (Gershgorin on ``A^T A / ws^2 - I``).
    Returns (code, group): 0 when every world scale lies in [1/LIMIT, LIMIT].
    """
    for i in range(order.shape[0]):
        g = order[i]
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
            return WORLD_SCALE_RANGE, g
        s2 = s * s
        m = 0.0
        for j in range(3):
            for k in range(j, 3):
                dot = (W[g, 0, j] * W[g, 0, k] + W[g, 1, j] * W[g, 1, k]) + W[g, 2, j] * W[g, 2, k]
                dev = abs(dot / s2 - (1.0 if j == k else 0.0))
                m = max(m, dev)
        dhi[g] = math.sqrt(1.0 + 3.0 * m) - 1.0 + REL
        dlo[g] = 1.0 - math.sqrt(max(0.0, 1.0 - 3.0 * m)) + REL
    return 0, 0


@njit(cache=True, inline="always")
def magnitude(W, g: int, cmax: float) -> float:
    """Bound on every term of ``W[g] c`` for ``|c|_inf <= cmax``: 3 max|A| cmax + max|t|."""
    amax = 0.0
    tmax = 0.0
    for i in range(3):
        tmax = max(tmax, abs(W[g, i, 3]))
        for j in range(3):
            amax = max(amax, abs(W[g, i, j]))
    return 3.0 * amax * cmax + tmax


@njit(cache=True)
def refresh_bounds(order, parent, W, ws, dhi, count, o_c, o_r, o_vd,
                   wbc, wbr, wvd, gmag, sbc, sbr, svd) -> None:
    """World spheres of each group's own objects (``wbc``, ``wbr``, largest world view
    distance ``wvd``) and of each subtree (``sbc``, ``sbr``, ``svd``), merged bottom-up.

    A group without objects has radius -1 (nothing); a subtree sphere is centred on the
    group's own sphere, or on its origin when it has no objects of its own (Shagam's R(N)).
    ``gmag`` gets the magnitude bound of the group's world transform over its own sphere.
    """
    n = order.shape[0]
    for i in range(n):
        g = order[i]
        if count[g] > 0:
            cx, cy, cz = world_point(W, g, o_c[g, 0], o_c[g, 1], o_c[g, 2])
            cmax = max(abs(o_c[g, 0]), abs(o_c[g, 1]), abs(o_c[g, 2])) + o_r[g]
            mag = magnitude(W, g, cmax)
            gmag[g] = mag
            wbc[g, 0] = cx
            wbc[g, 1] = cy
            wbc[g, 2] = cz
            wbr[g] = ws[g] * (1.0 + dhi[g]) * o_r[g] * (1.0 + REL) + ABS * mag
            wvd[g] = ws[g] * o_vd[g] * (1.0 + REL)
            for a in range(3):
                sbc[g, a] = wbc[g, a]
            sbr[g] = wbr[g]
            svd[g] = wvd[g]
        else:
            gmag[g] = 0.0
            wbr[g] = -1.0
            wvd[g] = -1.0
            for a in range(3):
                wbc[g, a] = W[g, a, 3]
                sbc[g, a] = W[g, a, 3]
            sbr[g] = -1.0
            svd[g] = -1.0
    for i in range(n - 1, -1, -1):
        g = order[i]
        p = parent[g]
        if p < 0 or sbr[g] < 0.0:
            continue
        dx = sbc[g, 0] - sbc[p, 0]
        dy = sbc[g, 1] - sbc[p, 1]
        dz = sbc[g, 2] - sbc[p, 2]
        reach = (math.sqrt(dx * dx + dy * dy + dz * dz) + sbr[g]) * (1.0 + REL)
        if reach > sbr[p]:
            sbr[p] = reach
        if svd[g] > svd[p]:
            svd[p] = svd[g]


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
