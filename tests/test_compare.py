"""A/B on the same frames (issue 27, item 3): ``--compare SPEC``, F2, the B index culling A's
frames in its own stage, the HUD's A/B lines and the report written on exit.

The pure parts (the spec, the statistics, the report) run on made-up numbers; the viewer's
parts through real OpenGL (EGL headless) as in test_viewer_keys; the command line as a user
runs it. No test compares wall-clock times between the two sides: they check the structure
(B's stage apart from A's, the stages summing to the frame) and the answers.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from app.viewer import compare
from app.viewer.compare import Pairing, Samples
from app.viewer.compare_spec import CompareSpec, parse_spec

ROOT = Path(__file__).resolve().parents[1]


def _demo(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "demo", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------- the spec


def test_spec_names_an_index_and_optionally_its_variant_and_split():
    assert parse_spec("kd") == CompareSpec("kd")
    assert parse_spec("kd/non-leafy") == CompareSpec("kd", False)
    assert parse_spec("octree/leafy/split=16") == CompareSpec("octree", True, 16)
    assert parse_spec("fixed-octree") == CompareSpec("fixed-octree")
    # what the spec leaves out is A's
    assert CompareSpec("kd").resolve("brute", False, 12) == ("kd", False, 12)
    assert CompareSpec("kd", True, 4).resolve("brute", False, 12) == ("kd", True, 4)


def test_spec_may_give_b_an_occlusion_mode_of_its_own():
    assert parse_spec("kd/occlusion=two-pass") == CompareSpec("kd", occlusion="two-pass")
    assert parse_spec("octree/non-leafy/split=8/occlusion=off") == CompareSpec(
        "octree", False, 8, "off")
    # only the mode: A's index (and variant, split) under another occlusion mode
    only = parse_spec("occlusion=previous")
    assert only == CompareSpec(None, occlusion="previous")
    assert only.resolve("icoseptree", True, None) == ("icoseptree", True, None)


@pytest.mark.parametrize(("spec", "says"), [
    ("kdd", "did you mean 'kd'?"),
    ("octre/leafy", "did you mean 'octree'?"),
    ("kd/leafyy", "did you mean 'leafy'?"),
    ("grid/leafy", "grid has no leafy / non-leafy variant"),
    ("kd/leafy/non-leafy", "variant is given twice"),
    ("kd/split=0", "expected 1 to"),
    ("kd/split=x", "not an integer"),
    ("occlusion=twopass", "did you mean 'two-pass'?"),
    ("kd/occlusion=off/occlusion=previous", "occlusion mode is given twice"),
    ("occlusion=off/leafy", "follows its name"),
    ("kd/occlusoin=off", "did you mean 'occlusion='?"),
])
def test_a_bad_spec_says_what_is_wrong(spec, says):
    with pytest.raises(ValueError) as err:
        parse_spec(spec)
    assert says in str(err.value)


def test_a_bad_compare_name_is_one_line_with_did_you_mean_and_exit_2():
    res = _demo("--headless", "--frames", "3", "--compare", "kdd", timeout=60)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--compare" in lines[0] and "did you mean 'kd'?" in lines[0]


def test_an_unwritable_report_path_is_refused_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    t0 = time.monotonic()
    res = _demo("--headless", "--frames", "3", "--compare", "kd", "--compare-report",
                str(blocker / "r.md"), timeout=60)
    assert res.returncode == 2 and time.monotonic() - t0 < 30
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("demo: --compare-report"), res.stderr
    res = _demo("--headless", "--frames", "3", "--compare-report", str(tmp_path / "r.md"),
                timeout=60)
    assert res.returncode == 2 and "only with --compare" in res.stderr
    res = _demo("--headless", "--frames", "3", "--compare", "kd", "--record",
                str(tmp_path / "r.csv"), "--compare-report", str(tmp_path / "r.md"), timeout=60)
    assert res.returncode == 2 and "name the same file" in res.stderr
    assert not list(tmp_path.glob("r.*"))


# ---------------------------------------------------------------------- statistics, report


def _samples(a_total: np.ndarray, b_total: np.ndarray, differ: np.ndarray | None = None,
             pyramids: tuple[float, float] = (0.0, 0.0), fn: tuple[int, int] = (-1, -1)
             ) -> Samples:
    """A's and B's totals split into update and cull (and ``pyramids`` on top of them)."""
    s = Samples()
    for k in range(a_total.shape[0]):
        s.append((a_total[k] / 4, a_total[k] * 3 / 4, b_total[k] / 2, b_total[k] / 2,
                  0 if differ is None else differ[k], 100, 200, 10, 20, 50, *pyramids,
                  50, 60, *fn))
    return s


def test_samples_grow_and_keep_every_frame_in_order():
    s = Samples()
    for k in range(1000):
        s.append([k] * compare._WIDTH)
    assert s.count == 1000 and s.rows.shape == (1000, compare._WIDTH)
    np.testing.assert_array_equal(s.rows[:, 0], np.arange(1000))


def test_hud_lines_give_medians_ratio_and_p95_of_the_last_window():
    rng = np.random.default_rng(1)
    a = rng.uniform(1.0, 2.0, 500)
    b = 2 * a
    s = _samples(a, b)
    pair = Pairing("icoseptree/leafy", "kd/leafy", True, False, "off")
    first, second = compare.hud_lines(pair, s.rows, window=300)
    ma, mb = np.median(a[-300:]), np.median(b[-300:])
    assert first.startswith(f"A/B (F2): A icoseptree/leafy {ma:.2f} ms | B kd/leafy {mb:.2f} "
                            f"ms | B/A {mb / ma:.2f}x")
    assert "median of 300 frames" in second
    assert f"p95 A {np.percentile(a[-300:], 95):.2f} B {np.percentile(b[-300:], 95):.2f}" in \
        second
    assert "answers equal (300 of 300 frames)" in first
    assert "working set A 100 in 10 nodes, B 200 in 20" in second
    differ = np.zeros(500)
    differ[-1] = 7
    first, _ = compare.hud_lines(pair, _samples(a, b, differ).rows, window=300)
    assert "answers differ by 7 ids this frame, in 1 of 300 frames" in first
    assert "a bug" in first
    occluded = Pairing("kd/leafy", "octree/leafy", True, False, "previous")
    assert "may differ" in compare.hud_lines(occluded, _samples(a, b, differ).rows)[0]


def test_with_b_s_own_occlusion_mode_each_total_counts_its_pyramid():
    """B's own pyramids are its cost, and A's are A's: the totals add them; the HUD names
    both modes, the objects drawn and the false negatives; differing answers are expected."""
    rng = np.random.default_rng(3)
    a = rng.uniform(1.0, 2.0, 50)
    b = rng.uniform(1.0, 2.0, 50)
    pair = Pairing("kd/leafy", "kd/leafy", True, False, "previous", "two-pass")
    rows = _samples(a, b, np.ones(50), pyramids=(0.5, 0.25), fn=(3, 0)).rows
    first, second = compare.hud_lines(pair, rows)
    ma, mb = np.median(a + 0.5), np.median(b + 0.25)
    assert first.startswith(f"A/B (F2): A kd/leafy occlusion previous {ma:.2f} ms | B kd/leafy "
                            f"occlusion two-pass {mb:.2f} ms | B/A {mb / ma:.2f}x")
    assert "(different occlusion modes)" in first and "a bug" not in first
    assert second.startswith("   update + cull + pyramid, median of 50 frames")
    assert "drawn A 50 B 60; false negatives A 3 B 0" in second
    got = compare.report_rows(pair, rows)
    assert [(r[0], r[2]) for r in got] == [(s, t) for s in "AB"
                                           for t in ("update", "cull", "pyramid", "total")]
    assert got[2][3] == pytest.approx(0.5) and got[6][3] == pytest.approx(0.25)
    assert got[7][7] == pytest.approx(mb / ma)
    text = compare.report_markdown({pair: Samples()} | {pair: _samples(
        a, b, pyramids=(0.5, 0.25), fn=(3, 0))}, "t", [])
    assert "False negatives (truly visible, not drawn) over 50 frames: A 150, B 0." in text
    # B with its own mode "off" against A off: exact again
    assert Pairing("kd", "kd", True, True, "off", "off").exact
    assert not Pairing("kd", "kd", True, True, "off", "previous").exact


def test_report_rows_are_each_sides_stages_with_b_over_a(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.uniform(1.0, 3.0, 40)
    b = rng.uniform(2.0, 9.0, 40)
    pair = Pairing("brute", "kd/leafy split 8", True, True, "off")
    runs = {pair: _samples(a, b)}
    rows = compare.report_rows(pair, runs[pair].rows)
    assert [(r[0], r[2]) for r in rows] == [(s, t) for s in "AB"
                                            for t in ("update", "cull", "total")]
    a_total, b_total = rows[2], rows[5]
    assert a_total[3:6] == pytest.approx((np.median(a), np.percentile(a, 95), a.max()))
    assert b_total[3:6] == pytest.approx((np.median(b), np.percentile(b, 95), b.max()))
    assert b_total[6] == 40 and b_total[7] == pytest.approx(np.median(b) / np.median(a))
    assert a_total[7] is None
    md, out_csv = compare.write_report(tmp_path / "r.md", runs, "A/B", ["a note"])
    text = md.read_text()
    assert "## A brute vs B kd/leafy split 8 (frustum on, view distance on, occlusion off)" \
        in text and "answers equal on all 40 frames" in text and "a note" in text
    table = [line for line in text.splitlines() if line.startswith("| B |")]
    assert len(table) == 3 and table[-1].endswith(f"{np.median(b) / np.median(a):.2f}x |")
    with out_csv.open() as fh:
        got = list(csv.DictReader(fh))
    assert [(r["side"], r["stage"]) for r in got] == [(r[0], r[2]) for r in rows]
    assert float(got[5]["median_ms"]) == pytest.approx(np.median(b), rel=1e-4)


# ---------------------------------------------------------------------- the viewer (EGL)


@pytest.fixture
def report(tmp_path: Path) -> Path:
    """Where a test's viewer writes its A/B report on close (never under the repo's out/)."""
    return tmp_path / "ab-report.md"


def _viewer(ctx, report: Path, index="brute", objects=3000, **kw):
    from tests.test_viewer_keys import _viewer as make

    v = make(ctx, objects=objects, index=index, size=(320, 180), hud=True, **kw)
    v.compare_report = report
    return v


def _compare(v, spec: str) -> None:
    assert v.set_compare(v.compare_config(parse_spec(spec)))


def _recorded(v, log: Path, frames: int) -> tuple[list[str], dict]:
    """Record ``frames`` ticks of ``v`` into ``log``, close it: (last HUD lines, the log)."""
    from app.framelog import read_log

    v.start_recording(log)
    for _ in range(frames):
        v.tick(1 / 30)
    lines = v.hud_lines(v.stats)
    v.close()
    return lines, read_log(log)


@pytest.mark.gl
@pytest.mark.parametrize(("a", "b"), [("brute", "kd/leafy"), ("chunks", "octree/non-leafy")])
def test_exact_indexes_give_b_the_same_answer_as_a_on_every_frame(ctx, tmp_path, report,
                                                                  a, b):
    v = _viewer(ctx, report, a)
    _compare(v, b)
    lines, data = _recorded(v, tmp_path / "ab.csv", 12)
    assert set(data["compare_index"]) == {v.comparison.label}
    assert v.comparison.label.startswith(b)
    assert np.all(data["compare_differ"] == 0)
    ab = [s for s in lines if s.startswith("A/B (F2): ")]
    assert ab and f"| B {v.comparison.label} " in ab[0]
    assert any("answers equal" in s for s in lines)
    # B's own stage counts, its query's: they add up to the objects with B's answer
    c = v.comparison.stages
    res = v.comparison.pipeline.last_cull.result
    assert (c.frustum, c.drawn) == (res.culled_frustum, res.visible.shape[0])
    assert c.frustum + (c.distance or 0) + (c.occlusion or 0) + c.drawn == c.objects
    assert f"   B culled {c.culled:,} of {c.objects:,}" in "\n".join(lines)
    assert f"-> B drew {c.drawn:,}" in "\n".join(lines)
    (pair, s), = v.comparison.runs.items()
    assert s.count == 12 and pair.exact
    # closing wrote the report: both sides, every frame, the answers equal
    text = report.read_text()
    assert f"## A {pair.a} vs B {pair.b}" in text and "answers equal on all 12 frames" in text
    assert report.with_suffix(".csv").exists()
    # the record's visible count is A's answer's, frame by frame as the log has it
    np.testing.assert_array_equal(s.rows[:, compare.VISIBLE], data["visible"])


@pytest.mark.gl
def test_a_wrong_b_answer_is_counted_and_shown(ctx, report):
    v = _viewer(ctx, report, "brute")
    _compare(v, "kd")
    b = v.comparison.pipeline
    first = b.first_cull

    def drop_one(*args, **kw):  # a broken B: one visible id missing
        out = first(*args, **kw)
        res = b.last_cull.result
        res.visible = res.visible[1:]
        return out

    b.first_cull = drop_one
    for _ in range(3):
        v.tick(1 / 30)
    assert v.comparison.log_values()["compare_differ"] == 1
    assert any("answers differ by 1 ids this frame" in s and "a bug" in s
               for s in v.hud_lines(v.stats))
    v.close()


@pytest.mark.gl
def test_b_has_its_own_stage_and_the_stages_still_sum_to_the_frame(ctx, tmp_path, report):
    """A slow B (20 ms of sleep in its update) lands in compare_ms, not in A's update or
    cull; every row's stages add up to frame_ms with compare_ms among them."""
    from app.framelog import TIME_STAGES

    v = _viewer(ctx, report, "brute")
    _compare(v, "kd")
    b = v.comparison.pipeline
    update = b.update

    def slow(*args, **kw):
        time.sleep(0.02)
        return update(*args, **kw)

    b.update = slow
    lines, data = _recorded(v, tmp_path / "slow.csv", 6)
    assert "compare_ms" in [c for c, _, _ in TIME_STAGES]
    stages = np.stack([data[c] for c, _, _ in TIME_STAGES])
    np.testing.assert_allclose(stages.sum(axis=0), data["frame_ms"], rtol=1e-4, atol=1e-3)
    assert np.all(data["compare_ms"] >= 20.0) and np.all(data["compare_update_ms"] >= 20.0)
    assert np.all(data["compare_ms"] >= data["compare_update_ms"] + data["compare_cull_ms"]
                  - 1e-3)
    # A's stages do not hold B's sleep: A's update + cull stay below it on most frames
    a_cost = data["index_update_ms"] + data["cull_ms"]
    assert np.median(a_cost) < 20.0
    assert "compare B" in " ".join(lines[:2])


