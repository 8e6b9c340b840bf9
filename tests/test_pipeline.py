"""The viewer's cull pipeline: moved objects reach the index whichever way they are handed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.culling.pipeline import CullPipeline, IndexConfig


def _pipeline(n: int) -> tuple[CullPipeline, np.ndarray]:
    rng = np.random.default_rng(3)
    centers = rng.uniform(-50, 50, (n, 3))
    pipe = CullPipeline(IndexConfig("kd", True, None))
    pipe.build(np.arange(n, dtype=np.int64), centers, np.full(n, 0.5), None)
    return pipe, centers


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, np.int64)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("moved", [
    _readonly(np.arange(40, 100)),          # one run of rows (a view is handed over)
    _readonly(np.arange(0, 100)),           # every row
    _readonly(np.array([3, 7, 50, 51])),    # scattered rows (gathered)
    np.arange(40, 100),                     # writeable: may change, never trusted as a run
])
def test_update_moves_exactly_the_moved_rows(moved):
    pipe, centers = _pipeline(100)
    for _ in range(3):
        centers[moved] += np.array([1.0, -2.0, 0.5])
        pipe.update(moved, centers)
        got, _, _ = pipe.index.get(np.arange(100, dtype=np.int64))
        np.testing.assert_array_equal(got, centers)
    pipe.index.validate()


@pytest.mark.parametrize("name", ["chunks", "octree", "brute"])
def test_nearly_every_row_moving_hands_over_all_rows(name):
    """With all but a few rows moving, the pipeline passes every row (no gathered copy); the
    still ones keep their place, and the index holds exactly the array's rows after each frame
    (chunks then takes its one-pass path for the same batch frame after frame)."""
    n = 3000
    rng = np.random.default_rng(4)
    centers = rng.uniform(-50, 50, (n, 3))
    pipe = CullPipeline(IndexConfig(name))
    pipe.build(np.arange(n, dtype=np.int64), centers, np.full(n, 0.5), None)
    moved = _readonly(np.setdiff1d(np.arange(n), [5, 700, 2999]))  # three fixed objects
    for _ in range(6):
        centers[moved] += rng.normal(size=(moved.shape[0], 3))
        pipe.update(moved, centers)
        got, _, _ = pipe.index.get(np.arange(n, dtype=np.int64))
        np.testing.assert_array_equal(got, centers)
    pipe.index.validate()
    few = _readonly(np.arange(0, n, 2))  # half moving: the moved rows only, gathered
    centers[few] += 1.0
    pipe.update(few, centers)
    np.testing.assert_array_equal(pipe.index.get(np.arange(n, dtype=np.int64))[0], centers)


def test_a_reused_array_is_checked_once_and_a_new_one_again():
    pipe, centers = _pipeline(50)
    run = _readonly(np.arange(10, 20))
    pipe.update(run, centers)
    assert pipe._row_run(run, 50) == 10
    other = _readonly(np.array([10, 12, 13]))
    assert pipe._row_run(other, 50) == -1
    assert pipe._row_run(_readonly(np.arange(45, 55)), 50) == -1  # runs past the last row


@pytest.mark.parametrize("use_vd", [False, True])
def test_filter_in_view_keeps_exactly_what_the_query_would(use_vd):
    """Two-pass occlusion's pass 1 filters last frame's ids with the indexes' own predicates:
    the result is the given ids that brute force's frustum query returns."""
    from app.culling.frustum import camera_planes, filter_in_view
    from app.spatial import create_index

    rng = np.random.default_rng(11)
    n = 2000
    c = rng.uniform(-60, 60, (n, 3))
    r = rng.uniform(0.1, 4, n)
    vd = rng.uniform(5, 80, n)
    ids = np.arange(n, dtype=np.int64)
    brute = create_index("brute")
    brute.insert(ids, c, r, vd)
    for _ in range(5):
        eye = rng.uniform(-30, 30, 3)
        planes = camera_planes(eye, eye + rng.normal(size=3), far=70.0)
        want = np.sort(brute.query_frustum(planes, eye=eye, use_view_distance=use_vd).visible)
        subset = np.sort(rng.choice(n, 700, replace=False)).astype(np.int64)
        got = filter_in_view(subset, c, r, vd, planes, eye, use_vd)
        np.testing.assert_array_equal(got, np.intersect1d(subset, want))
        assert filter_in_view(np.zeros(0, np.int64), c, r, vd, planes, eye, use_vd).size == 0


def _oracle_in_view(c, r, vd, planes, eye, use_vd):
    """The contract's definition in plain numpy: in the frustum, and within view distance."""
    dots = c @ planes[:, :3].T + planes[:, 3]
    inside = (dots >= -r[:, None]).all(axis=1)
    near = np.sqrt(((c - eye) ** 2).sum(axis=1)) <= vd
    return inside, inside & (near | (not use_vd))


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31), n=st.integers(0, 3000), use_vd=st.booleans(),
       parallel=st.booleans(), spread=st.sampled_from([1.0, 60.0, 1e4]))
