"""The settings and frame inspector (``--dump-frame``, the J key): what the JSON holds, that it
agrees with the frame log, the scene file and the index, and that bad input writes nothing.

The headless runs are real subprocesses (as a user runs them); the viewer's own dumps run
in-process on an EGL context; the J key in a real window is in ``test_viewer_window``'s
style at the end (Xvfb).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.geom.predicates import NODE_REJECT_OCCLUSION
from app.viewer import inspect
from tests.test_viewer_window import display, launch  # noqa: F401 - the window's fixtures

ROOT = Path(__file__).resolve().parents[1]


def _app(*args: str, cwd: Path = ROOT, env: dict | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)


def _refused(r: subprocess.CompletedProcess, *named: str) -> str:
    lines = [s for s in r.stderr.splitlines() if s.strip()]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for n in named:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _check_counts(d: dict, data: dict) -> None:
    """The dump's counts are the frame log's row of its frame, cell for cell (an empty cell,
    a stage that was off, is the dump's null)."""
    row = list(data["frame"]).index(d["frame"])
    for k, v in d["counts"].items():
        cell = data[k][row]
        assert (v is None and np.isnan(cell)) or v == cell, (d["frame"], k, v, cell)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# ---------------------------------------------------------------------- pure parts


@given(st.lists(st.integers(0, NODE_REJECT_OCCLUSION), max_size=200))
def test_outcome_names_and_summary_match_a_plain_count(codes):
    a = np.array(codes, np.int64)
    names = inspect.outcome_names(a)
    assert names == [inspect.OUTCOME_NAMES[c] for c in codes]
    s = inspect.outcome_summary(a)
    for code, name in inspect.OUTCOME_NAMES.items():
        assert s[name] == codes.count(code)
    assert s["visited"] == sum(c != 0 for c in codes)
    assert s["rejected"] == sum(c >= 3 for c in codes)


def test_outcome_names_are_the_box_legends():
    from app.render.boxes import OUTCOME_NAMES

    assert [inspect.OUTCOME_NAMES[k] for k in range(len(OUTCOME_NAMES))] == OUTCOME_NAMES
    assert inspect.outcome_names(np.array([1, 9])) == ["inside", "code 9"]


def test_document_is_strict_json_with_non_finite_numbers_as_null():
    head = {"a": 1, "p": [1.5, 2.0, 3.0], "inf": inspect.plain(np.float64(np.inf)),
            "nested": {"x": [[1, 2], [3, 4]], "s": "text " * 40}}
    lo = np.array([[0.0, 1.0, 2.0], [np.inf, np.inf, np.inf]])
    tables = {"nodes": {"lo": inspect.column(lo), "depth": inspect.column(np.array([0, 1]))}}
    text = inspect.document_text(head, tables)
    d = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert d["nodes"]["lo"] == [[0.0, 1.0, 2.0], [None, None, None]]
    assert d["inf"] is None and d["nested"] == head["nested"] and d["p"] == head["p"]
    # short lists on one line, a dict too long for one line a key a line, a column a line
    assert '  "x": [[1, 2], [3, 4]],\n' in text and ' "p": [1.5, 2.0, 3.0],\n' in text
    assert '  "lo": [[0.0,1.0,2.0],[null,null,null]],\n' in text


def test_a_failed_write_leaves_nothing_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "frame.json"
    path.write_text("old")

    def fail(*_a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        inspect.write_atomic(path, "{}")
    assert _files(tmp_path) == {"frame.json"} and path.read_text() == "old"


# ---------------------------------------------------------------------- headless runs


def test_headless_dump_agrees_with_the_log_the_scene_file_and_the_index(tmp_path):
    from app.framelog import read_log

    log, dump = tmp_path / "run.csv", tmp_path / "frame.json"
    r = _app("demo", "--headless", "--frames", "6", "--dump-frame", "4", "--dump-path",
             str(dump), "--record", str(log), "--size", "160x90", "--objects", "3000",
             "--index", "octree")
    assert r.returncode == 0, r.stderr
    assert f"demo: wrote {dump} (frame 4, " in r.stdout
    d = json.loads(dump.read_text())
    assert d["format"] == inspect.FORMAT and d["frame"] == 4
    # the counts are the log's row for frame 4, cell for cell
    data = read_log(log)
    _check_counts(d, data)
    row = list(data["frame"]).index(4)
    for k in ("index", "occlusion"):
        assert d["log_row"][k] == data[k][row]
    # the wait for the dump is that frame's stall, named, and no other frame's
    assert ["frame dump" in s for s in data["stall"]] == [i == 4 for i in range(6)]
    assert data["stall_ms"][row] > 0
    # settings: as the scene file says (--objects 3000 scales the groups)
    spec = tomllib.loads((ROOT / "scenes" / "demo.toml").read_text())
    sc = d["scene"]
    assert sc["name"] == spec["scene"]["name"] and sc["seed"] == spec["scene"]["seed"]
    assert [g["name"] for g in sc["groups"]] == [g["name"] for g in spec["group"]]
    assert sum(g["count"] for g in sc["groups"]) == sc["objects"] == 3000
    for g, f in zip(sc["groups"], spec["group"], strict=True):
        assert g["distribution"] == f["distribution"] and g["motion"] == f["motion"]
        want = f.get("view_distance_factor")
        assert g["view_distance"]["value"] == want
        assert g["view_distance"]["rule"] == ("factor" if want else "none")
    cam = spec["camera"]
    assert (sc["camera"]["near"], sc["camera"]["far"]) == (cam["near"], cam["far"])
    assert d["camera"]["view"]["near"] == pytest.approx(cam["near"])
    assert d["camera"]["view"]["far"] == pytest.approx(cam["far"])
    assert d["camera"]["culling_is_view"] is True
    assert d["toggles"]["view_distance"] is spec["scene"]["use_view_distance"]
    # the index: every node once, with a box, a depth and an outcome
    ix = d["index"]
    assert ix["name"] == "octree" and ix["label"] == "octree/non-leafy"
    n = d["node_count"]
    assert n == ix["stats"]["nodes"] > 1
    nodes = d["nodes"]
    assert all(len(nodes[k]) == n for k in ("lo", "hi", "depth", "outcome"))
    lo, hi = np.array(nodes["lo"]), np.array(nodes["hi"])
    assert lo.shape == hi.shape == (n, 3) and (lo <= hi).all()
    assert max(nodes["depth"]) == ix["stats"]["max_depth"]
    assert sum(d["outcomes"][name] for name in inspect.OUTCOME_NAMES.values()) == n
    assert d["outcomes"]["visited"] == n - d["outcomes"]["not visited"] > 0
    assert {o: nodes["outcome"].count(o) for o in inspect.OUTCOME_NAMES.values()} == {
        o: d["outcomes"][o] for o in inspect.OUTCOME_NAMES.values()}


@pytest.mark.parametrize(("args", "named"), [
    (["--frames", "5", "--dump-frame", "5"], ("--dump-frame 5", "--frames 5")),
    (["--frames", "5", "--dump-frame", "-1"], ("--dump-frame",)),
    (["--frames", "5", "--dump-frame", "1", "--dump-path", "afile/x.json"], ("not a folder",)),
    (["--frames", "5", "--dump-frame", "1", "--dump-path", "/sys/x.json"], ("cannot create",)),
    (["--frames", "5", "--dump-frame", "1", "--dump-path", "x.txt"], (".json",)),
    (["--frames", "5", "--dump-frame", "1", "--dump-path", "same.json", "--record",
      "./same.json"], ("same file",)),
])
def test_bad_dump_options_are_one_line_and_write_nothing(tmp_path, args, named):
    (tmp_path / "afile").write_text("keep")
    r = _app("demo", "--headless", "--size", "64x64", *args, cwd=tmp_path, timeout=120)
    _refused(r, *named)
    assert _files(tmp_path) == {"afile"} and (tmp_path / "afile").read_text() == "keep"


def test_dump_frame_is_for_headless_runs(tmp_path):
    r = _app("demo", "--dump-frame", "3", cwd=tmp_path, env={"DISPLAY": ":97531"}, timeout=120)
    _refused(r, "--dump-frame 3", "--headless", "J")
    assert _files(tmp_path) == set()


def test_help_names_the_dump_options_and_the_key():
    r = _app("demo", "--help", timeout=120)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "--dump-frame FRAME" in text and "--dump-path FRAME.json" in text
    assert "J write this frame's settings, counts and nodes as JSON" in text


# ---------------------------------------------------------------------- the viewer's dumps


def _viewer(ctx, scene_name="demo", objects=3000, index="octree", **toggles):
    from app.culling.pipeline import IndexConfig
    from app.scene import load_scene
    from app.viewer.setup import occlusion_factory
    from app.viewer.state import Toggles
    from app.viewer.viewer import Viewer

    scene = load_scene(scene_name, objects=objects, seed=7)
    toggles.setdefault("view_distance", bool(scene.use_view_distance))
    return Viewer(ctx, scene, IndexConfig(index, False), (320, 180), Toggles(**toggles),
                  occlusion_factory=occlusion_factory(False))


@pytest.mark.gl
def test_j_writes_the_next_frame_under_out_and_says_where(ctx, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    v = _viewer(ctx, hud=False)
    v.tick(1 / 60)
    assert v.key("j")
    assert not (tmp_path / "out").exists()  # written when the next frame ends
    st = v.tick(1 / 60)
    files = list((tmp_path / "out" / "inspect").glob("demo-*-frame-1.json"))
    assert len(files) == 1, _files(tmp_path)
    d = json.loads(files[0].read_text())
    assert d["frame"] == st.frame == 1
    assert [m for _, m in v.notices if m.startswith(f"frame 1 written to {Path('out/inspect')}")]
    assert f"{Path('out/inspect') / files[0].name} (frame 1, " in " ".join(v.written_lines())
    # the HUD was off: the stage counts were counted for the dump all the same
    assert d["counts"]["frustum_culled"] > 0 and d["counts"]["distance_culled"] >= 0
    # the boxes and outcomes are the index's own, node for node
    lo, hi, depth = v.pipeline.index.node_boxes()
    assert np.array_equal(np.array(d["nodes"]["lo"]), lo)
    assert np.array_equal(np.array(d["nodes"]["hi"]), hi)
    assert d["nodes"]["depth"] == depth.tolist()
    assert d["nodes"]["outcome"] == inspect.outcome_names(v.pipeline.index.node_outcomes())
    v.close()


@pytest.mark.gl
def test_frozen_camera_occlusion_and_frustum_off_are_said(ctx, tmp_path):
    v = _viewer(ctx, occlusion="previous")
    v.set_occlusion("two-pass")
    v.tick(1 / 60)
    v.key("z")  # freeze, then fly away: the culling camera stays
    v.rig.fly.position = v.rig.fly.position + np.array([30.0, 20.0, 0.0])
    v.request_dump(tmp_path / "frozen.json")
    v.tick(1 / 60)
    d = json.loads((tmp_path / "frozen.json").read_text())
    assert d["toggles"]["culling_camera_frozen"] is True and d["toggles"]["occlusion"] == \
        "two-pass"
    assert d["camera"]["culling_is_view"] is False
    assert d["camera"]["culling"]["eye"] != d["camera"]["view"]["eye"]
    assert d["counts"]["occlusion_culled"] is not None and d["notes"] == []
    v.key("f")  # frustum culling off: no query, so no node outcome
    v.request_dump(tmp_path / "off.json")
    v.tick(1 / 60)
    d = json.loads((tmp_path / "off.json").read_text())
    assert d["outcomes"]["not visited"] == d["node_count"] > 0
    assert "frustum culling was off" in d["notes"][0]
    v.close()


@pytest.mark.gl
def test_a_dump_that_cannot_be_written_is_a_notice_not_a_crash(ctx, tmp_path):
    (tmp_path / "afile").write_text("keep")
    v = _viewer(ctx, objects=500)
    v.tick(1 / 60)
    v.request_dump(tmp_path / "afile" / "x.json")
    v.tick(1 / 60)
    assert v.inspector.failed and "afile" in v.inspector.failed
    assert any(m.startswith("frame dump failed") for _, m in v.notices)
    assert _files(tmp_path) == {"afile"}
    v.close()


@pytest.mark.gl
def test_nested_scene_dumps_groups_and_inner_nodes(ctx, tmp_path):
    v = _viewer(ctx, scene_name="tracks", objects=None, index="icoseptree")
    v.tick(1 / 60)
    v.request_dump(tmp_path / "tracks.json")
    v.tick(1 / 60)
    d = json.loads((tmp_path / "tracks.json").read_text())
    h = v.pipeline.index
    corners, gids, _depth, codes = h.group_boxes()
    ncorners, nids, _ndepth, _gdepth = h.node_boxes_info()
    assert d["group_count"] == len(gids) and d["node_count"] == len(nids) > 0
    assert d["groups"]["group"] == [int(g) for g in gids]
    assert np.array_equal(np.array(d["groups"]["corners"]), corners)
    assert np.array_equal(np.array(d["nodes"]["lo"]), ncorners.min(axis=1))
    assert d["groups"]["outcome"] == inspect.outcome_names(codes)
    assert d["group_outcomes"]["visited"] > 0
    assert "world" in d["groups"]["label"] or -1 not in d["groups"]["group"]
    spec = tomllib.loads((ROOT / "scenes" / "tracks.toml").read_text())
    assert sum(g["count"] for g in d["scene"]["groups"]) == d["scene"]["objects"]
    assert {g["name"] for g in d["scene"]["groups"]} == {g["name"] for g in spec["group"]}
    assert any("nested scene" in n and ">= 256 objects" in n for n in d["notes"])
    assert "never: every group is scanned" in inspect.nested_note(np.iinfo(np.int64).max)
    v.close()


# ---------------------------------------------------------------------- the J key in a window


@pytest.mark.xvfb
def test_j_in_a_real_window_writes_frames_that_match_the_log(tmp_path, launch):  # noqa: F811
    from app.framelog import read_log
    from tests.xvfb_display import xvfb_installed

    if not xvfb_installed():
        pytest.skip("Xvfb is not installed")
    log, dump = tmp_path / "win.csv", tmp_path / "win.json"
    v = launch("--scene", "demo", "--objects", "2000", "--record", str(log), "--dump-path",
               str(dump), "--size", "480x270", "--index", "octree")
    v.wait_first_frame()
    v.wait_rows(log, 3)
    v.key("j")
    v.wait_file(dump)
    v.key("j")  # a second dump never replaces the first
    v.wait_file(tmp_path / "win-2.json")
    v.wait_more_rows(log, 2)
    v.key("Escape")
    assert v.wait_exit() == 0, v.output()
    data = read_log(log)
    frames = []
    for path in (dump, tmp_path / "win-2.json"):
        d = json.loads(path.read_text())
        frames.append(d["frame"])
        _check_counts(d, data)
        assert d["node_count"] == len(d["nodes"]["outcome"]) == d["index"]["stats"]["nodes"]
        assert f"demo: wrote {path} (frame {d['frame']}, " in v.text()
    assert frames[1] > frames[0]
