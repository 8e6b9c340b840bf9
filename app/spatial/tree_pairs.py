"""The pair descent of a tree snapshot: every touching pair of a tree's objects, whatever
the tree (the AABB tree and the view distance tree both build a :class:`TreePairSnapshot`
from their own nodes and hand it to :func:`snapshot_pairs`).

A snapshot is a tree in depth-first order with exact boxes: every node's objects packed into
one array (centre, radius, slot), so that a node's own objects are one contiguous range and so
is its whole subtree, and the descent reads spheres sequentially instead of chasing linked
lists through a store; besides the subtree box it keeps the box of each node's *own* objects
(tight for the big objects a non-leafy tree keeps at inner nodes). An own list longer than
REFINE_ABOVE (an unsplittable leaf, a crowd of big objects at an inner node, a view-distance
class of the viewdist tree, its unbounded list) is refined in the snapshot only into a kd
subtree cut along the Morton curve (:func:`refine`), so the descent never meets a long list.

:func:`snapshot_pairs` descends (explicit stack, no recursion). An *item* is either a node's
subtree or a node's own object list (the list acts as a leaf). ``self(n)`` tests n's own list
against itself and against every child subtree, recurses into each child and pairs every two
children whose boxes are within the margin; ``pair(x, y)`` of two items whose boxes overlap
(grown by the margin) splits the bigger subtree into its own list and its children, until
both are lists, which are filtered by the other's box and tested exactly
(:func:`app.spatial.pairs.pair_touch`); small products are tested directly on the packed
ranges.

A snapshot of at least ``PARALLEL_PAIRS_MIN`` objects (:data:`app.parallelism.PARALLEL_MIN`)
is descended on every thread: self(root) is expanded breadth first into about a hundred seed
tasks per thread (independent: together they are the serial descent's task tree, so every
pair is found once), dealt out by their estimated work, and each thread descends its share
with its own stack, pending buffer and output; the outputs are concatenated. Below it the
serial driver runs (waking the workers costs ~0.2 ms).

The helpers of a per-object descent on a live tree (:func:`given_sphere`,
:func:`out_of_reach`, :func:`hit_if_partner`, :func:`push_hits`) are here too: both trees'
pairs of given objects use them.

Node pruning is conservative: boxes are grown by the margin plus a relative pad
(``_REL_PAD`` of the magnitudes involved) so that rounding never drops a pair the exact test
keeps; exactness rests on the per-pair test alone.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from app.geom.predicates import box_point_dist6, box_with_sphere
from app.parallelism import PARALLEL_MIN, threads_for
from app.spatial.pairs import keep, new_pairs, push_pair, slot_pairs_into, slot_pairs_to_ids

_REL_PAD = 1e-9  # node pruning slack, relative to the magnitudes involved
SMALL_SELF = 8  # a subtree of at most this many objects: all its pairs tested directly
SMALL_PAIRS = 64  # two items whose object counts multiply to at most this: tested directly
# An own list longer than REFINE_ABOVE is refined, in the snapshot only, into a kd subtree
# (median cuts across the longest extent of the centres) with lists of at most LEAF_ROWS.
REFINE_ABOVE = 48
LEAF_ROWS = 32
# Room kept free on the task stack: one task pushes at most K(K-1)/2 + 2K tasks (405 for
# the icoseptree's 27 children).
STACK_SLACK = 1024
# The pending-pair buffer (packed rows) and the room it keeps for one batch of direct tests
# (at most REFINE_ABOVE ** 2 rows).
PENDING = 16384
PENDING_ROOM = REFINE_ABOVE * REFINE_ABOVE


class TreePairSnapshot(NamedTuple):
    """A tree in depth-first order for the pair descent (m nodes, total objects).

    Node i's subtree is nodes [i, i + size[i]); its children are i + 1, then each next one
    right after the previous child's subtree. Its own objects are rows [ostart[i],
    ostart[i] + ocnt[i]) of ``pts``/``slot``, its subtree's rows [ostart[i], oend[i]).
    """

    size: np.ndarray  # (m,) nodes in the subtree
    ostart: np.ndarray  # (m,) first packed row of the node's own objects
    ocnt: np.ndarray  # (m,) own objects
    oend: np.ndarray  # (m,) end of the subtree's packed rows
    box: np.ndarray  # (m, 6) exact box of the subtree's spheres (lo xyz, hi xyz)
    obox: np.ndarray  # (m, 6) exact box of the node's own spheres (empty: +inf, -inf)
    mag: np.ndarray  # (m,) largest |coordinate| of the subtree box (for the rounding pad)
    nsel_own: np.ndarray  # (m,) own objects in the ids filter (unused without a filter)
    nsel_sub: np.ndarray  # (m,) subtree objects in the ids filter
    pts: np.ndarray  # (total, 4) packed x, y, z, r
    slot: np.ndarray  # (total,) packed slot


class DescentScratch(NamedTuple):
    """One descent's working arrays (a thread's, in the parallel descent)."""

    rows_a: np.ndarray  # (longest own list,) rows of one side that meet the other's box
    rows_b: np.ndarray  # (longest own list,) the same for the other side
    pend: np.ndarray  # (PENDING, 2) packed row pairs found, not yet flushed to the output
    stack: np.ndarray  # (rows, 2) open tasks (see _descend_steps)


class ThreadScratch(NamedTuple):
    """Every thread's :class:`DescentScratch` arrays (a leading thread axis), its output and
    where it stopped (top, pairs in out, pending pairs)."""

    rows_a: np.ndarray  # (threads, longest own list)
    rows_b: np.ndarray  # (threads, longest own list)
    pend: np.ndarray  # (threads, PENDING, 2)
    stack: np.ndarray  # (threads, rows, 2)
    out: np.ndarray  # (threads, rows, 2) each thread's slot pairs
    state: np.ndarray  # (threads, 3) top, pairs in out, pending pairs


# ---------------------------------------------------------------------- snapshot helpers

class SnapshotMemory(NamedTuple):
    """The arrays snapshots are built in, kept by an index from one pairs query to the next
    (:class:`SnapshotArena`): a snapshot is views of their first rows, and refining sorts in
    ``key`` / ``spare`` / ``moved``. Fresh arrays for a million objects cost a page fault every
    4 KiB, about 2.5 us each on this machine: 30-50 ms of a 330 ms step (10^6, clustered)."""

    arrays: TreePairSnapshot  # node rows and object rows at full size
    key: np.ndarray  # (rows,) int64 sort keys
    spare: np.ndarray  # (rows,) int64: the radix sort's other buffer
    moved: np.ndarray  # (rows, 4) sorted rows before they are copied back


def snapshot_memory(nodes: int, rows: int) -> SnapshotMemory:
    """Uninitialised :class:`SnapshotMemory` for ``nodes`` nodes and ``rows`` objects."""
    m = max(1, nodes)
    r = max(1, rows)
    arrays = TreePairSnapshot(np.empty(m, np.int64), np.empty(m, np.int64),
                              np.empty(m, np.int64), np.empty(m, np.int64),
                              np.empty((m, 6)), np.empty((m, 6)), np.empty(m),
                              np.empty(m, np.int64), np.empty(m, np.int64), np.empty((r, 4)),
                              np.empty(r, np.int64))
    return SnapshotMemory(arrays, np.empty(r, np.int64), np.empty(r, np.int64),
                          np.empty((r, 4)))


class SnapshotArena:
    """An index's :class:`SnapshotMemory`, grown (by half again) when a snapshot needs more.
    One pairs query at a time per index: the next one reuses the same arrays."""

    def __init__(self) -> None:
        self._memory: SnapshotMemory | None = None
        self._outputs: np.ndarray | None = None

    def memory(self, tree_nodes: int, objects: int) -> SnapshotMemory:
        """Room for a snapshot of a tree of ``tree_nodes`` nodes and ``objects`` objects (and
        the nodes refining its lists may add)."""
        nodes = tree_nodes + refine_room(objects)
        mem = self._memory
        if mem is None or mem.arrays.size.shape[0] < nodes or mem.key.shape[0] < objects:
            have = (0, 0) if mem is None else (mem.arrays.size.shape[0], mem.key.shape[0])
            mem = snapshot_memory(max(nodes, have[0] * 3 // 2), max(objects, have[1] * 3 // 2))
            self._memory = mem
        return mem

    def outputs(self, threads: int, rows: int) -> np.ndarray:
        """The parallel descent's outputs (threads, at least ``rows``, 2): the kept ones, of
        the size the last descent grew them to, when they fit."""
        out = self._outputs
        if out is None or out.shape[0] != threads or out.shape[1] < rows:
            out = np.empty((threads, max(1, rows), 2), np.int64)
            self._outputs = out
        return out

    def keep_outputs(self, out: np.ndarray) -> None:
        """Keep the outputs a descent returned (grown, if it had to) for the next one."""
        self._outputs = out


@njit(cache=True)
def new_snapshot(m: int, total: int, mem: SnapshotMemory) -> TreePairSnapshot:
    """A snapshot with room for m nodes and ``total`` objects, cut from ``mem`` (which has
    room: :meth:`SnapshotArena.memory`); a build fills it and returns :func:`snapshot_head` of
    what it used. Only the ids filter's counts start at zero."""
    a = mem.arrays
    if a.size.shape[0] < m or a.pts.shape[0] < total or mem.key.shape[0] < total:
        raise ValueError("snapshot memory too small")
    a.nsel_own[:m] = 0
    a.nsel_sub[:m] = 0
    return snapshot_head(a, m, total)


