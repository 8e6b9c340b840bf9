"""Small batches run the parallel kernels on the calling thread; the setting is restored."""

from __future__ import annotations

import numba
import pytest

from app.parallelism import PARALLEL_MIN, threads_for


def test_small_batches_use_one_thread_and_restore_the_count():
    before = numba.get_num_threads()
    with threads_for(10):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before
    with threads_for(PARALLEL_MIN):
        assert numba.get_num_threads() == before
    with pytest.raises(RuntimeError), threads_for(0):
        raise RuntimeError("a kernel failed")
    assert numba.get_num_threads() == before
