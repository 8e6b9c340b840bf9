"""The pair descent of a snapshot on one thread: an explicit stack of tasks (an item against
itself, two items against each other), boxes pruned by the margin, lists filtered by the
other side's box and tested exactly, hits gathered in a pending buffer and flushed into the
output.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from app.spatial.pairs import keep, new_pairs
from app.spatial.tree_pairs.snapshot import (
    REFINE_ABOVE,
    REL_PAD,
    TreePairSnapshot,
    row_offset,
    sphere_at,
)

SMALL_SELF = 8  # a subtree of at most this many objects: all its pairs tested directly
SMALL_PAIRS = 64  # two items whose object counts multiply to at most this: tested directly
# Room kept free on the task stack: one task pushes at most K(K-1)/2 + 2K tasks (405 for
# the icoseptree's 27 children).
STACK_SLACK = 1024
# The pending-pair buffer (packed rows) and the room it keeps for one batch of direct tests
# (at most REFINE_ABOVE ** 2 rows).
PENDING = 16384
PENDING_ROOM = REFINE_ABOVE * REFINE_ABOVE


class DescentScratch(NamedTuple):
    """One descent's working arrays (a thread's, in the parallel descent)."""

    rows_a: np.ndarray  # (longest own list,) rows of one side that meet the other's box
    rows_b: np.ndarray  # (longest own list,) the same for the other side
    pend: np.ndarray  # (PENDING, 2) packed row pairs found, not yet flushed to the output
    stack: np.ndarray  # (rows, 2) open tasks (see descend_steps)



# ---------------------------------------------------------------------- the descent
#
# numba increments and decrements the reference count of every array handed to a helper,
# inlined or not, at every call (an atomic operation each): with plain helpers that was 60 %
# of the descent. The helpers called per node or per object are therefore compiled with
# ``_nrt=False`` (they allocate nothing; the caller holds the arrays), and the exact tests
# write their hits to a fixed pending buffer of packed row pairs, branch-free, which the
# descent's driver flushes into the growable output now and then. The descent's loop itself
# is compiled without reference counting and returns to its driver to grow the task stack.


@njit(cache=True, _nrt=False)
def _meet(b, i: int, c, j: int, g: float) -> bool:
    """Box row i of b and box row j of c are within g of each other on every axis."""
    return ((b[i, 0] <= c[j, 3] + g) & (c[j, 0] <= b[i, 3] + g)
            & (b[i, 1] <= c[j, 4] + g) & (c[j, 1] <= b[i, 4] + g)
            & (b[i, 2] <= c[j, 5] + g) & (c[j, 2] <= b[i, 5] + g))


@njit(cache=True, _nrt=False)
def _gap(mag, i: int, j: int, margin: float) -> float:
    """The margin plus the rounding pad for boxes of nodes i and j."""
    return margin + REL_PAD * (1.0 + max(mag[i], mag[j]) + margin)


@njit(cache=True, _nrt=False)
def _extent(box, i: int) -> float:
    """Sum of box row i's edge lengths (which of two subtrees to split)."""
    return (box[i, 3] - box[i, 0]) + (box[i, 4] - box[i, 1]) + (box[i, 5] - box[i, 2])


@njit(cache=True, _nrt=False)
def _filter(flat, r0: int, r1: int, c, j: int, g: float, rows) -> int:
    """Rows in [r0, r1) whose sphere box comes within g of box row j of c, into ``rows``;
    how many. (Each bound as ``c[j, 3] + g`` and ``x + r + g``: the arithmetic the rounding
    pad in ``g`` was sized for.)"""
    lx = c[j, 0]
    ly = c[j, 1]
    lz = c[j, 2]
    hx = c[j, 3] + g
    hy = c[j, 4] + g
    hz = c[j, 5] + g
    n = 0
    for p in range(r0, r1):
        f = row_offset(p)
        x = flat[f]
        y = flat[f + np.uint64(1)]
        z = flat[f + np.uint64(2)]
        r = flat[f + np.uint64(3)]
        rows[np.uint64(n)] = p
        n += ((x - r <= hx) & (lx <= x + r + g) & (y - r <= hy) & (ly <= y + r + g)
              & (z - r <= hz) & (lz <= z + r + g))
    return n


@njit(cache=True, inline="always")
def _item(size, c: int) -> int:
    """The descent's item for node c's subtree: a leaf's is its own list (see
    :func:`descend_steps`)."""
    return (c << 1) | (1 if size[c] == 1 else 0)