@njit(cache=True)
def snapshot_head(sn: TreePairSnapshot, m: int, rows: int) -> TreePairSnapshot:
    """The first m nodes and ``rows`` packed objects of a snapshot being built (views)."""
    return TreePairSnapshot(sn.size[:m], sn.ostart[:m], sn.ocnt[:m], sn.oend[:m], sn.box[:m],
                            sn.obox[:m], sn.mag[:m], sn.nsel_own[:m], sn.nsel_sub[:m],
                            sn.pts[:rows], sn.slot[:rows])


@njit(cache=True, _nrt=False)
def set_mag(box, mag, i: int) -> None:
    """mag[i] = the largest |coordinate| of box row i."""
    v = 0.0
    for a in range(6):
        v = max(v, abs(box[i, a]))
    mag[i] = v


@njit(cache=True, _nrt=False)
def sum_children_sel(size, nsel_sub, i: int) -> int:
    """Filtered objects in node i's children's subtrees (each already complete)."""
    t = 0
    c = i + 1
    end = i + size[i]
    while c < end:
        t += nsel_sub[c]
        c += size[c]
    return t


@njit(cache=True, _nrt=False)
def rows_box(pts, r0: int, r1: int, obox, i: int) -> None:
    """obox[i] = the box of the packed spheres [r0, r1) (empty: +inf, -inf), grown in
    locals and written once (:func:`~app.geom.predicates.box_with_sphere`)."""
    box = (np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf)
    for p in range(r0, r1):
        box = box_with_sphere(box, pts[p, 0], pts[p, 1], pts[p, 2], pts[p, 3])
    for a in range(6):
        obox[i, a] = box[a]


