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


def test_a_small_update_runs_the_stores_parallel_kernels_on_one_thread(monkeypatch):
    """The count is set around the store's parallel write (``ObjectStore._apply_update``),
    not around every update: a small batch through it (the paper mode's tree swaps the
    store's rows there, then moves from the old ones) sees one thread, and the count is
    restored after."""
    import numpy as np

    from app.spatial import create_index

    idx = create_index("kd", mode="paper")
    ids = np.arange(100, dtype=np.int64)
    idx.insert(ids, np.zeros((100, 3)), np.ones(100))
    seen = []
    hook = type(idx)._on_update

    def on_update(self, *args):
        seen.append(numba.get_num_threads())
        return hook(self, *args)

    monkeypatch.setattr(type(idx), "_on_update", on_update)
    before = numba.get_num_threads()
    idx.update(ids[:10], np.ones((10, 3)))
    assert seen == [1]
    assert numba.get_num_threads() == before
