"""``python -m app plot``: the time stack sums to frame_ms, the chart's text and legends lie
inside the figure without overlapping, no matplotlib warnings, bad input is one line and exit 2.

The logs are synthesised with the viewer's own header (contract + the viewer's extra columns +
the occlusion provider's) and written by the real FrameLog writer.
"""

from __future__ import annotations

import csv
import itertools
import math
import os
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.backends.backend_agg import FigureCanvasAgg

from app import plot as appplot
from app.framelog import CONTRACT_COLUMNS, FrameLog, read_log
from app.render.occlusion import BASE_COLUMNS, GROUND_TRUTH_COLUMNS
from app.viewer.capture import EXTRA_COLUMNS

ROOT = Path(__file__).resolve().parents[1]

# The real columns: the contract's, the viewer's extra ones and the occlusion provider's, in the
# order the viewer's recorder writes them (the header of a --record log with occlusion on).
LOG_COLUMNS = CONTRACT_COLUMNS + EXTRA_COLUMNS + BASE_COLUMNS
TIMED = ("motion_ms", "index_update_ms", "cull_ms", "upload_ms", "render_ms", "overlay_ms")
SESSION_INDEXES = ("icoseptree/non-leafy", "kd/non-leafy", "octree/leafy", "grid", "brute",
                   "chunks", "fixed-octree", "viewdist", "ternary/non-leafy", "kd/leafy")


