"""``ChunkedIndex``: the chunked linear layout behind the spatial index contract.

What engines cull with today instead of pointer trees (Frostbite's and Unity DOTS' chunked
culling): spheres stored 64 to a chunk in Hilbert-curve order, a box per chunk and per group of 16
chunks, the branch-free float32 scan inside chunks the view only partly covers. A move writes
one record and at most grows a few boxes; nothing is relinked. The Python class orchestrates
whole batches; every loop is compiled (:mod:`.layout`, :mod:`.update`, :mod:`.queries`).

When to re-sort: moves only grow boxes, and a big batch refits them exactly, but objects that
travel drift away from their chunk-mates and boxes swell. After a refit, when the mean chunk
extent has grown past :data:`RESORT_GROWTH` times its value at the last sort, the whole layout
is re-sorted (also when removals have left more than :data:`MAX_HOLES` of positions empty).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.geom.zpyramid import ZPyramid, occluder
from app.parallelism import threads_for
from app.spatial.base import QueryResult, SpatialIndex
from app.spatial.chunks import check, layout, queries, update
from app.spatial.chunks.layout import CHUNK, NO_POS
from app.spatial.pool import grown
from app.spatial.scan import kill32, spheres32, store32, tolerances

#: A batch moving at least this fraction of the objects refits every chunk instead of growing.
REFIT_FRACTION = 0.25
#: Re-sort when the mean chunk extent has grown this much since the last sort.
RESORT_GROWTH = 1.6
#: Re-sort when this fraction of the used positions are holes left by removals.
MAX_HOLES = 0.25


class ChunkedIndex(SpatialIndex):
    """Spheres in Hilbert-curve-ordered chunks of 64 under an implicit 16-ary tree of boxes."""

    name = "chunks"

    def __init__(self, leafy: bool | None = None, split_threshold: int | None = None,
                 capacity: int = 1024) -> None:
        if leafy not in (None, False) or split_threshold is not None:
            raise ValueError("chunks has no heuristic: leafy and split_threshold do not apply")
        super().__init__(capacity)
        self._slot_pos = np.full(self.capacity, NO_POS, dtype=np.int64)
        self._set_positions(CHUNK * 16)
        self._npos = 0
        self._holes = 0
        self._tree = layout.new_tree(1)
        self._max_abs = 0.0
        self._max_r = 0.0
        self._sorted_extent = 0.0
        self.resorts = 0

    def describe(self) -> str:
        return f"chunks of {CHUNK}"

    # ------------------------------------------------------------------ storage

    def _set_positions(self, cap: int, keep: int = 0) -> None:
        """(Re)allocate the position arrays for ``cap`` positions, keeping the first ``keep``.

        Whole chunks only: the last chunk's lanes past the end are read as holes.
        """
        cap = -(-cap // CHUNK) * CHUNK
        s32 = spheres32(cap)
        pos_slot = np.full(cap, NO_POS, dtype=np.int64)
        if keep:
            for new, old in zip(s32, self._s32, strict=True):
                new[:keep] = old[:keep]
            pos_slot[:keep] = self._pos_slot[:keep]
        self._s32 = s32
        self._pos_slot = pos_slot
        self._codes = np.empty(cap, np.uint8)
        self._sure = np.empty(cap, np.int64)
        self._near = np.empty(cap, np.int64)

    def _grow(self, new_capacity: int) -> None:
        self._slot_pos = grown(self._slot_pos, new_capacity, NO_POS)

    def _place(self, slots: np.ndarray) -> None:
        """Append ``slots`` at the end of the layout in Hilbert-curve order of their centres."""
        m = slots.shape[0]
        if self._npos + m > self._pos_slot.shape[0]:
            self._set_positions(max(2 * self._pos_slot.shape[0], self._npos + m), self._npos)
        order = slots[layout.curve_order(self._centers[slots])]
        pos = np.arange(self._npos, self._npos + m, dtype=np.int64)
        self._pos_slot[pos] = order
        self._slot_pos[order] = pos
        with threads_for(m):
            big, rad = store32(self._s32, pos, self._centers, self._radii, self._vdist, order)
        self._note_bounds(big, rad)
        first_chunk = self._npos // CHUNK
        self._npos += m
        self._refit(first_chunk)

    def _note_bounds(self, big: float, rad: float) -> None:
        # Bounds only grow: a stale larger bound widens the float64 band, it is never wrong.
        self._max_abs = max(self._max_abs, float(big))
        self._max_r = max(self._max_r, float(rad))

    def _refit(self, first_chunk: int = 0) -> None:
        """Tight boxes for chunks from ``first_chunk`` on; the upper levels from scratch."""
        nchunks = layout.chunk_count(self._npos)
        if self._tree.loff[1] != nchunks:
            old = self._tree
            self._tree = layout.new_tree(nchunks)
            keep = min(first_chunk, int(old.loff[1]))
            for new_a, old_a in ((self._tree.lo, old.lo), (self._tree.hi, old.hi),
                                 (self._tree.maxvd, old.maxvd), (self._tree.minvd, old.minvd),
                                 (self._tree.count, old.count)):
                new_a[:keep] = old_a[:keep]
        pad = layout.pad_for(self._max_abs, self._max_r)
        with threads_for(max(0, self._npos - first_chunk * CHUNK)):
            layout.refit_chunks(self._tree, self._s32, first_chunk, nchunks, pad)
        layout.refit_upper(self._tree)

    def _resort(self) -> None:
        """Rebuild the layout: every live object re-placed in Hilbert-curve order, holes dropped."""
        live = self._pos_slot[: self._npos]
        live = live[live >= 0]
        self._pos_slot[: self._npos] = NO_POS
        kill32(self._s32, np.arange(self._npos, dtype=np.int64))
        self._npos = 0
        self._holes = 0
        self._tree = layout.new_tree(1)
        if live.shape[0]:
            self._place(live)
        self._sorted_extent = layout.mean_extent(self._tree)
        self.resorts += 1

    # ------------------------------------------------------------------ hooks

    def _on_insert(self, slots: np.ndarray) -> None:
        self._place(slots)
        if self._npos == slots.shape[0]:  # a first bulk insert: that is the sorted layout
            self._sorted_extent = layout.mean_extent(self._tree)

    def _on_update(self, slots, old_centers, old_radii, old_vdist) -> None:
        refit = slots.shape[0] >= REFIT_FRACTION * self._count
        big, rad = update.move(self._tree, self._s32, self._slot_pos, slots, self._centers,
                               self._radii, self._vdist, not refit)
        self._note_bounds(big, rad)
        if refit:
            self._refit()
            if layout.mean_extent(self._tree) > RESORT_GROWTH * self._sorted_extent:
                self._resort()

    def _on_remove(self, slots: np.ndarray) -> None:
        pos = self._slot_pos[slots]
        self._pos_slot[pos] = NO_POS
        self._slot_pos[slots] = NO_POS
        kill32(self._s32, pos)
        layout.count_down(self._tree, pos)
        self._holes += slots.shape[0]
        if self._holes > MAX_HOLES * self._npos:
            self._resort()

    # ------------------------------------------------------------------ queries

    def _query_frustum(self, planes, eye, use_vd, occlusion: ZPyramid | None) -> QueryResult:
        p32, tol, tol_d = tolerances(planes, eye, self._max_abs, self._max_r)
        k, occluded, working, visited = queries.query_frustum(
            self._tree, self._s32, self._pos_slot, self._npos, p32, eye.astype(np.float32),
            tol, tol_d, planes, eye, use_vd, occluder(occlusion), self._centers, self._radii,
            self._vdist, self._codes, self._sure, self._near)
        slots = self._pos_slot[self._sure[:k]]
        return QueryResult(visible=slots, working_set=int(working), nodes_visited=int(visited),
                           occluded_objects=int(occluded))

    def _query_box(self, lo, hi):
        return queries.query_box(self._tree, self._pos_slot, self._npos, self._centers,
                                 self._radii, lo, hi)

    def _query_sphere(self, center, radius):
        return queries.query_sphere(self._tree, self._pos_slot, self._npos, self._centers,
                                    self._radii, center, radius)

    def _query_ray(self, origin, direction):
        return queries.query_ray(self._tree, self._pos_slot, self._npos, self._centers,
                                 self._radii, origin, direction)

    # ------------------------------------------------------------------ overlay, stats, checks

    def _shown(self) -> np.ndarray:
        return np.flatnonzero(self._tree.count > 0)

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Boxes of the non-empty chunks and groups; depth 0 is the top level."""
        g = self._shown()
        t = self._tree
        levels = np.searchsorted(t.loff, g, side="right") - 1
        depth = (t.loff.shape[0] - 2) - levels
        return t.lo[g].copy(), t.hi[g].copy(), depth.astype(np.int64)

    def node_outcomes(self) -> np.ndarray:
        return self._tree.outcome[self._shown()].copy()

    def stats(self) -> dict[str, Any]:
        t = self._tree
        return {
            "objects": self._count,
            "nodes": int((t.count > 0).sum()),
            "max_depth": int(t.loff.shape[0] - 2),
            "chunks": int(t.loff[1]),
            "positions": self._npos,
            "holes": self._holes,
            "mean_chunk_extent": float(layout.mean_extent(t)),
            "sorted_extent": self._sorted_extent,
            "resorts": self.resorts,
        }

    def _validate(self) -> None:
        t = self._tree
        if layout.chunk_count(self._npos) != t.loff[1]:
            raise AssertionError(f"{self.describe()}: {int(t.loff[1])} chunks for "
                                 f"{self._npos} positions")
        for code, where in (
            check.check_positions(self._alive, self._slot_pos, self._pos_slot, self._npos),
            check.check_copy(self._s32, self._pos_slot, self._npos, self._centers, self._radii,
                             self._vdist),
            check.check_chunks(t, self._pos_slot, self._npos, self._centers, self._radii,
                               self._vdist),
            check.check_nodes(t),
        ):
            self._raise_check(code, check.MESSAGES, where)
        holes = int((self._pos_slot[: self._npos] < 0).sum())
        if holes != self._holes:
            raise AssertionError(f"{self.describe()}: {holes} holes, {self._holes} counted")


__all__ = ["ChunkedIndex"]
