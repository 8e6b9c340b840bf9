"""The viewer's rooms that need no OpenGL: the key table, the HUD text, the frame log's rows and
file names, and the pipeline's frame culls (two-pass's early set kept by the pipeline)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from app.culling.pipeline import CullPipeline, IndexConfig, StageCounts
from app.viewer import hud_text, keys
from app.viewer.capture import EXTRA_COLUMNS, Capture, log_row, next_free_path
from app.viewer.state import FrameStats, Toggles

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- the key table


def test_every_key_name_has_one_action_and_every_action_a_key():
    names = [n for b in keys.BINDINGS for n in b.names]
    assert len(names) == len(set(names)), "a key name bound twice"
    assert keys.action_of("plus") == keys.action_of("minus") == "split"
    assert keys.action_of("f12") == keys.action_of("k") == "screenshot"
    assert keys.action_of("m") is None and keys.action_of("escape") is None  # the window's
    assert keys.action_of("no-such-key") is None
    assert len(keys.ACTIONS) == len(set(keys.ACTIONS))
    assert all(b.names for b in keys.BINDINGS if b.action)  # an action has a key


def test_f1_help_and_the_docs_are_the_table():
    lines = keys.help_lines()
    assert lines[0] == "KEYS" and len(lines) == len(keys.BINDINGS) + 1
    assert "  I / Shift+I   next / previous index (rebuilds from the current objects)" in lines
    from app.viewer.cli import epilog

    assert "\n".join(keys.help_lines("KEYS (in the window; F1 shows them there too)")) in epilog()
    doc = (ROOT / "docs" / "viewer.md").read_text()
    begin = doc.index("| key | action |")
    end = doc.index("<!-- keys: end -->")
    assert doc[begin:end].strip() == keys.markdown_table(), \
        "docs/viewer.md's key table is stale: python -m app.viewer.keys prints it"


# ---------------------------------------------------------------------------- HUD text


def test_stages_line_says_each_stage_and_off():
    c = StageCounts(objects=24120, frustum=15702, distance=7944, occlusion=None, drawn=474)
    assert hud_text.stages_line(c) == (
        "culled 23,646 of 24,120 (98.0%), rejected in the order tested by:  view distance "
        "7,944   frustum 15,702   occlusion off   -> drawn 474")
    assert hud_text.stages_line(None) is None


def test_stages_line_says_why_occlusion_on_does_nothing_without_frustum_culling():
    """The settings line says "occlusion two-pass": the stage line must not say "off"."""
    c = StageCounts(objects=100, frustum=None, distance=None, occlusion=None, drawn=100)
    tg = Toggles(frustum=False, occlusion="two-pass")
    line = hud_text.stages_line(c, tg)
    assert "occlusion two-pass inactive (frustum off)" in line and "occlusion off" not in line
    assert "occlusion off" in hud_text.stages_line(c, Toggles(frustum=False))


def test_no_nodes_reason_by_index_and_toggle():
    assert "frustum culling is off" in hud_text.no_nodes_reason("octree", False, {}, 10)
    assert "flat scan" in hud_text.no_nodes_reason("brute", True, None, 10)
    assert "no object of this scene has one" in hud_text.no_nodes_reason(
        "viewdist", True, {"infinite": 10}, 10)
    assert hud_text.no_nodes_reason("viewdist", True, {"infinite": 3}, 10) is None
    assert "slot order" in hud_text.no_nodes_reason("chunks", True, {"order": "slot"}, 10)
    assert hud_text.no_nodes_reason("octree", True, {"nodes": 9}, 10) is None
    assert hud_text.no_nodes_reason("octree", True, None, 10) is None
    assert "than keeping a tree); pause (P) and it builds it again" in \
        hud_text.no_nodes_reason("octree", True, {"flat": True}, 10)
    assert "went flat" in hud_text.no_nodes_reason("viewdist", True, {"infinite": 0,
                                                                      "flat": True}, 10)
    assert "than keeping its cells); pause (P) and it builds them again" in \
        hud_text.no_nodes_reason("grid", True, {"flat": True}, 10)


def test_render_bound_needs_slow_frames_mostly_drawing():
    slow = [(80.0, 100.0)] * 12
    line = hud_text.render_bound(slow, 738, (1280, 720), 24120, True)
    assert line == ("render-bound: draw + occlusion are 80% of a 100 ms frame (738 objects at "
                    "1280x720, software GL); try --size 640x360 or fewer objects (--objects 12060)")
    assert hud_text.render_bound(slow[:9], 738, (1280, 720), 24120, True) is None  # too few
    assert hud_text.render_bound([(10.0, 100.0)] * 12, 1, (64, 64), 2, False) is None
    assert hud_text.render_bound([(9.0, 10.0)] * 12, 1, (64, 64), 2, False) is None  # fast


def _timed_frame() -> FrameStats:
    """A closed frame whose stages sum to its wall time (as app.viewer.timing closes it)."""
    from app.viewer.timing import close_frame

    st = FrameStats(frame=41, motion_ms=0.31, index_update_ms=1.207, cull_ms=2.5,
                    upload_ms=0.44, draw_ms=15.25, occlusion_pass_ms=0.0, overlay_ms=0.6,
                    hud_ms=2.125, present_ms=1.9, started=10.0)
    close_frame(st, 10.0 + 27.0 / 1000)
    return st


def parse_timing(lines: list[str]) -> tuple[float, float, dict[str, float], int]:
    """(fps, frame ms, {stage: ms}, frame number) from the HUD's two timing lines."""
    import re

    head = re.match(r"\s*([0-9.]+) fps = 1000 / frame ([0-9.]+) ms = (.*)", lines[0])
    assert head, lines[0]
    tail = re.match(r"\s*\+ (.*)\s+\(frame (\d+), ms\)$", lines[1])
    assert tail, lines[1]
    parts = {}
    for part in (head.group(3) + " + " + tail.group(1)).split(" + "):
        name, value = part.strip().rsplit(" ", 1)
        parts[name] = float(value)
    return float(head.group(1)), float(head.group(2)), parts, int(tail.group(2))


