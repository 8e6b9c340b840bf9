"""``python -m app bench index``: per-frame culling cost of every index, side by side with
numpy and compiled brute force measured in the same run (issues 2, 3 and 24).

For every workload and every subject (peers and index variants): build (insert) time, the first
query (which includes lazy splits) separately, then the workload's motion patterns one after
another on the same instance (as a game's motion changes): per frame ``remove`` + ``insert`` +
``update`` (the update side) and ``query_frustum``; per pattern the median and the p99 frame.
The visible set of every frame is compared with the reference definition (exactness column).
A subject that raises is reported as failed for that pattern, and the run goes on.
"""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.bench.baselines import subjects
from app.bench.workloads import (
    FLOOR_SLACK,
    FRESH_PATTERNS,
    PATTERNS,
    WORKLOADS,
    Frame,
    Workload,
    make_workload,
)
from app.parallelism import PARALLEL_MIN


@dataclass
class Row:
    """One (workload, pattern, subject) cell of the matrix."""

    workload: str
    subject: str
    pattern: str = "fixed"
    n: int = 0
    build_s: float = float("nan")
    first_query_ms: float = float("nan")
    update_ms: float = float("nan")  # remove + insert + update, median
    query_ms: float = float("nan")
    frame_ms: float = float("nan")  # median of the frames' totals
    p99_ms: float = float("nan")  # 99th percentile of the frames' totals
    # the update side over the objects it moved, removed or inserted, median over the frames
    ns_per_object: float = float("nan")
    visible: int = 0
    working_set: int = 0
    nodes_visited: int = 0
    exact: str = ""
    error: str = ""
    # filled in afterwards
    x_numpy: float = float("nan")
    x_numba: float = float("nan")  # against the faster compiled brute force, same pattern
    # that brute force's frame over its own update: the ratio an index that wrote the batch as
    # cheaply as the brute force does and queried for free would reach
    floor_x: float = float("nan")
    target_x: float = float("nan")  # the ratio this cell is judged against (nan: none)
    verdict: str = ""
    # remote workload: the same figures without the cluster (fixed pattern)
    base_query_ms: float = float("nan")
    base_frame_ms: float = float("nan")
    growth: float = float("nan")
    extra: dict = field(default_factory=dict)


def _clock(kind: str) -> Callable[[], float]:
    return time.process_time if kind == "cpu" else time.perf_counter


#: Objects of the small warm-up, and of the big one: just past the sizes that switch paths
#: (a batch of ``PARALLEL_MIN`` ids runs on both cores; from 4,096 objects moving two batches
#: in a row the trees go flat). Warmed small only, the first full-size frame on such a path
#: loaded its kernels inside the timed frames (chunks moving `fixed`: p99 1.63-1.70 ms against
#: a 0.60-0.63 ms median; 1.02-1.06 warmed big too).
WARM_SIZES = (300, PARALLEL_MIN + 1024)