@njit(cache=True, inline="always")
def _pend_touch(flat, p: int, ax: float, ay: float, az: float, ar: float, q: int,
                margin: float, pf, npend: int) -> int:
    """Write (p, q) as pending pair ``npend`` (``pf``: the pending buffer, flat); returns
    npend + 1 if row q touches row p's sphere (ax, ay, az, ar), else npend.

    The exact test in :func:`~app.spatial.pairs.pair_touch`'s arithmetic, with a branch-free
    compaction (appending to the growable output inside the loop made it 7x slower).
    """
    f = row_offset(q)
    dx = ax - flat[f]
    dy = ay - flat[f + np.uint64(1)]
    dz = az - flat[f + np.uint64(2)]
    o = np.uint64(npend) * np.uint64(2)
    pf[o] = p
    pf[o + np.uint64(1)] = q
    return npend + (math.sqrt(dx * dx + dy * dy + dz * dz) <= ar + flat[f + np.uint64(3)]
                    + margin)


@njit(cache=True, _nrt=False)
def _touch_range(flat, p: int, q0: int, q1: int, margin: float, pf, npend: int) -> int:
    """Append (p, q) for the rows q in [q0, q1) touching row p; returns the new count."""
    ax, ay, az, ar = sphere_at(flat, p)
    for q in range(q0, q1):
        npend = _pend_touch(flat, p, ax, ay, az, ar, q, margin, pf, npend)
    return npend


@njit(cache=True, _nrt=False)
def _touch_rows(flat, p: int, rows, n: int, margin: float, pf, npend: int) -> int:
    """Like :func:`_touch_range` over the rows ``rows[:n]``."""
    ax, ay, az, ar = sphere_at(flat, p)
    for t in range(n):
        npend = _pend_touch(flat, p, ax, ay, az, ar, rows[np.uint64(t)], margin, pf, npend)
    return npend


@njit(cache=True, _nrt=False)
def _within(flat, r0: int, r1: int, margin: float, pf, npend: int) -> int:
    """Every touching pair of rows [r0, r1), appended to the pending pairs ``pf``."""
    for p in range(r0, r1 - 1):
        npend = _touch_range(flat, p, p + 1, r1, margin, pf, npend)
    return npend


@njit(cache=True, _nrt=False)
def _between(flat, a0: int, a1: int, b0: int, b1: int, margin: float, pf, npend: int) -> int:
    """Every touching pair across rows [a0, a1) and [b0, b1), appended to ``pf``."""
    for p in range(a0, a1):
        npend = _touch_range(flat, p, b0, b1, margin, pf, npend)
    return npend


@njit(cache=True, _nrt=False)
def _across(flat, sa, na: int, sb, nb: int, margin: float, pf, npend: int) -> int:
    """Every touching pair across the rows sa[:na] and sb[:nb], appended to ``pf``."""
    for u in range(na):
        npend = _touch_rows(flat, sa[u], sb, nb, margin, pf, npend)
    return npend


@njit(cache=True)
def flush_pending(pend, npend: int, slot, sel, out, k: int):
    """Move the pending row pairs into ``out`` as slot pairs the filter keeps; (out, k)."""
    if k + npend > out.shape[0]:
        bigger = np.empty((max(2 * out.shape[0], k + npend), 2), np.int64)
        bigger[:k] = out[:k]
        out = bigger
    for t in range(npend):
        a = slot[pend[t, 0]]
        b = slot[pend[t, 1]]
        if keep(sel, a, b):
            out[k, 0] = a
            out[k, 1] = b
            k += 1
    return out, k


@njit(cache=True)
def longest_own(sn: TreePairSnapshot) -> int:
    """The longest own list of the snapshot (at least 1): the room of the filtered rows."""
    longest = 1
    ocnt = sn.ocnt
    for i in range(ocnt.shape[0]):
        longest = max(longest, ocnt[i])
    return longest


@njit(cache=True)
def descend(sn: TreePairSnapshot, margin: float, sel):
    """:func:`.parallel.snapshot_pairs` on one thread (see the module docstring): the driver of
    :func:`descend_steps`, which stops whenever its task stack or pending buffer runs low;
    the driver flushes and grows them and resumes it."""
    out = new_pairs(sn.pts.shape[0])
    k = np.int64(0)
    if sn.size.shape[0] == 0:
        return out[:0]
    longest = longest_own(sn)
    scratch = DescentScratch(np.empty(longest, np.int64), np.empty(longest, np.int64),
                             np.empty((PENDING, 2), np.int64),
                             np.empty((4 * STACK_SLACK, 2), np.int64))
    scratch.stack[0, 0] = 0
    scratch.stack[0, 1] = -1
    top = np.int64(1)
    while True:
        top, npend = descend_steps(sn, margin, sel.shape[0] > 0, scratch, top)
        out, k = flush_pending(scratch.pend, npend, sn.slot, sel, out, k)
        if top == 0:
            return out[:k]
        stack = scratch.stack
        if top + STACK_SLACK > stack.shape[0]:
            bigger = np.empty((2 * stack.shape[0], 2), np.int64)
            bigger[:top] = stack[:top]
            scratch = DescentScratch(scratch.rows_a, scratch.rows_b, scratch.pend, bigger)


