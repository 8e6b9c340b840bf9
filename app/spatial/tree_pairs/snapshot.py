"""A tree snapshot for the pair descent (:class:`TreePairSnapshot`): the arrays it is built in
(kept by an index from one pairs query to the next), the helpers the trees' builders call
per node and per object, and the packed rows' layout the descent and the sort read.

Also the helpers of a per-object descent on a live tree (:func:`given_sphere`,
:func:`out_of_reach`, :func:`hit_if_partner`, :func:`push_hits`): both trees' pairs of given
objects use them.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from app.geom.predicates import box_point_dist6, box_with_sphere
from app.spatial.pairs import push_pair

REL_PAD = 1e-9  # node pruning slack, relative to the magnitudes involved
# An own list longer than REFINE_ABOVE is refined, in the snapshot only, into a kd subtree
# (median cuts across the longest extent of the centres) with lists of at most
# ``refine.LEAF_ROWS``.
REFINE_ABOVE = 48


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
                           qx, qy, qz) > base + REL_PAD * (qmag + nmag)


@njit(cache=True, inline="always")
def push_hits(out, k: int, q: int, hits, c: int):
    """Append the pairs (q, hits[u]) for u < c to ``out`` (grown as needed); (out, k)."""
    for u in range(c):
        out = push_pair(out, k, q, hits[u])
        k += 1
    return out, k


@njit(cache=True)
def refine_room(total: int) -> int:
    """Snapshot nodes that refining lists of ``total`` objects may add (see
    :func:`.refine.refine`)."""
    return total // 2 + 16  # every refined list of L rows takes at most L / 2 nodes


# The per-object loops (the Morton sort's row passes, the descent's tests) read the packed
# rows as one flat array (``flat``: pts.reshape, made once per sort or descent) at unsigned
# offsets 4 * row + axis, and write their outputs the same way: indexed pts[p, a], the row
# stride is a run-time value to the compiler and every index is checked for wrapping below
# zero. That took a sixth of the descent (serial, 10^5 objects: uniform 15.0 -> 12.8 ms,
# clustered 17.5 -> 14.9) and of the sort (10^6 clustered: 32-33 -> 27-28 ms); the
# arithmetic is unchanged, and so is every answer. Reshaping inside each helper instead
# called numba's reshape routine at every call and was slower than before.

@njit(cache=True, inline="always")
def row_offset(p) -> np.uint64:
    """Offset of packed row p's x in the flat rows (y, z, r follow)."""
    return np.uint64(p) * np.uint64(4)


@njit(cache=True, inline="always")
def sphere_at(flat, p: int) -> tuple[float, float, float, float]:
    """Packed row p's sphere (x, y, z, r) from the flat rows."""
    f = row_offset(p)
    return flat[f], flat[f + np.uint64(1)], flat[f + np.uint64(2)], flat[f + np.uint64(3)]