@njit(cache=True, _nrt=False)
def subtree_box(size, box, obox, i: int) -> None:
    """box[i] = obox[i] united with the boxes of i's children (each already complete)."""
    for a in range(6):
        box[i, a] = obox[i, a]
    c = i + 1
    end = i + size[i]
    while c < end:
        for a in range(3):
            box[i, a] = min(box[i, a], box[c, a])
            box[i, 3 + a] = max(box[i, 3 + a], box[c, 3 + a])
        c += size[c]


@njit(cache=True, inline="always")
def pack_row(pts, slot, op: int, s: int, x: float, y: float, z: float, r: float) -> int:
    """Packed row op = slot s's sphere (x, y, z, r); returns the next row."""
    pts[op, 0] = x
    pts[op, 1] = y
    pts[op, 2] = z
    pts[op, 3] = r
    slot[op] = s
    return op + 1


@njit(cache=True, inline="always")
def hit_if_partner(hits, c: int, s: int, q: int, sel, qx: float, qy: float, qz: float,
                   reach: float, x: float, y: float, z: float) -> int:
    """hits[c] = s; returns c + 1 if s is a partner of the given object q, else c.

    A partner's centre (x, y, z) is within ``reach`` (both radii plus the margin) of q's, and
    it is neither q nor a given object of smaller slot (that pair is kept from its side). A
    branch-free compaction: the per-node lists are short and their hits unpredictable.
    """
    dx = qx - x
    dy = qy - y
    dz = qz - z
    hits[c] = s
    return c + ((s != q) & ~(sel[s] & (s < q)) & (math.sqrt(dx * dx + dy * dy + dz * dz)
                                                 <= reach))


