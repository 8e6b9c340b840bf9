"""The brute-force reference of the HUD (issue 25): what the `brute` index would cost on a
frame of the viewer, measured every :data:`EVERY` frames beside the live index.

A :class:`BruteReference` keeps a pipeline of its own over the scene's arrays with the
``brute`` index (the project's branch-free float32 scan, :mod:`app.spatial.brute`), built on
its first use. A measurement takes two frames, so that the brute force is timed in the cache
state the live index is timed in:

1. :meth:`BruteReference.prepare`, after the live index's cull of the frame before the
   measured one (untimed): the reference is brought up to date with the objects that moved
   since its last measurement, and this frame's moved ids are written once, so that the
   timed batch finds the same movers as its last one, as in a brute force updated every
   frame of the viewer's scenes, whose set of movers is fixed.
2. :meth:`BruteReference.measure`, on the measured frame, right after the motion and before
   the live index's update: timed, ``update`` of this frame's moved ids and the frustum (and
   view-distance) query with the frame's culling camera, without occlusion. Its cost is
   ``update + cull``, as the live index's.

Both meet their rows as the live index does, after a frame's draw and overlays. Timed right
after the live cull and an untimed write of the same rows (as it was until 2026-11-28), the
brute force read 0.18-0.19 ms a frame on the 24,120-object demo where the `brute` index as
the live index took 0.26-0.27 ms, and the HUD called kd 0.62x as fast as the brute force
while it cost what the brute force costs (docs/viewer.md, "The HUD").

The reference is a measurement, not part of the frame: the frame subtracts the wall time of
both steps from its own (:attr:`FrameStats.reference_ms`), so it is in no stage and not in
fps, and the log records it apart (:data:`COLUMNS`).

Between measurements it costs one identity test a frame: the scenes hand back the same
array of moved ids every frame, so the pending catch-up is a short list of distinct arrays,
not a copy of every object.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from app.culling.pipeline import CullPipeline, IndexConfig
from app.viewer.timing import COMPILES

#: Frames between two measurements: twice a second at 60 fps, so the figure follows the
#: camera and a heuristic switch within a blink, while its cost (a scan of every object:
#: ~0.3 ms at 10^5, ~3 ms at 10^6) stays a thirtieth of that per frame, kept out of the
#: frame's own time anyway.
EVERY = 30

#: Measurements the HUD's figure is the median of: on a busy machine a sub-millisecond
#: measurement loses a scheduler tick (4.2 ms) once in 20-40 (numpy's own loops too), and one
#: such frame would otherwise stand for the brute force for half a second.
RECENT = 5

#: The frame log's columns of the reference, filled on measured frames only.
COLUMNS = ("brute_update_ms", "brute_cull_ms", "brute_visible", "brute_outside_ms")


@dataclass(frozen=True)
class Measurement:
    """One timed brute-force frame: its update and cull, what it found and which frame."""

    frame: int
    update_ms: float
    cull_ms: float
    visible: int  # the brute force's answer: the live index's, when occlusion is off
    outside_ms: float  # the timed step's whole wall time (prepare's is the frame before's)

    @property
    def total_ms(self) -> float:
        return self.update_ms + self.cull_ms


def wanted(index: str, compare: str | None, frustum: bool) -> bool:
    """Whether a frame with live index ``index`` (and A/B's B index ``compare``, None when
    off) gets a reference: not when the live index is the brute force, nor when B is (the
    comparison measures it every frame and the HUD shows it), nor with frustum culling off
    (nothing is culled, so there is no cull to compare)."""
    return frustum and index != "brute" and compare != "brute"


class BruteReference:
    """The brute force's cost of the viewer's frames, every :data:`EVERY` frames."""

    def __init__(self, scene, every: int = EVERY) -> None:
        self.scene = scene
        self.every = every
        self.pipeline: CullPipeline | None = None  # built on the first measurement
        self.last: Measurement | None = None
        self.recent: deque[Measurement] = deque(maxlen=RECENT)
        self._pending: list[np.ndarray] = []  # moved-id arrays since the last measurement
        self._armed: int | None = None  # the frame prepare ran on: the next one is measured
        self.warming = False  # the last try compiled kernels: measured again next frame

    def due(self, frame: int) -> bool:
        """Whether frame number ``frame`` is measured: the first after :data:`EVERY` frames
        since the last measurement (or since the start)."""
        last = -1 if self.last is None else self.last.frame
        return self.warming or frame - last >= self.every or frame < last

    def armed(self, frame: int) -> bool:
        """Whether frame number ``frame`` is measured: :meth:`prepare` ran on the frame
        before it."""
        return self._armed is not None and self._armed == frame - 1 and self.pipeline is not None

    def note_moved(self, moved: np.ndarray) -> None:
        """A frame's moved ids that the reference has not written yet (an identity test
        when it is the same array as the last one noted)."""
        if self.pipeline is None or not moved.shape[0] or any(m is moved for m in self._pending):
            return  # not built yet (the build reads every object), or nothing new
        if len(self._pending) >= 2 * self.every:  # fresh arrays every frame, not measured
            self.pipeline = None  # for long: rebuilt from the scene's arrays when next due
            self._pending.clear()
            return
        self._pending.append(moved)

    def prepare(self, frame: int, moved: np.ndarray, planes: np.ndarray, eye: np.ndarray,
                view_distance: bool) -> None:
        """Step 1 of a measurement (module docstring), untimed, after the live cull of frame
        ``frame``: the reference built if it has to be, brought up to date, this frame's
        movers written; frame ``frame + 1`` is then measured."""
        o = self.scene.objects
        p = self.pipeline
        if p is None or len(p.index) != o.ids.shape[0]:
            p = self.pipeline = CullPipeline(IndexConfig("brute", False))
            p.build(o.ids, o.centers, o.radii, o.view_distances)
            self._pending.clear()
            # a first cull loads (or compiles) its kernels: not in a measured frame
            p.cull(planes, eye, frustum=True, view_distance=view_distance)
        self._catch_up(moved)
        # The timed batch then finds the same movers as the brute's last batch, as a brute
        # force updated every frame of a scene with a fixed set of movers would.
        p.update(moved)
        self._armed = frame

    def measure(self, frame: int, moved: np.ndarray, planes: np.ndarray, eye: np.ndarray,
                view_distance: bool) -> Measurement | None:
        """Step 2 (module docstring): time the brute force's update of this frame's movers
        and its cull, before the live index's update; returns the measurement (None when
        the frame was not prepared for, or numba compiled during it: then the frame after
        the next is measured)."""
        start = time.perf_counter()
        ready = (self.armed(frame)
                 and len(self.pipeline.index) == self.scene.objects.ids.shape[0])
        self._armed = None  # one measurement a prepare, taken or missed
        if not ready:
            return None
        compiled = COMPILES.total_ms
        p = self.pipeline
        t0 = time.perf_counter()
        p.update(moved)
        t1 = time.perf_counter()
        res = p.cull(planes, eye, frustum=True, view_distance=view_distance)
        t2 = time.perf_counter()
        m = Measurement(frame, (t1 - t0) * 1e3, (t2 - t1) * 1e3, int(res.visible.shape[0]),
                        (time.perf_counter() - start) * 1e3)
        # A first use that compiled the brute's kernels timed the compiler: try again
        self.warming = COMPILES.total_ms > compiled
        if self.warming:
            return None
        self.last = m
        self.recent.append(m)
        return m

    @property
    def median_ms(self) -> float | None:
        """The brute force's update + cull, median of the last :data:`RECENT` measurements
        (None before the first)."""
        if not self.recent:
            return None
        return float(np.median([m.total_ms for m in self.recent]))

    def _catch_up(self, moved: np.ndarray) -> None:
        """Write the objects moved since the last measurement, other than this frame's
        (:meth:`prepare` writes those next)."""
        pending = [m for m in self._pending if m is not moved]
        self._pending.clear()
        if not pending:
            return
        ids = pending[0] if len(pending) == 1 else np.unique(np.concatenate(pending))
        self.pipeline.update(ids)

    def forget(self) -> None:
        """Drop the figure (the objects were replaced): the next frame measures again."""
        self.last = None
        self.recent.clear()
        self.pipeline = None
        self._pending.clear()
        self._armed = None


def log_values(m: Measurement | None) -> dict[str, object]:
    """The frame log's cells of a frame: the measurement it made, else empty cells."""
    if m is None:
        return dict.fromkeys(COLUMNS)
    return {"brute_update_ms": round(m.update_ms, 4), "brute_cull_ms": round(m.cull_ms, 4),
            "brute_visible": m.visible, "brute_outside_ms": round(m.outside_ms, 4)}