@pytest.mark.gl
def test_without_b_the_hud_and_log_have_no_comparison(ctx, tmp_path, report):
    v = _viewer(ctx, report, "brute")
    lines, data = _recorded(v, tmp_path / "off.csv", 3)
    assert np.all(data["compare_ms"] == 0) and all(np.isnan(data["compare_cull_ms"]))
    assert not any(s.startswith("A/B") for s in lines) and "compare B" not in lines[0] + lines[1]
    assert v.write_compare_report() == [] and not v.comparison.runs and not report.exists()


@pytest.mark.gl
def test_f2_cycles_b_through_the_indexes_and_off_and_marks_the_build_as_a_stall(ctx, report):
    from app.spatial import INDEX_NAMES

    v = _viewer(ctx, report, "brute", leafy=False)
    v.tick(1 / 30)
    assert not v.comparison.active
    v.key("f2")
    assert v.comparison.pipeline.config.name == INDEX_NAMES[0]
    v.key("f2")
    assert v.comparison.pipeline.config.name == INDEX_NAMES[1]
    assert v.comparison.pipeline.config.leafy is False  # A's variant
    assert v.clock.open.stall.count("build B") == 2
    v.tick(1 / 30)
    v.key("f2", shift=True)
    v.key("f2", shift=True)
    assert not v.comparison.active
    v.key("f2", shift=True)
    assert v.comparison.pipeline.config.name == INDEX_NAMES[-1]
    v.tick(1 / 30)
    labels = {p.b for p in v.comparison.runs}
    assert len(labels) == 2  # the two B indexes that culled a frame, each its own pairing
    v.close()


