"""The viewer's side of hierarchical scenes (issue 15, Shagam 2.2.2 and figure 2.5).

A scene with ``[[frame]]`` tables (``app/scene/groups.py``) is culled by a
:class:`app.spatial.nested.NestedIndex` instead of one flat index: :class:`NestedPipeline`
takes the place of the frame's :class:`CullPipeline` (same methods, so the frame, the keys and
the HUD run unchanged). Per frame it hands the index the turning groups' transforms
(``set_transforms``) and the objects that moved in their groups (``update(None, ids,
local)``), then ``query_frustum``; the answer feeds the same upload and draw. The index
hotkeys (``I``, ``L``, ``+``/``-``) and ``--index`` choose the kind used *inside* every group
(``NestedIndex.rebuild``). Node boxes are drawn as the rotated boxes they are
(``app/render/oriented_boxes.py``): each group's box of its objects (figure 2.5's root boxes,
also for ``brute``) and the inner indexes' node boxes, coloured by group or by outcome.
Occlusion (previous frame's pyramid, two-pass's late cull) is the nested index's own
(``app/spatial/nested/occlude.py``): the frame, the HUD's stage counts and the ground truth
run as for a flat index.
"""

from __future__ import annotations

import time

import numpy as np

from app.culling.pipeline import CullPipeline, IndexConfig
from app.geom.predicates import (
    NODE_INSIDE,
    NODE_NOT_VISITED,
    NODE_PARTIAL,
    NODE_REJECT_OCCLUSION,
)
from app.spatial import QueryResult, create_index
from app.spatial.nested import NestedIndex

#: Partly visible groups with at least this many objects are asked through their own index
#: (the cloud of 1,500 sprites), smaller ones (a segment's four parts, the lights) are scanned
#: inside the compiled descent: what the paper's unsplit segment trees amount to. The inner
#: kind then shapes the cloud's working set and boxes, as in figure 2.5.
VIEWER_INNER_MIN = 256

#: Group colours of the "by group" box colouring (the B key's first mode here).
GROUP_PALETTE = np.array([
    [1.00, 0.85, 0.20], [0.30, 0.90, 0.30], [0.25, 0.75, 1.00], [0.85, 0.40, 1.00],
    [1.00, 0.45, 0.35], [0.50, 1.00, 0.85], [1.00, 0.65, 0.85], [1.00, 1.00, 1.00],
], np.float32)


