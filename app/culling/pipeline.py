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
- :meth:`CullPipeline.frame_stages`: how many objects each stage of that cull removed
  (frustum, view distance, occlusion), as Unreal's ``stat initviews`` does.

:meth:`CullPipeline.cull` and :meth:`CullPipeline.stage_counts` are the same steps with every
input explicit (the start-up's warm calls, ground truth, tests).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.culling.frustum import camera_planes, count_in_view, filter_in_view
from app.geom.zpyramid import ZPyramid
from app.spatial import INDEX_NAMES, TREE_HEURISTICS, QueryResult, SpatialIndex, create_index

SPLIT_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256)


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


#: Rows the stage count may read every frame; a larger scene refreshes its counts every
#: ceil(rows / COUNT_ROWS_PER_FRAME)-th frame (one pass over 10^6 rows reads 40 MB: 3-5 ms on
#: two cores; 60,000 rows take ~0.3 ms).
COUNT_ROWS_PER_FRAME = 131_072


@dataclass
class StageCounts:
    """Objects removed by each culling stage in one frame; None for a stage that is off."""

    objects: int
    frustum: int | None  # outside the culling camera's frustum
    distance: int | None  # in the frustum but beyond their view distance
    occlusion: int | None  # in the frustum and within view distance, yet not drawn
    drawn: int
    counted: bool = True  # False: frustum/distance were not recounted this frame (large scene)

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
        self._in_view = (0, 0)  # the last stage count: (in the frustum, also within distance)
        self._counts_key: tuple[bool, int] | None = None
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
            return QueryResult(visible=ids, working_set=int(keep.shape[0]), nodes_visited=0)
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

    def frame_stages(self, drawn: int, frame: int = 0) -> StageCounts:
        """How many objects each stage of this frame's culls removed; ``drawn``: what the
        frame drew (every object when nothing was culled)."""
        f = self.last_cull
        visible = drawn if f.result is None else int(f.result.visible.shape[0])
        return self.stage_counts(f.planes, f.eye, frustum=f.frustum,
                                 view_distance=f.view_distance, occlusion=f.occlusion != "off",
                                 visible=visible, drawn=drawn, frame=frame)

    def stage_counts(self, planes: np.ndarray, eye: np.ndarray, *, frustum: bool,
                     view_distance: bool, occlusion: bool, visible: int, drawn: int,
                     centers: np.ndarray | None = None, radii: np.ndarray | None = None,
                     view_distances: np.ndarray | None = None,
                     frame: int = 0) -> StageCounts:
        """How many objects each stage culled this frame (``stat initviews``).

        ``visible``: the size of this frame's query answer (with frustum culling off: of the
        view-distance filter); ``drawn``: the objects the frame drew. Without view distance
        and occlusion the query answer is the frustum's count and nothing is read; otherwise
        one compiled pass over every row (:func:`count_in_view`, the indexes' predicates)
        counts the objects in the frustum and those also within view distance, in scenes
        over :data:`COUNT_ROWS_PER_FRAME` rows only every few frames (the others repeat the
        last counts with ``counted=False``, occlusion recomputed from them). The object
        arrays default to the held ones.

        The frustum's and view distance's counts cannot come out of a query that prunes by
        view distance or occlusion: it never looks at the objects of a node it rejects that
        way, whether they are in the frustum or not. Hence the pass, which streams the rows
        (24,000 objects 0.03 ms, 60,000 0.07 ms; the live index's frustum-only query takes
        0.1 ms for either).
        """
        if centers is None:
            _, centers, radii, view_distances = self._objects
        n = int(centers.shape[0])
        if not frustum:
            return StageCounts(n, None, n - visible if view_distance else None, None, drawn)
        if not view_distance and not occlusion:
            return StageCounts(n, n - visible, None, None, drawn)
        every = max(1, -(-n // COUNT_ROWS_PER_FRAME))
        key = (bool(view_distance), n)
        counted = every == 1 or frame % every == 0 or self._counts_key != key
        if counted:
            self._in_view = count_in_view(centers, radii, view_distances, planes, eye,
                                          bool(view_distance))
            self._counts_key = key
        f, d = self._in_view
        return StageCounts(n, n - f, f - d if view_distance else None,
                           max(d - drawn, 0) if occlusion else None, drawn, counted)


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
    counted = False
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
                    res = p.cull(planes, eye, frustum=True, view_distance=use_vd)
                    if not counted:  # the HUD's stage counts, once
                        n_vis = int(res.visible.shape[0])
                        p.stage_counts(planes, eye, frustum=True, view_distance=use_vd,
                                       occlusion=False, visible=n_vis, drawn=n_vis,
                                       centers=centers, radii=radii, view_distances=vd)
                counted = True
                p.index.node_boxes()
                p.index.node_outcomes()
            except Exception:  # noqa: BLE001, S112 - reported when the user switches to it
                continue
            out[cfg.label()] = (time.perf_counter() - t0) * 1e3
    return out