@pytest.mark.gl
@pytest.mark.parametrize("mode", ["previous", "two-pass"])
def test_b_culls_with_as_occlusion_mode_and_pyramids(ctx, report, mode):
    v = _viewer(ctx, report, "kd", objects=4000, occlusion=True, leafy=True)
    v.set_occlusion(mode)
    _compare(v, "kd")  # the same index: the same answer, pyramids and all
    for _ in range(6):
        v.tick(1 / 30)
    b = v.comparison.pipeline
    assert b.last_cull.occlusion == mode
    if mode == "two-pass":
        assert b.last_cull.two_pass and b._early.shape[0] > 0  # B's own early set
    (pair, s), = v.comparison.runs.items()
    assert pair.occlusion == mode and not pair.exact and s.count == 6
    assert np.all(s.rows[:, compare.DIFFER] == 0)
    v.close()


@pytest.mark.gl
@pytest.mark.parametrize("mode", ["previous", "two-pass"])
def test_b_s_own_pyramids_in_a_s_mode_give_a_s_answer_on_every_frame(ctx, tmp_path, report,
                                                                     mode):
    """B's own pyramids are drawn from B's ids: with A's index and mode those are A's ids and
    A's matrices, so the pyramids and the answers are A's, frame by frame. B's pyramid is
    timed, and the stages (B's depth draw inside compare_ms) still add up to the frame."""
    from app.framelog import TIME_STAGES

    v = _viewer(ctx, report, "kd", objects=4000, occlusion=True, leafy=True)
    v.set_occlusion(mode)
    assert v.set_compare_occlusion(mode)  # B off: B becomes A's index, in its own mode
    assert v.comparison.pipeline.config.label() == v.config.label()
    lines, data = _recorded(v, tmp_path / "own.csv", 10)
    (pair, s), = v.comparison.runs.items()
    assert pair.own_pyramids and pair.b_mode == mode and s.count == 10
    assert np.all(s.rows[:, compare.DIFFER] == 0)
    assert np.all(s.rows[:, compare.B_PYRAMID] > 0) and np.all(s.rows[:, compare.A_PYRAMID] > 0)
    np.testing.assert_array_equal(s.rows[:, compare.A_DRAWN], s.rows[:, compare.B_DRAWN])
    assert set(data["compare_occlusion"]) == {mode}
    assert np.all(data["compare_pyramid_ms"] > 0)
    stages = np.stack([data[c] for c, _, _ in TIME_STAGES])
    np.testing.assert_allclose(stages.sum(axis=0), data["frame_ms"], rtol=1e-4, atol=1e-3)
    ab = next(line for line in lines if line.startswith("A/B (F2): "))
    assert f"occlusion {mode}" in ab and "answers equal (10 of 10 frames)" in ab
    assert "update + cull + pyramid" in " ".join(lines)