def _warm(factory: Callable[[], Any], use_vd: bool, n: int = WARM_SIZES[0]) -> None:
    """Load or compile the kernels on an instance of ``n`` objects, so no timing includes
    compilation: insert, query, moves (every object too, in id order, shuffled and with
    radii), and (errors left to the pattern that needs them) radii and view distances in the
    batch, remove and insert of new ids; last a small batch again (back to a tree's paths)."""
    rng = np.random.default_rng(0)
    idx = factory()
    c = rng.random((n, 3)) * 50
    r = rng.uniform(0.3, 3, n)
    ids = np.arange(n, dtype=np.int64)
    idx.insert(ids, c, r, 40 * r if use_vd else None)
    from app.culling.frustum import camera_planes

    planes = camera_planes(np.full(3, 25.0), np.array([26.0, 25, 25]), far=30.0)
    idx.query_frustum(planes, np.full(3, 25.0), use_vd)
    for step in (0.5, 0.75, 1.0):  # the same movers again: some indexes have a path for that
        idx.update(ids[:50], c[:50] + step)
        idx.query_frustum(planes, np.full(3, 25.0), use_vd)
    perm = rng.permutation(n)
    for step in (0.1, 0.2):  # every object, as `moving` does, in id order and shuffled
        idx.update(ids, c + step)
        idx.query_frustum(planes, np.full(3, 25.0), use_vd)
        idx.update(ids[perm], c[perm] + step)
        idx.query_frustum(planes, np.full(3, 25.0), use_vd)
    # Every object as last frame, twice: the flat copy has a path for the same whole-scene
    # batch again (with radii too, below); unwarmed, kd/leafy's moving `fixed` and `sizes`
    # loaded it in a timed frame (p99 3.4-4.0 ms against a 0.47-0.64 median).
    for step in (0.15, 0.25):
        idx.update(ids, c + step)
        idx.query_frustum(planes, np.full(3, 25.0), use_vd)
    idx.query_box(np.zeros(3), np.full(3, 20.0))
    for far in (500.0, 0.0):  # one object far out and back: a root that grows and shrinks
        idx.update(ids[:1], c[:1] + far)
        idx.query_frustum(planes, np.full(3, 25.0), use_vd)
    try:
        for grow in (1.0, 1.01, 1.02):  # every object with radii, then as last frame twice
            idx.update(ids, c + 0.3, r * grow, 40 * r if use_vd else None)
            idx.query_frustum(planes, np.full(3, 25.0), use_vd)
        idx.update(ids[50:0:-1], c[50:0:-1] + 0.25, r[50:0:-1] * 1.01,
                   40 * r[50:0:-1] if use_vd else None)
        idx.remove(ids[200:210])
        idx.insert(ids[200:210] + n, c[200:210], r[200:210], 40 * r[200:210] if use_vd else None)
        idx.query_frustum(camera_planes(np.full(3, 25.0), np.array([25.0, 25, 26]), far=30.0),
                          np.full(3, 25.0), use_vd)
        # A long run's paths too: many removals (holes), then spawns and movers replaced
        # every batch (chunks puts them in holes, and movers that stopped back in them).
        idx.remove(ids[100:200])
        for k in range(4):
            new = np.arange(2 * n + 20 * k, 2 * n + 20 * (k + 1), dtype=np.int64)
            idx.insert(new, c[:20] + k, r[:20], 40 * r[:20] if use_vd else None)
            moving = ids[210 + 10 * k: 260 + 10 * k]
            idx.update(moving, c[moving] + 0.1 * k)
            idx.query_frustum(planes, np.full(3, 25.0), use_vd)
        # Long enough for chunks' movers that stop to sleep back, for its awake region to
        # drain and re-sort, and for a mover that jumps out of its awake chunk: each
        # loaded its kernels inside a timed frame of a 200-frame run (4-9 ms, once).
        movers = ids[220:260]
        for k in range(40):
            movers = np.concatenate([movers[8:], rng.choice(ids[220:n], 8, replace=False)])
            movers = np.unique(movers)
            jump = c[movers] + 0.01 * k
            jump[0] += 30.0 * (k % 2)
            idx.update(movers, jump)
            idx.query_frustum(planes, np.full(3, 25.0), use_vd)
    except Exception:  # noqa: BLE001 - reported by the pattern that makes the same calls
        pass


def _warm_patterns(factory: Callable[[], Any], wl: Workload) -> None:
    """Run a small copy of the workload's patterns on a throwaway instance, so the paths each
    pattern takes (and compiles on first use) are ready before the timed frames."""
    try:
        idx = factory()
        for i, ph in enumerate(wl.phases):
            idx.insert(ph.ids, ph.centers, ph.radii, ph.vdist if wl.use_vd else None)
            idx.query_frustum(wl.planes, wl.eye, wl.use_vd)
            for fr in wl.base_frames if i == 0 else ():
                _mutate(idx, fr, wl.use_vd)
                idx.query_frustum(wl.planes, wl.eye, wl.use_vd)
        for seg in wl.segments:
            for fr in seg.frames:
                _mutate(idx, fr, wl.use_vd)
                idx.query_frustum(wl.planes if fr.planes is None else fr.planes,
                                  wl.eye if fr.eye is None else fr.eye, wl.use_vd)
    except Exception:  # noqa: BLE001 - reported by the measured run of the same pattern
        pass


def _check(visible: np.ndarray, truth: np.ndarray) -> tuple[bool, str]:
    v = np.sort(np.asarray(visible, dtype=np.int64))
    if v.shape == truth.shape and np.array_equal(v, truth):
        return True, ""
    missing = np.setdiff1d(truth, v).shape[0]
    extra = np.setdiff1d(v, truth).shape[0]
    dup = v.shape[0] - np.unique(v).shape[0]
    return False, f"-{missing} +{extra}" + (f" dup{dup}" if dup else "")


_STEPS = ("remove", "insert", "update", "query_frustum")


def _mutate(idx: Any, fr: Frame, use_vd: bool, first_step: int = 0) -> None:
    """A frame's remove, insert and update calls (from step ``first_step`` on)."""
    if first_step <= 0 and fr.remove is not None:
        idx.remove(fr.remove)
    if first_step <= 1 and fr.insert is not None:
        i, c, r, vd = fr.insert
        idx.insert(i, c, r, vd if use_vd else None)
    if first_step <= 2:
        if fr.radii is None and fr.vdist is None:
            idx.update(fr.ids, fr.centers)
        else:
            idx.update(fr.ids, fr.centers, fr.radii, fr.vdist)