@njit(cache=True, inline="always")
def given_sphere(centers, radii, q: int, margin: float):
    """A given object's (qx, qy, qz, qr), its reach ``base`` (qr plus the margin) and the
    magnitude ``qmag`` its rounding pad scales with."""
    qx, qy, qz, qr = centers[q, 0], centers[q, 1], centers[q, 2], radii[q]
    base = qr + margin
    return qx, qy, qz, qr, base, 1.0 + max(abs(qx), abs(qy), abs(qz)) + base


@njit(cache=True, inline="always")
def out_of_reach(lo, hi, n: int, qx: float, qy: float, qz: float, base: float,
                 qmag: float) -> bool:
    """Box row n of lo/hi is farther than ``base`` from (qx, qy, qz), by more than the
    rounding pad: no object in it can be a partner."""
    nmag = max(abs(lo[n, 0]), abs(lo[n, 1]), abs(lo[n, 2]),
               abs(hi[n, 0]), abs(hi[n, 1]), abs(hi[n, 2]))
    return box_point_dist6(lo[n, 0], lo[n, 1], lo[n, 2], hi[n, 0], hi[n, 1], hi[n, 2],
                           qx, qy, qz) > base + _REL_PAD * (qmag + nmag)


@njit(cache=True, inline="always")
def push_hits(out, k: int, q: int, hits, c: int):
    """Append the pairs (q, hits[u]) for u < c to ``out`` (grown as needed); (out, k)."""
    for u in range(c):
        out = push_pair(out, k, q, hits[u])
        k += 1
    return out, k


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


@njit(cache=True)
def refine_room(total: int) -> int:
    """Snapshot nodes that refining lists of ``total`` objects may add (see :func:`refine`)."""
    return total // 2 + 16  # every refined list of L rows takes at most L / 2 nodes


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


# The per-object loops (the Morton sort's row passes, the descent's tests) read the packed
# rows as one flat array (``flat``: pts.reshape, made once per sort or descent) at unsigned
# offsets 4 * row + axis, and write their outputs the same way: indexed pts[p, a], the row
# stride is a run-time value to the compiler and every index is checked for wrapping below
# zero. That took a sixth of the descent (serial, 10^5 objects: uniform 15.0 -> 12.8 ms,
# clustered 17.5 -> 14.9) and of the sort (10^6 clustered: 32-33 -> 27-28 ms); the
# arithmetic is unchanged, and so is every answer. Reshaping inside each helper instead
# called numba's reshape routine at every call and was slower than before.

@njit(cache=True, inline="always")
def _row(p) -> np.uint64:
    """Offset of packed row p's x in the flat rows (y, z, r follow)."""
    return np.uint64(p) * np.uint64(4)


@njit(cache=True, inline="always")
def _sphere_at(flat, p: int) -> tuple[float, float, float, float]:
    """Packed row p's sphere (x, y, z, r) from the flat rows."""
    f = _row(p)
    return flat[f], flat[f + np.uint64(1)], flat[f + np.uint64(2)], flat[f + np.uint64(3)]


#: A digit's count row in the Morton sort: 1,024 digits and a leading zero for the prefix sums.
_DIGITS = 1025


@njit(cache=True, _nrt=False)
def _bounds_rows(flat, p0: int, p1: int, out, b: int) -> None:
    """out[b] = (lowest x, y, z, highest x, y, z) of the centres of rows [p0, p1)."""
    box = (np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf)
    for p in range(p0, p1):
        x, y, z, _ = _sphere_at(flat, p)
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
        x, y, z, _ = _sphere_at(flat, r0 + t)
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
        f = _row(o)
        m = _row(u)
        for a in range(4):
            moved[m + np.uint64(a)] = flat[f + np.uint64(a)]
        key[u] = slot[o]
        code[u] = v >> 32


@njit(cache=True, _nrt=False)
def _copy_back(moved, slots, flat, slot, r0: int, t0: int, t1: int) -> None:
    """Sorted places [t0, t1) back into rows r0 + t (``moved`` and ``flat`` flat)."""
    for t in range(t0, t1):
        u = np.uint64(t)
        f = _row(r0 + t)
        m = _row(u)
        for a in range(4):
            flat[f + np.uint64(a)] = moved[m + np.uint64(a)]
        slot[np.uint64(r0) + u] = slots[u]


@njit(cache=True, inline="always")
def _block(n: int, nb: int, b: int) -> tuple[int, int]:
    """Block b of nb over [0, n)."""
    return n * b // nb, n * (b + 1) // nb


