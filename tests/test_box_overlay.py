"""The node-box overlay: which boxes are worth drawing (in view, big enough, the largest
within a budget) against a numpy oracle, the budget's rule, and the instanced draw itself on
a headless EGL context (one unit cube, per-instance lo/hi/colour)."""

from __future__ import annotations

import numpy as np
import pytest

from app.render.boxes import BoxBudget, pack_boxes_in_view
from app.viewer.camera import CameraView

H = 180


def _view() -> CameraView:
    return CameraView.make(np.array([0.0, 0.0, 0.0]), np.array([0.0, 0.0, -1.0]), 60.0,
                           16 / 9, 0.5, 500.0)


def _oracle(lo, hi, view, min_px):
    """Boxes with a corner-based test: some point of the box inside all six planes is what
    box_vs_frustum6's positive vertex finds; size = largest edge * px/unit / distance."""
    keep = []
    ppu = view.proj[1, 1] * H / 2
    for i in range(lo.shape[0]):
        outside = False
        for a, b, c, d in view.planes:
            p = np.where(np.array([a, b, c]) >= 0, hi[i], lo[i])
            if a * p[0] + b * p[1] + c * p[2] + d < 0:
                outside = True
        dist = np.linalg.norm(np.maximum(np.maximum(lo[i] - view.eye, 0), view.eye - hi[i]))
        big = dist == 0 or (hi[i] - lo[i]).max() * ppu >= min_px * dist
        if not outside and big:
            keep.append(i)
    return np.array(keep, int)


@pytest.mark.parametrize("seed", range(4))
def test_boxes_in_view_equal_the_oracle(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    lo = rng.uniform(-300, 300, (n, 3))
    hi = lo + rng.exponential(3.0, (n, 3))
    cols = rng.uniform(0, 1, (n, 4)).astype(np.float32)
    view = _view()
    want = _oracle(lo, hi, view, 3.0)
    rows = pack_boxes_in_view(lo, hi, cols, view, H, 3.0)
    assert 0 < len(want) < n
    np.testing.assert_array_equal(rows[:, :3], lo[want].astype(np.float32))
    np.testing.assert_array_equal(rows[:, 3:6], hi[want].astype(np.float32))
    np.testing.assert_array_equal(rows[:, 6:], cols[want])
    # a budget keeps that many, the largest on screen, in their order
    k = len(want) // 3
    some = pack_boxes_in_view(lo, hi, cols, view, H, 3.0, budget=k)
    assert some.shape[0] == k
    size = (hi[want] - lo[want]).max(axis=1) / np.maximum(
        np.linalg.norm(np.maximum(np.maximum(lo[want], 0), -hi[want]), axis=1), 1e-300)
    inside = (lo[want] <= 0).all(axis=1) & (hi[want] >= 0).all(axis=1)
    size[inside] = np.inf
    top = np.sort(np.argsort(-size, kind="stable")[:k])
    assert set(map(tuple, some[:, :3].tolist())) == set(map(tuple, rows[top, :3].tolist()))


def test_budget_shrinks_while_boxes_cost_more_than_the_scene_and_grows_back():
    b = BoxBudget()
    b.adjust(boxes_ms=30.0, scene_ms=10.0, drawn=10_000, wanted=10_000)
    assert b.count == 7000
    b.adjust(30.0, 10.0, 7000, 10_000)
    assert b.count == 4900
    b.adjust(7.0, 10.0, 4900, 10_000)  # between half and all of the scene: stays
    assert b.count == 4900
    b.adjust(2.0, 10.0, 4900, 10_000)
    assert b.count == 6125
    for _ in range(4):
        b.adjust(2.0, 10.0, b.count or 10_000, 10_000)
    assert b.count is None  # every box again
    b.adjust(30.0, 10.0, 100, 100)  # a few boxes are always drawn
    assert b.count is None


@pytest.mark.gl
def test_instanced_boxes_draw_their_edges_and_nothing_behind_the_eye(ctx):
    from app.render.boxes import BoxOverlay

    w, h = 320, H
    tex = ctx.texture((w, h), 4)
    fbo = ctx.framebuffer(color_attachments=[tex])
    boxes = BoxOverlay(ctx)
    view = _view()

    def draw(lo, hi):
        fbo.use()
        ctx.viewport = (0, 0, w, h)
        fbo.clear(0.0, 0.0, 0.0, 1.0)
        cols = np.array([[1.0, 1.0, 1.0, 1.0]] * len(lo), np.float32)
        rows = pack_boxes_in_view(np.array(lo, float), np.array(hi, float), cols, view, h, 3.0)
        n = boxes.set_rows(rows)
        boxes.draw(view.viewproj)
        img = np.frombuffer(fbo.read(components=1, alignment=1), np.uint8).reshape(h, w)
        return n, img[::-1]

    # a 20-unit cube 100 units ahead, and one behind the eye (not drawn at all)
    n, img = draw([[-10, -10, -110], [-10, -10, 90]], [[10, 10, -90], [10, 10, 110]])
    assert n == 1
    lit = np.argwhere(img > 0)
    # the front face's square: x from the projection of +-10 at depth 90
    ppu = view.proj[1, 1] * h / 2
    half = 10 * ppu / 90
    assert abs(lit[:, 1].min() - (w / 2 - half)) <= 1.5
    assert abs(lit[:, 1].max() - (w / 2 + half)) <= 1.5
    assert img[h // 2, w // 2] == 0  # lines only: the middle stays dark
    n, img = draw([[-10, -10, 90]], [[10, 10, 110]])
    assert n == 0 and img.max() == 0
    boxes.vao.release()
    fbo.release()
    tex.release()
