"""``brute``: no structure at all, every query tests every live object (compiled).

The baseline every index is measured against: its frustum query is the branch-free float32
scan of ``app.spatial.scan`` (exact: the few spheres near a plane are decided in float64),
over a float32 copy of the store kept in slot order (:class:`~app.spatial.flat.FlatCopy`), on
every core for large stores.
"""

from __future__ import annotations

import numpy as np

from app.spatial import moves
from app.spatial.base import SpatialIndex
from app.spatial.checks import lossless_batch
from app.spatial.flat import FlatCopy


class BruteIndex(SpatialIndex):
    """Every query is a compiled linear scan over the object store."""

    name = "brute"
    _reads_old_values = False

    def __init__(self, **kwargs) -> None:
        if kwargs.get("leafy") not in (None, False) or kwargs.get("split_threshold") is not None:
            raise ValueError("brute has no heuristic: leafy and split_threshold do not apply")
        super().__init__()
        self._flat = FlatCopy(self.capacity)

    def update(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None = None,
               view_distances: np.ndarray | None = None) -> None:
        """Move objects: last frame's movers again take one checking pass, and so does a
        batch of every object in any order; any other well-typed batch (ids in any order,
        radii and view distances or not) one checking pass and one writing pass
        (``app.spatial.moves``); a bad one the contract's general path, which names what is
        wrong."""
        ids, centers, radii, view_distances = lossless_batch(ids, centers, radii,
                                                             view_distances)
        batch = moves.batch_of(ids, centers, radii, view_distances)
        if batch is not None and self._flat.move(self, batch):
            return
        self._update_lossless(ids, centers, radii, view_distances)

    def _query_frustum(self, planes, eye, use_vd, occlusion):
        return self._flat.query_frustum(self, planes, eye, use_vd, occlusion)

    # ------------------------------------------------------------------ the float32 copy

    def _on_insert(self, slots):
        self._flat.inserted(self, slots)

    def _on_update(self, slots, old_centers, old_radii, old_vdist):
        self._flat.copied(self, slots)  # (slots are ours to keep: last batch's movers)

    def _on_remove(self, slots):
        self._flat.removed(slots)

    def _grow(self, new_capacity):
        self._flat.grow(new_capacity)

    def _query_box(self, lo, hi):
        return self._flat.query_box(self, lo, hi)

    def _query_sphere(self, center, radius):
        return self._flat.query_sphere(self, center, radius)

    def _query_ray(self, origin, direction):
        return self._flat.query_ray(self, origin, direction)

    _pairs_structural = True  # no structure: the sort-and-sweep is brute force done right

    def _query_pairs(self, slots, margin):
        return self._flat.pairs(self, slots, margin)

    def _validate(self) -> None:
        wrong = self._flat.check(self)
        if wrong:
            raise AssertionError(f"brute: {wrong}")
