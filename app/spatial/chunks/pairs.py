"""The chunked layout's collision broad-phase: chunk boxes against chunk boxes, then lanes.

The implicit 16-ary tree is descended node pair by node pair (a node with itself, and two
nodes whose boxes come within the margin of each other); every pair of chunks reached runs
the branch-free float32 lane test, 64 lanes at a time, and the few lanes it lets through are
decided in float64 by the contract's test (:func:`app.spatial.pairs.pair_touch`).

The float32 test is conservative: its threshold is widened by :func:`lane_tolerance`, many
float32 roundings of the largest coordinate, radius and margin, so it never drops a pair the
float64 test accepts. Holes carry radius ``-inf`` and fail it without a branch. Movers need
nothing of their own: the awake chunks' boxes are kept tight after every batch, and boxes
hold every live sphere below them at all times. In slot order (most objects move every
frame) every box of the layout is open, and the descent runs over a :class:`SlotOrderView`
instead: the live objects kept in curve order for pairs alone, gathered and refit per query,
re-sorted when its chunks have swollen.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from app.parallelism import threads_for
from app.spatial.chunks.layout import (
    CHUNK,
    FANOUT,
    HI,
    LO,
    NO_POS,
    Tree,
    curve_order,
    mean_extent,
    new_tree,
    pad_for,
    refit_chunks,
    refit_upper,
)
from app.spatial.moves import SphereRecords
from app.spatial.pairs import (
    grown_pairs,
    keep,
    new_pairs,
    pair_touch,
    push_pair,
    selection,
)
from app.spatial.scan import spheres32, store32

#: Re-sort the slot-order view when its chunks' mean extent has grown this much since its sort
#: (the layout's own awake region uses the same rule).
RESORT_GROWTH = 1.6

_U32 = 2.0 ** -24
#: float32 roundings of the largest term the lane threshold allows (a wide margin: the lane
#: test's own error is below about ten).
_LANE_ROUNDINGS = 64.0
_U64 = 2.0 ** -53


def lane_tolerance(max_abs: float, max_r: float, margin: float) -> float:
    """Widening of the float32 lane threshold that keeps it conservative (see module doc);
    at least 1e-18, so that its square never underflows in float32 (min normal 1.2e-38)."""
    return _LANE_ROUNDINGS * _U32 * (max_abs + max_r + margin) + 1e-18


def node_slack(max_abs: float, max_r: float, margin: float) -> float:
    """Widening of the box-against-box test: the boxes' float32 padding and float64 roundings."""
    return 2.0 * pad_for(max_abs, max_r) + 16.0 * _U64 * (max_abs + max_r + margin)


@njit(cache=True)
def mark_nodes(tree: Tree, positions: np.ndarray) -> np.ndarray:
    """Per node: whether a selected object (at ``positions``) lies below it."""
    marked = np.zeros(tree.count.shape[0], dtype=np.bool_)
    for i in range(positions.shape[0]):
        local = positions[i] // CHUNK
        for lv in range(tree.loff.shape[0] - 1):
            marked[tree.loff[lv] + local] = True
            local //= FANOUT
    return marked


@njit(cache=True, inline="always")
def _boxes_near(box, g: int, h: int, reach: float) -> bool:
    """Whether the boxes of nodes g and h are within ``reach`` of each other on every axis."""
    return not ((box[LO, g] > box[HI, h] + reach) | (box[LO, h] > box[HI, g] + reach)
                | (box[LO + 1, g] > box[HI + 1, h] + reach)
                | (box[LO + 1, h] > box[HI + 1, g] + reach)
                | (box[LO + 2, g] > box[HI + 2, h] + reach)
                | (box[LO + 2, h] > box[HI + 2, g] + reach))


@njit(cache=True, inline="always")
def _near_children(box, count, k0: int, k1: int, other: int, reach: float, into) -> int:
    """The non-empty nodes of ``k0 .. k1-1`` whose box comes within reach of node
    ``other``'s, into ``into``; returns how many."""
    n = 0
    for k in range(k0, k1):
        if count[k] > 0 and _boxes_near(box, k, other, reach):
            into[n] = k
            n += 1
    return n