def session_log(path: Path, frames: int = 3000, switches: int = 9, seed: int = 0,
                objects: int = 20_000) -> Path:
    """A window session as the viewer records it: a JIT warm-up first frame, ``switches``
    index switches (two of them 8 frames apart, as when a key is pressed twice), occlusion
    off -> previous -> two-pass -> off (its columns empty while off), box overlays some of
    the time (overlay_ms large), every timing the viewer writes, rounded as it rounds them."""
    rng = np.random.default_rng(seed)
    at = np.linspace(0, frames, switches + 1, endpoint=False)[1:].astype(int)
    at[1] = at[0] + 8  # a quick double press
    names = [SESSION_INDEXES[k % len(SESSION_INDEXES)] for k in range(switches + 1)]
    occ_at = (frames // 5, frames // 2, 4 * frames // 5)
    occ_modes = ("off", "previous", "two-pass", "off")
    with FrameLog(path, extra_columns=EXTRA_COLUMNS + BASE_COLUMNS) as log:
        for i in range(frames):
            name = names[int(np.searchsorted(at, i, side="right"))]
            occ = occ_modes[int(np.searchsorted(occ_at, i, side="right"))]
            boxes = (i // 400) % 3 == 1
            t = {"motion_ms": rng.uniform(0.1, 0.4), "index_update_ms": rng.uniform(0.2, 1.5),
                 "cull_ms": rng.uniform(0.5, 3.0), "upload_ms": rng.uniform(1.5, 3.5),
                 "render_ms": rng.uniform(6.0, 9.0), "overlay_ms": rng.uniform(0.3, 0.8)}
            if boxes:
                t["overlay_ms"] += rng.uniform(5.0, 8.0)
            if i == 0 or i in at:
                t["index_update_ms"] += rng.uniform(200, 900)  # building the new index
            t = {k: round(float(v), 4) for k, v in t.items()}
            # time between the timed passes (perf_counter calls, the FrameStats bookkeeping)
            frame_ms = sum(t.values()) + rng.uniform(0.01, 0.3)
            vis = int(objects * (0.2 + 0.1 * np.sin(i / 90)))
            row = {"frame": i, "time_s": round(i / 60, 6), "frame_ms": round(frame_ms, 4),
                   "update_ms": round(t["motion_ms"] + t["index_update_ms"], 4),
                   "cpu_ms": round(t["motion_ms"] + t["index_update_ms"] + t["cull_ms"]
                                   + t["upload_ms"], 4),
                   "visible": vis, "working_set": int(vis * 1.4), "nodes_visited": 900,
                   "objects": objects, "index": name, "occlusion": occ, "drawn": vis,
                   "split_threshold": "" if name in ("grid", "brute", "chunks") else 50,
                   "frustum": 1, "view_distance": int(name == "viewdist"), "frozen": 0,
                   "moved": 200, **t}
            if occ != "off":
                row.update(occlusion_ms=round(rng.uniform(0.5, 1.2), 4),
                           occlusion_cull_ms=round(rng.uniform(0.3, 1.0), 4)
                           if occ == "two-pass" else 0.0,
                           occluded_nodes=40, occluded_objects=int(vis * 0.3), second_pass=3)
            log.write(row)
    return path


def make_log(path: Path, index: str, frames: int = 60, switch_to: str | None = None) -> Path:
    rng = np.random.default_rng(len(index))
    with FrameLog(path) as log:
        for i in range(frames):
            name = switch_to if switch_to and i >= frames // 2 else index
            u, c, r = rng.uniform(0.5, 1.0), rng.uniform(1, 3), rng.uniform(8, 12)
            vis = int(300 + 50 * np.sin(i / 10))
            log.write({"frame": i, "time_s": i / 60, "frame_ms": u + c + r + 0.3,
                       "update_ms": u, "cull_ms": c, "render_ms": r, "visible": vis,
                       "working_set": int(vis * 1.5), "nodes_visited": 80, "objects": 2000,
                       "index": name, "occlusion": "off"})
    return path


def plot(*args: str) -> subprocess.CompletedProcess:
    """The command as a user runs it, with every warning an error."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-W", "error", "-m", "app", "plot", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def oracle_other(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """frame_ms and frame_ms minus the viewer's timed passes, read with the csv module."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    frame = np.array([float(r["frame_ms"]) for r in rows])
    passes = np.array([sum(float(r[c]) for c in TIMED) for r in rows])
    return frame, frame - passes


# ---------------------------------------------------------------------------- the time stack


def test_every_timed_column_the_viewer_writes_has_a_place():
    """A new *_ms column in the viewer must be stacked or declared nested in app/plot.py."""
    stacked = {c for c, _, _ in appplot.PASSES} | {
        c for _, _, subs in appplot.PASSES for c, _ in subs}
    for column in CONTRACT_COLUMNS + EXTRA_COLUMNS + BASE_COLUMNS + GROUND_TRUTH_COLUMNS:
        if column.endswith("_ms") and column != "frame_ms":
            assert column in stacked or column in appplot.NESTED, column


def test_stack_of_a_session_log_sums_to_frame_ms(tmp_path):
    path = session_log(tmp_path / "s.csv", frames=600)
    stack = appplot.time_stack(read_log(path))
    # render includes the occlusion passes (pyramid, late cull), and says so
    assert stack.labels == ["motion", "index update", "cull", "upload",
                            "render (incl. occlusion)", "overlay", "other"]
    assert stack.unplaced == []
    frame, other = oracle_other(path)
    np.testing.assert_allclose(stack.layers.sum(axis=0), frame, rtol=0, atol=1e-9)
    np.testing.assert_allclose(stack.layers[-1], other, rtol=0, atol=1e-9)
    assert (stack.layers >= 0).all() and stack.excess.max() == 0
    # upload and overlay are there: the stack is not the update + cull + render of issue 13
    up, ov = stack.labels.index("upload"), stack.labels.index("overlay")
    assert stack.layers[up].min() > 1.0 and stack.layers[ov].max() > 5.0


def test_contract_only_log_puts_what_it_does_not_time_in_other(tmp_path):
    path = make_log(tmp_path / "c.csv", "kd", frames=30)
    log = read_log(path)
    stack = appplot.time_stack(log)
    assert stack.labels == ["update", "cull", "render", "other"]
    expected = log["frame_ms"] - log["update_ms"] - log["cull_ms"] - log["render_ms"]
    np.testing.assert_allclose(stack.layers[-1], expected, atol=1e-9)
    assert stack.layers[-1].min() > 0.2  # the fixture's 0.3 ms of untimed work


def test_unknown_timed_column_is_drawn_but_not_stacked():
    log = {"frame": np.arange(3), "frame_ms": np.full(3, 10.0), "update_ms": np.ones(3),
           "cull_ms": np.ones(3), "render_ms": np.full(3, 5.0), "shadow_ms": np.full(3, 2.0),
           "cpu_ms": np.full(3, 2.0), "index": ["kd"] * 3}
    stack = appplot.time_stack(log)
    assert stack.unplaced == ["shadow_ms"]
    np.testing.assert_allclose(stack.layers[-1], 3.0)


finite_ms = st.floats(0, 1e4, allow_nan=False)
maybe_ms = st.one_of(finite_ms, st.just(math.nan))


@given(st.lists(st.tuples(maybe_ms, maybe_ms, maybe_ms, maybe_ms, maybe_ms, maybe_ms,
                          maybe_ms), min_size=1, max_size=30))
def test_stack_property_layers_sum_to_frame_or_report_excess(rows):
    """Any cells (NaN = empty): layers >= 0; they sum to frame_ms where it exceeds the passes,
    else to the passes with the difference reported as excess; NaN frame_ms = the passes."""
    a = np.array(rows, dtype=np.float64)
    cols = ["update_ms", "cull_ms", "upload_ms", "render_ms", "overlay_ms", "frame_ms"]
    log = {c: a[:, j] for j, c in enumerate(cols)}
    log["frame"] = np.arange(len(rows))
    stack = appplot.time_stack(log)
    passes = np.nansum(a[:, :5], axis=1)
    frame = np.where(np.isnan(a[:, 5]), passes, a[:, 5])
    assert (stack.layers >= 0).all()
    np.testing.assert_allclose(stack.layers.sum(axis=0), np.maximum(frame, passes),
                               rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(stack.excess, np.maximum(passes - frame, 0), rtol=1e-12,
                               atol=1e-9)


@given(st.lists(finite_ms, min_size=1, max_size=50), st.integers(1, 8))
def test_binned_stack_still_sums_to_binned_frame(values, size):
    parts = np.array([values, values[::-1]])
    frame = parts.sum(axis=0)
    np.testing.assert_allclose(appplot.bin_means(parts, size).sum(axis=0),
                               appplot.bin_means(frame, size), rtol=1e-12, atol=1e-9)


# ---------------------------------------------------------------------------- the figure


def draw(paths: list[Path], title: str | None = None):
    """The figure as the command makes it, drawn with every warning an error."""
    logs = [(p, read_log(p)) for p in paths]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = appplot.build_figure(logs, title)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
    return fig, canvas.get_renderer()


def inside(inner, outer, tol: float = 1.0) -> bool:
    return (inner.x0 >= outer.x0 - tol and inner.y0 >= outer.y0 - tol
            and inner.x1 <= outer.x1 + tol and inner.y1 <= outer.y1 + tol)


def overlap(a, b, tol: float = 0.5) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tol) and (min(a.y1, b.y1) - max(a.y0, b.y0)
                                                           > tol)


def check_layout(fig, renderer) -> None:
    """Everything inside the figure; legends off every axes; no two labels overlap."""
    box = fig.bbox
    if fig._suptitle is not None:
        assert inside(fig._suptitle.get_window_extent(renderer), box)
    axes = fig.axes
    for ax in axes:
        assert inside(ax.get_tightbbox(renderer), box), ax.get_gid()
        titles = [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
        for t in titles:
            assert inside(t.get_window_extent(renderer), box), t.get_text()
        for t1, t2 in itertools.combinations(titles, 2):
            assert not overlap(t1.get_window_extent(renderer), t2.get_window_extent(renderer))
        legend = ax.get_legend()
        if legend is not None:
            lb = legend.get_window_extent(renderer)
            assert inside(lb, box), ax.get_gid()
            for other in axes:
                assert not overlap(lb, other.get_window_extent(renderer)), (ax.get_gid(),
                                                                             other.get_gid())
    for tl in (ax for ax in axes if ax.get_gid().startswith("timeline")):
        labels = [t.get_window_extent(renderer) for t in tl.get_yticklabels() if t.get_text()]
        for a, b in itertools.combinations(labels, 2):
            assert not overlap(a, b)
    # each panel's title clear of the panel above (titles sit between panels)
    boxes = sorted((ax.get_tightbbox(renderer) for ax in axes), key=lambda b: -b.y1)
    for upper, lower in itertools.pairwise(boxes):
        assert lower.y1 <= upper.y0 + 1.0


def panel(fig, gid: str):
    return next(ax for ax in fig.axes if ax.get_gid() == gid)


def test_session_with_nine_switches_is_laid_out_cleanly(tmp_path):
    path = session_log(tmp_path / "session.csv")
    fig, renderer = draw([path])
    check_layout(fig, renderer)
    log = read_log(path)
    tl = panel(fig, "timeline:0")
    rows = [t.get_text() for t in tl.get_yticklabels()]
    assert rows[:10] == list(SESSION_INDEXES)
    assert rows[10:] == ["occlusion off", "occlusion previous", "occlusion two-pass",
                         "view distance on"]
    # every index switch starts a bar on the new index's row at that frame
    switches = [i for i in range(1, len(log["index"])) if log["index"][i] != log["index"][i - 1]]
    assert len(switches) == 9
    starts = set()
    for r, coll in enumerate(tl.collections):
        for path_ in coll.get_paths():
            starts.add((r, round(float(path_.vertices[:, 0].min()))))
    for i in switches:
        assert (SESSION_INDEXES.index(log["index"][i]), i) in starts
    # the title is short: file, objects, frames; the index names are the timeline's rows
    title = tl.get_title("left")
    assert len(title) < 90 and "20,000 objects" in title and "kd/leafy" not in title


def test_drawn_stack_top_is_the_frame_time(tmp_path):
    for frames in (60, 3000):  # drawn per frame, and as means of 2 frames
        path = session_log(tmp_path / f"s{frames}.csv", frames=frames)
        fig, _ = draw([path])
        ax = panel(fig, "stack:0")
        patches = {p.get_gid(): p for p in ax.patches if p.get_gid()}
        size = max(1, math.ceil(frames / appplot.MAX_POINTS))
        frame, _ = oracle_other(path)
        top, _, _ = patches["stack:other"].get_data()
        line, _, _ = patches["frame_ms"].get_data()
        np.testing.assert_allclose(top, appplot.bin_means(frame, size), atol=1e-9)
        np.testing.assert_allclose(line, appplot.bin_means(frame, size), atol=1e-9)
        # the layers are filled areas, the frame time and the object counts lines
        assert all(p.get_fill() for gid, p in patches.items() if gid.startswith("stack:"))
        assert not patches["frame_ms"].get_fill()
        vis = [p for p in panel(fig, "visible").patches if p.get_gid()]
        assert [p.get_gid() for p in vis] == ["visible:0", "working_set:0"]
        assert not any(p.get_fill() for p in vis)
        # consecutive layers touch: each one's baseline is the previous one's top
        labels = appplot.time_stack(read_log(path)).labels
        assert len(labels) == 7
        layers = [patches[f"stack:{lab}"].get_data() for lab in labels]
        for (low, _, _), (_, _, base) in itertools.pairwise(layers):
            np.testing.assert_allclose(base, low, atol=1e-12)


def test_compare_several_logs_and_edge_cases_without_warnings(tmp_path):
    logs = [session_log(tmp_path / "a.csv", frames=900, seed=1),
            make_log(tmp_path / "b.csv", "octree", frames=400, switch_to="grid"),
            make_log(tmp_path / "c.csv", "kd", frames=1),
            session_log(tmp_path / "d.csv", frames=5000, switches=30, seed=2)]
    fig, renderer = draw(logs, title="a long user title " * 12)
    check_layout(fig, renderer)
    names = [t.get_text() for t in panel(fig, "visible").get_legend().get_texts()]
    assert names == ["a.csv", "b.csv", "c.csv", "d.csv", "visible", "working set"]
    assert fig._suptitle.get_text().count("\n") <= 2
    # six logs of the same name in different folders: names told apart, still no warning
    many = []
    for k in range(6):
        (tmp_path / f"run{k}").mkdir()
        many.append(make_log(tmp_path / f"run{k}" / "frames.csv", "kd", frames=50 + k))
    fig, renderer = draw(many)
    check_layout(fig, renderer)
    names = [t.get_text() for t in panel(fig, "visible").get_legend().get_texts()][:6]
    assert names == [f"run{k}/frames.csv" for k in range(6)]


def test_command_writes_the_images(tmp_path):
    long = session_log(tmp_path / "session.csv")
    other = make_log(tmp_path / "b.csv", "octree", switch_to="grid")
    for args, out in (([long], "one.png"), ([long, other], "two.png"), ([other], "b.svg")):
        res = plot(*map(str, args), "-o", str(tmp_path / out))
        assert res.returncode == 0 and res.stderr == "", res.stderr
        assert res.stdout.strip() == f"wrote {tmp_path / out}"
    w, h = png_size(tmp_path / "one.png")
    assert w == 1320 and h > 800  # 12 in at 110 dpi
    assert png_size(tmp_path / "two.png")[1] > h
    assert (tmp_path / "b.svg").read_text().lstrip().startswith("<?xml")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".plot-")]


# ---------------------------------------------------------------------------- bad input


def test_bad_inputs_exit_2_with_one_line_and_nothing_written(tmp_path):
    good = make_log(tmp_path / "good.csv", "kd", frames=5)
    bad = tmp_path / "bad.csv"
    bad.write_text("not,a,frame,log\n1,2,3,4\n")
    header_only = tmp_path / "header.csv"
    FrameLog(header_only).close()
    zero = tmp_path / "zero.csv"
    zero.write_bytes(b"")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    text_cells = tmp_path / "text.csv"
    text_cells.write_text(good.read_text().replace("\n1,", "\nx,", 1))
    holes = tmp_path / "holes.csv"
    holes.write_text(good.read_text().replace("\n1,", "\n,", 1))
    folder = tmp_path / "folder.png"
    folder.mkdir()
    out = tmp_path / "x.png"
    kept = tmp_path / "kept.png"
    kept.write_bytes(b"earlier image")
    cases = [
        ([tmp_path / "missing.csv"], out, "missing.csv"),
        ([bad], out, "lacks columns"),
        ([header_only], out, "no frames"),
        ([zero], out, "empty file"),
        ([binary], out, "not UTF-8"),
        ([tmp_path], out, "cannot read"),
        ([text_cells], out, "column frame"),
        ([holes], out, "column frame"),
        ([good, header_only], kept, "no frames"),
        ([good], tmp_path / "no_dir" / "x.png", "does not exist"),
        ([good], good / "x.png", "not a folder"),
        ([good], folder, "is a folder"),
        ([good], tmp_path / ("n" * 300 + ".png"), "longer than"),
        ([good], tmp_path / "x.txt", ".png, .svg or .pdf"),
        ([good], Path("/proc/plot.png"), "cannot write"),
    ]
    for logs, target, needle in cases:
        res = plot(*map(str, logs), "-o", str(target))
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2, (logs, target, res.stderr)
        assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("plot: "), \
            res.stderr
        assert len(lines[0]) < 400
        assert res.stdout == ""
        assert not out.exists()
    assert kept.read_bytes() == b"earlier image"
    for dpi in ("0", "5000"):
        res = plot(str(good), "-o", str(out), "--dpi", dpi)
        assert res.returncode == 2 and "--dpi" in res.stderr and not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".plot-")]