@pytest.mark.gl
def test_b_in_two_pass_beside_a_in_previous_misses_nothing_truly_visible(ctx, report):
    """Two-pass has no false negatives (its late cull tests against the depth of what it drew
    first); measured for B against the same id buffer as A's, with B's own pyramids."""
    from app.viewer.setup import occlusion_factory

    v = _viewer(ctx, report, "kd", objects=4000, occlusion=True, leafy=True)
    v.occlusion_factory = occlusion_factory(True)  # ground truth on
    v.set_occlusion("previous")
    assert v.set_compare_occlusion("two-pass")
    for _ in range(12):
        v.tick(1 / 30)
    (pair, s), = v.comparison.runs.items()
    r = s.rows
    assert pair.settings().endswith("occlusion A previous, B two-pass (B's own pyramids)")
    assert np.all(r[:, compare.A_FN] >= 0)  # measured on every frame
    assert np.all(r[:, compare.B_FN] == 0)
    assert np.all(r[:, compare.B_DRAWN] > 0)
    assert "false negatives A " in v.comparison.hud_lines()[1]
    v.close()


@pytest.mark.gl
def test_f3_cycles_b_s_occlusion_mode_and_starts_b_as_a_s_index(ctx, report):
    v = _viewer(ctx, report, "brute", occlusion=True)
    v.tick(1 / 30)
    seen = []
    for _ in range(4):
        v.key("f3")
        v.tick(1 / 30)
        seen.append(v.comparison.occlusion_mode)
    assert seen == ["off", "previous", "two-pass", None]
    assert v.comparison.pipeline.config.name == "brute"  # A's index
    v.key("f3", shift=True)
    assert v.comparison.occlusion_mode == "two-pass"
    v.tick(1 / 30)
    modes = [p.b_occlusion for p in v.comparison.runs]
    assert modes == ["off", "previous", "two-pass", None]  # one pairing each, in order
    v.close()


