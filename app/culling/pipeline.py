"""The per-frame cull and the live index (no OpenGL here).

:class:`CullPipeline` owns the spatial index the viewer culls with and the objects it was built
from (the scene's arrays, which the scene moves in place): it builds the index, rebuilds it when
the user switches the index or its parameters, hands it the moved objects each frame, and runs
the frame's culls with the current toggles:

- :meth:`CullPipeline.first_cull`: the query (frustum, view distance, previous-frame occlusion
  against the last frame's pyramid), or two-pass occlusion's *early* cull of the previous
  frame's visible set, which the pipeline keeps;
- :meth:`CullPipeline.late_cull`: two-pass occlusion's *late* cull against this frame's
  pyramid; it returns the newly visible ids for the second draw and keeps the late answer as
  the next frame's early set;
- :meth:`CullPipeline.frame_stages`: how many objects each test of that cull rejected
  (frustum, view distance, occlusion), as Unreal's ``stat initviews`` does: the counts the
  query made in its own walk (``QueryResult.culled_frustum`` ...), no second pass.

:meth:`CullPipeline.cull` and :func:`stage_counts` are the same steps with every input
explicit (the start-up's warm calls, ground truth, tests).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.culling.frustum import camera_planes, filter_in_view
from app.geom.zpyramid import ZPyramid
from app.spatial import INDEX_NAMES, TREE_HEURISTICS, QueryResult, SpatialIndex, create_index
from app.spatial.aabbtree.heuristics import STORAGE_THRESHOLD

# The + / - keys' split thresholds: the paper's range and beyond it, up to the storage's
# (STORAGE_THRESHOLD, measured on the trees' contiguous storage) and twice that.
SPLIT_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, STORAGE_THRESHOLD,
               2 * STORAGE_THRESHOLD)


@dataclass
class IndexConfig:
    """Which index and with what parameters."""

    name: str
    leafy: bool = True
    split_threshold: int | None = None  # None: the index's own default

    def is_tree(self) -> bool:
        return self.name in TREE_HEURISTICS

    def label(self) -> str:
        """Label for logs and the HUD: the index_variants label, e.g. ``octree/leafy``."""
        if self.is_tree():
            return f"{self.name}/{'leafy' if self.leafy else 'non-leafy'}"
        return self.name

    def index_kwargs(self) -> dict[str, Any]:
        """Constructor arguments: the trees take leafy and split_threshold; another index
        gets split_threshold only when its constructor names that parameter."""
        if self.is_tree():
            kw: dict[str, Any] = {"leafy": self.leafy}
            if self.split_threshold is not None:
                kw["split_threshold"] = self.split_threshold
            return kw
        if self.split_threshold is not None and "split_threshold" in _named_params(self.name):
            return {"split_threshold": self.split_threshold}
        return {}

    def has_threshold(self) -> bool:
        return self.is_tree() or "split_threshold" in _named_params(self.name)


def _named_params(name: str) -> set[str]:
    """Explicitly named constructor parameters of the index class (not **kwargs)."""
    import importlib

    from app.spatial import _REGISTRY

    module, cls, _fixed = _REGISTRY[name]
    klass = getattr(importlib.import_module(module), cls)
    try:
        params = inspect.signature(klass.__init__).parameters
    except (TypeError, ValueError):
        return set()
    return {k for k, p in params.items()
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


@dataclass
class StageCounts:
    """Objects each culling test rejected in one frame, as the query counted them in the order
    its kernel applies the tests (view distance, frustum, occlusion): a node rejected whole
    counts every object below it under that test, an object tested alone counts under the
    first test it fails. None for a stage that is off. With ``drawn`` they add up to
    ``objects``."""

    objects: int
    frustum: int | None  # rejected by the frustum test
    distance: int | None  # rejected by the view-distance test
    occlusion: int | None  # rejected by an occlusion test and not drawn
    drawn: int

    @property
    def culled(self) -> int:
        """Objects not drawn, all stages together."""
        return self.objects - self.drawn


@dataclass
class FrameCull:
    """What one frame's culls did: their inputs and answers, for the frame's figures and its
    stage counts."""

    planes: np.ndarray
    eye: np.ndarray
    frustum: bool
    view_distance: bool
    occlusion: str  # "off", "previous" or "two-pass"
    first: np.ndarray | None  # the ids drawn first (None: every object)
    result: QueryResult | None  # the query's answer (two-pass: the late cull's); None: no query
    newly: np.ndarray  # two-pass: the late cull's ids the early cull did not draw

    @property
    def two_pass(self) -> bool:
        """Whether the late cull runs (two-pass occlusion with frustum culling on)."""
        return self.occlusion == "two-pass" and self.frustum


class CullPipeline:
    """The live index, the objects it holds, and the frame's culls with the viewer's toggles."""

    def __init__(self, config: IndexConfig) -> None:
        if config.name not in INDEX_NAMES:
            raise ValueError(f"unknown index {config.name!r}; available: {', '.join(INDEX_NAMES)}")
        self.config = config
        self.index: SpatialIndex | None = None
        self.last_rebuild_ms = 0.0
        self.last_result: QueryResult | None = None
        self._rows_checked: np.ndarray | None = None
        self._run_start = -1
        self._all_rows: np.ndarray | None = None  # read-only 0..n-1 when the ids are the rows
        # (ids, centers, radii, view distances): the scene's arrays, moved in place
        self._objects: tuple[np.ndarray, ...] | None = None
        self._early = np.zeros(0, np.int64)  # two-pass: last frame's late answer
        self.last_cull: FrameCull | None = None  # this frame's culls

    def _hold(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray,
              view_distances: np.ndarray | None) -> None:
        """Keep the objects the index is built from; the frames read them from here."""
        if view_distances is None:
            view_distances = np.full(ids.shape[0], np.inf)
        self._objects = (ids, centers, radii, view_distances)

    # ------------------------------------------------------------------ build

    def build(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray,
              view_distances: np.ndarray | None) -> float:
        """(Re)build the index from the current objects; returns the time it took in ms."""
        t0 = time.perf_counter()
        self._hold(ids, centers, radii, view_distances)
        idx = create_index(self.config.name, **self.config.index_kwargs())
        if ids.shape[0]:
            vd = None
            if view_distances is not None and np.isfinite(view_distances).any():
                vd = view_distances
            idx.insert(ids, centers, radii, vd)
        n = ids.shape[0]
        self._all_rows = None
        if n and centers.shape[0] == n and ids[0] == 0 and ids[-1] == n - 1 and np.array_equal(
                ids, np.arange(n)):
            self._all_rows = np.arange(n, dtype=np.int64)
            self._all_rows.flags.writeable = False
        old = self.index
        self.index = idx
        if old is not None:
            del old
        self.last_rebuild_ms = (time.perf_counter() - t0) * 1e3
        return self.last_rebuild_ms

    def split_threshold(self) -> int | None:
        """The threshold in effect (asked from the index when it was left to its default)."""
        if self.config.split_threshold is not None:
            return self.config.split_threshold
        v = getattr(self.index, "split_threshold", None)  # the trees' attribute
        return int(v) if isinstance(v, (int, np.integer)) else None

    def describe(self) -> str:
        try:
            return self.index.describe() if self.index is not None else self.config.label()
        except Exception:  # noqa: BLE001 - a HUD string must never break a frame
            return self.config.label()

    # ------------------------------------------------------------------ per frame

    def update(self, moved: np.ndarray, centers: np.ndarray | None = None) -> None:
        """Hand the moved objects (ids = rows of ``centers``, default the held objects'
        centres) to the index."""
        if centers is None:
            centers = self._objects[1]
        if moved.shape[0] and self.index is not None:
            n = centers.shape[0]
            rows = self._all_rows
            if (rows is not None and rows.shape[0] == n == len(self.index)
                    and moved.shape[0] >= n - max(64, n // 64)):
                # Nearly everything moved (a scene with a few fixed objects): hand over every
                # row, the few still ones unchanged, rather than gather 24 bytes an object
                # into a copy; the batch is the same array every frame, which an index can
                # recognise (chunks writes it in one sequential pass).
                self.index.update(rows, centers)
                return
            start = self._row_run(moved, n)
            if start >= 0:
                # The moved ids are one run of rows (all cars of a city, every object of a
                # cloud): hand over a view of those rows instead of a gathered copy.
                self.index.update(moved, centers[start:start + moved.shape[0]])
            else:
                self.index.update(moved, centers[moved])

    def _row_run(self, moved: np.ndarray, n: int) -> int:
        """``s`` when ``moved`` is exactly the rows s, s+1, ... of an n-row array, else -1.

        Checked once per array: scenes hand back the same read-only array every frame.
        """
        if moved is not self._rows_checked:
            self._rows_checked = moved
            m = moved.shape[0]
            s = int(moved[0])
            run = s >= 0 and s + m <= n and np.array_equal(moved, np.arange(s, s + m))
            self._run_start = s if run else -1
        return -1 if moved.flags.writeable else self._run_start

    def cull(self, planes: np.ndarray, eye: np.ndarray, *, frustum: bool, view_distance: bool,
             occlusion: ZPyramid | None = None, among: np.ndarray | None = None,
             all_ids: np.ndarray | None = None, centers: np.ndarray | None = None,
             radii: np.ndarray | None = None,
             view_distances: np.ndarray | None = None) -> QueryResult | None:
        """Run the query, against the ``occlusion`` pyramid when one is given.

        ``among`` (two-pass occlusion's early cull, niagara's): only these ids, last frame's
        visible set, by the indexes' own frustum and view-distance predicates, without a
        query. With frustum culling off, returns None when nothing is culled (draw everything)
        or filters by view distance only (numpy, no index). The object arrays default to the
        held ones.
        """
        if self._objects is not None:
            o_ids, o_c, o_r, o_vd = self._objects
            all_ids = o_ids if all_ids is None else all_ids
            centers = o_c if centers is None else centers
            radii = o_r if radii is None else radii
            view_distances = o_vd if view_distances is None else view_distances
        if among is not None:
            visible = filter_in_view(among, centers, radii, view_distances, planes, eye,
                                     bool(view_distance))
            return QueryResult(visible=visible, working_set=int(among.shape[0]),
                               nodes_visited=0)
        if not frustum:
            self.last_result = None
            if not view_distance or centers is None or view_distances is None:
                return None
            d2 = ((centers - np.asarray(eye)) ** 2).sum(axis=1)
            keep = d2 <= view_distances * view_distances
            ids = all_ids[keep] if all_ids is not None else np.flatnonzero(keep)
            return QueryResult(visible=ids, working_set=int(keep.shape[0]), nodes_visited=0,
                               culled_frustum=0,
                               culled_distance=int(keep.shape[0] - ids.shape[0]))
        res = self.index.query_frustum(planes, eye=eye, use_view_distance=view_distance,
                                       occlusion=occlusion)
        self.last_result = res
        return res

    # ------------------------------------------------------------------ the frame's culls

    def forget_visible(self) -> None:
        """Two-pass's early set starts empty (a new occlusion provider, no pyramid yet)."""
        self._early = np.zeros(0, np.int64)

    def first_cull(self, planes: np.ndarray, eye: np.ndarray, *, frustum: bool,
                   view_distance: bool, occlusion: str = "off",
                   pyramid: ZPyramid | None = None) -> np.ndarray | None:
        """The frame's first cull; the ids to draw first (None: every object).

        Two-pass occlusion (with frustum culling on): the early cull, last frame's visible
        set still in view (kept here by :meth:`late_cull`), without a query. Otherwise the
        query, against ``pyramid`` (previous-frame occlusion) when one is given.
        """
        f = FrameCull(planes, eye, frustum, view_distance, occlusion, None, None,
                      np.zeros(0, np.int64))
        res = self.cull(planes, eye, frustum=frustum, view_distance=view_distance,
                        occlusion=None if f.two_pass else pyramid,
                        among=self._early if f.two_pass else None)
        f.result = res
        f.first = None if res is None else res.visible
        self.last_cull = f
        return f.first

    def late_cull(self, pyramid: ZPyramid) -> np.ndarray:
        """Two-pass's late cull: the query with this frame's culling camera against this
        frame's ``pyramid``; returns the ids the early cull did not draw. Its answer is the
        frame's visible set and the next frame's early set."""
        f = self.last_cull
        res = self.cull(f.planes, f.eye, frustum=True, view_distance=f.view_distance,
                        occlusion=pyramid)
        f.result = res
        f.newly = newly_visible(res.visible, f.first)
        self._early = res.visible.copy()  # the index may reuse its answer's buffer
        return f.newly

    def frame_stages(self, drawn: int) -> StageCounts:
        """How many objects each test of this frame's culls rejected, from the query's own
        counts (two-pass: the late cull's); ``drawn``: what the frame drew (every object when
        nothing was culled)."""
        f = self.last_cull
        return stage_counts(f.result, self.object_count(), frustum=f.frustum,
                            view_distance=f.view_distance, occlusion=f.occlusion != "off",
                            drawn=drawn)

    def object_count(self) -> int:
        """The objects the frame culls: the held ones (the index's size)."""
        if self._objects is not None:
            return int(self._objects[0].shape[0])
        return 0 if self.index is None else len(self.index)


