"""Z-pyramid occlusion: the reduction rule, the projected-rectangle test, the sphere bounds.

CPU tests first (no OpenGL); the GPU reduction and the id buffer are in the ``gl`` tests at
the end (skipped when no EGL context can be made).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.culling.frustum import look_at, perspective
from app.geom.zpyramid import (
    DEPTH_EPS,
    ZPyramid,
    box_occluded,
    level_sizes,
    reduce_levels,
    reduce_stored_levels,
    sphere_ndc_bounds,
    sphere_occluded,
    spheres_occluded,
)

ODD_SIZES = [(7, 5), (13, 1), (1, 9), (16, 9), (33, 17), (5, 31), (2, 3), (1, 1), (64, 36)]


def naive_level(depth: np.ndarray, level: int, w: int, h: int) -> np.ndarray:
    """Level texel (i, j) = max over the level-0 pixels it covers (the documented rule)."""
    H, W = depth.shape
    out = np.empty((h, w), np.float32)
    s = 2 ** level
    for j in range(h):
        y0, y1 = j * s, (H if j == h - 1 else (j + 1) * s)
        for i in range(w):
            x0, x1 = i * s, (W if i == w - 1 else (i + 1) * s)
            out[j, i] = depth[y0:y1, x0:x1].max()
    return out


@pytest.mark.parametrize("size", ODD_SIZES)
def test_reduction_matches_coverage_rule(size):
    w, h = size
    rng = np.random.default_rng(w * 100 + h)
    depth = rng.random((h, w)).astype(np.float32)
    levels = reduce_levels(depth)
    sizes = level_sizes(w, h)
    assert [(lv.shape[1], lv.shape[0]) for lv in levels] == sizes
    assert sizes[-1] == (1, 1)
    for L, lv in enumerate(levels):
        np.testing.assert_array_equal(lv, naive_level(depth, L, *sizes[L]))
    assert levels[-1][0, 0] == depth.max()


@pytest.mark.parametrize("size", ODD_SIZES)
@pytest.mark.parametrize("first", [0, 1, 3])
def test_compiled_top_of_chain_equals_reference(size, first):
    """The CPU finish of the chain (from one read-back level up) equals reduce_levels."""
    w, h = size
    depth = np.random.default_rng(w * 31 + h).random((h, w)).astype(np.float32)
    ref = ZPyramid.from_depth(np.eye(4), depth, first_level=first)
    first = int(np.flatnonzero(ref.offsets >= 0)[0])
    data = np.full_like(ref.data, -1.0)
    n0 = ref.level(first).size
    data[:n0] = ref.data[:n0]
    reduce_stored_levels(data, ref.offsets, ref.widths, ref.heights, first)
    np.testing.assert_array_equal(data, ref.data)


def test_from_depth_skips_fine_levels():
    depth = np.random.default_rng(0).random((9, 17)).astype(np.float32)
    pyr = ZPyramid.from_depth(np.eye(4), depth, first_level=2)
    assert pyr.offsets[0] == -1 and pyr.offsets[1] == -1 and pyr.offsets[2] == 0
    assert pyr.size == (17, 9)
    np.testing.assert_array_equal(pyr.level(2), reduce_levels(depth)[2])
    assert pyr.level(0) is None


# ---------------------------------------------------------------- hand-made scenes

W, H = 64, 48
NEAR, FAR = 0.5, 100.0
PROJ = perspective(60.0, W / H, NEAR, FAR)
VIEW = look_at(np.zeros(3), np.array([0.0, 0.0, -1.0]))
VP = PROJ @ VIEW


def window_depth(eye_dist: float) -> float:
    clip = PROJ @ np.array([0.0, 0.0, -eye_dist, 1.0])
    return 0.5 * clip[2] / clip[3] + 0.5


def wall_depth(x0: float, x1: float, y0: float, y1: float, dist: float) -> np.ndarray:
    """Depth image of a camera-facing rectangle [x0,x1]x[y0,y1] at z = -dist (1.0 elsewhere).

    A pixel is covered when its centre's ray hits the rectangle (as a rasterizer decides).
    """
    px = (np.arange(W) + 0.5) / W * 2 - 1
    py = (np.arange(H) + 0.5) / H * 2 - 1
    inv = np.linalg.inv(PROJ)
    # Ray directions through pixel centres, in eye space, scaled to z = -dist.
    gx, gy = np.meshgrid(px, py)
    pts = np.stack([gx, gy, np.ones_like(gx), np.ones_like(gx)], axis=-1) @ inv.T
    d = pts[..., :3] / pts[..., 3:4]
    d = d / -d[..., 2:3] * dist
    inside = (d[..., 0] >= x0) & (d[..., 0] <= x1) & (d[..., 1] >= y0) & (d[..., 1] <= y1)
    img = np.ones((H, W), np.float32)
    img[inside] = window_depth(dist)
    return img


WALL = ZPyramid.from_depth(VP, wall_depth(-5.0, 2.0, -4.0, 4.0, 10.0))
WALL_COARSE = ZPyramid.from_depth(VP, wall_depth(-5.0, 2.0, -4.0, 4.0, 10.0), first_level=2)


def box(lo, hi, pyr=WALL):
    return box_occluded(np.asarray(lo, float), np.asarray(hi, float), *pyr.arrays())


def sph(c, r, pyr=WALL):
    return sphere_occluded(float(c[0]), float(c[1]), float(c[2]), float(r), *pyr.arrays())


@pytest.mark.parametrize("pyr", [WALL, WALL_COARSE], ids=["full", "coarse"])
def test_box_behind_wall_is_occluded(pyr):
    assert box([-1, -1, -20], [1, 1, -15], pyr)
    assert box([-3, -2, -12], [0, 2, -11], pyr)


@pytest.mark.parametrize("pyr", [WALL, WALL_COARSE], ids=["full", "coarse"])
def test_box_beside_wall_is_kept(pyr):
    assert not box([3, -1, -13], [5, 1, -12], pyr)  # to the right of the wall's edge x = 2
    assert not box([1, -1, -16], [4, 1, -15], pyr)  # straddles the edge


def test_box_in_front_of_wall_is_kept():
    assert not box([-1, -1, -8], [1, 1, -6])
    # Touching the wall's depth is not "behind" it.
    assert not box([-1, -1, -10], [1, 1, -9.99])


def test_box_crossing_near_plane_or_behind_eye_is_kept():
    assert not box([-1, -1, -20], [1, 1, -0.1])  # crosses the near plane (0.5)
    assert not box([-1, -1, -20], [1, 1, 5.0])  # reaches behind the eye
    assert not box([-1, -1, 1], [1, 1, 3])  # wholly behind the eye


def test_box_off_screen_is_kept():
    assert not box([100, -1, -20], [101, 1, -19])


def test_sphere_cases():
    assert sph([-1, 0, -20], 2.0)  # behind the wall
    assert not sph([4, 0, -12], 1.0)  # beside it
    assert not sph([0, 0, -7], 1.0)  # in front
    assert not sph([0, 0, -20], 19.7)  # crosses the near plane
    assert not sph([0, 0, 2], 1.0)  # behind the eye
    # An empty depth buffer (far plane everywhere) hides nothing.
    empty = ZPyramid.from_depth(VP, np.ones((H, W), np.float32))
    assert not sph([0, 0, -99], 0.5, empty)


def test_sphere_rectangle_is_tighter_than_its_box():
    # Sphere r = 6 at distance 17: its projected ellipse stays inside the wall's projection, the
    # bounding box's near corners do not.
    wall = ZPyramid.from_depth(VP, wall_depth(-5.0, 5.0, -5.0, 5.0, 10.0))
    c, r = np.array([0.0, 0.0, -17.0]), 6.0
    assert sph(c, r, wall)
    assert not box(c - r, c + r, wall)


def test_no_occluder_never_occludes():
    from app.geom.zpyramid import NO_OCCLUDER
    assert not sphere_occluded(0.0, 0.0, -10.0, 1.0, *NO_OCCLUDER)
    assert not box_occluded(np.array([-1.0, -1, -11]), np.array([1.0, 1, -10]),
                            *NO_OCCLUDER)


# ---------------------------------------------------------------- sphere projection

def sphere_samples(c, r, n=4000, seed=0):
    v = np.random.default_rng(seed).normal(size=(n, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return c + r * v


def project(vp, pts):
    h = np.hstack([pts, np.ones((len(pts), 1))]) @ vp.T
    return h[:, :3] / h[:, 3:4]


@pytest.mark.parametrize("seed", range(12))
def test_sphere_bounds_are_exact(seed):
    rng = np.random.default_rng(seed)
    eye = rng.uniform(-20, 20, 3)
    target = eye + rng.normal(size=3)
    vp = perspective(rng.uniform(30, 90), rng.uniform(0.5, 2.5), 0.1, 500.0) @ look_at(eye, target)
    fwd = (target - eye) / np.linalg.norm(target - eye)
    c = eye + fwd * rng.uniform(3, 60) + rng.normal(size=3) * 3
    r = rng.uniform(0.05, 2.5)
    ok, xmin, xmax, ymin, ymax, zmin = sphere_ndc_bounds(*c, r, vp)
    depth_along = (c - eye) @ fwd
    assert ok == (depth_along - r > 0.1)  # refused exactly when it reaches the near plane
    if not ok:
        return
    ndc = project(vp, sphere_samples(c, r, 20000, seed))
    # Bounds contain every sample and are tight (samples reach close to them).
    tol = 1e-9
    assert ndc[:, 0].min() >= xmin - tol and ndc[:, 0].max() <= xmax + tol
    assert ndc[:, 1].min() >= ymin - tol and ndc[:, 1].max() <= ymax + tol
    assert ndc[:, 2].min() >= zmin - tol
    span = max(xmax - xmin, ymax - ymin)
    assert ndc[:, 0].min() - xmin < 0.05 * span and xmax - ndc[:, 0].max() < 0.05 * span
    assert ndc[:, 1].min() - ymin < 0.05 * span and ymax - ndc[:, 1].max() < 0.05 * span


def test_sphere_bounds_refuse_near_plane():
    ok = sphere_ndc_bounds(0.0, 0.0, -1.0, 0.6, VP)[0]
    assert not ok


@pytest.mark.parametrize("seed", range(6))
def test_occluded_spheres_have_no_visible_sample(seed):
    """Property: a sphere said occluded has no surface point in front of the depth image."""
    rng = np.random.default_rng(100 + seed)
    # Blocky random depth image: a few camera-facing walls at random distances.
    depth = np.ones((H, W), np.float32)
    for _ in range(6):
        x0, y0 = rng.uniform(-8, 6, 2)
        d = rng.uniform(3, 30)
        img = wall_depth(x0, x0 + rng.uniform(1, 10), y0, y0 + rng.uniform(1, 10), d)
        depth = np.minimum(depth, img)
    for first in (0, 1, 3):
        pyr = ZPyramid.from_depth(VP, depth, first_level=first)
        c = np.column_stack([rng.uniform(-10, 10, 300), rng.uniform(-8, 8, 300),
                             rng.uniform(-60, -2, 300)])
        r = rng.uniform(0.1, 3.0, 300)
        occ = spheres_occluded(c, r, *pyr.arrays())
        for i in np.flatnonzero(occ):
            ndc = project(VP, sphere_samples(c[i], r[i], 3000, i))
            px = np.floor((ndc[:, 0] * 0.5 + 0.5) * W).astype(int)
            py = np.floor((ndc[:, 1] * 0.5 + 0.5) * H).astype(int)
            on = (px >= 0) & (px < W) & (py >= 0) & (py < H)
            zw = ndc[on, 2] * 0.5 + 0.5
            assert (zw > depth[py[on], px[on]] - DEPTH_EPS).all(), (first, i)
        if first == 0:
            assert occ.sum() > 0  # the scene does occlude something


def test_coarse_pyramid_is_more_conservative():
    rng = np.random.default_rng(7)
    depth = np.minimum(wall_depth(-6, 3, -3, 5, 8.0), wall_depth(-2, 9, -6, 1, 15.0))
    full = ZPyramid.from_depth(VP, depth)
    c = np.column_stack([rng.uniform(-10, 10, 2000), rng.uniform(-8, 8, 2000),
                         rng.uniform(-60, -2, 2000)])
    r = rng.uniform(0.1, 3.0, 2000)
    occ_full = spheres_occluded(c, r, *full.arrays())
    assert occ_full.sum() > 100
    for first in (1, 2, 4):
        occ = spheres_occluded(c, r, *ZPyramid.from_depth(VP, depth, first).arrays())
        assert not (occ & ~occ_full).any()


# ---------------------------------------------------------------- GPU (EGL, llvmpipe)

@pytest.mark.gl
@pytest.mark.parametrize("size", [(33, 17), (7, 5), (64, 36), (1, 9), (13, 1), (100, 61)])
@pytest.mark.parametrize("first", [0, 2])
@pytest.mark.parametrize("cpu_top", [True, False], ids=["cpu-top", "gpu-all"])
def test_gpu_reduction_matches_numpy(ctx, size, first, cpu_top):
    """Levels the GPU makes, and the pyramid the CPU test gets (read back, and with
    ``cpu_top`` finished on the CPU), equal the numpy reference."""
    from app.render.depth_pyramid import DepthPyramid

    w, h = size
    depth = ctx.depth_texture(size)
    depth.write(np.random.default_rng(w * h).random((h, w)).astype(np.float32).tobytes())
    pyr = DepthPyramid(ctx, size, first_level=first, cpu_top=cpu_top)
    zp = pyr.build_now(depth, VP)
    got = pyr.read_all_levels(depth)
    ref = reduce_levels(got[0])  # level 0 as GL stores it (24-bit depth)
    assert len(got) == len(ref)
    for L in range(len(ref)):
        if got[L] is None:
            continue
        # Shader-sampled depth and glGetTexImage's conversion of 24-bit depth may differ by
        # one float32 ulp; the occlusion test's DEPTH_EPS is 16x that.
        np.testing.assert_allclose(got[L], ref[L], rtol=0, atol=1.2e-7)
    computed = [L for L in range(1, len(ref)) if got[L] is not None]
    assert computed == list(range(max(1, pyr.first_level), pyr.gpu_top + 1))
    for L in range(pyr.first_level, len(ref)):
        np.testing.assert_allclose(zp.level(L), ref[L], rtol=0, atol=1.2e-7)
    assert zp.offsets[: pyr.first_level].tolist() == [-1] * pyr.first_level
    np.testing.assert_array_equal(zp.viewproj, VP)
    pyr.release()
    depth.release()


@pytest.mark.gl
def test_pyramid_ring_returns_previous_frame(ctx):
    from app.render.depth_pyramid import DepthPyramid

    size = (16, 8)
    depth = ctx.depth_texture(size)
    pyr = DepthPyramid(ctx, size, first_level=0)
    assert pyr.previous() is None
    for k, value in enumerate((0.25, 0.5, 0.75)):
        depth.write(np.full((8, 16), value, np.float32).tobytes())
        pyr.build(depth, np.eye(4) * (k + 1))
        prev = pyr.previous(1)
        assert abs(float(prev.data.max()) - value) < 1e-6
        assert prev.viewproj[0, 0] == k + 1
        if k:
            older = pyr.previous(2)
            assert abs(float(older.data.max()) - (0.25, 0.5)[k - 1]) < 1e-6
    pyr.release()


@pytest.mark.gl
def test_id_buffer_reports_only_unhidden_objects(ctx):
    from app.render.id_buffer import IdBuffer
    from app.render.meshes import load_mesh

    ib = IdBuffer(ctx, (W, H), [load_mesh("cube")])
    centers = np.array([[0.0, 0, -10], [0.0, 0, -20], [6.0, 0, -15], [300.0, 0, -20]])
    radii = np.array([3.0, 1.0, 1.0, 1.0])
    ids = np.array([7, 8, 9, 10])
    assert ib.render(VP, ids, centers, radii).tolist() == [7, 9]  # 8 hidden, 10 off screen
    assert ib.render(VP, ids[1:], centers[1:], radii[1:]).tolist() == [8, 9]
    ib.release()


@pytest.mark.gl
@pytest.mark.parametrize("mode", ["two-pass", "previous"])
def test_end_to_end_small_scene(ctx, tmp_path, mode):
    """A small fig26-like block of random walkers, along a path that looks into it."""
    from app.scene import load_scene
    from app.viewer.occlusion_runs import run, summary

    src = (Path(__file__).resolve().parents[1] / "scenes" / "fig26.toml").read_text()
    path = tmp_path / "small.toml"
    path.write_text(src.replace("count = 1331", "count = 343"))
    scene = load_scene(path)
    png = tmp_path / "frame.png"
    rows = run(ctx, scene, index="brute", mode=mode, frames=24, size=(160, 90),
               ground_truth=True, screenshot=str(png))
    s = summary(rows)
    assert png.stat().st_size > 0
    assert s["true_visible"] > 5
    assert s["visible"] < s["working_set"]  # occlusion removed something
    for col in ("occlusion_ms", "occluded_nodes", "occluded_objects", "second_pass",
                "true_visible", "false_negatives"):
        assert col in rows[-1]
    assert rows[-1]["occluded_objects"] > 0
    if mode == "two-pass":
        assert all(r["false_negatives"] == 0 for r in rows)  # nothing ever pops
    else:
        assert s["fn_rate"] <= 0.05


@pytest.mark.parametrize("first", [0, 1, 2])
def test_rect_test_equals_exact_test_at_finest_stored_level(first):
    """With the hierarchical descent the answer is exactly: every texel of the finest stored
    level that the rectangle's pixels fall in is behind the depth."""
    from app.geom.zpyramid import rect_occluded

    rng = np.random.default_rng(11 + first)
    h, w = 37, 61
    depth = np.full((h, w), 0.9, np.float32)
    for _ in range(25):  # nearer blocks scattered over a far background
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        depth[y0:y0 + rng.integers(1, 20), x0:x0 + rng.integers(1, 30)] = rng.uniform(0.2, 0.8)
    pyr = ZPyramid.from_depth(np.eye(4), depth, first_level=first)
    fine = pyr.level(first)
    s = 2 ** first
    agree = occluded = 0
    for _ in range(3000):
        x = np.sort(rng.uniform(-1, 1, 2))
        y = np.sort(rng.uniform(-1, 1, 2)) * rng.uniform(0.05, 1.0)
        z = rng.uniform(0.3, 1.0)
        got = rect_occluded(x[0], y[0], x[1], y[1], z, *pyr.arrays()[1:])
        px = np.clip((x * 0.5 + 0.5) * w, 0, w - 1)
        py = np.clip((y * 0.5 + 0.5) * h, 0, h - 1)
        ix = np.minimum(np.floor(px / s).astype(int), fine.shape[1] - 1)
        iy = np.minimum(np.floor(py / s).astype(int), fine.shape[0] - 1)
        want = bool((fine[iy[0]:iy[1] + 1, ix[0]:ix[1] + 1] < z - DEPTH_EPS).all())
        agree += got == want
        occluded += want
    assert agree == 3000
    assert 100 < occluded < 2900


