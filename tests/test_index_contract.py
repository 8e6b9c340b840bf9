"""Every index and variant against the brute-force oracle (design.md's index contract).

Random operation sequences (inserts, small moves, long jumps, resizes, removals,
re-inserts) are checked after every step: all four queries must equal the oracle exactly and
``validate()`` must pass. Small split thresholds force deep structures on small data.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.culling.frustum import camera_planes
from app.spatial import create_index, index_variants
from tests.helpers_ops import (
    RandomOps,
    assert_rejected,
    assert_same,
    hundred_objects,
    make,
    snapshot,
)
from tests.oracle import Oracle

VARIANTS = index_variants()
IDS = [label for label, _, _ in VARIANTS]


def random_camera(rng: np.random.Generator, spread: float):
    eye = rng.uniform(-spread, spread, 3)
    target = eye + rng.normal(size=3)
    far = rng.uniform(0.5, 2.0) * spread * 2
    return eye, camera_planes(eye, target, fovy_deg=rng.uniform(30, 90),
                              aspect=rng.uniform(0.5, 2), near=0.1, far=far)


def check_all(idx, oracle: Oracle, rng: np.random.Generator, spread: float) -> None:
    idx.validate()
    assert len(idx) == len(oracle.objs)
    for _ in range(3):
        eye, planes = random_camera(rng, spread)
        for use_vd in (False, True):
            res = idx.query_frustum(planes, eye=eye, use_view_distance=use_vd)
            got = np.sort(res.visible)
            want = oracle.frustum(planes, eye, use_vd)
            assert np.array_equal(got, want), (
                f"frustum use_vd={use_vd}: extra {np.setdiff1d(got, want)[:10]}, "
                f"missing {np.setdiff1d(want, got)[:10]}")
            assert res.working_set >= len(res.visible) or use_vd
        lo = rng.uniform(-spread, spread, 3)
        hi = lo + rng.uniform(0, spread, 3)
        assert np.array_equal(np.sort(idx.query_box(lo, hi)), oracle.box(lo, hi))
        q = rng.uniform(-spread, spread, 3)
        qr = rng.uniform(0, spread / 2)
        assert np.array_equal(np.sort(idx.query_sphere(q, qr)), oracle.sphere(q, qr))
        o = rng.uniform(-spread, spread, 3)
        d = rng.normal(size=3)
        gi, gt = idx.query_ray(o, d)
        wi, wt = oracle.ray(o, d)
        assert np.array_equal(np.sort(gi), np.sort(wi))
        assert np.all(np.diff(gt) >= 0), "ray hits must come nearest first"
        np.testing.assert_allclose(np.sort(gt), np.sort(wt), rtol=1e-9, atol=1e-9)


ops = st.lists(
    st.tuples(st.sampled_from(["insert", "small", "jump", "resize", "remove", "reinsert", "vd"]),
              st.integers(1, 40)),
    min_size=1, max_size=10,
)


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
@given(seq=ops, seed=st.integers(0, 2**31 - 1))
def test_random_operations_match_oracle(label, name, kwargs, seq, seed):
    rng = np.random.default_rng(seed)
    spread = 50.0
    idx = make(name, kwargs)
    oracle = Oracle()
    steps = RandomOps(idx, oracle, rng, spread, with_vd=True, sort_ids=False)
    for op, n in seq:
        steps.apply(op, n)
        check_all(idx, oracle, rng, spread)


def awkward_sets():
    rng = np.random.default_rng(7)
    n = 300
    sets = {
        "one-point": (np.zeros((n, 3)) + 5.0, np.full(n, 1.0)),
        "line": (np.outer(rng.uniform(-100, 100, n), [1.0, 2.0, -0.5]), rng.uniform(0.1, 2, n)),
        "plane": (np.c_[rng.uniform(-100, 100, (n, 2)), np.zeros(n)], rng.uniform(0.1, 2, n)),
        "radii-5-orders": (rng.uniform(-100, 100, (n, 3)), 10 ** rng.uniform(-3, 2, n)),
        "far-outliers": (np.r_[rng.uniform(-50, 50, (n - 3, 3)), [[1e6, 0, 0], [0, -1e6, 0],
                                                                  [1e6, 1e6, 1e6]]],
                         rng.uniform(0.1, 2, n)),
        "zero-radius": (rng.uniform(-50, 50, (n, 3)), np.zeros(n)),
        "one-object": (np.array([[1.0, 2.0, 3.0]]), np.array([0.5])),
        "empty": (np.zeros((0, 3)), np.zeros(0)),
    }
    return sets


@pytest.mark.parametrize("data", list(awkward_sets()))
@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_awkward_data(label, name, kwargs, data):
    centers, radii = awkward_sets()[data]
    rng = np.random.default_rng(11)
    for small in (True, False):
        idx = make(name, kwargs, small=small)
        oracle = Oracle()
        ids = np.arange(len(radii), dtype=np.int64)
        vd = rng.uniform(0, 200, len(radii))
        idx.insert(ids, centers, radii, vd)
        oracle.insert(ids, centers, radii, vd)
        spread = 120.0
        check_all(idx, oracle, rng, spread)
        if len(ids):
            # everything moves a little, then half of it jumps, then a third is removed
            c2 = centers + rng.normal(scale=0.3, size=centers.shape)
            idx.update(ids, c2)
            oracle.update(ids, c2)
            check_all(idx, oracle, rng, spread)
            half = ids[::2]
            c3 = rng.uniform(-100, 100, (len(half), 3))
            idx.update(half, c3)
            oracle.update(half, c3)
            idx.remove(ids[::3])
            oracle.remove(ids[::3])
            check_all(idx, oracle, rng, spread)


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_removed_objects_beyond_float32_squares_stay_removed(label, name, kwargs):
    """Objects beyond 1e19 (whose squared float32 distance overflows) with an endless view
    distance, removed: a view-distance query must not bring their dead rows back (the
    float32 scans once returned them, as id -1)."""
    idx = make(name, kwargs, small=False)
    oracle = Oracle()
    rng = np.random.default_rng(3)
    n = 300
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-50, 50, (n, 3))
    c[:20] = rng.uniform(2e19, 4e19, (20, 3))
    r = rng.uniform(0.5, 2.0, n)
    idx.insert(ids, c, r, np.full(n, np.inf))
    oracle.insert(ids, c, r, np.full(n, np.inf))
    idx.remove(ids[:20])
    oracle.remove(ids[:20])
    everything = np.array([[1.0, 0.0, 0.0, 1e30]])
    for planes in (everything, camera_planes([0, 0, 0], [1, 0.2, 0.1], far=60)):
        for use_vd in (True, False):
            got = idx.query_frustum(planes, eye=np.zeros(3), use_view_distance=use_vd).visible
            assert np.array_equal(np.sort(got), oracle.frustum(planes, np.zeros(3), use_vd))


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_the_same_batch_again_is_checked_and_follows_removals(label, name, kwargs):
    """A batch of the same ids as the last one (which indexes may write without a look-up):
    a bad value in it is refused and changes nothing; after a removal of one of its ids
    that id is unknown, and after it is inserted again (another slot) the batch moves it."""
    idx = make(name, kwargs, small=False)
    oracle = Oracle()
    rng = np.random.default_rng(5)
    n = 400
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-50, 50, (n, 3))
    r = rng.uniform(0.5, 2.0, n)
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    movers = rng.choice(n, 40, replace=False)
    planes = camera_planes([0, 0, 0], [1, 0.2, 0.1], far=60)

    def check():
        got = idx.query_frustum(planes).visible
        assert np.array_equal(np.sort(got), oracle.frustum(planes))

    for _ in range(3):
        c[movers] += 0.5
        idx.update(movers, c[movers])
        oracle.update(movers, c[movers])
        check()
    for bad in (np.nan, np.inf):
        rows = c[movers] + 1.0
        rows[7, 2] = bad
        with pytest.raises(ValueError):
            idx.update(movers, rows)
        check()
    with pytest.raises(ValueError):
        idx.update(movers, c[movers] + 1.0, np.full(40, -1.0))
    check()
    # Others despawn and new objects take their slots: the batch's own ids are untouched
    # (an index may keep their slots), and it moves them exactly.
    others = np.setdiff1d(ids, movers)[:5]
    idx.remove(others)
    oracle.remove(others)
    spawned = np.arange(1000, 1005, dtype=np.int64)
    idx.insert(spawned, c[others], r[others])
    oracle.insert(spawned, c[others], r[others])
    for _ in range(2):
        c[movers] += 0.5
        idx.update(movers, c[movers])
        oracle.update(movers, c[movers])
        check()
    idx.remove(movers[:1])
    oracle.remove(movers[:1])
    with pytest.raises(ValueError, match=str(int(movers[0]))):
        idx.update(movers, c[movers] + 1.0)
    check()
    idx.insert(np.array([900], np.int64), np.zeros((1, 3)), np.ones(1))  # may take the slot
    idx.insert(movers[:1], c[movers[:1]], r[movers[:1]])
    oracle.insert(np.array([900], np.int64), np.zeros((1, 3)), np.ones(1))
    oracle.insert(movers[:1], c[movers[:1]], r[movers[:1]])
    for _ in range(2):
        c[movers] += 0.5
        idx.update(movers, c[movers])
        oracle.update(movers, c[movers])
        check()
    idx.validate()


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_bad_input_raises_and_changes_nothing(label, name, kwargs):
    idx, rng = hundred_objects(name, kwargs, 50.0)
    before = snapshot(idx)
    good_c = rng.uniform(-50, 50, (3, 3))
    nan_c = good_c.copy()
    nan_c[1, 2] = np.nan
    inf_c = good_c.copy()
    inf_c[2, 0] = np.inf
    cases = [
        ("NaN", lambda: idx.insert(np.array([500, 501, 502]), nan_c, np.ones(3)), "501"),
        ("inf", lambda: idx.insert(np.array([500, 501, 502]), inf_c, np.ones(3)), "502"),
        ("neg radius", lambda: idx.insert(np.array([500, 501, 502]), good_c,
                                          np.array([1, -1, 1.0])), "501"),
        ("dup existing", lambda: idx.insert(np.array([500, 7, 502]), good_c, np.ones(3)), "7"),
        ("dup in batch", lambda: idx.insert(np.array([500, 500, 502]), good_c, np.ones(3)), "500"),
        # ids far past the direct table: the hashed side of the one-pass insert check
        ("dup in batch, hashed", lambda: idx.insert(np.array([500, 2**50, 2**50]), good_c,
                                                    np.ones(3)), "1125899906842624"),
        ("length", lambda: idx.insert(np.array([500, 501]), good_c, np.ones(3)), "3"),
        ("update unknown", lambda: idx.update(np.array([1, 999, 2]), good_c), "999"),
        ("update NaN", lambda: idx.update(np.array([1, 2, 3]), nan_c), "2"),
        ("update neg radius", lambda: idx.update(np.array([1, 2, 3]), good_c,
                                                 radii=np.array([1, 1, -2.0])), "3"),
        ("remove unknown", lambda: idx.remove(np.array([4, 5, 12345])), "12345"),
        ("remove dup", lambda: idx.remove(np.array([4, 4])), "4"),
        ("vd NaN", lambda: idx.insert(np.array([500, 501, 502]), good_c, np.ones(3),
                                      np.array([1, np.nan, 1])), "501"),
        # uint64 ids past int64: casting would wrap them onto other (negative) ids
        ("uint64 >= 2^63", lambda: idx.insert(np.array([500, 2**63, 2**64 - 1], np.uint64),
                                              good_c, np.ones(3)), "9223372036854775808"),
        ("update uint64", lambda: idx.update(np.array([1, 2, 2**63 + 1], np.uint64), good_c),
         "9223372036854775809"),
        ("remove uint64", lambda: idx.remove(np.array([2**63], np.uint64)), "9223372036854775808"),
        ("float ids", lambda: idx.remove(np.array([1.0, 2.0])), "integers"),
    ]
    assert_rejected(idx, cases, before, "batch")


FORMS = ("int32 ids", "uint32 ids", "list ids", "strided ids", "float32 centres",
         "strided centres", "Fortran centres")


def _in_form(form: str, ids: np.ndarray, rows: np.ndarray) -> tuple:
    """(ids, centres) as a caller may hold them (one of FORMS): the values of the int64 /
    float64 batch (ids, rows) in another type or layout."""
    wide = np.zeros((rows.shape[0], 5))
    wide[:, 1:4] = rows
    return {
        "int32 ids": (ids.astype(np.int32), rows),
        "uint32 ids": (ids.astype(np.uint32), rows),
        "list ids": (ids.tolist(), rows),
        "strided ids": (np.repeat(ids, 2)[::2], rows),
        "float32 centres": (ids, rows.astype(np.float32)),
        "strided centres": (ids, wide[:, 1:4]),
        "Fortran centres": (ids, np.asfortranarray(rows)),
    }[form]


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_batches_in_any_form_apply_alike_and_bad_rows_in_them_are_refused(label, name,
                                                                           kwargs):
    """A batch of int32 ids, float32 centres, a strided view or a list (copied losslessly
    into the compiled paths' form) moves, inserts and removes exactly as the int64 / float64
    batch of the same values does on a twin index; a bad row in such a batch (a NaN centre,
    an unknown id) is refused, named, and changes nothing."""
    idx, rng = hundred_objects(name, kwargs, 50.0)
    twin, _ = hundred_objects(name, kwargs, 50.0)
    for k, form in enumerate(FORMS):
        ids = np.sort(rng.choice(100, 20, replace=False)).astype(np.int64)[::-1].copy()
        rows = rng.uniform(-50, 50, (20, 3)).astype(np.float32).astype(np.float64)
        idx.update(*_in_form(form, ids, rows))
        twin.update(ids, rows)
        assert_same(snapshot(twin), snapshot(idx))
        new = np.arange(1000 + 10 * k, 1010 + 10 * k, dtype=np.int64)
        idx.insert(*_in_form(form, new, rows[:10]), np.full(10, 0.5, np.float32))
        twin.insert(new, rows[:10], np.full(10, 0.5))
        assert_same(snapshot(twin), snapshot(idx))
        idx.remove(_in_form(form, new[:3], rows[:3])[0])
        twin.remove(new[:3])
        assert_same(snapshot(twin), snapshot(idx))
        idx.validate()
    before = snapshot(idx)
    rows = rng.uniform(-50, 50, (3, 3))
    nan_rows = rows.astype(np.float32)
    nan_rows[1, 0] = np.nan
    cases = [
        ("NaN in float32 centres", lambda: idx.update(np.array([1, 2, 3]), nan_rows), "2"),
        ("unknown int32 id", lambda: idx.update(np.array([1, 999, 3], np.int32), rows), "999"),
        ("unknown id in a list", lambda: idx.remove([4, 5, 12345]), "12345"),
        ("known int32 id inserted", lambda: idx.insert(np.array([500, 7, 502], np.int32),
                                                       rows.astype(np.float32),
                                                       np.ones(3, np.float32)), "7"),
        ("negative float32 radius", lambda: idx.update(np.array([1, 2, 3], np.int32), rows,
                                                       np.array([1, -1, 1], np.float32)),
         "2"),
    ]
    assert_rejected(idx, cases, before, "batch")


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_a_bad_row_in_a_batch_big_enough_for_both_cores_is_refused(label, name, kwargs):
    """A batch of PARALLEL_MIN rows (not every object, not last frame's movers) resolves
    its ids on both cores: one bad value anywhere in it (a NaN centre, a negative or
    infinite radius, a NaN view distance) is refused and changes nothing."""
    from app.parallelism import PARALLEL_MIN

    rng = np.random.default_rng(11)
    n = PARALLEL_MIN + 200
    idx = make(name, kwargs, small=False)
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-300, 300, (n, 3))
    idx.insert(ids, c, rng.uniform(0.5, 2.0, n), rng.uniform(50, 200, n))
    batch = np.sort(rng.choice(n, PARALLEL_MIN, replace=False)).astype(np.int64)
    rows = c[batch] + 0.5
    before = snapshot(idx)
    cases = []
    r = np.ones(PARALLEL_MIN)
    for at in (0, PARALLEL_MIN // 2 + 7, PARALLEL_MIN - 1):
        bad_c = rows.copy()
        bad_c[at, 1] = np.nan
        bad_r = r.copy()
        bad_r[at] = -1.0
        inf_r = r.copy()
        inf_r[at] = np.inf
        bad_v = np.full(PARALLEL_MIN, 100.0)
        bad_v[at] = np.nan
        named = str(int(batch[at]))
        cases += [
            (f"NaN centre at {at}", lambda b=bad_c: idx.update(batch, b), named),
            (f"negative radius at {at}", lambda b=bad_r: idx.update(batch, rows, b), named),
            (f"infinite radius at {at}", lambda b=inf_r: idx.update(batch, rows, b), named),
            (f"NaN view distance at {at}",
             lambda b=bad_v: idx.update(batch, rows, r, b), named),
        ]
    assert_rejected(idx, cases, before, "big batch")
    idx.update(batch, rows)  # and the good batch goes through
    assert np.array_equal(idx.get(batch)[0], rows)


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_query_camera_is_checked_and_any_form_answers_alike(label, name, kwargs):
    """query_frustum's planes and eye: a bad camera (NaN or infinite numbers, wrong shapes,
    no eye where view distances need one) is refused and changes nothing; the forms a
    caller may pass (float32 planes, Fortran order, a list for the eye, no eye) answer as
    contiguous float64 arrays do, whichever check path they take."""
    idx, _ = hundred_objects(name, kwargs, 20.0)
    eye = np.array([-30.0, 1.0, 2.0])
    planes = camera_planes(eye, [0.0, 0.0, 0.0], far=80)
    want = np.sort(idx.query_frustum(planes, eye).visible)
    want_vd = np.sort(idx.query_frustum(planes, eye, use_view_distance=True).visible)
    assert 0 < want.shape[0] < 100
    for form_p, form_e in ((planes.astype(np.float32), eye), (np.asfortranarray(planes), eye),
                           (planes, list(eye)), (planes.tolist(), eye.reshape(1, 3))):
        got = idx.query_frustum(form_p, form_e, use_view_distance=True).visible
        assert np.array_equal(np.sort(got), want_vd)
    assert np.array_equal(np.sort(idx.query_frustum(planes).visible), want)
    before = snapshot(idx)
    nan_p = planes.copy()
    nan_p[2, 1] = np.nan
    inf_e = eye.copy()
    inf_e[0] = np.inf
    cases = [
        ("NaN plane", lambda: idx.query_frustum(nan_p, eye), "planes"),
        ("infinite plane", lambda: idx.query_frustum(nan_p * 0 + np.inf, eye), "planes"),
        ("planes (K, 3)", lambda: idx.query_frustum(planes[:, :3], eye), "planes"),
        ("planes 1-D", lambda: idx.query_frustum(planes[0], eye), "planes"),
        ("infinite eye", lambda: idx.query_frustum(planes, inf_e), "eye"),
        ("eye of 2", lambda: idx.query_frustum(planes, eye[:2]), "eye"),
        ("no eye, view distance", lambda: idx.query_frustum(planes, None, True), "eye"),
    ]
    assert_rejected(idx, cases, before, "query")


@pytest.mark.parametrize("scale", [1e-300, 1e-150, 1.0, 1e150, 1e300])
def test_ray_direction_length_does_not_matter(scale):
    """Only the direction's sense counts: huge or tiny finite vectors answer like the unit one."""
    idx = create_index("brute")
    idx.insert(np.arange(3), np.array([[5.0, 0, 0], [9.0, 0.5, 0], [-5.0, 0, 0]]), np.ones(3))
    ids, t = idx.query_ray(np.zeros(3), np.array([scale, 0.0, 0.0]))
    assert ids.tolist() == [0, 1]
    np.testing.assert_allclose(t, [4.0, 9.0 - np.sqrt(0.75)])
