"""Small batches run the parallel kernels on the calling thread; the setting is restored."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import app.parallelism as par
from app.culling.frustum import camera_planes
from app.parallelism import PARALLEL_MIN, threads_for
from app.spatial import create_index


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


def test_a_trees_own_moves_leave_the_thread_count_alone(monkeypatch):
    """A tree in its structure moves a small batch with serial kernels only: the update
    makes no call into numba's threading layer (three of them cost about 7 us a frame)."""
    rng = np.random.default_rng(3)
    idx = create_index("octree", leafy=True)
    ids = np.arange(3000, dtype=np.int64)
    c = rng.uniform(-100, 100, (3000, 3))
    idx.insert(ids, c, np.ones(3000))
    idx.query_frustum(camera_planes([0, 0, 0], [1, 0, 0], far=80))
    get, put = par._thread_calls()
    calls = []

    def counted_get():
        calls.append("get")
        return get()

    def counted_put(n):
        calls.append("put")
        put(n)

    monkeypatch.setattr(par, "_calls", (counted_get, counted_put))
    idx.update(ids[:10], c[:10] + 0.5)
    assert not idx.is_flat
    assert calls == []
    with par.threads_for(10):  # (the stubs are the ones threads_for calls)
        pass
    assert calls == ["get", "put", "put"]
