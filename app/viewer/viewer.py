"""The viewer: one scene, its live index and its frame, driven by keys and a camera; no window.

Its rooms, one job each: the frame's passes (:mod:`app.viewer.frame`, over the pipeline of
:mod:`app.culling.pipeline`), the key table (:mod:`app.viewer.keys`), the HUD's text
(:mod:`app.viewer.hud_text`), the overlays' drawing (:mod:`app.viewer.overlays`), the log and
screenshots (:mod:`app.viewer.capture`). The viewer holds the state the keys change (index,
toggles, frozen camera), feeds the frame its input and reads its results.

Keys reach the viewer as names (:meth:`Viewer.key`), so the window and headless tests drive
the same code; the view camera is a :class:`app.viewer.camera.CameraRig` (fly, the scene's
camera path, the outside orbit around a frozen culling camera) used by :meth:`Viewer.tick`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import moderngl

from app.culling.pipeline import SPLIT_STEPS, CullPipeline, IndexConfig
from app.render.boxes import BOX_FILTERS
from app.render.context import SceneTarget
from app.render.meshes import load_mesh
from app.render.objects import ObjectRenderer
from app.spatial import INDEX_NAMES, TREE_HEURISTICS
from app.viewer import hud_text
from app.viewer.brute_reference import COLUMNS as BRUTE_COLUMNS
from app.viewer.brute_reference import BruteReference
from app.viewer.brute_reference import log_values as brute_log_values
from app.viewer.camera import CameraRig, CameraView
from app.viewer.capture import DEFAULT_LOG_DIR, EXTRA_COLUMNS, Capture, log_row, next_free_path
from app.viewer.compare import COLUMNS as COMPARE_COLUMNS
from app.viewer.compare import (
    Comparison,
    command_line,
    report_notes,
    summary_lines,
    write_report,
)
from app.viewer.compare_occlusion import OwnOcclusion
from app.viewer.compare_spec import CompareSpec
from app.viewer.frame import Frame, OcclusionProvider
from app.viewer.hud_text import graph_title
from app.viewer.inspect import Inspector
from app.viewer.keys import DOWN_NAMES, action_of
from app.viewer.overlays import Overlays
from app.viewer.state import BOX_MODES, OCCLUSION_MODES, FrameStats, Toggles
from app.viewer.timing import COMPILES, STAGE_COLUMNS, FrameClock, close_frame


def make_pipeline(config: IndexConfig, scene) -> CullPipeline:
    """The frame's pipeline: nested for a scene with a hierarchy, else the flat one. The
    nested view is imported only then: importing the nested index compiles its typed entry
    points, 10-15 s on an empty kernel cache that a flat scene's first frame must not wait."""
    if getattr(scene, "hierarchy", None) is not None:
        from app.viewer.nested_view import NestedPipeline

        return NestedPipeline(config, scene)
    return CullPipeline(config)


