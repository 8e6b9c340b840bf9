"""Start-up in the open: the work that compiles kernels runs as named steps, and the user sees
it happen.

On a cold numba cache the first frame waits for every kernel it calls to compile (tens of
seconds on two cores). This module runs that work as a list of :class:`Step` (the scene, then
the starting index's kernels; other indexes compile when first selected) on a
:class:`Worker` thread, so that the main thread stays free to keep a window drawn and the
terminal informed at least once a second (:class:`TerminalTicker`; the window draws its
progress bar itself, ``app.viewer.window``). numba says which kernel it compiles through its
event API (:func:`listen`).

Ctrl-C while kernels compile ends the process at once with one line and status 130
(:func:`install_interrupt_exit`): a KeyboardInterrupt raised inside numba's compiler prints a
traceback hundreds of lines long, and a compile thread cannot be stopped half way.

Only the standard library is imported at module level: the command line loads this first.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TextIO

_LOADED = time.monotonic()

#: Stack of the compile thread: numba's type inference and LLVM recurse deeply.
STACK_BYTES = 256 * 2**20

# ---------------------------------------------------------------------------- process


def process_age() -> float:
    """Seconds since this process started (Linux ``/proc``; elsewhere since this module
    loaded, which is within a few milliseconds of the interpreter's start)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        start_ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _LOADED


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr, then end the process with ``code`` without the interpreter's
    shutdown, which would wait for (or crash in) a thread still compiling."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def interrupted(prog: str) -> NoReturn:
    """``prog: interrupted`` on stderr, exit status 130, at once."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    with contextlib.suppress(OSError):
        os.write(2, f"{prog}: interrupted\n".encode())
    os._exit(130)


def install_interrupt_exit(prog: str) -> Any:
    """From now on Ctrl-C ends the process at once: one line, status 130 (see
    :func:`interrupted`). Returns the previous handler (None off the main thread, where
    nothing is installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, lambda _signum, _frame: interrupted(prog))


# ---------------------------------------------------------------------------- progress


@dataclass
class Step:
    """One named piece of start-up work; ``label`` may name ``{index}`` (filled in when known)."""

    label: str
    run: Callable[[], object]


class Progress:
    """Which step of how many runs, for how long, and what numba compiles right now.

    Written by the thread doing the work (and numba's compile events), read by whoever shows
    it; each field is replaced whole, so a reader never needs a lock.
    """

    def __init__(self, title: str, labels: Sequence[str], prog: str = "demo") -> None:
        self.title = title
        self.labels = list(labels)
        self.prog = prog
        self.fields: dict[str, str] = {"index": "the starting"}
        self.i = -1
        self.t0 = time.monotonic()
        self.step_t0 = self.t0
        self.kernels = 0  # compiled (not loaded from the cache) since this progress began
        self.compiled: Counter[str] = Counter()  # kernel -> specialisations compiled
        self._stack: list[str] = []  # the kernels numba is compiling, outermost first
        self.finished = False

    @property
    def n(self) -> int:
        return len(self.labels)

    def begin(self, i: int) -> None:
        """Step ``i`` starts now."""
        self.step_t0 = time.monotonic()
        self.i = i

    def add(self, label: str) -> int:
        """Append a step (e.g. the first frame, run by the main thread); returns its number."""
        self.labels = [*self.labels, label]
        return len(self.labels) - 1

    def finish(self) -> None:
        self.finished = True

    def label(self) -> str:
        """The current step's label ('' before the first)."""
        if not 0 <= self.i < self.n:
            return ""
        try:
            return self.labels[self.i].format(**self.fields)
        except (KeyError, IndexError, ValueError):
            return self.labels[self.i]

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def current(self) -> str:
        """The kernel numba compiles right now ('' when it compiles nothing)."""
        stack = self._stack
        return stack[-1] if stack else ""

    def headline(self) -> str:
        """``title: label (i of n)``; the title is "starting" until a kernel compiles (a warm
        cache loads them)."""
        title = self.title if self.kernels or self._stack else "starting"
        return f"{title}: {self.label()} ({self.i + 1} of {self.n})"

    def detail(self) -> str:
        """Seconds so far, kernels compiled, and the one in the works."""
        text = f"{self.elapsed():.1f} s"
        if self.kernels:
            text += f", {self.kernels} kernel{'s' if self.kernels != 1 else ''} compiled"
        now = self.current()
        return f"{text}; now {now}" if now else text

    def line(self) -> str:
        """The terminal's progress line."""
        return f"{self.prog}: {self.headline()}, {self.detail()}"

    def fraction(self) -> float:
        """0..1 for a bar: whole steps done, and the current one creeping towards its end
        (the time a step takes is not known in advance, so the bar never stands still)."""
        if self.n == 0:
            return 1.0
        if self.finished:
            return 1.0
        i = max(self.i, 0)
        part = 1.0 - math.exp(-(time.monotonic() - self.step_t0) / 6.0)
        return min(1.0, (i + 0.95 * part) / self.n)

    # numba's compile events (see listen)
    def compile_started(self, name: str) -> None:
        self._stack = [*self._stack, name]

    def compile_ended(self, name: str) -> None:
        self.kernels += 1
        self.compiled[name] += 1
        self._stack = self._stack[:-1]


_ACTIVE: Progress | None = None
_LISTENING = False


def _kernel_name(data: Any) -> str:
    """``module.function`` of a compile event's dispatcher, without the ``app.`` prefix."""
    try:
        fn = data["dispatcher"].py_func
        module = fn.__module__.removeprefix("app.")
        return f"{module}.{fn.__qualname__}"
    except Exception:  # noqa: BLE001 - a name for a progress line, never an error
        return "a kernel"


def listen(progress: Progress | None) -> None:
    """Count numba's compiles into ``progress`` from now on (None: into nothing). Imports
    numba on first use, so call it from the thread that does the work."""
    global _ACTIVE, _LISTENING
    _ACTIVE = progress
    if progress is None or _LISTENING:
        return
    from numba.core import event

    class _Compiles(event.Listener):
        def on_start(self, ev) -> None:
            p = _ACTIVE
            if p is not None:
                p.compile_started(_kernel_name(ev.data))

        def on_end(self, ev) -> None:
            p = _ACTIVE
            if p is not None:
                p.compile_ended(_kernel_name(ev.data))

    event.register("numba:compile", _Compiles())
    _LISTENING = True


def run_steps(steps: Sequence[Step], progress: Progress, first: int = 0) -> None:
    """Run ``steps`` in order, step ``k`` reported as number ``first + k`` of ``progress``."""
    listen(progress)
    for k, step in enumerate(steps):
        progress.begin(first + k)
        step.run()


# ---------------------------------------------------------------------------- threads


class Worker:
    """A function on a daemon thread (with a deep stack); its result or exception is handed
    back to the main thread by :meth:`result`."""

    def __init__(self, fn: Callable[[], Any], name: str = "cullview-compile") -> None:
        self._fn = fn
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Worker:
        try:
            old = threading.stack_size(STACK_BYTES)
        except (ValueError, RuntimeError):
            old = None
        try:
            self.thread.start()
        finally:
            if old is not None:
                threading.stack_size(old)
        return self

    def _run(self) -> None:
        try:
            self._result = self._fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self._error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the function has returned or raised (interruptible by Ctrl-C)."""
        return self._done.wait(timeout)

    def result(self) -> Any:
        """The function's return value; re-raises its exception."""
        if self._error is not None:
            raise self._error
        return self._result


class TerminalTicker:
    """A daemon thread that prints ``progress.line()`` to ``stream`` at least every ``every``
    seconds (and when a step that has run a while begins), so that a terminal is never silent
    for long while kernels compile.

    During the first ``quiet_steps`` steps it speaks only while numba compiles: a check that
    may refuse the run (one line on stderr, scripts count on it) stays silent on a warm cache.
    """

    def __init__(self, progress: Progress, stream: TextIO | None = None, every: float = 1.0,
                 quiet_steps: int = 0) -> None:
        self.progress = progress
        self.stream = stream
        self.every = every
        self.quiet_steps = quiet_steps
        self.lines = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cullview-progress",
                                        daemon=True)

    def start(self) -> TerminalTicker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)

    def _loop(self) -> None:
        p = self.progress
        last = p.t0 - self.every + min(self.every, 0.8)  # the first line by 0.8 s
        shown = -1
        while not self._stop.wait(0.1):
            now = time.monotonic()
            if p.i < 0 or p.finished:
                continue
            if p.i < self.quiet_steps and not (p.kernels or p.current()):
                continue
            new_step = p.i != shown and now - p.step_t0 >= 0.3
            if new_step or now - last >= self.every:
                stream = self.stream or sys.stderr
                try:
                    print(p.line(), file=stream, flush=True)
                except (OSError, ValueError):  # a closed stream: nobody to tell
                    return
                self.lines += 1
                last, shown = now, p.i


