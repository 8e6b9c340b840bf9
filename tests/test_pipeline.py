"""The viewer's cull pipeline: moved objects reach the index whichever way they are handed."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_stage_counts_are_the_queries_own():
    """frame_stages takes the counts the frame's query made (no pass of its own): with brute
    force exactly the per-object first failed test (view distance, then frustum), adding up
    to the objects with what was drawn; a stage that is off is None; frustum culling off,
    the view-distance filter's count."""
    from app.culling.frustum import camera_planes

    rng = np.random.default_rng(4)
    n = 4000
    c = rng.uniform(-200, 200, (n, 3))
    r = rng.uniform(0.5, 2.0, n)
    vd = r * 60
    ids = np.arange(n, dtype=np.int64)
    eye = np.array([0.0, 5.0, 150.0])
    planes = camera_planes(eye, np.zeros(3), far=250.0)
    inside, _ = _oracle_in_view(c, r, vd, planes, eye, True)
    far = np.sqrt(((c - eye) ** 2).sum(axis=1)) > vd
    for name in ("brute", "octree"):
        pipe = CullPipeline(IndexConfig(name, False, None))
        pipe.build(ids, c, r, vd)
        for use_vd in (False, True):
            first = pipe.first_cull(planes, eye, frustum=True, view_distance=use_vd)
            s = pipe.frame_stages(drawn=first.shape[0])
            assert s.occlusion is None and s.drawn == first.shape[0]
            assert s.frustum + (s.distance or 0) + s.drawn == n == s.culled + s.drawn
            if not use_vd:
                assert s.distance is None and s.frustum == n - inside.sum()
            elif name == "brute":
                assert (s.distance, s.frustum) == (far.sum(), (~far & ~inside).sum())
            else:  # a node beyond every view distance below it counts as view distance
                assert s.distance <= far.sum() and s.frustum <= (~inside).sum()
    # frustum culling off: only the view-distance filter culls
    first = pipe.first_cull(planes, eye, frustum=False, view_distance=True)
    s = pipe.frame_stages(drawn=first.shape[0])
    assert (s.frustum, s.distance, s.occlusion, s.drawn) == (None, far.sum(), None,
                                                             n - far.sum())


def test_two_pass_stage_counts_leave_out_what_the_early_set_drew():
    """Two-pass: the late cull's occluded objects that the early set drew are drawn, not
    culled, so the counts and the drawn objects still add up."""
    from app.culling.pipeline import stage_counts
    from app.spatial import QueryResult

    res = QueryResult(visible=np.arange(10), working_set=0, nodes_visited=0,
                      occluded_objects=7, culled_frustum=50, culled_distance=33)
    s = stage_counts(res, 100, frustum=True, view_distance=True, occlusion=True, drawn=12)
    assert (s.frustum, s.distance, s.occlusion, s.drawn) == (50, 33, 5, 12)
    assert s.frustum + s.distance + s.occlusion + s.drawn == 100
