"""Compiled brute-force peers of ``query_pairs`` for ``python -m app bench pairs``.

* ``sweep`` / ``sweep-mt``: sort-and-sweep (sweep and prune) along the axis of largest spread,
  the standard broad-phase, written the way a performance engineer writes it. Every step: one
  compiled pass picks the axis (largest variance) and writes each sphere's box, grown by half
  the margin, as float32 structure of arrays, rounded outward (no pair is lost to rounding);
  a compiled LSD radix argsort (three passes of 11 bits over the order-preserving uint32 image
  of the float32 min coordinate, O(n)) orders the boxes; one gather lays them out in that
  order; then the sweep: for each box, the boxes after it whose min is <= its max (a binary
  search), tested on the two other axes in float32 (one branch-free pass writing a byte per
  box, unsigned indices: it vectorises; the bytes then scanned eight at a time), and the rare
  candidates decided exactly in float64 by the contract's test
  ``sqrt(dx^2 + dy^2 + dz^2) <= ra + rb + margin``. The kernels never grow the output: they
  stop when it is full and a driver grows it and resumes. ``sweep-mt`` runs
  the sweep on every core above ``app.parallelism.PARALLEL_MIN`` objects (blocks of rows dealt
  round-robin to the threads, one output region per thread, a region that fills finished
  serially); ``sweep`` keeps every kernel on one thread.
* ``all-pairs``: the O(n^2) double loop, float32 box prefilter (branch-free blocks) and the
  same float64 decision.

Benchmark peers, not indexes: ids are non-negative ints, no input validation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numba
import numpy as np
from numba import njit, prange

from app.parallelism import threads_for

_BLOCK = 16  # boxes all-pairs tests together (its branch-free inner loop)
_ROWS = 256  # rows of the sorted order dealt to one thread at a time (sweep-mt)
_BITS = 11
_BUCKETS = 1 << _BITS


@njit(cache=True)
def _layout(c, r, margin, x32, lo32, hi32, keys):
    """Pick the axis of largest spread; write every box (radius + margin/2) in float32,
    rounded outward, as ``x32`` (the sweep axis: min in ``x32[0]``, max in ``x32[1]``) and the
    two cross axes (``lo32``/``hi32`` rows 0 and 1), and the sort keys of the min coordinate."""
    n = c.shape[0]
    s = np.zeros(3)
    s2 = np.zeros(3)
    big = 0.0
    for i in range(n):
        h = r[i] + 0.5 * margin
        for a in range(3):
            v = c[i, a]
            s[a] += v
            s2[a] += v * v
            big = max(big, abs(v) + h)
    axis = 0
    best = -1.0
    for a in range(3):
        var = s2[a] - s[a] * s[a] / max(n, 1)
        if var > best:
            best = var
            axis = a
    b1 = 1 if axis == 0 else 0
    b2 = 2 if axis != 2 else 1
    # float64 -> float32 rounds to nearest (error <= 2^-24 |v| <= 2^-24 big): pushing every
    # bound out by 2^-22 big first keeps the float32 box around the exact one.
    pad = big * 2.0**-22 + 1e-30
    for i in range(n):
        h = r[i] + 0.5 * margin + pad
        x32[0, i] = np.float32(c[i, axis] - h)
        x32[1, i] = np.float32(c[i, axis] + h)
        lo32[0, i] = np.float32(c[i, b1] - h)
        hi32[0, i] = np.float32(c[i, b1] + h)
        lo32[1, i] = np.float32(c[i, b2] - h)
        hi32[1, i] = np.float32(c[i, b2] + h)
    # order-preserving uint32 image of a float32: flip all bits of negatives, the sign bit
    # of the rest
    bits = x32[0].view(np.uint32)
    sign = np.uint32(0x80000000)
    for i in range(n):
        u = bits[i]
        keys[i] = ~u if u & sign else u | sign
    return axis


@njit(cache=True)
def radix_argsort(keys: np.ndarray) -> np.ndarray:
    """Stable LSD radix argsort of uint32 keys: three passes of 11 bits, int32 order."""
    n = keys.shape[0]
    order = np.arange(n).astype(np.int32)
    tmp_o = np.empty(n, np.int32)
    k = keys.copy()
    tmp_k = np.empty(n, np.uint32)
    count = np.zeros(_BUCKETS, np.int64)
    for p in range(3):
        shift = np.uint32(p * _BITS)
        count[:] = 0
        for i in range(n):
            count[(k[i] >> shift) & np.uint32(_BUCKETS - 1)] += 1
        if count.max() == n:  # every key has the same digit: this pass keeps the order
            continue
        total = 0
        for d in range(_BUCKETS):
            c = count[d]
            count[d] = total
            total += c
        for i in range(n):
            d = (k[i] >> shift) & np.uint32(_BUCKETS - 1)
            j = count[d]
            count[d] = j + 1
            tmp_k[j] = k[i]
            tmp_o[j] = order[i]
        k, tmp_k = tmp_k, k
        order, tmp_o = tmp_o, order
    return order


@njit(cache=True, parallel=True)
def _gather(order, ids, c, r, x32, lo32, hi32, s_x, s_lo, s_hi, s_c, s_r, s_id):
    """Lay every array out in sweep order."""
    for k in prange(order.shape[0]):
        i = order[k]
        s_x[0, k] = x32[0, i]
        s_x[1, k] = x32[1, i]
        s_lo[0, k] = lo32[0, i]
        s_lo[1, k] = lo32[1, i]
        s_hi[0, k] = hi32[0, i]
        s_hi[1, k] = hi32[1, i]
        s_c[k, 0] = c[i, 0]
        s_c[k, 1] = c[i, 1]
        s_c[k, 2] = c[i, 2]
        s_r[k] = r[i]
        s_id[k] = ids[i]


@njit(cache=True)
def _sweep_row(i, n, s_x, s_lo, s_hi, s_c, s_r, s_id, margin, hit, out, k):
    """Pairs of sorted row ``i`` with the rows after it, written at ``out[k]`` while there is
    room; returns the new count (more than ``out`` holds: the caller grows it and runs the row
    again).

    The rows in reach (min <= this max) end where a binary search of the sorted mins says.
    One branch-free pass over them (unsigned indices, so it vectorises) writes a byte per row,
    1 when the boxes also overlap on the two cross axes, and counts them; when any did, the
    bytes are scanned eight at a time (as uint64 words) and the candidates decided by the
    contract's float64 test, written out here (a call in this loop costs 2x). ``hit``: at least
    n + 8 bytes, a multiple of 8. ``out`` is never reassigned here (that keeps the loops
    vectorised).
    """
    x0 = s_x[0]
    end = np.searchsorted(x0, s_x[1, i], side="right")
    w = end - i - 1
    if w <= 0:
        return k
    lo0 = s_lo[0]
    hi0 = s_hi[0]
    lo1 = s_lo[1]
    hi1 = s_hi[1]
    l0 = lo0[i]
    h0 = hi0[i]
    l1 = lo1[i]
    h1 = hi1[i]
    base = np.uint64(i + 1)
    m = 0
    for t in range(np.uint64(w)):
        q = base + t
        h = np.uint8((lo0[q] <= h0) & (hi0[q] >= l0) & (lo1[q] <= h1) & (hi1[q] >= l1))
        hit[t] = h
        m += h
    if m == 0:
        return k
    nw = (w + 7) >> 3
    for t in range(w, nw << 3):
        hit[t] = 0
    words = hit.view(np.uint64)
    cx = s_c[i, 0]
    cy = s_c[i, 1]
    cz = s_c[i, 2]
    room = out.shape[0]
    for wi in range(nw):
        if words[wi]:
            for t in range(wi << 3, (wi << 3) + 8):
                if hit[t]:
                    q = i + 1 + t
                    dx = cx - s_c[q, 0]
                    dy = cy - s_c[q, 1]
                    dz = cz - s_c[q, 2]
                    # the contract's test: sqrt(d2) <= r_a + r_b + margin (same rounding)
                    if np.sqrt(dx * dx + dy * dy + dz * dz) <= s_r[i] + s_r[q] + margin:
                        if k < room:
                            ia = s_id[i]
                            ib = s_id[q]
                            out[k, 0] = min(ia, ib)
                            out[k, 1] = max(ia, ib)
                        k += 1
    return k


@njit(cache=True)
def _grow(out, k):
    """A buffer of at least twice the rows (and k + 1024) holding ``out``'s first k rows."""
    new = np.empty((max(2 * out.shape[0], k + 1024), 2), np.int64)
    new[:k] = out[:k]
    return new