def test_count_in_view_is_the_contracts_count(seed, n, use_vd, parallel, spread):
    """The stage count's compiled pass counts exactly what the contract's predicates accept,
    in both kernels, and its second count is the size of brute force's unoccluded answer."""
    from app.culling.frustum import camera_planes, count_in_view
    from app.spatial import create_index

    rng = np.random.default_rng(seed)
    c = rng.uniform(-spread, spread, (n, 3))
    r = rng.uniform(0.01, 5.0, n)
    vd = np.where(rng.random(n) < 0.2, np.inf, rng.uniform(1, 2 * spread, n))
    eye = rng.uniform(-spread / 2, spread / 2, 3)
    planes = camera_planes(eye, eye + rng.normal(size=3), far=spread)
    inside, in_view = _oracle_in_view(c, r, vd, planes, eye, use_vd)
    got = count_in_view(c, r, vd, planes, eye, use_vd, parallel)
    assert got == (int(inside.sum()), int(in_view.sum()))
    if n:
        brute = create_index("brute")
        brute.insert(np.arange(n, dtype=np.int64), c, r, vd)
        res = brute.query_frustum(planes, eye=eye, use_view_distance=use_vd)
        assert got[1] == res.visible.shape[0]


def test_stage_counts_split_the_culled_objects_by_stage():
    """stage_counts: frustum + distance + occlusion + drawn = objects, each stage's count is
    the oracle's, a stage that is off is None, and nothing is read when the query's answer
    already is the count."""
    from app.culling.frustum import camera_planes

    rng = np.random.default_rng(4)
    n = 4000
    c = rng.uniform(-200, 200, (n, 3))
    r = rng.uniform(0.5, 2.0, n)
    vd = r * 60
    ids = np.arange(n, dtype=np.int64)
    pipe = CullPipeline(IndexConfig("octree", False, None))
    pipe.build(ids, c, r, vd)
    eye = np.array([0.0, 5.0, 150.0])
    planes = camera_planes(eye, np.zeros(3), far=250.0)
    inside, near = _oracle_in_view(c, r, vd, planes, eye, True)
    kw = dict(centers=c, radii=r, view_distances=vd)
    for use_vd in (False, True):
        res = pipe.cull(planes, eye, frustum=True, view_distance=use_vd)
        k = res.visible.shape[0]
        s = pipe.stage_counts(planes, eye, frustum=True, view_distance=use_vd, occlusion=False,
                              visible=k, drawn=k, **kw)
        assert s.frustum == n - inside.sum() and s.occlusion is None
        assert s.distance == ((inside.sum() - near.sum()) if use_vd else None)
        assert s.frustum + (s.distance or 0) + s.drawn == n == s.culled + s.drawn
    # occlusion: whatever passed frustum and distance but was not drawn
    drawn = int(near.sum()) // 2
    s = pipe.stage_counts(planes, eye, frustum=True, view_distance=True, occlusion=True,
                          visible=drawn, drawn=drawn, **kw)
    assert (s.frustum, s.distance, s.occlusion) == (n - inside.sum(), inside.sum() - near.sum(),
                                                    near.sum() - drawn)
    # frustum culling off: only the view-distance filter culls
    s = pipe.stage_counts(planes, eye, frustum=False, view_distance=True, occlusion=True,
                          visible=1234, drawn=1234, **kw)
    assert (s.frustum, s.distance, s.occlusion, s.drawn) == (None, n - 1234, None, 1234)


def test_stage_counts_of_a_large_scene_are_refreshed_every_few_frames(monkeypatch):
    """Above COUNT_ROWS_PER_FRAME rows the pass runs every ceil(n / that)-th frame; the frames
    between repeat its counts and say so."""
    import app.culling.pipeline as pl
    from app.culling.frustum import camera_planes

    monkeypatch.setattr(pl, "COUNT_ROWS_PER_FRAME", 1000)  # 3,000 rows: every third frame
    rng = np.random.default_rng(8)
    n = 3000
    c = rng.uniform(-100, 100, (n, 3))
    r = np.ones(n)
    vd = np.full(n, 80.0)
    pipe = CullPipeline(IndexConfig("brute"))
    eye = np.zeros(3)
    kw = dict(centers=c, radii=r, view_distances=vd, frustum=True, view_distance=True,
              occlusion=True, visible=0, drawn=0)
    first = pipe.stage_counts(camera_planes(eye, np.array([1.0, 0, 0])), eye, frame=0, **kw)
    other = camera_planes(eye, np.array([-1.0, 0, 0]))
    later = [pipe.stage_counts(other, eye, frame=f, **kw) for f in (1, 2, 3)]
    assert first.counted and not later[0].counted and not later[1].counted and later[2].counted
    assert later[0].frustum == first.frustum and later[2].frustum != first.frustum
