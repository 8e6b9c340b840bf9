"""The trees' pair descent on both cores (``tree_pairs/parallel.py``, ``_descend_parallel``).

A snapshot of at least ``PARALLEL_PAIRS_MIN`` objects is expanded breadth first into seed tasks
that the threads descend independently; here the threshold is lowered so that small inputs
take that path, and its answer must equal the O(n^2) oracle (through ``query_pairs``, with and
without an ids filter and margin) and the serial descent on the same snapshot, also with tiny
per-thread buffers (every grow-and-retry path) and odd thread / seed counts.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.spatial import create_index
from app.spatial.pairs import selection, slot_pairs_to_ids
from app.spatial.tree_pairs import descent, parallel
from app.spatial.tree_pairs.snapshot import TreePairSnapshot
from tests.oracle import Oracle
from tests.test_pairs import assert_pairs, sorted_rows

KINDS = ["kd", "kd-leafy", "octree", "octree-leafy", "icoseptree", "viewdist"]


@contextmanager
def parallel_from(n: int):
    """Snapshots of at least n objects take the parallel descent inside (counted calls)."""
    saved_min = parallel.PARALLEL_PAIRS_MIN
    real = parallel._descend_parallel
    calls = [0]

    def counted(*args):
        calls[0] += 1
        return real(*args)

    parallel.PARALLEL_PAIRS_MIN = n
    parallel._descend_parallel = counted
    try:
        yield calls
    finally:
        parallel.PARALLEL_PAIRS_MIN = saved_min
        parallel._descend_parallel = real


def make(kind: str, rng: np.random.Generator, n: int, oracle: Oracle):
    """An index of n clustered objects (view distances for viewdist, some unbounded)."""
    name = kind.split("-")[0]
    idx = create_index(name, leafy=True) if kind.endswith("leafy") else create_index(name)
    ids = np.arange(n, dtype=np.int64)
    hubs = rng.uniform(-30, 30, (max(1, n // 40), 3))
    c = hubs[rng.integers(0, hubs.shape[0], n)] + rng.normal(scale=3.0, size=(n, 3))
    c[: n // 10] = hubs[0]  # a crowd at one point: long refined lists, many pairs
    r = rng.uniform(0.1, 1.5, n)
    vd = None
    if kind == "viewdist":
        vd = r * rng.choice([2.0, 12.0, 60.0], size=n)
        vd[rng.random(n) < 0.1] = np.inf
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    return idx, ids, c


def snapshot(idx, kind: str, sel: np.ndarray) -> TreePairSnapshot:
    return idx._snapshot(sel)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(40, 900), kind=st.sampled_from(KINDS))
def test_parallel_query_pairs_match_oracle(seed, n, kind):
    rng = np.random.default_rng(seed)
    oracle = Oracle()
    idx, ids, c = make(kind, rng, n, oracle)
    saved = type(idx).pairs_per_object_ratio
    with parallel_from(0) as calls:
        try:
            idx.pairs_per_object_ratio = 10**9  # ids: the filtered whole-tree descent
            for step in range(2):
                for margin in (0.0, float(rng.uniform(0, 3))):
                    assert_pairs(idx.query_pairs(margin=margin), oracle.pairs(margin=margin),
                                 f"{kind} step {step} margin {margin}")
                    some = rng.choice(ids, size=max(1, n // 8), replace=False)
                    assert_pairs(idx.query_pairs(ids=some, margin=margin),
                                 oracle.pairs(ids=some, margin=margin),
                                 f"{kind} step {step} ids margin {margin}")
                c = c + rng.normal(scale=1.0, size=c.shape)  # every object moves
                idx.update(ids, c)
                oracle.update(ids, c)
        finally:
            idx.pairs_per_object_ratio = saved
    assert calls[0] == 8
    idx.validate()


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 1500), kind=st.sampled_from(KINDS),
       nt=st.integers(1, 3), want=st.integers(1, 300), out_rows=st.integers(1, 64),
       stack_rows=st.integers(1, 64), filtered=st.booleans())
def test_parallel_descent_equals_serial(seed, n, kind, nt, want, out_rows, stack_rows,
                                        filtered):
    """Any seed count, thread count and (tiny) buffers: the serial descent's pairs, each once."""
    rng = np.random.default_rng(seed)
    idx, ids, _c = make(kind, rng, n, Oracle())
    some = rng.choice(ids, size=max(1, n // 5), replace=False) if filtered else None
    sel = selection(idx.capacity, some)
    sn = snapshot(idx, kind, sel)
    margin = float(rng.uniform(0, 2))
    args = (sn, margin, sel)
    serial = descent.descend(*args)
    # joined as ids (the contract's answer): the serial pairs through the same id map
    ids_of = rng.permutation(idx.capacity).astype(np.int64) * 3 + 1
    got = parallel.descend_parallel(*args, nt, want, out_rows, stack_rows, ids_of)
    assert got.dtype == np.int64 and got.shape == serial.shape, (got.shape, serial.shape)
    assert (got[:, 0] < got[:, 1]).all()
    assert np.array_equal(sorted_rows(got), sorted_rows(slot_pairs_to_ids(serial, ids_of)))


@pytest.mark.parametrize("kind", ["kd-leafy", "octree-leafy", "icoseptree", "viewdist"])
def test_threshold_keeps_small_snapshots_serial(kind):
    """Below the threshold the serial driver runs; at it, the parallel one (same answer)."""
    rng = np.random.default_rng(5)
    oracle = Oracle()
    idx, _ids, _c = make(kind, rng, 600, oracle)
    want = oracle.pairs(margin=0.5)
    with parallel_from(601) as calls:
        assert_pairs(idx.query_pairs(margin=0.5), want, "serial")
        assert calls[0] == 0
    with parallel_from(600) as calls:
        assert_pairs(idx.query_pairs(margin=0.5), want, "parallel")
        assert calls[0] == 1


@pytest.mark.parametrize("kind", ["kd-leafy", "octree", "viewdist"])
def test_seed_weights_count_a_pair_by_its_overlap(kind):
    """A self task weighs its subtree's objects; a pair task one plus the objects of each
    side inside the other's box, so no more than one plus both items' counts, and less when
    its boxes barely meet (the work lies where they overlap; weighed by the items' whole
    counts, the clustered 10^5 snapshot's busier thread had 55-65 % of the work)."""
    rng = np.random.default_rng(3)
    idx, _ids, _c = make(kind, rng, 1500, Oracle())
    sel = selection(idx.capacity, None)
    sn = snapshot(idx, kind, sel)
    seeds, _first = parallel._seed_tasks(sn, 0.5, sel, 64)
    weight = parallel._seed_weights(sn, seeds)
    pairs_seen = 0
    below_counts = 0
    for (a, b), w in zip(seeds, weight, strict=True):
        if b < 0:
            assert w == sn.oend[a] - sn.ostart[a]
            continue
        pairs_seen += 1
        i, j = a >> 1, b >> 1
        na = sn.ocnt[i] if a & 1 else sn.oend[i] - sn.ostart[i]
        nb = sn.ocnt[j] if b & 1 else sn.oend[j] - sn.ostart[j]
        assert 1.0 <= w <= 1.0 + na + nb
        below_counts += w < 0.5 * (na + nb)  # a pair meeting at its boxes' edges
    assert pairs_seen > 0 and below_counts > 0
