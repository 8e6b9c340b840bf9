"""Scene files, distributions, motion and validation (app.scene)."""

from __future__ import annotations

import numpy as np
import pytest

from app.scene import SceneError, list_scenes, load_scene
from app.scene import distributions as dist

SHIPPED = ("demo", "uniform", "clustered", "lissajous", "sphere", "fig26", "city", "meadow")
SMALL = 300  # objects= override for fast tests of big scenes

MINIMAL = """
[scene]
name = "t"
[camera]
position = [0.0, 0.0, 10.0]
target = [0.0, 0.0, 0.0]
[[group]]
count = 50
distribution = "uniform"
center = [0.0, 0.0, 0.0]
size = 10.0
radius = [0.1, 0.5]
motion = "random_walk"
speed = 2.0
"""


def write(tmp_path, text: str, name: str = "s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_every_shipped_scene_is_listed():
    assert set(SHIPPED) <= set(list_scenes())


@pytest.mark.parametrize("name", list_scenes())
def test_scene_loads_with_consistent_arrays(name):
    s = load_scene(name, objects=None if name != "meadow" else 2000)
    o = s.objects
    n = len(o)
    assert n > 0
    assert np.array_equal(o.ids, np.arange(n))
    assert o.centers.shape == (n, 3) and o.centers.dtype == np.float64
    assert o.radii.shape == (n,) and np.all(o.radii >= 0)
    assert o.view_distances.shape == (n,) and np.all(o.view_distances > 0)
    assert o.colors.shape == (n, 3) and o.colors.dtype == np.float32
    assert o.colors.min() >= 0 and o.colors.max() <= 1
    assert o.mesh.dtype == np.int8 and o.mesh.max() < len(s.meshes)
    assert o.static.dtype == bool and o.group.dtype == np.int16
    assert np.all(np.isfinite(o.centers))
    assert np.all(o.centers - o.radii[:, None] >= s.world_lo - 1e-9)
    assert np.all(o.centers + o.radii[:, None] <= s.world_hi + 1e-9)
    assert s.duration > 0 and s.camera.near < s.camera.far
    eye, target = s.camera_at(0.0)
    assert eye.shape == (3,) and target.shape == (3,)
    assert isinstance(s.default_index, str) and isinstance(s.default_index_options, dict)


@pytest.mark.parametrize(
    ("name", "count"),
    [("demo", 24120), ("fig26", 1331), ("uniform", 4000), ("clustered", 4000),
     ("lissajous", 4000), ("sphere", 4000)],
)
def test_shipped_counts(name, count):
    assert len(load_scene(name).objects) == count


def test_meadow_is_a_million_with_view_distances():
    s = load_scene("meadow")
    assert len(s.objects) == 1_000_000
    assert s.use_view_distance
    assert np.all(np.isfinite(s.objects.view_distances))
    moved = s.step(1 / 60)
    assert 0 < len(moved) < 50_000  # only the small moving fraction


def test_city_has_static_buildings_and_moving_cars():
    s = load_scene("city")
    o = s.objects
    big = o.radii > 10
    assert big.sum() >= 576 and np.all(o.static[big])
    moved = s.step(0.1)
    assert set(moved.tolist()) == set(np.flatnonzero(~o.static).tolist())
    assert not np.any(big[moved])


def test_fig26_is_an_11_cube_grid():
    s = load_scene("fig26")
    for axis in range(3):
        assert len(np.unique(np.round(s.objects.centers[:, axis], 6))) == 11


@pytest.mark.parametrize("name", list_scenes())
def test_step_moves_only_movers_and_keeps_them_bounded(name):
    s = load_scene(name, objects=SMALL if name != "city" else None)
    o = s.objects
    before = o.centers.copy()
    moved_all = set()
    for _ in range(60):
        moved = s.step(0.2)  # long frames: 12 s of motion
        assert moved.dtype == np.int64
        moved_all |= set(moved.tolist())
    changed = np.flatnonzero(np.any(o.centers != before, axis=1))
    assert set(changed.tolist()) <= moved_all
    assert not o.static[list(moved_all)].any() if moved_all else True
    assert np.all(o.centers - o.radii[:, None] >= s.extent_lo - 1e-6)
    assert np.all(o.centers + o.radii[:, None] <= s.extent_hi + 1e-6)
    for gi, g in enumerate(s.groups):
        rows = o.group == gi
        if g.motion in ("static", "orbit") or g.frame is not None:  # frame: local bounds
            continue
        c = o.centers[rows]
        assert np.all(c >= g.lo - 1e-6) and np.all(c <= g.hi + 1e-6), g.name


def test_step_zero_and_bad_dt():
    s = load_scene("demo", objects=100)
    before = s.objects.centers.copy()
    assert len(s.step(0.0)) == 0
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="dt"):
            s.step(bad)
    assert np.array_equal(before, s.objects.centers)


