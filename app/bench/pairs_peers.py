"""Compiled brute-force peers of ``query_pairs`` for ``python -m app bench pairs``.

* ``sweep`` / ``sweep-mt``: sort-and-sweep (sweep and prune) along the axis of largest spread,
  the standard broad-phase, written the way a performance engineer writes it: the project's
  one sort-and-sweep, :class:`app.spatial.pairs.SweepSpace` (float32 boxes rounded outward as
  structure of arrays, a compiled LSD radix argsort, a branch-free vectorised window per row,
  the candidates decided by the contract's float64 test), called on the peer's own float64
  rows with no index around it. ``sweep`` keeps every kernel on one thread; ``sweep-mt`` runs
  on every core above ``app.parallelism.PARALLEL_MIN`` objects (blocks of rows dealt to the
  threads, one output region per thread). The ``brute`` index answers with the same kernels.
* ``all-pairs``: the O(n^2) double loop, float32 box prefilter (the sweep's boxes, in
  branch-free blocks) and the same float64 decision.

Benchmark peers, not indexes: ids are non-negative ints, no input validation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numba
import numpy as np
from numba import njit, prange

from app.parallelism import threads_for
from app.spatial.pairs import SweepSpace, radix_argsort, sweep_layout

_BLOCK = 16  # boxes all-pairs tests together (its branch-free inner loop)


@njit(cache=True)
def _grow(out, k):
    """A buffer of at least twice the rows (and k + 1024) holding ``out``'s first k rows."""
    new = np.empty((max(2 * out.shape[0], k + 1024), 2), np.int64)
    new[:k] = out[:k]
    return new


@njit(cache=True)
def _all_rows(first, ids, c, r, margin, x32, lo32, hi32, out, k):
    """Every pair (i, j > i) from row ``first`` on: float32 box prefilter in branch-free
    blocks, float64 decision, written at ``out[k]``: (count, the row whose pairs did not fit,
    or -1 when done)."""
    n = c.shape[0]
    xl = x32[0]
    xh = x32[1]
    y_l = lo32[0]
    y_h = hi32[0]
    z_l = lo32[1]
    z_h = hi32[1]
    room = out.shape[0]
    for i in range(first, n):
        a0 = xl[i]
        a1 = xh[i]
        b0 = y_l[i]
        b1 = y_h[i]
        c0 = z_l[i]
        c1 = z_h[i]
        k0 = k
        j = i + 1
        while j < n:
            e = min(n, j + _BLOCK)
            base = np.uint64(j)
            cnt = 0
            for t in range(np.uint64(e - j)):
                q = base + t
                cnt += ((xl[q] <= a1) & (xh[q] >= a0) & (y_l[q] <= b1) & (y_h[q] >= b0)
                        & (z_l[q] <= c1) & (z_h[q] >= c0))
            if cnt:
                for q in range(j, e):
                    if ((xl[q] <= a1) & (xh[q] >= a0) & (y_l[q] <= b1) & (y_h[q] >= b0)
                            & (z_l[q] <= c1) & (z_h[q] >= c0)):
                        dx = c[i, 0] - c[q, 0]
                        dy = c[i, 1] - c[q, 1]
                        dz = c[i, 2] - c[q, 2]
                        if np.sqrt(dx * dx + dy * dy + dz * dz) <= r[i] + r[q] + margin:
                            if k < room:
                                out[k, 0] = min(ids[i], ids[q])
                                out[k, 1] = max(ids[i], ids[q])
                            k += 1
            j = e
        if k > room:
            return k0, i
    return k, -1


