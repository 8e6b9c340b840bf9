"""Occlusion culling for the frame sequence: the viewer's occlusion provider.

The provider builds Z-pyramids and measures ground truth; it never culls. The culls are the
pipeline's (:meth:`CullPipeline.first_cull`, :meth:`CullPipeline.late_cull`), run by the
frame's passes (:meth:`app.viewer.frame.Frame.run`):

``previous``  Shagam 2.2.3 / Greene: the cull of frame N tests node boxes and object spheres
              against the Z-pyramid of frame N-1's depth, with frame N-1's view-projection
              (:meth:`OcclusionPyramids.last_frame_pyramid`). After the main pass the depth is
              reduced and its read-back started; the next frame maps it
              (:meth:`DepthPyramid.previous`), so no frame waits for its own reduction.
              Objects that become visible suddenly appear a frame late (popping).

``two-pass``  popping-free, one query a frame (niagara's early and late cull). The early cull
              draws last frame's visible set (the ids still inside this frame's frustum and
              view distance, at their new positions) without querying the index. This
              frame's depth is then reduced and read back at once (``build_pyramid`` returns
              it), the late cull queries the index with this frame's camera against it,
              and the objects it finds that the early cull did not draw are drawn; the late
              cull's visible set is next frame's early set. An object with a visible pixel in
              the final image is in front of the early draw's depth there, so the conservative
              test keeps it: no false negatives.

A frozen culling camera (Z, and X to see it from outside) culls with its own pyramid: the
frame's depth is the view camera's, so :meth:`OcclusionPyramids.depth_seen_by` draws the
objects of the first cull once more, depth only, from the frozen camera, and the pyramid is
built from that (an extra depth pass only while frozen). A pyramid of the view camera's depth
tested with the frozen camera's matrices hid objects the frozen camera sees (and kept others).

Ground truth (``ground_truth=True``): after the culls, an id buffer of every object in the view
frustum (same size, same matrices) gives ``true_visible``; ``false_negatives`` counts truly
visible objects the frame did not draw.

Log columns: ``occlusion_ms`` (pyramid reduction + read-back), ``occlusion_cull_ms`` (two-pass:
the late cull; the viewer's ``cull_ms`` is then only the early cull), ``occluded_nodes``,
``occluded_objects`` (every object an occlusion test rejected, alone or under an occluded
node; two-pass's early pass may have drawn some of them, which the HUD's stage line counts as
drawn), ``second_pass`` (objects drawn by the late pass), and with ground truth
``true_visible``, ``false_negatives``, ``ground_truth_ms``.
"""

from __future__ import annotations

import time
from typing import Any

import moderngl
import numpy as np

from app.geom.zpyramid import ZPyramid
from app.render.depth_pyramid import DepthPyramid

MODES = ("off", "previous", "two-pass")
GROUND_TRUTH_COLUMNS = ("true_visible", "false_negatives", "ground_truth_ms")
BASE_COLUMNS = ("occlusion_ms", "occlusion_cull_ms", "occluded_nodes", "occluded_objects",
                "second_pass")
_DEPTH_ONLY_LIGHT = np.array([0.0, 1.0, 0.0])  # the object shader wants one; depth ignores it
NO_GROUND_TRUTH = {"true_visible": "", "false_negatives": 0, "ground_truth_ms": 0.0}