def test_objects_override_scales_groups_and_keeps_fixed():
    s = load_scene("city", objects=1600)
    assert len(s.objects) == 1600
    assert (s.objects.radii > 10).sum() == 600  # 576 buildings + 24 towers unchanged
    d = load_scene("demo", objects=301)
    assert len(d.objects) == 301
    counts = np.bincount(d.objects.group)
    assert abs(counts[0] - 5 * counts[1]) <= 5  # 20,000:4,000 proportions kept
    with pytest.raises(SceneError, match="objects override"):
        load_scene("city", objects=10)
    with pytest.raises(SceneError, match="objects override"):
        load_scene("demo", objects=-5)


def test_seed_makes_scenes_reproducible():
    a = load_scene("uniform", objects=200, seed=5)
    b = load_scene("uniform", objects=200, seed=5)
    c = load_scene("uniform", objects=200, seed=6)
    assert np.array_equal(a.objects.centers, b.objects.centers)
    assert not np.array_equal(a.objects.centers, c.objects.centers)
    np.testing.assert_array_equal(a.step(0.1), b.step(0.1))
    np.testing.assert_array_equal(a.objects.centers, b.objects.centers)


def test_camera_path_loops_and_hits_keys():
    s = load_scene("demo")
    e0, t0 = s.camera_at(0.0)
    e1, t1 = s.camera_at(s.duration)
    np.testing.assert_allclose(e0, e1)
    np.testing.assert_allclose(t0, t1)
    np.testing.assert_allclose(s.camera_at(10.0)[0], [78.7, 18.0, -216.1])
    a, _ = s.camera_at(4.99)
    b, _ = s.camera_at(5.01)
    assert np.linalg.norm(a - b) < 1.0  # continuous


# ---------------------------------------------------------------- distributions


@pytest.mark.parametrize("fn", [dist.uniform, dist.clustered, dist.lissajous, dist.sphere])
def test_paper_distributions_shape_and_bounds(fn):
    rng = np.random.default_rng(0)
    pts = fn(5000, 17.0, rng)
    assert pts.shape == (5000, 3) and pts.dtype == np.float64
    assert pts.min() >= 0 and pts.max() <= 17.0
    assert fn(0, 1.0, rng).shape == (0, 3)
    again = fn(5000, 17.0, np.random.default_rng(0))
    np.testing.assert_array_equal(pts, again)


def test_sphere_distribution_halves():
    pts = dist.sphere(4000, 2.0, np.random.default_rng(1)) - 1.0  # centered, R = 1
    r = np.linalg.norm(pts, axis=1)
    assert np.sum(r >= dist.SPHERE_SHELL - 1e-9) == 2000
    assert np.sum(r <= 1 / 3 + 1e-9) == 2000


def test_clustered_is_concentrated_near_seeds():
    pts = dist.clustered(3000, 1.0, np.random.default_rng(2))
    d = np.linalg.norm(pts[:, None, :] - dist.CLUSTER_SEEDS[None], axis=2).min(axis=1)
    assert np.all(d <= dist.CLUSTER_SPREAD * np.sqrt(3) + 1e-9)