@njit(cache=True, _nrt=False)
def descend_steps(sn: TreePairSnapshot, margin: float, filtered: bool,
                   scratch: DescentScratch, top: int):
    """Run the descent's tasks from ``stack[:top]``; returns (top, pending pairs) when done
    (top 0), or when the stack has less than STACK_SLACK rows left or the pending buffer
    less than PENDING_ROOM. Without reference counting: a loop that may replace an array
    (the growing stack, the output) had numba count it at every task (11 % of the time).

    Tasks: (i, -1) is self(i); (x, y) pairs two items, an item being i << 1 (node i's
    subtree) or i << 1 | 1 (node i's own list; a leaf is always its list). A pair is pushed
    only when its boxes meet and, under a filter (``nsel_*``), one side holds a filtered
    object.
    """
    size, ostart, ocnt, oend = sn.size, sn.ostart, sn.ocnt, sn.oend
    box, obox, mag, pts = sn.box, sn.obox, sn.mag, sn.pts
    nsel_own, nsel_sub = sn.nsel_own, sn.nsel_sub
    sa, sb, pend, stack = scratch.rows_a, scratch.rows_b, scratch.pend, scratch.stack
    flat = pts.reshape(pts.size)  # (see row_offset)
    pf = pend.reshape(pend.size)
    npend = np.int64(0)
    cap = stack.shape[0]
    while top > 0:
        if npend > PENDING - PENDING_ROOM or top + STACK_SLACK > cap:
            return top, npend
        top -= 1
        a = stack[top, 0]
        b = stack[top, 1]
        if b < 0:
            # self(i): own list with itself and with each child, each child with itself and
            # every two children.
            i = a
            if filtered and nsel_sub[i] == 0:
                continue
            r0 = ostart[i]
            if oend[i] - r0 <= SMALL_SELF:
                npend = _within(flat, r0, oend[i], margin, pf, npend)
                continue
            n_own = ocnt[i]
            if n_own > 1 and (not filtered or nsel_own[i] > 0):
                npend = _within(flat, r0, r0 + n_own, margin, pf, npend)
            end = i + size[i]
            c = i + 1
            while c < end:
                ic = _item(size, c)
                stack[top, 0] = c
                stack[top, 1] = -1
                top += 1
                if n_own > 0 and (not filtered or nsel_own[i] + nsel_sub[c] > 0) and _meet(
                        obox, i, box, c, _gap(mag, i, c, margin)):
                    stack[top, 0] = (i << 1) | 1
                    stack[top, 1] = ic
                    top += 1
                d = c + size[c]
                while d < end:
                    if (not filtered or nsel_sub[c] + nsel_sub[d] > 0) and _meet(
                            box, c, box, d, _gap(mag, c, d, margin)):
                        stack[top, 0] = ic
                        stack[top, 1] = _item(size, d)
                        top += 1
                    d += size[d]
                c += size[c]
            continue
        # pair(a, b) of two disjoint items whose boxes are within the margin
        i = a >> 1
        j = b >> 1
        a_own = (a & 1) == 1
        b_own = (b & 1) == 1
        a0 = ostart[i]
        a1 = a0 + ocnt[i] if a_own else oend[i]
        b0 = ostart[j]
        b1 = b0 + ocnt[j] if b_own else oend[j]
        if (a1 - a0) * (b1 - b0) <= SMALL_PAIRS:
            npend = _between(flat, a0, a1, b0, b1, margin, pf, npend)
            continue
        if a_own and b_own:
            g = _gap(mag, i, j, margin)
            na = _filter(flat, a0, a1, obox, j, g, sa)
            if na == 0:
                continue
            nb = _filter(flat, b0, b1, obox, i, g, sb)
            if nb == 0:
                continue
            npend = _across(flat, sa, na, sb, nb, margin, pf, npend)
            continue
        if a_own or (not b_own and _extent(box, j) > _extent(box, i)):
            # split the other one: swap so that a is the subtree to split
            a, b = b, a
            i, j = j, i
            a_own, b_own = b_own, a_own
            a0, a1, b0, b1 = b0, b1, a0, a1
        # b against a's own list and each of a's children, on b's box: its own list's or its
        # subtree's.
        nsel_b = nsel_own[j] if b_own else nsel_sub[j]
        bbox = obox if b_own else box
        if ocnt[i] > 0 and (not filtered or nsel_own[i] + nsel_b > 0) and _meet(
                obox, i, bbox, j, _gap(mag, i, j, margin)):
            stack[top, 0] = (i << 1) | 1
            stack[top, 1] = b
            top += 1
        end = i + size[i]
        c = i + 1
        while c < end:
            if (not filtered or nsel_sub[c] + nsel_b > 0) and _meet(
                    box, c, bbox, j, _gap(mag, c, j, margin)):
                stack[top, 0] = _item(size, c)
                stack[top, 1] = b
                top += 1
            c += size[c]
    return 0, npend
