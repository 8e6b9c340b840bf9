"""Offscreen runs through EGL: N frames along the scene's camera path, log, screenshot.

The scene is checked and built, and the starting index's kernels compiled, on a worker thread
(``app.viewer.startup``) while stderr says what compiles at least once a second; the first
frame (on the main thread: the EGL context lives there) compiles the rest, still reported.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import numpy as np

from app.viewer.startup import (
    FirstFrame,
    Progress,
    TerminalTicker,
    Worker,
    listen,
    note_unused_tree_options,
    process_age,
    stop_reporting,
    wait_for,
)


def run_headless(args) -> int:
    """The headless run of ``demo --headless``; the exit status."""
    from app.viewer.setup import StartupError

    plan = FirstFrame(args, check=True, step_scene=False)
    progress = Progress("compiling kernels", [s.label for s in plan.steps()])
    first_frame = progress.add("first frame (motion, upload and render kernels)")
    ticker = TerminalTicker(progress, quiet_steps=2).start()  # the check may refuse: quiet
    try:
        wait_for(Worker(lambda: plan.run(progress)).start())
    except StartupError as exc:
        ticker.stop()
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    note_unused_tree_options(args)
    progress.begin(first_frame)
    try:
        code = _run(args, plan, progress, ticker)
    finally:
        ticker.stop()
        listen(None)
    return code


def _started(progress: Progress, ticker: TerminalTicker) -> None:
    """After the first frame: stop reporting, say when it came (when the start was long
    enough to report), and let Ctrl-C end the frame loop cleanly from now on."""
    stop_reporting(progress, ticker)
    if ticker.lines:
        print(f"demo: first frame at {process_age():.1f} s (headless; {progress.kernels} "
              "kernels compiled)", file=sys.stderr, flush=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _run(args, plan: FirstFrame, progress: Progress, ticker: TerminalTicker) -> int:
    from app.render.context import create_headless_context
    from app.viewer.camera import CameraView
    from app.viewer.setup import hud_px, occlusion_factory, start_comparison
    from app.viewer.viewer import Viewer

    scene, config, toggles = plan.scene, plan.config, plan.toggles
    size = args.size or (1280, 720)
    try:
        ctx = create_headless_context()
    except Exception as exc:  # noqa: BLE001 - no EGL: say so in one line
        print(f"demo: cannot create a headless OpenGL context through EGL: {exc}",
              file=sys.stderr)
        return 2
    factory = occlusion_factory(bool(args.ground_truth))
    occ_mode = toggles.occlusion
    toggles.occlusion = "off"
    try:
        viewer = Viewer(ctx, scene, config, size, toggles, occlusion_factory=factory,
                        hud_px=hud_px(size[1]))
    except Exception as exc:  # noqa: BLE001
        print(f"demo: cannot start: {exc}", file=sys.stderr)
        return 2
    if occ_mode != "off" or getattr(args, "ground_truth", False):
        viewer.set_occlusion(occ_mode)
    problem = start_comparison(viewer, args)
    if problem:
        print(f"demo: {problem}", file=sys.stderr)
        return 2
    cam = scene.camera
    aspect = size[0] / size[1]
    started = False
    try:
        for _ in range(max(0, args.warmup)):  # numba kernels compile on first use
            eye, target = scene.camera_at(args.start_time)
            viewer.frame(args.dt, CameraView.make(eye, target, cam.fov_deg, aspect, cam.near,
                                                  cam.far))
            if not started:
                started = True
                _started(progress, ticker)
        viewer.frame_index = 0
        viewer.comparison.reset()  # the report counts the recorded frames only
        if args.record:
            if Path(args.record).exists():  # a scripted run names its log: replace it, say so
                print(f"demo: replacing the existing log {args.record}", file=sys.stderr)
            viewer.start_recording(args.record)
        t0 = time.perf_counter()
        for i in range(args.frames):
            t = args.start_time + i * args.dt
            eye, target = scene.camera_at(t)
            view = CameraView.make(eye, target, cam.fov_deg, aspect, cam.near, cam.far)
            viewer.camera_label = f"camera path {t % max(scene.duration, 1e-9):5.1f} / " \
                                  f"{scene.duration:.0f} s (headless)"
            if args.freeze_at is not None and i == args.freeze_at and not toggles.frozen:
                viewer.toggle_freeze(view)
            if args.dump_frame is not None and i == args.dump_frame:
                viewer.request_dump(args.dump_path)  # written as frame i ends
            if args.screenshot and i == args.frames - 1:
                viewer.request_screenshot(args.screenshot)  # the last frame, without notices
            if args.orbit_out and toggles.frozen:
                viewer.camera_label = f"outside the frozen culling camera ({args.orbit_out:g}x)"
                eye2 = np.asarray(target) + (np.asarray(eye) - np.asarray(target)) * args.orbit_out
                eye2 = eye2 + np.array([0.0, 0.35, 0.0]) * np.linalg.norm(eye2 - target)
                view = CameraView.make(eye2, target, cam.fov_deg, aspect, cam.near,
                                       cam.far * max(1.0, args.orbit_out * 1.5))
            viewer.frame(args.dt, view)
            if not started:
                started = True
                _started(progress, ticker)
        dumped = viewer.inspector.last
        wall = time.perf_counter() - t0 - viewer.capture.last_screenshot_s - (
            0.0 if dumped is None else (dumped.build_ms + dumped.write_ms) / 1e3)
        viewer.close()
    except KeyboardInterrupt:
        viewer.close()
        for line in [*viewer.compare_summary, *(f"wrote {w}" for w in viewer.written_lines())]:
            print(f"demo: {line}")
        print("demo: interrupted", file=sys.stderr, flush=True)
        return 130
    if viewer.inspector.failed:
        print(f"demo: --dump-path: {viewer.inspector.failed}", file=sys.stderr)
        return 2
    print(f"demo: {args.frames} frames of {scene.name} with {config.label()} in {wall:.2f} s "
          f"({args.frames / wall:.1f} fps)")
    for line in viewer.compare_summary:
        print(f"demo: {line}")
    for line in viewer.written_lines():
        print(f"demo: wrote {line}")
    return 0