def test_lissajous_points_lie_on_the_curve():
    params = np.linspace(0, dist.LISSAJOUS_T_MAX, 1000)
    pts = dist.lissajous_curve(params)
    assert pts.shape == (1000, 3) and pts.min() >= 0 and pts.max() <= 1


# ---------------------------------------------------------------- validation


def test_minimal_file_loads_from_path(tmp_path):
    s = load_scene(str(write(tmp_path, MINIMAL)))
    assert len(s.objects) == 50 and s.name == "t"
    assert s.default_index == "icoseptree"


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('count = 50', 'count = -3', "group[0].count"),
        ('count = 50', 'count = "many"', "group[0].count"),
        ('radius = [0.1, 0.5]', 'radius = [0.5, 0.1]', "group[0].radius"),
        ('radius = [0.1, 0.5]', 'radius = -1.0', "group[0].radius"),
        ('distribution = "uniform"', 'distribution = "spiral"', "group[0].distribution"),
        ('motion = "random_walk"', 'motion = "teleport"', "group[0].motion"),
        ('speed = 2.0', 'speed = 2.0\nmesh = "teapot"', "group[0].mesh"),
        ('speed = 2.0', 'speed = 2.0\nwobble = 1', "group[0].wobble"),
        ('name = "t"', 'name = "t"\nfoo = 1', "scene.foo"),
        ('name = "t"', 'default_index = "rtree"', "scene.default_index"),
        ('target = [0.0, 0.0, 0.0]', 'target = [0.0, 0.0]', "camera.target"),
        ('target = [0.0, 0.0, 0.0]', 'target = [0.0, 0.0, 0.0]\nnear = -1', "camera.near"),
        ('size = 10.0', 'size = [10.0, -1.0, 2.0]', "group[0].size"),
        ('speed = 2.0', 'speed = 2.0\ncolor = [2.0, 0.0, 0.0]', "group[0].color"),
        ('speed = 2.0', 'speed = 2.0\nview_distance = "sometimes"', "group[0].view_distance"),
        ('speed = 2.0', 'speed = 2.0\nview_distance_factor = -4', "group[0].view_distance_factor"),
        ('speed = 2.0', 'speed = 2.0\nmoving_fraction = 1.5', "group[0].moving_fraction"),
        ('motion = "random_walk"', 'motion = "lissajous_drift"', "group[0].motion"),
        ('speed = 2.0', 'speed = 2.0\ndims = [2, 2, 2]', "group[0].dims"),
        ('[camera]', '[camera]\n[[camera.path]]\nt = 3\nposition = [1.0, 1.0, 1.0]\n'
         'target = [0.0, 0.0, 0.0]\n[camera.more]', "camera"),
    ],
)
def test_malformed_files_name_file_and_field(tmp_path, old, new, field):
    assert old in MINIMAL
    p = write(tmp_path, MINIMAL.replace(old, new, 1))
    with pytest.raises(SceneError) as info:
        load_scene(str(p))
    msg = str(info.value)
    assert str(p) in msg and field in msg
    assert "expected" in msg or "missing" in msg


def test_keyframes_must_increase(tmp_path):
    text = MINIMAL.replace("[[group]]", """
[[camera.path]]
t = 0
position = [0.0, 0.0, 10.0]
target = [0.0, 0.0, 0.0]
[[camera.path]]
t = 0
position = [0.0, 5.0, 10.0]
target = [0.0, 0.0, 0.0]
[[group]]""", 1)
    with pytest.raises(SceneError, match=r"camera\.path\[1\]\.t"):
        load_scene(str(write(tmp_path, text)))


def test_missing_group_fields_and_bad_toml(tmp_path):
    with pytest.raises(SceneError, match=r"group\[0\]\.count.*missing"):
        load_scene(str(write(tmp_path, MINIMAL.replace("count = 50\n", ""))))
    with pytest.raises(SceneError, match="not valid TOML"):
        load_scene(str(write(tmp_path, "[scene\nname=")))
    with pytest.raises(SceneError, match="group"):
        load_scene(str(write(tmp_path, MINIMAL.split("[[group]]")[0])))
    with pytest.raises(SceneError, match="no such scene file"):
        load_scene(str(tmp_path / "nope.toml"))
    with pytest.raises(SceneError, match="no scene named"):
        load_scene("no_such_scene_name")