def _catch_up(idx: Any, frames: list[Frame], use_vd: bool, first_step: int = 0) -> str:
    """Apply ``frames``' changes untimed and unqueried, so the next pattern starts from the
    state its truth assumes; an error message when the index refuses."""
    try:
        for k, fr in enumerate(frames):
            _mutate(idx, fr, use_vd, first_step if k == 0 else 0)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    return ""


def _rebuild(factory: Callable[[], Any], wl: Workload, upto: int) -> Any:
    """A fresh instance holding the objects as they are after segment ``upto`` (replayed in
    numpy from the frames): how the run goes on when an index refused a pattern's batches."""
    segs = [s for s in wl.segments if not s.na][: upto + 1]
    frames = list(wl.base_frames) + [fr for s in segs for fr in s.frames]
    top = max([int(p.ids.max()) for p in wl.phases]
              + [int(fr.insert[0].max()) for fr in frames if fr.insert is not None]) + 1
    c = np.zeros((top, 3))
    r = np.zeros(top)
    vd = np.full(top, np.inf)
    alive = np.zeros(top, dtype=bool)
    for ph in wl.phases:
        c[ph.ids], r[ph.ids], alive[ph.ids] = ph.centers, ph.radii, True
        if ph.vdist is not None:
            vd[ph.ids] = ph.vdist
    for fr in frames:
        if fr.remove is not None:
            alive[fr.remove] = False
        if fr.insert is not None:
            i, ci, ri, vi = fr.insert
            c[i], r[i], alive[i] = ci, ri, True
            vd[i] = np.inf if vi is None else vi
        c[fr.ids] = fr.centers
        if fr.radii is not None:
            r[fr.ids] = fr.radii
        if fr.vdist is not None:
            vd[fr.ids] = fr.vdist
    ids = np.flatnonzero(alive).astype(np.int64)
    idx = factory()
    idx.insert(ids, c[ids], r[ids], vd[ids] if wl.use_vd else None)
    return idx


@dataclass
class _Seg:
    ups: list[float] = field(default_factory=list)
    qs: list[float] = field(default_factory=list)
    objs: list[int] = field(default_factory=list)  # objects moved, removed or inserted
    res: Any = None
    bad: int = 0
    checked: int = 0
    first_err: str = ""
    error: str = ""  # the call that raised
    broken: str = ""  # the index refused the catch-up too: its state is unknown


