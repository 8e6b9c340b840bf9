"""Headless (EGL) render tests of the viewer's frame sequence and the demo command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.gl


def _viewer(ctx, scene_name="demo", objects=1500, index="brute", size=(320, 180), **toggles):
    from app.culling.pipeline import IndexConfig
    from app.scene import load_scene
    from app.viewer.state import Toggles
    from app.viewer.viewer import Viewer

    scene = load_scene(scene_name, objects=objects, seed=7)
    tg = Toggles(hud=False, **toggles)
    return Viewer(ctx, scene, IndexConfig(index, leafy=True), size, tg), scene


def _camera(scene, t, size=(320, 180)):
    from app.viewer.camera import CameraView

    eye, target = scene.camera_at(t)
    c = scene.camera
    return CameraView.make(eye, target, c.fov_deg, size[0] / size[1], c.near, c.far)


def _render(viewer, scene, frames=3, t0=20.0):
    for i in range(frames):
        viewer.frame(1 / 60, _camera(scene, t0 + i / 60))
    return viewer.target.read_rgb()


def _index_names():
    from app.spatial import INDEX_NAMES

    return list(INDEX_NAMES)


@pytest.mark.parametrize("index", _index_names())
def test_frustum_culling_gives_the_same_pixels_as_no_culling(ctx, index):
    # t0 = 20 s puts the demo camera inside the box looking across it: many objects culled.
    on, scene_on = _viewer(ctx, index=index, frustum=True, view_distance=False)
    off, scene_off = _viewer(ctx, index=index, frustum=False, view_distance=False)
    img_on = _render(on, scene_on)
    st_on = on.stats
    img_off = _render(off, scene_off)
    st_off = off.stats
    assert st_off.drawn == len(scene_off.objects.ids)
    assert st_on.drawn < st_off.drawn, "the test view must cull something"
    assert st_on.visible == st_on.drawn
    assert img_on.std() > 1.0, "the image shows nothing"
    assert np.array_equal(img_on, img_off)
    on.close()
    off.close()


def test_every_scene_renders_a_frame(ctx):
    from app.scene import list_scenes

    names = list_scenes()
    assert "demo" in names
    for name in names:
        v, scene = _viewer(ctx, scene_name=name, objects=3000, index="brute",
                           view_distance=False)
        img = _render(v, scene, frames=2, t0=0.0)
        assert img.shape == (180, 320, 3)
        assert v.stats.visible > 0, f"scene {name}: nothing visible from its start camera"
        assert img.std() > 1.0, f"scene {name}: uniform image"
        v.close()


def test_overlays_and_freeze_draw_something(ctx, tmp_path):
    from app.spatial import INDEX_NAMES

    index = "octree" if "octree" in INDEX_NAMES else "brute"
    v, scene = _viewer(ctx, index=index)
    base = _render(v, scene, frames=1)
    v.toggles.boxes = "depth"
    boxed = _render(v, scene, frames=1)
    v.toggles.boxes = "outcome"
    _render(v, scene, frames=1)
    v.toggles.boxes = "off"
    v.toggles.hud = True
    v.toggles.help = True
    hud = _render(v, scene, frames=1)
    assert not np.array_equal(base, hud)
    if index != "brute":
        assert not np.array_equal(base, boxed)
    v.toggles.help = False
    v.toggle_freeze(_camera(scene, 20.0))
    # fly away: the frozen frustum is drawn and the culled set stays the frozen camera's
    from app.viewer.camera import CameraView

    far = CameraView.make([250.0, 150.0, 250.0], [0.0, 0.0, 0.0], 60.0, 16 / 9, 0.1, 2000.0)
    v.frame(1 / 60, far)
    path = v.screenshot(tmp_path / "frozen.png")
    assert path.stat().st_size > 1000
    v.close()


def test_switching_index_rebuilds_and_shows_in_the_log(ctx, tmp_path):
    from app.framelog import CONTRACT_COLUMNS, read_log
    from app.spatial import INDEX_NAMES

    v, scene = _viewer(ctx)
    log = tmp_path / "switch.csv"
    v.start_recording(log)
    _render(v, scene, frames=2)
    v.cycle_index(1)
    _render(v, scene, frames=2)
    if v.config.is_tree():
        v.toggle_leafy()
        v.step_split_threshold(+1)
        _render(v, scene, frames=1)
    v.close()
    data = read_log(log)
    for col in CONTRACT_COLUMNS:
        assert col in data
    assert len(data["frame"]) >= 4
    assert data["index"][0] == "brute"
    if len(INDEX_NAMES) > 1:
        assert data["index"][-1] != "brute"
    assert any("rebuilt" in text for _, text in v.notices)


def _demo(*args, env=None, timeout=300):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "app", "demo", *args], cwd=ROOT, env=e,
                          capture_output=True, text=True, timeout=timeout)


def test_headless_command_writes_log_and_screenshot(ctx, tmp_path):  # ctx: skips without EGL
    from PIL import Image

    from app.framelog import CONTRACT_COLUMNS, read_log

    log, png = tmp_path / "run.csv", tmp_path / "shot.png"
    r = _demo("--headless", "--scene", "demo", "--objects", "800", "--frames", "6",
              "--record", str(log), "--screenshot", str(png), "--size", "320x180",
              "--boxes", "depth")
    assert r.returncode == 0, r.stderr
    data = read_log(log)
    assert list(data)[: len(CONTRACT_COLUMNS)] == list(CONTRACT_COLUMNS)
    assert list(data["frame"]) == list(range(6))
    assert (data["objects"] == 800).all()
    img = np.asarray(Image.open(png))
    assert img.shape[:2] == (180, 320) and img.std() > 1.0
    assert "replacing" not in r.stderr
    r = _demo("--headless", "--scene", "demo", "--objects", "800", "--frames", "3",
              "--record", str(log), "--size", "64x64", "--no-hud")
    assert r.returncode == 0 and f"replacing the existing log {log}" in r.stderr
    assert list(read_log(log)["frame"]) == [0, 1, 2]


def test_bad_scene_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[scene]\nname = "bad"\n[[group]]\ncount = "many"\n')
    r = _demo("--headless", "--scene", str(bad), "--frames", "1", "--size", "64x64")
    assert r.returncode != 0
    assert "bad.toml" in r.stderr
    assert "Traceback" not in r.stderr
    r = _demo("--headless", "--scene", "no-such-scene", "--frames", "1")
    assert r.returncode != 0 and "no-such-scene" in r.stderr and "Traceback" not in r.stderr


def test_unknown_index_is_a_clear_error():
    r = _demo("--headless", "--index", "nope", "--frames", "1", "--size", "64x64")
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr


def test_window_without_display_says_so():
    env = {"DISPLAY": "", "WAYLAND_DISPLAY": ""}
    r = _demo("--objects", "10", env=env)
    assert r.returncode == 2
    lines = [s for s in r.stderr.splitlines() if s.strip()]
    assert len(lines) == 1 and "--headless" in lines[0] and "xvfb-run" in lines[0]


@pytest.mark.parametrize("args,named", [
    (["--record", "/sys/missing/run.csv"], "missing"),  # a folder that cannot be created
    (["--record", "{tmp}"], "folder"),
    (["--screenshot", "{tmp}/shot.jpeg"], ".png"),
    (["--dt", "-1"], "--dt"),
    (["--orbit-out", "-2"], "--orbit-out"),
])
def test_bad_run_arguments_are_one_line_before_any_frame(tmp_path, args, named):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    r = _demo("--headless", "--objects", "10", "--frames", "1", "--size", "64x64", *args)
    assert r.returncode == 2, r.stderr
    lines = [s for s in r.stderr.splitlines() if s.strip()]
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "missing").exists()


def test_hud_draws_each_glyph_of_the_atlas_in_its_cell(ctx):
    """The character-grid shader puts glyph k of line j exactly where a per-glyph quad would:
    at 1:1 the white-on-black image equals the atlas cells, pixel for pixel; the background
    of a block covers the text plus its padding and nothing else."""
    from app.render.hud import _COLS, HudRenderer

    w, h = 160, 80
    tex = ctx.texture((w, h), 4)
    fbo = ctx.framebuffer(color_attachments=[tex])
    hud = HudRenderer(ctx, 14)
    atlas = np.frombuffer(hud.tex.read(alignment=1), np.uint8).reshape(hud.atlas_h, hud.atlas_w)
    lines = ["Ag~", "", " 7#"]
    fbo.use()
    ctx.viewport = (0, 0, w, h)
    fbo.clear(0.0, 0.0, 0.0, 1.0)
    hud.text(10, 6, lines, color=(1, 1, 1, 1), background=False)
    hud.draw((w, h))
    img = np.frombuffer(fbo.read(components=1, alignment=1), np.uint8).reshape(h, w)[::-1]
    want = np.zeros((h, w), np.uint8)
    for j, line in enumerate(lines):
        for i, ch in enumerate(line):
            if ch == " ":
                continue
            g = ord(ch) - 32
            cell = atlas[(g // _COLS) * hud.ch:(g // _COLS + 1) * hud.ch,
                         (g % _COLS) * hud.cw:(g % _COLS + 1) * hud.cw]
            want[6 + j * hud.ch:6 + (j + 1) * hud.ch, 10 + i * hud.cw:10 + (i + 1) * hud.cw] = cell
    assert want.max() == 255
    assert np.abs(img.astype(int) - want.astype(int)).max() <= 1
    # A panel-backed block: grey background exactly over the padded text rectangle.
    fbo.clear(0.0, 0.0, 0.0, 1.0)
    tw, th = hud.text(20, 10, ["  "], color=(1, 1, 1, 1))
    hud.draw((w, h))
    img = np.frombuffer(fbo.read(components=1, alignment=1), np.uint8).reshape(h, w)[::-1]
    assert img.max() == 0  # spaces only: black at alpha 0.78 over black stays black
    fbo.clear(1.0, 1.0, 1.0, 1.0)
    hud.text(20, 10, ["  "], color=(1, 1, 1, 1))
    hud.draw((w, h))
    img = np.frombuffer(fbo.read(components=1, alignment=1), np.uint8).reshape(h, w)[::-1]
    dark = np.argwhere(img < 200)
    assert dark[:, 0].min() == 10 - 2 and dark[:, 0].max() == 10 + th + 2 - 1
    assert dark[:, 1].min() == 20 - 4 and dark[:, 1].max() == 20 + tw + 4 - 1
    hud.release()
    fbo.release()
    tex.release()


def test_requested_screenshot_is_the_next_frame_without_notices(ctx, tmp_path):
    """A screenshot holds the frame, not the transient notices (an earlier "screenshot ..."
    line used to show up in the next one); the notices still reach the screen, and a request
    still pending when the viewer closes is written then."""
    from PIL import Image

    # 960x540: at 480x270 the wrapped HUD reaches the bottom rows, and its timings change
    # from frame to frame, so the notice's rows would differ for a reason of their own.
    v, scene = _viewer(ctx, size=(960, 540))
    v.toggles.hud = True
    v.toggles.paused = True  # the same scene in every frame
    _render(v, scene, frames=3)  # past the first frames (compiles: a stall line)
    plain = _render(v, scene, frames=1)  # the camera the next frame has too
    v.notice("a notice that must not be in the picture")
    path = v.request_screenshot(tmp_path / "shot.png")
    assert not path.exists()  # taken at the end of the next frame
    shown = _render(v, scene, frames=1)
    saved = np.asarray(Image.open(path).convert("RGB"))
    bottom = slice(shown.shape[0] - 20, shown.shape[0])  # the notice's rows; the HUD is above
    assert not np.array_equal(shown[bottom], plain[bottom])  # the notice is on screen
    np.testing.assert_array_equal(saved[bottom], plain[bottom])  # and not in the picture
    later = v.request_screenshot(tmp_path / "at-close.png")
    v.close()
    assert later.exists() and later.stat().st_size > 0


@settings(deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 7.25]), max_size=70), st.integers(0, 3))
def test_the_occluders_sort_is_numpys_stable_argsort(keys, extra):
    """The upload's own merge sort orders the first n keys exactly as numpy's stable argsort
    (ties by position), whatever follows them in the buffer."""
    from app.render.objects import _stable_argsort

    k = np.array(keys + [-1.0] * extra, np.float64)
    n = len(keys)
    assert np.array_equal(_stable_argsort(k, n), np.argsort(k[:n], kind="stable"))


def test_upload_writes_the_visible_rows_grouped_by_mesh_occluders_nearest_first(ctx):
    """The instance buffer holds exactly the visible objects' 7 floats, each mesh kind's in
    one slice: its large objects (occluders) nearest to the eye first, then the rest in
    ascending id order; without an eye, ascending id order only."""
    from app.render.meshes import load_mesh
    from app.render.objects import STRIDE, ObjectRenderer

    rng = np.random.default_rng(5)
    n = 400
    centers = rng.uniform(-50, 50, (n, 3))
    radii = np.ones(n)
    radii[rng.choice(n, 12, replace=False)] = 10.0
    colors = rng.random((n, 3)).astype(np.float32)
    mesh = rng.integers(0, 2, n).astype(np.int8)  # kinds interleaved in id order
    r = ObjectRenderer(ctx, [load_mesh("cube"), load_mesh("icosphere")])
    r.set_objects(centers, radii, colors, mesh)
    eye = np.array([5.0, 0.0, -3.0])
    for visible, at in ((rng.choice(n, 300), eye), (None, eye), (rng.choice(n, 250), None)):
        total = r.upload(visible, at)
        ids = np.arange(n) if visible is None else np.unique(visible)
        parts = []
        for k in (0, 1):
            sel = ids[mesh[ids] == k]
            if at is not None:
                big = sel[radii[sel] > 5]
                d = ((centers[big] - at) ** 2).sum(axis=1)
                sel = np.concatenate([big[np.argsort(d, kind="stable")], sel[radii[sel] <= 5]])
            parts.append(sel)
        order = np.concatenate(parts)
        want = np.concatenate([centers[order], radii[order, None], colors[order]], axis=1)
        got = np.frombuffer(r.inst.read(size=total * STRIDE * 4), np.float32)
        assert total == order.shape[0]
        np.testing.assert_array_equal(got.reshape(-1, STRIDE), want.astype(np.float32))
        assert r.counts == [p.shape[0] for p in parts] and r.starts == [0, parts[0].shape[0]]
