"""Smoke tests of the benchmarks: each runs end to end in a subprocess.

The everyday tier runs them at a few hundred objects (every table, file and exactness check,
in seconds); the thorough tier runs the --quick modes as a user would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


INDEX_SIZES = {"tiny": ["--scale", "0.002", "--frames", "2", "--no-rtree"],
               "quick": []}


@pytest.mark.parametrize("size", [
    "tiny", pytest.param("quick", marks=pytest.mark.thorough)])
def test_bench_index_quick(tmp_path, size):
    import csv as csvmod

    from app.bench.workloads import NOT_FOR_MOVING, PATTERNS

    csv = tmp_path / "index.csv"
    md = tmp_path / "index.md"
    p = _run(["bench", "index", "--quick", *INDEX_SIZES[size], "--csv", str(csv), "--md",
              str(md)])
    assert p.returncode == 0, p.stderr[-3000:]
    for w in ("static", "moving", "viewdist", "remote", "world"):
        assert f"== {w}" in p.stdout
        assert f"-- {w}: each index's worst pattern" in p.stdout
    for peer in ("numpy-brute", "numba-brute", "numba-brute-mt"):
        assert peer in p.stdout
    assert "worst pattern" in p.stdout and "p99 ms" in p.stdout
    assert "target >= 2x the faster compiled brute force" in p.stdout
    assert "target >= 30x the faster compiled brute force" in p.stdout
    lines = csv.read_text().splitlines()
    assert lines[0].startswith("workload,pattern,index,n,")
    rows = list(csvmod.DictReader(csv.open()))
    assert {"p99_ms", "frame_ms", "x_numba", "exact", "growth"} <= set(rows[0])
    # every workload ran every pattern (moving: churn listed as n/a)
    for w in ("static", "moving", "viewdist", "remote", "world"):
        assert {r["pattern"] for r in rows if r["workload"] == w} == set(PATTERNS), w
    na = {r["pattern"] for r in rows if r["exact"] == "n/a"}
    assert na == set(NOT_FOR_MOVING)
    # numpy brute force is always present and always exact
    assert any(r["workload"] == "static" and r["index"] == "numpy-brute" and r["exact"] == "yes"
               for r in rows)
    # every subject that ran a pattern matched the truth exactly on every frame of it
    ran = [r for r in rows if r["exact"] not in ("n/a", "skipped")]
    bad = [(r["workload"], r["pattern"], r["index"], r["exact"], r["error"]) for r in ran
           if r["exact"] != "yes"]
    assert not bad, bad
    for r in ran:
        assert float(r["p99_ms"]) >= float(r["frame_ms"]) > 0, r
    # the compiled peers ran every applicable pattern (they are the yardsticks)
    for r in ran:
        if r["index"] in ("numba-brute", "numba-brute-mt", "numpy-brute"):
            assert r["x_numba"] not in ("", "nan"), r
    text = md.read_text()
    assert text.startswith("# `python -m app bench index` results")
    assert "### static: each index's worst pattern" in text


@pytest.mark.parametrize("size", [
    "tiny", pytest.param("quick", marks=pytest.mark.thorough)])
def test_bench_paper_quick(tmp_path, size):
    out = tmp_path / "paper"
    smaller = ["--cycles", "2", "--max-n", "2000"] if size == "tiny" else []
    p = _run(["bench", "paper", "--quick", *smaller, "--out", str(out)])
    assert p.returncode == 0, p.stderr[-3000:]
    assert "our results against the paper" in p.stdout
    for f in ("sweep.csv", "leafy.csv", "dist.csv", "report.md", "fig4_2_uniform.png",
              "fig4_5_sphere.png"):
        assert (out / f).exists(), f
    if any(n in p.stdout for n in ("kd/", "icoseptree")):
        assert (out / "fig3_1_thresholds.png").exists()
    report = (out / "report.md").read_text()
    assert "## Our results against the paper's conclusions" in report
    dist = (out / "dist.csv").read_text().splitlines()
    assert len(dist) > 8


def test_peers_agree_with_reference():
    """The numpy, numba and rtree peers answer exactly like the reference definitions."""
    from app.bench.baselines import PEERS, convex_bbox
    from app.bench.workloads import box_truth, frustum_truth
    from app.culling.frustum import camera_planes

    rng = np.random.default_rng(3)
    n = 3000
    c = rng.random((n, 3)) * 100
    r = rng.uniform(0.3, 3, n)
    vd = 10 * r
    ids = np.arange(n, dtype=np.int64)
    eye = np.array([50.0, 50, 50])
    planes = camera_planes(eye, eye + [1, 0.2, 0], far=40.0)
    lo, hi = convex_bbox(planes)
    inside = frustum_truth(c, np.zeros(n), planes)  # centres strictly in the frustum
    assert ((c[inside] >= lo) & (c[inside] <= hi)).all()
    for name, factory in PEERS.items():
        if name == "rtree":
            try:
                import rtree  # noqa: F401
            except ImportError:
                continue
        s = factory()
        s.insert(ids, c, r, vd)
        movers = ids[::7]
        c2 = c.copy()
        c2[movers] += rng.normal(size=(movers.shape[0], 3))
        s.update(movers, c2[movers])
        for use_vd in (False, True):
            got = np.sort(s.query_frustum(planes, eye, use_vd).visible)
            want = frustum_truth(c2, r, planes, eye, vd if use_vd else None)
            assert np.array_equal(got, want), (name, use_vd)
        b0, b1 = np.array([20.0, 30, 10]), np.array([60.0, 45, 90])
        assert np.array_equal(np.sort(s.query_box(b0, b1)), box_truth(c2, r, b0, b1)), name


def test_bench_occlusion_small_run(tmp_path):
    """Two modes, one repetition, a few frames of a small scene: a table with the ratio to
    the frustum-only run of the same repetition, and the markdown copy."""
    import pytest

    pytest.importorskip("moderngl")
    md = tmp_path / "occ.md"
    p = _run(["bench", "occlusion", "--scene", "fig26", "--objects", "200", "--modes",
              "off,previous", "--reps", "1", "--frames", "4", "--warmup", "1", "--size",
              "160x90", "--quiet", "--md", str(md)])
    if "EGL" in p.stderr:
        pytest.skip("no headless EGL context")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "frustum only" in p.stdout and "previous" in p.stdout
    row = next(line for line in md.read_text().splitlines() if line.startswith("| previous"))
    ratio = float(row.split("|")[6])
    assert 0 < ratio < 5


def test_bench_occlusion_rejects_bad_arguments():
    for args, msg in ((["--modes", "off,nosuch"], "unknown mode 'nosuch'"),
                      (["--reps", "0"], "--reps and --frames must be >= 1")):
        p = _run(["bench", "occlusion", *args])
        assert p.returncode == 2 and msg in p.stderr, p.stderr
    p = _run(["bench", "occlusion", "--scene", "nosuch", "--reps", "1", "--quiet"])
    assert p.returncode == 1 and "run failed" in p.stderr and "nosuch" in p.stderr


def test_occlusion_bench_ratios_pair_runs_of_the_same_repetition(tmp_path):
    from app.bench.occlusion_frames import ModeRuns, log_medians, ratios, table_rows

    runs = {"off": ModeRuns("off", [30.0, 20.0], [25, 15], [0, 0], [100, 100]),
            "previous": ModeRuns("previous", [9.0, 8.0], [4, 4], [1, 1], [10, 10])}
    assert ratios(runs, "previous") == [0.3, 0.4]
    rows = table_rows(runs)
    assert rows[1][5] == "0.350" and rows[1][6] == "0.300-0.400"
    log = tmp_path / "log.csv"
    head = ("frame,time_s,frame_ms,update_ms,cull_ms,render_ms,visible,working_set,"
            "nodes_visited,objects,index,occlusion,drawn\n")
    log.write_text(head + "".join(f"{i},0,{f},0,0,{r},0,0,0,9,kd,off,{d}\n"
                                  for i, (f, r, d) in enumerate([(10, 5, 7), (30, 6, 9),
                                                                 (20, 7, 8)])))
    assert log_medians(log) == {"frame_ms": 20.0, "render_ms": 6.0, "occlusion_ms": 0.0,
                                "drawn": 8.0}


@pytest.mark.parametrize("mode", ["ours", "paper"])
def test_paper_protocol_splits_the_trees_fully(mode):
    """The protocol's whole-volume query leaves no overfull leaf: in our mode queries only
    note splits and the upkeep makes them, so the bench alternates the two until done."""
    from app.bench.paper import split_fully
    from app.spatial import create_index

    rng = np.random.default_rng(5)
    n = 20000
    c = rng.uniform(0, 80, (n, 3))
    r = rng.uniform(1, 10, n)
    idx = create_index("kd", split_threshold=30, mode=mode)
    idx.insert(np.arange(n), c, r)
    lo, hi = (c - r[:, None]).min(axis=0), (c + r[:, None]).max(axis=0)
    assert split_fully(idx, lo, hi).shape[0] == n
    nd = idx._nodes
    live = nd.depth >= 0
    overfull = live & ~nd.is_split & (nd.count > idx.split_threshold)
    assert idx.stats()["max_depth"] > 5 and not overfull.any()
