"""The branch-free float32 scan is exact: spheres within float32 rounding of a plane or of
their view distance are decided in float64, so `brute` and `chunks` equal the oracle even
for spheres placed exactly on the boundary, far from the origin."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from app.bench.workloads import frustum_truth
from app.culling.frustum import camera_planes
from app.spatial import create_index
from app.spatial.scan import IN, NEAR, OUTSIDE, compact, verdict_words


def _boundary_spheres(rng: np.random.Generator, n: int, planes: np.ndarray, eye: np.ndarray):
    """Spheres exactly touching a random plane from outside (float64), exactly at their view
    distance, and a hair either side of both."""
    c = eye + rng.normal(size=(n, 3)) * 50.0
    p = planes[rng.integers(0, planes.shape[0], n)]
    # Move each centre along its plane's normal so that a.c + d == -r (touching from outside).
    r = rng.uniform(0.1, 5.0, n)
    dist = np.einsum("ij,ij->i", p[:, :3], c) + p[:, 3]
    c = c - (dist + r)[:, None] * p[:, :3]
    hair = rng.choice([-1.0, 0.0, 1.0], n) * np.abs(c).max(axis=1) * 2.0 ** -50
    c = c + hair[:, None] * p[:, :3]
    vd = np.linalg.norm(c - eye, axis=1) * rng.choice([1.0, 1.0 - 1e-15, 1.0 + 1e-15], n)
    return c, r, vd


@pytest.mark.parametrize("name", ["brute", "chunks"])
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31), offset=st.sampled_from([0.0, 1e3, 1e5, -3e6]))
def test_boundary_spheres_match_the_predicates(name, seed, offset):
    """Against the contract's arithmetic evaluated elementwise in float64 (``frustum_truth``,
    the compiled predicates' order of operations): at an exact boundary the oracle's matrix
    product rounds differently, so it cannot referee these."""
    rng = np.random.default_rng(seed)
    eye = rng.normal(size=3) * 10.0 + offset
    planes = camera_planes(eye, eye + rng.normal(size=3), far=80.0)
    c, r, vd = _boundary_spheres(rng, 6000, planes, eye)
    idx = create_index(name)
    idx.insert(np.arange(c.shape[0], dtype=np.int64), c, r, vd)
    for use_vd in (False, True):
        got = np.sort(idx.query_frustum(planes, eye=eye, use_view_distance=use_vd).visible)
        want = frustum_truth(c, r, planes, eye, vd if use_vd else None)
        assert np.array_equal(got, want), (use_vd, np.setdiff1d(got, want)[:5],
                                           np.setdiff1d(want, got)[:5])


# Not cached: numba's own cache of a test module's kernel is stamped with this file only, so
# it kept an older compact inlined after compact changed (the project's closure stamps cover
# app/ alone); compiling it costs a second.
@njit
def _compact_range(codes, lo, hi):
    sure = np.empty(hi - lo, np.int64)
    near = np.empty(hi - lo, np.int64)
    ns, nn, outside = compact(codes, verdict_words(codes), lo, hi, sure, 0, near, 0)
    return sure[:ns], near[:nn], outside


@settings(max_examples=200, deadline=None)
@given(codes=st.lists(st.sampled_from([0, 1, 2, 4]), max_size=70), data=st.data())
def test_compact_takes_every_position_by_verdict(codes, data):
    """Any range, aligned or not, of any length: IN positions to one list, NEAR to the other,
    OUT and OUTSIDE to neither, the OUTSIDE ones counted (brute force's frustum count)."""
    c = np.array(codes, dtype=np.uint8)
    lo = data.draw(st.integers(0, c.shape[0]))
    hi = data.draw(st.integers(lo, c.shape[0]))
    sure, near, outside = _compact_range(c, lo, hi)
    span = np.arange(lo, hi)
    assert np.array_equal(sure, span[c[lo:hi] == IN])
    assert np.array_equal(near, span[c[lo:hi] == NEAR])
    assert outside == int(np.count_nonzero(c[lo:hi] == OUTSIDE))


@pytest.mark.parametrize("name", ["brute", "chunks"])
def test_coordinates_beyond_float32_with_dead_rows(name):
    """A coordinate past float32's range makes the tolerance huge; dead rows (radius -inf)
    must still come out OUT, not NEAR (an infinite tolerance once made them visible)."""
    from app.culling.frustum import camera_planes
    from app.spatial import create_index
    from tests.oracle import Oracle

    rng = np.random.default_rng(5)
    n = 600
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0, 100, (n, 3))
    c[7] = (1e300, -1e300, 5.0)
    idx, oracle = create_index(name), Oracle()
    for o in (idx, oracle):
        o.insert(ids, c, np.full(n, 0.5))
        o.remove(ids[::3])
    eye = np.full(3, 50.0)
    planes = camera_planes(eye, np.array([90.0, 60.0, 40.0]), far=70.0)
    got = np.sort(idx.query_frustum(planes, eye=eye).visible)
    assert np.array_equal(got, oracle.frustum(planes, eye, False))
