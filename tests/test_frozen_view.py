"""The frozen culling camera as the user sees it: seen from inside its volume (at its eye, or
flown a little way in) only its edges are drawn, no plane tints the screen; seen from outside
its planes and labels show; the HUD says it is frozen."""

from __future__ import annotations

import numpy as np
import pytest

from app.render.frustum_lines import seen_from_outside
from app.viewer.camera import CameraView

SIZE = (320, 180)


def _view(eye, target, far=400.0) -> CameraView:
    return CameraView.make(np.asarray(eye, float), np.asarray(target, float), 60.0,
                           SIZE[0] / SIZE[1], 0.5, far)


def test_seen_from_outside_only_away_from_the_volume():
    cam = _view([0, 0, 0], [0, 0, -1])
    assert not seen_from_outside(cam.viewproj, cam.eye, [0, 0, 0], 0.5)  # at the eye
    assert not seen_from_outside(cam.viewproj, cam.eye, [0, 0, -1.0], 0.5)  # near the eye
    assert not seen_from_outside(cam.viewproj, cam.eye, [0, 0, -50.0], 0.5)  # flown inside
    assert seen_from_outside(cam.viewproj, cam.eye, [0, 0, 30.0], 0.5)  # behind it
    assert seen_from_outside(cam.viewproj, cam.eye, [300, 50, -100.0], 0.5)  # beside it
    assert seen_from_outside(cam.viewproj, cam.eye, [0, 0, -500.0], 0.5)  # past the far plane


@pytest.mark.gl
def test_frozen_camera_does_not_tint_the_view_from_inside(ctx):
    from app.culling.pipeline import IndexConfig
    from app.scene import load_scene
    from app.viewer.state import Toggles
    from app.viewer.viewer import Viewer

    scene = load_scene("demo", objects=1500, seed=7)
    v = Viewer(ctx, scene, IndexConfig("brute", leafy=True), SIZE,
               Toggles(hud=False, paused=True))
    eye, target = scene.camera_at(20.0)
    at = _view(eye, target, scene.camera.far)
    fwd = (np.asarray(target) - np.asarray(eye)) / np.linalg.norm(np.asarray(target) - eye)
    ahead = _view(np.asarray(eye) + fwd * 5.0, np.asarray(target) + fwd * 5.0,
                  scene.camera.far)
    shots = {}
    for frozen in (False, True):
        if frozen:
            v.toggle_freeze(at)
        for name, view in (("at", at), ("ahead", ahead)):
            v.frame(1 / 60, view)
            shots[name, frozen] = v.target.read_rgb().astype(np.int16)
    for name in ("at", "ahead"):
        changed = np.abs(shots[name, True] - shots[name, False]).max(axis=2) > 3
        # only the frustum's edge lines may differ (a tinted plane changes most pixels)
        assert changed.mean() < 0.03, f"{name}: {changed.mean():.1%} of the pixels changed"
    line = v.overlays.frozen_line(v.toggles.occlusion)
    assert line.startswith("culling camera frozen (Z)")
    assert line in v.hud_lines(v.stats)
    # seen from outside, the filled planes are drawn
    v.frame(1 / 60, _view(np.asarray(eye) - fwd * 120 + [0, 60, 0], target, 2000.0))
    assert v.overlays.frozen_outside and v.overlays.frustum_lines.tri == 12
    assert any("seen from outside" in s for s in v.hud_lines(v.stats))
    v.close()


@pytest.mark.gl
@pytest.mark.parametrize("size", [(640, 360), (960, 540), (1920, 1080)])
def test_hud_reads_back_exactly_at_every_size(ctx, size):
    """At 640x360, 960x540 and 1920x1080 the HUD's text is drawn at 1:1 (font by height,
    long lines wrapped, never scaled): read back from the image it is exactly the lines the
    viewer meant, character for character, with the box legend and the frozen line."""
    from app.culling.pipeline import IndexConfig
    from app.render.hud import font_px, wrap_lines
    from app.scene import load_scene
    from app.viewer.state import Toggles
    from app.viewer.viewer import Viewer
    from tests.hud_reader import read_hud

    scene = load_scene("demo", objects=3000, seed=7)
    v = Viewer(ctx, scene, IndexConfig("octree", leafy=True), size,
               Toggles(hud=True, paused=True, boxes="outcome"), hud_px=font_px(size[1]))
    eye, target = scene.camera_at(20.0)
    view = CameraView.make(eye, target, 60.0, size[0] / size[1], 0.5, scene.camera.far)
    v.frame(1 / 60, view)
    v.toggle_freeze(view)
    v.notices.clear()
    v.frame(1 / 60, view)
    st = v.stats
    got = read_hud(v.target.read_rgb(), font_px(size[1]))
    cols = (size[0] - 16) // v.overlays.hud.cw
    want = wrap_lines(v.hud_lines(st), cols)
    # the first line's times are the previous frame's when drawn: compare from the second
    for k in range(1, len(want)):
        assert got[k].startswith(want[k]), f"line {k}: {got[k]!r} for {want[k]!r}"
    assert any(s.startswith("culling camera frozen (Z)") for s in got)
    assert max(len(s) for s in got) <= cols
    v.close()
