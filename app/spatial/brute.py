"""``brute``: no structure at all, every query tests every live object (compiled).

The baseline every index is measured against: its frustum query is the branch-free float32
scan of ``app.spatial.scan`` (exact: the few spheres near a plane are decided in float64),
over a float32 copy of the store kept in slot order, on every core for large stores.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.geom.predicates import (
    ray_sphere_entry,
    sphere_overlaps_box,
    spheres_touch,
)
from app.geom.zpyramid import occluder
from app.parallelism import threads_for
from app.spatial import moves
from app.spatial.base import QueryResult, SpatialIndex
from app.spatial.object_store import Columns
from app.spatial.pairs import SweepSpace, selection
from app.spatial.scan import (
    SCAN_PARALLEL_MIN,
    grown32,
    kill32,
    scan_frustum,
    spheres32,
    store32,
)


@njit(cache=True)
def _box(alive, centers, radii, lo, hi):
    n = alive.shape[0]
    out = np.empty(n, dtype=np.int64)
    k = 0
    for s in range(n):
        if alive[s] and sphere_overlaps_box(centers[s, 0], centers[s, 1], centers[s, 2],
                                            radii[s], lo, hi):
            out[k] = s
            k += 1
    return out[:k]


@njit(cache=True)
def _sphere(alive, centers, radii, q, qr):
    n = alive.shape[0]
    out = np.empty(n, dtype=np.int64)
    k = 0
    for s in range(n):
        if alive[s] and spheres_touch(centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                                      q[0], q[1], q[2], qr):
            out[k] = s
            k += 1
    return out[:k]


@njit(cache=True)
def _ray(alive, centers, radii, o, d):
    n = alive.shape[0]
    out = np.empty(n, dtype=np.int64)
    ts = np.empty(n, dtype=np.float64)
    k = 0
    for s in range(n):
        if not alive[s]:
            continue
        t = ray_sphere_entry(o[0], o[1], o[2], d[0], d[1], d[2],
                             centers[s, 0], centers[s, 1], centers[s, 2], radii[s])
        if t >= 0.0:
            out[k] = s
            ts[k] = t
            k += 1
    return out[:k], ts[:k]



class BruteIndex(SpatialIndex):
    """Every query is a compiled linear scan over the object store."""

    name = "brute"
    _reads_old_values = False

    def __init__(self, **kwargs) -> None:
        if kwargs.get("leafy") not in (None, False) or kwargs.get("split_threshold") is not None:
            raise ValueError("brute has no heuristic: leafy and split_threshold do not apply")
        super().__init__()
        self._s32 = spheres32(self.capacity)
        self._codes = np.empty(self.capacity, np.uint8)
        self._max_abs = 0.0
        self._max_r = 0.0
        self._sweep = SweepSpace()
        self._epoch = 0  # bumped whenever a slot changes hands (see app.spatial.moves)
        self._last_movers: moves.LastMovers | None = None
        self._spare: Columns | None = None  # the store's twins for all-object batches
        self._slot_of = np.arange(self.capacity, dtype=np.int64)  # position = slot here
        self._rows = 0  # one past the highest slot ever used (dead rows fail every test)

    def update(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None = None,
               view_distances: np.ndarray | None = None) -> None:
        """Move objects: last frame's movers again take one checking pass, and so does a
        batch of every object in any order; any other well-typed batch (ids in any order,
        radii and view distances or not) one checking pass and one writing pass
        (``app.spatial.moves``); a bad one the contract's general path, which names what is
        wrong."""
        batch = moves.batch_of(ids, centers, radii, view_distances)
        if batch is not None:
            if self._move_known(batch):
                return
            slots = moves.known_positions(self._last_movers, self._epoch, batch, self._ids)
            if slots is None and batch.ids.shape[0] == self._count and self._move_every(batch):
                return
            if slots is None:
                slots = np.empty(batch.ids.shape[0], dtype=np.int64)
                if moves.find_batch(batch, self._idmap.arrays(), self._seen_bits(), 0,
                                    slots) < 0:
                    slots = None
            if slots is not None:
                big, rad = moves.write_batch(batch, slots, moves.SphereRecords(
                    self._slot_of, self._centers, self._radii, self._vdist, self._s32))
                self._note_bounds(big, rad)
                self._last_movers = moves.remember(self._epoch, slots, True)
                return
        super().update(ids, centers, radii, view_distances)

    def _move_known(self, batch: moves.UpdateBatch) -> bool:
        """Last batch's movers again (``moves.move_same``): one checking pass."""
        done = moves.move_same(self._last_movers, self._epoch, self._count, batch,
                               self._columns(), self._spare,
                               self._ids, self._slot_of, self._s32)
        if done is None:
            return False
        big, rad, (self._centers, self._radii, self._vdist), self._spare = done
        self._note_bounds(big, rad)
        return True

    def _move_every(self, batch: moves.UpdateBatch) -> bool:
        """A batch of every live object, in any order (``moves.move_every``)."""
        pos = np.empty(batch.ids.shape[0], dtype=np.int64)
        done = moves.move_every(batch, self._idmap.arrays(), self._seen_bits(), pos,
                                moves.SLOTS_ARE_POSITIONS, self._columns(), self._spare, self._s32)
        if done is None:
            return False
        big, rad, (self._centers, self._radii, self._vdist), self._spare = done
        self._note_bounds(big, rad)
        self._last_movers = moves.remember(self._epoch, pos, True)
        return True


    def _note_bounds(self, big: float, rad: float) -> None:
        # Bounds only grow: a stale larger bound only widens the float64 band, never wrong.
        self._max_abs = max(self._max_abs, float(big))
        self._max_r = max(self._max_r, float(rad))

    def _query_frustum(self, planes, eye, use_vd, occlusion):
        n = self._rows  # the slots ever used: the pool's spare capacity is never scanned
        # The serial scan has no parallel loop: no threads_for (setting numba's thread count
        # takes a lock, ~10 us a call).
        slots, occluded, outside = scan_frustum(
            self._s32, n, planes, eye, use_vd, self._max_abs, self._max_r, self._centers,
            self._radii, self._vdist, occluder(occlusion), parallel=n >= SCAN_PARALLEL_MIN,
            codes=self._codes, dead=n - self._count)
        return QueryResult(visible=slots, working_set=self._count, nodes_visited=0,
                           occluded_objects=int(occluded), culled_frustum=outside)

    # ------------------------------------------------------------------ the float32 copy

    def _on_insert(self, slots):
        self._epoch += 1
        self._rows = max(self._rows, int(slots.max()) + 1)
        self._copy32(slots)

    def _on_update(self, slots, old_centers, old_radii, old_vdist):
        self._copy32(slots)
        self._last_movers = moves.remember(self._epoch, slots, True)  # slots are ours to keep

    def _on_remove(self, slots):
        self._epoch += 1
        kill32(self._s32, slots)

    def _grow(self, new_capacity):
        self._epoch += 1
        self._s32 = grown32(self._s32, new_capacity)
        self._codes = np.empty(new_capacity, np.uint8)
        self._slot_of = np.arange(new_capacity, dtype=np.int64)

    def _copy32(self, slots):
        with threads_for(slots.shape[0]):
            big, rad = store32(self._s32, slots, self._centers, self._radii, self._vdist, slots)
        self._note_bounds(big, rad)

    def _query_box(self, lo, hi):
        return _box(self._alive, self._centers, self._radii, lo, hi)

    def _query_sphere(self, center, radius):
        return _sphere(self._alive, self._centers, self._radii, center, radius)

    def _query_ray(self, origin, direction):
        return _ray(self._alive, self._centers, self._radii, origin, direction)

    _pairs_structural = True  # no structure: the sort-and-sweep is brute force done right

    def _query_pairs(self, slots, margin):
        """The project's sort-and-sweep (``app.spatial.pairs.SweepSpace``: float32 boxes,
        radix sort, vectorised windows, float64 decision) over the live slots, on both cores
        from ``PARALLEL_MIN`` objects."""
        live = np.flatnonzero(self._alive)
        with threads_for(self._count):
            return self._sweep.pairs(self._centers, self._radii, live, live, margin,
                                     selection(self.capacity, slots), parallel=True,
                                     copy=False)
