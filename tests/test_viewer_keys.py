"""The viewer driven by key names through real OpenGL (EGL headless): what the HUD says, what
the log records, which files are written and what the overlays draw.

Every test runs :class:`app.viewer.viewer.Viewer` with a real context and a real index; keys
go through :meth:`Viewer.key`, the same dispatch the window uses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.gl


def _viewer(ctx, scene_name="demo", objects=3000, index="octree", size=(320, 180), leafy=False,
            occlusion=False, **toggles):
    from app.culling.pipeline import IndexConfig
    from app.scene import load_scene
    from app.viewer.setup import occlusion_factory
    from app.viewer.state import Toggles
    from app.viewer.viewer import Viewer

    scene = load_scene(scene_name, objects=objects, seed=7)
    toggles.setdefault("view_distance", bool(scene.use_view_distance))
    tg = Toggles(**toggles)
    factory = occlusion_factory(False) if occlusion else None
    return Viewer(ctx, scene, IndexConfig(index, leafy), size, tg, occlusion_factory=factory)


def _line(v, start: str) -> str:
    lines = [s for s in v.hud_lines(v.stats) if s.startswith(start)]
    assert lines, f"no HUD line starting {start!r}: {v.hud_lines(v.stats)}"
    return lines[0]


def _oracle(scene, view):
    """(outside the frustum, beyond their view distance) by the contract's definition, numpy:
    the bounds of what the frustum and the view-distance tests can reject."""
    o = scene.objects
    dots = o.centers @ view.planes[:, :3].T + view.planes[:, 3]
    inside = (dots >= -o.radii[:, None]).all(axis=1)
    near = np.sqrt(((o.centers - view.eye) ** 2).sum(axis=1)) <= o.view_distances
    return int((~inside).sum()), int((~near).sum())


def test_demo_opening_view_culls_most_objects_by_frustum_and_distance(ctx):
    """The default scene at its default size, from its first camera: most of the world is
    culled, by both stages, and the HUD says how many by which. (Paused: moving, every object
    moves every frame and the tree goes flat, whose scan counts view distance first.)"""
    v = _viewer(ctx, objects=None, index="icoseptree", size=(320, 180), paused=True)
    n = len(v.scene.objects.ids)
    st = v.tick(1 / 60)
    c = st.stages
    assert n > 20_000 and c.objects == n
    assert c.drawn < 0.05 * n, f"the opening view draws {c.drawn} of {n}"
    assert c.frustum > 0.1 * n and c.distance > 0.1 * n and c.occlusion is None
    assert c.frustum + c.distance + c.drawn == n
    outside, beyond = _oracle(v.scene, v.last_view)
    assert c.frustum <= outside and c.distance <= beyond
    line = _line(v, "culled")
    assert f"frustum {c.frustum:,}" in line and f"view distance {c.distance:,}" in line
    assert "occlusion off" in line and f"drawn {c.drawn:,}" in line
    v.close()


def test_stage_counts_in_hud_and_log_are_the_oracles_with_every_stage_on(ctx, tmp_path):
    """Frustum, view distance and previous-frame occlusion on: each logged row splits the
    objects into those the frustum, view-distance and occlusion tests rejected and those
    drawn, the query's own counts, each no more than the contract's definition allows;
    switching a stage off (V, F) logs it empty."""
    from app.framelog import read_log

    v = _viewer(ctx, objects=6000, occlusion=True, paused=True, hud=True, view_distance=True)
    v.set_occlusion("previous")
    log = tmp_path / "stages.csv"
    v.start_recording(log)
    for _ in range(3):
        st = v.tick(1 / 60)
    outside, beyond = _oracle(v.scene, v.last_view)
    n = len(v.scene.objects.ids)
    res = v.pipeline.last_cull.result
    c = st.stages
    assert (c.frustum, c.distance, c.occlusion) == (
        res.culled_frustum, res.culled_distance, res.occluded_objects)
    assert c.frustum <= outside and c.distance <= beyond
    assert c.frustum + c.distance + c.occlusion + c.drawn == n
    v.key("v")
    v.tick(1 / 60)
    v.key("f")
    v.tick(1 / 60)
    v.close()
    data = read_log(log)
    parts = (data["frustum_culled"] + data["distance_culled"] + data["occlusion_culled"]
             + data["drawn"])
    np.testing.assert_array_equal(parts[:3], data["objects"][:3])
    assert data["frustum_culled"][2] == c.frustum
    assert np.isnan(data["distance_culled"][3]) and not np.isnan(data["frustum_culled"][3])
    assert np.isnan(data["frustum_culled"][4]) and np.isnan(data["occlusion_culled"][4])
    assert (data["stages_ms"] >= 0).all()


def test_l_and_split_keys_say_what_they_changed(ctx):
    """L switches the variant, whose default threshold differs: the notice says from what to
    what; + and - say it too."""
    v = _viewer(ctx, index="icoseptree", leafy=False)
    v.tick(1 / 60)
    before = v.pipeline.split_threshold()
    assert v.key("l")
    after = v.pipeline.split_threshold()
    assert before != after  # icoseptree: non-leafy 50, leafy 70
    texts = [t for _, t in v.notices]
    assert f"split threshold {before} -> {after} (this variant's default)" in texts
    assert v.key("plus")
    raised = v.pipeline.split_threshold()
    assert raised > after and f"split threshold {after} -> {raised}" in [t for _, t in v.notices]
    v.tick(1 / 60)
    assert f"split threshold {raised}" in _line(v, "index")
    v.close()


@pytest.mark.parametrize("scene_name,index,setup,says", [
    ("demo", "brute", (), "brute is a flat scan"),
    ("uniform", "viewdist", (), "no object of this scene has one"),
    ("demo", "octree", ("f",), "frustum culling is off"),
    ("demo", "chunks", (), "slot order"),
])
def test_no_nodes_is_explained_instead_of_a_bare_zero(ctx, scene_name, index, setup, says):
    v = _viewer(ctx, scene_name=scene_name, index=index, objects=3000, boxes="depth")
    for k in setup:
        v.key(k)
    for _ in range(4):  # chunks goes to slot order after a few frames of everything moving
        st = v.tick(1 / 60)
    assert st.nodes_visited == 0
    assert "in - nodes" in _line(v, "objects")
    if not setup:  # (with frustum culling off a tree still has its boxes)
        assert v.overlays.box_total == 0
        assert says in _line(v, "no nodes, no boxes to draw:")
    v.key("b")  # outcome
    v.key("b")  # off
    v.tick(1 / 60)
    assert says in _line(v, "no nodes visited:")
    v.close()


def test_a_tree_with_nodes_gets_no_excuse(ctx):
    v = _viewer(ctx, index="octree", boxes="depth")
    v.tick(1 / 60)
    assert v.stats.nodes_visited > 0 and v.overlays.box_total > 0
    assert not any(s.startswith("no nodes") for s in v.hud_lines(v.stats))
    v.close()


def test_box_filter_key_and_legends(ctx):
    """N cycles all / leaves / depth <= k: the overlay draws exactly those boxes (the HUD
    counts them), and the depth and outcome colourings come with a legend of their colours."""
    from app.render.boxes import DEPTH_PALETTE, leaf_boxes

    v = _viewer(ctx, index="octree", size=(640, 360), paused=True, hud=True)
    v.key("b")
    v.tick(1 / 60)
    lo, hi, depth = v.pipeline.index.node_boxes()
    assert v.overlays.box_count == v.overlays.box_total == lo.shape[0] > 8
    title, items = v.overlays.legend
    assert title.startswith("box depth (") and f" of {lo.shape[0]:,} in view" in title
    assert 0 < v.overlays.box_drawn <= lo.shape[0]
    assert len(items) == min(int(depth.max()) + 1, 8)
    assert items[1][1][:3] == tuple(DEPTH_PALETTE[1].tolist())
    all_img = v.target.read_rgb()
    v.key("n")
    v.tick(1 / 60)
    leaves = int(leaf_boxes(lo, hi, depth).sum())
    assert 0 < v.overlays.box_count == leaves < v.overlays.box_total
    assert f"leaves only: {leaves:,} of {v.overlays.box_total:,}" in _line(v, "frustum")
    assert not np.array_equal(all_img, v.target.read_rgb())
    v.key("n")
    v.tick(1 / 60)
    assert v.overlays.box_count == int((depth <= 1).sum())
    assert "depth <= 1" in _line(v, "frustum")
    v.key("n", shift=True)
    assert v.toggles.box_filter == "leaves"
    v.key("b")  # outcome colours, their legend
    v.tick(1 / 60)
    title, items = v.overlays.legend
    assert title.startswith("box outcome (")
    assert [t for t, _ in items] == ["inside", "partial", "frustum-rejected",
                                     "view-distance-rejected", "occluded", "not visited"]
    # the legend row is on the picture: its swatches' colours appear under the HUD text
    img = v.target.read_rgb().astype(int)
    top = img[: img.shape[0] * 3 // 4]  # under the HUD text (the timing model takes 2-4 rows)
    green = (np.abs(top - np.array([51, 255, 76])).sum(axis=2) < 40).sum()
    assert green > 20, "no legend swatch of the 'inside' colour"
    v.close()


def test_frozen_camera_outside_orbit_draws_planes_marker_and_labels(ctx, tmp_path):
    """X freezes the culling camera and flies the view out to an orbit around it: the frustum,
    its near and far planes and a camera marker are drawn and labelled, culling stays the
    frozen camera's; X again comes back and unfreezes; Z's own freeze outlives X."""
    v = _viewer(ctx, index="octree", size=(640, 360), paused=True, hud=True)
    v.tick(1 / 60)
    inside_view = v.stats.visible
    eye0 = v.last_view.eye.copy()
    plain = v.target.read_rgb()
    assert v.key("x")
    assert v.toggles.frozen and v.rig.mode == "orbit"
    for _ in range(3):
        v.tick(1 / 30)
    assert np.linalg.norm(v.last_view.eye - eye0) > 50  # the view is outside now
    assert v.stats.visible == inside_view  # culled by the frozen camera
    labels = [t for _, _, t in v.overlays.labels]
    assert labels == ["culling camera", "near plane 0.5", "far plane 600"]
    assert "orbit around the frozen culling camera" in _line(v, "scene")
    shot = v.screenshot(tmp_path / "orbit.png")
    img = v.target.read_rgb().astype(int)
    orange = (np.abs(img - np.array([255, 140, 25])).sum(axis=2) < 60).sum()
    white = (img.min(axis=2) > 240).sum()
    assert orange > 200 and white > 30, (orange, white)
    assert not np.array_equal(img, plain) and shot.stat().st_size > 1000
    spin = v.rig.orbit_yaw
    v.tick(1.0)
    assert v.rig.orbit_yaw > spin  # it turns slowly by itself
    v.rig.rotate(0.1, 0.0)  # a drag stops that
    spin = v.rig.orbit_yaw
    v.tick(1.0)
    assert v.rig.orbit_yaw == spin
    assert v.key("x")
    assert not v.toggles.frozen and v.rig.mode == "fly"
    v.tick(1 / 60)
    np.testing.assert_allclose(v.last_view.eye, eye0)
    v.key("z")
    v.key("x")
    v.key("x")
    assert v.toggles.frozen and v.rig.mode == "fly"  # Z froze it, Z unfreezes it
    v.key("z")
    assert not v.toggles.frozen
    v.close()


def test_c_plays_the_camera_path_and_flying_takes_over(ctx):
    v = _viewer(ctx, paused=True)
    scene = v.scene
    v.tick(1 / 60)
    assert v.key("c") and v.rig.mode == "path"
    for _ in range(30):
        v.tick(0.1)
    assert v.rig.path_time == pytest.approx(3.0)
    eye, _ = scene.camera_at(3.0)
    np.testing.assert_allclose(v.last_view.eye, eye)
    assert "camera path   3.0 / 40 s" in _line(v, "scene")
    v.rig.move(1.0, 0.0, 0.0)  # a flying key: the fly camera goes on from the path's pose
    assert v.rig.mode == "fly"
    v.tick(0.1)
    assert 0.5 < np.linalg.norm(v.last_view.eye - eye) < 1.5
    v.key("c")
    v.tick(0.5)
    np.testing.assert_allclose(v.last_view.eye, scene.camera_at(3.5)[0])  # from where it was
    v.key("home")
    v.tick(0.1)
    np.testing.assert_allclose(v.last_view.eye, scene.camera.position)
    v.close()


def test_render_bound_frames_say_so_and_suggest_a_remedy(ctx):
    """Drawing every object of the demo (frustum culling off) makes the frame render-bound:
    the HUD says so with a smaller --size and fewer objects; a cheap frame does not."""
    v = _viewer(ctx, objects=24000, index="brute", size=(640, 360), frustum=False,
                view_distance=False, paused=True, hud=True)
    for _ in range(12):
        v.tick(1 / 60)
    line = _line(v, "render-bound")
    assert "--size 320x180" in line and "--objects 12000" in line
    v.close()
    v = _viewer(ctx, objects=200, index="brute", size=(64, 64), paused=True, hud=True)
    for _ in range(12):
        v.tick(1 / 60)
    assert not any(s.startswith("render-bound") for s in v.hud_lines(v.stats))
    v.close()


def test_r_and_k_without_names_write_under_out_and_list_what_they_wrote(ctx, tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    v = _viewer(ctx, paused=True)
    v.tick(1 / 60)
    v.key("r")
    v.tick(1 / 60)
    v.key("k")
    v.tick(1 / 60)
    v.key("r")  # stop
    v.key("r")  # again: a second file
    v.tick(1 / 60)
    v.close()
    logs = sorted((tmp_path / "out" / "logs").glob("frames-*.csv"), key=lambda p: len(p.name))
    shots = sorted((tmp_path / "out" / "screenshots").glob("shot-*.png"))
    assert len(logs) == 2 and len(shots) == 1
    assert not (tmp_path / "logs").exists() and not (tmp_path / "screenshots").exists()
    lines = v.written_lines()
    assert lines == [f"{Path('out/logs') / logs[0].name} (2 rows)",
                     f"{Path('out/screenshots') / shots[0].name}",
                     f"{Path('out/screenshots') / shots[0].with_suffix('.hud.txt').name}",
                     f"{Path('out/logs') / logs[1].name} (1 rows)"]


def test_headless_run_prints_every_file_it_wrote(tmp_path):
    from app.framelog import read_log

    log, png = tmp_path / "run.csv", tmp_path / "shot.png"
    r = subprocess.run([sys.executable, "-m", "app", "demo", "--headless", "--frames", "4",
                        "--record", str(log), "--screenshot", str(png), "--size", "160x90",
                        "--objects", "2000"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert f"demo: wrote {log} (4 rows)" in r.stdout.splitlines()
    assert f"demo: wrote {png}" in r.stdout.splitlines()
    data = read_log(log)
    assert (data["frustum_culled"] > 0).all() and (data["distance_culled"] >= 0).all()


def test_the_viewer_does_every_action_of_the_key_table(ctx):
    """Each action of app/viewer/keys.py's table is the viewer's, and no other: the table is
    the one list of what a key does."""
    from app.viewer.keys import ACTIONS, BINDINGS

    v = _viewer(ctx, objects=500, paused=True)
    assert set(v._actions) == set(ACTIONS)
    v.tick(1 / 60)
    for b in BINDINGS:
        for name in b.names:
            if b.action not in ("record", "screenshot", "inspect"):  # (these write files)
                assert v.key(name), name
    assert not v.key("m") and not v.key("escape")
    v.close()


def test_hud_log_and_graph_share_one_timing_model_and_mark_stalls(ctx, tmp_path):
    """Every logged frame's stages add up to its wall time (frame_ms, start to the next
    start) and fps is 1000 / frame_ms; the HUD shows the last closed frame's row exactly; an
    index switch is a stall in the log (wall-clock time beside simulated time) and a red
    mark in the graph, which G draws in the lower right."""
    from app.framelog import TIME_STAGES, read_log
    from app.render.frame_graph import STALL_RGBA
    from tests.test_viewer_parts import parse_timing

    v = _viewer(ctx, objects=3000, index="brute", size=(640, 360), hud=True)
    log = tmp_path / "timing.csv"
    v.start_recording(log)
    for _ in range(4):
        v.tick(1 / 60)
    v.key("g")
    v.key("i")  # a rebuild between frames: a stall of the open frame
    for _ in range(4):
        v.tick(1 / 60)
    fps, frame, parts, n = parse_timing(v.hud_lines(v.stats)[:2])
    v.request_screenshot(tmp_path / "graph.png")
    v.tick(1 / 60)
    v.close()
    data = read_log(log)
    stages = np.stack([data[c] for c, _, _ in TIME_STAGES])
    np.testing.assert_allclose(stages.sum(axis=0), data["frame_ms"], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(data["render_ms"], data["draw_ms"] + data["occlusion_pass_ms"],
                               rtol=1e-4, atol=1e-3)
    row = list(data["frame"]).index(n)
    # the HUD rounds to 0.01 ms what the log holds to 4 decimals: equal within that
    assert abs(frame - float(data["frame_ms"][row])) <= 0.0051
    assert abs(fps - 1000 / frame) <= 0.05 + 5.0 / frame**2  # both rounded as shown
    for (col, label, _) in TIME_STAGES:
        if label in parts:
            assert abs(parts[label] - float(data[col][row])) <= 0.0051, label
    assert abs(sum(parts.values()) - frame) <= 0.005 * len(parts)
    # the rebuild's stall (a cold kernel cache adds compile stalls to earlier frames)
    stalled = [i for i, s in enumerate(data["stall"]) if "rebuild kd" in s]
    assert stalled and data["stall_ms"][stalled[0]] > 0 and data["frame"][stalled[0]] == 3
    assert np.all(np.diff(data["wall_s"]) > 0) and np.all(np.diff(data["time_s"]) > 0)
    text = (tmp_path / "graph.hud.txt").read_text().splitlines()
    assert parse_timing(text[:2])[3] == data["frame"][-2]  # the screenshot's frame's HUD
    assert v.clock.history.stalls().sum() >= 1
    from PIL import Image

    img = np.asarray(Image.open(tmp_path / "graph.png").convert("RGB")).astype(int)
    rect = v.graph.rect
    bars = img[int(rect.y):int(rect.y + rect.h), int(rect.x):int(rect.x + rect.w)]
    red = (np.abs(bars - np.array(STALL_RGBA[:3]) * 255).sum(axis=2) < 60).sum()
    assert red >= 6, "no stall mark in the graph"