@pytest.mark.gl
def test_two_pass_image_equals_frustum_only_image(ctx, tmp_path):
    """Two-pass occlusion never changes a pixel: every frame, including those where the second
    draw adds objects that became visible, equals the frustum-only frame (this caught the
    second draw running without the depth test the pyramid passes had switched off)."""
    from app.culling.pipeline import IndexConfig
    from app.scene import load_scene
    from app.viewer.camera import CameraView
    from app.viewer.setup import occlusion_factory
    from app.viewer.state import Toggles
    from app.viewer.viewer import Viewer

    src = (Path(__file__).resolve().parents[1] / "scenes" / "fig26.toml").read_text()
    path = tmp_path / "small.toml"
    path.write_text(src.replace("count = 1331", "count = 343"))
    size = (192, 108)
    viewers = []
    for mode in ("off", "two-pass"):
        scene = load_scene(path)
        v = Viewer(ctx, scene, IndexConfig("octree", True, None), size, Toggles(hud=False),
                   occlusion_factory=occlusion_factory(False))
        v.set_occlusion(mode)
        viewers.append((v, scene))
    second = 0
    for i in range(40):
        images = []
        for v, scene in viewers:
            eye, tgt = scene.camera_at(i / 20)
            c = scene.camera
            st = v.frame(1 / 20, CameraView.make(eye, tgt, c.fov_deg, size[0] / size[1],
                                                 c.near, c.far))
            images.append(v.target.read_rgb())
        second += int(viewers[1][0].occlusion.log_values()["second_pass"])
        assert i < 2 or st.drawn < viewers[0][0].stats.drawn  # frame 0 had no pyramid
        np.testing.assert_array_equal(images[0], images[1], err_msg=f"frame {i}")
    assert second > 0  # the second draw ran
    for v, _ in viewers:
        v.close()