def stop_reporting(progress: Progress, ticker: TerminalTicker) -> None:
    """End a start's (or a switch's) reporting: the bar's last state, no more terminal
    lines, no more compile events."""
    progress.finish()
    ticker.stop()
    listen(None)


def wait_for(worker: Worker) -> Any:
    """Wait for ``worker`` (Ctrl-C still reaches the main thread at once); its result."""
    while not worker.wait(0.1):
        pass
    return worker.result()


# ---------------------------------------------------------------------------- checks

#: Peak bytes an object costs a viewer run: the scene's store (~200), the index (~150-250),
#: instance and upload buffers, temporaries, and a second index while the window switches
#: (headless runs measured 390-530 bytes an object at 10^6 objects over a 350 MB process).
RUN_BYTES_PER_OBJECT = 800
RUN_BASE_BYTES = 400_000_000  # the interpreter, numba, the GL driver
FRAMEBUFFER_BYTES_PER_PIXEL = 48  # colour, depth, id buffer, pyramid, screenshot read-back


def run_bytes(objects: int, size: tuple[int, int]) -> int:
    """Rough peak memory of a viewer run: process, objects, framebuffers."""
    return (RUN_BASE_BYTES + objects * RUN_BYTES_PER_OBJECT
            + size[0] * size[1] * FRAMEBUFFER_BYTES_PER_PIXEL)