def test_timing_lines_are_stages_that_add_up_to_the_frame_and_fps_is_its_inverse():
    from app.framelog import OPTIONAL_STAGES, TIME_STAGES

    st = _timed_frame()
    assert abs(sum(getattr(st, c) for c, _, _ in TIME_STAGES) - st.frame_ms) < 1e-9
    assert abs(st.other_ms - (27.0 - 24.332)) < 1e-9
    lines = hud_text.timing_lines(st)
    fps, frame, parts, n = parse_timing(lines)
    assert n == 41 and frame == 27.0 and fps == round(1000 / 27.0, 1)
    assert list(parts) == [lab for c, lab, _ in TIME_STAGES if c not in OPTIONAL_STAGES]
    assert abs(sum(parts.values()) - frame) <= 0.005 * len(parts)
    st.stall_ms, st.stall = 5.0, "rebuild kd 5 ms"
    from app.viewer.timing import close_frame

    close_frame(st, 10.0 + 30.0 / 1000)
    lines = hud_text.timing_lines(st)
    fps, frame, parts, _ = parse_timing(lines)
    assert parts["stall"] == 5.0 and abs(sum(parts.values()) - frame) <= 0.005 * len(parts)
    assert lines[2] == "stall in frame 41: rebuild kd 5 ms"
    assert hud_text.timing_lines(None)[0].startswith("fps -")


def test_a_frame_whose_stages_exceed_its_wall_time_gets_no_negative_other():
    from app.viewer.timing import close_frame

    st = FrameStats(draw_ms=12.0, started=1.0)
    close_frame(st, 1.010)
    assert st.other_ms == 0.0 and st.frame_ms == 12.0


def test_hud_lines_from_plain_values():
    tg = Toggles(view_distance=True, boxes="depth", box_filter="leaves")
    st = FrameStats(visible=474, drawn=474, working_set=3108, nodes_visited=0,
                    stages=StageCounts(24120, 15702, 7944, None, 474))
    s = hud_text.HudState(timed=_timed_frame(), objects=24120, index="brute", variant="-",
                          split=None, describe="brute", toggles=tg, box_count=0, box_total=0,
                          recording="run.csv", scene="demo", camera="fly",
                          reason="brute is a flat scan of every object, it has none",
                          hint=None, extra=["occlusion line"])
    lines = hud_text.hud_lines(st, s)
    assert lines[0].startswith("  37.0 fps = 1000 / frame 27.00 ms = motion 0.31 + ")
    assert lines[1].endswith("(frame 41, ms)")
    assert lines[2] == ("objects 24,120   tested 3,108 (working set) in - nodes   query answer "
                        "474   drawn 474")
    assert lines[3].startswith("culled 23,646 of 24,120")
    assert lines[4] == "index brute"
    assert "boxes depth (leaves only: 0 of 0)" in lines[5] and lines[5].endswith("rec run.csv")
    assert lines[6] == "scene demo   camera: fly   F1 help"
    assert lines[7].startswith("no nodes, no boxes to draw: brute is a flat scan")
    assert lines[-1] == "occlusion line"
    assert hud_text.needs_reason(st, tg, 0)
    assert hud_text.box_filter_label("depth<=2") == "depth <= 2"


def test_two_pass_counts_say_early_and_late_draws():
    st = FrameStats(visible=385, drawn=391, drawn_late=11, working_set=900, nodes_visited=40)
    line = hud_text.counts_line(st, 1000, "40", two_pass=True)
    assert "query answer 385   drawn 391 (early 380 + late 11)" in line


