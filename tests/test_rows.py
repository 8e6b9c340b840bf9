"""A slot's store row (centre, radius, view distance, id, live flag) and the structure's two
words about it share one 64-byte line (``app.spatial.rows``): the trees' node and position,
the grid's item and cell."""

from __future__ import annotations

import numpy as np
import pytest

from app.culling.frustum import camera_planes
from app.spatial import create_index
from tests.oracle import Oracle


def _rows_of(idx, words: tuple[str, str], s: int) -> set[int]:
    """The 64-byte lines (by address) of slot s's store columns and its two words."""
    arrays = idx._slot_columns() + (getattr(idx._objs, words[0]), getattr(idx._objs, words[1]))
    return {(a.ctypes.data + s * a.strides[0]) // 64 for a in arrays}


@pytest.mark.parametrize("name,kwargs,words", [
    ("kd", {"leafy": True, "capacity": 16}, ("node", "pos")),
    ("ternary", {"leafy": False}, ("node", "pos")),
    ("grid", {}, ("item", "cell")),
])
def test_a_slots_centre_and_words_share_one_row(name, kwargs, words):
    """One row through the store's growth and new objects, bound again after everything
    moved (flat, where the centres are a plain array); every answer exact."""
    idx = create_index(name, **kwargs)
    rng = np.random.default_rng(3)
    n = 5000  # past flat_min_objects
    c = rng.uniform(-50, 50, (n, 3))
    idx.insert(np.arange(n), c, np.full(n, 0.5))  # grows the store past its first capacity
    planes = camera_planes([0, 0, 0], [1, 0, 0], far=100)
    oracle = Oracle()
    oracle.insert(np.arange(n), c, np.full(n, 0.5))
    was_flat = False
    for step in range(8):
        ids = np.arange(n) if step in (2, 3) else rng.choice(n, 300, replace=False)
        c[ids] += rng.normal(0, 2, (ids.shape[0], 3))
        idx.update(ids, c[ids])
        oracle.update(ids, c[ids])
        if step == 5:  # new objects past the store's capacity: it grows again
            new = np.arange(n, 3 * n)
            cn = rng.uniform(-50, 50, (2 * n, 3))
            idx.insert(new, cn, np.full(2 * n, 0.5))
            oracle.insert(new, cn, np.full(2 * n, 0.5))
            c = np.concatenate([c, cn])
            n = 3 * n
        got = idx.query_frustum(planes).visible
        assert np.array_equal(np.sort(got), oracle.frustum(planes, None, False))
        if idx.is_flat:  # streamed whole while flat: plain columns, no rows
            assert all(a.flags.c_contiguous for a in idx._slot_columns())
            was_flat = True
        else:
            idx.validate()
            for s in rng.choice(np.flatnonzero(idx._alive), 50):
                assert len(_rows_of(idx, words, int(s))) == 1
                assert getattr(idx._objs, words[0])[s] >= 0
    assert was_flat and not idx.is_flat


@pytest.mark.parametrize("name,words", [("octree", ("node", "pos")), ("grid", ("item", "cell"))])
def test_a_refused_insert_that_grew_the_store_leaves_the_rows_bound(name, words):
    """The store grows before it finds an id already present; the refused batch changes no
    answer, and the rows are bound all the same (validate checks them)."""
    idx = create_index(name)
    rng = np.random.default_rng(4)
    c = rng.uniform(-50, 50, (1000, 3))
    idx.insert(np.arange(1000), c, np.full(1000, 0.5))
    cap = idx.capacity
    bad = np.arange(999, 999 + cap)  # id 999 is present; the batch needs a bigger store
    with pytest.raises(ValueError, match="already"):
        idx.insert(bad, rng.uniform(-50, 50, (cap, 3)), np.full(cap, 0.5))
    assert idx.capacity > cap
    idx.validate()
    assert len(idx) == 1000
    for s in range(0, 1000, 37):
        assert len(_rows_of(idx, words, s)) == 1


@pytest.mark.parametrize("name", ["kd", "grid"])
def test_refused_batches_leave_every_row_as_it_was(name):
    """A removal naming an unknown id, an update with a NaN centre in its middle, a
    negative radius or a view distance of NaN, and an insert with a bad row: each is refused
    and no byte of the rows changes (the id, flag, radius and view distance columns
    included)."""
    idx = create_index(name)
    rng = np.random.default_rng(5)
    n = 2000
    c = rng.uniform(-50, 50, (n, 3))
    r = rng.uniform(0.2, 1.0, n)
    idx.insert(np.arange(n), c, r, 40 * r)
    idx.update(np.arange(0, n, 7), c[::7] + 0.5)  # a batch through the structure's moves
    before = idx._rows.copy()
    ids = rng.choice(n, 300, replace=False)
    bad_c = c[ids] + 1.0
    bad_c[150, 1] = np.nan
    neg_r = r[ids].copy()
    neg_r[7] = -1.0
    nan_v = 40 * r[ids]
    nan_v[299] = np.nan
    new_c = rng.uniform(-50, 50, (50, 3))
    new_c[25, 2] = np.inf
    refused = (
        lambda: idx.remove(np.array([3, n + 5, 9])),
        lambda: idx.update(ids, bad_c),
        lambda: idx.update(ids, c[ids] + 1.0, neg_r),
        lambda: idx.update(ids, c[ids] + 1.0, r[ids], nan_v),
        lambda: idx.insert(np.arange(n, n + 50), new_c, np.full(50, 0.5)),
    )
    for call in refused:
        with pytest.raises(ValueError):
            call()
        now = idx._rows[: before.shape[0]]  # (a store that grew keeps its rows in front)
        assert np.array_equal(now.view(np.uint8), before.view(np.uint8))
    idx.validate()
    assert len(idx) == n
