"""The query's own stage counts (``culled_frustum``, ``culled_distance``, ``occluded_objects``)
for every index, against a per-object oracle.

Each index counts, in its walk, the objects each test rejected, in the order its kernel
applies them (view distance, frustum, occlusion): a node rejected whole counts its subtree
under that test. So for every query the counts and the visible ones add up to the index's
size, every object counted as rejected by the frustum (or view distance) really is outside it
(beyond it), and brute force, which tests every object alone, gives exactly the per-object
first-failed-test counts.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.geom.camera import look_at, perspective, planes_from_matrix
from app.geom.zpyramid import ZPyramid, spheres_occluded
from app.spatial import create_index, index_variants

VARIANTS = index_variants()
IDS = [label for label, _, _ in VARIANTS]
W, H = 48, 32


def view(rng: np.random.Generator, spread: float):
    """(eye, planes, viewproj) of a random camera looking into the scene."""
    eye = rng.uniform(-spread, spread, 3)
    target = eye + rng.normal(size=3)
    if np.linalg.norm(np.cross(target - eye, [0.0, 1.0, 0.0])) < 1e-3:
        target = eye + np.array([1.0, 0.0, 0.0])
    vp = perspective(rng.uniform(40, 90), W / H, 0.1, rng.uniform(1.0, 3.0) * spread) @ look_at(
        eye, target)
    return eye, planes_from_matrix(vp), vp


def pyramid(rng: np.random.Generator, vp: np.ndarray) -> ZPyramid:
    """A depth image with a few near rectangles (occluders), far everywhere else."""
    depth = np.ones((H, W), np.float32)
    for _ in range(3):
        x0, y0 = rng.integers(0, W - 4), rng.integers(0, H - 4)
        x1, y1 = x0 + rng.integers(4, W), y0 + rng.integers(4, H)
        depth[y0:y1, x0:x1] = rng.uniform(0.90, 0.999)
    return ZPyramid.from_depth(vp, depth)


def first_failed(centers, radii, vdist, planes, eye, use_vd, pyr):
    """Per object: 0 drawn, 1 view distance, 2 frustum, 3 occlusion (the first test failed,
    in accept_sphere's order)."""
    far = use_vd & (np.sqrt(((centers - eye) ** 2).sum(axis=1)) > vdist)
    outside = ~((centers @ planes[:, :3].T + planes[:, 3]) >= -radii[:, None]).all(axis=1)
    hidden = np.zeros(centers.shape[0], bool)
    if pyr is not None:
        hidden = spheres_occluded(centers, radii, *pyr.arrays())
    return np.where(far, 1, np.where(outside, 2, np.where(hidden, 3, 0)))


def rigid(rng: np.random.Generator) -> np.ndarray:
    """A random rotation times a uniform scale, plus a translation (a group's transform)."""
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    m = np.eye(4)
    m[:3, :3] = q * rng.choice([0.5, 1.0, 2.0])
    m[:3, 3] = rng.normal(size=3) * 20.0
    return m


def scene(rng: np.random.Generator, n: int, spread: float):
    centers = rng.uniform(-spread, spread, (n, 3))
    radii = rng.uniform(0.0, spread / 10, n)
    vdist = rng.uniform(0.0, spread, n)
    vdist[rng.random(n) < 0.2] = np.inf
    return np.arange(n, dtype=np.int64), centers, radii, vdist


def check_counts(name, kwargs, seed: int, n: int, moves: int) -> None:
    rng = np.random.default_rng(seed)
    spread = 50.0
    ids, centers, radii, vdist = scene(rng, n, spread)
    idx = create_index(name, **kwargs)
    idx.insert(ids, centers, radii, vdist)
    if moves:
        moved = rng.choice(n, size=min(moves, n), replace=False)
        centers[moved] += rng.normal(scale=spread / 5, size=(moved.shape[0], 3))
        idx.update(ids[moved], centers[moved])
    for _ in range(2):
        eye, planes, vp = view(rng, spread)
        for use_vd in (False, True):
            for pyr in (None, pyramid(rng, vp)):
                res = idx.query_frustum(planes, eye=eye, use_view_distance=use_vd,
                                        occlusion=pyr)
                code = first_failed(centers, radii, vdist, planes, eye, use_vd, pyr)
                where = f"{name} use_vd={use_vd} pyramid={pyr is not None}"
                vis = res.visible.shape[0]
                counts = (res.culled_frustum, res.culled_distance, res.occluded_objects)
                assert min(counts) >= 0, (where, counts)
                assert vis + sum(counts) == n, (where, vis, counts)
                outside = ~((centers @ planes[:, :3].T + planes[:, 3])
                            >= -radii[:, None]).all(axis=1)
                assert res.culled_frustum <= int(outside.sum()), (where, counts)
                if use_vd:
                    far = np.sqrt(((centers - eye) ** 2).sum(axis=1)) > vdist
                    assert res.culled_distance <= int(far.sum()), (where, counts)
                else:
                    assert res.culled_distance == 0, (where, counts)
                if pyr is None:
                    assert res.occluded_objects == 0, (where, counts)
                if name == "brute":
                    want = (int((code == 2).sum()), int((code == 1).sum()),
                            int((code == 3).sum()))
                    assert counts == want, (where, counts, want)


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(0, 400), moves=st.integers(0, 50))
def test_stage_counts_add_up_and_are_conservative(label, name, kwargs, seed, n, moves):
    check_counts(name, kwargs, seed, n, moves)


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_every_stage_counts_in_a_scene_that_has_all_three(label, name, kwargs):
    """A scene where each test rejects something: objects behind the camera, beyond their
    view distance, and behind a wall filling the screen (no count may stay 0)."""
    rng = np.random.default_rng(7)
    n = 3000
    eye = np.zeros(3)
    vp = perspective(60.0, W / H, 0.1, 200.0) @ look_at(eye, np.array([0.0, 0.0, -1.0]))
    planes = planes_from_matrix(vp)
    centers = rng.uniform(-100, 100, (n, 3))
    radii = np.full(n, 0.5)
    vdist = np.where(rng.random(n) < 0.5, 60.0, np.inf)
    depth = np.ones((H, W), np.float32)
    depth[:, : W // 2] = 0.99  # a wall over the left half, about 10 units away
    pyr = ZPyramid.from_depth(vp, depth)
    idx = create_index(name, **kwargs)
    idx.insert(np.arange(n), centers, radii, vdist)
    res = idx.query_frustum(planes, eye=eye, use_view_distance=True, occlusion=pyr)
    code = first_failed(centers, radii, vdist, planes, eye, True, pyr)
    assert min(res.culled_frustum, res.culled_distance, res.occluded_objects) > 0
    assert res.visible.shape[0] == int((code == 0).sum())
    assert (res.visible.shape[0] + res.culled_frustum + res.culled_distance
            + res.occluded_objects) == n


@pytest.mark.parametrize("name", ["brute", "chunks"])
def test_counts_when_everything_moves(name):
    """Every object moved (chunks lays them out by slot and scans them all): the same counts
    as before the move for the same positions."""
    rng = np.random.default_rng(3)
    ids, centers, radii, vdist = scene(rng, 2000, 50.0)
    idx = create_index(name)
    idx.insert(ids, centers, radii, vdist)
    for _ in range(3):
        centers += rng.normal(scale=1.0, size=centers.shape)
        idx.update(ids, centers)
    eye, planes, vp = view(rng, 50.0)
    pyr = pyramid(rng, vp)
    res = idx.query_frustum(planes, eye=eye, use_view_distance=True, occlusion=pyr)
    code = first_failed(centers, radii, vdist, planes, eye, True, pyr)
    got = (res.visible.shape[0], res.culled_distance, res.culled_frustum, res.occluded_objects)
    assert got == tuple(int((code == c).sum()) for c in range(4))


def test_brute_counts_on_the_parallel_scan():
    """Above SCAN_PARALLEL_MIN rows brute force scans on every core: the chunks' view
    distance counts add up to the per-object oracle's."""
    from app.spatial.scan import SCAN_PARALLEL_MIN

    rng = np.random.default_rng(5)
    n = SCAN_PARALLEL_MIN + 1000
    ids, centers, radii, vdist = scene(rng, n, 50.0)
    idx = create_index("brute")
    idx.insert(ids, centers, radii, vdist)
    idx.remove(ids[::7])  # dead rows in the scan must not count
    keep = np.ones(n, bool)
    keep[::7] = False
    eye, planes, _ = view(rng, 50.0)
    res = idx.query_frustum(planes, eye=eye, use_view_distance=True)
    code = first_failed(centers[keep], radii[keep], vdist[keep], planes, eye, True, None)
    assert (res.visible.shape[0], res.culled_distance, res.culled_frustum) == tuple(
        int((code == c).sum()) for c in range(3))


@pytest.mark.parametrize("inner_min", [0, 1 << 30], ids=["inner-indexes", "scan"])
@given(seed=st.integers(0, 2**31 - 1))
def test_nested_stage_counts(inner_min, seed):
    """The nested index: groups rejected by view distance count their objects, the scanned and
    inner-index objects their own verdicts; the counts add up and are conservative."""
    from app.spatial.nested import NestedIndex

    rng = np.random.default_rng(seed)
    h = NestedIndex("kd", inner_min=inner_min)
    n = 0
    for g in range(4):
        h.add_group(g, parent=None if g == 0 else int(rng.integers(0, g)),
                    transform=rigid(rng))
        m = int(rng.integers(0, 120))
        _, centers, radii, vdist = scene(rng, m, 30.0)
        h.insert(g, np.arange(n, n + m), centers, radii, vdist)
        n += m
    ids = np.arange(n)
    wc, wr, wv = h.world_spheres(ids, with_view_distances=True)
    for _ in range(2):
        eye, planes, vp = view(rng, 50.0)
        for use_vd in (False, True):
            for pyr in (None, pyramid(rng, vp)):
                res = h.query_frustum(planes, eye=eye, use_view_distance=use_vd, occlusion=pyr)
                counts = (res.culled_frustum, res.culled_distance, res.occluded_objects)
                assert min(counts) >= 0, counts
                assert res.visible.shape[0] + sum(counts) == n, counts
                code = first_failed(wc, wr, wv, planes, eye, use_vd, None)
                outside = ~((wc @ planes[:, :3].T + planes[:, 3]) >= -wr[:, None]).all(axis=1)
                assert res.culled_frustum <= int(outside.sum()), counts
                assert res.culled_distance <= int((code == 1).sum() if use_vd else 0), counts