class Between:
    """What runs between two frames, untimed: ``mb`` MiB streamed (read and written), as a
    renderer's passes would, so that each frame starts with the caches others have used; 0:
    nothing, frames back to back (the same movers' lines then stay cached: a batch of 10^4 of
    them into the static octree/leafy took 0.20-0.26 ms back to back and 0.55-0.92 ms 50 ms
    apart)."""

    def __init__(self, mb: int = 0) -> None:
        self.mb = int(mb)
        self._buf = np.ones(self.mb * (1 << 20) // 8) if self.mb > 0 else None
        self.passes = 0

    def __call__(self) -> None:
        if self._buf is not None:
            np.add(self._buf, 1.0, out=self._buf)
            self.passes += 1


@contextmanager
def _no_collector() -> Iterator[None]:
    """Python's cyclic garbage collector off for a segment's frames (its young generations
    collected once before them): its automatic passes fell inside timed frames, pauses over
    the harness's own objects that no index makes (`--frames 200` on static, two trees and
    the peers: 274 young passes of up to 0.55 ms and 24 middle ones of up to 1.2 ms, against
    frames of 0.7-1.3 ms). ``timeit`` times with it off too."""
    gc.collect(1)
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _run_frames(idx: Any, wl: Workload, frames: list[Frame], clock: Callable[[], float],
                budget_s: float, between: Between | None = None, twin: Any = None,
                twin_out: _Seg | None = None) -> _Seg:
    """Run ``frames`` (the first is the warm-up, checked but not timed), stopping early, after
    at least one measured frame, when ``budget_s`` is used up (the rest applied untimed), with
    the garbage collector off (:func:`_no_collector`) and ``between`` run before each frame.
    ``twin`` (with ``twin_out``): another instance given each frame just before or after
    (in turn), timed into ``twin_out``, so that the two are compared on frames side by
    side."""
    with _no_collector():
        return _frames(idx, wl, frames, clock, budget_s, between or Between(), twin, twin_out)


def _frames(idx: Any, wl: Workload, frames: list[Frame], clock: Callable[[], float],
            budget_s: float, between: Between, twin: Any, twin_out: _Seg | None) -> _Seg:
    """:func:`_run_frames`' loop."""
    out = _Seg()
    start = time.perf_counter()
    for f in range(len(frames)):
        # The twin before the index on even frames, after it on odd ones: the second of
        # two calls finds numba's dispatch warm, a few microseconds of a 0.05 ms query.
        paired = twin is not None and twin_out is not None and not twin_out.error
        if paired and f % 2 == 0:
            between()
            _frame(twin, wl, frames, f, clock, twin_out)
        between()
        if not _frame(idx, wl, frames, f, clock, out):
            return out
        if paired and f % 2 == 1:
            between()
            _frame(twin, wl, frames, f, clock, twin_out)
        if out.qs and time.perf_counter() - start > budget_s and f + 1 < len(frames):
            out.broken = _catch_up(idx, frames[f + 1:], wl.use_vd)
            break
    return out


def _frame(idx: Any, wl: Workload, frames: list[Frame], f: int, clock: Callable[[], float],
           out: _Seg) -> bool:
    """Frame ``f`` of ``frames`` on ``idx``, checked, timed into ``out`` unless it is the
    first; False when a call raised (``out.error`` says which, the rest of the frames
    applied untimed as far as the index takes them)."""
    fr = frames[f]
    planes = wl.planes if fr.planes is None else fr.planes
    eye = wl.eye if fr.eye is None else fr.eye
    step = 0
    try:
        t0 = clock()
        if fr.remove is not None:
            idx.remove(fr.remove)
        step = 1
        if fr.insert is not None:
            i, c, r, vd = fr.insert
            idx.insert(i, c, r, vd if wl.use_vd else None)
        step = 2
        if fr.radii is None and fr.vdist is None:
            idx.update(fr.ids, fr.centers)
        else:
            idx.update(fr.ids, fr.centers, fr.radii, fr.vdist)
        t1 = clock()
        step = 3
        res = idx.query_frustum(planes, eye, wl.use_vd)
        t2 = clock()
    except Exception as exc:  # noqa: BLE001 - a failing index must not stop the run
        out.error = (f"frame {f} {_STEPS[step]}: {type(exc).__name__}: {exc}"
                     .splitlines()[0][:300])
        out.broken = _catch_up(idx, frames[f + 1:] if step == 3 else frames[f:],
                               wl.use_vd, 0 if step == 3 else step)
        return False
    out.res = res
    out.checked += 1
    ok, msg = _check(res.visible, fr.truth)
    if not ok:
        out.bad += 1
        out.first_err = out.first_err or f"frame {f} {msg}"
    if f > 0:
        out.ups.append(t1 - t0)
        out.qs.append(t2 - t1)
        out.objs.append(frame_objects(fr))
    return True


def frame_objects(fr: Frame) -> int:
    """The objects a frame's update side handles: moved, removed and inserted."""
    return (fr.ids.shape[0] + (0 if fr.remove is None else fr.remove.shape[0])
            + (0 if fr.insert is None else fr.insert[0].shape[0]))


def _twin(factory: Callable[[], Any], wl: Workload, ph: Any, clock: Callable[[], float],
          budget_s: float) -> Any:
    """A second instance of the subject with the first phase only, given the frames before
    the far cluster as the measured one was: the remote workload times the fixed pattern's
    queries on it and on the measured instance frame by frame, so that the growth compares
    queries a few milliseconds apart (timed before the cluster's insert, a minute earlier in
    a full run, a 0.05 ms query read 1.26x in one run of four and 0.97-1.00 in the others).
    None when it fails (the growth is then against the figures before the insert)."""
    try:
        twin = factory()
        twin.insert(ph.ids, ph.centers, ph.radii, ph.vdist if wl.use_vd else None)
        twin.query_frustum(wl.planes, wl.eye, wl.use_vd)
        pre = _run_frames(twin, wl, wl.base_frames, clock, budget_s)
    except Exception:  # noqa: BLE001 - the unpaired figures serve instead
        return None
    return None if pre.error or pre.broken or pre.bad else twin


def _base_figures(rows: list[Row], seg: _Seg) -> None:
    """The remote workload's figures without the cluster, from ``seg``'s frames, on every
    row (the growth's denominator)."""
    for row in rows:
        row.base_query_ms = float(np.median(seg.qs)) * 1e3
        row.base_frame_ms = float(np.median(np.add(seg.ups, seg.qs))) * 1e3


def _fill(row: Row, seg: _Seg) -> None:
    """Medians and p99 of a pattern's measured frames, and its exactness."""
    if seg.ups:
        tot = np.add(seg.ups, seg.qs)
        row.update_ms = float(np.median(seg.ups)) * 1e3
        row.query_ms = float(np.median(seg.qs)) * 1e3
        row.frame_ms = float(np.median(tot)) * 1e3
        row.p99_ms = float(np.percentile(tot, 99)) * 1e3
        row.ns_per_object = float(np.median(np.divide(seg.ups, np.maximum(seg.objs, 1)))) * 1e9
    if seg.res is not None:
        row.visible = int(seg.res.visible.shape[0])
        row.working_set = int(seg.res.working_set)
        row.nodes_visited = int(seg.res.nodes_visited)
    row.extra["frames"] = len(seg.ups)
    row.exact = "yes" if seg.bad == 0 else f"NO {seg.bad}/{seg.checked}: {seg.first_err}"


def run_subject(wl: Workload, label: str, factory: Callable[[], Any], clock_kind: str = "cpu",
                budget_s: float = 20.0, skip: dict[str, str] | None = None,
                warm_wl: Workload | None = None, between: Between | None = None) -> list[Row]:
    """One row per pattern of ``wl`` for one subject, all on one instance; ``skip`` maps a
    pattern to why this subject does not run it (its frames are then applied untimed);
    ``warm_wl``, a small copy of ``wl``, is run first to compile every pattern's paths;
    ``between`` runs before every measured segment's frames (:class:`Between`)."""
    clock = _clock(clock_kind)
    skip = skip or {}
    segs = [s for s in wl.segments if not s.na]
    rows = [Row(wl.name, label, s.pattern, n=wl.n) for s in segs]
    pre_bad, pre_err = 0, ""

    def first_query(idx: Any, truth: np.ndarray) -> tuple[float, Any]:
        nonlocal pre_bad, pre_err
        t0 = clock()
        res = idx.query_frustum(wl.planes, wl.eye, wl.use_vd)
        dt = clock() - t0
        ok, msg = _check(res.visible, truth)
        if not ok:
            pre_bad += 1
            pre_err = pre_err or f"first query {msg}"
        return dt, res

    try:
        _warm(factory, wl.use_vd)
        if warm_wl is not None:  # (not the rtree peer: its inserts are slow)
            _warm(factory, wl.use_vd, WARM_SIZES[1])
            _warm_patterns(factory, warm_wl)
        idx = factory()
        ph = wl.phases[0]
        t0 = clock()
        idx.insert(ph.ids, ph.centers, ph.radii, ph.vdist if wl.use_vd else None)
        build = clock() - t0
        fq, _ = first_query(idx, ph.first_truth)
        base = None
        twin = None
        extra: dict[str, Any] = {}
        if len(wl.phases) > 1:
            base = _run_frames(idx, wl, wl.base_frames, clock, budget_s, between)
            if base.error or base.broken:
                raise RuntimeError(f"before the cluster: {base.error or base.broken}")
            pre_bad += base.bad
            pre_err = pre_err or (f"before the cluster: {base.first_err}" if base.bad else "")
            if any(s.pattern == "fixed" for s in segs):  # (the growth's pattern)
                twin = _twin(factory, wl, ph, clock, budget_s)
            for p2 in wl.phases[1:]:
                t0 = clock()
                idx.insert(p2.ids, p2.centers, p2.radii, p2.vdist if wl.use_vd else None)
                extra["cluster_build_s"] = clock() - t0
                dt, _ = first_query(idx, p2.first_truth)
                extra["cluster_first_query_ms"] = dt * 1e3
    except Exception as exc:  # noqa: BLE001 - a failing index must not stop the run
        err = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        tb = traceback.format_exc()
        for row in rows:
            row.error = err
            row.exact = "failed"
            row.extra["traceback"] = tb
        gc.collect()
        return rows
    broken = ""
    for row in rows:
        row.build_s = build
        row.first_query_ms = fq * 1e3
        row.extra.update(extra)
    if base is not None and base.ups:
        _base_figures(rows, base)
    for k, (seg, row) in enumerate(zip(segs, rows, strict=True)):
        if broken:
            row.error = f"not run: {broken}"
            row.exact = "skipped"
            continue
        later = any(s.pattern not in skip for s in segs[k + 1:])
        if seg.pattern in skip:
            row.error = f"skipped: {skip[seg.pattern]}"
            row.exact = "skipped"
            msg = _catch_up(idx, seg.frames, wl.use_vd) if later else ""
            if msg:
                idx, broken = _go_on(factory, wl, k, idx, f"{seg.pattern}'s frames: {msg}")
            continue
        paired = _Seg() if twin is not None and seg.pattern == "fixed" else None
        out = _run_frames(idx, wl, seg.frames, clock, budget_s, between,
                          twin if paired is not None else None, paired)
        if paired is not None:
            twin = None  # (its figures taken: the memory back)
            if paired.qs and not paired.error and not paired.bad:
                # The growth against the twin's queries timed frame by frame beside these.
                _base_figures(rows, paired)
                row.extra["growth_paired"] = True
        _fill(row, out)
        if k == 0 and pre_bad:
            row.exact = (f"NO {pre_bad + out.bad}: {pre_err}" if row.exact == "yes"
                         else row.exact + f"; {pre_err}")
        if out.error:
            row.error = out.error
            row.exact = "failed" + (f" ({row.exact})" if row.exact != "yes" else "")
        if out.broken and not out.error:  # refused the untimed rest of its own frames
            row.error = f"after the time budget: {out.broken}"
            row.exact = "failed"
        if out.broken and later:
            idx, broken = _go_on(factory, wl, k, idx, f"{seg.pattern}: {out.broken}")
            row.error += ("; later patterns on a fresh instance (the index refused the "
                          "catch-up)" if not broken else "")
        if seg.pattern == "fixed" and row.base_query_ms > 0:
            row.growth = row.query_ms / row.base_query_ms
    try:
        st = idx.stats()
        for row in rows:
            row.extra["nodes"] = st.get("nodes", 0)
            row.extra["max_depth"] = st.get("max_depth", 0)
    except Exception:  # noqa: BLE001
        pass
    del idx
    gc.collect()
    return rows


def _go_on(factory: Callable[[], Any], wl: Workload, k: int, idx: Any,
           why: str) -> tuple[Any, str]:
    """(instance to go on with, reason the rest cannot run or ""): a fresh instance rebuilt
    from the state after segment ``k`` when the old one refused to catch up."""
    try:
        return _rebuild(factory, wl, k), ""
    except Exception as exc:  # noqa: BLE001
        return idx, f"the index refused {why}; a rebuild failed too ({type(exc).__name__})"


def _rtree_skips(name: str, scale: float, patterns: list[str]) -> tuple[str, dict[str, str]]:
    """(reason to skip rtree altogether, or per-pattern skips with their reasons)."""
    if name == "world":
        return "skipped: a Python-level bulk load of 10^7 boxes", {}
    if name == "moving" and scale > 0.1:
        # 100,000 Python-level delete + insert per frame (~0.5 ms each): about a
        # minute per frame. rtree's move cost is measured by bench paper instead.
        return ("skipped: ~0.5 ms per Python-level delete+insert x 100,000 moves per frame",
                {})
    if scale > 0.1:
        why = ("Python-level delete+insert per moved object; at this scale measured on the "
               "first pattern only")
        return "", {p: why for p in patterns[1:]}
    return "", {}


def run(workloads: list[str], only: list[str] | None, scale: float, frames: int,
        clock_kind: str = "cpu", progress: Callable[[str], None] = print,
        include_rtree: bool = True, budget_s: float = 20.0,
        patterns: list[str] | None = None, between_mb: int = 0,
        split_threshold: int | None = None, rounds: int = 1) -> list[Row]:
    """Every workload x pattern x subject; ratios against the faster compiled brute force of
    the same workload and pattern; ``between_mb`` MiB streamed between two frames
    (:class:`Between`); the trees at ``split_threshold`` (None: each one's default, the
    paper's value). ``rounds`` > 1 runs every subject that many times, the subjects' order
    reversed every other round, and each cell gives the median of its rounds
    (:func:`merge_rounds`)."""
    rows: list[Row] = []
    between = Between(between_mb)
    peers = ("numpy-brute", "numba-brute", "numba-brute-mt") + (
        ("rtree",) if include_rtree else ())
    subs = subjects(only, peers=peers, variants=_variants_at(split_threshold))
    for name in workloads:
        progress(f"[{name}] generating workload (scale {scale:g}) ...")
        t0 = time.perf_counter()
        wl = make_workload(name, scale=scale, frames=frames, patterns=patterns)
        warm_wl = make_workload(name, scale=min(scale, 0.001), frames=1, seed=2,
                                patterns=patterns)
        pats = [s.pattern for s in wl.segments]
        progress(f"[{name}] {wl.description}; {wl.n:,} objects; patterns "
                 f"{', '.join(pats)} ({time.perf_counter() - t0:.1f} s)")
        wrows: list[Row] = [Row(name, "(all)", s.pattern, n=wl.n, exact="n/a",
                                error=f"n/a: {s.na}") for s in wl.segments if s.na]
        runs: dict[str, list[list[Row]]] = {label: [] for label, _ in subs}
        for k in range(rounds):
            for label, factory in (subs if k % 2 == 0 else subs[::-1]):
                srows = _subject_round(wl, label, factory, clock_kind, budget_s, scale,
                                       warm_wl, between, progress,
                                       f" (round {k + 1}/{rounds})" if rounds > 1 else "")
                runs[label].append(srows)
        for label, _ in subs:
            wrows.extend(merge_rounds(runs[label]))
        _ratios(wrows, wl, peers)
        rows.extend(wrows)
        del wl, warm_wl
        gc.collect()
    return rows


def _subject_round(wl: Workload, label: str, factory: Callable[[], Any], clock_kind: str,
                   budget_s: float, scale: float, warm_wl: Workload, between: Between,
                   progress: Callable[[str], None], tag: str) -> list[Row]:
    """One subject's run of every pattern of ``wl`` (:func:`run_subject`), with its progress
    line; rtree's skipped rows where it does not run."""
    name = wl.name
    skip: dict[str, str] = {}
    if label == "rtree":
        why, skip = _rtree_skips(name, scale, [s.pattern for s in wl.segments if not s.na])
        if why:
            progress(f"[{name}] {label:<22} skipped")
            return [Row(name, label, s.pattern, n=wl.n, exact="skipped", error=why)
                    for s in wl.segments if not s.na]
    srows = run_subject(wl, label, factory, clock_kind, budget_s, skip,
                        None if label == "rtree" else warm_wl, between)
    ok = [r for r in srows if not r.error]
    bad = [r for r in srows if r.error and not r.error.startswith("skipped")]
    inexact = [r for r in ok if r.exact != "yes"]
    slow = max(ok, key=lambda r: r.frame_ms) if ok else None
    progress(f"[{name}] {label:<22} "
             + (f"slowest {slow.pattern} {slow.frame_ms:9.3f} ms (p99 {slow.p99_ms:.3f})"
                if slow else "no pattern ran")
             + (f"  exact on {len(ok) - len(inexact)}/{len(ok)}" if ok else "")
             + (f"  FAILED {bad[0].pattern}: {bad[0].error}" if bad else "") + tag)
    return srows


#: The timings a merged cell takes as the median of its rounds.
_TIMED = ("build_s", "first_query_ms", "update_ms", "query_ms", "frame_ms", "p99_ms",
          "ns_per_object", "base_query_ms", "base_frame_ms")


def merge_rounds(runs: list[list[Row]]) -> list[Row]:
    """One subject's rows from several rounds of the same patterns: each cell's timings are
    the median of its rounds (a slow spell of a shared machine, or the order the subjects
    ran in, then moves one round, not the verdict); a cell is exact only if every round was,
    and a round that failed or was skipped makes the cell that round's row. The rounds'
    frames are kept in ``extra["frame_ms_rounds"]``."""
    if len(runs) == 1:
        return runs[0]
    out = []
    for cells in zip(*runs, strict=True):
        failed = next((r for r in cells if r.error), None)
        if failed is not None:
            out.append(failed)
            continue
        row = cells[0]
        for name in _TIMED:
            vals = [getattr(r, name) for r in cells]
            setattr(row, name, float(np.median(vals)) if np.all(np.isfinite(vals))
                    else float("nan"))
        if row.pattern == "fixed" and row.base_query_ms > 0:
            row.growth = row.query_ms / row.base_query_ms
        row.exact = next((r.exact for r in cells if r.exact != "yes"), "yes")
        row.extra["frame_ms_rounds"] = [round(r.frame_ms, 4) for r in cells]
        row.extra["frames"] = min(r.extra.get("frames", 0) for r in cells)
        out.append(row)
    return out


def _variants_at(split_threshold: int | None) -> list[tuple[str, str, dict]]:
    """Every index variant, the trees at ``split_threshold`` (None: their own default)."""
    from app.spatial import TREE_HEURISTICS, index_variants

    if split_threshold is None:
        return index_variants()
    return [(label, name, {**kw, "split_threshold": split_threshold}
             if name in TREE_HEURISTICS else kw) for label, name, kw in index_variants()]


def _ratios(wrows: list[Row], wl: Workload, peers: tuple[str, ...]) -> None:
    """x numpy, x best brute, the floor and verdicts, pattern by pattern."""
    for pat in {r.pattern for r in wrows}:
        prow = [r for r in wrows if r.pattern == pat]
        ref = next((r for r in prow if r.subject == "numpy-brute" and not r.error
                    and r.frame_ms > 0), None)
        brutes = [r for r in prow if r.subject in BRUTE_PEERS and not r.error
                  and np.isfinite(r.frame_ms)]
        nb = min(brutes, key=lambda r: r.frame_ms) if brutes else None
        floor = nb.frame_ms / nb.update_ms if nb and nb.update_ms > 0 else float("nan")
        target = pattern_target(wl, pat, floor)
        for r in prow:
            r.extra["best_brute"] = nb.subject if nb else ""
            r.extra["target"] = wl.target
            r.extra["growth_target"] = wl.growth_target
            r.extra["fresh_target"] = wl.fresh_target
            r.extra["description"] = wl.description
            r.floor_x = floor
            r.target_x = target if target is not None else float("nan")
            if r.error:
                r.verdict = r.exact if r.exact in ("skipped", "n/a") else "failed"
                continue
            if ref:
                r.x_numpy = ref.frame_ms / r.frame_ms if r.frame_ms > 0 else np.inf
            if nb:
                r.x_numba = nb.frame_ms / r.frame_ms if r.frame_ms > 0 else np.inf
            if target is not None and nb and r.subject not in peers:
                r.verdict = "PASS" if r.x_numba >= target else "MISS"
        if wl.growth_target is not None and pat == "fixed":
            _remote_verdicts(prow, wl.growth_target)


def pattern_target(wl: Workload, pattern: str, floor: float) -> float | None:
    """The ratio a pattern is judged against: the workload's target, but on a fresh-movers
    pattern of a workload with ``fresh_target`` at least that and within ``FLOOR_SLACK`` of
    the measured ``floor`` (issue 24, item 2: no layout avoids a fresh mover's misses)."""
    if wl.target is None or wl.fresh_target is None or pattern not in FRESH_PATTERNS:
        return wl.target
    bound = floor / FLOOR_SLACK if np.isfinite(floor) else wl.target
    return max(wl.fresh_target, min(wl.target, bound))


TREES = ("kd/", "ternary/", "octree/", "icoseptree/")

#: The compiled brute-force peers; an index's ratio is against the faster of them in the run.
BRUTE_PEERS = ("numba-brute", "numba-brute-mt")


def _remote_verdicts(rows: list[Row], target: float) -> None:
    ok = [r for r in rows if not r.error and np.isfinite(r.growth)]
    trees = [r for r in ok if r.subject.startswith(TREES)]
    best_tree = min(trees, key=lambda r: r.base_frame_ms) if trees else None
    for r in ok:
        judged = r.subject == "viewdist" or (best_tree is not None and r is best_tree)
        if judged:
            r.verdict = ("PASS" if r.growth < target else "MISS") + (
                " (best tree)" if r is best_tree else "")
        else:
            r.verdict = f"{'<' if r.growth < target else '>='}{target:.2f}"


def worst_patterns(rows: list[Row], workload: str) -> list[dict[str, Any]]:
    """Per subject of ``workload``: its worst pattern (lowest ratio against the faster
    compiled brute force; a failed or inexact pattern counts as worst), the ratio there, the
    median ratio across patterns and the largest p99 / median frame."""
    out = []
    wr = [r for r in rows if r.workload == workload and r.subject != "(all)"]
    for subj in dict.fromkeys(r.subject for r in wr):
        srows = [r for r in wr if r.subject == subj]
        ran = [r for r in srows if not r.error and np.isfinite(r.x_numba)]
        failed = [r for r in srows if r.error and not r.error.startswith(("skipped", "n/a"))]
        inexact = [r for r in ran if r.exact != "yes"]
        d: dict[str, Any] = {"subject": subj, "patterns": len(ran),
                             "median": float(np.median([r.x_numba for r in ran])) if ran
                             else float("nan")}
        if ran:
            # relative to each pattern's own target, where one is set
            w = min(ran, key=lambda r: r.x_numba / r.target_x if np.isfinite(r.target_x)
                    else r.x_numba)
            d.update(worst=w.pattern, ratio=w.x_numba, target=w.target_x, frame_ms=w.frame_ms,
                     p99_ms=w.p99_ms,
                     stall=max(r.p99_ms / r.frame_ms for r in ran if r.frame_ms > 0))
        else:
            d.update(worst="-", ratio=float("nan"), target=float("nan"), frame_ms=float("nan"),
                     p99_ms=float("nan"), stall=float("nan"))
        if failed or inexact:
            bad = (failed or inexact)[0]
            d["worst"] = bad.pattern
            d["ratio"] = float("nan")
            d["note"] = ("failed: " + bad.error) if failed else ("inexact: " + bad.exact)
        else:
            skipped = [r.pattern for r in srows if r.error.startswith("skipped")]
            d["note"] = ("skipped " + ",".join(skipped)) if skipped else ""
        d["verdict"] = ""
        if np.isfinite(d["target"]) and subj not in _PEER_LABELS:
            d["verdict"] = ("PASS" if d["ratio"] >= d["target"] and not (failed or inexact)
                            else "MISS")
        out.append(d)
    return out


_PEER_LABELS = ("numpy-brute", "numba-brute", "numba-brute-mt", "rtree")

__all__ = ["PATTERNS", "Row", "WORKLOADS", "run", "run_subject", "worst_patterns"]