@njit(cache=True, parallel=True)
def _write_moves(row, ids, centers, c64):
    for q in prange(ids.shape[0]):
        k = row[ids[q]]
        c64[k, 0] = centers[q, 0]
        c64[k, 1] = centers[q, 1]
        c64[k, 2] = centers[q, 2]


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run the parallel kernels called inside on the calling thread only."""
    prev = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(prev)


class _PairsPeer:
    """Objects as float64 rows (id -> row table); subclasses answer ``query_pairs``."""

    name = "peer"
    #: On every core (above app.parallelism.PARALLEL_MIN objects, as the indexes do) or on one.
    parallel = False

    def _threads(self):
        return threads_for(len(self)) if self.parallel else _one_thread()

    def __init__(self) -> None:
        self._row = np.zeros(0, np.int64)
        self.ids = np.zeros(0, np.int64)
        self.c = np.zeros((0, 3))
        self.r = np.zeros(0)

    def __len__(self) -> int:
        return self.ids.shape[0]

    def insert(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray,
               view_distances: np.ndarray | None = None) -> None:
        """Add objects (dense non-negative ids, not present yet)."""
        ids = np.asarray(ids, np.int64)
        top = int(ids.max()) + 1 if ids.size else 0
        if top > self._row.shape[0]:
            row = np.full(max(top, 2 * self._row.shape[0]), -1, np.int64)
            row[: self._row.shape[0]] = self._row
            self._row = row
        base = self.ids.shape[0]
        self._row[ids] = np.arange(base, base + ids.shape[0])
        self.ids = np.concatenate([self.ids, ids])
        self.c = np.ascontiguousarray(np.concatenate([self.c, np.asarray(centers, float)]))
        self.r = np.concatenate([self.r, np.asarray(radii, float)])
        self._resize(self.ids.shape[0])

    def _resize(self, n: int) -> None:
        self._rows = np.arange(n, dtype=np.int64)

    def update(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None = None,
               view_distances: np.ndarray | None = None) -> None:
        """Move objects: write their float64 centres (radii stay)."""
        if radii is not None or view_distances is not None:
            raise ValueError(f"{self.name}: the benchmark moves objects only")
        with self._threads():
            _write_moves(self._row, np.asarray(ids, np.int64),
                         np.ascontiguousarray(centers, dtype=np.float64), self.c)

    def stats(self) -> dict:
        """Object count (no nodes)."""
        return {"objects": len(self), "nodes": 0, "max_depth": 0}


class SweepPeer(_PairsPeer):
    """Sort-and-sweep along the axis of largest spread on one thread (see module doc)."""

    name = "sweep"

    def __init__(self) -> None:
        super().__init__()
        self._space = SweepSpace()

    @property
    def _room(self) -> np.ndarray:
        """Each thread's output rows in the next parallel sweep (``SweepSpace.room``)."""
        return self._space.room

    @_room.setter
    def _room(self, room: np.ndarray) -> None:
        self._space.room = room

    def query_pairs(self, ids: np.ndarray | None = None, margin: float = 0.0) -> np.ndarray:
        """All pairs within ``margin`` of touching: int64 (K, 2), a < b."""
        if ids is not None:
            raise ValueError(f"{self.name}: the benchmark asks for all pairs only")
        with self._threads():
            return self._space.pairs(self.c, self.r, self._rows, self.ids, float(margin),
                                     parallel=self.parallel)


class SweepPeerParallel(SweepPeer):
    """:class:`SweepPeer` with the sweep on every core."""

    name = "sweep-mt"
    parallel = True


class AllPairsPeer(_PairsPeer):
    """The O(n^2) loop over every pair (see module doc)."""

    name = "all-pairs"

    def __init__(self) -> None:
        super().__init__()
        self._out = np.empty((1024, 2), np.int64)

    def _resize(self, n: int) -> None:
        super()._resize(n)
        self._x32 = np.empty((2, n), np.float32)
        self._lo32 = np.empty((2, n), np.float32)
        self._hi32 = np.empty((2, n), np.float32)
        self._keys = np.empty(n, np.uint32)

    def query_pairs(self, ids: np.ndarray | None = None, margin: float = 0.0) -> np.ndarray:
        """All pairs within ``margin`` of touching: int64 (K, 2), a < b."""
        if ids is not None:
            raise ValueError(f"{self.name}: the benchmark asks for all pairs only")
        margin = float(margin)
        sweep_layout(self.c, self.r, self._rows, margin, self._x32, self._lo32, self._hi32,
                     self._keys)
        out, k, first = self._out, 0, 0
        while first >= 0:
            k, first = _all_rows(first, self.ids, self.c, self.r, margin, self._x32,
                                 self._lo32, self._hi32, out, k)
            if first >= 0:
                out = _grow(out, k)
        self._out = out
        return out[:k].copy()


PAIR_PEERS = {"sweep": SweepPeer, "sweep-mt": SweepPeerParallel, "all-pairs": AllPairsPeer}


def reference_pairs(centers: np.ndarray, radii: np.ndarray, margin: float = 0.0,
                    ids: np.ndarray | None = None) -> np.ndarray:
    """numpy O(n^2) reference (small n only): sorted (K, 2) id pairs, a < b."""
    c = np.asarray(centers, float)
    r = np.asarray(radii, float)
    n = c.shape[0]
    ids = np.arange(n, dtype=np.int64) if ids is None else np.asarray(ids, np.int64)
    d = np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(axis=2))
    ok = d <= r[:, None] + r[None, :] + margin
    i, j = np.nonzero(np.triu(ok, 1))
    a, b = ids[i], ids[j]
    p = np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)
    return p[np.lexsort((p[:, 1], p[:, 0]))] if p.size else np.zeros((0, 2), np.int64)


__all__ = ["PAIR_PEERS", "AllPairsPeer", "SweepPeer", "SweepPeerParallel", "radix_argsort",
           "reference_pairs"]
