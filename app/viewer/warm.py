"""``python -m app warm``: compile the kernels ahead of use, with a progress bar.

A first start compiles what its first frame uses (with its progress shown), and an index its
own kernels when it is first selected. ``scripts/run.sh`` runs this once after installing so
that neither waits: the demo scene's first frame (headless, through EGL), every index (both
variants of the trees) on the demo's objects, then every other scene's first frame. numba
caches what compiles; a stamp in the cache folder (the kernels' own stamps, numba's and
Python's versions) lets ``--if-needed`` return at once the next time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from app.viewer.startup import FirstFrame, Progress, Step, Worker, listen, run_steps, wait_for

PACKAGE = Path(__file__).resolve().parents[1]
STAMP_PREFIX = "warm-"
#: Objects a scene is warmed with at most: large enough for the parallel kernels (32,768).
MAX_WARM_OBJECTS = 100_000
FRAME_SIZE = "160x90"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The warm options."""
    p.add_argument("--if-needed", action="store_true",
                   help="return at once when these sources were warmed already (a stamp in "
                        "the kernel cache folder)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--demo-only", action="store_true",
                   help="only the demo scene's first frame (what ./scripts/run.sh opens)")


def sources_key() -> str:
    """The state warmed: the kernels' own stamps (each kernel module's import closure, see
    :mod:`app.kernel_cache`: an edit of the viewer or a docstring keeps it), numba's and
    Python's versions. Stats files and reads a memo, a few milliseconds."""
    from importlib.metadata import PackageNotFoundError, version

    from app.kernel_cache import graph_for

    found = graph_for(PACKAGE / "__init__.py")
    kernels = found[0].kernels_stamp() if found is not None else "unconfigured"
    try:
        numba_version = version("numba")
    except PackageNotFoundError:
        numba_version = "?"
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{kernels}\0{numba_version}\0{sys.version}\0{sys.executable}".encode())
    return h.hexdigest()


def cache_folder() -> Path | None:
    """numba's cache folder for this package (``NUMBA_CACHE_DIR``, set by ``import app``)."""
    path = os.environ.get("NUMBA_CACHE_DIR")
    return Path(path) if path else None


def stamp_path() -> Path | None:
    """Where the stamp of the current state lives (None: no cache folder known)."""
    folder = cache_folder()
    return None if folder is None else folder / f"{STAMP_PREFIX}{sources_key()}"


def is_warm() -> bool:
    """True when the current sources were warmed into the current cache folder."""
    stamp = stamp_path()
    return stamp is not None and stamp.is_file()


def _demo_args(scene: str, objects: int | None = None) -> argparse.Namespace:
    """``demo --headless`` arguments for ``scene`` (the demo parser's defaults)."""
    from app.viewer.cli import add_arguments as demo_arguments

    p = argparse.ArgumentParser()
    demo_arguments(p)
    extra = [] if objects is None else ["--objects", str(objects)]
    return p.parse_args(["--headless", "--scene", scene, "--size", FRAME_SIZE, "--frames", "2",
                         *extra])


def _scene_objects(scene: str) -> int | None:
    """The object count to warm ``scene`` with: its own, at most :data:`MAX_WARM_OBJECTS`."""
    from app.scene.scene import plan_scene

    _, counts = plan_scene(scene)
    return None if sum(counts) <= MAX_WARM_OBJECTS else MAX_WARM_OBJECTS


class _Frames:
    """A headless viewer's first frames on the compile thread (the render side's kernels:
    instance upload, overlays); the EGL context is made and used on that thread only."""

    def __init__(self) -> None:
        self.ctx: Any = None
        self.failed: str | None = None

    def run(self, plan: FirstFrame) -> None:
        if self.failed:
            return
        try:
            from app.render.context import create_headless_context
            from app.viewer.camera import CameraView
            from app.viewer.setup import hud_px, occlusion_factory
            from app.viewer.viewer import Viewer

            if self.ctx is None:
                self.ctx = create_headless_context()
            args, scene = plan.args, plan.scene
            size = args.size
            viewer = Viewer(self.ctx, scene, plan.config, size, plan.toggles,
                            occlusion_factory=occlusion_factory(False), hud_px=hud_px(size[1]))
            cam = scene.camera
            for i in range(2):
                eye, target = scene.camera_at(i / 60)
                viewer.frame(1 / 60, CameraView.make(eye, target, cam.fov_deg,
                                                     size[0] / size[1], cam.near, cam.far))
            viewer.close()
        except Exception as exc:  # noqa: BLE001 - no EGL here: the window compiles them
            self.failed = f"{type(exc).__name__}: {exc}"