def check_scene(args: Any) -> str | None:
    """Validate the scene file and refuse a run whose objects would not fit in memory; the
    reason, or None. (Imports the scene code: on a cold cache that compiles kernels.)"""
    from app.scene import SceneError
    from app.scene.scene import check_memory, plan_scene

    size = args.size or (1280, 720)
    try:
        path, counts = plan_scene(args.scene, args.objects)
        total = sum(counts)
        base = run_bytes(0, size)
        check_memory(path, total, RUN_BYTES_PER_OBJECT, "the scene, its index and GPU buffers",
                     base=base)
    except SceneError as exc:
        return str(exc)
    return None


def note_unused_tree_options(args: Any) -> None:
    """Say so when --leafy/--split-threshold are given for an index that has no such option."""
    from app.viewer.catalog import TREE_HEURISTICS

    given = [flag for flag, v in (("--leafy/--non-leafy", args.leafy),
                                  ("--split-threshold", args.split_threshold)) if v is not None]
    if given and args.index is not None and args.index not in TREE_HEURISTICS:
        print(f"demo: note: {' and '.join(given)} apply to the tree indexes "
              f"({', '.join(TREE_HEURISTICS)}), not to {args.index}; they are kept for when "
              "you switch to a tree", file=sys.stderr)


# ---------------------------------------------------------------------------- the first frame


class FirstFrame:
    """The work before the first frame, as steps: the scene, then the starting index's kernels.

    The index steps run a throwaway index over the scene's own objects with the run's own
    toggles (the same calls and argument types as a frame's, hence the same compiled
    specialisations), so that the first frame finds them compiled. Nothing is done for the
    other indexes: they compile when first selected. A warm step that fails is left for the
    real run to report.
    """

    def __init__(self, args: Any, *, check: bool, step_scene: bool) -> None:
        self.args = args
        self.check = check  # validate the scene first (the window: after it opened)
        self.step_scene = step_scene  # advance the scene by one frame (compiles the motion)
        self.scene: Any = None
        self.config: Any = None
        self.toggles: Any = None
        self.progress: Progress | None = None
        self._pipeline: Any = None
        self._moved: Any = None
        self._visible: Any = None
        self._broken = False

    def steps(self) -> list[Step]:
        """The steps in order; which ones depends on the options (boxes, occlusion, HUD)."""
        a = self.args
        out: list[Step] = []
        if self.check:
            out += [Step("scene code", self.import_scene),
                    Step("checking the scene", self.check_scene)]
        out += [Step("building the scene", self.load), Step("viewer code", self.import_viewer),
                Step("{index} index: build", self.build)]
        if self.step_scene:
            out.append(Step("motion", self.move))
        out += [Step("{index} index: update", self.update),
                Step("{index} index: query", self.query)]
        if a.occlusion != "off":
            out.append(Step("{index} index: occlusion query", self.occlusion_query))
        if a.boxes != "off":
            out.append(Step("{index} index: node boxes", self.node_boxes))
        return out

    def run(self, progress: Progress) -> FirstFrame:
        """Every step, reported into ``progress`` (whose labels are :meth:`steps`')."""
        self.progress = progress
        run_steps(self.steps(), progress)
        self._pipeline = None  # the throwaway index goes; the viewer builds its own
        return self

    # ------------------------------------------------------------------ the steps

    def import_scene(self) -> None:
        import app.scene.scene  # noqa: F401 - the scene code (and the kernels it compiles)

    def check_scene(self) -> None:
        from app.viewer.setup import StartupError

        problem = check_scene(self.args)
        if problem:
            raise StartupError(problem)

    def load(self) -> None:
        from app.viewer.collision_view import apply_collision_index
        from app.viewer.setup import load

        self.scene, self.config, self.toggles = load(self.args)
        if self.progress is not None:
            self.progress.fields["index"] = self.config.label()
        note = apply_collision_index(self.scene, getattr(self.args, "collision_index", None))
        if note:
            print(f"demo: {note}", file=sys.stderr, flush=True)

    def import_viewer(self) -> None:
        import app.render.occlusion  # noqa: F401
        import app.viewer.viewer  # noqa: F401

        if getattr(self.scene, "hierarchy", None) is not None:
            import app.viewer.nested_view  # noqa: F401

    def _guarded(self, fn: Callable[[], None]) -> None:
        """Run a warm step unless an earlier one failed; a failure ends the warming (the
        viewer's own build reports it)."""
        if self._broken:
            return
        try:
            fn()
        except Exception:  # noqa: BLE001 - the real run reports it
            self._broken = True

    def build(self) -> None:
        def go() -> None:
            from app.culling.pipeline import CullPipeline

            if getattr(self.scene, "hierarchy", None) is not None:
                from app.viewer.nested_view import NestedPipeline

                p = NestedPipeline(self.config, self.scene)
            else:
                p = CullPipeline(self.config)
            o = self.scene.objects
            p.build(o.ids, o.centers, o.radii, o.view_distances)
            self._pipeline = p

        self._guarded(go)

    def move(self) -> None:
        import numpy as np

        self._moved = np.asarray(self.scene.step(1 / 60), np.int64)

    def _movers(self) -> Any:
        if self._moved is None:
            self._moved = still_movers(self.scene)
        return self._moved

    def view(self) -> Any:
        """The camera of the first frame (the path's start)."""
        from app.viewer.camera import CameraView

        size = self.args.size or (1280, 720)
        cam = self.scene.camera
        eye, target = self.scene.camera_at(self.args.start_time)
        return CameraView.make(eye, target, cam.fov_deg, size[0] / size[1], cam.near, cam.far)

    def update(self) -> None:
        self._guarded(lambda: self._pipeline.update(self._movers(), self.scene.objects.centers))

    def query(self) -> None:
        def go() -> None:
            self._visible = warm_query(self._pipeline, self.scene, self.toggles, self.view())

        self._guarded(go)

    def occlusion_query(self) -> None:
        self._guarded(lambda: warm_occlusion(self._pipeline, self.scene, self.toggles,
                                             self.view(), self.args.occlusion, self._visible))

    def node_boxes(self) -> None:
        self._guarded(lambda: warm_node_boxes(self._pipeline, self.args.boxes))


