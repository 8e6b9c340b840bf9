"""The interactive window (pyglet + moderngl): held flying keys, the mouse, and the shared
frame sequence; every other key goes to :meth:`app.viewer.frame.Viewer.key` by name.

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
from pathlib import Path

import numpy as np

from app.viewer.setup import StartupError, hud_px, load, occlusion_factory

MOUSE_SENS = 0.0035  # radians per pixel
START = time.perf_counter()  # process start, near enough: this module loads first


def window_id(window) -> int:
    """The X11 window id (as ``xdotool`` prints it), or 0 where there is none."""
    return int(getattr(window, "_window", 0) or 0)


class ViewerWindow:
    def __init__(self, args, window, ctx, viewer, scene) -> None:
        import pyglet

        self.args = args
        self.window = window
        self.ctx = ctx
        self.viewer = viewer
        self.scene = scene
        self.rig = viewer.rig  # fly camera, camera path (C), outside orbit (X)
        if args.record:
            viewer.record_base = Path(args.record)
        if args.screenshot:
            viewer.screenshot_base = Path(args.screenshot)
        self.keys = pyglet.window.key.KeyStateHandler()
        # Handlers pushed last run first. The key-state table must see every press before
        # on_key_press below consumes it (returning True stops the event), or WASD never
        # registers as held.
        window.push_handlers(self)
        window.push_handlers(self.keys)
        self.captured = False
        self.last = time.perf_counter()
        lo = scene.objects.centers.min(axis=0) if len(scene.objects.ids) else np.zeros(3)
        hi = scene.objects.centers.max(axis=0) if len(scene.objects.ids) else np.ones(3)
        self.base_speed = max(5.0, float(np.linalg.norm(hi - lo)) / 12.0)  # units per second
        self.closed = False
        self.first_frame_at: float | None = None  # perf_counter of the first frame on screen

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
        now = time.perf_counter()
        dt = min(now - self.last, 0.1)
        self.last = now
        self.fly(dt)
        w, h = self.window.get_framebuffer_size()
        self.viewer.target.resize((w, h))
        self.viewer.tick(dt)
        self.blit_to_screen((w, h))
        if self.first_frame_at is None:
            # The line tests and scripts wait for: the window shows a frame from now on.
            self.first_frame_at = now
            print(f"demo: first frame at {now - START:.1f} s (window {window_id(self.window)})",
                  flush=True)

    def blit_to_screen(self, size) -> None:
        """Colour only: the target's depth format need not match the window's."""
        from pyglet import gl

        src = self.viewer.target
        gl.glBindFramebuffer(gl.GL_READ_FRAMEBUFFER, src.fbo.glo)
        gl.glBindFramebuffer(gl.GL_DRAW_FRAMEBUFFER, 0)
        gl.glBlitFramebuffer(0, 0, src.size[0], src.size[1], 0, 0, size[0], size[1],
                             gl.GL_COLOR_BUFFER_BIT, gl.GL_NEAREST)
        gl.glBindFramebuffer(gl.GL_FRAMEBUFFER, 0)

    # ------------------------------------------------------------------ input

    def on_key_press(self, symbol, modifiers):
        from pyglet.window import key

        v = self.viewer
        shift = modifiers & key.MOD_SHIFT
        if symbol == key.ESCAPE:
            if self.captured:
                self.set_capture(False)
            else:
                self.quit()
            return True  # pyglet's default handler would close the window itself
        if symbol == key.M:
            self.set_capture(not self.captured)
            return True
        v.key(key.symbol_string(symbol).lower(), bool(shift))
        return True

    def set_capture(self, on: bool) -> None:
        self.captured = on
        self.window.set_exclusive_mouse(on)

    def on_mouse_drag(self, x, y, dx, dy, buttons, modifiers):
        self.rig.rotate(dx * MOUSE_SENS, dy * MOUSE_SENS)

    def on_mouse_motion(self, x, y, dx, dy):
        if self.captured:
            self.rig.rotate(dx * MOUSE_SENS, dy * MOUSE_SENS)

    def on_mouse_scroll(self, x, y, scroll_x, scroll_y):
        if self.rig.mode == "orbit":
            self.rig.zoom(math.pow(1.2, -scroll_y))
        else:
            self.base_speed *= math.pow(1.2, scroll_y)

    def quit(self) -> None:
        import pyglet

        self.viewer.close()  # the log is complete before the window goes
        pyglet.app.exit()

    def on_close(self):
        self.viewer.close()
        self.closed = True


def run_window(args) -> int:
    try:
        import pyglet

        pyglet.options["debug_gl"] = False  # no glGetError after every pyglet GL call
    except ImportError as exc:
        print(f"demo: pyglet is not installed ({exc}); use --headless", file=sys.stderr)
        return 2
    try:
        scene, config, toggles = load(args)
    except StartupError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    from app.viewer.collision_view import apply_collision_index

    note = apply_collision_index(scene, getattr(args, "collision_index", None))
    if note:
        print(f"demo: {note}", file=sys.stderr)
    size = args.size or (1280, 720)
    try:
        gl_config = pyglet.gl.Config(major_version=3, minor_version=3, forward_compatible=True,
                                     double_buffer=True, depth_size=24)
        window = pyglet.window.Window(size[0], size[1], caption=f"cullview - {scene.name}",
                                      resizable=True, config=gl_config, vsync=False)
    except Exception as exc:  # noqa: BLE001 - NoSuchDisplayException, no GL 3.3, ...
        print(f"demo: cannot open a window ({type(exc).__name__}: {exc}); use --headless "
              f"or run under xvfb-run", file=sys.stderr)
        return 2
    print(f"demo: window {window_id(window)} open", flush=True)
    import moderngl

    from app.culling.pipeline import warm_up

    if not args.no_warmup:
        t0 = time.perf_counter()
        print("demo: compiling the index kernels (cached after the first run) ...", flush=True)
        warm_up()
        print(f"demo: ready in {time.perf_counter() - t0:.1f} s", flush=True)
    from app.viewer.frame import Viewer

    ctx = moderngl.create_context()
    fb = window.get_framebuffer_size()
    occ_mode = toggles.occlusion
    toggles.occlusion = "off"
    try:
        viewer = Viewer(ctx, scene, config, fb, toggles,
                        occlusion_factory=occlusion_factory(bool(args.ground_truth)),
                        hud_px=hud_px(fb[1]))
    except Exception as exc:  # noqa: BLE001
        window.close()
        print(f"demo: cannot start: {exc}", file=sys.stderr)
        return 2
    if occ_mode != "off" or args.ground_truth:
        viewer.set_occlusion(occ_mode)
    app = ViewerWindow(args, window, ctx, viewer, scene)
    if args.record:
        viewer.start_recording(args.record)

    def stop(signum, _frame):
        # Ctrl-C / SIGTERM: finish the frame in flight, close the log, leave the loop.
        viewer.close()
        pyglet.app.exit()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    # Wake the event loop regularly so a signal is handled even when no events arrive.
    pyglet.clock.schedule_interval(lambda dt: None, 0.1)
    try:
        pyglet.app.run(interval=0)
    except KeyboardInterrupt:
        pass
    finally:
        viewer.close()
        if not app.closed:
            with contextlib.suppress(Exception):
                window.close()
        for line in viewer.written_lines():
            print(f"demo: wrote {line}", flush=True)
    return 0