# ---------------------------------------------------------------------------- capture


def test_log_row_has_every_column_and_extras(tmp_path):
    from app.framelog import FrameLog

    st = FrameStats(frame=3, motion_ms=1.0, index_update_ms=0.5, visible=7, drawn=7,
                    stages=StageCounts(10, 2, None, None, 7))
    row = log_row(st, Toggles(), objects=10, index="octree/leafy", split=None,
                  extras=[{"pairs": 4}])
    assert row["update_ms"] == 1.5 and row["split_threshold"] == "" and row["pairs"] == 4
    assert (row["frustum_culled"], row["distance_culled"]) == (2, None)
    with FrameLog(tmp_path / "x.csv", extra_columns=EXTRA_COLUMNS) as log:
        assert set(log.columns) <= set(row)


def test_capture_never_overwrites_and_lists_what_it_wrote(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    said: list[str] = []
    cap = Capture(said.append)
    first = cap.start_recording(tmp_path / "run.csv", ())
    cap.write({"frame": 0})
    cap.stop_recording()
    second = cap.start_recording(cap.next_log_path(), ())
    cap.stop_recording()
    assert (first.name, second.name) == ("run.csv", "run-2.csv")
    with open(first, newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 1
    assert cap.written_lines() == [f"{first} (1 rows)", f"{second} (0 rows)"]
    assert said[0] == f"recording to {first}"
    assert next_free_path(first) == tmp_path / "run-3.csv"
    cap.screenshot_base = tmp_path / "shot.png"
    assert [cap.next_screenshot_path().name for _ in range(2)] == ["shot.png", "shot-2.png"]
    assert not cap.shot_pending
    cap.request_screenshot(tmp_path / "later.png")
    assert cap.shot_pending


# ---------------------------------------------------------------------------- the frame's culls


def _scene(n: int = 3000, seed: int = 5):
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    centers = rng.uniform(-100, 100, (n, 3))
    radii = rng.uniform(0.5, 2.0, n)
    vd = rng.uniform(40, 150, n)
    return ids, centers, radii, vd


def test_two_pass_culls_keep_the_visible_set_in_the_pipeline():
    """first_cull draws last frame's late answer still in view; late_cull returns what it
    missed and keeps its own answer for the next frame; the counts come from the held
    objects; forget_visible empties the early set."""
    from app.culling.frustum import camera_planes

    ids, c, r, vd = _scene()
    p = CullPipeline(IndexConfig("octree", True))
    p.build(ids, c, r, vd)
    eye = np.array([0.0, 0.0, 160.0])
    planes = camera_planes(eye, np.zeros(3), far=400.0)
    full = p.cull(planes, eye, frustum=True, view_distance=True).visible
    first = p.first_cull(planes, eye, frustum=True, view_distance=True, occlusion="two-pass")
    assert first.shape[0] == 0  # no early set yet
    newly = p.late_cull(None)  # no pyramid: the late cull finds the whole visible set
    assert set(newly.tolist()) == set(full.tolist())
    counts = p.frame_stages(drawn=int(newly.shape[0]))
    inside = ((c @ planes[:, :3].T + planes[:, 3]) >= -r[:, None]).all(axis=1)
    near = np.linalg.norm(c - eye, axis=1) <= vd
    assert counts.occlusion == 0 and counts.drawn == newly.shape[0]
    assert counts.frustum + counts.distance + counts.drawn == len(ids)
    assert counts.frustum <= (~inside).sum() and counts.distance <= (~near).sum()
    # next frame, the camera turned a little: the early set is last frame's still in view
    eye2 = eye + np.array([20.0, 0.0, 0.0])
    planes2 = camera_planes(eye2, np.zeros(3), far=400.0)
    first = p.first_cull(planes2, eye2, frustum=True, view_distance=True, occlusion="two-pass")
    want = full[(((c[full] @ planes2[:, :3].T + planes2[:, 3]) >= -r[full, None]).all(axis=1))
                & (np.linalg.norm(c[full] - eye2, axis=1) <= vd[full])]
    assert set(first.tolist()) == set(want.tolist())
    newly = p.late_cull(None)
    assert not set(newly.tolist()) & set(first.tolist())
    p.forget_visible()
    assert p.first_cull(planes2, eye2, frustum=True, view_distance=True,
                        occlusion="two-pass").shape[0] == 0
    # other modes query at once; frustum culling off draws everything without a query
    got = p.first_cull(planes, eye, frustum=True, view_distance=True, occlusion="previous")
    assert set(got.tolist()) == set(full.tolist()) and not p.last_cull.two_pass
    assert p.first_cull(planes, eye, frustum=False, view_distance=False) is None
    assert p.frame_stages(drawn=len(ids)).frustum is None