def test_scene_error_is_a_value_error():
    assert issubclass(SceneError, ValueError)


def test_flat_groups_move_in_their_plane():
    s = load_scene("meadow", objects=5000)
    y = s.objects.centers[:, 1].copy()
    for _ in range(20):
        s.step(0.5)
    np.testing.assert_array_equal(s.objects.centers[:, 1], y)


def test_zero_objects_and_fixed_only_scenes():
    s = load_scene("demo", objects=0)
    assert len(s.objects) == 0 and len(s.step(0.1)) == 0
    city = load_scene("city", objects=600)
    assert len(city.objects) == 600 and len(city.step(0.1)) == 0


def test_linear_wrap_advances_and_wraps_exactly():
    from app.scene.motion import LinearWrap

    rows = np.array([0, 2, 3], np.int64)
    centers = np.array([[9.5, 1, 1], [5.0, 5, 5], [0.2, 2, 2], [3.0, 3, 3]])
    m = LinearWrap(rows, np.array([2.0, 2.0, 2.0]), np.zeros(3), np.full(3, 10.0),
                   np.random.default_rng(0), axis=0)
    m.vel = np.array([2.0, -2.0, 2.0])
    m.step(centers, 0.5, None)
    # 9.5 + 1 wraps to 0.5; 0.2 - 1 wraps to 9.2; 3 + 1 = 4; row 1 and the other axes untouched
    np.testing.assert_allclose(centers[:, 0], [0.5, 5.0, 9.2, 4.0])
    np.testing.assert_array_equal(centers[:, 1:], [[1, 1], [5, 5], [2, 2], [3, 3]])
    m.step(centers, 100.0, None)  # a long step wraps many times and stays in the box
    assert np.all((centers[rows, 0] >= 0) & (centers[rows, 0] < 10))


def test_orbit_keeps_distance_to_axis_and_turns_by_the_angle():
    from app.scene.motion import Orbit

    rows = np.array([1], np.int64)
    centers = np.array([[0.0, 0, 0], [3.0, 7.0, 0.0]])
    Orbit(rows, np.pi / 2, np.array([1.0, 0.0, 0.0])).step(centers, 1.0, None)
    np.testing.assert_allclose(centers[1], [1.0, 7.0, 2.0], atol=1e-12)  # (2, 0) -> (0, 2)
    np.testing.assert_array_equal(centers[0], [0, 0, 0])


def test_random_walk_keeps_speeds_stays_in_its_box_and_plane():
    from app.scene.motion import RandomWalk

    rows = np.array([3, 0, 5, 1], np.int64)  # any rows, in any order
    lo, hi = np.array([0.0, 2.0, -1.0]), np.array([4.0, 2.0, 1.0])  # y is flat: a plane
    speeds = np.array([1.0, 3.0, 10.0, 0.5])
    centers = np.zeros((6, 3))
    centers[rows] = [[1, 2, 0], [3, 2, 0.5], [2, 2, -0.5], [0.1, 2, 0.9]]
    untouched = centers[[2, 4]].copy()
    m = RandomWalk(rows, speeds, lo, hi, np.random.default_rng(1))
    rng = np.random.default_rng(2)
    for dt in (0.1, 0.7, 3.0, 0.05):  # long steps bounce several times
        m.step(centers, dt, rng)
        np.testing.assert_allclose(np.linalg.norm(m.vel, axis=0), speeds, rtol=1e-12)
        assert np.all(centers[rows] >= lo) and np.all(centers[rows] <= hi)
        assert np.all(centers[rows, 1] == 2.0) and np.all(m.vel[1] == 0.0)
    np.testing.assert_array_equal(centers[[2, 4]], untouched)
