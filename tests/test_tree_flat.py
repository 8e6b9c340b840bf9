"""The trees' flat form: while (nearly) every object moves every frame, a tree empties into a
float32 copy by slot that every query scans (``app.spatial.flat``), and builds itself again
once motion stops. Exact in either form and across the switches, against the oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.culling.frustum import camera_planes, look_at, perspective
from app.geom.zpyramid import ZPyramid
from app.spatial import create_index
from app.spatial.aabbtree import CHILDREN
from tests.helpers_ops import every_query_agrees
from tests.oracle import Oracle

N = 600


def _scene(name: str, leafy: bool = False, seed: int = 0, n: int = N, **kw):
    """A tree that may go flat at this small size, and its oracle, with n objects."""
    idx = create_index(name, leafy=leafy, split_threshold=8, **kw)
    idx.flat_min_objects = 64
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-50, 50, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    vd = rng.uniform(10, 80, n)
    idx.insert(ids, c, r, vd)
    oracle = Oracle()
    oracle.insert(ids, c, r, vd)
    return idx, oracle, rng, c


_same = every_query_agrees


def _move_all(idx, oracle, rng, c, order: bool = False) -> None:
    """Every object a little, in id order or shuffled."""
    ids = np.arange(c.shape[0], dtype=np.int64)
    c += rng.normal(0, 0.5, c.shape)
    batch = ids[rng.permutation(ids.shape[0])] if order else ids
    idx.update(batch, c[batch])
    oracle.update(batch, c[batch])


@pytest.mark.parametrize("name", list(CHILDREN))
@pytest.mark.parametrize("leafy", [False, True])
def test_goes_flat_while_everything_moves_and_back_when_motion_stops(name, leafy):
    idx, oracle, rng, c = _scene(name, leafy)
    planes = camera_planes([0, 0, 0], [1, 0, 0], far=60.0)
    idx.query_frustum(planes)
    assert not idx.is_flat
    ids = np.arange(N, dtype=np.int64)
    c += 0.3
    idx.update(ids, c)  # a batch of every object: flat at once
    oracle.update(ids, c)
    assert idx.is_flat and idx.stats()["flat"]
    assert idx.node_boxes()[0].shape[0] == 0  # no tree to draw while flat
    _same(idx, oracle, rng)
    for order in (False, True):  # the flat copy's paths: in order and shuffled
        _move_all(idx, oracle, rng, c, order)
        assert idx.is_flat
        _same(idx, oracle, rng)
    few = ids[:10]  # a small batch: the tree again, built as a build is, then split lazily
    c[few] += 1.0
    idx.update(few, c[few])
    oracle.update(few, c[few])
    assert not idx.is_flat
    _same(idx, oracle, rng)
    assert idx.stats()["nodes"] > 1  # the queries' upkeep split it again


def test_half_moving_goes_flat_on_the_second_batch_only():
    idx, oracle, rng, c = _scene("octree")
    half = np.arange(0, N, 2, dtype=np.int64)
    for k in range(2):
        c[half] += 0.2
        idx.update(half, c[half])
        oracle.update(half, c[half])
        assert idx.is_flat == (k == 1)
    _same(idx, oracle, rng)


@pytest.mark.parametrize("kw", [{"mode": "paper"}, {"flat": False}])
def test_the_paper_mode_and_flat_false_keep_the_tree(kw):
    idx, oracle, rng, c = _scene("octree", **kw)
    ids = np.arange(N, dtype=np.int64)
    for _ in range(3):
        c += 0.2
        idx.update(ids, c)
        oracle.update(ids, c)
    assert not idx.is_flat and not idx.stats()["flat"]
    _same(idx, oracle, rng)


def test_small_scenes_never_go_flat():
    idx = create_index("octree")
    n = idx.flat_min_objects - 1
    rng = np.random.default_rng(1)
    c = rng.uniform(0, 10, (n, 3))
    idx.insert(np.arange(n), c, np.ones(n))
    idx.update(np.arange(n), c + 1.0)
    assert not idx.is_flat


def test_flat_inserts_removes_occlusion_and_growth_are_exact():
    idx, oracle, rng, c = _scene("icoseptree", leafy=False)
    ids = np.arange(N, dtype=np.int64)
    idx.update(ids, c)
    oracle.update(ids, c)
    assert idx.is_flat
    # spawn and despawn while flat, past the store's capacity (it grows)
    gone = rng.choice(N, 50, replace=False)
    idx.remove(gone)
    oracle.remove(gone)
    new = np.arange(N, N + 2000, dtype=np.int64)
    cn = rng.uniform(-50, 50, (2000, 3))
    rn = rng.uniform(0.1, 2.0, 2000)
    idx.insert(new, cn, rn)
    oracle.insert(new, cn, rn)
    live = np.setdiff1d(np.concatenate([ids, new]), gone)
    cl = np.concatenate([c, cn])[live]
    idx.update(live, cl + 0.1)  # every live object: the one-pass path over the grown copy
    oracle.update(live, cl + 0.1)
    assert idx.is_flat
    _same(idx, oracle, rng)
    # the previous frame's depth as occluder (a wall at window depth 0.9): a subset of the
    # frustum's answer, the one the brute index gives with the same pyramid (the same scan)
    idx.update(live, cl + 0.2)
    oracle.update(live, cl + 0.2)
    assert idx.is_flat
    eye = np.array([-80.0, 0, 0])
    planes = camera_planes(eye, np.zeros(3), aspect=1.0, far=300)
    vp = perspective(60, 1.0, 0.1, 300) @ look_at(eye, np.zeros(3))
    pyr = ZPyramid.from_levels(vp, [np.full((w, w), 0.9, np.float32)
                                    for w in (64, 32, 16, 8, 4, 2, 1)])
    assert idx.is_flat
    res = idx.query_frustum(planes, eye, False, pyr)
    free = oracle.frustum(planes, eye)
    brute = create_index("brute")
    brute.insert(*oracle.arrays()[:3])
    want = brute.query_frustum(planes, eye, False, pyr)
    assert set(res.visible) <= set(free) and len(res.visible) < len(free)
    assert np.array_equal(np.sort(res.visible), np.sort(want.visible))
    assert res.occluded_objects == want.occluded_objects > 0


def test_a_bad_batch_while_flat_is_refused_and_changes_nothing():
    idx, oracle, rng, c = _scene("ternary")
    ids = np.arange(N, dtype=np.int64)
    idx.update(ids, c)
    oracle.update(ids, c)
    assert idx.is_flat
    planes = camera_planes([0, 0, 0], [1, 0, 0], far=60.0)
    before = np.sort(idx.query_frustum(planes).visible)
    bad = c.copy() + 5.0
    bad[N // 2, 1] = np.nan
    with pytest.raises(ValueError):
        idx.update(ids, bad)
    with pytest.raises(ValueError):
        idx.update(np.array([0, 1, 1]), c[:3])
    with pytest.raises(ValueError):
        idx.update(np.array([0, N + 99]), c[:2])
    assert np.array_equal(np.sort(idx.query_frustum(planes).visible), before)
    _same(idx, oracle, rng)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), steps=st.lists(
    st.sampled_from(["all", "all-shuffled", "half", "few", "query", "spawn"]),
    min_size=3, max_size=12))
def test_any_sequence_of_motion_stays_exact(seed, steps):
    """Whatever the motion does (everything, half, a few, nothing, spawns), every query
    answers as the oracle does, in whichever form the tree is."""
    idx, oracle, rng, c = _scene("kd", leafy=bool(seed % 2), seed=seed, n=300)
    live = np.arange(300, dtype=np.int64)
    top = 300
    pos = {int(i): c[i] for i in live}
    for step in steps:
        if step == "spawn":
            gone = rng.choice(live, 5, replace=False)
            idx.remove(gone)
            oracle.remove(gone)
            live = np.setdiff1d(live, gone)
            new = np.arange(top, top + 5, dtype=np.int64)
            top += 5
            cn = rng.uniform(-50, 50, (5, 3))
            idx.insert(new, cn, np.full(5, 0.5))
            oracle.insert(new, cn, np.full(5, 0.5))
            pos.update({int(i): cn[k] for k, i in enumerate(new)})
            live = np.concatenate([live, new])
            continue
        if step == "query":
            _same(idx, oracle, rng)
            continue
        k = {"all": live.shape[0], "all-shuffled": live.shape[0], "half": live.shape[0] // 2,
             "few": 3}[step]
        batch = rng.choice(live, k, replace=False)
        if step == "all":
            batch = np.sort(batch)
        new_c = np.array([pos[int(i)] for i in batch]) + rng.normal(0, 0.4, (k, 3))
        pos.update({int(i): new_c[j] for j, i in enumerate(batch)})
        idx.update(batch, new_c)
        oracle.update(batch, new_c)
    _same(idx, oracle, rng)