class Viewer:
    """Scene + live index + frame + overlays + capture, driven by key names. Owns no
    window."""

    def __init__(self, ctx: moderngl.Context, scene, config: IndexConfig, size: tuple[int, int],
                 toggles: Toggles | None = None, occlusion: OcclusionProvider | None = None,
                 occlusion_factory=None, hud_px: int = 14) -> None:
        self.ctx = ctx
        self.scene = scene
        self.toggles = toggles or Toggles(view_distance=bool(scene.use_view_distance))
        self.occlusion_factory = occlusion_factory  # mode -> provider, for the O key
        self.target = SceneTarget(ctx, size)
        self.objects = ObjectRenderer(ctx, [load_mesh(name) for name in scene.meshes])
        o = scene.objects
        self.objects.set_objects(o.centers, o.radii, o.colors, o.mesh)
        self.overlays = Overlays(ctx, self.target, hud_px)
        self.notices: deque[tuple[float, str]] = deque(maxlen=4)
        self.capture = Capture(self.notice)
        self.inspector = Inspector(self.notice, self.capture.note_written)  # J, --dump-frame
        self.pipeline = make_pipeline(config, scene)
        self.collision = None  # the collision view of a scene with colliding balls
        world = getattr(scene, "collision", None)
        if world is not None:
            from app.viewer.collision_view import CollisionView

            self.collision = CollisionView(ctx, self.objects, world)
            if world.note:
                self.notice(world.note, 8.0)
        self.passes = Frame(ctx, scene, self.pipeline, self.target, self.objects,
                            self.collision)
        self.passes.occlusion = occlusion
        # A/B (--compare, F2): a second index on the same frames; its report written on close
        self.comparison = self.passes.compare = Comparison(make_pipeline, scene,
                                                           self._own_occlusion)
        # the brute force's update + cull of a frame now and then, for the HUD's cost line
        self.reference = self.passes.reference = BruteReference(scene)
        self.compare_report: Path | None = None  # --compare-report (else beside the log)
        self._report_written = False
        self.compare_summary: list[str] = []  # the report's lines for the terminal (on close)
        self.stats = FrameStats()  # the last frame run (its counts; its time once closed)
        self.clock = FrameClock()  # the timing model: frames open, close, their history
        self.graph = None  # the frame-time graph (G), made on first use
        self.frame_index = 0
        self.frozen_cull: CameraView | None = None
        self.rig = CameraRig.for_scene(scene)  # the view camera of tick() (the window's)
        self.camera_label: str | None = None  # the HUD's camera field when tick() is not used
        self.last_view: CameraView | None = None  # the view camera of the last frame
        self._orbit_froze = False  # X froze the culling camera (X again unfreezes)
        self._reason: tuple[tuple, str | None] = ((), None)  # why no nodes, cached
        renderer = str(ctx.info.get("GL_RENDERER", "")) if hasattr(ctx, "info") else ""
        self.software_gl = "llvmpipe" in renderer.lower() or "softpipe" in renderer.lower()
        self._actions: dict[str, Callable[[str, bool], None]] = {
            "help": lambda _n, _s: self._flip("help"),
            "index": lambda _n, s: self.cycle_index(-1 if s else 1),
            "leafy": lambda _n, _s: self.toggle_leafy(),
            "split": lambda n, _s: self.step_split_threshold(-1 if n in DOWN_NAMES else 1),
            "frustum": lambda _n, _s: self._flip("frustum"),
            "view_distance": lambda _n, _s: self._flip("view_distance"),
            "occlusion": lambda _n, _s: self.cycle_occlusion(),
            "boxes": lambda _n, _s: self.cycle_boxes(),
            "box_filter": lambda _n, s: self.cycle_box_filter(-1 if s else 1),
            "freeze": lambda _n, _s: self.toggle_freeze(),
            "orbit": lambda _n, _s: self.toggle_orbit(),
            "path": lambda _n, _s: self.toggle_path(),
            "pause": lambda _n, _s: self._flip("paused"),
            "record": lambda _n, _s: self.toggle_recording(),
            # written when the next frame ends, without the transient notices
            "screenshot": lambda _n, _s: self.request_screenshot(
                self.capture.next_screenshot_path()),
            "inspect": lambda _n, _s: self.request_dump(),
            "hud": lambda _n, _s: self._flip("hud"),
            "collision": lambda n, s: self.collision_key(n, s),
            "pair_lines": lambda n, s: self.collision_key(n, s),
            "collision_index": lambda n, s: self.collision_key(n, s),
            "home": lambda _n, _s: self.rig.home(),
            "graph": lambda _n, _s: self._flip("graph"),
            "compare": lambda _n, s: self.cycle_compare(-1 if s else 1),
            "compare_occlusion": lambda _n, s: self.cycle_compare_occlusion(-1 if s else 1),
        }
        self.rebuild()

    # ------------------------------------------------------------------ what others read

    @property
    def config(self) -> IndexConfig:
        return self.pipeline.config

    @property
    def occlusion(self) -> OcclusionProvider | None:
        return self.passes.occlusion

    @property
    def sim_time(self) -> float:
        return self.passes.sim_time

    def notice(self, text: str, seconds: float = 4.0) -> None:
        self.notices.append((time.perf_counter() + seconds, text))

    # ------------------------------------------------------------------ the index

    @property
    def fps(self) -> float:
        """Frames per second of the last closed frame: 1000 / its wall time."""
        last = self.clock.last
        return 0.0 if last is None else last.fps

    def rebuild(self) -> float:
        o = self.scene.objects
        return self.pipeline.build(o.ids, o.centers, o.radii, o.view_distances)

    def set_index(self, config: IndexConfig) -> float:
        """Switch the index (or its parameters) and rebuild it from the current objects."""
        old = self.pipeline.config
        old_split = self.pipeline.split_threshold()
        self.pipeline.config = config
        try:
            ms = self.rebuild()
        except Exception as exc:  # noqa: BLE001 - keep the old index and say why
            self.pipeline.config = old
            self.rebuild()
            self.notice(f"cannot build {config.label()}: {exc}", 6.0)
            return 0.0
        self.clock.note_stall(f"rebuild {config.label()}", ms)
        new_split = self.pipeline.split_threshold()
        extra = f" split {new_split}" if new_split is not None else ""
        self.notice(f"rebuilt {config.label()}{extra}: {len(self.scene.objects.ids):,} objects "
                    f"in {ms:.0f} ms")
        if old_split is not None and new_split is not None and old_split != new_split:
            why = "" if config.split_threshold is not None else " (this variant's default)"
            self.notice(f"split threshold {old_split} -> {new_split}{why}", 6.0)
        return ms

    def cycle_index(self, step: int = 1) -> None:
        names = list(INDEX_NAMES)
        cur = self.config.name
        i = names.index(cur) if cur in names else 0
        name = names[(i + step) % len(names)]
        self.set_index(IndexConfig(name, self.config.leafy, self.config.split_threshold))

    def toggle_leafy(self) -> None:
        c = self.config
        if c.name not in TREE_HEURISTICS:
            self.notice(f"{c.name} has no leafy/non-leafy variant")
            return
        self.set_index(IndexConfig(c.name, not c.leafy, c.split_threshold))

    def step_split_threshold(self, step: int) -> None:
        c = self.config
        cur = self.pipeline.split_threshold()
        if cur is None:
            cur = 8
        steps = list(SPLIT_STEPS)
        if step > 0:
            new = next((s for s in steps if s > cur), steps[-1])
        else:
            new = next((s for s in reversed(steps) if s < cur), steps[0])
        self.set_index(IndexConfig(c.name, c.leafy, new))

    # ------------------------------------------------------------------ A/B comparison

    def compare_config(self, spec: CompareSpec) -> IndexConfig:
        """The B index of ``spec``, with what it leaves out taken from A's config."""
        c = self.config
        return IndexConfig(*spec.resolve(c.name, c.leafy, c.split_threshold))

    def _own_occlusion(self, mode: str) -> OwnOcclusion:
        """B's pyramids in occlusion ``mode`` (:mod:`app.viewer.compare_occlusion`)."""
        from app.render.occlusion import OcclusionPyramids

        return OwnOcclusion(OcclusionPyramids(self.ctx, mode), self.objects,
                            lambda: self.target.size)

    def set_compare(self, config: IndexConfig | None) -> bool:
        """B is ``config`` from now on (built now, a stall of the open frame), or off (None);
        False when it cannot be built (B stays as it was, a notice says why)."""
        cmp = self.comparison
        if config is None:
            cmp.set_index(None)
            self.notice("A/B comparison off")
            return True
        try:
            ms = cmp.set_index(config)
        except Exception as exc:  # noqa: BLE001 - keep B as it was and say why
            self.notice(f"cannot build B {config.label()}: {exc}", 6.0)
            return False
        self.clock.note_stall(f"build B {cmp.label}", ms)
        self.notice(f"A/B: B is {cmp.label} ({len(self.scene.objects.ids):,} objects built in "
                    f"{ms:.0f} ms); it culls A's frames, not drawn")
        return True

    def next_compare(self, step: int = 1) -> IndexConfig | None:
        """F2's next B (Shift+F2: previous): off, then each index in the I key's order (B's
        variant and split threshold, else A's), then off again."""
        cur = self.comparison.pipeline
        states: list[str | None] = [None, *INDEX_NAMES]
        i = states.index(cur.config.name) if cur is not None else 0
        name = states[(i + step) % len(states)]
        if name is None:
            return None
        base = cur.config if cur is not None else self.config
        return IndexConfig(name, base.leafy, base.split_threshold)

    def cycle_compare(self, step: int = 1) -> None:
        """F2 / Shift+F2: the next / previous B index (or off)."""
        self.set_compare(self.next_compare(step))

    def set_compare_occlusion(self, mode: str | None) -> bool:
        """B culls with occlusion ``mode`` and pyramids of its own (None: with A's); with B
        off, B becomes A's index first (comparing A's index under two occlusion modes)."""
        cmp = self.comparison
        if not cmp.active and not self.set_compare(self.config):
            return False
        cmp.set_occlusion(mode)
        self.notice(f"A/B: B {cmp.label} culls with occlusion {mode} and pyramids of its own"
                    if mode is not None else
                    f"A/B: B {cmp.label} culls with A's occlusion mode and pyramids")
        return True

    def cycle_compare_occlusion(self, step: int = 1) -> None:
        """F3 / Shift+F3: B's occlusion mode: A's, then off, previous, two-pass of its own."""
        states: list[str | None] = [None, *OCCLUSION_MODES]
        i = states.index(self.comparison.occlusion_mode) if self.comparison.active else 0
        self.set_compare_occlusion(states[(i + step) % len(states)])

    def compare_report_path(self) -> Path:
        """Where the A/B report goes: ``--compare-report``, else beside the frame log
        (``LOG-compare.md``), else a new file under out/logs/."""
        if self.compare_report is not None:
            return self.compare_report
        log = self.capture.record_path
        if log is not None:
            return log.with_name(f"{log.stem}-compare.md")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return next_free_path(DEFAULT_LOG_DIR / f"compare-{self.scene.name}-{stamp}.md")

    def write_compare_report(self, command: str = "") -> list[str]:
        """The A/B report of the run (once, when B ran a frame): markdown and CSV, noted
        among the files written; returns the terminal's summary lines."""
        runs = self.comparison.runs
        if self._report_written or not runs:
            return []
        self._report_written = True
        frames = sum(s.count for s in runs.values())
        notes = report_notes(self.scene.name, len(self.scene.objects.ids), self.target.size,
                             frames, command)
        path = self.compare_report_path()
        md, csv_path = write_report(path, runs, f"A/B comparison: {self.scene.name}", notes)
        self.capture.note_written(md, f"A/B report, {frames:,} frames")
        self.capture.note_written(csv_path, "A/B report as CSV")
        return summary_lines(runs)

    # ------------------------------------------------------------------ toggles

    def _flip(self, toggle: str) -> None:
        setattr(self.toggles, toggle, not getattr(self.toggles, toggle))

    def set_occlusion(self, mode: str) -> bool:
        """Occlusion ``mode`` from now on, with a new provider (the early set starts empty)."""
        if mode != "off" and self.occlusion_factory is None:
            self.passes.pipeline.forget_visible()
            self.notice("occlusion culling is not available here (no occlusion factory)")
            return False
        self.passes.set_occlusion(None)  # the old provider's GL objects go first
        # "off": a ground-truth-only provider (--ground-truth with occlusion off), else None
        if self.occlusion_factory is not None:
            self.passes.set_occlusion(self.occlusion_factory(self, mode))
        self.toggles.occlusion = mode
        return True

    def cycle_occlusion(self) -> None:
        i = OCCLUSION_MODES.index(self.toggles.occlusion)
        self.set_occlusion(OCCLUSION_MODES[(i + 1) % len(OCCLUSION_MODES)])

    def toggle_freeze(self, current: CameraView | None = None) -> None:
        """Z: freeze the culling camera at ``current`` (default: the last frame's view)."""
        self.toggles.frozen = not self.toggles.frozen
        self.frozen_cull = (current or self.last_view) if self.toggles.frozen else None
        if not self.toggles.frozen:
            self._orbit_froze = False
            if self.rig.mode == "orbit":
                self.rig.stop_orbit()

    def toggle_orbit(self) -> None:
        """X: view the frozen culling camera from an orbit around it (freezing it first when
        needed); X again returns to the fly camera and unfreezes what X froze."""
        if self.rig.mode == "orbit":
            self.rig.stop_orbit()
            if self._orbit_froze and self.toggles.frozen:
                self.toggle_freeze()
            self._orbit_froze = False
            self.notice("outside view off: back to the camera")
            return
        if not self.toggles.frozen or self.frozen_cull is None:
            if self.last_view is None:
                self.notice("outside view: no frame drawn yet")
                return
            self.toggles.frozen = False
            self.toggle_freeze(self.last_view)
            self._orbit_froze = True
        self.rig.start_orbit(self.frozen_cull)
        self.notice("outside view: orbiting the frozen culling camera (drag to turn, W/S "
                    "zoom, X returns)", 6.0)

    def toggle_path(self) -> None:
        """C: play the scene's camera path in the view, or stop it."""
        if self.rig.mode == "orbit":
            self.toggle_orbit()
        if self.rig.toggle_path():
            self.notice(f"playing the camera path from {self.rig.path_time:.1f} s (C stops, "
                        "flying takes over)")
        else:
            self.notice("camera path stopped")

    def cycle_boxes(self) -> None:
        self.toggles.boxes = BOX_MODES[(BOX_MODES.index(self.toggles.boxes) + 1) % len(BOX_MODES)]

    def cycle_box_filter(self, step: int = 1) -> None:
        """N: which node boxes the overlay shows (all, leaves, down to a depth)."""
        i = BOX_FILTERS.index(self.toggles.box_filter)
        self.toggles.box_filter = BOX_FILTERS[(i + step) % len(BOX_FILTERS)]
        if self.toggles.boxes == "off":
            self.toggles.boxes = "depth"
        self.notice(f"boxes shown: {hud_text.box_filter_label(self.toggles.box_filter)}")

    def collision_key(self, name: str, shift: bool = False) -> None:
        """T: the collision view on / off; Y: pair lines off / contacts / candidates (turns
        the view on); U / Shift+U: the next / previous collision index."""
        if self.collision is None:
            self.notice("no colliding balls in this scene (try --scene collide)")
            return
        tg = self.toggles
        if name == "t":
            tg.collision = not tg.collision
        elif name == "y":
            from app.viewer.collision_view import LINE_MODES

            tg.pair_lines = LINE_MODES[(LINE_MODES.index(tg.pair_lines) + 1) % len(LINE_MODES)]
            tg.collision = True
            self.notice(f"pair lines: {tg.pair_lines}")
        else:
            self.notice(self.collision.cycle_index(-1 if shift else 1))

    def key(self, name: str, shift: bool = False) -> bool:
        """One key press by name (pyglet's symbol string, lower case: ``"f1"``, ``"i"``,
        ``"plus"`` ...), dispatched through the key table (:mod:`app.viewer.keys`); False
        for a key the viewer does not use. The window handles Esc, M (mouse capture) and the
        held flying keys itself."""
        action = action_of(name)
        if action is None:
            return False
        self._actions[action](name, shift)
        return True

    # ------------------------------------------------------------------ capture

    def log_columns(self) -> tuple[str, ...]:
        """The frame log's columns beyond the contract's: the frame's, the occlusion
        provider's, the collision view's, a nested index's."""
        cols = EXTRA_COLUMNS + COMPARE_COLUMNS + BRUTE_COLUMNS
        cols += tuple(getattr(self.occlusion, "log_columns", ()) or ())
        if self.collision is not None:
            from app.viewer.collision_view import COLUMNS

            cols += COLUMNS
        if hasattr(self.pipeline, "log_values"):  # a nested index (nested_view)
            cols += self.pipeline.LOG_COLUMNS
        return cols

    def start_recording(self, path: str | Path | None = None) -> Path:
        """Record from the next frame on (the open frame closes now, unlogged)."""
        self.close_frame()
        return self.capture.start_recording(path, self.log_columns())

    def stop_recording(self) -> None:
        """The open frame closes now (its row is the last), then the log."""
        self.close_frame()
        self.capture.stop_recording()

    def toggle_recording(self, default_path: str | Path | None = None) -> None:
        """R: stop, or start a new log (``default_path``, else --record's, else one under
        out/logs/; never overwriting an earlier one)."""
        if self.capture.recording:
            self.stop_recording()
        else:
            self.start_recording(self.capture.next_log_path(default_path))

    def screenshot(self, path: str | Path) -> Path:
        """Save the frame on the target now (with whatever notices it shows)."""
        return self.capture.screenshot(self.target, path)

    def request_screenshot(self, path: str | Path) -> Path:
        """Save the next frame, drawn without the transient notices."""
        return self.capture.request_screenshot(path)

    def request_dump(self, path: str | Path | None = None) -> Path:
        """J: write the next frame's settings, counts and index nodes as JSON when it ends
        (``path``, else --dump-path's name, else one under out/inspect/;
        :mod:`app.viewer.inspect`)."""
        ins = self.inspector
        return ins.request(path or ins.next_path(self.scene.name, self.frame_index))

    def written_lines(self) -> list[str]:
        return self.capture.written_lines()

    def log_row(self, st: FrameStats) -> dict:
        extras = [x.log_values() for x in (self.occlusion, self.collision, self.comparison)
                  if x is not None]
        if hasattr(self.pipeline, "log_values"):
            extras.append(self.pipeline.log_values())
        extras.append(brute_log_values(st.brute))
        return log_row(st, self.toggles, objects=int(self.scene.objects.ids.shape[0]),
                       index=self.config.label(), split=self.pipeline.split_threshold(),
                       extras=extras)

    def close(self) -> None:
        """The open frame, the log, a requested screenshot, the A/B report (once)."""
        self.close_frame()
        self.capture.close(self.target)
        try:
            self.compare_summary += self.write_compare_report(command_line())
        except OSError as exc:
            self.compare_summary.append(f"cannot write the A/B report: {exc}")
        if self.occlusion is not None:
            self.occlusion.release()
        self.comparison.release()

    # ------------------------------------------------------------------ the frame

    def tick(self, dt: float) -> FrameStats:
        """One frame seen by the camera rig (the window's frame): time passes for the rig
        (the path plays, the orbit turns), then :meth:`frame`."""
        self.rig.advance(dt)
        w, h = self.target.size
        return self.frame(dt, self.rig.view(w / max(h, 1)))

    def frame(self, dt: float, view: CameraView) -> FrameStats:
        """One frame: the passes (:class:`app.viewer.frame.Frame`) with the culling camera
        (frozen or the view camera), then the overlays, then the HUD. The last frame closes
        as this one starts (its wall time is then known: :mod:`app.viewer.timing`) and its
        log row is written; the returned stats hold this frame's time so far."""
        t_start = time.perf_counter()
        compile_mark = COMPILES.total_ms
        self.close_frame(t_start)
        tg = self.toggles
        self.last_view = view
        cull_view = self.frozen_cull if (tg.frozen and self.frozen_cull is not None) else view
        st = self.passes.run(dt, view, cull_view, tg, frame_index=self.frame_index,
                             count_stages=tg.hud or self.capture.recording)
        self.clock.begin(st, t_start, compile_mark)
        self.stats = st
        shot = self.capture.shot_pending
        t5 = time.perf_counter()
        self.draw_overlays(view, cull_view, st)
        self.ctx.finish()
        t6 = time.perf_counter()
        if tg.graph:
            self.draw_graph()
        if tg.hud or tg.help:
            self.draw_hud(st, notices=not shot)  # over the graph: the help list stays on top
        self.ctx.finish()
        t7 = time.perf_counter()
        st.overlay_ms = (t6 - t5) * 1e3
        st.hud_ms = st.stages_ms + (t7 - t6) * 1e3  # the stage counts are for the HUD / log
        self.clock.end_passes(st)
        close_frame(st, time.perf_counter())  # provisional: until the next frame starts
        self.frame_index += 1
        dump = self.inspector.take(self, st)  # a requested dump (J, --dump-frame) of this frame
        if dump is not None:  # the window waited for it: a named stall, not "other"
            self.note_stall("frame dump", dump.build_ms + dump.write_ms)
        if shot:
            path = self.capture.take_requested(self.target)
            if path is not None and tg.hud:
                self.capture.write_hud_text(path, self.hud_lines(st))
            if tg.hud:
                self.overlays.bind_target()
                self.draw_hud(st, lines=False)  # the notices, on screen only
        return st

    def close_frame(self, end: float | None = None) -> FrameStats | None:
        """Close the open frame (at ``end``, default now) and log it; None if none was open."""
        st = self.clock.close(end)
        if st is not None and self.capture.recording:
            self.capture.write(self.log_row(st))
        return st

    def note_present(self, ms: float) -> None:
        """The window's blit and buffer swap of the open frame (its present stage)."""
        self.clock.add_present(ms)

    def note_stall(self, what: str, ms: float) -> None:
        """A stall between frames the viewer did not time itself (an index switch's compile
        and warm-up on the window's worker thread)."""
        self.clock.note_stall(what, ms)

    # ------------------------------------------------------------------ overlays and HUD

    def draw_overlays(self, view: CameraView, cull_view: CameraView, st: FrameStats) -> None:
        """Node boxes, the frozen culling camera, pair lines (the HUD is :meth:`draw_hud`)."""
        tg, ov = self.toggles, self.overlays
        ov.begin()
        if tg.boxes != "off" and self.pipeline.index is not None:
            if hasattr(self.pipeline, "box_data"):  # a nested index: turned boxes
                from app.viewer.nested_view import draw_boxes

                draw_boxes(self, view)
            else:
                ov.draw_boxes(view, self.pipeline.index, tg.boxes, tg.box_filter,
                              "level" if self.config.name == "grid" else "depth",
                              scene_ms=st.render_ms)
        if tg.frozen and self.frozen_cull is not None:
            ov.draw_frozen_camera(view, cull_view)
        if self.collision is not None and tg.collision:
            self.ctx.disable(moderngl.DEPTH_TEST)
            self.collision.draw_lines(tg.pair_lines, view.viewproj, self.scene.objects.centers,
                                      self.passes.drawn_ids)

    def draw_graph(self) -> None:
        """The frame-time graph (G) of the closed frames, lower right."""
        from app.framelog import TIME_STAGES
        from app.render.frame_graph import FrameGraph

        if self.graph is None:
            from app.viewer.setup import hud_px

            self.graph = FrameGraph(self.ctx, hud_px(self.target.size[1]))
        h = self.clock.history
        stages = h.stages()
        title = graph_title(stages.sum(axis=1), int(h.stalls().sum()), h.size)
        self.overlays.bind_target()
        self.graph.draw(self.target.size, stages, h.stalls(), [lab for _, lab, _ in TIME_STAGES],
                        [c for _, _, c in TIME_STAGES], h.size, title)

    def draw_hud(self, st: FrameStats, lines: bool = True, notices: bool = True) -> None:
        """The HUD text, the notices under it (``notices``; shown only with the HUD) and the
        help panel under the HUD; ``lines`` False: the notices only."""
        hud_on = self.toggles.hud
        now = time.perf_counter()
        while self.notices and self.notices[0][0] < now:
            self.notices.popleft()
        msgs = [m for _, m in self.notices] if hud_on and notices else []
        c = self.config
        head = hud_text.help_head(
            c.name, ("leafy" if c.leafy else "non-leafy") if c.is_tree() else "-",
            self.pipeline.split_threshold()) if self.toggles.help else []
        self.overlays.draw_text(self.hud_lines(st) if hud_on else [], msgs, self.toggles.help,
                                lines, head)

    def hud_lines(self, st: FrameStats) -> list[str]:
        """The HUD's lines for ``st`` (:func:`app.viewer.hud_text.hud_lines`)."""
        tg, c, ov = self.toggles, self.config, self.overlays
        reason = self.no_nodes_reason() if hud_text.needs_reason(st, tg, ov.box_total) else None
        w, h = self.target.size
        n = int(self.scene.objects.ids.shape[0])
        extra = [ov.frozen_line(tg.occlusion)] if tg.frozen else []
        extra += list(self.occlusion.hud_lines()) if self.occlusion is not None else []
        if self.collision is not None and tg.collision:
            extra += self.collision.hud_lines(tg.pair_lines)
        if hasattr(self.pipeline, "hud_lines"):  # a nested index (nested_view)
            extra += self.pipeline.hud_lines()
        extra += self.comparison.hud_lines()
        rec = self.capture.recorder
        variant = ("leafy" if c.leafy else "non-leafy") if c.is_tree() else "-"
        split = self.pipeline.split_threshold()
        state = hud_text.HudState(
            timed=self.clock.last, objects=n, index=c.name,
            variant=variant, split=split, describe=self.pipeline.describe(),
            toggles=tg, box_count=ov.box_count, box_total=ov.box_total,
            recording=rec.path.name if rec.active else None, scene=self.scene.name,
            camera=self.camera_label or self.rig.describe(), reason=reason,
            hint=hud_text.render_bound(self.recent_render_times(), st.drawn, (w, h), n,
                                       self.software_gl),
            extra=extra, cost=self.cost_text(st))
        return hud_text.hud_lines(st, state)

    def cost_text(self, st: FrameStats) -> str:
        """The index line's cost: the live index's update + cull in frame ``st`` against the
        brute force's recent measurements (:func:`app.viewer.hud_text.cost_text`)."""
        c, tg, ref = self.config, self.toggles, self.reference
        cmp = self.comparison
        index_ms = st.index_update_ms + st.cull_ms + self.passes.late_cull_ms
        note = None
        if c.name == "brute":
            note = "is this index"
        elif cmp.active and cmp.pipeline.config.name == "brute":
            note = "is B: the A/B lines below"  # measured every frame there
        elif not tg.frustum:
            note = "none: frustum culling off (F), nothing culled"
        elif ref.warming:
            note = "compiling its kernels, measured next frame"
        elif ref.last is None:
            note = f"first measured at frame {ref.every - 1}"
        m = ref.last
        return hud_text.cost_text(index_ms, ref.median_ms,
                                  0 if m is None else max(st.frame - m.frame, 0), note,
                                  tg.occlusion, len(ref.recent))

    def recent_render_times(self, frames: int = 30) -> list[tuple[float, float]]:
        """(render ms, frame ms) of the last ``frames`` closed frames, for the render-bound
        hint."""
        stages = self.clock.history.stages()[-frames:]
        render = stages[:, STAGE_COLUMNS.index("draw_ms")] + stages[:, STAGE_COLUMNS.index(
            "occlusion_pass_ms")]
        return list(zip(render.tolist(), stages.sum(axis=1).tolist(), strict=True))

    def no_nodes_reason(self) -> str | None:
        """Why the index visits no nodes (:func:`app.viewer.hud_text.no_nodes_reason`), asked
        of the index's stats at most every 15 frames."""
        index = self.pipeline.index
        key = (id(index), self.config.name, self.toggles.frustum, self.frame_index // 15)
        if self._reason[0] != key:
            stats = None
            if index is not None and self.toggles.frustum and self.config.name != "brute":
                try:
                    stats = index.stats()
                except Exception:  # noqa: BLE001 - a HUD line must never break a frame
                    stats = {}
            live = len(index) if index is not None else 0
            self._reason = (key, hud_text.no_nodes_reason(self.config.name,
                                                          self.toggles.frustum, stats, live))
        return self._reason[1]