def stage_counts(result: QueryResult | None, objects: int, *, frustum: bool,
                 view_distance: bool, occlusion: bool, drawn: int) -> StageCounts:
    """The culled-by-test counts (``stat initviews``) of a frame whose query answered
    ``result`` (None: nothing was culled) out of ``objects``, and which drew ``drawn``.

    The counts are the query's own (``QueryResult.culled_frustum``, ``culled_distance``,
    ``occluded_objects``); frustum culling off, the view-distance filter's. Two-pass draws the
    early set before the late cull tests occlusion: the late answer's occluded objects the
    early set drew are drawn, not culled, so occlusion counts the others (``drawn`` is then
    the late answer plus those), and the four still add up to ``objects``.
    """
    if result is None:
        return StageCounts(objects, None, None, None, drawn)
    if frustum and result.culled_frustum is None:  # two-pass's early set, no late cull yet
        return StageCounts(objects, None, None, None, drawn)
    visible = int(result.visible.shape[0])
    distance = int(result.culled_distance or 0) if view_distance else None
    if not frustum:
        return StageCounts(objects, None, distance, None, drawn)
    occluded = None
    if occlusion:
        occluded = max(int(result.occluded_objects) - max(drawn - visible, 0), 0)
    return StageCounts(objects, int(result.culled_frustum or 0), distance, occluded, drawn)


