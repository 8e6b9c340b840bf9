"""Box, sphere and ray queries sieve objects by their float32 copies and read the float64
store only near the boundary (``app.spatial.sieve``): the AABB trees' blocks
(``aabbtree.queries``) and every flat form's copy (``app.spatial.flat``, the `brute` index's
and any index's while everything moves). Objects within a float32 rounding of a query's
boundary, on either side, must still get the exact answer, as must copies clamped by
``to32`` and nodes the query holds whole.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.culling.frustum import camera_planes
from app.spatial import TREE_HEURISTICS, index_variants
from tests.helpers_ops import make
from tests.oracle import Oracle

TREES = [v for v in index_variants() if v[1] in TREE_HEURISTICS]
#: The flat forms: every index that has one, made flat by a batch of every object.
FLAT = [v for v in index_variants() if v[1] != "chunks"]


def _flatten(idx, ids: np.ndarray, centers: np.ndarray) -> None:
    """Every object moved in one batch (to where it is): the index goes flat."""
    idx.flat_min_objects = 0
    idx.update(ids, centers)
    assert idx._flat is not None


def _check_queries(idx, oracle: Oracle, lo, hi, q, qr, before=lambda: None) -> None:
    """Box, sphere and two rays against the oracle; ``before`` runs before each."""
    before()
    got = np.sort(idx.query_box(lo, hi))
    want = oracle.box(lo, hi)
    assert np.array_equal(got, want), (np.setdiff1d(got, want), np.setdiff1d(want, got))
    before()
    assert np.array_equal(np.sort(idx.query_sphere(q, qr)), oracle.sphere(q, qr))
    for d in ([1.0, 0.0, 0.0], [0.3, -0.2, 1.0]):
        o = q - 40.0 * np.asarray(d)
        before()
        gi, gt = idx.query_ray(o, d)
        wi, wt = oracle.ray(o, d)
        assert np.array_equal(np.sort(gi), np.sort(wi))
        np.testing.assert_allclose(np.sort(gt), np.sort(wt), rtol=1e-9, atol=1e-9)


def _boundary_scene(rng: np.random.Generator):
    """(ids, centres, radii, box, sphere): :func:`_near_boundaries`' objects, some the query
    holds whole (nodes inside it: no test at all) and some far away, ids shuffled."""
    c, r, box, sphere = _near_boundaries(rng, 3000)
    lo, hi = box
    inner = rng.uniform(lo + 3.0, hi - 3.0, (400, 3))
    c = np.r_[c, inner, rng.uniform(-500, 500, (400, 3))]
    r = np.r_[r, rng.uniform(0.1, 1.0, 800)]
    return rng.permutation(c.shape[0]).astype(np.int64), c, r, box, sphere


def _near_boundaries(rng: np.random.Generator, n: int):
    """Centres and radii of ``n`` spheres whose extents end within a few float32 roundings
    (about 1e-6 at these magnitudes) of the query box's faces and the query sphere, the
    float64 values between float32 neighbours; and the queries."""
    lo = np.array([10.0, -20.0, 30.0])
    hi = np.array([40.0, 5.0, 61.0])
    q = np.array([25.0, -7.0, 45.0])
    qr = 9.0
    r = rng.uniform(0.5, 2.0, n)
    c = rng.uniform(lo - 5.0, hi + 5.0, (n, 3))
    jitter = rng.uniform(-4e-6, 4e-6, n)
    kind = rng.integers(0, 3, n)
    for i in range(n):
        a = rng.integers(0, 3)
        if kind[i] == 0:  # the low side of face a: c + r near lo
            c[i, a] = lo[a] - r[i] + jitter[i]
        elif kind[i] == 1:  # the high side: c - r near hi
            c[i, a] = hi[a] + r[i] + jitter[i]
        else:  # the query sphere: |c - q| near r + qr
            u = rng.normal(size=3)
            c[i] = q + u / np.linalg.norm(u) * (r[i] + qr + jitter[i])
    return c, r, (lo, hi), (q, qr)


@pytest.mark.parametrize("small", [True, False], ids=["deep", "big-leaves"])
@pytest.mark.parametrize(("label", "name", "kwargs"), TREES, ids=[v[0] for v in TREES])
def test_objects_within_a_rounding_of_the_boundary_get_the_exact_answer(label, name, kwargs,
                                                                        small):
    rng = np.random.default_rng(17)
    ids, c, r, (lo, hi), (q, qr) = _boundary_scene(rng)
    idx = make(name, kwargs, small=small)
    oracle = Oracle()
    idx.insert(ids, c, r, None)
    oracle.insert(ids, c, r, None)
    for _ in range(2):  # the second time on the tree the first queries' notes split
        _check_queries(idx, oracle, lo, hi, q, qr)
        idx.maintain()
    # The boundary band is what the test is about: make sure it is populated.
    assert 0 < oracle.box(lo, hi).shape[0] < c.shape[0]
    idx.validate()


@pytest.mark.parametrize(("label", "name", "kwargs"), FLAT, ids=[v[0] for v in FLAT])
def test_flat_copies_within_a_rounding_of_the_boundary_get_the_exact_answer(label, name,
                                                                            kwargs):
    rng = np.random.default_rng(23)
    ids, c, r, (lo, hi), (q, qr) = _boundary_scene(rng)
    idx = make(name, kwargs)
    oracle = Oracle()
    idx.insert(ids, c, r, None)
    oracle.insert(ids, c, r, None)
    _check_queries(idx, oracle, lo, hi, q, qr, before=lambda: _flatten(idx, ids, c))
    assert 0 < oracle.box(lo, hi).shape[0] < c.shape[0]
    idx.validate()


CLAMPED = TREES + [v for v in FLAT if v[0] == "brute"]


@pytest.mark.parametrize(("label", "name", "kwargs"), CLAMPED, ids=[v[0] for v in CLAMPED])
def test_records_clamped_to_float32_are_decided_by_the_store(label, name, kwargs):
    """Spheres beyond float32's range keep clamped records: the sieve must hand them to the
    store's float64 test, not rule them in or out."""
    c = np.array([[1e39, 0.0, 0.0], [-1e39, 5.0, 5.0], [0.0, 0.0, 0.0], [3e38, 3e38, 0.0]])
    r = np.array([1.0, 1e39, 0.5, 1e38])
    ids = np.arange(4, dtype=np.int64)
    idx = make(name, kwargs)
    oracle = Oracle()
    idx.insert(ids, c, r, None)
    oracle.insert(ids, c, r, None)
    for lo, hi in (([-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]), ([9e38, -1, -1], [2e39, 1, 1]),
                   ([-2e39, -1e40, -1e40], [2e39, 1e40, 1e40])):
        lo, hi = np.array(lo, float), np.array(hi, float)
        assert np.array_equal(np.sort(idx.query_box(lo, hi)), oracle.box(lo, hi))
    for q, qr in (([0.0, 0.0, 0.0], 2.0), ([1e39, 0.0, 0.0], 5.0)):
        q = np.array(q)
        assert np.array_equal(np.sort(idx.query_sphere(q, qr)), oracle.sphere(q, qr))
    for o, d in (([0.0, 0.0, 0.0], [1.0, 0.0, 0.0]), ([-5e38, 0.0, 0.0], [-1.0, 0.0, 0.0])):
        gi, gt = idx.query_ray(np.array(o), np.array(d))
        wi, wt = oracle.ray(np.array(o), np.array(d))
        assert np.array_equal(np.sort(gi), np.sort(wi))
        np.testing.assert_allclose(np.sort(gt), np.sort(wt), rtol=1e-9)


@pytest.mark.parametrize("share", [1.0, 0.6])
def test_view_distance_tree_sieves_its_unbounded_list(share):
    """The view distance tree keeps objects without a finite view distance in a list, and
    a float32 copy of it once they are a large share (after a frustum query): its region
    queries then sieve that copy and walk the tree for the rest."""
    rng = np.random.default_rng(29)
    ids, c, r, (lo, hi), (q, qr) = _boundary_scene(rng)
    vd = np.where(rng.random(c.shape[0]) < share, np.inf, rng.uniform(5.0, 80.0, c.shape[0]))
    idx = make("viewdist", {})
    oracle = Oracle()
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    eye = np.array([0.0, 0.0, 0.0])
    idx.query_frustum(camera_planes(eye, np.array([1.0, 0.2, 0.1]), far=500.0), eye, True)
    assert idx._inf_kept
    _check_queries(idx, oracle, lo, hi, q, qr)
    idx.validate()
