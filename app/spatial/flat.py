"""``FlatCopy``: a float32 copy of a store's objects by slot, and every query as a scan of it.

No structure at all: what the ``brute`` index is, and what a tree becomes while (nearly)
every object moves every frame (``app.spatial.aabbtree.tree``), where keeping any structure
costs more than it saves. The frustum query is the branch-free float32 scan of
:mod:`app.spatial.scan` (exact: the few spheres near a plane are decided in float64), on
every core for large stores; moves take the one-pass paths of :mod:`app.spatial.moves`;
pairs are the project's sort-and-sweep.

The copy mirrors an *owner*'s object store (an :class:`~app.spatial.object_store.ObjectStore`,
slot for slot): the owner calls :meth:`inserted`, :meth:`copied`, :meth:`removed` and
:meth:`grow` from its hooks, and passes itself to the passes that read its columns. A batch of
every object is written into spare columns that then swap with the owner's (``moves``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.geom.decide import REGION_BOX, REGION_RAY, REGION_SPHERE
from app.geom.zpyramid import ZPyramid, occluder
from app.parallelism import threads_for
from app.spatial import moves
from app.spatial.base import QueryResult
from app.spatial.object_store import Columns
from app.spatial.pairs import SweepSpace, selection
from app.spatial.pool import slots_end
from app.spatial.scan import (
    SCAN_PARALLEL_MIN,
    grown32,
    kill32,
    mismatch32,
    scan_frustum,
    spheres32,
    store32,
)
from app.spatial.sieve import region_rows


class FlatCopy:
    """The float32 copy of an owner's objects by slot (position = slot), the bounds its
    float64 band needs, and last batch's movers."""

    def __init__(self, capacity: int) -> None:
        self.s32 = spheres32(capacity)
        self._codes = np.empty(capacity, np.uint8)
        self._max_abs = 0.0
        self._max_r = 0.0
        self._sweep = SweepSpace()
        self._epoch = 0  # bumped whenever a slot changes hands (see app.spatial.moves)
        self._last_movers: moves.LastMovers | None = None
        self._spare: Columns | None = None  # the store's twins for all-object batches
        self._slot_of = np.arange(capacity, dtype=np.int64)  # position = slot here
        self._rows = 0  # one past the highest slot ever used (dead rows fail every test)

    # ------------------------------------------------------------------ moves

    def move(self, owner: Any, batch: moves.UpdateBatch) -> bool:
        """Write a well-typed batch of ``owner``'s objects: last frame's movers again take one
        checking pass, and so does a batch of every object in any order; any other batch
        one checking pass and one writing pass. False: the batch is bad and nothing changed
        (the owner's general path names what is wrong)."""
        if self._move_known(owner, batch):
            return True
        slots = moves.known_positions(self._last_movers, self._epoch, batch, owner._ids)
        if slots is None and batch.ids.shape[0] == owner._count and self._move_every(owner,
                                                                                      batch):
            return True
        if slots is None:
            slots = np.empty(batch.ids.shape[0], dtype=np.int64)
            if moves.find_batch(batch, owner._idmap.arrays(), owner._seen_bits(), 0, slots) < 0:
                return False
        big, rad = moves.write_batch(batch, slots, moves.SphereRecords(
            self._slot_of, owner._centers, owner._radii, owner._vdist, self.s32))
        self._note_bounds(big, rad)
        self._last_movers = moves.remember(self._epoch, slots, True)
        return True

    def _move_known(self, owner: Any, batch: moves.UpdateBatch) -> bool:
        """Last batch's movers again (``moves.move_same``): one checking pass."""
        done = moves.move_same(self._last_movers, self._epoch, owner._count, batch,
                               owner._columns(), self._spare, owner._ids, self._slot_of,
                               self.s32)
        if done is None:
            return False
        big, rad, (owner._centers, owner._radii, owner._vdist), self._spare = done
        self._note_bounds(big, rad)
        return True

    def _move_every(self, owner: Any, batch: moves.UpdateBatch) -> bool:
        """A batch of every live object, in any order (``moves.move_every``)."""
        pos = np.empty(batch.ids.shape[0], dtype=np.int64)
        done = moves.move_every(batch, owner._idmap.arrays(), owner._seen_bits(), pos,
                                moves.SLOTS_ARE_POSITIONS, owner._columns(), self._spare,
                                self.s32)
        if done is None:
            return False
        big, rad, (owner._centers, owner._radii, owner._vdist), self._spare = done
        self._note_bounds(big, rad)
        self._last_movers = moves.remember(self._epoch, pos, True)
        return True

    def _note_bounds(self, big: float, rad: float) -> None:
        # Bounds only grow: a stale larger bound only widens the float64 band, never wrong.
        self._max_abs = max(self._max_abs, float(big))
        self._max_r = max(self._max_r, float(rad))

    # ------------------------------------------------------------------ the owner's hooks

    def inserted(self, owner: Any, slots: np.ndarray) -> None:
        """New objects at ``slots`` (the owner's store holds them)."""
        self._epoch += 1
        self._rows = max(self._rows, int(slots_end(slots)))
        self.copied(owner, slots, remember=False)

    def copied(self, owner: Any, slots: np.ndarray, remember: bool = True) -> None:
        """Objects at ``slots`` changed in the owner's store (its general path): copy them;
        ``remember``: they are last batch's movers (``slots`` are kept)."""
        big, rad = store32(self.s32, slots, owner._centers, owner._radii, owner._vdist, slots)
        self._note_bounds(big, rad)
        if remember:
            self._last_movers = moves.remember(self._epoch, slots, True)

    def removed(self, slots: np.ndarray) -> None:
        """Objects at ``slots`` are gone: their rows fail every test from now on."""
        self._epoch += 1
        kill32(self.s32, slots)

    def grow(self, capacity: int) -> None:
        """The owner's store grew to ``capacity`` slots."""
        self._epoch += 1
        self.s32 = grown32(self.s32, capacity)
        self._codes = np.empty(capacity, np.uint8)
        self._slot_of = np.arange(capacity, dtype=np.int64)

    # ------------------------------------------------------------------ queries

    def query_frustum(self, owner: Any, planes: np.ndarray, eye: np.ndarray, use_vd: bool,
                      occlusion: ZPyramid | None) -> QueryResult:
        """Slots of the objects inside the planes (and view distance): the scan."""
        n = self._rows  # the slots ever used: the pool's spare capacity is never scanned
        # The serial scan has no parallel loop: no threads_for (setting numba's thread count
        # takes a lock, ~10 us a call).
        slots, occluded, outside = scan_frustum(
            self.s32, n, planes, eye, use_vd, self._max_abs, self._max_r, owner._centers,
            owner._radii, owner._vdist, occluder(occlusion), parallel=n >= SCAN_PARALLEL_MIN,
            codes=self._codes, dead=n - owner._count)
        return QueryResult(visible=slots, working_set=owner._count, nodes_visited=0,
                           occluded_objects=int(occluded), culled_frustum=outside)

    def query_box(self, owner: Any, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Slots whose sphere's bounding box overlaps [lo, hi] (``sieve.region_rows``)."""
        return self._region(owner, REGION_BOX, lo, hi, 0.0)[0]

    def query_sphere(self, owner: Any, center: np.ndarray, radius: float) -> np.ndarray:
        """Slots whose sphere touches the query sphere (``sieve.region_rows``)."""
        return self._region(owner, REGION_SPHERE, center, center, float(radius))[0]

    def query_ray(self, owner: Any, origin: np.ndarray,
                  direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slots, entry distances) of the spheres the ray hits (``sieve.region_rows``)."""
        return self._region(owner, REGION_RAY, origin, direction, 0.0)

    def _region(self, owner: Any, kind: int, qa: np.ndarray, qb: np.ndarray,
                qr: float) -> tuple[np.ndarray, np.ndarray]:
        return region_rows(self.s32, self._rows, self._codes, owner._centers, owner._radii,
                           kind, qa, qb, qr)

    def pairs(self, owner: Any, slots: np.ndarray | None, margin: float) -> np.ndarray:
        """The project's sort-and-sweep (``app.spatial.pairs.SweepSpace``: float32 boxes,
        radix sort, vectorised windows, float64 decision) over the live slots, on both cores
        from ``PARALLEL_MIN`` objects."""
        live = np.flatnonzero(owner._alive)
        with threads_for(owner._count):
            return self._sweep.pairs(owner._centers, owner._radii, live, live, margin,
                                     selection(owner.capacity, slots), parallel=True,
                                     copy=False)

    def check(self, owner: Any) -> str:
        """'' when every live slot's float32 row holds the owner's sphere (as ``store32``
        writes it) and no dead row below the scanned ones can pass a test; else what is
        wrong."""
        live = np.flatnonzero(owner._alive)
        if live.shape[0] and int(live.max()) >= self._rows:
            return "a live slot lies beyond the scanned rows"
        wrong = mismatch32(self.s32, live, np.flatnonzero(~owner._alive[: self._rows]),
                           owner._centers, owner._radii, owner._vdist)
        return f"the float32 copy: {wrong}" if wrong else ""
