"""The boxes a nested index draws: each group's box of its objects and its inner node boxes.

``NestedIndex.group_boxes`` is one compiled pass over the groups' blocks
(:func:`group_box_corners`). ``NestedIndex.node_boxes_info`` asks every group's own index for
its node boxes, a Python call per group (2,000-4,000 us a frame for the tracks scene's 222
groups); :class:`NodeBoxCache` keeps each group's local boxes while the group's index cannot
have changed and turns the whole set into world corners in one compiled call, so a frame
asks only the groups that changed.

When a group's index can change, and how the cache sees it:

* inserts and removals (also ``remove_group``) bump the arena's ``version``: the cache
  starts again;
* moves reach an index lazily (``arena.ObjectArena.flush``, from a query, ``flush()``,
  ``group_index()``, or here): a compiled checksum of every group's block (the bits of its
  local centres, radii and view distances, :func:`block_checksums`) differs from the one
  cached, or the group is still marked for a flush;
* a group large enough to be queried through its own index (``inner_min``) is asked every
  time: the trees split lazily while they answer queries;
* a new preorder (``add_group``, ``set_parent``) starts again; ``rebuild`` makes a new index.

Transforms never invalidate anything: the cache holds local boxes, the world corners are made
at each call with the current world matrices (``query.world_corners``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from app.spatial.nested.query import world_corners

_MIX = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True)
def group_box_corners(order, b_start, b_count, lc, rad, W):
    """(corners (K, 8, 3), group slots (K,)) of the non-empty groups in ``order``: each one's
    local box ``[min(c - r), max(c + r)]`` over its block, carried to the world by its
    matrix (corner k takes the high side on axis a when bit a of k is set)."""
    n = 0
    for i in range(order.shape[0]):
        if b_count[order[i]] > 0:
            n += 1
    slots = np.empty(n, np.int64)
    lo = np.empty((n, 3))
    hi = np.empty((n, 3))
    k = 0
    for i in range(order.shape[0]):
        g = order[i]
        cnt = b_count[g]
        if cnt <= 0:
            continue
        a = b_start[g]
        lx = ly = lz = np.inf
        hx = hy = hz = -np.inf
        for s in range(a, a + cnt):
            r = rad[s]
            x = lc[s, 0]
            y = lc[s, 1]
            z = lc[s, 2]
            lx = min(lx, x - r)
            ly = min(ly, y - r)
            lz = min(lz, z - r)
            hx = max(hx, x + r)
            hy = max(hy, y + r)
            hz = max(hz, z + r)
        slots[k] = g
        lo[k, 0] = lx
        lo[k, 1] = ly
        lo[k, 2] = lz
        hi[k, 0] = hx
        hi[k, 1] = hy
        hi[k, 2] = hz
        k += 1
    return world_corners(lo, hi, slots, W), slots


@njit(cache=True)
def block_checksums(order, b_start, b_count, lc_bits, rad_bits, vd_bits, out) -> None:
    """``out[g]``: a checksum of group ``g``'s block (the bit patterns of its local centres,
    radii and view distances, in row order) for every group in ``order``."""
    for i in range(order.shape[0]):
        g = order[i]
        h = np.uint64(b_count[g]) * _MIX
        a = b_start[g]
        for s in range(a, a + b_count[g]):
            h = (h ^ lc_bits[s, 0]) * _MIX
            h = (h ^ lc_bits[s, 1]) * _MIX
            h = (h ^ lc_bits[s, 2]) * _MIX
            h = (h ^ rad_bits[s]) * _MIX
            h = (h ^ vd_bits[s]) * _MIX
        out[g] = h


class NodeBoxCache:
    """Each group's inner node boxes (local lo, hi, depth), laid out in preorder, refreshed
    only for the groups whose index may have changed (see the module docstring)."""

    def __init__(self) -> None:
        self.version = -1
        self.order: np.ndarray | None = None
        self.sums = np.zeros(0, np.uint64)
        self.lo = np.zeros((0, 3))
        self.hi = np.zeros((0, 3))
        self.depth = np.zeros(0, np.int64)
        self.own = np.zeros(0, np.int64)
        self.keys: list = []
        self.start = np.zeros(0, np.int64)  # per preorder position: first box, one past last
        self.end = np.zeros(0, np.int64)
        self.asked = 0  # groups asked for their boxes in the last call (for tests, measures)

    def boxes(self, h: Any) -> tuple[np.ndarray, list, np.ndarray, np.ndarray]:
        """``NestedIndex.node_boxes_info`` of ``h`` (its bounds refreshed by the caller)."""
        G = h._tree.G
        R = h._arena.R
        order = h._tree.order
        sums = np.empty(G.cap, np.uint64)
        block_checksums(order, G.b_start, G.b_count, R.lc.view(np.uint64),
                        R.rad.view(np.uint64), R.vd.view(np.uint64), sums)
        if (self.order is not order or self.version != h._arena.version
                or self.sums.shape[0] != G.cap):
            self._fill(h, order, sums)
        else:
            o = order
            todo = np.flatnonzero((sums[o] != self.sums[o]) | (G.gdirty[o] > 0)
                                  | (G.nstale[o] > 0) | (G.b_count[o] >= h.inner_min))
            self.asked = int(todo.shape[0])
            if todo.shape[0]:
                self._patch(h, order, todo)
            self.sums = sums
        if self.own.shape[0] == 0:
            return np.zeros((0, 8, 3)), [], np.zeros(0, np.int64), np.zeros(0, np.int64)
        corners = world_corners(self.lo, self.hi, self.own, G.W)
        return corners, list(self.keys), self.depth.copy(), G.depth[self.own]

    @staticmethod
    def _ask(h: Any, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        h._flush(g)
        lo, hi, d = h._tree.inner[g].node_boxes()
        return (np.asarray(lo, np.float64).reshape(-1, 3), np.asarray(hi, np.float64).reshape(
            -1, 3), np.asarray(d, np.int64))

    def _fill(self, h: Any, order: np.ndarray, sums: np.ndarray) -> None:
        """Every group asked (a new preorder, inserts or removals since the last call)."""
        los, his, depths, owners = [], [], [], []
        counts = np.zeros(order.shape[0], np.int64)
        for i, g in enumerate(order.tolist()):
            lo, hi, d = self._ask(h, g)
            counts[i] = lo.shape[0]
            if lo.shape[0]:
                los.append(lo)
                his.append(hi)
                depths.append(d)
                owners.append(np.full(lo.shape[0], g, np.int64))
        self.asked = int(order.shape[0])
        self.end = np.cumsum(counts)
        self.start = self.end - counts
        if los:
            self.lo = np.concatenate(los)
            self.hi = np.concatenate(his)
            self.depth = np.concatenate(depths)
            self.own = np.concatenate(owners)
        else:
            self.lo, self.hi = np.zeros((0, 3)), np.zeros((0, 3))
            self.depth, self.own = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self.keys = [h._tree.keys[g] for g in self.own.tolist()]
        self.order = order
        self.version = h._arena.version
        self.sums = sums

    def _patch(self, h: Any, order: np.ndarray, todo: np.ndarray) -> None:
        """Ask the groups at preorder positions ``todo``; a group whose box count is unchanged
        is written in place, else the arrays are spliced once."""
        new = []
        same = True
        for i in todo.tolist():
            g = int(order[i])
            lo, hi, d = self._ask(h, g)
            new.append((i, g, lo, hi, d))
            same &= lo.shape[0] == self.end[i] - self.start[i]
        if same:
            for i, _g, lo, hi, d in new:
                a, b = int(self.start[i]), int(self.end[i])
                self.lo[a:b] = lo
                self.hi[a:b] = hi
                self.depth[a:b] = d
            return
        parts_lo, parts_hi, parts_d, parts_o, keys = [], [], [], [], []
        prev = 0
        counts = self.end - self.start
        for i, g, lo, hi, d in new:
            a, b = int(self.start[i]), int(self.end[i])
            parts_lo += [self.lo[prev:a], lo]
            parts_hi += [self.hi[prev:a], hi]
            parts_d += [self.depth[prev:a], d]
            parts_o += [self.own[prev:a], np.full(lo.shape[0], g, np.int64)]
            keys += self.keys[prev:a] + [h._tree.keys[g]] * lo.shape[0]
            counts[i] = lo.shape[0]
            prev = b
        parts_lo.append(self.lo[prev:])
        parts_hi.append(self.hi[prev:])
        parts_d.append(self.depth[prev:])
        parts_o.append(self.own[prev:])
        keys += self.keys[prev:]
        self.lo = np.concatenate(parts_lo)
        self.hi = np.concatenate(parts_hi)
        self.depth = np.concatenate(parts_d)
        self.own = np.concatenate(parts_o)
        self.keys = keys
        self.end = np.cumsum(counts)
        self.start = self.end - counts


__all__ = ["NodeBoxCache", "block_checksums", "group_box_corners"]
