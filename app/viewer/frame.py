"""One frame's passes, top to bottom, shared by the window and the headless runner.

:meth:`Frame.run` reads as the frame (niagara's frame: early cull, draw, pyramid, late cull):

1. motion         ``scene.step(dt)`` -> moved ids (skipped while paused)
2a. reference     every 30 frames, the HUD's brute force timed here, where the live index
                  meets its rows (prepared after the cull of the frame before, 3a); a
                  measurement in no stage (:mod:`app.viewer.brute_reference`)
2. index update   ``pipeline.update(moved)`` (the pipeline holds the objects)
3. cull           ``pipeline.first_cull`` with the culling camera (the view camera unless
                  frozen): the query, against the last frame's pyramid with previous-frame
                  occlusion; two-pass occlusion's early cull instead keeps the previous frame's
                  visible set (which the pipeline holds) still in view
4. upload         the ids to draw (centres straight from the scene's array), grouped by mesh
                  kind, in one buffer write
5. main pass      clear, one instanced draw per mesh kind, into ``target`` (colour + depth
                  texture), waited for (``draw_ms``)
6. occlusion      the provider builds the pyramid from ``target.depth``; two-pass's late cull
                  (``pipeline.late_cull``) runs against it and the newly visible ids are
                  drawn; with ground truth the provider then measures the image
7. compare (A/B)  with a B index (``--compare``, F2): B's update and cull of this frame's
                  moved ids and culls ran right after A's (3b), or right before them on
                  every other frame (2b); now, with an occlusion mode of B's own (F3), the
                  depth of B's ids and its pyramid, then two-pass's late cull, then B's
                  answer against A's (:mod:`app.viewer.compare`); the parts are one stage of
                  their own (``compare_ms``), so that B never inflates A's
8. stage counts   what each stage of the culls removed (``pipeline.frame_stages``, when the
                  HUD or the log reads them; ``stages_ms``, which the viewer counts in the
                  HUD's stage)

Each pass is timed into its stage of the timing model (:mod:`app.viewer.timing`); the GPU is
waited for after the main pass and after the occlusion pass, so that drawing is not billed to
the pass that happens to wait for it.

The viewer (:mod:`app.viewer.viewer`) feeds it the time step, the cameras and the toggles,
then draws the overlays and writes the log row from the :class:`FrameStats` it returns.

Occlusion plugs in as an object (see :class:`OcclusionProvider`): it builds pyramids and
measures, the pipeline does every cull, this frame draws.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import moderngl
import numpy as np

from app.culling.pipeline import CullPipeline
from app.render.context import SceneTarget
from app.render.objects import ObjectRenderer
from app.viewer.brute_reference import BruteReference, wanted
from app.viewer.camera import CameraView
from app.viewer.compare import AFrame, Comparison, side_label
from app.viewer.state import FrameStats, Toggles

BACKGROUND = (0.09, 0.10, 0.13, 1.0)
LIGHT_DIR = np.array([0.35, 0.85, 0.40])


class OcclusionProvider(Protocol):
    """What ``app/render/occlusion.py`` implements: pyramids and measurements, no culls."""

    mode: str  # "off", "previous" or "two-pass": goes to the log's ``occlusion`` column
    ground_truth: bool  # measure the true visible set after the culls
    log_columns: tuple[str, ...]  # extra log columns, e.g. ("true_visible", "false_negatives")
    last_true_visible: np.ndarray | None  # ground truth's visible ids this frame (else None)

    def last_frame_pyramid(self):  # -> app.geom.zpyramid.ZPyramid | None
        """``previous``: the last frame's pyramid for this frame's cull; else None."""

    def build_pyramid(self, depth: moderngl.Texture, size: tuple[int, int],
                      viewproj: np.ndarray):  # -> ZPyramid | None
        """Reduce this frame's depth after the main pass; two-pass gets the pyramid now."""

    def depth_seen_by(self, cull_view: CameraView, objects: ObjectRenderer,
                      size: tuple[int, int]) -> moderngl.Texture:
        """A frozen culling camera's own depth of this frame's objects, for its pyramid."""

    def note_cull(self, result, late_cull_ms: float | None = None,
                  second_pass: int = 0) -> None: ...

    def measure_ground_truth(self, view: CameraView, size: tuple[int, int],
                             in_view: np.ndarray | None, drawn: np.ndarray, objects,
                             frame_index: int, started: float) -> None: ...

    def log_values(self) -> dict[str, Any]: ...

    def hud_lines(self) -> list[str]: ...

    def release(self) -> None: ...


