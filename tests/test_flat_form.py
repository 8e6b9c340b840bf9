"""The flat form (``app.spatial.flat_form``) of the view distance tree, the hashed grid and
the fixed octree (the AABB trees': tests/test_tree_flat.py): while (nearly) every object moves
every frame, the structure empties into the float32 copy by slot that every query scans, and
is built again once motion stops; the view distance tree also when pairs are asked (its pair
descent beats the copy's sort-and-sweep). Exact in either form and across the switches,
against the oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.culling.frustum import camera_planes
from app.spatial import create_index
from tests.helpers_ops import every_query_agrees
from tests.oracle import Oracle

N = 600
NAMES = ["viewdist", "grid", "fixed-octree"]


def _scene(name: str, seed: int = 0, n: int = N, **kw):
    """An index that may go flat at this small size, and its oracle."""
    idx = create_index(name, **kw)
    idx.flat_min_objects = 64
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-50, 50, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    vd = np.where(rng.random(n) < 0.1, np.inf, rng.uniform(10, 80, n))  # some unbounded
    idx.insert(ids, c, r, vd)
    oracle = Oracle()
    oracle.insert(ids, c, r, vd)
    return idx, oracle, rng, c


def _same(idx, oracle, rng, pairs: bool = False) -> None:
    """Every query kind agrees with the oracle (pairs only when asked: they build the view
    distance tree again); validate holds."""
    every_query_agrees(idx, oracle, rng, pairs)


def _move(idx, oracle, rng, c, ids, shuffle: bool = False, sizes: bool = False) -> None:
    """``ids`` a little (shuffled, or with radii and view distances in the batch)."""
    c[ids] += rng.normal(0, 0.5, (ids.shape[0], 3))
    batch = ids[rng.permutation(ids.shape[0])] if shuffle else ids
    if sizes:
        r = rng.uniform(0.1, 2.0, batch.shape[0])
        vd = rng.uniform(10, 80, batch.shape[0])
        idx.update(batch, c[batch], r, vd)
        oracle.update(batch, c[batch], r, vd)
    else:
        idx.update(batch, c[batch])
        oracle.update(batch, c[batch])


@pytest.mark.parametrize("name", NAMES)
def test_goes_flat_while_everything_moves_and_back_when_motion_stops(name):
    idx, oracle, rng, c = _scene(name)
    ids = np.arange(N, dtype=np.int64)
    _same(idx, oracle, rng)
    assert not idx.is_flat and idx.stats()["nodes"] > 1
    _move(idx, oracle, rng, c, ids)  # a batch of every object: flat at once
    assert idx.is_flat and idx.stats()["flat"]
    assert idx.node_boxes()[0].shape[0] == 0  # no tree to draw while flat
    _same(idx, oracle, rng)
    for shuffle, sizes in ((False, False), (True, False), (False, True)):
        _move(idx, oracle, rng, c, ids, shuffle, sizes)
        assert idx.is_flat
        _same(idx, oracle, rng)
    _move(idx, oracle, rng, c, ids[:10])  # a small batch: the tree again
    assert not idx.is_flat and not idx.stats()["flat"]
    _same(idx, oracle, rng, pairs=True)
    assert idx.stats()["nodes"] > 1  # (the fixed octree places its queue at a query)


@pytest.mark.parametrize(("name", "kw", "per_frame"), [(n, {}, 2) for n in NAMES] + [
    ("kd", {"leafy": True, "split_threshold": 8}, 3)])
def test_a_stopped_scene_builds_the_structure_again_from_its_queries(name, kw, per_frame):
    """No batch comes when a scene stops (the viewer paused): a query after twice as many
    without an update as a frame makes finds the structure built again, however many
    queries it answered before going flat; frames of ``per_frame`` queries each (three:
    more than ``frame_queries``) stay flat while their updates come. (The AABB trees' too.)"""
    idx, oracle, rng, c = _scene(name, seed=6, **kw)
    ids = np.arange(N, dtype=np.int64)
    planes = camera_planes([0, 0, 0], [1, 0, 0], far=60.0)
    for _ in range(50):  # a long look at a still scene first
        idx.query_frustum(planes)
    for f in range(4):  # frames of one update and per_frame queries
        _move(idx, oracle, rng, c, ids)
        for k in range(per_frame):
            idx.query_frustum(planes)
            assert idx.is_flat, (f, k)
    for k in range(per_frame):  # paused: up to twice per_frame queries it stays flat
        idx.query_frustum(planes)
        assert idx.is_flat, k
    res = idx.query_frustum(planes)
    assert not idx.is_flat
    assert np.array_equal(np.sort(res.visible), oracle.frustum(planes))
    idx.validate()


@pytest.mark.parametrize("name", NAMES)
def test_half_moving_goes_flat_on_the_second_batch_only(name):
    idx, oracle, rng, c = _scene(name, seed=1)
    half = np.arange(0, N, 2, dtype=np.int64)
    for k in range(2):
        _move(idx, oracle, rng, c, half)
        assert idx.is_flat == (k == 1)
    _same(idx, oracle, rng)


def test_pairs_keep_the_tree_while_they_are_asked():
    """A pairs query while flat builds the tree again, and the tree stays through
    ``pairs_keep_batches`` batches of every object; with no pairs asked in them, the next
    such batch goes flat."""
    idx, oracle, rng, c = _scene("viewdist", seed=2)
    ids = np.arange(N, dtype=np.int64)
    _move(idx, oracle, rng, c, ids)
    assert idx.is_flat
    _same(idx, oracle, rng, pairs=True)  # (the pairs come last)
    assert not idx.is_flat
    for _ in range(3):  # a collision scene's steps: everything moves, pairs every step
        _move(idx, oracle, rng, c, ids, sizes=True)
        assert not idx.is_flat
        _same(idx, oracle, rng, pairs=True)
    for k in range(idx.pairs_keep_batches + 1):
        _move(idx, oracle, rng, c, ids)
        assert idx.is_flat == (k == idx.pairs_keep_batches), k
    _same(idx, oracle, rng)


@pytest.mark.parametrize("name", ["grid", "fixed-octree"])
def test_pairs_while_flat_are_the_sort_and_sweep(name):
    """Their pairs, cell against neighbours or ancestors' lists, cost more than the flat
    copy's sort-and-sweep: pairs asked every step leave the index flat."""
    idx, oracle, rng, c = _scene(name, seed=5)
    ids = np.arange(N, dtype=np.int64)
    for _ in range(3):
        _move(idx, oracle, rng, c, ids, sizes=True)
        assert idx.is_flat
        got = idx.query_pairs(margin=0.5)
        assert {tuple(p) for p in np.sort(got, axis=1)} == {tuple(p) for p in
                                                           oracle.pairs(margin=0.5)}
        assert idx.is_flat
    idx.validate()


@pytest.mark.parametrize("name", NAMES)
def test_flat_false_keeps_the_structure(name):
    idx, oracle, rng, c = _scene(name, seed=3, flat=False)
    ids = np.arange(N, dtype=np.int64)
    for _ in range(3):
        _move(idx, oracle, rng, c, ids)
    assert not idx.is_flat and not idx.stats()["flat"]
    _same(idx, oracle, rng)


@pytest.mark.parametrize("name", NAMES)
def test_flat_spawns_growth_and_a_bad_batch_are_exact(name):
    idx, oracle, rng, c = _scene(name, seed=4)
    ids = np.arange(N, dtype=np.int64)
    _move(idx, oracle, rng, c, ids)
    assert idx.is_flat
    gone = rng.choice(N, 50, replace=False)
    idx.remove(gone)
    oracle.remove(gone)
    eye = np.zeros(3)
    planes = camera_planes(eye, [1, 0, 0], far=60.0)
    for use_vd in (False, True):  # (their rows empty before new objects take them)
        got = np.sort(idx.query_frustum(planes, eye, use_vd).visible)
        assert np.array_equal(got, oracle.frustum(planes, eye, use_vd))
    assert idx.is_flat
    some = np.setdiff1d(ids, gone)[::3]  # a batch the general path converts (float32, list)
    c[some] += 20.0
    idx.update(some.tolist(), c[some].astype(np.float32))
    oracle.update(some, c[some].astype(np.float32).astype(np.float64))
    c[some] = c[some].astype(np.float32)
    assert idx.is_flat
    _same(idx, oracle, rng)  # (five queries without an update: the tree again)
    _move(idx, oracle, rng, c, np.setdiff1d(ids, gone))  # every object: flat again
    assert idx.is_flat
    new = np.arange(N, N + 2000, dtype=np.int64)  # past the store's capacity: it grows
    cn = rng.uniform(-50, 50, (2000, 3))
    rn = rng.uniform(0.1, 2.0, 2000)
    vn = rng.uniform(10, 80, 2000)
    idx.insert(new, cn, rn, vn)
    oracle.insert(new, cn, rn, vn)
    assert idx.is_flat
    idx.validate()  # (flat: the copy, grown with the store, against the store)
    live = np.setdiff1d(np.concatenate([ids, new]), gone)
    cl = np.concatenate([c, cn])[live] + 0.1
    idx.update(live, cl)
    oracle.update(live, cl)
    assert idx.is_flat
    idx.validate()  # (flat: the copy against the store; a query or five builds the tree)
    _same(idx, oracle, rng)
    planes = camera_planes([0, 0, 0], [1, 0, 0], far=60.0)
    before = np.sort(idx.query_frustum(planes).visible)
    bad = cl + 5.0
    bad[7, 1] = np.nan
    with pytest.raises(ValueError):
        idx.update(live, bad)
    with pytest.raises(ValueError):
        idx.update(live[:3], cl[:3], np.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError):
        idx.update(np.array([live[0], N + 99_999]), cl[:2])
    assert np.array_equal(np.sort(idx.query_frustum(planes).visible), before)
    _same(idx, oracle, rng, pairs=True)


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(NAMES), seed=st.integers(0, 10_000), steps=st.lists(
    st.sampled_from(["all", "all-shuffled", "all-sizes", "half", "few", "query", "pairs",
                     "spawn"]), min_size=3, max_size=12))
