"""The collision broad-phase contract (design.md): ``query_pairs`` on every index, exactly.

Every variant against the oracle's all-pairs definition after every step of random operation
sequences (inserts, small moves, moves of everything, long jumps, resizes, removals,
re-inserts), with and without the ``ids`` filter and with random margins; awkward data; bad
input rejected with nothing changed; the shared kernels of ``app.spatial.pairs``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.spatial import INDEX_NAMES, create_index, index_variants
from app.spatial.pairs import (
    all_pairs,
    new_pairs,
    pairs_between,
    push_pair,
    selection,
    sweep_pairs,
)
from tests.helpers_ops import RandomOps, assert_rejected, hundred_objects, make, snapshot
from tests.oracle import Oracle
from tests.test_index_contract import awkward_sets

VARIANTS = index_variants()
IDS = [label for label, _, _ in VARIANTS]


def sorted_rows(p: np.ndarray) -> np.ndarray:
    return p[np.lexsort((p[:, 1], p[:, 0]))]


def assert_pairs(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == np.int64 and got.ndim == 2 and got.shape[1] == 2, (
        f"{what}: {got.dtype} {got.shape}")
    assert (got[:, 0] < got[:, 1]).all(), f"{what}: a row not ordered a < b"
    got = sorted_rows(got)
    if not np.array_equal(got, want):
        g = {tuple(r) for r in got.tolist()}
        w = {tuple(r) for r in want.tolist()}
        raise AssertionError(f"{what}: {len(got)} rows ({len(g)} distinct), want {len(want)}; "
                             f"extra {sorted(g - w)[:5]}, missing {sorted(w - g)[:5]}")


def check_pairs(idx, oracle: Oracle, rng: np.random.Generator) -> None:
    idx.validate()
    live = np.array(sorted(oracle.objs), dtype=np.int64)
    for margin in (0.0, float(rng.uniform(0, 2)), float(rng.uniform(0, 30))):
        assert_pairs(idx.query_pairs(margin=margin), oracle.pairs(margin=margin),
                     f"margin {margin}")
        if len(live):
            some = rng.choice(live, size=int(rng.integers(1, len(live) + 1)), replace=False)
            assert_pairs(idx.query_pairs(ids=some, margin=margin),
                         oracle.pairs(ids=some, margin=margin), f"ids, margin {margin}")
    # one id, given twice and as a plain list
    if len(live):
        one = [int(live[0]), int(live[0])]
        assert_pairs(idx.query_pairs(ids=one), oracle.pairs(ids=one), "one id twice")
    assert idx.query_pairs(ids=np.zeros(0, np.int64)).shape == (0, 2)


ops = st.lists(
    st.tuples(st.sampled_from(["insert", "small", "all", "jump", "resize", "remove",
                               "reinsert"]),
              st.integers(1, 40)),
    min_size=1, max_size=8,
)


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
@settings(max_examples=12)
@given(seq=ops, seed=st.integers(0, 2**31 - 1))
def test_random_operations_match_oracle(label, name, kwargs, seq, seed):
    rng = np.random.default_rng(seed)
    spread = 15.0  # dense enough that pairs are many
    idx = make(name, kwargs)
    oracle = Oracle()
    steps = RandomOps(idx, oracle, rng, spread, with_vd=False, sort_ids=True)
    for op, n in seq:
        steps.apply(op, n)
        check_pairs(idx, oracle, rng)


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_everything_moving_every_step(label, name, kwargs):
    """Frames where every object moves (chunks goes to slot order), then a few again."""
    rng = np.random.default_rng(5)
    n = 400
    idx = make(name, kwargs, small=False)
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-20, 20, (n, 3))
    r = rng.uniform(0.1, 1.5, n)
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    orders = set()
    for step in range(6):
        moving = ids if step < 4 else ids[: n // 10]
        c[moving] += rng.normal(scale=0.4, size=(len(moving), 3))
        idx.update(moving, c[moving])
        oracle.update(moving, c[moving])
        check_pairs(idx, oracle, rng)
        orders.add(idx.stats().get("order"))
    if name == "chunks":  # both of its layouts answered
        assert orders == {"slot", "curve"}


def touching_sets():
    """Spheres exactly touching, at small and large coordinates: the test's boundary."""
    k = np.arange(60, dtype=np.float64)
    return {
        "touching-line": (np.c_[k * 0.2, np.zeros(60), np.zeros(60)], np.full(60, 0.1)),
        "touching-far": (np.c_[1e6 + k * 0.3, np.full(60, -7e5), np.zeros(60)],
                         np.full(60, 0.15)),
        "touching-diagonal": (np.outer(k, [0.1, 0.2, 0.2]), np.full(60, 0.15)),
    }