class Frame:
    """The passes of a frame over one scene, its pipeline and its render target."""

    def __init__(self, ctx: moderngl.Context, scene, pipeline: CullPipeline,
                 target: SceneTarget, objects: ObjectRenderer, collision=None) -> None:
        self.ctx = ctx
        self.scene = scene
        self.pipeline = pipeline
        self.target = target
        self.objects = objects
        self.collision = collision  # the collision view: tints the balls in contact
        self.occlusion: OcclusionProvider | None = None
        self.sim_time = 0.0
        self.drawn_ids: np.ndarray | None = None  # the first cull's ids (None: all)
        self.compare: Comparison | None = None  # the B side of an A/B comparison
        self.reference: BruteReference | None = None  # the brute force's cost, now and then
        self._late_pyramid = None  # this frame's pyramid of two-pass's late cull (for B's)
        self._late_cull_ms = 0.0  # A's late cull (inside the occlusion stage)
        self._empty = np.zeros(0, np.int64)

    @property
    def late_cull_ms(self) -> float:
        """This frame's two-pass late cull of the live index (inside the occlusion stage)."""
        return self._late_cull_ms

    def set_occlusion(self, provider: OcclusionProvider | None) -> None:
        """A new provider (or none); two-pass's early set starts empty."""
        if self.occlusion is not None:
            self.occlusion.release()
        self.occlusion = provider
        self.pipeline.forget_visible()
        if self.compare is not None:
            self.compare.forget_visible()

    def run(self, dt: float, view: CameraView, cull_view: CameraView, tg: Toggles, *,
            frame_index: int = 0, count_stages: bool = True) -> FrameStats:
        """One frame, pass by pass (see the module docstring); the overlays are the
        viewer's."""
        st = FrameStats(frame=frame_index)
        scene, occ, p = self.scene, self.occlusion, self.pipeline

        # 1. motion
        t0 = time.perf_counter()
        moved = self._empty if tg.paused else np.asarray(scene.step(dt), np.int64)
        if not tg.paused:
            self.sim_time += dt
        st.moved = int(moved.shape[0])
        t1 = time.perf_counter()
        st.motion_ms = (t1 - t0) * 1e3

        # 2a. the brute-force reference's measured frame: timed where the live index is, a
        #     measurement in no stage (prepared at 3a of the frame before)
        cmp = self.compare if self.compare is not None and self.compare.active else None
        if self.reference is not None and self.reference.armed(st.frame):
            t1a = t1
            self._time_reference(st, moved, cull_view, tg, cmp)
            t1 = time.perf_counter()  # (the update's stage starts after it)
            st.reference_ms = (t1 - t1a) * 1e3

        # 2. index update (an A/B comparison's B goes first on every other frame: 2b)
        mode = "off" if occ is None else occ.mode
        pyramid = None if occ is None or mode == "two-pass" else occ.last_frame_pyramid()
        cull = {"frustum": tg.frustum, "view_distance": tg.view_distance, "occlusion": mode,
                "pyramid": pyramid}
        b_first = cmp is not None and cmp.goes_first()
        if b_first:
            cmp.update_and_cull(moved, cull_view.planes, cull_view.eye, **cull)
        t1b = time.perf_counter()
        p.update(moved)
        t2 = time.perf_counter()

        # 3. cull, with the culling camera
        first = p.first_cull(cull_view.planes, cull_view.eye, **cull)
        t3 = time.perf_counter()

        # 3a. the brute-force reference, every few frames: prepared for the next frame's
        #     measurement (2a), untimed, in no stage
        t3r = t3
        if self.reference is not None:
            self._prepare_reference(st, moved, cull_view, tg, cmp)
            t3r = time.perf_counter()
            st.reference_ms += (t3r - t3) * 1e3

        # 3b. compare: B's update and the same cull, right after A's (or before: 2b)
        if cmp is not None and not b_first:
            cmp.update_and_cull(moved, cull_view.planes, cull_view.eye, **cull)
        t3b = time.perf_counter()

        # 4. upload (the collision view tints the balls in contact first)
        if self.collision is not None:
            self.collision.tint(tg.collision)
        self.drawn_ids = first
        self.objects.use_centers(scene.objects.centers)
        st.drawn = self.objects.upload(first, view.eye)
        t4 = time.perf_counter()

        # 5. main pass
        self.bind_main_pass()
        self.target.fbo.clear(*BACKGROUND, depth=1.0)
        self.objects.draw(view.viewproj, LIGHT_DIR)
        self.ctx.finish()
        t_draw = time.perf_counter()

        # 6. occlusion: this frame's pyramid (previous: for the next frame); two-pass's late
        #    cull against it, then the draw of what the early cull missed. Ground truth is
        #    measured in between, so that its timing does not wait for that draw.
        self._late_pyramid, self._late_cull_ms = None, 0.0
        if occ is not None:
            self._occlusion_pass(view, cull_view, occ, st)
        self.ctx.finish()
        t5 = time.perf_counter()

        # 7. compare: B's late cull (two-pass), its answer against A's, the frame's record
        t6 = t5
        if cmp is not None:
            cmp.finish(self._a_frame(st, (t2 - t1b) * 1e3, (t3 - t2) * 1e3), cull_view,
                       self._late_pyramid)
            if cmp.own is not None:
                self.bind_main_pass()  # B's depth draw used its own target
            t6 = time.perf_counter()

        res = p.last_cull.result
        n = int(scene.objects.ids.shape[0])
        st.visible = st.drawn if res is None else int(res.visible.shape[0])
        st.working_set = n if res is None else int(res.working_set)
        st.nodes_visited = 0 if res is None else int(res.nodes_visited)
        st.cull_ms = (t3 - t2) * 1e3
        st.draw_ms = (t_draw - t4) * 1e3
        st.occlusion_pass_ms = (t5 - t_draw) * 1e3
        st.index_update_ms = (t2 - (t1b if cmp is not None else t1)) * 1e3
        st.upload_ms = (t4 - (t3b if cmp is not None else t3r)) * 1e3
        # 0 without B: the few microseconds between the timestamps stay in their stages
        st.compare_ms = (t1b - t1 + t3b - t3r + t6 - t5) * 1e3 if cmp is not None else 0.0
        st.time_s = self.sim_time

        # 8. stage counts (a measurement, like ground truth: its own time)
        if count_stages:
            st.stages = p.frame_stages(st.drawn)
            st.stages_ms = (time.perf_counter() - t6) * 1e3
        return st

    def _reference_wanted(self, tg: Toggles, cmp: Comparison | None) -> bool:
        """Whether the brute-force reference means something this frame
        (:func:`app.viewer.brute_reference.wanted`, with A/B's B index)."""
        b = cmp.pipeline.config.name if cmp is not None else None
        return wanted(self.pipeline.config.name, b, tg.frustum)

    def _time_reference(self, st: FrameStats, moved: np.ndarray, cull_view: CameraView,
                        tg: Toggles, cmp: Comparison | None) -> None:
        """Step 2a: the brute force's update + cull of this frame, timed before the live
        index's update (:mod:`app.viewer.brute_reference`), when it still means something
        (:func:`app.viewer.brute_reference.wanted`: the index may have been switched since
        3a prepared it)."""
        if self._reference_wanted(tg, cmp):
            st.brute = self.reference.measure(st.frame, moved, cull_view.planes, cull_view.eye,
                                              tg.view_distance)

    def _prepare_reference(self, st: FrameStats, moved: np.ndarray, cull_view: CameraView,
                           tg: Toggles, cmp: Comparison | None) -> None:
        """Step 3a: the brute force brought up to date and this frame's movers written, when
        the next frame is measured and the measurement means something; its wall time is in
        the frame's ``reference_ms``, left out of the frame's time."""
        ref = self.reference
        ref.note_moved(moved)
        if self._reference_wanted(tg, cmp) and ref.due(st.frame + 1):
            built = ref.pipeline
            ref.prepare(st.frame, moved, cull_view.planes, cull_view.eye, tg.view_distance)
            if ref.pipeline is not built:  # a hitch the user sees: named, though not timed
                ms = ref.pipeline.last_rebuild_ms
                st.stall = f"brute reference built {ms:.0f} ms (outside the frame's time)"

    def _a_frame(self, st: FrameStats, update_ms: float, cull_ms: float) -> AFrame:
        """A's side of this frame for the comparison (two-pass: early + late cull)."""
        p, occ = self.pipeline, self.occlusion
        vals = {} if occ is None else occ.log_values()
        truth = occ.last_true_visible if occ is not None and occ.ground_truth else None
        return AFrame(p.last_cull, side_label(p.config, p.split_threshold()), update_ms,
                      cull_ms + self._late_cull_ms, float(vals.get("occlusion_ms", 0.0)),
                      st.drawn, truth,
                      int(vals.get("false_negatives", -1)) if truth is not None else -1)

    def _occlusion_pass(self, view: CameraView, cull_view: CameraView,
                        occ: OcclusionProvider, st: FrameStats) -> None:
        """Step 6: the pyramid, two-pass's late cull and second draw, ground truth."""
        p = self.pipeline
        depth, vp = self.target.depth, view.viewproj
        if cull_view is not view:  # frozen: the pyramid of what the culling camera sees
            depth, vp = occ.depth_seen_by(cull_view, self.objects, self.target.size), \
                cull_view.viewproj
        pyramid = occ.build_pyramid(depth, self.target.size, vp)
        cull = p.last_cull
        newly = None
        if cull.two_pass:
            t_late = time.perf_counter()
            newly = p.late_cull(pyramid)
            self._late_pyramid = pyramid
            self._late_cull_ms = (time.perf_counter() - t_late) * 1e3
            occ.note_cull(cull.result, self._late_cull_ms, int(newly.shape[0]))
        else:
            occ.note_cull(cull.result)
        if occ.ground_truth:
            self._measure_ground_truth(view, cull.first, newly, st.frame)
        if newly is not None and newly.shape[0]:
            self.bind_main_pass()  # the pyramid and id-buffer passes changed the GL state
            st.drawn_late = self.objects.upload(newly, view.eye)
            st.drawn += st.drawn_late
            self.objects.draw(view.viewproj, LIGHT_DIR)

    def _measure_ground_truth(self, view: CameraView, first: np.ndarray | None,
                              newly: np.ndarray | None, frame_index: int) -> None:
        """Hand the provider every object in the view frustum (the contract's predicates over
        every object with the view camera, exact) and what this frame draws; measurement, not
        part of the frame. Not a query of the index under test: it would be measured against
        itself, and the query would overwrite the node outcomes the frame's cull left (the
        box overlay, the frame dump, a frozen camera seen from outside)."""
        started = time.perf_counter()
        in_view = drawn = None
        if first is not None:
            in_view = self.pipeline.cull(view.planes, view.eye, frustum=True,
                                         view_distance=self.pipeline.last_cull.view_distance,
                                         among=self.scene.objects.ids).visible
            drawn = first if newly is None else np.concatenate((first, newly))
        self.occlusion.measure_ground_truth(view, self.target.size, in_view, drawn,
                                            self.scene.objects, frame_index, started)

    def bind_main_pass(self) -> None:
        """The scene target and the state of the object draws (depth-tested, opaque,
        back faces culled)."""
        self.target.fbo.use()
        self.ctx.viewport = (0, 0, *self.target.size)
        self.ctx.enable(moderngl.DEPTH_TEST)
        self.ctx.disable(moderngl.BLEND)
        self.ctx.depth_func = "<"
        self.ctx.enable(moderngl.CULL_FACE)  # meshes are closed and wound counter-clockwise