def _fig26_pair(ctx, tmp_path: Path, mode: str, ground_truth: tuple[bool, bool]):
    """Two viewers of a small fig26 (octree/leafy, paused, occlusion ``mode``, ground truth
    per viewer) and two cameras: ``at``, on the scene's path, and ``outside``, behind and
    above it looking at the same target."""
    from app.culling.pipeline import IndexConfig
    from app.scene import load_scene
    from app.viewer.camera import CameraView
    from app.viewer.setup import occlusion_factory
    from app.viewer.state import Toggles
    from app.viewer.viewer import Viewer

    src = (Path(__file__).resolve().parents[1] / "scenes" / "fig26.toml").read_text()
    path = tmp_path / "small.toml"
    path.write_text(src.replace("count = 1331", "count = 343"))
    size = (192, 108)
    viewers = []
    for truth in ground_truth:
        scene = load_scene(path)
        v = Viewer(ctx, scene, IndexConfig("octree", True, None), size,
                   Toggles(hud=False, paused=True), occlusion_factory=occlusion_factory(truth))
        v.set_occlusion(mode)
        viewers.append(v)
    c = scene.camera
    eye, tgt = scene.camera_at(0.5)
    at = CameraView.make(eye, tgt, c.fov_deg, size[0] / size[1], c.near, c.far)
    outside_eye = np.asarray(tgt) + (np.asarray(eye) - np.asarray(tgt)) * 3.0 + [0, 40, 0]
    outside = CameraView.make(outside_eye, tgt, c.fov_deg, size[0] / size[1], c.near,
                              c.far * 4)
    return viewers, at, outside


