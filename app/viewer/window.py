"""The interactive window (pyglet + moderngl): held flying keys, the mouse, and the shared
frame sequence; every other key goes to :meth:`app.viewer.viewer.Viewer.key` by name.

Start-up in the open: the window opens first (``demo: window <id> open``); a worker thread
then checks and builds the scene and compiles the starting index's kernels
(:class:`app.viewer.startup.FirstFrame`) while the window draws what compiles over a progress
bar and the terminal gets a line at least every second; the first frame follows (``demo:
first frame at T s (window <id>)``, T counted from the process's start). An index selected
for the first time (I / Shift+I) compiles the same way, its progress drawn over the last
frame; nothing is compiled for indexes nobody selects.

Rendering goes into the viewer's offscreen target (colour + depth texture) and is blitted to
the window each frame, so the window and headless runs draw exactly the same passes. At exit
every file the session wrote is printed (``demo: wrote ...``).
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.viewer.catalog import INDEX_NAMES
from app.viewer.startup import (
    FirstFrame,
    Progress,
    TerminalTicker,
    Worker,
    exit_now,
    interrupted,
    listen,
    process_age,
    still_movers,
    stop_reporting,
    warm_query,
)

MOUSE_SENS = 0.0035  # radians per pixel
BACKGROUND = (0.09, 0.10, 0.13, 1.0)  # app.viewer.frame's, without importing it early
PROGRESS_PAUSE = 0.1  # seconds between progress screens: the compile thread gets the GIL
PROGRESS_DELAY = 0.2  # a compile over within this shows the last frame only (no flicker)
FIRST_USE_NOTE = "kernels compile on first use and are cached on disk for later runs"


def window_id(window) -> int:
    """The X11 window id (as ``xdotool`` prints it), or 0 where there is none."""
    return int(getattr(window, "_window", 0) or 0)


class ProgressScreen:
    """A progress bar under a few lines of text, drawn with the HUD's text renderer on the
    background colour or over the last frame (dimmed)."""

    def __init__(self, ctx, px: int = 18) -> None:
        from app.render.hud import HudRenderer

        self.ctx = ctx
        self.hud = HudRenderer(ctx, px)

    def draw(self, size: tuple[int, int], lines: list[str], fraction: float,
             backdrop: Callable[[], None] | None = None) -> None:
        """The screen at ``size`` (the window's framebuffer), ``fraction`` of the bar full."""
        w, h = size
        ctx = self.ctx
        ctx.screen.use()
        ctx.viewport = (0, 0, w, h)
        if backdrop is None:
            ctx.clear(*BACKGROUND)
        else:
            backdrop()
            ctx.screen.use()
            ctx.viewport = (0, 0, w, h)
            self.hud.panel(0, 0, w, h, color=(0.0, 0.0, 0.0, 0.55))
        hud = self.hud
        tw, th = hud.text_size(lines)
        bar_w = max(40.0, min(w - 48.0, max(640.0, tw)))
        x = (w - bar_w) / 2
        y = h / 2 + 8
        hud.text(max(8.0, x), y - th - 16, lines, color=(0.95, 0.97, 1.0, 1.0),
                 background=False)
        hud.panel(x, y, bar_w, 16, color=(1.0, 1.0, 1.0, 0.15))
        hud.panel(x, y, bar_w * min(max(fraction, 0.0), 1.0), 16, color=(0.35, 0.75, 1.0, 0.95))
        hud.draw((w, h))


@dataclass
class Job:
    """Work on the compile thread while the window shows its progress; ``then`` runs on the
    main thread when it is done."""

    worker: Worker
    progress: Progress
    ticker: TerminalTicker
    then: Callable[[Job], None]
    over_frame: bool = False  # draw the progress over the last frame (an index switch)
    started: float = 0.0

    def running(self) -> bool:
        return not self.worker.done()


class ViewerWindow:
    """The window's event handlers: start-up, frames, keys and mouse, index switches."""

    def __init__(self, args, window, ctx) -> None:
        import pyglet

        self.args = args
        self.window = window
        self.ctx = ctx
        self.viewer: Any = None  # made once the start-up job is done
        self.scene: Any = None
        self.rig: Any = None  # fly camera, camera path (C), outside orbit (X)
        self.keys = pyglet.window.key.KeyStateHandler()
        # Handlers pushed last run first. The key-state table must see every press before
        # on_key_press below consumes it (returning True stops the event), or WASD never
        # registers as held.
        window.push_handlers(self)
        window.push_handlers(self.keys)
        self._wrap_flip()
        self.captured = False
        self.last = time.perf_counter()
        self.base_speed = 10.0  # units per second; set from the scene's size
        self.closed = False
        self.first_frame_at: float | None = None  # perf_counter of the first frame on screen
        self.exit_code = 0
        self.error: str | None = None  # why the start failed (printed after the window)
        self.job: Job | None = None
        self.screen = ProgressScreen(ctx)
        self.warm: set[str] = set()  # indexes whose kernels this process compiled or loaded
        self._start_ticker: TerminalTicker | None = None
        self._start_progress: Progress | None = None
        self._switch_started = 0.0  # perf_counter when an index switch's job began
        self._stall_before = 0.0  # the open frame's stall_ms then

    def _wrap_flip(self) -> None:
        """Time pyglet's buffer swap, which its event loop calls after ``on_draw``, into the
        open frame's present stage (with the blit, timed in ``on_draw``)."""
        flip = self.window.flip

        def timed_flip() -> None:
            t0 = time.perf_counter()
            flip()
            if self.viewer is not None and self.job is None:
                self.viewer.note_present((time.perf_counter() - t0) * 1e3)

        self.window.flip = timed_flip

    # ------------------------------------------------------------------ start-up

    def start(self) -> None:
        """Begin the start-up job: the scene and the starting index's kernels."""
        plan = FirstFrame(self.args, check=True, step_scene=True)
        progress = Progress("compiling kernels", [s.label for s in plan.steps()])
        self._first_step = progress.add("first frame (upload and render kernels)")
        ticker = TerminalTicker(progress).start()
        self._start_ticker, self._start_progress = ticker, progress
        self.job = Job(Worker(lambda: plan.run(progress)).start(), progress, ticker,
                       self._started, started=time.monotonic())

    def _started(self, job: Job) -> None:
        """The start-up job is done: make the viewer (its first frame follows at once)."""
        from app.viewer.setup import StartupError

        try:
            plan = job.worker.result()
        except StartupError as exc:
            self.fail(str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - one line, like every refusal
            self.fail(f"cannot start: {type(exc).__name__}: {exc}")
            return
        job.progress.begin(self._first_step)
        self.draw_progress(job)  # what the window shows while the first frame compiles
        self.window.flip()
        from app.viewer.setup import hud_px, occlusion_factory, start_comparison
        from app.viewer.viewer import Viewer

        args, scene = self.args, plan.scene
        fb = self.window.get_framebuffer_size()
        toggles = plan.toggles
        occ_mode = toggles.occlusion
        toggles.occlusion = "off"
        try:
            viewer = Viewer(self.ctx, scene, plan.config, fb, toggles,
                            occlusion_factory=occlusion_factory(bool(args.ground_truth)),
                            hud_px=hud_px(fb[1]))
        except Exception as exc:  # noqa: BLE001
            self.fail(f"cannot start: {exc}")
            return
        if occ_mode != "off" or args.ground_truth:
            viewer.set_occlusion(occ_mode)
        problem = start_comparison(viewer, args)
        if problem:
            self.fail(problem)
            return
        if viewer.comparison.active:
            self.warm.add(viewer.comparison.pipeline.config.name)
        if args.record:
            viewer.capture.record_base = Path(args.record)
        if args.screenshot:
            viewer.capture.screenshot_base = Path(args.screenshot)
        if args.dump_path:
            viewer.inspector.base = Path(args.dump_path)  # J's file
        self.viewer, self.scene, self.rig = viewer, scene, viewer.rig
        self.warm.add(plan.config.name)
        objs = scene.objects
        if len(objs.ids):
            import numpy as np

            extent = float(np.linalg.norm(objs.centers.max(axis=0) - objs.centers.min(axis=0)))
            self.base_speed = max(5.0, extent / 12.0)
        self.window.set_caption(f"cullview - {scene.name}")
        if args.record:
            viewer.start_recording(args.record)
        self.last = time.perf_counter()

    def fail(self, message: str, code: int = 2) -> None:
        """End the run with ``message`` (printed after the window closed) and ``code``."""
        import pyglet

        if self._start_ticker is not None:
            self._start_ticker.stop()
        self.error, self.exit_code = message, code
        pyglet.app.exit()

    def draw_progress(self, job: Job) -> None:
        """The progress screen of ``job`` (over the last frame for an index switch)."""
        w, h = self.window.get_framebuffer_size()
        p = job.progress
        title = f"cullview - {self.scene.name if self.scene is not None else self.args.scene}"
        lines = [title, "", p.headline(), p.detail(), "", FIRST_USE_NOTE]
        over = job.over_frame and self.viewer is not None
        self.screen.draw((w, h), lines, p.fraction(),
                         (lambda: self.blit_to_screen((w, h))) if over else None)

    # ------------------------------------------------------------------ per frame

    def fly(self, dt: float) -> None:
        from pyglet.window import key

        k = self.keys
        speed = self.base_speed * (5.0 if (k[key.LSHIFT] or k[key.RSHIFT]) else 1.0) * dt
        fwd = (k[key.W] or k[key.UP]) - (k[key.S] or k[key.DOWN])
        right = (k[key.D] or k[key.RIGHT]) - (k[key.A] or k[key.LEFT])
        up = (k[key.E] or k[key.SPACE]) - (k[key.Q] or k[key.LCTRL] or k[key.RCTRL])
        if fwd or right or up:
            self.rig.move(fwd * speed, right * speed, up * speed)

    def on_draw(self) -> None:
        job = self.job
        if job is not None:
            if job.running():
                if job.over_frame and time.monotonic() - job.started < PROGRESS_DELAY:
                    self.blit_to_screen(self.window.get_framebuffer_size())
                else:
                    self.draw_progress(job)
                time.sleep(PROGRESS_PAUSE)  # the compile thread runs meanwhile
                return
            self.job = None
            job.then(job)
        if self.viewer is None:
            self.ctx.screen.use()
            self.ctx.clear(*BACKGROUND)
            return
        now = time.perf_counter()
        dt = min(now - self.last, 0.1)
        self.last = now
        self.fly(dt)
        w, h = self.window.get_framebuffer_size()
        self.viewer.target.resize((w, h))
        self.viewer.tick(dt)
        t_blit = time.perf_counter()
        self.blit_to_screen((w, h))
        self.viewer.note_present((time.perf_counter() - t_blit) * 1e3)
        if self.first_frame_at is None:
            # The line tests and scripts wait for: the window shows a frame from now on.
            self.first_frame_at = now
            self._end_start_report()
            print(f"demo: first frame at {process_age():.1f} s (window "
                  f"{window_id(self.window)})", flush=True)

    def _end_start_report(self) -> None:
        """Stop the start-up's terminal lines (the first frame is on screen)."""
        p, ticker = self._start_progress, self._start_ticker
        if p is not None and ticker is not None:
            stop_reporting(p, ticker)
            if p.kernels:
                print(f"demo: ready: {p.kernels} kernels compiled in {p.elapsed():.1f} s "
                      "(cached for the next start)", file=sys.stderr, flush=True)

    def blit_to_screen(self, size) -> None:
        """Colour only: the target's depth format need not match the window's."""
        from pyglet import gl

        src = self.viewer.target
        gl.glBindFramebuffer(gl.GL_READ_FRAMEBUFFER, src.fbo.glo)
        gl.glBindFramebuffer(gl.GL_DRAW_FRAMEBUFFER, 0)
        gl.glBlitFramebuffer(0, 0, src.size[0], src.size[1], 0, 0, size[0], size[1],
                             gl.GL_COLOR_BUFFER_BIT, gl.GL_NEAREST)
        gl.glBindFramebuffer(gl.GL_FRAMEBUFFER, 0)

    # ------------------------------------------------------------------ index switches

    def _next_index(self, step: int) -> str:
        """The index I (+1) or Shift+I (-1) selects (as ``Viewer.cycle_index``)."""
        names = list(INDEX_NAMES)
        cur = self.viewer.config.name
        i = names.index(cur) if cur in names else 0
        return names[(i + step) % len(names)]

    def switch_index(self, shift: bool) -> None:
        """I / Shift+I to an index not used yet in this process (:meth:`_warm_in_background`)."""
        v, target = self.viewer, self._next_index(-1 if shift else 1)

        def build() -> bool:
            v.key("i", shift)  # rebuilds on this thread (a failure keeps the old index)
            return v.config.name == target

        self._warm_in_background(target, target, build, lambda: v.pipeline, self._switched)

    def _warm_in_background(self, label: str, name: str, build, pipeline_of, done) -> None:
        """Build index ``name`` on the compile thread (``build`` says whether it took), then
        run its update and query (``pipeline_of()``'s) once there too, while the window shows
        the progress over the last frame; frames resume when it is ready and ``done`` gets
        the job. The wait is noted as a stall (:meth:`_note_switch_stall`)."""
        v, view = self.viewer, self.viewer.last_view
        self._switch_started = time.perf_counter()
        self._stall_before = v.clock.open.stall_ms if v.clock.open is not None else 0.0
        progress = Progress("compiling kernels", [f"{label} index: build",
                                                  f"{label} index: update",
                                                  f"{label} index: query"])
        progress.fields["index"] = name

        def work() -> None:
            listen(progress)
            progress.begin(0)
            if not build() or view is None:
                return
            progress.begin(1)
            pipeline = pipeline_of()
            pipeline.update(still_movers(v.scene), v.scene.objects.centers)
            progress.begin(2)
            warm_query(pipeline, v.scene, v.toggles, view)

        ticker = TerminalTicker(progress).start()
        self.job = Job(Worker(work).start(), progress, ticker, done, over_frame=True,
                       started=time.monotonic())

    def _switched(self, job: Job) -> None:
        stop_reporting(job.progress, job.ticker)
        self._note_switch_stall()
        try:
            job.worker.result()
        except Exception as exc:  # noqa: BLE001 - the old index stays; say why
            self.viewer.notice(f"cannot switch the index: {exc}", 6.0)
            return
        self._first_use(self.viewer.config.name, job)
        self.last = time.perf_counter()

    def _first_use(self, name: str, job: Job) -> None:
        """Index ``name`` is warm now: say how many kernels its first use compiled."""
        self.warm.add(name)
        p = job.progress
        if p.kernels:
            msg = f"{name}: {p.kernels} kernels compiled in {p.elapsed():.1f} s (first use)"
            self.viewer.notice(msg, 6.0)
            print(f"demo: {msg}", file=sys.stderr, flush=True)

    def _note_switch_stall(self, what: str | None = None) -> None:
        """The index switch froze the frames: its time beyond the rebuild (which the viewer
        noted itself) is a stall of the open frame, compile and warm-up."""
        v = self.viewer
        total = (time.perf_counter() - self._switch_started) * 1e3
        open_frame = v.clock.open
        rebuilt = (open_frame.stall_ms if open_frame is not None else 0.0) - self._stall_before
        v.note_stall(f"{what or f'index switch to {v.config.name}'} (compile, warm-up)",
                     max(total - rebuilt, 0.0))

    def switch_compare(self, config) -> None:
        """F2 / Shift+F2 to a B index not used yet in this process: built, updated and
        queried once on the compile thread (:meth:`_warm_in_background`)."""
        v, name = self.viewer, config.name

        def done(job: Job) -> None:
            stop_reporting(job.progress, job.ticker)
            self._note_switch_stall(f"B {name}")
            try:
                job.worker.result()
            except Exception as exc:  # noqa: BLE001 - B stays as it was; say why
                self.viewer.notice(f"cannot compare with {name}: {exc}", 6.0)
                return
            if v.comparison.active and v.comparison.pipeline.config.name == name:
                self._first_use(name, job)
            self.last = time.perf_counter()

        self._warm_in_background(f"B {name}", name, lambda: v.set_compare(config),
                                 lambda: v.comparison.pipeline, done)

    # ------------------------------------------------------------------ input

    def on_key_press(self, symbol, modifiers):
        from pyglet.window import key

        shift = bool(modifiers & key.MOD_SHIFT)
        if symbol == key.ESCAPE:
            if self.captured:
                self.set_capture(False)
            else:
                self.quit()
            return True  # pyglet's default handler would close the window itself
        v = self.viewer
        if v is None or self.job is not None:
            return True  # starting, or an index compiling: keys wait for the frames
        if symbol == key.M:
            self.set_capture(not self.captured)
            return True
        name = key.symbol_string(symbol).lower()
        if name == "i" and self._next_index(-1 if shift else 1) not in self.warm:
            self.switch_index(shift)
            return True
        if name == "f2":
            b = v.next_compare(-1 if shift else 1)
            if b is not None and b.name not in self.warm:
                self.switch_compare(b)
                return True
        v.key(name, shift)
        return True

    def set_capture(self, on: bool) -> None:
        self.captured = on
        self.window.set_exclusive_mouse(on)

    def on_mouse_drag(self, x, y, dx, dy, buttons, modifiers):
        if self.rig is not None:
            self.rig.rotate(dx * MOUSE_SENS, dy * MOUSE_SENS)

    def on_mouse_motion(self, x, y, dx, dy):
        if self.captured and self.rig is not None:
            self.rig.rotate(dx * MOUSE_SENS, dy * MOUSE_SENS)

    def on_mouse_scroll(self, x, y, scroll_x, scroll_y):
        if self.rig is None:
            return
        if self.rig.mode == "orbit":
            self.rig.zoom(math.pow(1.2, -scroll_y))
        else:
            self.base_speed *= math.pow(1.2, scroll_y)

    def quit(self) -> None:
        import pyglet

        if self.viewer is not None:
            self.viewer.close()  # the log is complete before the window goes
        pyglet.app.exit()

    def on_close(self):
        if self.viewer is not None:
            self.viewer.close()
        self.closed = True

    def written_lines(self) -> list[str]:
        """The A/B summary and the ``demo: wrote ...`` lines of the files the session
        wrote."""
        if self.viewer is None:
            return []
        return [f"demo: {line}" for line in self.viewer.compare_summary] + [
            f"demo: wrote {line}" for line in self.viewer.written_lines()]


def run_window(args) -> int:
    """The window of ``demo``: open it, start up inside it, run the frames; the exit status."""
    try:
        import pyglet

        pyglet.options["debug_gl"] = False  # no glGetError after every pyglet GL call
    except ImportError as exc:
        print(f"demo: pyglet is not installed ({exc}); use --headless", file=sys.stderr)
        return 2
    size = args.size or (1280, 720)
    try:
        gl_config = pyglet.gl.Config(major_version=3, minor_version=3, forward_compatible=True,
                                     double_buffer=True, depth_size=24)
        window = pyglet.window.Window(size[0], size[1], caption=f"cullview - {args.scene}",
                                      resizable=True, config=gl_config, vsync=False)
    except Exception as exc:  # noqa: BLE001 - NoSuchDisplayException, no GL 3.3, ...
        print(f"demo: cannot open a window ({type(exc).__name__}: {exc}); use --headless "
              f"or run under xvfb-run", file=sys.stderr)
        return 2
    print(f"demo: window {window_id(window)} open", flush=True)
    import moderngl

    ctx = moderngl.create_context()
    app = ViewerWindow(args, window, ctx)

    def on_signal(signum, _frame):
        # Ctrl-C while kernels compile: at once (a compile thread cannot be stopped), after
        # closing the log; otherwise finish the frame in flight, then leave the loop.
        if app.job is not None and app.job.running():
            if app.viewer is not None:
                app.viewer.close()
                for line in app.written_lines():
                    print(line, flush=True)
            if signum == signal.SIGINT:
                interrupted("demo")
            exit_now(0)
        # Only ask the loop to stop: the frame in flight may be writing its log row, and
        # closing the log under it ended in a traceback. The ``finally`` below closes it.
        app.exit_code = 130 if signum == signal.SIGINT else 0
        pyglet.app.exit()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    app.start()
    # Wake the event loop regularly so a signal is handled even when no events arrive.
    pyglet.clock.schedule_interval(lambda dt: None, 0.1)
    try:
        pyglet.app.run(interval=0)
    except KeyboardInterrupt:
        app.exit_code = 130
    finally:
        if app.viewer is not None:
            app.viewer.close()
        if not app.closed:
            with contextlib.suppress(Exception):
                window.close()
        for line in app.written_lines():
            print(line, flush=True)
    if app.error:
        print(f"demo: {app.error}", file=sys.stderr, flush=True)
    if app.exit_code == 130:
        print("demo: interrupted", file=sys.stderr, flush=True)
    if app.job is not None and app.job.running():
        exit_now(app.exit_code)  # closed while compiling: do not wait for the compile thread
    return app.exit_code