class OcclusionPyramids:
    """The occlusion provider: builds the Z-pyramids (GPU reduction, read-back) and measures
    ground truth with an id buffer; the viewer runs the culls."""

    def __init__(self, ctx: moderngl.Context, mode: str, *, ground_truth: bool = False,
                 meshes=None, first_level: int | None = None, cpu_texels: int = 16384) -> None:
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
        self._frozen: tuple[moderngl.Texture, moderngl.Framebuffer] | None = None
        self._idbuf = None
        self._vals: dict[str, Any] = {}
        self._pending_ms = 0.0  # previous mode: the map in last_frame_pyramid(), for this row
        self.last_false_negatives = np.zeros(0, np.int64)
        self.last_true_visible: np.ndarray | None = None  # this frame's, when measured
        self.totals = {"frames": 0, "true_visible": 0, "false_negatives": 0,
                       "worst_fn": 0, "worst_fn_frame": -1}

    def _pyramid_for(self, size: tuple[int, int]) -> DepthPyramid:
        if self._pyr is None or self._pyr.size != tuple(size):
            if self._pyr is not None:
                self._pyr.release()
            self._pyr = DepthPyramid(self.ctx, size, first_level=self.first_level,
                                     cpu_texels=self.cpu_texels)
        return self._pyr

    # ------------------------------------------------------------------ pyramids

    def last_frame_pyramid(self) -> ZPyramid | None:
        """``previous``: the pyramid of the last frame's depth, for this frame's cull (None on
        the first frame). None in the other modes."""
        if self.mode != "previous":
            self._pending_ms = 0.0
            return None
        t0 = time.perf_counter()
        p = self._pyr.previous(1) if self._pyr is not None else None
        self._pending_ms = (time.perf_counter() - t0) * 1e3
        return p

    def depth_seen_by(self, cull_view, objects, size: tuple[int, int]) -> moderngl.Texture:
        """The depth of the objects ``objects`` holds for this frame (the first cull's) drawn
        from ``cull_view`` at ``size``: what a frozen culling camera sees, for its pyramid."""
        tex, fbo = self._frozen_target(size)
        fbo.use()
        self.ctx.viewport = (0, 0, *tex.size)
        self.ctx.enable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        self.ctx.disable(moderngl.BLEND)
        self.ctx.depth_func = "<"
        fbo.clear(depth=1.0)
        objects.draw(cull_view.viewproj, _DEPTH_ONLY_LIGHT)
        return tex

    def _frozen_target(self, size: tuple[int, int]):
        """A depth-only framebuffer of ``size`` for :meth:`depth_seen_by`, kept between frames."""
        size = (int(size[0]), int(size[1]))
        if self._frozen is None or self._frozen[0].size != size:
            self._release_frozen()
            tex = self.ctx.depth_texture(size)
            self._frozen = (tex, self.ctx.framebuffer(depth_attachment=tex))
        return self._frozen

    def _release_frozen(self) -> None:
        if self._frozen is not None:
            self._frozen[1].release()
            self._frozen[0].release()
            self._frozen = None

    def build_pyramid(self, depth: moderngl.Texture, size: tuple[int, int],
                      viewproj: np.ndarray) -> ZPyramid | None:
        """Reduce this frame's ``depth`` after the main pass. ``two-pass`` returns the pyramid
        now (the late cull tests against it); ``previous`` starts the read-back that the next
        frame maps and returns None; ``off`` (ground truth only) builds nothing."""
        # Wait for the main pass here, so that occlusion_ms is the pyramid's own cost (the
        # viewer finishes the frame right after its occlusion passes anyway).
        self.ctx.finish()
        t0 = time.perf_counter()
        zp = None
        ms = 0.0
        if self.mode == "previous":
            self._pyramid_for(size).build(depth, viewproj)
            ms = round(self._pending_ms + (time.perf_counter() - t0) * 1e3, 4)
        elif self.mode == "two-pass":
            zp = self._pyramid_for(size).build_now(depth, viewproj)
            ms = round((time.perf_counter() - t0) * 1e3, 4)
        self._vals = {"occlusion_cull_ms": 0.0, "second_pass": 0, "occlusion_ms": ms}
        return zp

    def note_cull(self, result, late_cull_ms: float | None = None, second_pass: int = 0) -> None:
        """The frame's figures for the log and the HUD: what its cull (two-pass: the late cull)
        occluded, and for two-pass the late cull's time and what the late pass drew."""
        v = self._vals
        if late_cull_ms is not None:
            v["occlusion_cull_ms"] = round(late_cull_ms, 4)
        v["second_pass"] = int(second_pass)
        v["occluded_nodes"] = int(getattr(result, "occluded_nodes", 0))
        v["occluded_objects"] = int(getattr(result, "occluded_objects", 0))

    # ------------------------------------------------------------------ ground truth

    def measure_ground_truth(self, view, size: tuple[int, int], in_view: np.ndarray | None,
                             drawn: np.ndarray, objects, frame_index: int,
                             started: float) -> None:
        """Which of ``in_view`` (every object in ``view``'s frustum: the exact answer of an
        unoccluded query) own a pixel of an id buffer drawn with ``view``'s matrices, and which
        of those are not in ``drawn``. ``in_view`` None: frustum culling is off, nothing is
        measured. ``started``: when the measurement began (the caller's query is part of it)."""
        self.last_true_visible = None
        if in_view is None:
            self._vals.update(NO_GROUND_TRUTH)
            return
        mesh_of = getattr(objects, "mesh", None)
        true_vis = self._id_buffer(size).render(view.viewproj, in_view, objects.centers[in_view],
                                                objects.radii[in_view],
                                                None if mesh_of is None else mesh_of[in_view])
        fn = np.setdiff1d(true_vis, drawn)
        t = self.totals
        t["frames"] += 1
        t["true_visible"] += int(true_vis.shape[0])
        t["false_negatives"] += int(fn.shape[0])
        if fn.shape[0] > t["worst_fn"]:
            t["worst_fn"] = int(fn.shape[0])
            t["worst_fn_frame"] = int(frame_index)
        self.last_false_negatives = fn
        self.last_true_visible = true_vis
        self._vals.update(true_visible=int(true_vis.shape[0]), false_negatives=int(fn.shape[0]),
                          ground_truth_ms=round((time.perf_counter() - started) * 1e3, 4))

    def _id_buffer(self, size: tuple[int, int]):
        if self._idbuf is None or self._idbuf.size != tuple(size):
            from app.render.id_buffer import IdBuffer
            from app.render.meshes import load_mesh

            if self._idbuf is not None:
                self._idbuf.release()
            self._idbuf = IdBuffer(self.ctx, size, self.meshes or [load_mesh("cube")])
        return self._idbuf

    # ------------------------------------------------------------------ log and HUD

    def log_values(self) -> dict[str, Any]:
        return dict(self._vals)

    def hud_lines(self) -> list[str]:
        v = self._vals
        lines = []
        if self.mode != "off":
            # The objects occlusion culled are the stage line's count (those the test rejected
            # less those two-pass's early pass drew anyway); the log keeps the test's own.
            lines.append(f"occlusion {self.mode}: occluded nodes {v.get('occluded_nodes', 0):,}"
                         f"   pyramid {v.get('occlusion_ms', 0):.2f} ms")
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
        self._release_frozen()
        if self._pyr is not None:
            self._pyr.release()
            self._pyr = None
        if self._idbuf is not None:
            self._idbuf.release()
            self._idbuf = None


def create_provider(viewer, mode: str, ground_truth: bool = False) -> OcclusionPyramids | None:
    """Factory for ``Viewer(occlusion_factory=...)``: ``lambda v, m: create_provider(v, m, gt)``.

    ``mode`` "off" gives a provider that only measures ground truth (no pyramid), or None
    without ground truth. ``viewer`` gives the GL context and the meshes the id buffer draws.
    """
    if mode == "off" and not ground_truth:
        return None
    return OcclusionPyramids(viewer.ctx, mode, ground_truth=ground_truth,
                             meshes=viewer.objects.meshes)