@njit(cache=True)
def chunk_pairs(box, count, loff, marked, reach: float) -> np.ndarray:
    """The pairs (c, d), c <= d, of chunks whose boxes, and all the boxes above, come within
    ``reach`` of each other: a node-against-node descent of the implicit tree (every chunk is
    at the same depth). A node pair's children are first cut to those near the other node's
    box, then paired. ``marked`` (empty: no filter): only pairs with a marked node.

    Takes the tree's arrays, not the ``Tree``: a named tuple read in the inner loop cost 10x.
    """
    nodes = new_pairs(256)
    sp = 0
    out = new_pairs(loff[1])
    k = 0
    filtered = marked.shape[0] > 0
    top = loff.shape[0] - 2
    for g in range(loff[top], loff[top + 1]):
        for h in range(g, loff[top + 1]):
            if count[g] > 0 and count[h] > 0 and _boxes_near(box, g, h, reach) and (
                    not filtered or marked[g] or marked[h]):
                nodes = push_pair(nodes, sp, g, h)
                sp += 1
    ga = np.empty(FANOUT, np.int64)
    hb = np.empty(FANOUT, np.int64)
    while sp > 0:
        sp -= 1
        g = nodes[sp, 0]
        h = nodes[sp, 1]
        lv = 0
        while g >= loff[lv + 1]:
            lv += 1
        if lv == 0:
            out = push_pair(out, k, g, h)
            k += 1
            continue
        below = loff[lv - 1]
        g0 = below + (g - loff[lv]) * FANOUT
        h0 = below + (h - loff[lv]) * FANOUT
        na = _near_children(box, count, g0, min(g0 + FANOUT, loff[lv]), h, reach, ga)
        nb = na
        if g != h:
            nb = _near_children(box, count, h0, min(h0 + FANOUT, loff[lv]), g, reach, hb)
        for i in range(na):
            a = ga[i]
            for j in range(i if g == h else 0, nb):
                b = ga[j] if g == h else hb[j]
                if _boxes_near(box, a, b, reach) and (
                        not filtered or marked[a] or marked[b]):
                    nodes = push_pair(nodes, sp, a, b)
                    sp += 1
    return out[:k]


class ChunkReach(NamedTuple):
    """How near two spheres must come to pair (``margin``), and the widenings that keep the
    float32 and box tests conservative: ``reach`` (margin plus :func:`node_slack`) for boxes,
    ``tol`` (:func:`lane_tolerance`) for lanes."""

    margin: float
    reach: float
    tol: float


@njit(cache=True)
def query_pairs(tree: Tree, rec: SphereRecords, near: ChunkReach, sel, marked) -> np.ndarray:
    """Touching slot pairs (K, 2) of the layout (see the module docstring).

    ``rec``: the float32 records by position and the float64 spheres by slot; ``sel``: the
    ids filter by slot (empty: none); ``marked``: :func:`mark_nodes` of it (empty: none).
    """
    chunks = chunk_pairs(tree.box, tree.count, tree.loff, marked, near.reach)
    hit = np.empty(CHUNK, np.uint8)
    out = new_pairs(chunks.shape[0] * 4)
    at = (0, 0, 0)
    while True:  # the lane pass stops before overflowing the buffer; grow it and go on
        at = _lane_pairs(chunks, at, tree.box, rec, near, sel, hit, out)
        if at[1] >= chunks.shape[0]:
            return out[:at[0]]
        out = grown_pairs(out)  # (doubled: it holds one lane's hits, at most 64)


@njit(cache=True)
def _lane_pairs(chunks, at, box, rec: SphereRecords, near: ChunkReach, sel, hit, out):
    """The lanes of the chunk pairs from ``at`` = (pairs written, chunk pair, lane) on, pairs
    written at ``out[k]``; returns where it stopped in the same form: the chunk pair is the
    number of chunk pairs when done, else where the next lane's hits would not fit (the
    caller grows ``out``: a function that reassigns it does not get its lane loop
    vectorised). The records' fields are taken out once here: the loops read plain arrays."""
    k, q0, i0 = at
    x = rec.s32.x
    y = rec.s32.y
    z = rec.s32.z
    r = rec.s32.r
    pos_slot = rec.pos_slot
    centers = rec.store_c
    radii = rec.store_r
    margin = near.margin
    reach = near.reach
    tol = near.tol
    mt = np.float32(margin + tol)
    for q in range(q0, chunks.shape[0]):
        c = chunks[q, 0]
        d = chunks[q, 1]
        same = c == d
        pc = c * CHUNK
        pd = d * CHUNK
        dlx = box[LO, d]
        dly = box[LO + 1, d]
        dlz = box[LO + 2, d]
        dhx = box[HI, d]
        dhy = box[HI + 1, d]
        dhz = box[HI + 2, d]
        for i in range(i0 if q == q0 else 0, CHUNK):
            p = pc + i
            ri = r[p]
            if ri == -np.inf:
                continue
            xi = x[p]
            yi = y[p]
            zi = z[p]
            # The lane's reach against the other chunk's box (which holds all its spheres).
            ext = np.float64(ri) + reach + tol
            if ((xi - ext > dhx) | (xi + ext < dlx) | (yi - ext > dhy) | (yi + ext < dly)
                    | (zi - ext > dhz) | (zi + ext < dlz)):
                continue
            j0 = i + 1 if same else 0
            n = _lanes(x, y, z, r, pd, j0, xi, yi, zi, ri + mt, hit)
            if n == 0:
                continue
            if k + n > out.shape[0]:
                return k, q, i
            a = pos_slot[p]
            ax = centers[a, 0]
            ay = centers[a, 1]
            az = centers[a, 2]
            ar = radii[a]
            for j in range(j0, CHUNK):
                if hit[j - j0]:
                    b = pos_slot[pd + j]
                    if keep(sel, a, b) and pair_touch(ax, ay, az, ar, centers[b, 0],
                                                      centers[b, 1], centers[b, 2], radii[b],
                                                      margin):
                        out[k, 0] = a
                        out[k, 1] = b
                        k += 1
    return k, chunks.shape[0], 0


