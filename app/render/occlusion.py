"""Occlusion culling for the frame sequence: the viewer's occlusion provider.

Two modes (``app.viewer.frame.OcclusionProvider`` is the interface):

``previous``  Shagam 2.2.3 / Greene: the cull of frame N tests node boxes and object spheres
              against the Z-pyramid of frame N-1's depth, with frame N-1's view-projection.
              After the main pass the depth is reduced and its read-back started; the next
              frame maps it (:meth:`DepthPyramid.previous`), so no frame waits for its own
              reduction. Objects that become visible suddenly appear a frame late (popping).

``two-pass``  popping-free, one query a frame. Pass 1 draws last frame's visible set (the
              ids still inside this frame's frustum and view distance, at their new
              positions; :meth:`first_pass_ids`) without querying the index. This frame's
              depth is then reduced and read back at once, the index is queried with this
              frame's camera against that pyramid, and the objects it finds that pass 1 did
              not draw are returned for a second draw; the query's visible set is next
              frame's pass 1. An object with a visible pixel in the final image is in front
              of pass 1's depth there, so the conservative test keeps it: no false negatives.

Ground truth (``ground_truth=True``): after the frame is drawn, an id buffer of every object in
the frustum (same size, same matrices) gives ``true_visible``; ``false_negatives`` counts
truly visible objects the cull did not draw.

Log columns: ``occlusion_ms`` (pyramid reduction + read-back), ``occlusion_cull_ms`` (two-pass:
the frame's one query; the viewer's ``cull_ms`` is then only pass 1's filter of last frame's
visible set), ``occluded_nodes``, ``occluded_objects``,
``second_pass`` (objects drawn by the second pass), and with ground truth ``true_visible``,
``false_negatives``, ``ground_truth_ms``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from app.culling.frustum import filter_in_view
from app.geom.zpyramid import ZPyramid
from app.render.depth_pyramid import DepthPyramid

MODES = ("off", "previous", "two-pass")
GROUND_TRUTH_COLUMNS = ("true_visible", "false_negatives", "ground_truth_ms")
BASE_COLUMNS = ("occlusion_ms", "occlusion_cull_ms", "occluded_nodes", "occluded_objects",
                "second_pass")


class OcclusionCuller:
    """The occlusion provider: owns the GPU pyramid (and the id buffer for ground truth)."""

    def __init__(self, ctx, mode: str, *, ground_truth: bool = False, meshes=None,
                 first_level: int | None = None, cpu_texels: int = 16384) -> None:
        if mode not in MODES:
            raise ValueError(f"occlusion mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.ctx = ctx
        self.mode = mode
        self.ground_truth = bool(ground_truth)
        self.meshes = meshes
        self.first_level = first_level
        self.cpu_texels = cpu_texels
        self.log_columns = BASE_COLUMNS + (GROUND_TRUTH_COLUMNS if self.ground_truth else ())
        self._pyr: DepthPyramid | None = None
        self._idbuf = None
        self._last_visible = np.zeros(0, np.int64)  # two-pass: last query's visible ids
        self._vals: dict[str, Any] = {}
        self._pending_ms = 0.0  # previous mode: the map in pyramid(), added to the next row
        self.totals = {"frames": 0, "true_visible": 0, "false_negatives": 0,
                       "worst_fn": 0, "worst_fn_frame": -1}

    # ------------------------------------------------------------------ helpers

    def _pyramid_for(self, size: tuple[int, int]) -> DepthPyramid:
        if self._pyr is None or self._pyr.size != tuple(size):
            if self._pyr is not None:
                self._pyr.release()
            self._pyr = DepthPyramid(self.ctx, size, first_level=self.first_level,
                                     cpu_texels=self.cpu_texels)
        return self._pyr

    # ------------------------------------------------------------------ provider API

    def first_pass_ids(self, cull, view_distance: bool, objects) -> np.ndarray | None:
        """two-pass: the ids to draw before any query, i.e. last frame's visible set minus what
        left the frustum ``cull`` (or, with ``view_distance``, its view distance); the viewer
        then skips its cull. None in the other modes."""
        if self.mode != "two-pass":
            return None
        return filter_in_view(self._last_visible, objects.centers, objects.radii,
                              objects.view_distances, cull.planes, cull.eye, bool(view_distance))

    def pyramid(self) -> ZPyramid | None:
        """The pyramid this frame's cull tests against (``previous``: the last frame's; None
        on the first frame and in the other modes)."""
        if self.mode != "previous":
            self._pending_ms = 0.0
            return None
        t0 = time.perf_counter()
        p = self._pyr.previous(1) if self._pyr is not None else None
        self._pending_ms = (time.perf_counter() - t0) * 1e3
        return p

    def after_main_pass(self, frame) -> np.ndarray | None:
        """Build the pyramid from ``frame.target.depth``; two-pass: run the frame's query
        (its result replaces ``frame.result``) and return the ids to add."""
        target = frame.target
        pyr = self._pyramid_for(target.size)
        vals: dict[str, Any] = {"occlusion_cull_ms": 0.0, "second_pass": 0}
        res = frame.result
        extra = None
        # Wait for the main pass here, so that occlusion_ms is the pyramid's own cost (the
        # viewer finishes the frame right after this hook anyway).
        self.ctx.finish()
        t0 = time.perf_counter()
        if self.mode == "off":
            vals["occlusion_ms"] = 0.0
        elif self.mode == "previous":
            pyr.build(target.depth, frame.view.viewproj)
            vals["occlusion_ms"] = round(self._pending_ms + (time.perf_counter() - t0) * 1e3, 4)
        else:
            zp = pyr.build_now(target.depth, frame.view.viewproj)
            vals["occlusion_ms"] = round((time.perf_counter() - t0) * 1e3, 4)
            index = _index_of(frame)
            if frame.visible is not None and index is not None:  # frustum culling is on
                t1 = time.perf_counter()
                res = index.query_frustum(frame.cull.planes, eye=frame.cull.eye,
                                          use_view_distance=_use_vd(frame), occlusion=zp)
                # Both are sets of unique ids: a sorted membership test, ~7x cheaper than
                # setdiff1d (which sorts the concatenation) at ~1,000 ids.
                extra = res.visible[~np.isin(res.visible, frame.visible, assume_unique=True)]
                vals["occlusion_cull_ms"] = round((time.perf_counter() - t1) * 1e3, 4)
                vals["second_pass"] = int(extra.shape[0])
                self._last_visible = res.visible.copy()  # the index may reuse its buffers
                frame.result = res
        vals["occluded_nodes"] = int(getattr(res, "occluded_nodes", 0)) if res is not None else 0
        vals["occluded_objects"] = (int(getattr(res, "occluded_objects", 0))
                                    if res is not None else 0)
        if self.ground_truth:
            vals.update(self._ground_truth(frame, extra))
        self._vals = vals  # the viewer binds its target again for what follows
        return extra

    def _ground_truth(self, frame, extra: np.ndarray | None) -> dict[str, Any]:
        t0 = time.perf_counter()
        objs = _objects_of(frame)
        index = _index_of(frame)
        if frame.visible is None or objs is None or index is None:
            return {"true_visible": "", "false_negatives": 0, "ground_truth_ms": 0.0}
        if self._idbuf is None or self._idbuf.size != tuple(frame.target.size):
            from app.render.id_buffer import IdBuffer
            from app.render.meshes import load_mesh

            if self._idbuf is not None:
                self._idbuf.release()
            meshes = self.meshes or [load_mesh(n) for n in _mesh_names(frame)]
            self._idbuf = IdBuffer(self.ctx, frame.target.size, meshes)
        # Everything in the view frustum (and view distance, when culling by it), no occlusion.
        # The index's answer with occlusion=None equals the brute-force definition exactly.
        infr = index.query_frustum(frame.view.planes, eye=frame.view.eye,
                                   use_view_distance=_use_vd(frame), occlusion=None).visible
        mesh_of = getattr(objs, "mesh", None)
        true_vis = self._idbuf.render(frame.view.viewproj, infr, objs.centers[infr],
                                      objs.radii[infr],
                                      None if mesh_of is None else mesh_of[infr])
        drawn = frame.visible if extra is None else np.union1d(frame.visible, extra)
        fn = np.setdiff1d(true_vis, drawn)
        t = self.totals
        t["frames"] += 1
        t["true_visible"] += int(true_vis.shape[0])
        t["false_negatives"] += int(fn.shape[0])
        if fn.shape[0] > t["worst_fn"]:
            t["worst_fn"] = int(fn.shape[0])
            t["worst_fn_frame"] = int(getattr(frame.viewer, "frame_index", t["frames"] - 1))
        self.last_false_negatives = fn
        return {"true_visible": int(true_vis.shape[0]), "false_negatives": int(fn.shape[0]),
                "ground_truth_ms": round((time.perf_counter() - t0) * 1e3, 4)}

    def log_values(self) -> dict[str, Any]:
        return dict(self._vals)

    def hud_lines(self) -> list[str]:
        v = self._vals
        lines = []
        if self.mode != "off":
            lines.append(f"occlusion {self.mode}: occluded nodes {v.get('occluded_nodes', 0):,}"
                         f" objects {v.get('occluded_objects', 0):,}   pyramid "
                         f"{v.get('occlusion_ms', 0):.2f} ms")
        if self.mode == "two-pass":
            lines[0] += (f"   query {v.get('occlusion_cull_ms', 0):.2f} ms   second draw "
                         f"+{v.get('second_pass', 0):,}")
        if self.ground_truth:
            t = self.totals
            lines.append(f"ground truth: visible {v.get('true_visible', '-')}   false negatives "
                         f"{v.get('false_negatives', '-')}   run total {t['false_negatives']:,} of "
                         f"{t['true_visible']:,}   worst " + (
                             f"{t['worst_fn']} (frame {t['worst_fn_frame']})"
                             if t["worst_fn"] else "none"))
        return lines

    def release(self) -> None:
        if self._pyr is not None:
            self._pyr.release()
            self._pyr = None
        if self._idbuf is not None:
            self._idbuf.release()
            self._idbuf = None
        self._last_visible = np.zeros(0, np.int64)


def _index_of(frame):
    pipe = getattr(frame.viewer, "pipeline", None)
    return getattr(pipe, "index", None) if pipe is not None else getattr(frame.viewer, "index",
                                                                          None)


def _objects_of(frame):
    scene = getattr(frame.viewer, "scene", None)
    return getattr(scene, "objects", None)


def _mesh_names(frame) -> list[str]:
    return list(getattr(frame.viewer.scene, "meshes", None) or ["cube"])


def _use_vd(frame) -> bool:
    tg = getattr(frame.viewer, "toggles", None)
    return bool(getattr(tg, "view_distance", False))


def create_provider(viewer, mode: str, ground_truth: bool = False) -> OcclusionCuller | None:
    """Factory for ``Viewer(occlusion_factory=...)``: ``lambda v, m: create_provider(v, m, gt)``.

    ``mode`` "off" gives a provider that only measures ground truth (no pyramid), or None
    without ground truth.
    """
    if mode == "off" and not ground_truth:
        return None
    meshes = getattr(getattr(viewer, "objects", None), "meshes", None)
    return OcclusionCuller(viewer.ctx, mode, ground_truth=ground_truth, meshes=meshes)
