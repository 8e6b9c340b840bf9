"""The frame's timing model: a frame's wall time split into stages that sum to it.

A frame's wall time (``frame_ms``) runs from its start to the next frame's start, so that fps
is ``1000 / frame_ms`` and nothing the process does between two frames goes unaccounted: the
stages of :data:`app.framelog.TIME_STAGES` (motion ... HUD timed by the frame and the viewer,
present timed by the window, stall for a rebuild or index switch between frames) and
``other``, the rest (the event loop, the log row, Python between the passes). A frame is
*open* until the next one starts (or the recording stops, or the viewer closes); it is then
*closed*: its wall time is known, its log row written and it joins the history the frame
graph draws.

Stalls are marked: a rebuild or index switch between frames (its own stage, ``stall_ms``),
numba compiling kernels during a frame (``compile_ms``: inside the stage that called the
kernel, so not a stage of its own); either names the frame's ``stall``.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from app.framelog import TIME_STAGES
from app.viewer.state import FrameStats

#: Frames the history keeps (the frame graph's width in frames).
HISTORY = 300
#: A frame counts as a stall (marked on the graph) when something named it, or it took this long.
STALL_MS = 250.0

STAGE_COLUMNS: tuple[str, ...] = tuple(c for c, _, _ in TIME_STAGES)
_OTHER = STAGE_COLUMNS.index("other_ms")


def stage_values(st: FrameStats) -> list[float]:
    """The frame's stage times (ms) in :data:`STAGE_COLUMNS` order."""
    return [float(getattr(st, c)) for c in STAGE_COLUMNS]


def close_frame(st: FrameStats, end: float) -> None:
    """Close ``st`` at ``end`` (perf_counter seconds): its wall time, and ``other`` as what the
    stages leave of it (never negative: the stages are timed inside the frame). The brute-force
    reference's time (``reference_ms``) is a measurement, left out of the frame's wall time."""
    st.frame_ms = max((end - st.started) * 1e3 - st.reference_ms, 0.0)
    st.other_ms = 0.0
    named = sum(stage_values(st))
    st.other_ms = max(st.frame_ms - named, 0.0)
    st.frame_ms = max(st.frame_ms, named)  # rounding of perf_counter only


class CompileClock:
    """Milliseconds numba spent compiling in this process (any thread), from its compile
    events: a frame compares the clock at its start and end."""

    def __init__(self) -> None:
        self.total_ms = 0.0
        self.kernels = 0
        self._depth: dict[int, tuple[int, float]] = {}  # thread -> (nesting, outer start)
        self._lock = threading.Lock()
        self._listening = False

    def listen(self) -> None:
        """Register with numba's event system (once)."""
        if self._listening:
            return
        from numba.core import event

        clock = self

        class _Listener(event.Listener):
            def on_start(self, ev) -> None:
                clock.started()

            def on_end(self, ev) -> None:
                clock.ended()

        event.register("numba:compile", _Listener())
        self._listening = True

    def started(self) -> None:
        key = threading.get_ident()
        with self._lock:
            depth, t0 = self._depth.get(key, (0, time.perf_counter()))
            self._depth[key] = (depth + 1, t0)

    def ended(self) -> None:
        key = threading.get_ident()
        with self._lock:
            depth, t0 = self._depth.get(key, (1, time.perf_counter()))
            self.kernels += 1
            if depth <= 1:  # nested compiles count once, in the outermost
                self._depth.pop(key, None)
                self.total_ms += (time.perf_counter() - t0) * 1e3
            else:
                self._depth[key] = (depth - 1, t0)


COMPILES = CompileClock()


class FrameHistory:
    """The last :data:`HISTORY` closed frames' stage times, frame times and stall marks, as
    arrays (oldest first) for the frame graph."""

    def __init__(self, size: int = HISTORY) -> None:
        self.size = size
        self._stages = np.zeros((size, len(STAGE_COLUMNS)), np.float32)
        self._stall = np.zeros(size, bool)
        self.count = 0  # frames pushed so far

    def push(self, st: FrameStats) -> None:
        i = self.count % self.size
        self._stages[i] = stage_values(st)
        self._stall[i] = bool(st.stall) or st.frame_ms >= STALL_MS
        self.count += 1

    def _order(self) -> np.ndarray:
        n = min(self.count, self.size)
        start = self.count - n
        return (np.arange(start, self.count) % self.size).astype(np.int64)

    def stages(self) -> np.ndarray:
        """(n, stages) milliseconds, oldest frame first; each row sums to its frame time."""
        return self._stages[self._order()]

    def stalls(self) -> np.ndarray:
        """(n,) whether each frame is marked as a stall."""
        return self._stall[self._order()]

    def frame_ms(self) -> np.ndarray:
        return self.stages().sum(axis=1)


class FrameClock:
    """Opens and closes the viewer's frames (see the module docstring); ``on_close`` gets
    each closed frame (the log row, the history)."""

    def __init__(self) -> None:
        self.open: FrameStats | None = None
        self.last: FrameStats | None = None  # the last closed frame (the HUD's timing)
        self.history = FrameHistory()
        self.t0 = time.perf_counter()  # wall_s counts from here
        self._pending_stall: list[tuple[str, float]] = []  # before the first frame opened
        COMPILES.listen()

    def begin(self, st: FrameStats, started: float, compile_mark: float) -> None:
        """``st`` is the frame now open, started at ``started`` (perf_counter seconds) with
        the compile clock at ``compile_mark`` (:data:`COMPILES`'s ``total_ms`` then)."""
        st.started = started
        st.wall_s = started - self.t0
        st.compile_mark = compile_mark
        self.open = st
        for what, ms in self._pending_stall:
            self.note_stall(what, ms)
        self._pending_stall = []

    def end_passes(self, st: FrameStats) -> None:
        """The frame's own work is over: what numba compiled during it names a stall."""
        ms = COMPILES.total_ms - st.compile_mark
        if ms > 0.5:
            st.compile_ms = ms
            _name(st, f"compile {ms:.0f} ms")

    def note_stall(self, what: str, ms: float, between_frames: bool = True) -> None:
        """A stall of ``ms`` milliseconds (a rebuild, an index switch) in the open frame:
        between frames it is the ``stall`` stage; ``what`` names it either way."""
        st = self.open
        if st is None:
            self._pending_stall.append((what, ms))
            return
        if between_frames:
            st.stall_ms += ms
        _name(st, f"{what} {ms:.0f} ms")

    def add_present(self, ms: float) -> None:
        """Present time (blit and swap) of the open frame, measured by the window."""
        if self.open is not None:
            self.open.present_ms += ms

    def close(self, end: float | None = None) -> FrameStats | None:
        """Close the open frame at ``end`` (default now); returns it (None: none open)."""
        st, self.open = self.open, None
        if st is None:
            return None
        close_frame(st, time.perf_counter() if end is None else end)
        self.history.push(st)
        self.last = st
        return st


def _name(st: FrameStats, text: str) -> None:
    st.stall = text if not st.stall else f"{st.stall}; {text}"
