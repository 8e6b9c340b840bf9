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