# ---------------------------------------------------------------------------- warm calls
# A frame's calls into the index, made ahead with the frame's own argument types. They leave
# the scene as it is; on the viewer's live index they leave the same set of objects.


def still_movers(scene: Any) -> Any:
    """The ids a frame hands the index as moved (the scene's movers, read only as the
    scene's own array is: numba compiles read-only arrays separately), without moving."""
    o = scene.objects
    ids = o.ids[~o.static]
    ids.flags.writeable = False
    return ids


def warm_query(pipeline: Any, scene: Any, toggles: Any, view: Any) -> Any:
    """The frame's cull with ``toggles``; the visible ids (None: frustum culling off)."""
    o = scene.objects
    res = pipeline.cull(view.planes, view.eye, frustum=toggles.frustum,
                        view_distance=toggles.view_distance, all_ids=o.ids, centers=o.centers,
                        radii=o.radii, view_distances=o.view_distances)
    return None if res is None else res.visible


def warm_occlusion(pipeline: Any, scene: Any, toggles: Any, view: Any, mode: str,
                   visible: Any) -> None:
    """The cull against a Z-pyramid (previous frame's, or two-pass's late cull), and
    two-pass's early cull of last frame's visible set."""
    import numpy as np

    from app.geom.zpyramid import ZPyramid

    o = scene.objects
    levels = [np.ones((1 << k, 1 << k), np.float32) for k in range(3, -1, -1)]
    pyramid = ZPyramid.from_levels(view.viewproj, levels)
    pipeline.cull(view.planes, view.eye, frustum=True, view_distance=toggles.view_distance,
                  occlusion=pyramid)
    if mode == "two-pass":
        among = o.ids[:16] if visible is None else visible[:16]
        pipeline.cull(view.planes, view.eye, frustum=True, view_distance=toggles.view_distance,
                      among=among, all_ids=o.ids, centers=o.centers, radii=o.radii,
                      view_distances=o.view_distances)


def warm_node_boxes(pipeline: Any, mode: str) -> None:
    """The node-box overlay's data (``mode``: depth or outcome)."""
    if hasattr(pipeline, "box_data"):  # a nested index
        pipeline.box_data("depth" if mode == "depth" else "outcome")
        return
    pipeline.index.node_boxes()
    if mode == "outcome":
        pipeline.index.node_outcomes()
