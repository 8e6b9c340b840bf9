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
frame) every box is open, the descent would test every chunk against every other: the index
answers with the shared sort-and-sweep instead (see ``ChunkedIndex._query_pairs``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.chunks.layout import CHUNK, FANOUT, HI, LO, Tree, pad_for
from app.spatial.pairs import (
    grown_pairs,
    keep,
    new_pairs,
    pair_touch,
    push_pair,
    selection,
    sweep_pairs,
)
from app.spatial.scan import Spheres32

_U32 = 2.0 ** -24
#: float32 roundings of the largest term the lane threshold allows (a wide margin: the lane
#: test's own error is below about ten).
_LANE_ROUNDINGS = 64.0
_U64 = 2.0 ** -53


def lane_tolerance(max_abs: float, max_r: float, margin: float) -> float:
    """Widening of the float32 lane threshold that keeps it conservative (see module doc)."""
    return _LANE_ROUNDINGS * _U32 * (max_abs + max_r + margin) + 1e-30


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


@njit(cache=True)
def query_pairs(tree: Tree, s32: Spheres32, pos_slot, centers, radii, margin: float,
                reach: float, tol: float, sel, marked) -> np.ndarray:
    """Touching slot pairs (K, 2) of the layout (see the module docstring).

    ``reach``: margin plus :func:`node_slack`; ``tol``: :func:`lane_tolerance`; ``sel``: the
    ids filter by slot (empty: none); ``marked``: :func:`mark_nodes` of it (empty: none).
    """
    chunks = chunk_pairs(tree.box, tree.count, tree.loff, marked, reach)
    hit = np.empty(CHUNK, np.uint8)
    out = new_pairs(chunks.shape[0] * 4)
    k = 0
    q = 0
    i = 0
    while True:  # the lane pass stops before overflowing the buffer; grow it and go on
        k, q, i = _lane_pairs(chunks, q, i, s32.x, s32.y, s32.z, s32.r, tree.box, pos_slot,
                              centers, radii, margin, reach, tol, sel, hit, out, k)
        if q >= chunks.shape[0]:
            return out[:k]
        out = grown_pairs(out)  # (doubled: it holds one lane's hits, at most 64)


@njit(cache=True)
def _lane_pairs(chunks, q0: int, i0: int, x, y, z, r, box, pos_slot, centers, radii,
                margin: float, reach: float, tol: float, sel, hit, out, k: int):
    """The lanes of chunk pairs ``q0 ..`` (from lane ``i0`` of the first), pairs written at
    ``out[k]``; returns (k, q, i): q = number of chunk pairs when done, else where the next
    lane's hits would not fit (the caller grows ``out``: a function that reassigns it does
    not get its lane loop vectorised)."""
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


def index_pairs(index, slots: np.ndarray | None, margin: float) -> np.ndarray:
    """``ChunkedIndex._query_pairs``: the descent in curve order, the sweep in slot order."""
    if index._slot_order:  # every box is open (see the module docstring)
        return sweep_pairs(index._centers, index._radii, np.flatnonzero(index._alive), margin,
                           selection(index.capacity, slots))
    tree = index._tree
    marked = np.zeros(0, dtype=np.bool_)
    if slots is not None:
        marked = mark_nodes(tree, index._slot_pos[slots])
    big, rad = index._max_abs, index._max_r
    return query_pairs(tree, index._s32, index._pos_slot, index._centers, index._radii, margin,
                       margin + node_slack(big, rad, margin), lane_tolerance(big, rad, margin),
                       selection(index.capacity, slots), marked)