AWKWARD = {**awkward_sets(), **touching_sets()}


@pytest.mark.parametrize("data", list(AWKWARD))
@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_awkward_data(label, name, kwargs, data):
    centers, radii = AWKWARD[data]
    rng = np.random.default_rng(11)
    for small in (True, False):
        idx = make(name, kwargs, small=small)
        oracle = Oracle()
        ids = np.arange(len(radii), dtype=np.int64)
        idx.insert(ids, centers, radii)
        oracle.insert(ids, centers, radii)
        check_pairs(idx, oracle, rng)
        if len(ids):
            c2 = centers + rng.normal(scale=0.3, size=centers.shape)
            idx.update(ids, c2)
            oracle.update(ids, c2)
            check_pairs(idx, oracle, rng)
            half = ids[::2]
            c3 = rng.uniform(-100, 100, (len(half), 3))
            idx.update(half, c3)
            oracle.update(half, c3)
            idx.remove(ids[::3])
            oracle.remove(ids[::3])
            check_pairs(idx, oracle, rng)


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_all_at_one_point_every_pair_once(label, name, kwargs):
    """n objects at one point: n (n - 1) / 2 pairs, each once (the buffer grows many times)."""
    n = 1000
    idx = make(name, kwargs, small=False)
    ids = np.arange(n, dtype=np.int64) * 5 + 2
    idx.insert(ids, np.full((n, 3), 3.0), np.full(n, 0.5))
    p = idx.query_pairs()
    assert p.shape == (n * (n - 1) // 2, 2)
    assert (p[:, 0] < p[:, 1]).all() and np.isin(p, ids).all()
    assert np.unique(p[:, 0] * (5 * n) + p[:, 1]).shape[0] == p.shape[0]
    q = idx.query_pairs(ids=ids[:2])
    assert q.shape == (2 * n - 3, 2)


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_bad_input_raises_and_changes_nothing(label, name, kwargs):
    idx, _rng = hundred_objects(name, kwargs, 10.0)
    before = snapshot(idx)
    pairs_before = sorted_rows(idx.query_pairs(margin=0.5))
    cases = [
        ("NaN margin", lambda: idx.query_pairs(margin=np.nan), "margin"),
        ("negative margin", lambda: idx.query_pairs(margin=-0.1), "margin"),
        ("infinite margin", lambda: idx.query_pairs(margin=np.inf), "margin"),
        ("text margin", lambda: idx.query_pairs(margin="wide"), "margin"),
        ("unknown ids", lambda: idx.query_pairs(ids=np.array([3, 999, 4, 1234])), "999, 1234"),
        ("unknown id, good margin", lambda: idx.query_pairs(ids=[100], margin=1.0), "100"),
        ("float ids", lambda: idx.query_pairs(ids=np.array([1.0, 2.0])), "integers"),
        ("2-D ids", lambda: idx.query_pairs(ids=np.zeros((2, 2), np.int64)), "1-D"),
    ]
    assert_rejected(idx, cases, before, "query")
    assert np.array_equal(sorted_rows(idx.query_pairs(margin=0.5)), pairs_before)


def test_every_index_has_its_own_pairs():
    """No index answers pairs with the base class's default sweep: each has its own (brute's
    own answer is the sweep, the brute force of pairs)."""
    fallback = [name for name in INDEX_NAMES if not create_index(name)._pairs_structural]
    assert fallback == [], f"still on the default sort-and-sweep: {fallback}"


# ---------------------------------------------------------------------- the shared kernels


@pytest.mark.parametrize("seed", range(6))
def test_sweep_equals_all_pairs(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    scale = 10.0 ** rng.uniform(-3, 6)
    centers = rng.uniform(-1, 1, (n, 3)) * scale * np.array([1.0, rng.uniform(0, 3), 0.1])
    radii = 10 ** rng.uniform(-4, 0, n) * scale * 0.05
    slots = np.flatnonzero(rng.random(n) < 0.8)
    margin = float(rng.uniform(0, 0.1) * scale)
    for sel in (selection(n, None), selection(n, slots[: len(slots) // 3])):
        a = sorted_rows(np.sort(sweep_pairs(centers, radii, slots, margin, sel), axis=1))
        b = sorted_rows(np.sort(all_pairs(centers, radii, slots, margin, sel), axis=1))
        assert np.array_equal(a, b)


def test_push_pair_grows_and_keeps_rows():
    from numba import njit

    @njit
    def fill(m):
        out = new_pairs(1)
        k = 0
        for i in range(m):
            out = push_pair(out, k, i, -i)
            k += 1
        return out[:k]

    got = fill(1000)
    assert np.array_equal(got, np.c_[np.arange(1000), -np.arange(1000)])


def test_pairs_between_crosses_two_ranges_only():
    from numba import njit

    @njit
    def cross(items, others, centers, radii, sel):
        out, k = pairs_between(items, 0, items.shape[0], others, 0, others.shape[0], centers,
                               radii, 0.0, sel, new_pairs(0), 0)
        return out[:k]

    centers = np.zeros((6, 3))
    radii = np.ones(6)
    got = cross(np.array([0, 1, 2]), np.array([3, 4, 5]), centers, radii, selection(6, None))
    assert got.shape == (9, 2) and (got[:, 0] < 3).all() and (got[:, 1] >= 3).all()
    got = cross(np.array([0, 1, 2]), np.array([3, 4, 5]), centers, radii,
                selection(6, np.array([4])))
    assert sorted_rows(got).tolist() == [[0, 4], [1, 4], [2, 4]]


def test_chunks_slot_order_view_follows_moves_removals_and_resizes():
    """In slot order chunks answers from a curve-ordered view of its own: kept across frames,
    re-sorted once its chunks swell, rebuilt when objects leave; exact all along."""
    rng = np.random.default_rng(8)
    n = 800
    idx = create_index("chunks")
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64) * 3
    c = rng.uniform(-30, 30, (n, 3))
    r = rng.uniform(0.1, 1.5, n)
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    views = set()
    for step in range(10):
        live = np.array(sorted(oracle.objs), dtype=np.int64)
        c = np.array([oracle.objs[int(i)][0] for i in live])
        c += rng.normal(scale=0.5 + step, size=c.shape)  # ever larger jumps: chunks swell
        if step == 6:
            r = rng.uniform(0.1, 3, len(live))
            idx.update(live, c, radii=r)
            oracle.update(live, c, radii=r)
        else:
            idx.update(live, c)
            oracle.update(live, c)
        if step == 4:
            gone = live[::7]
            idx.remove(gone)
            oracle.remove(gone)
        check_pairs(idx, oracle, rng)
        if idx.stats()["order"] == "slot":
            views.add(id(idx._pairs_view))
    view = idx._pairs_view
    assert idx.stats()["order"] == "slot" and view is not None
    assert view.sorts >= 2, "the view never re-sorted"
    assert len(views) >= 2, "the view was not rebuilt after the removal"


@pytest.mark.parametrize("scale", [1e-200, 1e-5, 1e39, 1e150])
@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS, ids=IDS)
def test_extreme_scales(label, name, kwargs, scale):
    """Tiny scales (squares underflow: the float64 test's distances are off by ~1e-154) and
    huge ones (past float32's range): pruning must stay conservative for the exact test."""
    rng = np.random.default_rng(2)
    n = 200
    c = rng.uniform(-1, 1, (n, 3)) * scale
    r = rng.uniform(0, 0.2, n) * scale
    c[:40] = c[0] + rng.normal(size=(40, 3)) * scale * 1e-9  # a tight cluster
    r[:40] = scale * 1e-9
    idx = make(name, kwargs)
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    for step in range(3):
        for m in (0.0, scale * 0.01):
            assert_pairs(idx.query_pairs(margin=m), oracle.pairs(margin=m), f"margin {m}")
        moving = ids[step::10]
        c[moving] += rng.normal(size=(len(moving), 3)) * scale * 0.01
        idx.update(moving, c[moving])
        oracle.update(moving, c[moving])