# ---------------------------------------------------------------------- the command line


@pytest.mark.gl
def test_headless_compare_writes_the_report_with_both_sides_and_every_frame(tmp_path):
    log, report = tmp_path / "run.csv", tmp_path / "run-compare.md"
    res = _demo("--headless", "--frames", "25", "--objects", "3000", "--index", "brute",
                "--compare", "kd/leafy", "--record", str(log), "--size", "320x180")
    assert res.returncode == 0, res.stderr[-2000:]
    assert report.exists() and report.with_suffix(".csv").exists()  # beside the log
    assert f"demo: wrote {report} (A/B report, 25 frames)" in res.stdout
    assert "answers equal on all 25 frames" in res.stdout
    text = report.read_text()
    assert "## A brute vs B kd/leafy" in text
    with report.with_suffix(".csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["side"] for r in rows] == ["A"] * 3 + ["B"] * 3
    for r in rows:
        med, p95, mx = (float(r[k]) for k in ("median_ms", "p95_ms", "max_ms"))
        assert 0 < med <= p95 <= mx < 10_000 and int(r["frames"]) == 25
        assert int(r["frames_differing"]) == 0
    assert float(rows[5]["b_over_a"]) > 0


@pytest.mark.gl
def test_headless_compare_of_two_occlusion_modes_reports_each_side_s_pyramid(tmp_path):
    report = tmp_path / "modes.md"
    res = _demo("--headless", "--frames", "20", "--objects", "3000", "--index", "kd",
                "--occlusion", "previous", "--compare", "occlusion=two-pass",
                "--compare-report", str(report), "--size", "320x180")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "occlusion A previous, B two-pass (B's own pyramids)" in res.stdout
    with report.with_suffix(".csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["side"], r["stage"]) for r in rows] == [
        (s, t) for s in "AB" for t in ("update", "cull", "pyramid", "total")]
    assert rows[4]["index"].endswith("occlusion two-pass")
    assert float(rows[2]["median_ms"]) > 0 and float(rows[6]["median_ms"]) > 0


def test_b_goes_first_on_every_other_frame():
    """The order's cache advantage is counterbalanced: B after A, then B before A, ..."""
    c = compare.Comparison(lambda config, scene: None, None)
    assert [c.goes_first() for _ in range(4)] == [False, True, False, True]


@pytest.mark.gl
def test_plot_shows_the_b_index_on_the_timeline_and_its_stage_in_the_stack(ctx, tmp_path,
                                                                           report):
    from app import plot as appplot
    from app.framelog import read_log

    v = _viewer(ctx, report, "brute")
    log = tmp_path / "plot.csv"
    v.start_recording(log)
    v.tick(1 / 30)
    _compare(v, "kd/leafy")
    for _ in range(3):
        v.tick(1 / 30)
    v.close()
    data = read_log(log)
    rows = appplot._timeline_rows(data)
    b = [(label, spans) for label, key, spans in rows if key == "compare"]
    assert b == [(f"B {v.comparison.label}", [(1, 4)])]  # from the frame after F2 on
    stack = appplot.time_stack(data)
    layer = stack.layers[stack.labels.index("compare B")]
    assert layer[0] == 0 and np.all(layer[1:] > 0)