@njit(cache=True)
def _thread_rows(t, nt, first, s_x, s_lo, s_hi, s_c, s_r, s_id, margin, hit, out, k):
    """Thread ``t``'s rows (row blocks t, t + nt, ... of :data:`_ROWS`) from row ``first``
    on, written at ``out[k]``: (count, the row whose pairs did not fit, or -1 when done)."""
    n = s_x.shape[1]
    nblocks = (n + _ROWS - 1) // _ROWS
    for b in range(t, nblocks, nt):
        for i in range(max(b * _ROWS, first), min(n, (b + 1) * _ROWS)):
            k1 = _sweep_row(i, n, s_x, s_lo, s_hi, s_c, s_r, s_id, margin, hit, out, k)
            if k1 > out.shape[0]:
                return k, i
            k = k1
    return k, -1


def _finish_rows(t: int, nt: int, first: int, args: tuple, hit: np.ndarray, out: np.ndarray,
                 k: int) -> tuple[np.ndarray, int]:
    """Thread ``t``'s rows from ``first`` on into ``out`` from ``k``, growing it between
    kernel calls: (out, count)."""
    while first >= 0:
        k, first = _thread_rows(t, nt, first, *args, hit, out, k)
        if first >= 0:
            out = _grow(out, k)
    return out, k


