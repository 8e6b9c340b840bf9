"""Colliding balls (issue 14): the simulation step directly, against numpy oracles, and the
collision view through the real viewer (EGL headless, keys by name) and its command line.

The step (app/scene/collide.py): swept spheres in a separate collision index, one pair query,
the exact narrow phase, elastic impulses, walls, positional correction. What must hold after
every step: no pair of balls overlaps (beyond float rounding), none is outside the box,
kinetic energy and momentum are kept by elastic contacts; the broad phase's candidates are
exactly the pairs of touching swept spheres; the narrow phase's contacts are exactly the
pairs whose distance over the step comes within their radii.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.scene.collide import (
    CollisionWorld,
    narrow_phase,
    packing,
    random_velocities,
)
from app.spatial import INDEX_NAMES

ROOT = Path(__file__).resolve().parents[1]
#: Overlap left after a step, relative to the pair's summed radii: the correction pushes to
#: touching (plus 1e-9) and stops below 1e-6.
OVERLAP_TOL = 1e-6


# ----------------------------------------------------------------- oracles (numpy)

def overlaps(pos: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Relative overlap (r_a + r_b - |c_a - c_b|) / (r_a + r_b) of every pair, a < b."""
    d = np.sqrt(((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=2))
    rr = radii[:, None] + radii[None, :]
    iu = np.triu_indices(len(radii), 1)
    return ((rr - d) / rr)[iu]


def touching_pairs(centers: np.ndarray, radii: np.ndarray) -> set[tuple[int, int]]:
    """The contract's pairs: |c_a - c_b| <= r_a + r_b, a < b."""
    d = np.sqrt(((centers[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2))
    a, b = np.nonzero(np.triu(d <= radii[:, None] + radii[None, :], 1))
    return set(zip(a.tolist(), b.tolist(), strict=True))


def min_distance_over_step(d: np.ndarray, w: np.ndarray, dt: float) -> float:
    """min over t in [0, dt] of |d + w t| (closed form)."""
    ww = float(w @ w)
    t = 0.0 if ww == 0 else min(max(-float(d @ w) / ww, 0.0), dt)
    return float(np.linalg.norm(d + w * t))


def world(n: int, seed: int = 0, box: float = 30.0, r=(0.5, 1.5), speed=(2.0, 8.0),
          index: str = "chunks", **kw) -> CollisionWorld:
    rng = np.random.default_rng(seed)
    lo, hi = np.zeros(3), np.full(3, box)
    centers = rng.uniform(lo, hi, (n, 3))
    radii = rng.uniform(r[0], r[1], n)
    vel = random_velocities(n, speed[0], speed[1], lo, hi, rng)
    return CollisionWorld(centers, np.arange(n), radii, vel, lo, hi, index=index, **kw)


def momentum(w: CollisionWorld) -> np.ndarray:
    return (w.mass[:, None] * w.vel).sum(axis=0)


def inside_box(w: CollisionWorld) -> bool:
    return bool(((w.pos - w.radii[:, None] >= w.lo - 1e-9)
                 & (w.pos + w.radii[:, None] <= w.hi + 1e-9)).all())


# ----------------------------------------------------------------- the step

def test_many_steps_no_overlap_energy_kept_none_outside():
    """1,500 balls at 12 % packing, 120 steps of 1/60 s: after each, no pair overlaps and no
    ball is outside; energy is kept to rounding (elastic contacts, reflecting walls) and
    balls did collide."""
    w = world(1500, seed=1)
    assert w.start_overlap > 0 and "separated" in w.note
    assert overlaps(w.pos, w.radii).max() <= 1e-9
    e0 = w.energy()
    contacts = 0
    for _ in range(120):
        w.step(1 / 60)
        contacts += w.stats.contacts
        assert overlaps(w.pos, w.radii).max() <= OVERLAP_TOL
        assert inside_box(w)
    assert contacts > 500
    assert w.energy() == pytest.approx(e0, rel=1e-9)


def test_the_broad_phase_candidates_are_the_touching_swept_spheres():
    """After a step, the candidates are exactly the pairs of touching swept spheres (centre
    at the midpoint of the step, radius r + |v| dt / 2 + margin), by every collision index."""
    w = world(600, seed=2, margin=0.1)
    for name in INDEX_NAMES:
        w.set_index(name)
        w.step(1 / 30)  # the swept spheres it queried stay in swept_c, swept_r
        got = {tuple(p) for p in np.sort(w.candidate_pairs, axis=1).tolist()}
        assert got == touching_pairs(w.swept_c, w.swept_r), name
        assert w.stats.pairs == len(got)


@given(st.integers(0, 2**32 - 1), st.floats(1e-3, 0.5))
def test_narrow_phase_is_the_closest_approach_over_the_step(seed, dt):
    """Contact iff the distance of the centres comes within r_a + r_b during [0, dt] under
    linear motion; the normal is the unit direction from a to b at first contact."""
    rng = np.random.default_rng(seed)
    n = 30
    pos = rng.uniform(0, 10, (n, 3))
    vel = rng.normal(0, 10, (n, 3))
    radii = rng.uniform(0.2, 1.5, n)
    a, b = np.triu_indices(n, 1)
    pairs = np.stack([a, b], axis=1).astype(np.int64)
    normals = np.zeros((len(a), 3))
    hit = np.zeros(len(a), np.bool_)
    count = narrow_phase(pairs, pos, vel, radii, dt, normals, hit)
    assert count == hit.sum()
    for k, (i, j) in enumerate(pairs):
        m = min_distance_over_step(pos[j] - pos[i], vel[j] - vel[i], dt)
        rr = radii[i] + radii[j]
        if abs(m - rr) > 1e-9 * rr:  # away from the tie, the verdict is the oracle's
            assert hit[k] == (m <= rr), (i, j, m, rr)
        if hit[k] and m < rr * (1 - 1e-6):
            d, vv = pos[j] - pos[i], vel[j] - vel[i]
            c0 = d @ d - rr * rr
            t = 0.0 if c0 <= 0 else (-(d @ vv) - math.sqrt((d @ vv) ** 2 - (vv @ vv) * c0)) / (
                vv @ vv)
            want = (d + vv * t) / np.linalg.norm(d + vv * t)
            np.testing.assert_allclose(normals[k], want, atol=1e-6)


def test_head_on_equal_balls_swap_velocities_and_unequal_keep_momentum():
    lo, hi = np.full(3, -100.0), np.full(3, 100.0)
    c = np.array([[-2.0, 0, 0], [2.0, 0, 0]])
    v = np.array([[3.0, 0, 0], [-1.0, 0, 0]])
    w = CollisionWorld(c.copy(), np.arange(2), np.ones(2), v, lo, hi, index="brute")
    for _ in range(60):
        w.step(1 / 30)
    np.testing.assert_allclose(w.vel, [[-1.0, 0, 0], [3.0, 0, 0]], atol=1e-12)
    # radii 1 and 2: masses 1 and 8; 1-d elastic: v1' = ((m1 - m2) v1 + 2 m2 v2) / (m1 + m2)
    w = CollisionWorld(c.copy() * 3, np.arange(2), np.array([1.0, 2.0]), v, lo, hi,
                       index="grid")
    p0, e0 = momentum(w), w.energy()
    for _ in range(120):  # they meet after 2.25 s
        w.step(1 / 30)
    m1, m2, v1, v2 = 1.0, 8.0, 3.0, -1.0
    want = [((m1 - m2) * v1 + 2 * m2 * v2) / (m1 + m2), ((m2 - m1) * v2 + 2 * m1 * v1) / (m1 + m2)]
    np.testing.assert_allclose(w.vel[:, 0], want, atol=1e-12)
    np.testing.assert_allclose(momentum(w), p0, atol=1e-12)
    assert w.energy() == pytest.approx(e0, rel=1e-12)


def test_fast_balls_do_not_pass_through_each_other():
    """Two small balls closing at 600 units a second, 10 units per step: without swept bounds
    they would jump past each other between two steps; they bounce."""
    lo, hi = np.full(3, -1000.0), np.full(3, 1000.0)
    c = np.array([[-7.0, 0, 0], [7.0, 0, 0]])
    v = np.array([[300.0, 0, 0], [-300.0, 0, 0]])
    w = CollisionWorld(c, np.arange(2), np.full(2, 0.5), v, lo, hi, index="octree")
    w.step(1 / 60)  # centres at -2 and 2: the next step would carry them past each other
    np.testing.assert_allclose(w.pos[:, 0], [-2.0, 2.0])
    assert w.stats.contacts == 0
    w.step(1 / 60)
    assert w.stats.contacts == 1 and w.stats.pairs == 1
    np.testing.assert_allclose(w.vel[:, 0], [-300.0, 300.0])
    for _ in range(5):
        assert w.pos[0, 0] <= w.pos[1, 0] - 1.0  # in order, apart: no one passed through
        w.step(1 / 60)
        assert w.stats.contacts == 0


def test_walls_reflect_even_a_step_longer_than_the_box():
    lo, hi = np.zeros(3), np.full(3, 10.0)
    c = np.array([[5.0, 5.0, 5.0]])
    v = np.array([[500.0, -30.0, 0.0]])
    w = CollisionWorld(c, np.arange(1), np.ones(1), v, lo, hi, index="brute")
    e0 = w.energy()
    for _ in range(50):
        w.step(1 / 20)
        assert inside_box(w)
    assert w.energy() == pytest.approx(e0)


def test_restitution_below_one_loses_energy_but_not_momentum():
    w = world(800, seed=3, restitution=0.5)
    w.lo[:] = -1e6  # walls out of reach: momentum is then kept exactly
    w.hi[:] = 1e6
    e0, p0 = w.energy(), momentum(w)
    for _ in range(30):
        w.step(1 / 30)
    assert w.energy() < 0.99 * e0
    np.testing.assert_allclose(momentum(w), p0, atol=1e-9 * np.abs(w.mass).sum())


def test_balls_placed_overlapping_are_separated_at_load_and_do_not_explode():
    """All balls start at nearly one point: the load separates them (velocities unchanged),
    and the first steps do not fling them faster."""
    rng = np.random.default_rng(4)
    n = 300
    lo, hi = np.zeros(3), np.full(3, 40.0)
    c = 20.0 + rng.normal(0, 0.01, (n, 3))
    vel = random_velocities(n, 1.0, 2.0, lo, hi, rng)
    w = CollisionWorld(c, np.arange(n), rng.uniform(0.5, 1.0, n), vel.copy(), lo, hi,
                       index="kd")
    assert w.start_overlap > 1000 and w.note.startswith("collide: ")
    assert overlaps(w.pos, w.radii).max() <= 1e-9
    np.testing.assert_array_equal(w.vel, vel)
    for _ in range(20):
        w.step(1 / 60)
    assert np.linalg.norm(w.vel, axis=1).max() < 2 * 2.0 * 3  # nothing exploded
    assert overlaps(w.pos, w.radii).max() <= OVERLAP_TOL


def test_balls_in_a_separate_run_of_rows_write_the_scene_array():
    """Balls at scattered rows of a larger scene array: the step moves exactly those rows."""
    rng = np.random.default_rng(5)
    centers = rng.uniform(0, 20, (100, 3))
    rows = np.arange(3, 100, 3)
    before = centers.copy()
    w = CollisionWorld(centers, rows, np.full(rows.shape[0], 0.4),
                       random_velocities(rows.shape[0], 1, 2, np.zeros(3), np.full(3, 20.0),
                                         rng), np.zeros(3), np.full(3, 20.0), index="brute")
    w.step(0.1)
    others = np.setdiff1d(np.arange(100), rows)
    np.testing.assert_array_equal(centers[others], before[others])
    np.testing.assert_array_equal(centers[rows], w.pos)
    assert set(w.contact_rows().tolist()) <= set(rows.tolist())


@pytest.mark.parametrize("kw,says", [
    ({"margin": math.nan}, "margin"),
    ({"margin": -1.0}, "margin"),
    ({"restitution": 1.5}, "restitution"),
    ({"index": "nope"}, "unknown collision index 'nope'"),
])
def test_bad_parameters_are_one_value_error(kw, says):
    with pytest.raises(ValueError, match=says):
        world(10, **kw)


def test_the_index_refuses_nan_and_negative_margins_itself():
    w = world(50)
    for m in (math.nan, -0.5, math.inf):
        with pytest.raises(ValueError):
            w.index.query_pairs(margin=m)


# ----------------------------------------------------------------- the scene file

def test_collide_scene_loads_separated_and_objects_scale_the_box():
    from app.scene import load_scene

    s = load_scene("collide", objects=4000)
    w = s.collision
    assert w is not None and w.n == 4000 and s.objects.mesh.max() == 0
    full = load_scene("collide")
    fill = packing(full.collision.radii, full.collision.lo, full.collision.hi)
    assert 0.1 < fill < 0.2
    assert packing(w.radii, w.lo, w.hi) == pytest.approx(fill, rel=0.1)
    assert (w.hi - w.lo)[0] == pytest.approx(100 * (4000 / 20000) ** (1 / 3))
    moved = s.step(1 / 60)
    np.testing.assert_array_equal(moved, np.arange(4000))
    assert s.collision.stats.pairs > 0


def _scene_file(tmp_path, collision: str, motion: str = "collide", count: int = 200) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(f"""
[camera]
position = [0.0, 0.0, 60.0]
target = [0.0, 0.0, 0.0]
{collision}
[[group]]
count = {count}
distribution = "uniform"
bounds = [[-10.0, -10.0, -10.0], [10.0, 10.0, 10.0]]
radius = [0.3, 0.6]
motion = "{motion}"
""")
    return p


@pytest.mark.parametrize("collision,motion,count,says", [
    ("[collision]\nmargin = -1.0\n", "collide", 200, "collision.margin"),
    ("[collision]\nrestitution = 2.0\n", "collide", 200, "collision.restitution"),
    ("[collision]\nindex = \"nope\"\n", "collide", 200, "collision.index"),
    ("[collision]\nbounds = [[0, 0, 0], [0, 1, 1]]\n", "collide", 200, "collision.bounds"),
    ("[collision]\nspeed = 3\n", "collide", 200, "unknown key"),
    ("[collision]\n", "random_walk", 200, "motion = \"collide\""),
    ("", "collide", 40000, "fill"),
])
def test_bad_collision_tables_are_one_scene_error(tmp_path, collision, motion, count, says):
    from app.scene import SceneError, load_scene

    with pytest.raises(SceneError, match=says):
        load_scene(_scene_file(tmp_path, collision, motion, count))


def test_a_collision_table_sets_walls_index_and_response(tmp_path):
    from app.scene import load_scene

    s = load_scene(_scene_file(tmp_path, "[collision]\nbounds = [[-12, -12, -12], [12, 12, 12]]"
                               "\nindex = \"grid\"\nrestitution = 0.8\nmargin = 0.2\n"))
    w = s.collision
    assert w.index_name == "grid" and w.restitution == 0.8 and w.margin == 0.2
    np.testing.assert_array_equal(w.lo, -12.0)
    s2 = load_scene(_scene_file(tmp_path, ""), collision_index="octree")
    assert s2.collision.index_name == "octree"


# ----------------------------------------------------------------- the viewer (EGL)

def _viewer(ctx, scene_name="collide", objects=3000, size=(480, 270), **toggles):
    from app.culling.pipeline import IndexConfig
    from app.scene import load_scene
    from app.viewer.state import Toggles
    from app.viewer.viewer import Viewer

    scene = load_scene(scene_name, objects=objects, seed=7)
    return Viewer(ctx, scene, IndexConfig("octree", False), size, Toggles(**toggles))


def _orange(img: np.ndarray) -> int:
    """Pixels of the contact tint (lit orange): red well above blue, green between."""
    r, g, b = (img[..., k].astype(int) for k in range(3))
    return int(((r > 120) & (r - b > 90) & (g < r - 30) & (g > b)).sum())


@pytest.mark.gl
def test_balls_in_contact_are_tinted_and_the_hud_and_log_say_so(ctx, tmp_path):
    """The collision view (on by default in the collide scene): exactly the balls in contact
    carry the tint, which shows on the picture; T turns it off (no tinted pixel, original
    colours back); the HUD line and the log's columns carry the step's numbers."""
    from app.framelog import read_log
    from app.viewer.collision_view import TINT

    v = _viewer(ctx, hud=False)
    log = tmp_path / "collide.csv"
    v.start_recording(log)
    for _ in range(4):
        st = v.tick(1 / 60)
    w = v.scene.collision
    rows = w.contact_rows()
    assert w.stats.contacts > 0 and rows.shape[0] == w.stats.balls_in_contact
    looks = v.objects.looks
    np.testing.assert_allclose(looks[rows, 1:4], np.tile(TINT, (rows.shape[0], 1)), rtol=1e-6)
    others = np.setdiff1d(np.arange(len(looks)), rows)
    np.testing.assert_array_equal(looks[others, 1:4], v.scene.objects.colors[others])
    tinted = _orange(v.target.read_rgb())
    assert tinted > 200, "no tinted ball on the picture"
    v.toggles.hud = True
    v.tick(1 / 60)
    line = [s for s in v.hud_lines(v.stats) if s.startswith("collision  index")][0]
    s = w.stats
    assert f"pairs {s.pairs:,}" in line and f"in contact {s.contacts:,}" in line
    assert "broad-phase" in line
    v.toggles.hud = False
    assert v.key("t") and not v.toggles.collision
    v.tick(1 / 60)
    assert _orange(v.target.read_rgb()) == 0
    np.testing.assert_array_equal(v.objects.looks[:, 1:4], v.scene.objects.colors)
    assert not any(x.startswith("collision") for x in v.hud_lines(v.stats))
    v.close()
    data = read_log(log)
    for col in ("pairs", "contacts", "broadphase_ms", "narrowphase_ms", "response_ms"):
        assert col in data and not np.isnan(data[col]).any(), col
    assert (data["pairs"] >= data["contacts"]).all() and (data["contacts"] > 0).all()
    assert (data["broadphase_ms"] > 0).all()
    assert st.moved == 3000


@pytest.mark.gl
def test_pair_lines_and_collision_index_keys(ctx):
    """Y: lines of the pairs in contact, then of every candidate (drawn when a member is
    drawn), then off; U / Shift+U switch the collision index, the notice says so, and the
    next step's candidates are the same set."""
    v = _viewer(ctx, hud=True, paused=False)
    v.tick(1 / 60)
    base = v.target.read_rgb()
    assert v.key("y") and v.toggles.pair_lines == "contacts"
    v.tick(1 / 60)
    w = v.scene.collision
    assert v.collision.lines_drawn == w.stats.contacts  # the whole box is in view
    assert not np.array_equal(base, v.target.read_rgb())
    v.key("y")
    v.tick(1 / 60)
    assert v.toggles.pair_lines == "candidates" and v.collision.lines_drawn == w.stats.pairs
    assert "pair lines candidates" in "\n".join(v.hud_lines(v.stats))
    v.key("y")
    assert v.toggles.pair_lines == "off"
    first = w.index_name
    names = list(INDEX_NAMES)
    assert v.key("u")
    assert w.index_name == names[(names.index(first) + 1) % len(names)]
    assert any(f"collision index {first} -> {w.index_name}" in t for _, t in v.notices)
    v.key("u", shift=True)
    assert w.index_name == first
    v.toggles.paused = True
    v.tick(1 / 60)
    v.close()


@pytest.mark.gl
def test_visibility_culling_works_as_in_every_scene(ctx):
    """A camera inside the box looking at a corner: the visibility index culls the balls
    behind it, and its answer is the frustum oracle's, while the collision step runs."""
    from app.viewer.camera import CameraView

    v = _viewer(ctx, size=(320, 180))
    w = v.scene.collision
    mid = 0.5 * (w.lo + w.hi)
    view = CameraView.make(mid, w.hi, 60.0, 16 / 9, 0.5, 800.0)
    for _ in range(3):
        st = v.frame(1 / 60, view)
    o = v.scene.objects
    dots = o.centers @ view.planes[:, :3].T + view.planes[:, 3]
    inside = int((dots >= -o.radii[:, None]).all(axis=1).sum())
    assert st.visible == inside < 0.6 * len(o.ids)
    assert w.stats.pairs > 0
    v.close()


@pytest.mark.gl
def test_collision_keys_in_a_scene_without_balls_say_so(ctx):
    v = _viewer(ctx, scene_name="uniform", objects=500)
    assert v.collision is None
    v.tick(1 / 60)
    assert v.key("t") and v.key("u")
    assert any("no colliding balls" in t for _, t in v.notices)
    assert not any(x.startswith("collision") for x in v.hud_lines(v.stats))
    v.close()


def test_help_lists_the_collision_keys():
    from app.viewer.overlays import HELP_LINES

    text = "\n".join(HELP_LINES)
    for key in ("  T ", "  Y ", "  U / Shift+U"):
        assert key in text


# ----------------------------------------------------------------- the command line

def _demo(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "demo", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_unknown_collision_index_is_one_line_and_exit_2():
    r = _demo("--headless", "--scene", "collide", "--collision-index", "nope")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--collision-index" in lines[0] and "nope" in lines[0]
    assert r.stdout == ""


@pytest.mark.gl
def test_headless_run_with_a_collision_index_logs_its_columns(tmp_path):
    from app.framelog import read_log

    log = tmp_path / "c.csv"
    r = _demo("--headless", "--scene", "collide", "--objects", "2000", "--collision-index",
              "grid", "--frames", "3", "--size", "160x90", "--record", str(log))
    assert r.returncode == 0, r.stderr
    data = read_log(log)
    assert (data["pairs"] > 0).all() and "broadphase_ms" in data
    r = _demo("--headless", "--scene", "uniform", "--objects", "200", "--collision-index",
              "grid", "--frames", "1", "--size", "160x90")
    assert r.returncode == 0 and "--collision-index applies to scenes with colliding" in r.stderr
