"""The frame sequence, shared by the window and the headless runner.

:meth:`Viewer.frame` reads top to bottom as the list of passes of one frame:

1. motion         ``scene.step(dt)`` -> moved ids (skipped while paused)
2. index update   ``index.update(moved ids)``
3. cull           ``CullPipeline.cull(planes of the culling camera, eye, view distance,
                  occlusion=last frame's pyramid)`` (the culling camera is the view camera
                  unless frozen); two-pass occlusion's early cull instead keeps last frame's
                  visible set still in view (``among=``)
4. upload         the visible instances (centres straight from the scene's array), grouped
                  by mesh kind, in one buffer write
5. main pass      clear, one instanced draw per mesh kind, into ``target`` (colour + depth
                  texture)
6. occlusion      the provider builds the pyramid from ``target.depth``; two-pass's late cull
                  runs ``CullPipeline.cull(..., occlusion=pyramid)`` against it and draws the
                  newly visible ids; with ground truth the provider then measures the image
7. overlays       the culled-by-stage counts (``CullPipeline.stage_counts``, for the HUD and
                  the log; a measurement: its time is ``stages_ms``, not part of
                  ``frame_ms``), node boxes (filtered, with a colour legend), the frozen culling
                  camera (frustum, near and far planes, a camera marker), HUD text, help
8. record         one frame-log row

Keys reach the viewer as names (:meth:`Viewer.key`), so the window and headless tests drive
the same code; the view camera is a :class:`app.viewer.camera.CameraRig` (fly, the scene's
camera path, the outside orbit around a frozen culling camera) used by :meth:`Viewer.tick`.
Files written without a name go under ``out/`` (:data:`DEFAULT_LOG_DIR`,
:data:`DEFAULT_SHOT_DIR`); :meth:`Viewer.written_lines` lists every file written, for the
runner to print at exit.

Occlusion plugs in as an object (see :class:`OcclusionProvider`) handed to the viewer: it
builds pyramids and measures, the viewer does every cull and draw.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import moderngl
import numpy as np

from app.culling.pipeline import SPLIT_STEPS, CullPipeline, IndexConfig, StageCounts, newly_visible
from app.render.boxes import (
    BOX_FILTERS,
    OUTCOME_NAMES,
    BoxOverlay,
    depth_colors,
    depth_legend,
    outcome_colors,
    outcome_legend,
    select_boxes,
)
from app.render.context import SceneTarget
from app.render.frustum_lines import FrustumLines
from app.render.hud import HudRenderer
from app.render.meshes import load_mesh
from app.render.objects import ObjectRenderer
from app.spatial import INDEX_NAMES, TREE_HEURISTICS
from app.viewer.camera import CameraRig, CameraView, view_depth_range
from app.viewer.catalog import KEY_LINES

BACKGROUND = (0.09, 0.10, 0.13, 1.0)
LIGHT_DIR = np.array([0.35, 0.85, 0.40])
BOX_MODES = ("off", "depth", "outcome")
OCCLUSION_MODES = ("off", "previous", "two-pass")
DEFAULT_LOG_DIR = Path("out") / "logs"  # R without --record
DEFAULT_SHOT_DIR = Path("out") / "screenshots"  # K / F12 without --screenshot
# The HUD calls a frame render-bound when drawing takes this share of frames this slow (ms).
RENDER_BOUND_SHARE = 0.6
RENDER_BOUND_MS = 33.0

# Frame-log columns beyond the contract's (design.md), always present.
EXTRA_COLUMNS = ("motion_ms", "index_update_ms", "upload_ms", "overlay_ms", "cpu_ms", "drawn",
                 "split_threshold", "frustum", "view_distance", "frozen", "moved",
                 "frustum_culled", "distance_culled", "occlusion_culled", "stages_ms")

#: F1's key list: one table in app/viewer/catalog.py, which --help reads without OpenGL.
HELP_LINES = list(KEY_LINES)


class OcclusionProvider(Protocol):
    """What ``app/render/occlusion.py`` implements: pyramids and measurements, no culls."""

    mode: str  # "off", "previous" or "two-pass": goes to the log's ``occlusion`` column
    ground_truth: bool  # measure the true visible set after the culls
    log_columns: tuple[str, ...]  # extra log columns, e.g. ("true_visible", "false_negatives")

    def last_frame_pyramid(self):  # -> app.geom.zpyramid.ZPyramid | None
        """``previous``: the last frame's pyramid for this frame's cull; else None."""

    def build_pyramid(self, depth: moderngl.Texture, size: tuple[int, int],
                      viewproj: np.ndarray):  # -> ZPyramid | None
        """Reduce this frame's depth after the main pass; two-pass gets the pyramid now."""

    def note_cull(self, result, late_cull_ms: float | None = None,
                  second_pass: int = 0) -> None: ...

    def measure_ground_truth(self, view: CameraView, size: tuple[int, int],
                             in_view: np.ndarray | None, drawn: np.ndarray, objects,
                             frame_index: int, started: float) -> None: ...

    def log_values(self) -> dict[str, Any]: ...

    def hud_lines(self) -> list[str]: ...

    def release(self) -> None: ...


