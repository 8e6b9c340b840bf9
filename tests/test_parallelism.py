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


def test_the_layers_own_calls_are_used_where_numba_has_them():
    """The threading layer's two functions where numba's module has them, None otherwise
    (the public getter and setter then serve)."""
    import types

    from numba.np.ufunc import parallel

    import app.parallelism as par

    assert par.layer_calls(types.SimpleNamespace()) is None
    assert par.layer_calls(types.SimpleNamespace(_get_num_threads=1, _set_num_threads=2)) is None
    with threads_for(10):
        pass
    assert par._calls == par.layer_calls(parallel)
