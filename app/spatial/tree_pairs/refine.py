"""Refining a snapshot's long own lists (an unsplittable leaf, a crowd of big objects at an
inner node, a view-distance class) into kd subtrees cut along the Morton curve, in the
snapshot only, so that the descent never meets a list longer than
:data:`.snapshot.REFINE_ABOVE`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from app.geom.predicates import box_with_sphere
from app.parallelism import PARALLEL_MIN
from app.spatial.tree_pairs.snapshot import (
    SnapshotMemory,
    TreePairSnapshot,
    row_offset,
    rows_box,
    set_mag,
    sphere_at,
    subtree_box,
    sum_children_sel,
)

#: An own list is refined into lists of at most LEAF_ROWS (see :data:`.snapshot.REFINE_ABOVE`).
LEAF_ROWS = 32


@njit(cache=True, _nrt=False)
def _count_sel(slot, r0: int, r1: int, sel) -> int:
    n = 0
    for p in range(r0, r1):
        n += sel[slot[p]]
    return n


@njit(cache=True)
def refine_own_list(sn: TreePairSnapshot, i: int, m: int, sel, mem: SnapshotMemory) -> int:
    """Snapshot node i's own list, longer than REFINE_ABOVE, refined into a kd subtree from
    node m (:func:`refine`); node i keeps no own objects. Returns the next free node.

    Called only for such a list: a call at every node, with these arrays to reference-count,
    made query_pairs ~10 % slower (kd, 10^5 objects)."""
    r0 = sn.ostart[i]
    r1 = r0 + sn.ocnt[i]
    sn.ocnt[i] = 0
    sn.nsel_own[i] = 0
    return refine(sn, r0, r1, m, sel, mem)


def _spread_table() -> np.ndarray:
    """Each 10-bit value with its bits spread to every third bit (a Morton code's per-axis
    part): a table of 8 KiB, where the shift-and-mask form took 4 ns a call."""
    v = np.arange(1024, dtype=np.int64)
    out = np.zeros(1024, np.int64)
    for b in range(10):
        out |= ((v >> b) & 1) << (3 * b)
    return out


_SPREAD = _spread_table()


#: Rows from which the Morton sort's row-wise passes (bounds, codes, the gather, the copy
#: back) run in blocks on every thread; a shorter list is sorted on the calling thread (waking
#: the workers costs ~0.2 ms a loop, and the AABB tree refines many short lists).
SORT_PARALLEL_MIN = PARALLEL_MIN
#: Blocks the row-wise passes of a long list are cut into (dealt to the threads by prange).
SORT_BLOCKS = 16


#: A digit's count row in the Morton sort: 1,024 digits and a leading zero for the prefix sums.
_DIGITS = 1025


@njit(cache=True, _nrt=False)
def _bounds_rows(flat, p0: int, p1: int, out, b: int) -> None:
    """out[b] = (lowest x, y, z, highest x, y, z) of the centres of rows [p0, p1)."""
    box = (np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf)
    for p in range(p0, p1):
        x, y, z, _ = sphere_at(flat, p)
        box = box_with_sphere(box, x, y, z, 0.0)  # (a centre: radius 0, x - 0.0 is x)
    for a in range(6):
        out[b, a] = box[a]


@njit(cache=True, _nrt=False)
def _key_rows(flat, r0: int, t0: int, t1: int, grid, key, count, b: int) -> None:
    """Keys (code << 32 | t) of rows r0 + [t0, t1) on the grid (lowest x, y, z, then the
    scale to 0..1023 per axis), and the sizes of their three digits into block b's three
    count rows of ``count`` (flat: block, digit place, 1 + digit)."""
    spread = _SPREAD
    lx, ly, lz, sx, sy, sz = grid[0], grid[1], grid[2], grid[3], grid[4], grid[5]
    c0 = np.uint64(3 * _DIGITS) * np.uint64(b) + np.uint64(1)
    c1 = c0 + np.uint64(_DIGITS)
    c2 = c1 + np.uint64(_DIGITS)
    for t in range(t0, t1):
        x, y, z, _ = sphere_at(flat, r0 + t)
        c = (spread[min(int((x - lx) * sx), 1023)]
             | (spread[min(int((y - ly) * sy), 1023)] << 1)
             | (spread[min(int((z - lz) * sz), 1023)] << 2))
        key[np.uint64(t)] = (c << 32) | t
        count[c0 + np.uint64(c & 1023)] += 1
        count[c1 + np.uint64((c >> 10) & 1023)] += 1
        count[c2 + np.uint64((c >> 20) & 1023)] += 1


@njit(cache=True, _nrt=False)
def _gather_rows(key, flat, slot, moved, code, r0: int, t0: int, t1: int) -> None:
    """Sorted place t in [t0, t1): its row's sphere into moved[t] (flat), its slot into
    key[t] (read first), its code into code[t]."""
    for t in range(t0, t1):
        u = np.uint64(t)
        v = key[u]
        o = np.uint64(r0) + np.uint64(v & 0xFFFFFFFF)
        f = row_offset(o)
        m = row_offset(u)
        for a in range(4):
            moved[m + np.uint64(a)] = flat[f + np.uint64(a)]
        key[u] = slot[o]
        code[u] = v >> 32


@njit(cache=True, _nrt=False)
def _copy_back(moved, slots, flat, slot, r0: int, t0: int, t1: int) -> None:
    """Sorted places [t0, t1) back into rows r0 + t (``moved`` and ``flat`` flat)."""
    for t in range(t0, t1):
        u = np.uint64(t)
        f = row_offset(r0 + t)
        m = row_offset(u)
        for a in range(4):
            flat[f + np.uint64(a)] = moved[m + np.uint64(a)]
        slot[np.uint64(r0) + u] = slots[u]


@njit(cache=True, inline="always")
def block_span(n: int, nb: int, b: int) -> tuple[int, int]:
    """Block b of nb over [0, n)."""
    return n * b // nb, n * (b + 1) // nb


@njit(cache=True, parallel=True)
def _bounds_blocks(flat, r0: int, n: int, out) -> None:
    nb = out.shape[0]
    for b in prange(nb):
        t0, t1 = block_span(n, nb, b)
        _bounds_rows(flat, r0 + t0, r0 + t1, out, b)


@njit(cache=True, parallel=True)
def _key_blocks(flat, r0: int, n: int, grid, key, count, nb: int) -> None:
    for b in prange(nb):
        t0, t1 = block_span(n, nb, b)
        _key_rows(flat, r0, t0, t1, grid, key, count, b)


@njit(cache=True, parallel=True)
def _gather_blocks(key, flat, slot, moved, code, r0: int, nb: int) -> None:
    n = key.shape[0]
    for b in prange(nb):
        t0, t1 = block_span(n, nb, b)
        _gather_rows(key, flat, slot, moved, code, r0, t0, t1)


@njit(cache=True, parallel=True)
def _copy_blocks(moved, slots, flat, slot, r0: int, nb: int) -> None:
    n = slots.shape[0]
    for b in prange(nb):
        t0, t1 = block_span(n, nb, b)
        _copy_back(moved, slots, flat, slot, r0, t0, t1)


@njit(cache=True)
def _morton_sort(pts, slot, r0: int, r1: int, mem: SnapshotMemory):
    """Reorder packed rows [r0, r1) along the Morton curve of their centres: 10 bits per axis
    over the rows' own bounding box, by three 10-bit radix passes. Returns the sorted codes
    (code[t] for row r0 + t); rows of equal codes keep their order.

    Each key carries its row (code << 32 | row): every pass reads the keys in order and
    writes them to 1,024 running outputs. Sorting an order array and reading
    ``code[order[t]]`` instead was a cache miss per row per pass once the codes outgrew the
    cache (10^6 rows: 110-140 ms of a 180 ms snapshot); numba's argsort, a quicksort, was
    slower still (80 % of refining an unbounded list of 10^5 objects). From
    ``SORT_PARALLEL_MIN`` rows the passes row by row run in blocks on every thread; the
    radix passes stay on one."""
    n = r1 - r0
    nb = SORT_BLOCKS if n >= SORT_PARALLEL_MIN else 1
    flat = pts.reshape(pts.size)  # (see row_offset)
    bounds = np.empty((nb, 6))
    if nb > 1:
        _bounds_blocks(flat, r0, n, bounds)
    else:
        _bounds_rows(flat, r0, r1, bounds, 0)
    grid = np.zeros(6)  # lowest x, y, z, then the scale to 0..1023 per axis
    for a in range(3):
        lo = bounds[:, a].min()
        hi = bounds[:, 3 + a].max()
        grid[a] = lo
        if hi > lo:
            grid[3 + a] = 1023.0 / (hi - lo)
    key = mem.key[:n]
    tmp = mem.spare[:n]
    counts = np.zeros(nb * 3 * _DIGITS, np.int64)  # one pass counts the three digits' sizes
    if nb > 1:
        _key_blocks(flat, r0, n, grid, key, counts, nb)
    else:
        _key_rows(flat, r0, 0, n, grid, key, counts, 0)
    count = counts[:3 * _DIGITS].copy()
    for b in range(1, nb):
        count += counts[3 * _DIGITS * b:3 * _DIGITS * (b + 1)]
    for d in range(3):
        cd = count[d * _DIGITS:(d + 1) * _DIGITS]
        for b in range(1024):
            cd[b + 1] += cd[b]
        shift = 32 + 10 * d
        for t in range(n):
            v = key[np.uint64(t)]
            b = np.uint64((v >> shift) & 1023)
            tmp[np.uint64(cd[b])] = v
            cd[b] += 1
        key, tmp = tmp, key
    moved = mem.moved[:n].reshape(4 * n)
    code = tmp  # (free after the last pass); each key's place then takes its row's slot
    if nb > 1:
        _gather_blocks(key, flat, slot, moved, code, r0, nb)
        _copy_blocks(moved, key, flat, slot, r0, nb)
    else:
        _gather_rows(key, flat, slot, moved, code, r0, 0, n)
        _copy_back(moved, key, flat, slot, r0, 0, n)
    return code


@njit(cache=True)
def _cut(code, c0: int, c1: int) -> int:
    """Where to halve Morton-sorted codes[c0:c1]: at the first code with the highest bit in
    which the range's ends differ (the two halves are then apart across one axis), unless
    that leaves a side under LEAF_ROWS / 4 rows (or all codes are equal): then the middle."""
    mid = (c0 + c1) // 2
    x = code[c0] ^ code[c1 - 1]
    if x == 0:
        return mid
    bit = 0
    while x > 1:
        x >>= 1
        bit += 1
    target = (code[c1 - 1] >> bit) << bit
    cut = c0 + np.searchsorted(code[c0:c1], target)
    least = LEAF_ROWS // 4
    if cut - c0 < least or c1 - cut < least:
        return mid
    return cut


@njit(cache=True)
def refine(sn: TreePairSnapshot, r0: int, r1: int, m: int, sel, mem: SnapshotMemory) -> int:
    """Packed rows [r0, r1) of ``sn``, a long own list, as a kd subtree rooted at node m.

    Sorts the rows along the Morton curve of their centres (one sort), then cuts the range
    where the curve crosses its highest level (:func:`_cut`) until a list holds at most
    LEAF_ROWS objects (and at least LEAF_ROWS / 4: a list of L rows takes at most L / 2
    nodes); boxes are computed on the way up. A structure whose node
    holds many objects (an unsplittable leaf, a view-distance class, the unbounded list) thus
    meets the descent with short lists as any well-split tree does; its own structure is
    untouched. Returns the next free node.
    """
    size, ostart, ocnt, oend = sn.size, sn.ostart, sn.ocnt, sn.oend
    box, obox, mag, nsel_own, nsel_sub = sn.box, sn.obox, sn.mag, sn.nsel_own, sn.nsel_sub
    pts, slot = sn.pts, sn.slot
    filtered = sel.shape[0] > 0
    code = _morton_sort(pts, slot, r0, r1, mem)
    stack = np.empty((200, 3), np.int64)  # depth <= 30 bit cuts + 64 halvings, 2 left each
    stack[0, 0] = r0
    stack[0, 1] = r1
    stack[0, 2] = -1
    top = 1
    while top > 0:
        top -= 1
        a0 = stack[top, 0]
        a1 = stack[top, 1]
        j = stack[top, 2]
        if j >= 0:  # on the way up: both halves are done
            size[j] = m - j
            subtree_box(size, box, obox, j)
            set_mag(box, mag, j)
            if filtered:
                nsel_sub[j] = sum_children_sel(size, nsel_sub, j)
            continue
        j = m
        m += 1
        ostart[j] = a0
        oend[j] = a1
        if a1 - a0 <= LEAF_ROWS:
            ocnt[j] = a1 - a0
            size[j] = 1
            rows_box(pts, a0, a1, obox, j)
            for a in range(6):
                box[j, a] = obox[j, a]
            set_mag(box, mag, j)
            if filtered:
                nsel_own[j] = _count_sel(slot, a0, a1, sel)
                nsel_sub[j] = nsel_own[j]
            continue
        ocnt[j] = 0
        nsel_own[j] = 0
        for a in range(3):
            obox[j, a] = np.inf
            obox[j, 3 + a] = -np.inf
        mid = r0 + _cut(code, a0 - r0, a1 - r0)
        stack[top, 0] = a0
        stack[top, 1] = a1
        stack[top, 2] = j
        stack[top + 1, 0] = mid
        stack[top + 1, 1] = a1
        stack[top + 1, 2] = -1
        stack[top + 2, 0] = a0
        stack[top + 2, 1] = mid
        stack[top + 2, 2] = -1
        top += 3
    return m
