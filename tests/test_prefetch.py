"""The prefetch hint compiles for the arrays the batch kernels use and changes no value."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from app.spatial.prefetch import PREFETCH_AHEAD, prefetch, prefetch_at


@njit(cache=False)
def _gather(idx, a, rows, wide, use_hint):
    total = 0.0
    n = idx.shape[0]
    for i in range(n):
        if use_hint and i + PREFETCH_AHEAD < n:
            j = idx[i + PREFETCH_AHEAD]
            prefetch(a, j)
            prefetch(rows, j)
            prefetch_at(wide, j, 8)
        k = idx[i]
        total += a[k] + rows[k, 1] + wide[k, 9]
    return total


def test_hints_change_nothing():
    rng = np.random.default_rng(0)
    n = 50_000
    idx = rng.integers(0, n, 4_000)
    a = rng.random(n)
    rows = rng.random((n, 3))
    wide = rng.random((n, 16))
    assert _gather(idx, a, rows, wide, True) == _gather(idx, a, rows, wide, False)
    # any integer width for the index, arrays of any dtype
    small = idx.astype(np.int32)
    assert _gather(small, a.astype(np.float32), rows, wide, True) == pytest.approx(
        _gather(small, a.astype(np.float32), rows, wide, False))


def test_only_arrays_and_integers():
    @njit(cache=False)
    def bad(x):
        prefetch(x, 0)

    with pytest.raises(TypingError):
        bad(1.5)

    @njit(cache=False)
    def bad_row(a):
        prefetch_at(a, 0, 1)

    with pytest.raises(TypingError):
        bad_row(np.zeros(4))  # prefetch_at wants two axes


def test_spread_out_judges_a_batch_by_its_ends():
    from app.spatial.prefetch import spread_out

    assert not spread_out(np.arange(1000, dtype=np.int64))  # every row, in order
    assert not spread_out(np.zeros(0, dtype=np.int64))
    assert spread_out(np.array([5, 900, 70_000], dtype=np.int64))  # a few, far apart
    assert spread_out(np.arange(0, 10**6, 100, dtype=np.int64))