@njit(cache=True, parallel=True)
def _sweep_parallel(nt, s_x, s_lo, s_hi, s_c, s_r, s_id, margin, hits, buf, base, room, count,
                    stop):
    """Thread ``t`` sweeps row blocks t, t + nt, ... into ``buf[base[t] : base[t] + room[t]]``
    (hit bytes in ``hits[t]``); a thread whose region fills records the row it stopped at in
    ``stop[t]`` (else -1)."""
    for t in prange(nt):
        k, s = _thread_rows(t, nt, 0, s_x, s_lo, s_hi, s_c, s_r, s_id, margin, hits[t],
                            buf[base[t]: base[t] + room[t]], 0)
        count[t] = k
        stop[t] = s


@njit(cache=True, parallel=True)
def _concat(buf, base, count, extra, extra_n, total):
    """One (total, 2) array of every thread's rows and of the continuations."""
    res = np.empty((total, 2), np.int64)
    nt = base.shape[0]
    offs = np.zeros(nt + 1, np.int64)
    for t in range(nt):
        offs[t + 1] = offs[t] + count[t]
    for t in prange(nt):
        for q in range(count[t]):
            res[offs[t] + q, 0] = buf[base[t] + q, 0]
            res[offs[t] + q, 1] = buf[base[t] + q, 1]
    at = offs[nt]
    for q in range(extra_n):
        res[at + q, 0] = extra[q, 0]
        res[at + q, 1] = extra[q, 1]
    return res


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
        self._x32 = np.empty((2, n), np.float32)
        self._lo32 = np.empty((2, n), np.float32)
        self._hi32 = np.empty((2, n), np.float32)
        self._keys = np.empty(n, np.uint32)

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
        self._out = np.empty((1024, 2), np.int64)
        self._extra = np.empty((1024, 2), np.int64)
        self._hits = np.zeros((0, 0), np.uint8)
        self._room = np.zeros(0, np.int64)
        self.axis = -1

    def _resize(self, n: int) -> None:
        super()._resize(n)
        self._s_x = np.empty((2, n), np.float32)
        self._s_lo = np.empty((2, n), np.float32)
        self._s_hi = np.empty((2, n), np.float32)
        self._s_c = np.empty((n, 3))
        self._s_r = np.empty(n)
        self._s_id = np.empty(n, np.int64)

    def sorted_layout(self, margin: float = 0.0) -> np.ndarray:
        """Layout, radix sort and gather; returns the sweep order (rows)."""
        self.axis = _layout(self.c, self.r, float(margin), self._x32, self._lo32, self._hi32,
                            self._keys)
        order = radix_argsort(self._keys)
        _gather(order, self.ids, self.c, self.r, self._x32, self._lo32, self._hi32, self._s_x,
                self._s_lo, self._s_hi, self._s_c, self._s_r, self._s_id)
        return order

    def query_pairs(self, ids: np.ndarray | None = None, margin: float = 0.0) -> np.ndarray:
        """All pairs within ``margin`` of touching: int64 (K, 2), a < b."""
        if ids is not None:
            raise ValueError(f"{self.name}: the benchmark asks for all pairs only")
        n = len(self)
        if n < 2:
            return np.zeros((0, 2), np.int64)
        with self._threads():
            return self._sweep(n, float(margin))

    def _sweep(self, n: int, margin: float) -> np.ndarray:
        self.sorted_layout(margin)
        args = (self._s_x, self._s_lo, self._s_hi, self._s_c, self._s_r, self._s_id, margin)
        nt = numba.get_num_threads() if self.parallel else 1
        width = (n + 15) // 8 * 8
        if self._hits.shape[0] < nt or self._hits.shape[1] < width:
            self._hits = np.zeros((nt, width), np.uint8)
        if nt == 1:
            self._out, k = _finish_rows(0, 1, 0, args, self._hits[0], self._out, 0)
            return self._out[:k].copy()
        if self._room.shape[0] != nt:
            self._room = np.full(nt, 2 * n // nt + 1024, np.int64)
        base = np.zeros(nt, np.int64)
        base[1:] = np.cumsum(self._room)[:-1]
        total_room = int(self._room.sum())
        if self._out.shape[0] < total_room:
            self._out = np.empty((total_room, 2), np.int64)
        count = np.zeros(nt, np.int64)
        stop = np.full(nt, -1, np.int64)
        _sweep_parallel(nt, *args, self._hits, self._out, base, self._room, count, stop)
        extra = self._extra
        ek = 0
        for t in range(nt):
            if stop[t] >= 0:  # region full: finish this thread's rows here, serially
                extra, ek2 = _finish_rows(t, nt, int(stop[t]), args, self._hits[t], extra, ek)
                more = ek2 - ek
                ek = ek2
            else:
                more = 0
            # next step's room: this step's count + 30 %
            self._room[t] = max(self._room[t], int(1.3 * (count[t] + more)) + 1024)
        self._extra = extra
        return _concat(self._out, base, count, extra, ek, int(count.sum()) + ek)


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

    def query_pairs(self, ids: np.ndarray | None = None, margin: float = 0.0) -> np.ndarray:
        """All pairs within ``margin`` of touching: int64 (K, 2), a < b."""
        if ids is not None:
            raise ValueError(f"{self.name}: the benchmark asks for all pairs only")
        margin = float(margin)
        with self._threads():
            _layout(self.c, self.r, margin, self._x32, self._lo32, self._hi32, self._keys)
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
