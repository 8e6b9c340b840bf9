"""``HashedGrid``: the hierarchical hashed grid behind the spatial index contract.

The Python class only orchestrates whole batches (choosing the cell size, reserving room in
the pools and the table, compacting); each operation is one call into the compiled kernels of
:mod:`.update`, :mod:`.queries` and :mod:`.check`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.geom.zpyramid import ZPyramid
from app.spatial import rows
from app.spatial.base import QueryResult, SpatialIndex
from app.spatial.flat_form import FlatWhileMoving
from app.spatial.hashgrid import check as ck
from app.spatial.hashgrid import pairs as pq
from app.spatial.hashgrid import queries as qu
from app.spatial.hashgrid import update as up
from app.spatial.hashgrid.store import (
    NLEVELS,
    ST_HW,
    ST_IHW,
    ST_INFREE,
    ST_LIVE,
    ST_NDIRTY,
    ST_NFREE,
    ST_RELINKS,
    ST_USED,
    Items,
    Objects,
    Spheres,
    choose_cell_size,
    fill_table,
    grid_args,
    grow_cells,
    grow_items,
    grow_objects,
    level_sizes,
    new_grid,
    new_items,
    new_objects,
    new_table,
)
from app.spatial.object_store import ids_at
from app.spatial.pairs import new_pairs, selection

#: The largest item pool whose predecessor a compaction keeps for the next (2^22 items: 320 MB).
SPARE_ITEMS = 1 << 22


class HashedGrid(FlatWhileMoving, SpatialIndex):
    """Hierarchical hashed grid: each object in the cell of its center at its size's level.

    Flat while everything moves (:mod:`app.spatial.flat_form`): with every object moving,
    each move unlinked and relinked an item (40-75 ns an object at 10^5, bench index
    `moving`: the frame 0.09-0.19x the brute force's), and its pairs, cell against
    neighbours, took 2-4x the sort-and-sweep's step (bench pairs at 10^5)."""

    name = "grid"
    _reads_old_values = False  # the cells' moves read the store before writing it
    _frustum_gives_ids = True  # items hold ids: no gather through the store per query
    _pairs_structural = True  # cells against their neighbours (hashgrid/pairs.py)

    def __init__(self, cell_size: float | None = None, flat: bool = True,
                 **kwargs: Any) -> None:
        if kwargs.get("leafy") not in (None, False) or kwargs.get("split_threshold") is not None:
            raise ValueError("grid has no tree heuristic: leafy and split_threshold do not apply")
        unknown = set(kwargs) - {"leafy", "split_threshold"}
        if unknown:
            raise ValueError(f"grid: unknown arguments {sorted(unknown)}")
        if cell_size is not None:
            cell_size = float(cell_size)
            if not np.isfinite(cell_size) or cell_size <= 0.0:
                raise ValueError(f"grid: cell_size must be finite and > 0, got {cell_size}")
        super().__init__()
        self._cell_size = cell_size
        self._auto = cell_size is None
        self._chosen_at = 0  # object count when the automatic cell size was last chosen
        self._stamp = 0
        self._pscratch: tuple[np.ndarray, ...] | None = None  # query_pairs' packed items
        self._init_flat(flat)
        self._rows = rows.no_rows()  # (see _bind_rows)
        self._empty_structure(cell_size or 1.0)
        self._bind_rows()

    # ------------------------------------------------------------------ public extras

    @property
    def cell_size(self) -> float | None:
        """Side of the finest level's cells (None until chosen at the first insert)."""
        return self._cell_size

    def describe(self) -> str:
        """Index name and cell size."""
        cs = "auto" if self._cell_size is None else f"{self._cell_size:.3g}"
        return f"grid (cell {cs}{', auto' if self._auto and self._cell_size else ''})"

    def stats(self) -> dict[str, Any]:
        """Cells, levels in use, objects per level, hash-table load."""
        lv = self._grid.levels
        meta = self._grid.meta
        used = np.flatnonzero(lv.count)
        return {
            "objects": self._count,
            "nodes": int(meta[ST_LIVE]),
            "max_depth": int(used.max()) if used.size else 0,
            "cell_size": self._cell_size,
            "levels": {int(lvl): int(lv.count[lvl]) for lvl in used},
            "cells_per_level": {int(lvl): int(lv.cells[lvl]) for lvl in used},
            "table_size": int(self._grid.table.val.shape[0]),
            "table_used": int(meta[ST_USED]),
            "mean_per_cell": self._count / max(int(meta[ST_LIVE]), 1),
            "flat": self._flat is not None,
        }

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Occupied cells (without the radius margin), depth = level; pool order."""
        cells = self._grid.cells
        hw = int(self._grid.meta[ST_HW])
        key = cells.key[np.flatnonzero(cells.count[:hw] > 0)]
        size = self._grid.levels.size[key[:, 0]][:, None]
        lo = key[:, 1:].astype(np.float64) * size
        return lo, lo + size, key[:, 0].copy()

    def node_outcomes(self) -> np.ndarray:
        """NODE_* outcome of each cell of :meth:`node_boxes` in the last frustum query."""
        cells = self._grid.cells
        hw = int(self._grid.meta[ST_HW])
        return cells.outcome[:hw][cells.count[:hw] > 0].copy()

    def level_of(self, radii: np.ndarray) -> np.ndarray:
        """Level an object of each radius is stored at (for tests and overlays)."""
        r = np.asarray(radii, dtype=np.float64)
        lvl = np.searchsorted(self._grid.levels.size, 2.0 * r, side="left")
        return np.minimum(lvl, NLEVELS - 1)

    # ------------------------------------------------------------------ hooks

    def _insert_in_structure(self, slots: np.ndarray) -> None:
        if self._cell_size is None:
            self._cell_size = choose_cell_size(self._centers[slots], self._radii[slots])
            self._grid.levels.size[:] = level_sizes(self._cell_size)
            self._chosen_at = self._count
        elif self._auto and self._count >= max(4 * self._chosen_at, 1000):
            # Grown a lot since the size was chosen (e.g. a scene inserted in chunks): the
            # first chunk's density may be far off. Re-choose, and rebuild if it moved much.
            self._chosen_at = self._count
            alive = np.flatnonzero(self._alive)
            size = choose_cell_size(self._centers[alive], self._radii[alive])
            if not 0.67 < size / self._cell_size < 1.5:
                self._rebuild(size)
                return
        self._link_new(slots)
        self._maybe_compact()

    def _link_new(self, slots: np.ndarray) -> None:
        start = 0
        while start < slots.shape[0]:
            self._reserve(slots.shape[0] - start)
            start = up.insert_batch(slots, start, *self._args())

    def _move_in_structure(self, slots: np.ndarray, centers: np.ndarray,
                           radii: np.ndarray | None, vd: np.ndarray | None) -> None:
        """The cells' moves, writing the store as they go (``update.update_batch``)."""
        centers = np.ascontiguousarray(centers)
        start = 0
        while start < slots.shape[0]:
            start = up.update_batch(slots, centers, radii, vd, start, *self._args())
            if start < slots.shape[0]:
                self._reserve(slots.shape[0] - start, items=False)
        self._maybe_compact()

    def _remove_from_structure(self, slots: np.ndarray) -> None:
        up.remove_batch(slots, self._vdist, *self._args()[1:])

    def _grow_structure(self, new_capacity: int) -> None:
        self._objs = grow_objects(self._objs, new_capacity)
        if self._flat is None:
            self._bind_rows()

    def _bind_rows(self) -> None:
        """The store's row of a slot and the slot's item and cell in one line
        (:mod:`app.spatial.rows`), unless they are already."""
        if rows.is_bound(self._rows, self._slot_columns(), self._objs.item):
            return
        self._rows, columns, item, cell = rows.bind(self._slot_columns(), self._objs.item,
                                                    self._objs.cell)
        self._set_slot_columns(columns)
        self._objs = Objects(item=item, cell=cell)

    def _validate(self) -> None:
        if self._flat is not None:
            meta = self._grid.meta
            self._validate_flat(not int(meta[ST_LIVE])
                                and int(meta[ST_INFREE]) == self._items.cen.shape[0],
                                "its cells hold items")
            return
        if not rows.is_bound(self._rows, self._slot_columns(), self._objs.item):
            raise AssertionError(f"{self.describe()}: the store's columns and the slots' "
                                 "items and cells are not one row")
        alive, g, items, objs = self._alive, self._grid, self._items, self._objs
        for code, where in (
            ck.check_free_stacks(alive, g, items),
            ck.check_table(g),
            ck.check_lists(alive, objs, g, items),
            ck.check_objects(alive, self._spheres(), objs, g, items),
            ck.check_counts(alive, g),
            ck.check_dirty(g),
        ):
            self._raise_check(code, ck.MESSAGES, int(where))

    # ------------------------------------------------------------------ queries

    def _query_frustum(self, planes: np.ndarray, eye: np.ndarray, use_vd: bool,
                       occlusion: ZPyramid | None) -> QueryResult:
        if self._still_flat():
            res = self._flat.query_frustum(self, planes, eye, use_vd, occlusion)
            res.visible = ids_at(self._ids, res.visible)  # (the flat copy answers in slots)
            return res
        ids, cnt = qu.frustum(qu.view_args(planes, eye, use_vd, occlusion), self._count,
                              grid_args(self._grid), tuple(self._items))
        return QueryResult(visible=ids, working_set=int(cnt[0]), nodes_visited=int(cnt[1]),
                           occluded_nodes=int(cnt[2]), occluded_objects=int(cnt[3]),
                           culled_distance=int(cnt[4]))

    def _query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if self._still_flat():
            return self._flat.query_box(self, lo, hi)
        return qu.box(lo, hi, self._count, grid_args(self._grid), tuple(self._items))

    def _query_sphere(self, center: np.ndarray, radius: float) -> np.ndarray:
        if self._still_flat():
            return self._flat.query_sphere(self, center, radius)
        return qu.sphere(center, radius, self._count, grid_args(self._grid), tuple(self._items))

    def _query_ray(self, origin: np.ndarray,
                   direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._still_flat():
            return self._flat.query_ray(self, origin, direction)
        self._stamp += 1
        return qu.ray(origin, direction, self._count, grid_args(self._grid), tuple(self._items),
                      self._stamp)

    def _query_pairs(self, slots: np.ndarray | None, margin: float) -> np.ndarray:
        if self._still_flat():
            return self._flat.pairs(self, slots, margin)
        out = new_pairs(2 * self._count)
        if slots is not None:
            slots = np.unique(slots)  # ids may repeat
            sel = selection(self.capacity, slots)
            if slots.shape[0] < pq.ALL_PAIRS_FROM * self._count:
                return pq.pairs_of(slots, grid_args(self._grid), tuple(self._items),
                                   self._objs.item, margin, sel, out)
        else:
            sel = selection(self.capacity, None)
        return pq.all_pairs(grid_args(self._grid), tuple(self._items), margin, sel, out,
                            *self._pair_scratch())

    def _pair_scratch(self) -> tuple[np.ndarray, ...]:
        """The packed items' arrays of query_pairs, kept between queries (fresh multi-
        megabyte arrays per step cost page faults); grown with the store and the cell pool."""
        n = self.capacity
        cells = self._grid.cells.key.shape[0]
        s = self._pscratch
        if s is None or s[0].shape[0] < n or s[5].shape[0] < cells:
            s = self._pscratch = (np.empty(n), np.empty(n), np.empty(n), np.empty(n),
                                  np.empty(n, dtype=np.int64), np.empty(cells, dtype=np.int64))
        return s

    # ------------------------------------------------------------------ internals

    def _spheres(self) -> Spheres:
        return Spheres(self._centers, self._radii, self._vdist, self._ids)

    def _args(self) -> tuple:
        """Spheres, objects, grid and items as the update kernels take them: plain tuples
        (numba types a named tuple's arrays twice as slowly, see store.grid_args)."""
        return ((self._centers, self._radii, self._vdist, self._ids), tuple(self._objs),
                grid_args(self._grid), tuple(self._items))

    def _empty_structure(self, cell_size: float | None = None) -> None:
        """No cells, no items: every live object unlinked (used by __init__, _rebuild and
        flat_form, whose call keeps the cell size)."""
        cap = self.capacity
        self._grid = new_grid(cell_size or self._cell_size or 1.0, 256, 256)
        self._items = new_items(cap)
        self._spare_items: Items | None = None  # the item pool before the last compaction
        self._grid.meta[ST_INFREE] = cap
        self._objs = new_objects(cap)
        self._compacted_hw = 0  # item high-water mark right after the last compaction

    def _rebuild(self, cell_size: float) -> None:
        """Relink every live object under a new finest cell size (one compiled pass)."""
        self._cell_size = cell_size
        self._empty_structure(cell_size)
        self._bind_rows()
        self._link_new(np.flatnonzero(self._alive))
        self._compact()

    def _reserve(self, n: int, items: bool = True) -> None:
        """Room for a batch of ``n``: up to 1,024 new cells (the kernels stop when the cells
        or the table run out and come back: the pool doubles then, not ahead of every batch
        by its worst case, a cell per object), and ``n`` new items unless not ``items``: a
        move frees its old item before it takes one, so an update needs none (doubling a pool
        of 10^6 items for nothing cost the first update after a build 0.2 s of page
        faults)."""
        meta = self._grid.meta
        live = int(meta[ST_LIVE])
        want = min(n, 1024)
        cap = self._grid.cells.key.shape[0]
        if int(meta[ST_NFREE]) < want:
            self._grid = grow_cells(self._grid, max(2 * cap, cap + want))
        icap = self._items.cen.shape[0]
        free_items = int(meta[ST_INFREE])
        if items and free_items < n:
            self._items = grow_items(self._items, meta, max(2 * icap, icap + n - free_items))
            self._spare_items = None
        if 2 * (int(meta[ST_USED]) + want) > self._grid.table.val.shape[0]:
            self._rehash(live + want)

    def _rehash(self, need: int, levels: bool = True) -> None:
        """Rebuild the table without tombstones at a quarter load; tighten level bounds
        (unless not ``levels``: a compaction has)."""
        cap = 256
        while cap < 4 * need:
            cap *= 2
        g = self._grid = self._grid._replace(table=new_table(cap))
        g.meta[ST_USED] = fill_table(g.cells, int(g.meta[ST_HW]), g.table)
        if levels:
            up.recompute_levels(g, self._items)

    def _maybe_compact(self) -> None:
        """Re-lay items in cell order once relinks have scattered a quarter of them."""
        meta = self._grid.meta
        relinks = int(meta[ST_RELINKS]) + int(meta[ST_IHW]) - self._compacted_hw
        if relinks > max(self._count // 4, 4096):
            self._compact()

    def _compact(self) -> None:
        """Renumber cells in (level, Z-order) and items cell by cell: a frustum then reads
        long contiguous runs of memory instead of one cache miss per object."""
        g = self._grid
        cells = g.cells
        meta = g.meta
        hw = int(meta[ST_HW])
        live = np.flatnonzero(cells.count[:hw] > 0)
        key = cells.key[live]
        off = key[:, 1:] - key[:, 1:].min(axis=0) if live.size else key[:, 1:]
        order = live[np.lexsort((up.morton(np.minimum(off, (1 << 21) - 1)), key[:, 0]))]
        newidx = np.full(hw, -1, dtype=np.int64)
        newidx[order] = np.arange(order.shape[0])
        nl = order.shape[0]
        for name, fill in (("key", 0), ("head", -1), ("count", 0), ("vdmax", -np.inf),
                           ("vdmin", np.inf), ("dirty", False), ("outcome", 0), ("stamp", 0)):
            a = getattr(cells, name)
            a[:nl] = a[order]
            a[nl:hw] = fill
        nd = int(meta[ST_NDIRTY])
        d = newidx[cells.dirty_list[:nd]]
        d = d[d >= 0]
        cells.dirty_list[: d.shape[0]] = d
        meta[ST_NDIRTY] = d.shape[0]
        # Cells nl.. are unused now: the free stack holds them all, lowest on top.
        cap = cells.key.shape[0]
        cells.free[: cap - nl] = np.arange(cap - 1, nl - 1, -1)
        meta[ST_NFREE] = cap - nl
        meta[ST_HW] = nl
        # Into the pool the last compaction left (same size): fresh megabytes would cost
        # their page faults at every compaction (half its time at 10^5 objects all moving).
        fresh = self._spare_items
        if fresh is None or fresh.cen.shape[0] != self._items.cen.shape[0]:
            fresh = new_items(self._items.cen.shape[0])
        up.compact_items(self._objs, self._grid, self._items, fresh)
        # (kept up to SPARE_ITEMS: past that a compaction copies so much that its page faults
        # matter less than the memory, 80 bytes an item)
        old = self._items
        self._items = fresh
        self._spare_items = old if old.cen.shape[0] <= SPARE_ITEMS else None
        self._compacted_hw = int(meta[ST_IHW])
        self._rehash(nl, levels=False)
