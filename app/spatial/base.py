"""The spatial index contract (design.md): the public API every flat index answers.

Every index derives from :class:`SpatialIndex`, which stands on the shared object store
(:class:`app.spatial.object_store.ObjectStore`: the arrays by *slot*, the free list, the id
map) and checks each call with :mod:`app.spatial.checks` *before* anything changes (bad
input raises ``ValueError`` naming the offending ids and leaves the index exactly as it was),
so that each index file holds only its structure.

Subclasses implement the ``_on_*`` hooks and the ``_query_*`` methods on slots; they never see
caller ids. Hooks are called with the store already holding the new values (insert, update) or
still holding the old ones (remove).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.geom.zpyramid import ZPyramid
from app.spatial.checks import (
    camera_ok,
    check_batch,
    check_ids,
    check_point,
    lossless_batch,
    lossless_ids,
    name_ids,
    reject_repeats,
)
from app.spatial.object_store import EMPTY_F, Columns, ObjectStore, ids_at, write_row
from app.spatial.pairs import check_margin, selection, slot_pairs_to_ids, sweep_pairs

# chunks takes the store's row writer and its empty column from here, by these names.
_EMPTY_F = EMPTY_F
__all__ = ["QueryResult", "SpatialIndex", "write_row"]

@dataclass
class QueryResult:
    """Result of :meth:`SpatialIndex.query_frustum`.

    The query's own stage counts (Unreal's ``stat initviews``), made in the same compiled
    walk, in the order the kernel applies its tests (view distance, frustum, occlusion): a
    node rejected whole counts every object below it under the test that rejected it, an
    object tested alone counts under the first test it fails. ``culled_distance``: objects
    rejected by the view-distance test; ``culled_frustum``: rejected by the frustum test;
    ``occluded_objects``: rejected by an occlusion test. With the visible ones they add up to
    every object of the index. A kernel counts two of them; the third is the rest
    (:meth:`fill_counts`), None until then.
    """

    visible: np.ndarray
    working_set: int
    nodes_visited: int
    occluded_nodes: int = 0
    occluded_objects: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    culled_frustum: int | None = None
    culled_distance: int | None = None

    def fill_counts(self, objects: int) -> QueryResult:
        """Make the stage count left None the rest of ``objects`` (the index's size); a query
        without view distance culls none by it. Returns self."""
        rest = objects - int(self.visible.shape[0]) - int(self.occluded_objects)
        if self.culled_distance is None:
            if self.culled_frustum is None:
                self.culled_distance = 0
            else:
                self.culled_distance = rest - self.culled_frustum
        if self.culled_frustum is None:
            self.culled_frustum = rest - self.culled_distance
        return self


class SpatialIndex(ObjectStore):
    """Base class: a set of spheres keyed by caller-chosen int ids. See design.md."""

    name: str = "base"
    #: Whether ``_query_frustum`` returns ids already (else slots, mapped here).
    _frustum_gives_ids: bool = False

    # ------------------------------------------------------------------ public API

    def __len__(self) -> int:
        return self._count

    def describe(self) -> str:
        """One-line human description (index name and parameters) for HUDs and logs."""
        return self.name

    def insert(
        self,
        ids: np.ndarray,
        centers: np.ndarray,
        radii: np.ndarray,
        view_distances: np.ndarray | None = None,
    ) -> None:
        """Add objects. ``ids`` must be new and unique; view distance defaults to infinity."""
        ids, centers, radii, view_distances = lossless_batch(ids, centers, radii,
                                                             view_distances)
        slots = self._store_new_fast(ids, centers, radii, view_distances)
        if slots is not None:
            self._insert_rows(slots, Columns(centers, radii,
                                             EMPTY_F if view_distances is None else view_distances))
            return
        ids, centers, radii, vd = self._check_batch(ids, centers, radii, view_distances)
        if ids.shape[0] == 0:
            return
        reject_repeats("insert", ids)
        known = self._idmap.lookup(ids) >= 0
        if known.any():
            raise ValueError(f"insert: ids already in the index: {name_ids(ids[known])}")
        if vd is None:
            vd = np.full(ids.shape[0], np.inf)
        self._insert_rows(self._store_new(ids, centers, radii, vd), Columns(centers, radii, vd))

    def update(
        self,
        ids: np.ndarray,
        centers: np.ndarray,
        radii: np.ndarray | None = None,
        view_distances: np.ndarray | None = None,
    ) -> None:
        """Move objects (and optionally change their radius or view distance)."""
        self._update_lossless(*lossless_batch(ids, centers, radii, view_distances))

    def _update_lossless(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None,
                         view_distances: np.ndarray | None) -> None:
        """:meth:`update` for a batch already through ``checks.lossless_batch`` (a subclass
        that converted it for its own paths does not convert it again)."""
        if self._update_fast(ids, centers, radii, view_distances):
            return
        ids, centers, radii, vd = self._check_batch(ids, centers, radii, view_distances,
                                                    radii_optional=True)
        if ids.shape[0] == 0:
            return
        self._apply_update(self._resolve_known("update", ids), centers, radii, vd)

    def remove(self, ids: np.ndarray) -> None:
        """Remove objects by id."""
        ids = lossless_ids(ids)
        slots = self._known_slots_fast(ids)
        if slots is None:
            ids = self._check_ids(ids)
            if ids.shape[0] == 0:
                return
            slots = self._resolve_known("remove", ids)
        self._gone_ids = ids  # (the caller's: what a hook would gather from the store again)
        try:
            self._on_remove(slots)
        finally:
            self._gone_ids = None
        self._drop(ids, slots)

    def contains(self, ids: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``ids`` are in the index."""
        return self._idmap.lookup(self._check_ids(ids)) >= 0

    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(centers, radii, view_distances) of known ids."""
        ids = self._check_ids(ids)
        slots = self._idmap.lookup(ids)
        if (slots < 0).any():
            raise ValueError(f"get: unknown ids: {name_ids(ids[slots < 0])}")
        return self._centers[slots].copy(), self._radii[slots].copy(), self._vdist[slots].copy()

    def all_ids(self) -> np.ndarray:
        """Every live id (any order)."""
        return self._ids[self._alive].copy()

    def query_frustum(
        self,
        planes: np.ndarray,
        eye: np.ndarray | None = None,
        use_view_distance: bool = False,
        occlusion: ZPyramid | None = None,
    ) -> QueryResult:
        """Ids of objects whose sphere is not outside any plane (and within view distance)."""
        if not camera_ok(planes, eye):  # (a frame's camera: one compiled check)
            planes, eye = self._check_camera(planes, eye, use_view_distance)
        res = self._query_frustum(planes, eye, bool(use_view_distance), occlusion)
        if not self._frustum_gives_ids:
            res.visible = ids_at(self._ids, res.visible)
        return res.fill_counts(self._count)

    def _check_camera(self, planes: object, eye: object,
                      use_view_distance: bool) -> tuple[np.ndarray, np.ndarray]:
        """``query_frustum``'s planes and eye as contiguous float64 arrays; ValueError
        when they are not finite, of the wrong shape, or the eye is missing where view
        distances need it."""
        planes = np.ascontiguousarray(planes, dtype=np.float64)
        if planes.ndim != 2 or planes.shape[1] != 4 or not np.isfinite(planes).all():
            raise ValueError(
                f"query_frustum: planes must be a finite (K, 4) array, got {planes.shape}")
        if use_view_distance and eye is None:
            raise ValueError("query_frustum: use_view_distance=True needs an eye position")
        return planes, np.zeros(3) if eye is None else self._check_point(eye, "eye")

    def query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Ids whose sphere's bounding box overlaps the closed box [lo, hi]."""
        lo = self._check_point(lo, "lo")
        hi = self._check_point(hi, "hi")
        if (lo > hi).any():
            raise ValueError(f"query_box: lo {lo} exceeds hi {hi}")
        return self._ids[self._query_box(lo, hi)]

    def query_sphere(self, center: np.ndarray, radius: float) -> np.ndarray:
        """Ids with ``|c - center| <= r + radius``."""
        center = self._check_point(center, "center")
        radius = float(radius)
        if not np.isfinite(radius) or radius < 0:
            raise ValueError(f"query_sphere: radius must be finite and >= 0, got {radius}")
        return self._ids[self._query_sphere(center, radius)]

    def query_ray(self, origin: np.ndarray, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, t) of spheres the ray hits, nearest first; t is the entry distance (0 inside)."""
        origin = self._check_point(origin, "origin")
        direction = self._check_point(direction, "direction")
        scale = float(np.abs(direction).max())
        if scale == 0.0:
            raise ValueError("query_ray: direction must be non-zero")
        direction = direction / scale  # first into [-1, 1]: the norm of 1e300 overflows
        slots, t = self._query_ray(origin, direction / float(np.linalg.norm(direction)))
        ids = self._ids[slots]
        order = np.lexsort((ids, t))
        return ids[order], t[order]

    # ---------------------------------------------------------- collision broad-phase (pairs)

    #: Whether the pairs query (``_query_pairs``, or ``_pair_ids`` where an index answers in
    #: ids) is the structure's own (False: the default sort-and-sweep).
    _pairs_structural: bool = False

    def query_pairs(self, ids: np.ndarray | None = None, margin: float = 0.0) -> np.ndarray:
        """Pairs (K, 2) of ids, a < b, of live objects with ``|c_a - c_b| <= r_a + r_b + margin``.

        Each pair once, rows in no particular order. With ``ids``, only the pairs with at least
        one member in ``ids``. NaN, infinite or negative margin, or unknown ids: ValueError.
        """
        m = check_margin(margin)
        slots = None
        if ids is not None:
            ids = self._check_ids(ids)
            slots = self._idmap.lookup(ids)
            if (slots < 0).any():
                raise ValueError(f"query_pairs: unknown ids: {name_ids(ids[slots < 0])}")
            if slots.shape[0] == 0:
                return np.zeros((0, 2), dtype=np.int64)
        if self._count < 2:
            return np.zeros((0, 2), dtype=np.int64)
        return self._pair_ids(slots, m)

    def _pair_ids(self, slots: np.ndarray | None, margin: float) -> np.ndarray:
        """Id pairs, the smaller first: ``_query_pairs``'s slot pairs mapped. The trees
        override it instead of ``_query_pairs``: their descent on both cores writes ids while
        it joins the threads' outputs."""
        return slot_pairs_to_ids(self._query_pairs(slots, margin), self._ids)

    def _query_pairs(self, slots: np.ndarray | None, margin: float) -> np.ndarray:
        """Slot pairs (K, 2) touching within ``margin``, each once (either order in a row);
        with ``slots``, only pairs with a member among them. Default: the sort-and-sweep."""
        return sweep_pairs(self._centers, self._radii, np.flatnonzero(self._alive), margin,
                           selection(self.capacity, slots))

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo (K,3), hi (K,3), depth (K,)) of the current nodes; empty for ``brute``."""
        return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0, dtype=np.int64)

    def node_outcomes(self) -> np.ndarray:
        """Outcome of each node of :meth:`node_boxes` in the last frustum query.

        Codes are ``app.geom.predicates.NODE_*`` (not visited, inside, partial, rejected by
        frustum, by view distance, by occlusion).
        """
        return np.zeros(self.node_boxes()[2].shape[0], dtype=np.int8)

    def validate(self) -> None:
        """Raise AssertionError on any broken invariant of the store or the structure."""
        self._validate_store()
        self._validate()

    def stats(self) -> dict[str, Any]:
        """Size and shape figures; indexes add their own (nodes, max_depth, per-level counts)."""
        return {"objects": self._count, "nodes": 0, "max_depth": 0}

    # ------------------------------------------------------------------ hooks

    def _on_insert(self, slots: np.ndarray) -> None:
        """New objects are in the store at ``slots``; :attr:`_new_rows` holds their checked
        rows in the same order for the time of the call."""

    def _insert_rows(self, slots: np.ndarray, rows: Columns) -> None:
        """:meth:`_on_insert`, with the batch's rows at hand: a hook that reads the new
        spheres can read them contiguous there instead of scattered over the store (10^4
        spawns into 10^7 objects: a third of a millisecond of cache misses)."""
        self._new_rows = rows
        try:
            self._on_insert(slots)
        finally:
            self._new_rows = None  # (the caller's arrays: not kept past the call)

    def _on_remove(self, slots: np.ndarray) -> None:
        """Objects at ``slots`` are about to be freed; the store still holds them, and
        :attr:`_gone_ids` their ids in the same order for the time of the call."""

    def _validate(self) -> None:
        """Structure-specific invariants."""

    def _raise_check(self, code: int, messages: dict[int, str], where: object = None) -> None:
        """Turn a compiled check's result into validate's AssertionError (0 means "all held").

        Compiled checks cannot raise with a message, so each returns an int code naming the
        first broken invariant (a key of ``messages``) and where it found it.
        """
        if int(code):
            at = "" if where is None else f" (at {where})"
            raise AssertionError(f"{self.describe()}: {messages[int(code)]}{at}")

    def _query_frustum(self, planes: np.ndarray, eye: np.ndarray, use_vd: bool,
                       occlusion: ZPyramid | None) -> QueryResult:
        raise NotImplementedError

    def _query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _query_sphere(self, center: np.ndarray, radius: float) -> np.ndarray:
        raise NotImplementedError

    def _query_ray(self, origin: np.ndarray,
                   direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    # ------------------------------------------------------------------ internals

    # The input checks as methods, for the subclasses that call them so.
    _check_ids = staticmethod(check_ids)
    _check_point = staticmethod(check_point)
    _check_batch = staticmethod(check_batch)