def test_any_sequence_of_motion_stays_exact(name, seed, steps):
    """Whatever the motion does (everything, half, a few, nothing, spawns) and whenever
    pairs are asked, every query answers as the oracle does, in whichever form."""
    idx, oracle, rng, c = _scene(name, seed=seed, n=300)
    live = np.arange(300, dtype=np.int64)
    c = np.concatenate([c, np.zeros((600, 3))])  # room for the spawns' rows
    top = 300
    for step in steps:
        if step == "spawn":
            gone = rng.choice(live, 5, replace=False)
            idx.remove(gone)
            oracle.remove(gone)
            new = np.arange(top, top + 5, dtype=np.int64)
            top += 5
            c[new] = rng.uniform(-50, 50, (5, 3))
            idx.insert(new, c[new], np.full(5, 0.5), np.full(5, 30.0))
            oracle.insert(new, c[new], np.full(5, 0.5), np.full(5, 30.0))
            live = np.concatenate([np.setdiff1d(live, gone), new])
        elif step in ("query", "pairs"):
            _same(idx, oracle, rng, pairs=step == "pairs")
        else:
            k = {"half": live.shape[0] // 2, "few": 3}.get(step, live.shape[0])
            batch = np.sort(rng.choice(live, k, replace=False))
            _move(idx, oracle, rng, c, batch, step == "all-shuffled", step == "all-sizes")
    _same(idx, oracle, rng, pairs=True)