def plan(demo_only: bool = False) -> tuple[list[Step], FirstFrame]:
    """Every step of the warm-up, in order: the demo's start first (what run.sh opens); and
    the demo's plan (its progress labels name its index once known)."""
    from app.viewer.catalog import INDEX_NAMES, TREE_HEURISTICS, list_scenes

    frames = _Frames()
    steps: list[Step] = [Step("scene code", lambda: __import__("app.scene.scene"))]
    demo = FirstFrame(_demo_args("demo"), check=False, step_scene=True)
    steps += [Step(f"demo: {s.label}", s.run) for s in demo.steps()]
    steps.append(Step("demo: first frames", lambda: frames.run(demo)))
    if demo_only:
        return steps, demo

    labels = [f"{n}/{v}" if n in TREE_HEURISTICS else n for n in INDEX_NAMES
              for v in (("leafy", "non-leafy") if n in TREE_HEURISTICS else ("",))]

    def index(label: str) -> Step:
        name, _, variant = label.partition("/")

        def go() -> None:
            from app.culling.pipeline import warm_up
            from app.viewer.startup import still_movers

            leafy = variant != "non-leafy"
            if name == demo.config.name and (not variant or leafy == demo.config.leafy):
                return  # the demo's own index: done above
            scene = demo.scene
            o = scene.objects
            view = demo.view()
            warm_up([name], (o.ids, o.centers, o.radii, o.view_distances, still_movers(scene)),
                    (view.planes, view.eye), leafy=leafy if variant else None)

        return Step(f"index {label}", go)

    steps += [index(label) for label in labels]
    for name in list_scenes():
        if name == "demo":
            continue
        steps.append(Step(f"scene {name}", _scene_step(name, frames)))
    return steps, demo


def _scene_step(name: str, frames: _Frames):
    def go() -> None:
        from app.scene import SceneError

        try:
            args = _demo_args(name, _scene_objects(name))
        except SceneError:
            return
        sub = FirstFrame(args, check=False, step_scene=True)
        try:
            for step in sub.steps():  # within this one step of the warm-up's progress
                step.run()
        except Exception:  # noqa: BLE001 - a scene that fails here fails its own run too
            return
        frames.run(sub)

    return go


def run(args: argparse.Namespace) -> int:
    """Warm the kernel cache (or see that it is warm); the exit status."""
    stamp = stamp_path()
    if args.if_needed and stamp is not None and stamp.is_file():
        return 0
    steps, demo = plan(args.demo_only)
    progress = Progress("compiling kernels", [s.label for s in steps], prog="warm")
    demo.progress = progress
    t0 = time.monotonic()
    worker = Worker(lambda: run_steps(steps, progress)).start()
    try:
        if args.quiet:
            wait_for(worker)
        else:
            _show(worker, progress)
    except Exception as exc:  # noqa: BLE001 - one line; the viewer reports it in full
        print(f"warm: stopped at {progress.label()}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 1
    finally:
        listen(None)
    took = time.monotonic() - t0
    print(f"warm: {progress.kernels} kernels compiled in {took:.0f} s "
          f"(cache: {cache_folder() or 'numba default'})", file=sys.stderr, flush=True)
    if stamp is not None and not args.demo_only:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        for old in stamp.parent.glob(f"{STAMP_PREFIX}*"):
            old.unlink(missing_ok=True)
        stamp.write_text(f"warmed in {took:.0f} s, {progress.kernels} kernels compiled\n")
    return 0


def _show(worker: Worker, progress: Progress) -> None:
    """A tqdm bar of the steps, its text the step and the kernel compiling now."""
    from tqdm import tqdm

    tty = sys.stderr.isatty()
    every = 0.25 if tty else 5.0
    with tqdm(total=progress.n, desc="compiling kernels", unit="step", file=sys.stderr,
              dynamic_ncols=True, mininterval=every,
              bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                         "[{elapsed}] {postfix}") as bar:
        while not worker.wait(every):
            bar.n = max(progress.i, 0)
            bar.set_postfix_str(f"{progress.label()}: {progress.current() or '...'}"[:70],
                                refresh=False)
            bar.refresh()
        bar.n = progress.n
        bar.set_postfix_str("done", refresh=False)
        bar.refresh()
    worker.result()
