"""The motion patterns of ``bench index`` (issue 24): each generator makes what it says, the
brute-force peers stay exact through removes, inserts of new ids and radii in the batch, and
``--patterns`` refuses unknown names."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from app.bench.index_bench import _run_frames
from app.bench.workloads import (
    CAMERA_PATTERNS,
    NOT_FOR_MOVING,
    PATTERNS,
    SPAWN_FRAC,
    frustum_truth,
    make_workload,
)
from app.spatial import create_index

ROOT = Path(__file__).resolve().parents[1]
SCALE = 0.005  # 5,000 objects, 50 movers


@pytest.fixture(scope="module")
def static():
    return make_workload("static", scale=SCALE, frames=4)


def _seg(wl, pattern):
    return next(s for s in wl.segments if s.pattern == pattern)


def _brute_on(pattern):
    """A small static workload of one pattern, its objects in a `brute` index: (workload,
    index, that pattern's frames)."""
    wl = make_workload("static", scale=SCALE, frames=3, patterns=[pattern])
    idx = create_index("brute")
    for ph in wl.phases:
        idx.insert(ph.ids, ph.centers, ph.radii, None)
    return wl, idx, _seg(wl, pattern).frames


def test_segments_run_in_order_on_one_workload(static):
    assert [s.pattern for s in static.segments] == list(PATTERNS)
    for s in static.segments:
        assert len(s.frames) == 5 and not s.na  # a warm-up frame + 4
        for fr in s.frames:
            assert fr.truth is not None and np.all(np.diff(fr.truth) > 0)


def test_order_shuffles_the_fixed_movers(static):
    fixed = _seg(static, "fixed").frames[0].ids
    assert np.all(np.diff(fixed) > 0)
    orders = [fr.ids for fr in _seg(static, "order").frames]
    for ids in orders:
        assert np.array_equal(np.sort(ids), fixed)  # a permutation of the same movers
        assert not np.array_equal(ids, fixed)
    assert not np.array_equal(orders[0], orders[1])  # a new order each frame


@pytest.mark.parametrize("pattern,frac", [("churn10", 0.1), ("churn100", 1.0)])
def test_churn_replaces_the_stated_fraction(static, pattern, frac):
    fixed = _seg(static, "fixed").frames[0].ids
    m = fixed.shape[0]
    prev = fixed
    for fr in _seg(static, pattern).frames:
        assert fr.ids.shape[0] == m and np.unique(fr.ids).shape[0] == m
        kept = np.intersect1d(prev, fr.ids).shape[0]
        if frac < 1:
            assert kept == m - round(frac * m)
        else:
            assert kept <= m // 5  # a fresh random set: overlap only by chance
        prev = fr.ids


def test_sizes_carry_radii_half_unchanged_half_changed_a_little():
    wl = make_workload("viewdist", scale=SCALE, frames=4, patterns=["sizes"])
    st_r = dict(zip(wl.phases[0].ids.tolist(), wl.phases[0].radii.tolist(), strict=True))
    changed = []
    for fr in _seg(wl, "sizes").frames:
        assert fr.radii is not None and fr.vdist is not None  # viewdist: both in the batch
        old = np.array([st_r[i] for i in fr.ids.tolist()])
        rel = np.abs(fr.radii / old - 1)
        assert rel.max() <= 0.03 + 1e-12
        changed.append(rel.max() > 0)
        st_r.update(zip(fr.ids.tolist(), fr.radii.tolist(), strict=True))
    assert changed == [False, True, False, True, False]
    stat = make_workload("static", scale=SCALE, frames=2, patterns=["sizes"])
    assert all(fr.radii is not None and fr.vdist is None for fr in stat.segments[0].frames)


@pytest.mark.parametrize("pattern", CAMERA_PATTERNS)
def test_camera_patterns_change_planes_every_frame(static, pattern):
    frames = _seg(static, pattern).frames
    planes = [fr.planes for fr in frames]
    eyes = [fr.eye for fr in frames]
    assert all(p is not None for p in planes)
    assert not np.allclose(planes[0], static.planes)
    for a, b in zip(planes, planes[1:], strict=False):
        assert not np.allclose(a, b)
    moved = [not np.allclose(a, b) for a, b in zip(eyes, eyes[1:], strict=False)]
    assert all(moved) if pattern == "fly" else not any(moved)
    fixed = _seg(static, "fixed").frames[0].ids
    assert all(np.array_equal(fr.ids, fixed) for fr in frames)  # movers as in fixed
    assert all(fr.planes is None for fr in _seg(static, "fixed").frames)


def test_teleport_moves_one_percent_anywhere(static):
    fixed = _seg(static, "fixed").frames[0].ids
    side = 1000.0 * SCALE ** (1 / 3)
    prev = _seg(static, "teleport").frames[0]
    prev_pos = dict(zip(prev.ids.tolist(), map(tuple, prev.centers), strict=True))
    for fr in _seg(static, "teleport").frames[1:]:
        assert np.array_equal(fr.ids, fixed)
        old = np.array([prev_pos[i] for i in fr.ids.tolist()])
        jump = np.linalg.norm(fr.centers - old, axis=1)
        assert (jump > 10).sum() >= 1 and (jump > 10).sum() <= max(1, fixed.shape[0] // 100)
        jumped = fr.centers[jump > 10]
        assert (jumped >= 0).all() and (jumped <= side).all()
        prev_pos = dict(zip(fr.ids.tolist(), map(tuple, fr.centers), strict=True))


def test_spawn_removes_live_ids_and_inserts_new_ones(static):
    alive = set(static.phases[0].ids.tolist())
    movers = set(_seg(static, "fixed").frames[0].ids.tolist())
    k = max(1, round(SPAWN_FRAC * len(alive)))
    for seg in static.segments:
        for fr in seg.frames:
            if fr.remove is not None:
                assert seg.pattern == "spawn"
                rem = fr.remove.tolist()
                assert len(rem) == k and set(rem) <= alive and not set(rem) & movers
                alive -= set(rem)
                new = fr.insert[0].tolist()
                assert len(new) == k and not set(new) & alive and min(new) >= 5000
                alive |= set(new)
            assert set(fr.truth.tolist()) <= alive
    assert len(alive) == 5000


def test_moving_lists_churn_as_not_applicable():
    wl = make_workload("moving", scale=0.01, frames=2)
    for s in wl.segments:
        assert bool(s.na) == (s.pattern in NOT_FOR_MOVING)
        for fr in s.frames:  # every live object moves every frame
            live = np.sort(fr.ids)
            assert live.shape[0] == 1000
            if fr.insert is not None:
                assert np.isin(fr.insert[0], live).all()


def test_unknown_pattern_is_a_value_error():
    with pytest.raises(ValueError, match="nosuch"):
        make_workload("static", scale=SCALE, frames=1, patterns=["fixed", "nosuch"])


@pytest.mark.parametrize("peer", ["numpy-brute", "numba-brute", "numba-brute-mt", "rtree"])
def test_peers_stay_exact_through_remove_insert_and_radii(peer):
    """Random batches of every kind against the reference, with the id -> row table checked."""
    from app.bench.baselines import PEERS
    from app.culling.frustum import camera_planes

    if peer == "rtree":
        pytest.importorskip("rtree")
    rng = np.random.default_rng(7)
    cap = 4000
    c = rng.random((cap, 3)) * 100
    r = rng.uniform(0.3, 3, cap)
    vd = 10 * r
    alive = np.zeros(cap, dtype=bool)
    alive[:2000] = True
    s = PEERS[peer]()
    s.insert(np.arange(2000), c[:2000], r[:2000], vd[:2000])
    nxt = 2000
    eye = np.array([50.0, 50, 50])
    for step in range(12):
        live = np.flatnonzero(alive)
        rem = rng.choice(live, 37, replace=False)
        s.remove(rem)
        alive[rem] = False
        new = np.arange(nxt, nxt + 41 + 200 * (step == 5))  # step 5 makes the store grow
        nxt = new[-1] + 1
        s.insert(new, c[new], r[new], vd[new])
        alive[new] = True
        live = np.flatnonzero(alive)
        mv = rng.permutation(rng.choice(live, 150, replace=False))
        c[mv] += rng.normal(size=(150, 3))
        if step % 3 == 0:
            s.update(mv, c[mv])
        else:
            r[mv] *= rng.uniform(0.5, 2.5, 150)  # grows the largest radius too
            if step % 3 == 1:  # radii and view distances; else radii only
                vd[mv] *= rng.uniform(0.9, 1.1, 150)
            s.update(mv, c[mv], r[mv], vd[mv] if step % 3 == 1 else None)
        assert len(s) == alive.sum()
        d = rng.normal(size=3)
        planes = camera_planes(eye, eye + d, far=60.0)
        ids = np.flatnonzero(alive)
        for use_vd in (False, True):
            got = np.sort(s.query_frustum(planes, eye, use_vd).visible)
            want = ids[frustum_truth(c[ids], r[ids], planes, eye, vd[ids] if use_vd else None)]
            assert np.array_equal(got, want), (peer, step, use_vd)


def test_patterns_flag_refuses_unknown_names():
    p = subprocess.run([sys.executable, "-m", "app", "bench", "index", "--patterns",
                        "fixed,nosuch"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "unknown pattern 'nosuch'" in err[0], p.stderr


def test_a_pattern_that_raises_is_reported_failed_and_the_run_goes_on():
    """An index refusing radii in the batch fails `sizes` only: the frames are caught up, the
    later patterns run and stay exact."""
    from app.bench.baselines import ScanBrute
    from app.bench.index_bench import run_subject, worst_patterns

    class NoRadii(ScanBrute):
        def update(self, ids, centers, radii=None, view_distances=None):
            if radii is not None:
                raise ValueError("radii not supported")
            super().update(ids, centers)

    wl = make_workload("viewdist", scale=0.002, frames=2,
                       patterns=["fixed", "sizes", "turn", "spawn"])
    rows = run_subject(wl, "noradii", NoRadii, "wall")
    by = {r.pattern: r for r in rows}
    assert by["sizes"].exact.startswith("failed") and "radii not supported" in by["sizes"].error
    for p in ("fixed", "turn", "spawn"):
        assert by[p].exact == "yes" and not by[p].error, (p, by[p].exact, by[p].error)
        assert by[p].p99_ms >= by[p].frame_ms > 0
    for r in rows:
        r.x_numba = 1.0
    (d,) = worst_patterns(rows, "viewdist")
    assert d["worst"] == "sizes" and d["note"].startswith("failed")


def test_fresh_movers_are_judged_against_the_measured_floor():
    """On `world`, `churn100` (a fresh random set each frame) must reach 8x and the measured
    floor / 1.5 (the brute force's frame over its own update), not the workload's 30x; the
    other patterns and workloads keep their targets; the worst pattern is the one furthest
    below its own target."""
    from app.bench.index_bench import Row, _ratios, pattern_target, worst_patterns

    world = make_workload("world", scale=0.0001, frames=1, patterns=["fixed", "churn100"])
    static = make_workload("static", scale=0.001, frames=1, patterns=["churn100"])
    assert pattern_target(world, "fixed", 20.0) == 30.0
    assert pattern_target(world, "churn100", 20.0) == 20.0 / 1.5
    assert pattern_target(world, "churn100", 6.0) == 8.0  # never below the 8x
    assert pattern_target(world, "churn100", 90.0) == 30.0  # nor above the workload's
    assert pattern_target(static, "churn100", 20.0) == 2.0

    def rows(churn_ms):
        out = []
        for pat in ("fixed", "churn100"):
            out.append(Row("world", "numba-brute", pat, update_ms=1.0, frame_ms=20.0))
            out.append(Row("world", "chunks", pat,
                           frame_ms=0.5 if pat == "fixed" else churn_ms, exact="yes"))
        _ratios(out, world, ("numba-brute",))
        return {(r.subject, r.pattern): r for r in out}, out

    by, out = rows(2.0)  # 10x against a floor of 20x: below 20 / 1.5
    assert by["chunks", "churn100"].floor_x == 20.0
    assert by["chunks", "churn100"].verdict == "MISS"
    assert by["chunks", "fixed"].verdict == "PASS"  # 40x >= 30x
    (d,) = [d for d in worst_patterns(out, "world") if d["subject"] == "chunks"]
    assert d["worst"] == "churn100" and d["verdict"] == "MISS"
    by, out = rows(1.4)  # 14.3x: within 1.5x of the floor
    assert by["chunks", "churn100"].verdict == "PASS"
    (d,) = [d for d in worst_patterns(out, "world") if d["subject"] == "chunks"]
    assert d["verdict"] == "PASS"


def test_frames_run_with_the_garbage_collector_off_and_leave_it_on():
    """The collector's automatic passes (over the harness's own objects, up to 1.2 ms) must
    not fall inside timed frames: a segment runs with it off, and it is back on after, also
    when an index raises."""
    wl = make_workload("static", scale=SCALE, frames=3, patterns=["fixed"])
    seen = []

    class Watched:
        def __init__(self, fail: bool) -> None:
            self.idx = create_index("brute")
            self.fail = fail

        def __getattr__(self, name):
            return getattr(self.idx, name)

        def update(self, *a):
            seen.append(gc.isenabled())
            if self.fail:
                raise ValueError("refused")
            return self.idx.update(*a)

    for fail in (False, True):
        w = Watched(fail)
        for ph in wl.phases:
            w.insert(ph.ids, ph.centers, ph.radii, None)
        assert gc.isenabled()
        out = _run_frames(w, wl, _seg(wl, "fixed").frames, time.perf_counter, 60.0)
        assert gc.isenabled()
        assert bool(out.error) == fail
    assert seen and not any(seen)


def test_between_streams_before_every_frame_untimed():
    """`--between MB`: the buffer is streamed once before each frame (the warm-up's too),
    outside the timed calls, and the answers stay exact."""
    from app.bench.index_bench import Between

    wl, idx, frames = _brute_on("fixed")
    between = Between(1)
    out = _run_frames(idx, wl, frames, time.perf_counter, 60.0, between)
    assert between.passes == len(frames) and out.bad == 0 and len(out.ups) == len(frames) - 1
    none = Between(0)
    none()
    assert none.passes == 0  # 0 MiB: frames back to back, nothing runs


def test_ns_per_object_counts_moves_removals_and_inserts():
    """The `ns/object` column (issue 24, item 3): a frame's update side over the objects it
    moved, removed or inserted, the median over the measured frames; on `spawn` the removed
    and inserted objects count beside the movers."""
    from app.bench.index_bench import Row, _fill, frame_objects

    wl, idx, frames = _brute_on("spawn")
    out = _run_frames(idx, wl, frames, time.perf_counter, 60.0)
    counts = [frame_objects(fr) for fr in frames[1:]]
    spawned = frames[1].remove.shape[0]
    assert spawned > 0 and counts[0] == frames[1].ids.shape[0] + 2 * spawned
    assert out.objs == counts
    row = Row("static", "brute", "spawn")
    _fill(row, out)
    want = np.median([u / k for u, k in zip(out.ups, counts, strict=True)]) * 1e9
    assert row.ns_per_object == pytest.approx(want)
    assert row.ns_per_object < row.update_ms * 1e6  # per object, not per frame


@pytest.mark.parametrize("mb", ["-1", "5000"])
def test_between_refuses_sizes_out_of_range(mb):
    p = subprocess.run([sys.executable, "-m", "app", "bench", "index", "--between", mb],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "--between must be 0..4096 MiB" in p.stderr, p.stderr


def test_rounds_give_each_cell_the_median_and_keep_failures_and_inexact_rounds():
    """``--rounds``: a cell's timings are the median of its rounds, its growth follows the
    medians, it is exact only if every round was, and a round that failed makes the cell."""
    from app.bench.index_bench import Row, merge_rounds

    def rnd(frame, exact="yes", error=""):
        return [Row("remote", "x", "fixed", frame_ms=frame, update_ms=frame / 2,
                    query_ms=frame / 2, p99_ms=2 * frame, base_query_ms=frame / 4,
                    exact=exact, error=error, extra={"frames": 5}),
                Row("remote", "x", "spawn", frame_ms=10 * frame, exact=exact, error=error,
                    extra={"frames": 5})]

    (fixed, spawn) = merge_rounds([rnd(3.0), rnd(1.0), rnd(8.0)])
    assert (fixed.frame_ms, fixed.update_ms, fixed.p99_ms) == (3.0, 1.5, 6.0)
    assert spawn.frame_ms == 30.0 and spawn.extra["frame_ms_rounds"] == [30.0, 10.0, 80.0]
    assert fixed.growth == 1.5 / 0.75 and fixed.exact == "yes"
    fixed, _ = merge_rounds([rnd(1.0), rnd(2.0, exact="NO 1/5: frame 2 -3 +0")])
    assert fixed.exact.startswith("NO 1/5")
    fixed, _ = merge_rounds([rnd(1.0), rnd(2.0, exact="failed", error="boom")])
    assert fixed.error == "boom" and fixed.exact == "failed"
    assert merge_rounds([rnd(1.0)])[0].frame_ms == 1.0


def test_rounds_run_every_subject_again_in_reversed_order(monkeypatch):
    """Each round runs every subject once, the order reversed every other round; the rows
    come out once per cell."""
    import app.bench.index_bench as ib

    order = []
    real = ib.run_subject

    def spy(wl, label, *a, **k):
        order.append(label)
        return real(wl, label, *a, **k)

    monkeypatch.setattr(ib, "run_subject", spy)
    rows = ib.run(["static"], ["brute"], 0.001, 1, "wall", progress=lambda s: None,
                  include_rtree=False, patterns=["fixed", "spawn"], rounds=2)
    subjects = ["numpy-brute", "numba-brute", "numba-brute-mt", "brute"]
    assert order == subjects + subjects[::-1]
    assert sorted((r.subject, r.pattern) for r in rows) == sorted(
        (s, p) for s in subjects for p in ("fixed", "spawn"))
    assert all(r.exact == "yes" and len(r.extra["frame_ms_rounds"]) == 2 for r in rows)


def test_rounds_flag_refuses_out_of_range():
    p = subprocess.run([sys.executable, "-m", "app", "bench", "index", "--rounds", "0"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--rounds must be 1..20" in p.stderr


def test_remote_growth_is_timed_against_a_twin_frame_by_frame():
    """The remote workload's growth compares the fixed pattern's queries with those of a
    second instance without the far cluster, given each frame just before or after it in
    turn: the two are timed side by side, so a run's drift does not enter the ratio."""
    from app.bench.index_bench import run_subject

    calls = []

    class Logged:
        """An index that logs which instance each frame's query reached."""

        made = 0

        def __init__(self):
            Logged.made += 1  # (the warm-ups' instances first, then the measured one's)
            self.name = Logged.made
            self.idx = create_index("octree", leafy=True)

        def __getattr__(self, attr):
            return getattr(self.idx, attr)

        def query_frustum(self, *args):
            calls.append(self.name)
            return self.idx.query_frustum(*args)

    wl = make_workload("remote", scale=0.01, frames=6, patterns=["fixed", "spawn"])
    rows = run_subject(wl, "octree/leafy", Logged, "wall")
    fixed = next(r for r in rows if r.pattern == "fixed")
    assert fixed.exact == "yes" and fixed.extra.get("growth_paired")
    assert np.isfinite(fixed.growth) and fixed.base_query_ms > 0
    assert all(r.base_query_ms == fixed.base_query_ms for r in rows)
    # The measured instance (made last but one) and the twin (last): after the twin's own
    # frames before the cluster, both at every frame of the fixed pattern (warm-up
    # included), the twin first on even frames and second on odd ones, then the measured
    # one alone for the next pattern.
    a, b = Logged.made - 1, Logged.made
    seg = len(wl.segments[0].frames)
    paired = calls[-(2 * seg + len(wl.segments[1].frames)):]
    assert paired[: 2 * seg] == [b, a, a, b] * (seg // 2) + [b, a] * (seg % 2)
    assert set(paired[2 * seg:]) == {a}
