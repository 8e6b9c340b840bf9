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
from app.spatial.pairs import keep, new_pairs, pair_touch, push_pair, selection, sweep_pairs
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
def _wanted(tree: Tree, marked, g: int, h: int, reach: float) -> bool:
    """Whether the node pair (g, h) may hold an answer: both non-empty, boxes near, and (with
    a filter) a selected object below one of them."""
    return (tree.count[g] > 0) & (tree.count[h] > 0) & (
        (marked.shape[0] == 0) or marked[g] or marked[h]) and _boxes_near(tree.box, g, h, reach)


@njit(cache=True)
def _chunk_pairs(tree: Tree, marked, reach: float) -> np.ndarray:
    """The pairs (c, d), c <= d, of chunks whose boxes and all boxes above come within reach
    (node-against-node descent of the implicit tree; every level has the same depth)."""
    nodes = new_pairs(256)
    sp = 0
    out = new_pairs(tree.loff[1])
    k = 0
    top = tree.loff.shape[0] - 2
    for g in range(tree.loff[top], tree.loff[top + 1]):
        for h in range(g, tree.loff[top + 1]):
            if _wanted(tree, marked, g, h, reach):
                nodes = push_pair(nodes, sp, g, h)
                sp += 1
    while sp > 0:
        sp -= 1
        g = nodes[sp, 0]
        h = nodes[sp, 1]
        lv = 0
        while g >= tree.loff[lv + 1]:
            lv += 1
        if lv == 0:
            out = push_pair(out, k, g, h)
            k += 1
            continue
        below = tree.loff[lv - 1]
        g0 = below + (g - tree.loff[lv]) * FANOUT
        g1 = min(g0 + FANOUT, tree.loff[lv])
        h0 = below + (h - tree.loff[lv]) * FANOUT
        h1 = min(h0 + FANOUT, tree.loff[lv])
        for a in range(g0, g1):
            for b in range(a if g == h else h0, h1):
                if _wanted(tree, marked, a, b, reach):
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
    chunks = _chunk_pairs(tree, marked, reach)
    x = s32.x
    y = s32.y
    z = s32.z
    r = s32.r
    mt = np.float32(margin + tol)
    box = tree.box
    hit = np.empty(CHUNK, np.bool_)
    out = new_pairs(tree.loff[1] * CHUNK)
    k = 0
    for q in range(chunks.shape[0]):
        c = chunks[q, 0]
        d = chunks[q, 1]
        same = c == d
        pc = c * CHUNK
        pd = d * CHUNK
        for i in range(CHUNK):
            p = pc + i
            ri = r[p]
            if ri == -np.inf:
                continue
            xi = x[p]
            yi = y[p]
            zi = z[p]
            # The lane's reach against the other chunk's box (which holds all its spheres).
            ext = np.float64(ri) + reach + tol
            if ((xi - ext > box[HI, d]) | (xi + ext < box[LO, d]) | (yi - ext > box[HI + 1, d])
                    | (yi + ext < box[LO + 1, d]) | (zi - ext > box[HI + 2, d])
                    | (zi + ext < box[LO + 2, d])):
                continue
            j0 = i + 1 if same else 0
            n = _lanes(x, y, z, r, pd, j0, xi, yi, zi, ri + mt, hit)
            if n == 0:
                continue
            a = pos_slot[p]
            ax = centers[a, 0]
            ay = centers[a, 1]
            az = centers[a, 2]
            ar = radii[a]
            for j in range(j0, CHUNK):
                if hit[j]:
                    b = pos_slot[pd + j]
                    if keep(sel, a, b) and pair_touch(ax, ay, az, ar, centers[b, 0],
                                                      centers[b, 1], centers[b, 2], radii[b],
                                                      margin):
                        out = push_pair(out, k, a, b)
                        k += 1
    return out[:k]


@njit(cache=True, inline="always")
def _lanes(x, y, z, r, p0: int, j0: int, xi, yi, zi, thr_i, hit) -> int:
    """The branch-free float32 test of one sphere against lanes ``j0 ..`` of the chunk at
    ``p0``: ``hit[j]`` and their count. ``thr_i`` is the sphere's radius plus the widened
    margin; a hole's radius (-inf) makes the threshold negative, which fails."""
    n = 0
    for j in range(j0, CHUNK):
        p = p0 + j
        dx = xi - x[p]
        dy = yi - y[p]
        dz = zi - z[p]
        t = thr_i + r[p]
        h = (dx * dx + dy * dy + dz * dz <= t * t) & (t >= np.float32(0.0))
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
