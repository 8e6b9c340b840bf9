"""Processes saving kernel cache entries at once keep every entry with its own data
(app/kernel_cache_lock.py): numba's own save lets two processes pick the same data file for
two signatures, and a later load then runs the wrong machine code."""

from __future__ import annotations

import multiprocessing as mp

import pytest

pytest.importorskip("fcntl")

WORKERS = 4
ROUNDS = 40


def _writer(folder: str, start, worker: int) -> None:
    from numba.core.caching import IndexDataCacheFile

    from app import kernel_cache_lock

    kernel_cache_lock.install()
    cache = IndexDataCacheFile(folder, "kernel-stamp.py311", "stamp")
    start.wait()  # every writer reads and writes the one index at the same moment
    for r in range(ROUNDS):
        cache.save(("signature", worker, r), ("machine code", worker, r))


def test_concurrent_saves_keep_every_entry_with_its_own_data(tmp_path) -> None:
    from numba.core.caching import IndexDataCacheFile

    ctx = mp.get_context("fork")
    start = ctx.Barrier(WORKERS)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), start, w))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    cache = IndexDataCacheFile(str(tmp_path), "kernel-stamp.py311", "stamp")
    for w in range(WORKERS):
        for r in range(ROUNDS):
            assert cache.load(("signature", w, r)) == ("machine code", w, r), (w, r)
    assert len(list(tmp_path.glob("*.nbc"))) == WORKERS * ROUNDS