@pytest.mark.parametrize("name", ["log.png"])
def test_output_that_is_an_input_log_is_refused(tmp_path, name):
    log = make_log(tmp_path / name, "kd", frames=5)
    before = log.read_bytes()
    res = plot(str(log), "-o", str(log))
    assert res.returncode == 2 and "input log" in res.stderr
    assert log.read_bytes() == before


def test_a_log_of_the_timing_model_stacks_every_stage_and_marks_its_stalls(tmp_path):
    """A log with the timing model's columns (app.framelog.TIME_STAGES) stacks them in frame
    order, render as draw + occlusion, ``other`` being the log's other_ms; stalls are the rows
    the log names."""
    from app.framelog import TIME_STAGES, FrameLog

    rng = np.random.default_rng(3)
    stages = [c for c, _, _ in TIME_STAGES]
    path = tmp_path / "t.csv"
    with FrameLog(path, extra_columns=[*stages, "stall"]) as log:
        for i in range(20):
            t = {c: float(rng.uniform(0.1, 3.0)) for c in stages}
            t["stall_ms"] = 700.0 if i == 7 else 0.0
            t["compare_ms"] = 0.0  # no A/B run
            log.write({"frame": i, "time_s": i / 60, "frame_ms": sum(t.values()),
                       "update_ms": t["motion_ms"] + t["index_update_ms"],
                       "cull_ms": t["cull_ms"], "render_ms": t["draw_ms"]
                       + t["occlusion_pass_ms"], "visible": 1, "working_set": 1,
                       "nodes_visited": 0, "objects": 1, "index": "kd", "occlusion": "off",
                       **{c: t[c] for c in stages if c not in ("cull_ms",)},
                       "stall": "rebuild kd 700 ms" if i == 7 else ""})
    data = read_log(path)
    stack = appplot.time_stack(data)
    assert stack.labels == [lab for _, lab, _ in TIME_STAGES]
    np.testing.assert_allclose(stack.layers.sum(axis=0), data["frame_ms"], rtol=1e-5)
    np.testing.assert_allclose(stack.layers[-1], data["other_ms"], atol=2e-3)  # 6 digits
    assert appplot.stall_rows(data) == [7]
    fig = appplot.build_figure([(path, data)])
    ax = next(a for a in fig.axes if a.get_gid() == "stack:0")
    assert any(abs(line.get_xdata()[0] - 7.5) < 1e-9 for line in ax.get_lines()
               if line.get_color() == appplot.STALL_COLOR)
    # the legend names the stages this log has: compare B (no A/B run) is at zero on every
    # frame and stays out, the stall (frame 7) is in
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "stall" in legend and "compare B" not in legend and "frame" in legend