@njit(cache=True, parallel=True)
def _bounds_blocks(flat, r0: int, n: int, out) -> None:
    nb = out.shape[0]
    for b in prange(nb):
        t0, t1 = _block(n, nb, b)
        _bounds_rows(flat, r0 + t0, r0 + t1, out, b)


@njit(cache=True, parallel=True)
def _key_blocks(flat, r0: int, n: int, grid, key, count, nb: int) -> None:
    for b in prange(nb):
        t0, t1 = _block(n, nb, b)
        _key_rows(flat, r0, t0, t1, grid, key, count, b)


@njit(cache=True, parallel=True)
def _gather_blocks(key, flat, slot, moved, code, r0: int, nb: int) -> None:
    n = key.shape[0]
    for b in prange(nb):
        t0, t1 = _block(n, nb, b)
        _gather_rows(key, flat, slot, moved, code, r0, t0, t1)


@njit(cache=True, parallel=True)
def _copy_blocks(moved, slots, flat, slot, r0: int, nb: int) -> None:
    n = slots.shape[0]
    for b in prange(nb):
        t0, t1 = _block(n, nb, b)
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
    flat = pts.reshape(pts.size)  # (see _row)
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
    return margin + _REL_PAD * (1.0 + max(mag[i], mag[j]) + margin)


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
        f = _row(p)
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
    :func:`_descend_steps`)."""
    return (c << 1) | (1 if size[c] == 1 else 0)


@njit(cache=True, inline="always")
def _pend_touch(flat, p: int, ax: float, ay: float, az: float, ar: float, q: int,
                margin: float, pf, npend: int) -> int:
    """Write (p, q) as pending pair ``npend`` (``pf``: the pending buffer, flat); returns
    npend + 1 if row q touches row p's sphere (ax, ay, az, ar), else npend.

    The exact test in :func:`~app.spatial.pairs.pair_touch`'s arithmetic, with a branch-free
    compaction (appending to the growable output inside the loop made it 7x slower).
    """
    f = _row(q)
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
    ax, ay, az, ar = _sphere_at(flat, p)
    for q in range(q0, q1):
        npend = _pend_touch(flat, p, ax, ay, az, ar, q, margin, pf, npend)
    return npend


@njit(cache=True, _nrt=False)
def _touch_rows(flat, p: int, rows, n: int, margin: float, pf, npend: int) -> int:
    """Like :func:`_touch_range` over the rows ``rows[:n]``."""
    ax, ay, az, ar = _sphere_at(flat, p)
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
def _flush(pend, npend: int, slot, sel, out, k: int):
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
def _longest_own(sn: TreePairSnapshot) -> int:
    """The longest own list of the snapshot (at least 1): the room of the filtered rows."""
    longest = 1
    ocnt = sn.ocnt
    for i in range(ocnt.shape[0]):
        longest = max(longest, ocnt[i])
    return longest


@njit(cache=True)
def _descend(sn: TreePairSnapshot, margin: float, sel):
    """:func:`snapshot_pairs` on one thread (see the module docstring): the driver of
    :func:`_descend_steps`, which stops whenever its task stack or pending buffer runs low;
    the driver flushes and grows them and resumes it."""
    out = new_pairs(sn.pts.shape[0])
    k = np.int64(0)
    if sn.size.shape[0] == 0:
        return out[:0]
    longest = _longest_own(sn)
    scratch = DescentScratch(np.empty(longest, np.int64), np.empty(longest, np.int64),
                             np.empty((PENDING, 2), np.int64),
                             np.empty((4 * STACK_SLACK, 2), np.int64))
    scratch.stack[0, 0] = 0
    scratch.stack[0, 1] = -1
    top = np.int64(1)
    while True:
        top, npend = _descend_steps(sn, margin, sel.shape[0] > 0, scratch, top)
        out, k = _flush(scratch.pend, npend, sn.slot, sel, out, k)
        if top == 0:
            return out[:k]
        stack = scratch.stack
        if top + STACK_SLACK > stack.shape[0]:
            bigger = np.empty((2 * stack.shape[0], 2), np.int64)
            bigger[:top] = stack[:top]
            scratch = DescentScratch(scratch.rows_a, scratch.rows_b, scratch.pend, bigger)


@njit(cache=True, _nrt=False)
def _descend_steps(sn: TreePairSnapshot, margin: float, filtered: bool,
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
    flat = pts.reshape(pts.size)  # (see _row)
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


# ---------------------------------------------------------------------- both cores

#: Snapshots of at least this many objects run the descent on every thread (tests lower it).
PARALLEL_PAIRS_MIN = PARALLEL_MIN
#: Seed tasks per thread that the breadth-first expansion of the root aims at. Measured when
#: the tasks were dealt by object count (before :func:`_seed_weights` weighed pairs by their
#: overlap): with 48 a thread, one thread of two got 10.2 ms of a clustered 10^5 descent and
#: the other 5.6; with 128 about even (8.1 / 7.5 at 256), the parallel descent 11.7 -> 8.4
#: ms; on 28 Nov 256, 512 and 1,024 moved the balance by chance (not measured again since).
SEEDS_PER_THREAD = 128


def snapshot_pairs(sn: TreePairSnapshot, margin: float, sel: np.ndarray,
                   arena: SnapshotArena | None, ids: np.ndarray) -> np.ndarray:
    """Every touching pair of the snapshot's objects as id pairs, the smaller first (``ids``:
    the store's id per slot; the contract's answer), int64 (K, 2).

    ``sel``: the ids filter of :func:`app.spatial.pairs.selection` (empty: every pair). A
    snapshot of at least PARALLEL_PAIRS_MIN objects runs :func:`descend_parallel` on every
    thread (its per-thread outputs kept in ``arena`` when given), a smaller one the serial
    :func:`_descend`.
    """
    n = sn.pts.shape[0]
    if n < PARALLEL_PAIRS_MIN:
        return slot_pairs_to_ids(_descend(sn, margin, sel), ids)
    with threads_for(n):
        nt = max(2, numba.get_num_threads())
        return descend_parallel(sn, margin, sel, nt, SEEDS_PER_THREAD * nt, n // nt + 1024,
                                3 * STACK_SLACK, ids, arena)


def descend_parallel(sn: TreePairSnapshot, margin: float, sel: np.ndarray, nt: int, want: int,
                     out_rows: int, stack_rows: int, ids: np.ndarray,
                     arena: SnapshotArena | None = None) -> np.ndarray:
    """:func:`_descend_parallel` on ``nt`` threads, each with an output of at least
    ``out_rows`` rows to start with (the arena's, grown and kept, when given), their slot
    pairs joined into one array of id pairs (:func:`_join_ids`). The outputs and the answer
    are numpy's arrays: allocated inside a kernel, the 50-80 MB of two million pairs cost a
    page fault every 4 KiB."""
    out = (arena.outputs(nt, out_rows) if arena is not None
           else np.empty((nt, max(1, out_rows), 2), np.int64))
    first, out, state = _descend_parallel(sn, margin, sel, out, want, stack_rows)
    if arena is not None:
        arena.keep_outputs(out)
    res = np.empty((first.shape[0] + int(state[:, 1].sum()), 2), np.int64)
    _join_ids(first, out, state, ids, res)
    return res


#: Blocks each of :func:`_join_ids`'s sources is cut into (dealt to the threads by prange).
JOIN_BLOCKS = 4


@njit(cache=True, parallel=True)
def _join_ids(first, out, state, ids, res) -> None:
    """``first``, then each thread's ``state[w, 1]`` pairs of ``out[w]``, into ``res``, each
    slot pair written as its ids, the smaller first (:func:`app.spatial.pairs.slot_pairs_to_ids`'s
    loop), in blocks on every thread: the answer in one pass. A join of slot pairs and then a
    separate mapping pass wrote two fresh arrays (a page fault every 4 KiB each): 0.5 + 0.7
    ms of a 10^5-object step (two hundred thousand pairs) against 0.7-0.8 ms (0.45 on its own,
    out of the step)."""
    nt = out.shape[0]
    at = np.empty(nt + 1, np.int64)  # where each source's pairs start in res
    at[0] = 0
    at[1] = first.shape[0]
    for w in range(nt - 1):
        at[w + 2] = at[w + 1] + state[w, 1]
    for t in prange((nt + 1) * JOIN_BLOCKS):
        src = t // JOIN_BLOCKS
        b = t % JOIN_BLOCKS
        if src == 0:
            k0, k1 = _block(first.shape[0], JOIN_BLOCKS, b)
            slot_pairs_into(first[k0:k1], ids, res[k0:k1])
        else:
            k0, k1 = _block(state[src - 1, 1], JOIN_BLOCKS, b)
            r0 = at[src] + k0
            slot_pairs_into(out[src - 1, k0:k1], ids, res[r0:r0 + k1 - k0])


@njit(cache=True)
def _seed_tasks(sn: TreePairSnapshot, margin: float, sel, want: int):
    """Expand self(root) breadth first, one task at a time, until at least ``want`` tasks
    are open (or none is): (open tasks (T, 2), pairs found on the way (K, 2)). Each task is
    run alone on a stack with room for one task's children only, so it stops right after it
    (or, with a single child pushed, after that child too)."""
    out = new_pairs(1024)
    k = np.int64(0)
    filtered = sel.shape[0] > 0
    longest = _longest_own(sn)
    scratch = DescentScratch(np.empty(longest, np.int64), np.empty(longest, np.int64),
                             np.empty((PENDING, 2), np.int64),
                             np.empty((STACK_SLACK + 1, 2), np.int64))
    one = scratch.stack
    cur = np.empty((1, 2), np.int64)
    cur[0, 0] = 0
    cur[0, 1] = -1
    ncur = 1
    while 0 < ncur < want:
        nxt = np.empty((16, 2), np.int64)
        nn = 0
        for t in range(ncur):
            one[0, 0] = cur[t, 0]
            one[0, 1] = cur[t, 1]
            top, npend = _descend_steps(sn, margin, filtered, scratch, np.int64(1))
            out, k = _flush(scratch.pend, npend, sn.slot, sel, out, k)
            if nn + top > nxt.shape[0]:
                bigger = np.empty((2 * (nn + top), 2), np.int64)
                bigger[:nn] = nxt[:nn]
                nxt = bigger
            nxt[nn:nn + top] = one[:top]
            nn += top
        cur = nxt
        ncur = nn
    return cur[:ncur], out[:k]


@njit(cache=True, _nrt=False)
def _flush_into(pend, npend: int, slot, sel, out, k: int) -> int:
    """:func:`_flush` into ``out`` with room for every pending pair; returns the new k."""
    filtered = sel.shape[0] > 0
    for t in range(npend):
        a = slot[pend[t, 0]]
        b = slot[pend[t, 1]]
        if not filtered or sel[a] or sel[b]:
            out[k, 0] = a
            out[k, 1] = b
            k += 1
    return k


@njit(cache=True, _nrt=False)
def _worker(sn: TreePairSnapshot, margin: float, sel, scratch: DescentScratch, out,
            state) -> None:
    """One thread's descent of the tasks on its ``scratch.stack``, resumed from ``state``
    (top, pairs in ``out``, pending pairs); stops when done or when its stack or output
    needs room (the driver grows them and calls again)."""
    filtered = sel.shape[0] > 0
    slot = sn.slot
    pend = scratch.pend
    stack = scratch.stack
    top = state[0]
    k = state[1]
    npend = state[2]
    while True:
        if npend > 0:
            if k + npend > out.shape[0]:
                break
            k = _flush_into(pend, npend, slot, sel, out, k)
            npend = np.int64(0)
        if top == 0 or top + STACK_SLACK > stack.shape[0]:
            break
        top, npend = _descend_steps(sn, margin, filtered, scratch, top)
    state[0] = top
    state[1] = k
    state[2] = npend


@njit(cache=True, parallel=True)
def _run_workers(sn: TreePairSnapshot, margin: float, sel, work: ThreadScratch) -> None:
    """:func:`_worker` of every thread, each on its own buffers."""
    for w in prange(work.state.shape[0]):
        _worker(sn, margin, sel, DescentScratch(work.rows_a[w], work.rows_b[w], work.pend[w],
                                                work.stack[w]), work.out[w], work.state[w])


@njit(cache=True, _nrt=False)
def _share_within(b, i: int, c, j: int) -> float:
    """The share of box row i of b's volume inside box row j of c (1 for a box without
    volume: it counts whole)."""
    vol = 1.0
    ov = 1.0
    for a in range(3):
        vol *= b[i, 3 + a] - b[i, a]
        ov *= max(0.0, min(b[i, 3 + a], c[j, 3 + a]) - max(b[i, a], c[j, a]))
    return 1.0 if not vol > 0.0 else min(1.0, ov / vol)


@njit(cache=True)
def _seed_weights(sn: TreePairSnapshot, seeds):
    """Each seed task's estimated work, the size the tasks are dealt out by: a self task's
    subtree objects; a pair's objects inside the overlap of its two items' boxes (each
    side's count times the share of its box the other's covers), plus one.

    A pair task's work lies where its items meet: dealt by the two items' whole counts, a
    clustered snapshot's threads got 55-65 % and 35-45 % of the work (10^5 and 10^6, three
    steps each, each seed's tests counted alone); by the overlap, 50-52 % (uniform 50-52 %
    either way)."""
    ostart, ocnt, oend, box, obox = sn.ostart, sn.ocnt, sn.oend, sn.box, sn.obox
    ns = seeds.shape[0]
    weight = np.empty(ns)
    for t in range(ns):
        a = seeds[t, 0]
        b = seeds[t, 1]
        if b < 0:
            weight[t] = oend[a] - ostart[a]
            continue
        i = a >> 1
        j = b >> 1
        a_own = (a & 1) == 1
        b_own = (b & 1) == 1
        na = ocnt[i] if a_own else oend[i] - ostart[i]
        nb = ocnt[j] if b_own else oend[j] - ostart[j]
        bi = obox if a_own else box
        bj = obox if b_own else box
        weight[t] = 1.0 + na * _share_within(bi, i, bj, j) + nb * _share_within(bj, j, bi, i)
    return weight


@njit(cache=True)
def _descend_parallel(sn: TreePairSnapshot, margin: float, sel, out, want: int,
                      stack_rows: int):
    """:func:`_descend` on one thread per row of ``out``: self(root) expanded breadth first
    into ``want`` or more independent seed tasks (:func:`_seed_tasks`), dealt out in a snake
    over their sizes (largest first) to the threads, which descend them independently, each
    with its own stack, pending buffer and output (grown between rounds when one runs short).
    The tasks partition the serial descent's: the same pairs. Returns (the pairs found while
    seeding, the outputs (grown or ``out``), state: row w's pairs are out[w, :state[w, 1]]).

    ``out`` (threads, rows, 2) / ``stack_rows``: each thread's first output / free stack room
    (tests make them small to exercise the growing)."""
    nt = out.shape[0]
    state = np.zeros((nt, 3), np.int64)
    if sn.size.shape[0] == 0:
        return new_pairs(0)[:0], out, state
    seeds, first = _seed_tasks(sn, margin, sel, want)
    ns = seeds.shape[0]
    order = np.argsort(-_seed_weights(sn, seeds), kind="mergesort")
    longest = _longest_own(sn)
    stack = np.empty((nt, STACK_SLACK + max(1, stack_rows) + ns // nt + 1, 2), np.int64)
    for u in range(ns):  # snake: 0, 1, ..., nt-1, nt-1, ..., 0, 0, 1, ...
        r = u % (2 * nt)
        w = r if r < nt else 2 * nt - 1 - r
        t = order[u]
        stack[w, state[w, 0], 0] = seeds[t, 0]
        stack[w, state[w, 0], 1] = seeds[t, 1]
        state[w, 0] += 1
    # the tasks are pushed largest first: the stack runs them last, small ones fill it first
    work = ThreadScratch(np.empty((nt, longest), np.int64), np.empty((nt, longest), np.int64),
                         np.empty((nt, PENDING, 2), np.int64), stack, out, state)
    while True:
        _run_workers(sn, margin, sel, work)
        stack = work.stack
        out = work.out
        need_stack = False
        need_out = False
        want_rows = 2 * out.shape[1]
        for w in range(nt):
            if state[w, 2] > 0 and state[w, 1] + state[w, 2] > out.shape[1]:
                need_out = True
                want_rows = max(want_rows, state[w, 1] + state[w, 2])
            elif state[w, 0] > 0:
                need_stack = True
        if not need_stack and not need_out:
            break
        if need_stack:
            bigger = np.empty((nt, 2 * stack.shape[1], 2), np.int64)
            for w in range(nt):
                bigger[w, :state[w, 0]] = stack[w, :state[w, 0]]
            stack = bigger
        if need_out:
            grown = np.empty((nt, want_rows, 2), np.int64)
            for w in range(nt):
                grown[w, :state[w, 1]] = out[w, :state[w, 1]]
            out = grown
        work = ThreadScratch(work.rows_a, work.rows_b, work.pend, stack, out, state)
    return first, work.out, state