@njit(cache=True, inline="always")
def _lanes(x, y, z, r, p0: int, j0: int, xi, yi, zi, thr_i, hit) -> int:
    """The branch-free float32 test of one sphere against lanes ``j0 ..`` of the chunk at
    ``p0``: ``hit[j - j0]`` (bytes from index 0: the loop vectorises) and their count.
    ``thr_i`` is the sphere's radius plus the widened margin; a hole's radius (-inf) makes
    the threshold negative, which fails."""
    n = 0
    base = np.uint64(p0 + j0)  # unsigned: no negative-index wraparound, the loop vectorises
    for j in range(np.uint64(CHUNK - j0)):
        p = base + j
        dx = xi - x[p]
        dy = yi - y[p]
        dz = zi - z[p]
        t = thr_i + r[p]
        h = np.uint8((dx * dx + dy * dy + dz * dz <= t * t) & (t >= np.float32(0.0)))
        hit[j] = h
        n += h
    return n


class SlotOrderView:
    """Slot order's stand-in layout for pairs: the live slots in curve order, 64 to a chunk,
    under their own tree of boxes (the layout's own boxes are all open in slot order).

    Built once (a curve sort) and then only refreshed: each query gathers the current spheres
    in the kept order and refits the boxes, which is cheap; moving objects swell the chunks
    slowly, and past :data:`RESORT_GROWTH` times the extent at the sort, the order is rebuilt.
    Any change of the set of objects (the layout's epoch, the count, the capacity) rebuilds it.
    """

    def __init__(self, index) -> None:
        self.epoch = (index._layout_epoch, index._set_epoch)
        self.count = index._count
        self.capacity = index.capacity
        live = np.flatnonzero(index._alive).astype(np.int64)
        m = live.shape[0]
        cap = max(-(-m // CHUNK), 1) * CHUNK
        self.pos_slot = np.full(cap, NO_POS, dtype=np.int64)
        self.pos_slot[:m] = live[curve_order(index._centers[live])]
        self.slot_pos = np.full(index.capacity, NO_POS, dtype=np.int64)
        self.slot_pos[self.pos_slot[:m]] = np.arange(m, dtype=np.int64)
        self.rows = np.arange(m, dtype=np.int64)
        self.s32 = spheres32(cap)
        self.tree = new_tree(cap // CHUNK)
        self.sorts = 1
        self.big, self.rad = self._gather(index)
        self.extent = mean_extent(self.tree, 0, cap // CHUNK)

    def fits(self, index) -> bool:
        """Whether the view holds the index's current set of objects."""
        return (self.epoch == (index._layout_epoch, index._set_epoch)
                and self.count == index._count
                and self.capacity == index.capacity)

    def refresh(self, index) -> None:
        """The current spheres in the kept order, tight boxes; re-sorted once swollen."""
        self.big, self.rad = self._gather(index)
        nchunks = self.pos_slot.shape[0] // CHUNK
        if mean_extent(self.tree, 0, nchunks) > RESORT_GROWTH * self.extent:
            m = self.rows.shape[0]
            live = self.pos_slot[:m]
            self.pos_slot[:m] = live[curve_order(index._centers[live])]
            self.slot_pos[self.pos_slot[:m]] = self.rows
            self.sorts += 1
            self.big, self.rad = self._gather(index)
            self.extent = mean_extent(self.tree, 0, nchunks)

    def _gather(self, index) -> tuple[float, float]:
        m = self.rows.shape[0]
        big, rad = store32(self.s32, self.rows, index._centers, index._radii, index._vdist,
                           self.pos_slot[:m])
        nchunks = self.pos_slot.shape[0] // CHUNK
        with threads_for(m):
            refit_chunks(self.tree, self.s32, 0, nchunks, pad_for(big, rad))
        refit_upper(self.tree, 0, nchunks)
        return float(big), float(rad)


def index_pairs(index, slots: np.ndarray | None, margin: float) -> np.ndarray:
    """``ChunkedIndex._query_pairs``: the descent over the layout in curve order, over the
    :class:`SlotOrderView` in slot order."""
    if index._slot_order:  # every box is open: the view stands in for the layout
        view = index._pairs_view
        if view is None or not view.fits(index):
            view = index._pairs_view = SlotOrderView(index)
        else:
            view.refresh(index)
        tree, s32, pos_slot, slot_pos = view.tree, view.s32, view.pos_slot, view.slot_pos
        big, rad = view.big, view.rad
    else:
        index._pairs_view = None
        tree, s32, pos_slot, slot_pos = index._tree, index._s32, index._pos_slot, index._slot_pos
        big, rad = index._max_abs, index._max_r
    marked = np.zeros(0, dtype=np.bool_)
    if slots is not None:
        marked = mark_nodes(tree, slot_pos[slots])
    rec = SphereRecords(pos_slot, index._centers, index._radii, index._vdist, s32)
    near = ChunkReach(margin, margin + node_slack(big, rad, margin),
                      lane_tolerance(big, rad, margin))
    return query_pairs(tree, rec, near, selection(index.capacity, slots), marked)
