"""The project's one sort-and-sweep (``app.spatial.pairs.SweepSpace``) against the oracle's
all-pairs definition: float32 boxes rounded outward after an exact power-of-two scaling, so
coordinates past float32's range (3.4e38) and below its subnormals stay exact; with labels,
slot subsets, margins and the ids filter; one thread and both (with output regions so small
that every continuation runs); the buffers kept across calls of different sizes."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.spatial import create_index
from app.spatial.pairs import (
    SWEEP_ROWS,
    SweepSpace,
    _sweep_ends,
    _sweep_grid,
    selection,
    sweep_layout,
    sweep_pairs,
)
from tests.oracle import Oracle

#: Scales of the data: powers of two keep exactly touching pairs exact (2^130 and up: past
#: float32; 2^-140: float32 subnormals; 2^-700: the float64 squares underflow), and the
#: brief's 1e-200 .. 1e150.
SCALES = [1.0, 2.0**-140, 2.0**-700, 2.0**130, 2.0**500, 2.0**1000, 1e-200, 1e-40, 1e39,
          1e150, 3.0e38]


def _rows(p: np.ndarray) -> np.ndarray:
    assert p.dtype == np.int64 and p.ndim == 2 and p.shape[1] == 2
    assert (p[:, 0] < p[:, 1]).all(), "a row not ordered a < b"
    return p[np.lexsort((p[:, 1], p[:, 0]))]


def _want(labels, c, r, margin, chosen=None) -> np.ndarray:
    o = Oracle()
    o.insert(labels, c, r)
    return o.pairs(ids=chosen, margin=margin)


def _data(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if kind == "grid":  # integer grid, half-integer radii: many exactly touching pairs
        return rng.integers(0, 6, (n, 3)).astype(float), rng.integers(0, 3, n) * 0.5
    if kind == "spread":
        return rng.normal(size=(n, 3)) * 8, rng.uniform(0, 2, n)
    if kind == "point":
        return np.full((n, 3), -3.25), rng.uniform(0, 1, n)
    if kind == "line":
        c = np.zeros((n, 3))
        c[:, 1] = rng.integers(-10, 10, n)
        return c, np.full(n, 0.5)
    if kind == "far":  # 1e6 from the origin: float32 rounds by 0.06 there
        return 1.0e6 + rng.integers(0, 8, (n, 3)) * 0.5, rng.integers(0, 3, n) * 0.25
    if kind == "mixed-scales":  # a cluster 1e-12 across among spheres 1e4 away
        c = rng.uniform(-1e4, 1e4, (n, 3))
        r = rng.uniform(0, 3e3, n)
        m = n // 2
        c[:m] = rng.integers(0, 4, (m, 3)) * 1e-12
        r[:m] = rng.integers(0, 3, m) * 0.5e-12
        return c, r
    # radii of very different sizes
    c = rng.uniform(-50, 50, (n, 3))
    return c, np.where(rng.random(n) < 0.1, rng.uniform(10, 40, n), rng.uniform(0, 0.01, n))


KINDS = ["grid", "spread", "point", "line", "far", "mixed-scales", "radii"]


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 90), seed=st.integers(0, 2**31 - 1), kind=st.sampled_from(KINDS),
       scale=st.sampled_from(SCALES), margin=st.sampled_from([0.0, 0.5, 1.0, 3.7]),
       filt=st.sampled_from(["none", "some", "most", "one", "all"]))
def test_sweep_matches_oracle(n, seed, kind, scale, margin, filt):
    """Every pair the contract's float64 test accepts, once, at every scale: a subset of
    the store's slots, margins, the ids filter (a few rows: their windows ahead and behind;
    most: every row, the marked pairs kept)."""
    rng = np.random.default_rng(seed)
    c, r = _data(kind, n, rng)
    c, r, margin = c * scale, r * scale, margin * scale
    cap = n + 5  # a store with unused slots: the live ones are a subset
    slots = np.sort(rng.permutation(cap)[:n]).astype(np.int64)
    centers = rng.uniform(-1, 1, (cap, 3)) * 1e30  # junk in the slots not swept
    radii = np.full(cap, 1e30)
    centers[slots] = c
    radii[slots] = r
    labels = slots  # as an index: pairs of slots
    chosen = {"none": None, "all": slots, "one": slots[:1],
              "some": slots[rng.random(n) < 0.3], "most": slots[rng.random(n) < 0.7]}[filt]
    want = _want(slots, c, r, margin, chosen)
    space = SweepSpace()
    got = space.pairs(centers, radii, slots, labels, margin, selection(cap, chosen))
    assert np.array_equal(_rows(got), want), (kind, scale, filt, len(got), len(want))
    # the same buffers again, then the functional form
    got = space.pairs(centers, radii, slots, labels, margin, selection(cap, chosen))
    assert np.array_equal(_rows(got), want)
    got = sweep_pairs(centers, radii, slots, margin, selection(cap, chosen))
    assert np.array_equal(_rows(np.sort(got, axis=1)), want)


@pytest.mark.parametrize("scale", [2.0**130, 1e39, 1e150, 2.0**1000, 1e300])
def test_past_float32_range_is_exact_and_finite(scale):
    """Coordinates past float32's largest number (3.4e38): the boxes stay finite (the exact
    power-of-two scaling), exactly touching pairs are found, none extra."""
    k = np.arange(60, dtype=np.float64)
    c = np.c_[k * 0.25, np.full(60, 3.0), np.zeros(60)] * scale  # a line of touching spheres
    c[30:] += [[0.0, 1e-3 * scale, 0.0]]  # and a second line, just apart from the first
    r = np.full(60, 0.125) * scale
    ids = np.arange(60, dtype=np.int64) * 3 + 1
    want = _want(ids, c, r, 0.0)
    if np.frexp(scale)[0] == 0.5 and scale < 1e150:  # a power of two, squares finite
        assert len(want) >= 55  # the neighbours touch exactly
    got = SweepSpace().pairs(c, r, np.arange(60), ids, 0.0)
    assert np.array_equal(_rows(got), want)
    x32 = np.empty((2, 60), np.float32)
    lo32 = np.empty((2, 60), np.float32)
    hi32 = np.empty((2, 60), np.float32)
    sweep_layout(c, r, np.arange(60), 0.0, x32, lo32, hi32, np.empty(60, np.uint32))
    assert np.isfinite(x32).all() and np.isfinite(lo32).all() and np.isfinite(hi32).all()
    assert (x32[0] <= x32[1]).all() and (lo32 <= hi32).all()


def test_boxes_hold_their_spheres():
    """Each float32 box (scaled back) holds its sphere grown by half the margin."""
    rng = np.random.default_rng(4)
    n = 2000
    for scale in (1.0, 1e-30, 1e30, 1e200):
        c = rng.normal(size=(n, 3)) * rng.uniform(0.1, 1000) * scale
        r = 10 ** rng.uniform(-6, 1, n) * scale
        margin = 0.3 * scale
        x32 = np.empty((2, n), np.float32)
        lo32 = np.empty((2, n), np.float32)
        hi32 = np.empty((2, n), np.float32)
        keys = np.empty(n, np.uint32)
        axis = sweep_layout(c, r, np.arange(n), margin, x32, lo32, hi32, keys)
        big = max(np.abs(c).max(), (r + margin / 2).max())
        s = 2.0 ** -np.frexp(big)[1]
        cross = [a for a in range(3) if a != axis]
        h = (r + margin / 2) * s
        for lo, hi, a in ((x32[0], x32[1], axis), (lo32[0], hi32[0], cross[0]),
                          (lo32[1], hi32[1], cross[1])):
            assert (lo.astype(float) <= c[:, a] * s - h).all()
            assert (hi.astype(float) >= c[:, a] * s + h).all()
        # the keys order the boxes as their mins
        order = np.argsort(keys, kind="stable")
        assert (np.diff(x32[0][order].astype(float)) >= 0).all()


def test_window_ends_equal_binary_search():
    rng = np.random.default_rng(6)
    for n in (1, 2, 100, 5000):
        x0 = np.sort(rng.normal(size=n)).astype(np.float32)
        x0[n // 3: n // 2] = x0[n // 3]  # runs of equal mins
        x1 = x0 + rng.uniform(0, 0.5, n).astype(np.float32)
        ends = np.empty(n, np.int64)
        _sweep_ends(x0, x1, np.empty(n, np.uint32), ends)
        assert np.array_equal(ends, np.searchsorted(x0, x1, side="right"))


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**31 - 1),
       offset=st.sampled_from([0.0, -50.0, 1e6, 1e30]))
def test_grid_keeps_every_overlap(n, seed, offset):
    """Boxes that overlap in float32 (touching ends included) overlap on the uint16 grid."""
    rng = np.random.default_rng(seed)
    table = np.arange(4000, dtype=np.float32) * np.float32(0.37) + np.float32(offset)
    i = rng.integers(0, 3000, (2, n))
    lo = table[i]
    hi = table[i + rng.integers(0, 900, (2, n))]  # shared bounds: exactly touching boxes
    lo16 = np.empty((2, n), np.uint16)
    hi16 = np.empty((2, n), np.uint16)
    if not _sweep_grid(lo, hi, n, lo16, hi16):
        return  # too coarse for this data: the float32 boxes are used
    for a in range(2):
        o32 = (lo[a][:, None] <= hi[a][None, :]) & (hi[a][:, None] >= lo[a][None, :])
        o16 = (lo16[a][:, None] <= hi16[a][None, :]) & (hi16[a][:, None] >= lo16[a][None, :])
        assert not (o32 & ~o16).any()


def test_grid_used_when_fine_and_refused_when_coarse():
    """Dense data goes on the grid; a few far objects make it too coarse (float32 then),
    both exact."""
    rng = np.random.default_rng(12)
    n = 3000
    c = rng.uniform(0, 40, (n, 3))
    r = rng.uniform(0.3, 1.0, n)
    far = c.copy()
    far[:3] = [[1e7, 0, 0], [0, 1e7, 0], [0, 0, -1e7]]
    for data, grid in (((c, r), True), ((far, r), False)):
        space = SweepSpace()
        got = space.pairs(*data, np.arange(n), np.arange(n), 0.2)
        assert space.grid is grid
        assert np.array_equal(_rows(got), _want(np.arange(n), *data, 0.2))


def _dense(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 12, (n, 3)), rng.uniform(0.2, 1.2, n)


@pytest.mark.parametrize("filtered", [None, 3, 1.4])
def test_both_threads_equal_one_thread_with_every_continuation(filtered):
    """The parallel sweep (output regions far too small: every thread's region fills and is
    finished serially) gives the one-thread answer, with and without the ids filter (a third
    of the rows: their windows ahead and behind; most rows: every row, the pairs kept)."""
    if numba.get_num_threads() < 2:
        pytest.skip("one numba thread")
    n = 6 * SWEEP_ROWS
    c, r = _dense(n, 1)
    slots = np.arange(n, dtype=np.int64)
    sel = selection(n, None if filtered is None else
                    slots[np.arange(n) % filtered < 1])
    want = _rows(SweepSpace().pairs(c, r, slots, slots, 0.25, sel))
    assert len(want) > 1000
    space = SweepSpace()
    space.room = np.full(numba.get_num_threads(), 8, np.int64)
    assert np.array_equal(_rows(space.pairs(c, r, slots, slots, 0.25, sel, parallel=True)),
                          want)
    assert (space.room > 8).all()  # sized from this call for the next
    assert np.array_equal(_rows(space.pairs(c, r, slots, slots, 0.25, sel, parallel=True)),
                          want)


def test_buffers_follow_the_sizes_of_calls():
    """One space, calls of growing and shrinking sizes and margins: each as a fresh one."""
    space = SweepSpace()
    for k, n in enumerate([3000, 10, 0, 1, 5000, 200, 3000]):
        c, r = _dense(n, k)
        slots = np.arange(n, dtype=np.int64)
        ids = slots * 7 + 2
        for margin in (0.0, 0.7):
            got = space.pairs(c, r, slots, ids, margin)
            want = SweepSpace().pairs(c, r, slots, ids, margin)
            assert np.array_equal(_rows(got), _rows(want)), (n, margin)
    assert space.pairs(c, r, slots[:0], ids[:0], 0.0).shape == (0, 2)


def test_every_pair_at_one_point_once():
    """600 spheres at one point: all 179,700 pairs, each once (the buffer grows many times)."""
    n = 600
    c = np.full((n, 3), 2.5)
    r = np.full(n, 0.1)
    got = SweepSpace().pairs(c, r, np.arange(n), np.arange(n) + 10, 0.0)
    assert got.shape == (n * (n - 1) // 2, 2)
    assert np.unique(got[:, 0] * 10 * n + got[:, 1]).shape[0] == got.shape[0]


def test_brute_on_both_cores_with_the_ids_filter():
    """brute above PARALLEL_MIN objects (both cores): the filtered answer is the unfiltered
    one's rows with a member in ids, and the unfiltered one the one-thread sweep's."""
    n = 40_000
    rng = np.random.default_rng(9)
    c = rng.uniform(0, 60, (n, 3))
    r = rng.uniform(0.2, 1.0, n)
    ids = rng.permutation(3 * n)[:n].astype(np.int64)
    idx = create_index("brute")
    idx.insert(ids, c, r)
    full = _rows(idx.query_pairs(margin=0.1))
    one = SweepSpace().pairs(c, r, np.arange(n), ids, 0.1)
    assert np.array_equal(full, _rows(one))
    some = rng.choice(ids, n // 50, replace=False)
    inside = np.isin(full, some).any(axis=1)
    assert np.array_equal(_rows(idx.query_pairs(ids=some, margin=0.1)), full[inside])