@pytest.mark.gl
@pytest.mark.parametrize("mode", ["two-pass", "previous"])
def test_frozen_camera_culls_with_its_own_pyramid(ctx, tmp_path, mode):
    """A culling camera frozen at C and seen from outside culls exactly as the live camera at
    C does: the pyramid is built from what C sees, not from the outside view's depth (with
    the view's depth it hid objects C sees and kept others)."""
    viewers, at, outside = _fig26_pair(ctx, tmp_path, mode, (False, False))
    viewers[1].toggle_freeze(at)  # the live camera's run, then the frozen one's
    occluded = 0
    for i in range(6):
        live, frozen = (v.frame(1 / 60, view) for v, view in zip(viewers, (at, outside),
                                                                 strict=True))
        got = [np.sort(v.pipeline.last_cull.result.visible) for v in viewers]
        np.testing.assert_array_equal(got[0], got[1], err_msg=f"frame {i}")
        assert live.drawn == frozen.drawn
        occluded += int(viewers[0].occlusion.log_values()["occluded_objects"])
    assert occluded > 0  # occlusion culled something: the pyramids were compared
    for v in viewers:
        v.close()


@pytest.mark.gl
def test_ground_truth_leaves_the_frame_s_node_outcomes_alone(ctx, tmp_path):
    """Ground truth takes every object in the view frustum from the contract's predicates, not
    from a query of the index under test (which it would then measure against itself): the
    node outcomes the frame's cull left (the box overlay, the frame dump) stay the frozen
    culling camera's, seen from outside, with ground truth on as with it off."""
    viewers, at, outside = _fig26_pair(ctx, tmp_path, "two-pass", (False, True))
    for v in viewers:
        v.toggle_freeze(at)
    for i in range(4):
        for v in viewers:
            v.frame(1 / 60, outside)
        plain, measured = (v.pipeline.index.node_outcomes() for v in viewers)
        np.testing.assert_array_equal(plain, measured, err_msg=f"frame {i}")
    assert int(viewers[1].occlusion.log_values()["true_visible"]) > 0  # it did measure
    for v in viewers:
        v.close()