def newly_visible(late: np.ndarray, early: np.ndarray) -> np.ndarray:
    """The ids of the late cull that the early cull did not draw (two-pass occlusion)."""
    # Both are sets of unique ids: a sorted membership test, ~7x cheaper than setdiff1d
    # (which sorts the concatenation) at ~1,000 ids.
    return late[~np.isin(late, early, assume_unique=True)]


def warm_up(names: tuple[str, ...] | list[str] | None = None, objects: tuple | None = None,
            view: tuple[np.ndarray, np.ndarray] | None = None,
            on_label: Callable[[str], None] | None = None,
            leafy: bool | None = None) -> dict[str, float]:
    """Build, update and query every index of ``names`` (default: all; the trees in both
    variants) through :class:`CullPipeline`, the frames' own path, so that numba compiles (or
    loads from its cache) the specialisations the frames call, ahead of the first switch.

    ``objects``: a scene's ``(ids, centers, radii, view_distances, movers)`` (``movers`` read
    only, as a scene hands them); default 256 random spheres. ``view``: ``(planes, eye)``,
    default a camera that sees those spheres. ``on_label`` hears each label before it starts;
    ``leafy`` picks one variant of the trees (default both).
    Returns ms per label; an index that fails is skipped (the switch will report it).
    """
    if objects is None:
        rng = np.random.default_rng(0)
        n = 256
        ids = np.arange(n, dtype=np.int64)
        centers = rng.uniform(-50, 50, (n, 3))
        radii = rng.uniform(0.5, 2.0, n)
        vd = rng.uniform(20, 80, n)
        movers = ids[::2].copy()
        movers.flags.writeable = False
    else:
        ids, centers, radii, vd, movers = objects
    if view is None:
        eye = np.array([0.0, 0.0, 120.0])
        planes = camera_planes(eye, np.zeros(3))
    else:
        planes, eye = view
    out: dict[str, float] = {}
    for name in names or INDEX_NAMES:
        variants = [True, False] if name in TREE_HEURISTICS and leafy is None else [
            True if leafy is None else leafy]
        for variant in variants:
            cfg = IndexConfig(name, variant)
            if on_label is not None:
                on_label(cfg.label())
            t0 = time.perf_counter()
            try:
                p = CullPipeline(cfg)
                p.build(ids, centers, radii, vd)
                p.update(movers, centers)
                for use_vd in (False, True):
                    p.cull(planes, eye, frustum=True, view_distance=use_vd)
                p.index.node_boxes()
                p.index.node_outcomes()
            except Exception:  # noqa: BLE001, S112 - reported when the user switches to it
                continue
            out[cfg.label()] = (time.perf_counter() - t0) * 1e3
    return out