@dataclass
class Toggles:
    frustum: bool = True
    view_distance: bool = False
    occlusion: str = "off"
    boxes: str = "off"
    box_filter: str = "all"
    frozen: bool = False
    paused: bool = False
    hud: bool = True
    help: bool = False
    collision: bool = True  # the collision view (a scene with colliding balls)
    pair_lines: str = "off"  # off / contacts / candidates


@dataclass
class FrameStats:
    frame: int = 0
    time_s: float = 0.0
    frame_ms: float = 0.0
    motion_ms: float = 0.0
    index_update_ms: float = 0.0
    cull_ms: float = 0.0
    upload_ms: float = 0.0
    render_ms: float = 0.0
    overlay_ms: float = 0.0
    visible: int = 0
    drawn: int = 0
    working_set: int = 0
    nodes_visited: int = 0
    moved: int = 0
    stages: StageCounts | None = None  # culled per stage (None: not counted, HUD off)
    stages_ms: float = 0.0

    @property
    def update_ms(self) -> float:
        return self.motion_ms + self.index_update_ms

    @property
    def cpu_ms(self) -> float:
        return self.motion_ms + self.index_update_ms + self.cull_ms + self.upload_ms


class Recorder:
    """Frame-log writer around app.framelog.FrameLog; one flushed row per frame."""

    def __init__(self) -> None:
        self.log = None
        self.path: Path | None = None
        self.columns: set[str] = set()
        self.rows = 0

    @property
    def active(self) -> bool:
        return self.log is not None

    def start(self, path: str | Path, extra_columns: tuple[str, ...]) -> Path:
        from app.framelog import FrameLog

        self.stop()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.log = FrameLog(self.path, extra_columns=extra_columns)
        self.columns = set(self.log.columns)
        self.rows = 0
        return self.path

    def write(self, row: dict[str, Any]) -> None:
        if self.log is not None:
            # Columns that appear mid-recording (occlusion switched on) are left out.
            self.log.write({k: v for k, v in row.items() if k in self.columns})
            self.rows += 1

    def stop(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None


def next_free_path(path: Path) -> Path:
    """``path`` if unused, else ``stem-2.ext``, ``stem-3.ext`` ..."""
    if not path.exists():
        return path
    k = 2
    while True:
        cand = path.with_name(f"{path.stem}-{k}{path.suffix}")
        if not cand.exists():
            return cand
        k += 1


class Viewer:
    """Scene + live index + render passes + recorder. Owns no window."""

    def __init__(self, ctx: moderngl.Context, scene, config: IndexConfig, size: tuple[int, int],
                 toggles: Toggles | None = None, occlusion: OcclusionProvider | None = None,
                 occlusion_factory=None, hud_px: int = 14) -> None:
        self.ctx = ctx
        self.scene = scene
        self.toggles = toggles or Toggles(view_distance=bool(scene.use_view_distance))
        self.occlusion = occlusion
        self.occlusion_factory = occlusion_factory  # mode -> provider, for the O key
        self.target = SceneTarget(ctx, size)
        meshes = [load_mesh(name) for name in scene.meshes]
        self.objects = ObjectRenderer(ctx, meshes)
        o = scene.objects
        self.objects.set_objects(o.centers, o.radii, o.colors, o.mesh)
        self.boxes = BoxOverlay(ctx)
        self.frustum_lines = FrustumLines(ctx)
        self.hud = HudRenderer(ctx, hud_px)
        self.pipeline = CullPipeline(config)
        if getattr(scene, "hierarchy", None) is not None:  # groups in frames: nested index
            from app.viewer.nested_view import NestedPipeline

            self.pipeline = NestedPipeline(config, scene)
        self.recorder = Recorder()
        self.record_path: Path | None = None
        self.stats = FrameStats()
        self.frame_index = 0
        self.sim_time = 0.0
        self.frozen_cull: CameraView | None = None
        self.notices: deque[tuple[float, str]] = deque(maxlen=4)
        self._shot_path: Path | None = None  # a screenshot to take at the end of the next frame
        self.last_screenshot_s = 0.0  # how long saving it took (not part of any frame)
        self._fps_times: deque[float] = deque(maxlen=60)
        self.fps = 0.0
        self._empty = np.zeros(0, np.int64)
        self.visible_last_frame = self._empty  # two-pass: the late cull's ids, next early set
        self.rig = CameraRig.for_scene(scene)  # the view camera of tick() (the window's)
        self.camera_label: str | None = None  # the HUD's camera field when tick() is not used
        self.last_view: CameraView | None = None  # the view camera of the last frame
        self.record_base: Path | None = None  # R's file (--record), else out/logs/...
        self.screenshot_base: Path | None = None  # K's file (--screenshot), else out/...
        self.shot_count = 0
        self.written: dict[Path, str] = {}  # every file written, with a note (rows ...)
        self._orbit_froze = False  # X froze the culling camera (X again unfreezes)
        self._timings: deque[tuple[float, float]] = deque(maxlen=30)  # (render, frame) ms
        self._reason: tuple[tuple, str | None] = ((), None)  # why no nodes, cached
        self._labels: list[tuple[float, float, str]] = []  # world labels, pixels
        self.box_count = 0  # boxes the overlay drew last frame (of box_total)
        self.box_total = 0
        self._legend: tuple[str, list] | None = None
        self._drawn_ids: np.ndarray | None = None  # this frame's cull answer (None: all)
        renderer = str(ctx.info.get("GL_RENDERER", "")) if hasattr(ctx, "info") else ""
        self.software_gl = "llvmpipe" in renderer.lower() or "softpipe" in renderer.lower()
        self.collision = None  # the collision view of a scene with colliding balls
        world = getattr(scene, "collision", None)
        if world is not None:
            from app.viewer.collision_view import CollisionView

            self.collision = CollisionView(ctx, self.objects, world)
            if world.note:
                self.notice(world.note, 8.0)
        self.rebuild()

    # ------------------------------------------------------------------ state changes

    @property
    def config(self) -> IndexConfig:
        return self.pipeline.config

    def notice(self, text: str, seconds: float = 4.0) -> None:
        self.notices.append((time.perf_counter() + seconds, text))

    def rebuild(self) -> float:
        o = self.scene.objects
        ms = self.pipeline.build(o.ids, o.centers, o.radii, o.view_distances)
        return ms

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

    def set_occlusion(self, mode: str) -> bool:
        self.visible_last_frame = self._empty  # a new provider starts with an empty early set
        if mode == "off":
            if self.occlusion is not None:
                self.occlusion.release()
            self.occlusion = None
            if self.occlusion_factory is not None:
                # A ground-truth-only provider (--ground-truth with occlusion off), else None.
                self.occlusion = self.occlusion_factory(self, "off")
            self.toggles.occlusion = "off"
            return True
        if self.occlusion_factory is None:
            self.notice("occlusion culling is not available here (no occlusion factory)")
            return False
        if self.occlusion is not None:
            self.occlusion.release()
        self.occlusion = self.occlusion_factory(self, mode)
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
        self.notice(f"boxes shown: {self.box_filter_label()}")

    def box_filter_label(self) -> str:
        f = self.toggles.box_filter
        return {"all": "all", "leaves": "leaves only"}.get(f, f.replace("<=", " <= "))

    def note_written(self, path: Path, note: str = "") -> None:
        """Remember a file this run wrote, for :meth:`written_lines`."""
        self.written[Path(path)] = note

    def written_lines(self) -> list[str]:
        """One line per file written (logs with their rows), in the order first written."""
        return [f"{p}{f' ({n})' if n else ''}" for p, n in self.written.items()]

    def start_recording(self, path: str | Path | None = None) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = Path(path or self.record_path or DEFAULT_LOG_DIR / f"frames-{stamp}.csv")
        if self.record_path is not None and path == self.record_path and path.exists():
            path = next_free_path(path)  # a restarted recording never overwrites the last one
        cols = EXTRA_COLUMNS + tuple(getattr(self.occlusion, "log_columns", ()) or ())
        if self.collision is not None:
            from app.viewer.collision_view import COLUMNS

            cols += COLUMNS
        if hasattr(self.pipeline, "log_values"):  # a nested index (nested_view)
            cols += self.pipeline.LOG_COLUMNS
        out = self.recorder.start(path, cols)
        self.record_path = out
        self.note_written(out, "0 rows")
        self.notice(f"recording to {out}")
        return out

    def stop_recording(self) -> None:
        if self.recorder.active:
            self.notice(f"recording stopped: {self.recorder.rows} rows in {self.recorder.path}")
            self.note_written(self.recorder.path, f"{self.recorder.rows} rows")
        self.recorder.stop()

    def toggle_recording(self, default_path: str | Path | None = None) -> None:
        """R: stop, or start a new log (``default_path``, else --record's, else one under
        out/logs/; never overwriting an earlier one)."""
        if self.recorder.active:
            self.stop_recording()
        else:
            base = Path(default_path) if default_path else (self.record_path or
                                                             self.record_base)
            self.start_recording(next_free_path(base) if base else None)

    def next_screenshot_path(self) -> Path:
        """K: ``--screenshot``'s name (then NAME-2.png ...), else out/screenshots/shot-...png."""
        n = self.shot_count + 1
        self.shot_count = n
        if self.screenshot_base is not None:
            base = self.screenshot_base
            path = base if n == 1 else base.with_name(f"{base.stem}-{n}{base.suffix}")
        else:
            path = DEFAULT_SHOT_DIR / f"shot-{time.strftime('%Y%m%d-%H%M%S')}-{n}.png"
        return path

    def screenshot(self, path: str | Path) -> Path:
        """Save the frame on the target now (with whatever notices it shows)."""
        t0 = time.perf_counter()
        out = self.target.save_png(path)
        self.last_screenshot_s = time.perf_counter() - t0
        self.note_written(out)
        self.notice(f"screenshot {out}")
        return out

    def request_screenshot(self, path: str | Path) -> Path:
        """Save the next frame, drawn without the transient notices (an earlier "screenshot
        ..." or "recording ..." line is not part of the picture); written when that frame
        ends, or at :meth:`close`."""
        self._shot_path = Path(path)
        return self._shot_path

    def _take_requested_screenshot(self) -> None:
        if self._shot_path is not None:
            path, self._shot_path = self._shot_path, None
            self.screenshot(path)

    def close(self) -> None:
        self._take_requested_screenshot()
        self.stop_recording()
        if self.occlusion is not None:
            self.occlusion.release()

    # ------------------------------------------------------------------ keys and camera

    def key(self, name: str, shift: bool = False) -> bool:
        """One key press by name (pyglet's symbol string, lower case: ``"f1"``, ``"i"``,
        ``"plus"`` ...); False for a key the viewer does not use. The window handles Esc,
        M (mouse capture) and the held flying keys itself."""
        tg = self.toggles
        if name == "f1":
            tg.help = not tg.help
        elif name == "i":
            self.cycle_index(-1 if shift else 1)
        elif name == "l":
            self.toggle_leafy()
        elif name in ("plus", "equal", "num_add"):
            self.step_split_threshold(+1)
        elif name in ("minus", "num_subtract", "underscore"):
            self.step_split_threshold(-1)
        elif name == "f":
            tg.frustum = not tg.frustum
        elif name == "v":
            tg.view_distance = not tg.view_distance
        elif name == "o":
            self.cycle_occlusion()
        elif name == "b":
            self.cycle_boxes()
        elif name == "n":
            self.cycle_box_filter(-1 if shift else 1)
        elif name == "z":
            self.toggle_freeze()
        elif name == "x":
            self.toggle_orbit()
        elif name == "c":
            self.toggle_path()
        elif name == "p":
            tg.paused = not tg.paused
        elif name == "r":
            self.toggle_recording()
        elif name in ("f12", "k"):
            self.request_screenshot(self.next_screenshot_path())  # written when the frame ends
        elif name == "h":
            tg.hud = not tg.hud
        elif name in ("t", "y", "u"):
            self.collision_key(name, shift)
        elif name == "home":
            self.rig.home()
        else:
            return False
        return True

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

    def tick(self, dt: float) -> FrameStats:
        """One frame seen by the camera rig (the window's frame): time passes for the rig
        (the path plays, the orbit turns), then :meth:`frame`."""
        self.rig.advance(dt)
        w, h = self.target.size
        return self.frame(dt, self.rig.view(w / max(h, 1)))

    # ------------------------------------------------------------------ the frame

    def frame(self, dt: float, view: CameraView) -> FrameStats:
        """One frame, pass by pass (see the module docstring)."""
        t_start = time.perf_counter()
        st = FrameStats(frame=self.frame_index)
        scene, tg, o = self.scene, self.toggles, self.scene.objects
        self.last_view = view

        # 1. motion
        t0 = time.perf_counter()
        if tg.paused:
            moved = self._empty
        else:
            moved = np.asarray(scene.step(dt), np.int64)
            self.sim_time += dt
        st.moved = int(moved.shape[0])
        t1 = time.perf_counter()

        # 2. index update
        self.pipeline.update(moved, o.centers)
        t2 = time.perf_counter()

        # 3. cull, with the culling camera (frozen or the view camera): two-pass occlusion's
        #    early cull keeps last frame's visible set still in view; the other modes query
        #    the index (previous-frame occlusion: against the last frame's pyramid)
        cull_view = self.frozen_cull if (tg.frozen and self.frozen_cull is not None) else view
        occ = self.occlusion
        two_pass = occ is not None and occ.mode == "two-pass" and tg.frustum
        pyramid = None if occ is None or two_pass else occ.last_frame_pyramid()
        res = self.pipeline.cull(cull_view.planes, cull_view.eye, frustum=tg.frustum,
                                 view_distance=tg.view_distance, occlusion=pyramid,
                                 among=self.visible_last_frame if two_pass else None,
                                 all_ids=o.ids, centers=o.centers, radii=o.radii,
                                 view_distances=o.view_distances)
        visible = None if res is None else res.visible
        t3 = time.perf_counter()

        # 4. upload: the visible instances, centres read from the scene's array (the
        #    collision view tints the balls in contact first)
        if self.collision is not None:
            self.collision.tint(tg.collision)
        self._drawn_ids = visible
        self.objects.use_centers(o.centers)
        st.drawn = self.objects.upload(visible, view.eye)
        t4 = time.perf_counter()

        # 5. main pass
        fbo = self.target.fbo
        self._bind_main_pass()
        fbo.clear(*BACKGROUND, depth=1.0)
        self.objects.draw(view.viewproj, LIGHT_DIR)

        # 6. occlusion: this frame's pyramid (previous: for the next frame); two-pass's late
        #    cull against it, then the draw of what the early cull missed. Ground truth is
        #    measured in between, so that its timing does not wait for that draw.
        if occ is not None:
            pyramid = occ.build_pyramid(self.target.depth, self.target.size, view.viewproj)
            extra = None
            if two_pass:
                t_late = time.perf_counter()
                res = self.pipeline.cull(cull_view.planes, cull_view.eye, frustum=True,
                                         view_distance=tg.view_distance, occlusion=pyramid)
                extra = newly_visible(res.visible, visible)
                occ.note_cull(res, (time.perf_counter() - t_late) * 1e3, int(extra.shape[0]))
                self.visible_last_frame = res.visible.copy()  # the index may reuse buffers
            else:
                occ.note_cull(res)
            if occ.ground_truth:
                self._measure_ground_truth(view, visible, extra)
            if extra is not None and extra.shape[0]:
                self._bind_main_pass()  # the pyramid and id-buffer passes changed the GL state
                st.drawn += self.objects.upload(extra, view.eye)
                self.objects.draw(view.viewproj, LIGHT_DIR)
        self.ctx.finish()
        t5 = time.perf_counter()

        # numbers for the log and the HUD
        n = int(o.ids.shape[0])
        st.visible = st.drawn if res is None else int(res.visible.shape[0])
        st.working_set = n if res is None else int(res.working_set)
        st.nodes_visited = 0 if res is None else int(res.nodes_visited)
        st.motion_ms = (t1 - t0) * 1e3
        st.index_update_ms = (t2 - t1) * 1e3
        st.cull_ms = (t3 - t2) * 1e3
        st.upload_ms = (t4 - t3) * 1e3
        st.render_ms = (t5 - t4) * 1e3
        st.time_s = self.sim_time
        self._fps_times.append(t_start)
        if len(self._fps_times) > 1:
            span = self._fps_times[-1] - self._fps_times[0]
            self.fps = (len(self._fps_times) - 1) / span if span > 0 else 0.0

        # 7. overlays: the culled-by-stage counts (when someone reads them), then the
        #    drawing (a frame that is to be saved gets its notices after the save)
        if tg.hud or self.recorder.active:
            st.stages = self.pipeline.stage_counts(
                cull_view.planes, cull_view.eye, frustum=tg.frustum,
                view_distance=tg.view_distance, occlusion=occ is not None and occ.mode != "off",
                visible=st.visible, drawn=st.drawn, centers=o.centers, radii=o.radii,
                view_distances=o.view_distances, frame=self.frame_index)
            st.stages_ms = (time.perf_counter() - t5) * 1e3
        self._timings.append((st.render_ms, (t5 - t_start) * 1e3))
        shot = self._shot_path is not None
        self.draw_overlays(view, cull_view, st, notices=not shot)
        self.ctx.finish()
        t6 = time.perf_counter()
        # The stage count is a measurement for the HUD and the log (like ground truth): its
        # time is stages_ms, outside overlay_ms and frame_ms, so that runs compare alike.
        st.overlay_ms = (t6 - t5) * 1e3 - st.stages_ms
        st.frame_ms = (t6 - t_start) * 1e3 - st.stages_ms
        self.stats = st

        # 8. record
        if self.recorder.active:
            self.recorder.write(self.log_row(st))
        self.frame_index += 1
        if shot:
            self._take_requested_screenshot()
            if self.toggles.hud and not self.toggles.help:
                self._bind_target()
                self.draw_hud(st, lines=False)  # the notices, on screen only
        return st

    def _measure_ground_truth(self, view: CameraView, visible: np.ndarray | None,
                              extra: np.ndarray | None) -> None:
        """Hand the provider every object in the view frustum (an unoccluded query with the
        view camera, exact) and what this frame draws; measurement, not part of the frame."""
        started = time.perf_counter()
        in_view = drawn = None
        if visible is not None:
            in_view = self.pipeline.cull(view.planes, view.eye, frustum=True,
                                         view_distance=self.toggles.view_distance).visible
            drawn = visible if extra is None else np.concatenate((visible, extra))
        self.occlusion.measure_ground_truth(view, self.target.size, in_view, drawn,
                                            self.scene.objects, self.frame_index, started)

    def _bind_target(self) -> None:
        """Draw into the scene target, whatever pass (pyramid, id buffer) ran before."""
        self.target.fbo.use()
        self.ctx.viewport = (0, 0, *self.target.size)

    def _bind_main_pass(self) -> None:
        """The scene target and the state of the object draws (depth-tested, opaque,
        back faces culled)."""
        self._bind_target()
        self.ctx.enable(moderngl.DEPTH_TEST)
        self.ctx.disable(moderngl.BLEND)
        self.ctx.depth_func = "<"
        self.ctx.enable(moderngl.CULL_FACE)  # meshes are closed and wound counter-clockwise

    # ------------------------------------------------------------------ overlays

    def draw_overlays(self, view: CameraView, cull_view: CameraView, st: FrameStats,
                      notices: bool = True) -> None:
        tg = self.toggles
        self._bind_target()
        self.ctx.disable(moderngl.CULL_FACE)
        self.ctx.enable(moderngl.BLEND)
        self.ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self._labels = []
        self._legend = None
        self.box_count = self.box_total = 0
        if tg.boxes != "off" and self.pipeline.index is not None:
            self._draw_boxes(view)
        if tg.frozen and self.frozen_cull is not None:
            self._draw_frozen_camera(view, cull_view)
        if self.collision is not None and tg.collision:
            self.ctx.disable(moderngl.DEPTH_TEST)
            self.collision.draw_lines(tg.pair_lines, view.viewproj, self.scene.objects.centers,
                                      self._drawn_ids)
        if tg.hud or tg.help:
            self.draw_hud(st, notices=notices)

    def _draw_boxes(self, view: CameraView) -> None:
        """The index's node boxes that the filter keeps, by depth or by outcome, and the
        legend of their colours."""
        tg = self.toggles
        index = self.pipeline.index
        if hasattr(self.pipeline, "box_data"):  # a nested index: turned boxes (nested_view)
            from app.viewer.nested_view import draw_boxes

            return draw_boxes(self, view)
        lo, hi, depth = index.node_boxes()
        self.box_total = int(lo.shape[0])
        if tg.boxes == "depth":
            cols = depth_colors(depth)
            word = "level" if self.config.name == "grid" else "depth"
            self._legend = (f"box {word}:", depth_legend(depth))
        else:
            codes = index.node_outcomes()
            if codes.shape[0] != lo.shape[0]:
                codes = np.zeros(lo.shape[0], np.int8)
            cols = outcome_colors(codes)
            self._legend = ("box outcome:", outcome_legend())
        if tg.box_filter != "all" and lo.shape[0]:
            keep = select_boxes(lo, hi, depth, tg.box_filter)
            lo, hi, cols = lo[keep], hi[keep], cols[keep]
        self.ctx.disable(moderngl.DEPTH_TEST)
        self.box_count = self.boxes.set_boxes(lo, hi, cols)
        self.boxes.draw(view.viewproj)

    def _draw_frozen_camera(self, view: CameraView, cull_view: CameraView) -> None:
        """The frozen culling camera: its frustum, near and far planes, a marker at its eye
        (sized to show from the view camera) and labels naming them."""
        self.ctx.disable(moderngl.DEPTH_TEST)
        eye = np.asarray(cull_view.eye, np.float64)
        away = float(np.linalg.norm(np.asarray(view.eye) - eye))
        near, far = view_depth_range(cull_view.proj)
        size = 0.025 * away if away > 1e-6 else 0.0
        self.frustum_lines.set_frustum(cull_view.viewproj, eye, view=cull_view.view,
                                       marker_size=size)
        self.frustum_lines.draw(view.viewproj)
        if size <= 0:
            return  # the view is the culling camera: nothing to label
        fwd = -np.asarray(cull_view.view[2, :3], np.float64)
        for point, text, dy in ((eye, "culling camera", -1.6),
                                (eye + fwd * near, f"near plane {near:g}", 0.6),
                                (eye + fwd * far * 0.999, f"far plane {far:g}", 0.0)):
            at = self._screen_point(view, point)
            if at is not None:
                self._labels.append((at[0], at[1] + dy * self.hud.ch, text))

    def _screen_point(self, view: CameraView, p: np.ndarray) -> tuple[float, float] | None:
        """Pixel (x right, y down) of a world point in the view, None behind or off screen."""
        c = view.viewproj @ np.append(np.asarray(p, np.float64), 1.0)
        if c[3] <= 1e-9:
            return None
        x, y = c[0] / c[3], c[1] / c[3]
        if abs(x) > 1.0 or abs(y) > 1.0:
            return None
        w, h = self.target.size
        return (x + 1) / 2 * w, (1 - y) / 2 * h

    def no_nodes_reason(self) -> str | None:
        """Why the index visits no nodes and has no boxes to draw, when that is by design
        (brute, viewdist without view distances, chunks in slot order, frustum culling off);
        None otherwise. Asked of the index's stats at most every 15 frames."""
        index = self.pipeline.index
        key = (id(index), self.config.name, self.toggles.frustum, self.frame_index // 15)
        if self._reason[0] == key:
            return self._reason[1]
        reason = None
        name = self.config.name
        if not self.toggles.frustum:
            reason = "frustum culling is off (F), so no query walks the index"
        elif name == "brute":
            reason = "brute is a flat scan of every object, it has none"
        elif index is not None:
            try:
                stats = index.stats()
            except Exception:  # noqa: BLE001 - a HUD line must never break a frame
                stats = {}
            if name == "viewdist" and len(index) and stats.get("infinite", 0) >= len(index):
                reason = ("viewdist keeps objects without a view distance in a flat list "
                          "beside its tree, and no object of this scene has one (meadow has)")
            elif stats.get("order") == "slot":
                reason = ("chunks went to slot order because most objects move every frame, "
                          "and scans them flat")
        self._reason = (key, reason)
        return reason

    def render_bound(self, st: FrameStats) -> str | None:
        """A HUD hint when drawing dominates slow frames (llvmpipe draws in software)."""
        if len(self._timings) < 10:
            return None
        render = sum(r for r, _ in self._timings)
        frame = sum(f for _, f in self._timings)
        mean = frame / len(self._timings)
        if frame <= 0 or render < RENDER_BOUND_SHARE * frame or mean < RENDER_BOUND_MS:
            return None
        w, h = self.target.size
        n = int(self.scene.objects.ids.shape[0])
        gl = ", software GL" if self.software_gl else ""
        return (f"render-bound: drawing is {render / frame:.0%} of a {mean:.0f} ms frame "
                f"({st.drawn:,} objects at {w}x{h}{gl}); try --size {w // 2}x{h // 2} or "
                f"fewer objects (--objects {max(n // 2, 1)})")

    def stages_line(self, st: FrameStats) -> str | None:
        """Unreal's ``stat initviews`` in one line: how many objects each stage culled."""
        c = st.stages
        if c is None:
            return None

        def part(name: str, v: int | None) -> str:
            return f"{name} {'off' if v is None else f'{v:,}'}"

        share = c.culled / c.objects if c.objects else 0.0
        line = (f"culled {c.culled:,} of {c.objects:,} ({share:.1%}):  "
                f"{part('frustum', c.frustum)}   {part('distance', c.distance)}   "
                f"{part('occlusion', c.occlusion)}   -> drawn {c.drawn:,}")
        if not c.counted:
            line += "  (recounted every few frames)"
        return line

    def hud_lines(self, st: FrameStats) -> list[str]:
        tg, c = self.toggles, self.config
        n = int(self.scene.objects.ids.shape[0])
        split = self.pipeline.split_threshold()
        on = {True: "on", False: "off"}
        variant = ("leafy" if c.leafy else "non-leafy") if c.is_tree() else "-"
        reason = None
        if st.nodes_visited == 0 or (tg.boxes != "off" and self.box_total == 0):
            reason = self.no_nodes_reason()
        nodes = "      -" if reason and st.nodes_visited == 0 else f"{st.nodes_visited:>7,}"
        boxes = tg.boxes if tg.boxes == "off" or tg.box_filter == "all" else \
            f"{tg.boxes} ({self.box_filter_label()}: {self.box_count:,} of {self.box_total:,})"
        lines = [
            f"{self.fps:6.1f} fps   frame {self.stats.frame_ms:6.1f} ms   update "
            f"{st.update_ms:5.2f}  cull {st.cull_ms:5.2f}  upload {st.upload_ms:5.2f}  render "
            f"{st.render_ms:6.1f}",
            f"visible {st.visible:>8,}   working set {st.working_set:>8,}   nodes visited "
            f"{nodes}   objects {n:,}   drawn {st.drawn:,}",
        ]
        stages = self.stages_line(st)
        if stages:
            lines.append(stages)
        lines += [
            f"index {c.name}  variant {variant}  split threshold "
            f"{split if split is not None else '-'}   [{self.pipeline.describe()}]",
            f"frustum {on[tg.frustum]}  view distance {on[tg.view_distance]}  occlusion "
            f"{tg.occlusion}  boxes {boxes}  frozen {on[tg.frozen]}  motion "
            f"{'paused' if tg.paused else 'running'}  rec "
            f"{self.recorder.path.name if self.recorder.active else 'off'}",
            f"scene {self.scene.name}   camera: {self.camera_label or self.rig.describe()}   "
            "F1 help",
        ]
        if reason:
            empty = tg.boxes != "off" and self.box_total == 0
            lines.append(f"{'no nodes, no boxes to draw' if empty else 'no nodes visited'}: "
                         f"{reason}")
        hint = self.render_bound(st)
        if hint:
            lines.append(hint)
        if self.occlusion is not None:
            lines += list(self.occlusion.hud_lines())
        if self.collision is not None and tg.collision:
            lines += self.collision.hud_lines(tg.pair_lines)
        if hasattr(self.pipeline, "hud_lines"):  # a nested index (nested_view)
            lines += self.pipeline.hud_lines()
        return lines

    def draw_hud(self, st: FrameStats, lines: bool = True, notices: bool = True) -> None:
        """The HUD text (``lines``) with the box legend, the frozen camera's labels, the
        transient notices under it (``notices``) and the help panel; notices show only with
        the HUD."""
        w, h = self.target.size
        hud_on = self.toggles.hud and not self.toggles.help
        hud_lines = self.hud_lines(st) if hud_on else []
        now = time.perf_counter()
        while self.notices and self.notices[0][0] < now:
            self.notices.popleft()
        msgs = [m for _, m in self.notices] if hud_on and notices else []
        shown = hud_lines + msgs + (HELP_LINES if self.toggles.help else [])
        legend = self._legend if hud_on and self.box_total else None
        if legend:
            shown = shown + [legend[0] + "".join(f"     {t}" for t, _ in legend[1])]
        # Text is laid out in a virtual screen at least as wide as the widest line, then
        # scaled to the real one: in a small window the HUD shrinks instead of being cut off.
        # (The scale counts the HUD lines even when only the notices are drawn, so that the
        # notices keep their size.)
        scale = max(1.0, (self.hud.text_size(shown)[0] + 16) / max(w, 1))
        if self.toggles.help:  # and the help panel as tall as the screen, at most
            scale = max(scale, (self.hud.text_size(HELP_LINES)[1] + 16) / max(h, 1))
        vw, vh = w * scale, h * scale
        if hud_lines and lines:
            _, th = self.hud.text(8, 6, hud_lines, color=(0.95, 0.97, 1.0, 1.0))
            if legend:
                self.hud.legend(8, 6 + th + 6, legend[0], legend[1])
            for x, y, text in self._labels:
                self.hud.text(x * scale + 6, y * scale, [text], color=(1.0, 0.75, 0.4, 1.0))
        if msgs:
            _, th = self.hud.text_size(msgs)
            self.hud.text(8, vh - th - 8, msgs, color=(1.0, 0.85, 0.3, 1.0))
        if self.toggles.help and lines:
            tw, th = self.hud.text_size(HELP_LINES)
            self.hud.panel(0, 0, vw, vh, color=(0.0, 0.0, 0.0, 0.45))  # dim the scene behind
            self.hud.text(max(8, (vw - tw) // 2), max(8, (vh - th) // 2), HELP_LINES,
                          color=(0.85, 1.0, 0.85, 1.0))
        self.hud.draw((vw, vh), (w, h))

    # ------------------------------------------------------------------ logging

    def log_row(self, st: FrameStats) -> dict[str, Any]:
        tg = self.toggles
        split = self.pipeline.split_threshold()
        row = {
            "frame": st.frame, "time_s": round(st.time_s, 6), "frame_ms": round(st.frame_ms, 4),
            "update_ms": round(st.update_ms, 4), "cull_ms": round(st.cull_ms, 4),
            "render_ms": round(st.render_ms, 4), "visible": st.visible,
            "working_set": st.working_set, "nodes_visited": st.nodes_visited,
            "objects": int(self.scene.objects.ids.shape[0]), "index": self.config.label(),
            "occlusion": tg.occlusion,
            "motion_ms": round(st.motion_ms, 4), "index_update_ms": round(st.index_update_ms, 4),
            "upload_ms": round(st.upload_ms, 4), "overlay_ms": round(st.overlay_ms, 4),
            "cpu_ms": round(st.cpu_ms, 4), "drawn": st.drawn,
            "split_threshold": "" if split is None else split,
            "frustum": int(tg.frustum), "view_distance": int(tg.view_distance),
            "frozen": int(tg.frozen), "moved": st.moved,
            "frustum_culled": None if st.stages is None else st.stages.frustum,
            "distance_culled": None if st.stages is None else st.stages.distance,
            "occlusion_culled": None if st.stages is None else st.stages.occlusion,
            "stages_ms": round(st.stages_ms, 4),
        }
        if self.occlusion is not None:
            row.update(self.occlusion.log_values())
        if self.collision is not None:
            row.update(self.collision.log_values())
        if hasattr(self.pipeline, "log_values"):
            row.update(self.pipeline.log_values())
        return row


__all__ = ["BOX_FILTERS", "BOX_MODES", "DEFAULT_LOG_DIR", "DEFAULT_SHOT_DIR", "EXTRA_COLUMNS",
           "HELP_LINES", "OCCLUSION_MODES", "OUTCOME_NAMES", "FrameStats", "OcclusionProvider",
           "Recorder", "Toggles", "Viewer"]