class NestedPipeline(CullPipeline):
    """A :class:`CullPipeline` whose index is a nested index over the scene's hierarchy."""

    def __init__(self, config: IndexConfig, scene) -> None:
        super().__init__(config)
        self.scene = scene
        self.hierarchy = scene.hierarchy
        self.index: NestedIndex | None = None
        self.boxes = None  # OrientedBoxes, made on first use (needs the GL context)
        self.last_extra: dict = {}
        h = self.hierarchy
        self._gids = np.arange(len(h), dtype=np.int64)
        self._movers = scene.objects.ids[h.local_movers]
        self._mover_rows = h.local_movers
        self._split: int | None = None
        # each group's top-level ancestor's rank (group -1, the world's objects, last)
        top = np.arange(len(h) + 1, dtype=np.int64)
        for g in range(len(h)):  # parents first; a few hundred groups, once
            p = int(h.parent[g])
            if p >= 0:
                top[g] = top[p]
        roots = [g for g in range(len(h)) if h.parent[g] < 0]
        rank = np.zeros(len(h) + 1, np.int64)
        rank[roots] = np.arange(len(roots))
        rank[len(h)] = len(roots)
        self._top_rank = rank[top]
        self._top_labels = [h.labels[g] for g in roots]

    # ------------------------------------------------------------------ build

    def _inner_min(self) -> int | None:
        return None if self.config.name == "brute" else VIEWER_INNER_MIN

    def build(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray,
              view_distances: np.ndarray | None) -> float:
        """(Re)build the nested index with the configured inner kind: from the hierarchy the
        first time, then ``NestedIndex.rebuild`` (the same groups, transforms and objects)."""
        t0 = time.perf_counter()
        self._hold(ids, centers, radii, view_distances)
        kw = self.config.index_kwargs()
        probe = create_index(self.config.name, **kw)  # a bad kind or argument fails here
        split = getattr(probe, "split_threshold", None)
        self._split = int(split) if isinstance(split, int | np.integer) else None
        if self.index is None:
            self.index = self._from_hierarchy(kw)
        else:
            self.index = self.index.rebuild(self.config.name, inner_min=self._inner_min(), **kw)
        self.last_rebuild_ms = (time.perf_counter() - t0) * 1e3
        return self.last_rebuild_ms

    def _from_hierarchy(self, kw: dict) -> NestedIndex:
        h = self.hierarchy
        o = self.scene.objects
        idx = NestedIndex(self.config.name, inner_min=self._inner_min(), **kw)
        for g in range(len(h)):  # groups, parents first (a few hundred, at build time)
            p = int(h.parent[g])
            idx.add_group(g, None if p < 0 else p, h.matrices[g])
        idx.add_group(-1)  # objects of no frame: a group at the world's origin
        rows = h.instance_of
        order = np.argsort(rows, kind="stable")
        groups, starts = np.unique(rows[order], return_index=True)
        for g, part in zip(groups.tolist(), np.split(order, starts[1:]), strict=True):
            vd = h.local_vd[part]
            idx.insert(int(g), o.ids[part], h.local[part], h.local_radii[part],
                       vd if np.isfinite(vd).any() else None)
        return idx

    def split_threshold(self) -> int | None:
        """The inner indexes' threshold."""
        return self.config.split_threshold if self.config.split_threshold is not None \
            else self._split

    # ------------------------------------------------------------------ per frame

    def update(self, moved: np.ndarray, centers: np.ndarray | None = None) -> None:
        """After a scene step: the turning groups' new transforms in one batch, the objects
        that moved in their groups in one call (nothing when the step moved nothing)."""
        if not moved.shape[0] or self.index is None:
            return
        h = self.hierarchy
        if h.turning.shape[0]:
            self.index.set_transforms(h.turning, h.matrices[h.turning])
        if self._movers.shape[0]:
            self.index.update(None, self._movers, h.local[self._mover_rows])

    def cull(self, planes: np.ndarray, eye: np.ndarray, *, frustum: bool, view_distance: bool,
             occlusion=None, among: np.ndarray | None = None, all_ids=None, centers=None,
             radii=None, view_distances=None) -> QueryResult | None:
        """The nested query, against the ``occlusion`` pyramid when one is given (previous
        frame's, or two-pass's late cull: world spheres tested as a flat index tests its
        spheres, ``app/spatial/nested/occlude.py``); the early cull of two-pass occlusion and
        frustum culling off as in :class:`CullPipeline`."""
        if among is not None or not frustum:
            return super().cull(planes, eye, frustum=frustum, view_distance=view_distance,
                                among=among, all_ids=all_ids, centers=centers, radii=radii,
                                view_distances=view_distances)
        res = self.index.query_frustum(planes, eye=eye, use_view_distance=view_distance,
                                       occlusion=occlusion)
        self.last_result = res
        self.last_extra = dict(res.extra or {})
        return res

    # ------------------------------------------------------------------ overlays

    #: Frame-log columns of a nested scene (the last query's figures).
    LOG_COLUMNS = ("groups_visited", "inner_queries")

    def log_values(self) -> dict[str, int]:
        """The log's cells: groups visited and inner-index queries of the last query."""
        e = self.last_extra
        return {"groups_visited": int(e.get("groups_visited", 0)),
                "inner_queries": int(e.get("inner_queries", 0))}

    def hud_lines(self) -> list[str]:
        """The nested index's own HUD line: groups, inner kind, groups visited, inner queries."""
        h = self.index
        if h is None:
            return []
        e = self.last_extra
        line = (f"nested: {len(self.hierarchy) + 1} groups, {self.config.label()} inside each "
                f"(own index for groups of >= {self._inner_min() or 'no'} objects)   groups "
                f"visited {e.get('groups_visited', 0):,}   inner queries "
                f"{e.get('inner_queries', 0):,}")
        return [line]

    def box_data(self, mode: str) -> tuple[np.ndarray, np.ndarray, list, tuple[str, list]]:
        """(corners (K, 8, 3), RGBA (K, 4), depth for the N filter (K,), legend) of the group
        boxes and the inner node boxes; ``mode`` "depth" colours by group, "outcome" by the
        last query's outcome."""
        from app.render.boxes import outcome_colors, outcome_legend

        h = self.index
        gc, gids, gdepth, gcode = h.group_boxes()
        nc, nids, ndepth, ngdepth = h.node_boxes_info()
        corners = np.concatenate([gc, nc]) if nc.shape[0] else gc
        # N's depth: a group box at its scene depth, an inner node one level below its group
        depth = np.concatenate([gdepth, ngdepth + 1 + ndepth]).astype(np.int64)
        gid_all = np.array(list(gids) + list(nids), np.int64)
        if mode == "outcome":
            codes = np.concatenate([gcode.astype(np.int64), self._node_codes(nids, gids, gcode)])
            cols = outcome_colors(codes)
            legend = ("box outcome:", outcome_legend())
        else:
            top = self._top_group(gid_all)
            cols = np.empty((gid_all.shape[0], 4), np.float32)
            cols[:, :3] = GROUP_PALETTE[top % len(GROUP_PALETTE)]
            cols[:, 3] = 0.7
            names = self._top_names()
            legend = ("box group:", [(n, (*GROUP_PALETTE[k % len(GROUP_PALETTE)].tolist(), 1.0))
                                     for k, n in enumerate(names)])
        return corners, cols, depth, legend

    def box_outcomes(self) -> tuple:
        """For the frame inspector (``app/viewer/inspect.py``): (group corners (G, 8, 3),
        group ids, scene depth (G,), outcome codes (G,), node corners (K, 8, 3), each node's
        group id, node depth (K,), its group's scene depth (K,), outcome codes (K,)), the
        codes as :meth:`box_data`'s outcome colouring reads them."""
        h = self.index
        gc, gids, gdepth, gcode = h.group_boxes()
        nc, nids, ndepth, ngdepth = h.node_boxes_info()
        return (gc, gids, gdepth, gcode.astype(np.int64), nc, nids, ndepth, ngdepth,
                self._node_codes(nids, gids, gcode))

    def group_labels(self, gids: list) -> list[str]:
        """Each group id's name in the scene (``NAME#k`` of a frame copy; -1: "world")."""
        labels = self.hierarchy.labels
        return [labels[g] if 0 <= g < len(labels) else "world" for g in gids]

    def _top_group(self, gids: np.ndarray) -> np.ndarray:
        """Each group's top-level ancestor's position among the top-level groups."""
        return self._top_rank[np.where(gids < 0, len(self.hierarchy), gids)]

    def _top_names(self) -> list[str]:
        return list(self._top_labels)

    def _node_codes(self, nids: list, gids: list, gcode: np.ndarray) -> np.ndarray:
        """Outcome of each inner node box: its group's when the group was not asked through
        its index (inside: inside; partly visible and scanned in the descent: partial; hidden
        by the occlusion gate: occluded; rejected: not visited below a rejected group), else
        the inner index's own."""
        if not nids:
            return np.zeros(0, np.int64)
        keys = np.array(nids, np.int64)
        gk = np.array(gids, np.int64)
        # every box gets its group's outcome (inside, partial; else not visited) ...
        at = np.searchsorted(gk, keys, sorter=np.argsort(gk))
        srt = np.argsort(gk)
        own = gcode.astype(np.int64)[srt[np.clip(at, 0, max(gk.shape[0] - 1, 0))]]
        out = np.where((own == NODE_INSIDE) | (own == NODE_PARTIAL)
                       | (own == NODE_REJECT_OCCLUSION), own, NODE_NOT_VISITED)
        # ... but a partly visible group asked through its own index has its nodes' outcomes
        lim = self._inner_min()
        if lim is None:
            return out
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        ends = np.r_[starts[1:], keys.shape[0]]
        starts = starts[out[starts] == NODE_PARTIAL]  # only those can have been asked ...
        if not starts.shape[0]:
            return out
        h = self.index  # ... and only if large enough (the group sizes, read, not flushed)
        sizes = h._G.b_count[[h._slot[k] for k in keys[starts].tolist()]]
        big = sizes >= lim
        for s, e in zip(starts[big].tolist(), ends[np.searchsorted(ends, starts[big], "right")]
                        .tolist(), strict=True):
            codes = h.group_index(int(keys[s])).node_outcomes()
            if codes.shape[0] == e - s:
                out[s:e] = codes
        return out


def draw_boxes(viewer, view) -> None:
    """The B overlay of a nested scene: group boxes and inner node boxes, turned with their
    groups, by group (B's "depth" mode) or by outcome, filtered by N, with their legend."""
    import moderngl

    from app.render.boxes import select_boxes
    from app.render.oriented_boxes import OrientedBoxes

    p, tg = viewer.pipeline, viewer.toggles
    corners, cols, depth, legend = p.box_data(tg.boxes)
    ov = viewer.overlays
    ov.box_total = int(corners.shape[0])
    ov.legend = legend
    if tg.box_filter != "all" and corners.shape[0]:
        keep = select_boxes(corners.min(axis=1), corners.max(axis=1), depth, tg.box_filter)
        corners, cols = corners[keep], cols[keep]
    if p.boxes is None:
        p.boxes = OrientedBoxes(viewer.ctx)
    viewer.ctx.disable(moderngl.DEPTH_TEST)
    ov.box_count = p.boxes.set_boxes(corners, cols)
    p.boxes.draw(view.viewproj)
