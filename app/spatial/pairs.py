"""Collision broad-phase kernels every index shares (design.md, "Collision broad-phase").

The contract: every pair of live objects whose spheres are within ``margin`` of touching,
``|c_a - c_b| <= r_a + r_b + margin`` (:func:`pair_touch`, float64, the oracle's arithmetic),
each pair once. Indexes answer in *slots*: ``SpatialIndex._query_pairs(slots, margin)`` returns
an int64 ``(K, 2)`` array of slot pairs (any row order, either order inside a row); the public
``query_pairs`` maps them to ids with ``a < b`` (:func:`slot_pairs_to_ids`). The trees answer
in ids themselves (``_pair_ids``): their descent on both cores maps while it joins.

What a structure's own pair query builds on:

* the output buffer: :func:`new_pairs` then ``out = push_pair(out, k, a, b); k += 1`` (doubles
  when full, no Python in the loop), ``out[:k]`` at the end. In a hot kernel, do not reassign
  the buffer: a function that does gets no vectorised loops (measured 3-4x slower). Write
  ``out[k]`` directly, stop and return (k, where) when the next hits would not fit, and let a
  small driver grow it (:func:`grown_pairs`) and call again (as :func:`sweep_pairs` does);
* index vectorisable loops with unsigned integers (``np.uint64``): signed indices carry
  numba's negative-index wraparound, which kept the sweep's window loop scalar (3x);
* in a loop over many rows, do not call a helper that takes arrays (``inline="always"``
  included): numba counts references to each array argument at every call, atomically (the
  sweep with a dozen arrays: ~85 ns a row, 9 of 10 ms at 10^5 sparse objects);
* the ``ids`` filter as a per-slot mark (:func:`selection`): an empty array means "every pair";
  :func:`keep` says whether a pair involves a marked slot;
* brute force on ranges of a slot list (a leaf, a cell): :func:`pairs_within` (every pair of
  one range) and :func:`pairs_between` (every pair across two ranges);
* the standard broad-phase, the project's one sort-and-sweep (:class:`SweepSpace`: float32
  boxes rounded outward, radix sort, vectorised windows, float64 decision by
  :func:`pair_touch`): brute's answer, every index's default (:func:`sweep_pairs`,
  ``SpatialIndex._query_pairs``) and the ``sweep`` / ``sweep-mt`` peers of ``bench pairs``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange


@njit(cache=True, inline="always")
def pair_touch(ax: float, ay: float, az: float, ar: float, bx: float, by: float, bz: float,
               br: float, margin: float) -> bool:
    """``|c_a - c_b| <= r_a + r_b + margin`` in float64: the contract's (and oracle's) test."""
    dx = ax - bx
    dy = ay - by
    dz = az - bz
    return math.sqrt(dx * dx + dy * dy + dz * dz) <= ar + br + margin


@njit(cache=True)
def new_pairs(capacity: int) -> np.ndarray:
    """An empty int64 pair buffer of ``capacity`` rows (at least 16)."""
    return np.empty((max(capacity, 16), 2), dtype=np.int64)


@njit(cache=True)
def grown_pairs(out: np.ndarray) -> np.ndarray:
    """``out`` copied into a buffer twice its size (plus 16 rows): :func:`push_pair`'s cold
    path, and what a driver calls when its kernel stopped for room."""
    bigger = np.empty((2 * out.shape[0] + 16, 2), dtype=np.int64)
    bigger[: out.shape[0]] = out
    return bigger


@njit(cache=True, inline="always")
def push_pair(out: np.ndarray, k: int, a: int, b: int) -> np.ndarray:
    """Row ``k`` = (a, b), growing ``out`` when full; returns the (maybe new) buffer.

    Use as ``out = push_pair(out, k, a, b); k += 1``.
    """
    if k >= out.shape[0]:
        out = grown_pairs(out)
    out[k, 0] = a
    out[k, 1] = b
    return out


def selection(capacity: int, slots: np.ndarray | None) -> np.ndarray:
    """Per-slot mark of the ``ids`` filter: empty (no filter) for None, else True at ``slots``."""
    if slots is None:
        return np.zeros(0, dtype=np.bool_)
    sel = np.zeros(capacity, dtype=np.bool_)
    sel[slots] = True
    return sel


@njit(cache=True, inline="always")
def keep(sel: np.ndarray, a: int, b: int) -> bool:
    """Whether the pair of slots (a, b) passes the filter ``sel`` (empty: every pair)."""
    return sel.shape[0] == 0 or sel[a] or sel[b]


@njit(cache=True, inline="always")
def pairs_within(items: np.ndarray, i0: int, i1: int, centers: np.ndarray, radii: np.ndarray,
                 margin: float, sel: np.ndarray, out: np.ndarray, k: int):
    """Every touching pair of the slots ``items[i0:i1]``, appended at ``out[k]``; (out, k)."""
    for i in range(i0, i1):
        a = items[i]
        ax = centers[a, 0]
        ay = centers[a, 1]
        az = centers[a, 2]
        ar = radii[a]
        for j in range(i + 1, i1):
            b = items[j]
            if keep(sel, a, b) and pair_touch(ax, ay, az, ar, centers[b, 0], centers[b, 1],
                                              centers[b, 2], radii[b], margin):
                out = push_pair(out, k, a, b)
                k += 1
    return out, k


@njit(cache=True, inline="always")
def pairs_between(items: np.ndarray, i0: int, i1: int, others: np.ndarray, j0: int, j1: int,
                  centers: np.ndarray, radii: np.ndarray, margin: float, sel: np.ndarray,
                  out: np.ndarray, k: int):
    """Every touching pair (``items[i0:i1]`` x ``others[j0:j1]``), appended at ``out[k]``;
    (out, k). The two ranges must not share a slot (or the pair comes out twice)."""
    for i in range(i0, i1):
        a = items[i]
        ax = centers[a, 0]
        ay = centers[a, 1]
        az = centers[a, 2]
        ar = radii[a]
        for j in range(j0, j1):
            b = others[j]
            if keep(sel, a, b) and pair_touch(ax, ay, az, ar, centers[b, 0], centers[b, 1],
                                              centers[b, 2], radii[b], margin):
                out = push_pair(out, k, a, b)
                k += 1
    return out, k


# ------------------------------------------------------------------- the sort-and-sweep
#
# The project's one sort-and-sweep (Baraff's sweep and prune along the axis of largest spread):
# ``brute``'s ``query_pairs``, every index's default (:func:`sweep_pairs`) and the benchmark's
# ``sweep`` / ``sweep-mt`` peers all run these kernels, through :class:`SweepSpace`.

#: Rows of the sorted order dealt to one thread at a time (the parallel sweep).
SWEEP_ROWS = 256
_RADIX_BITS = 11
_RADIX_MASK = (1 << _RADIX_BITS) - 1
#: Outward pad of a float32 box, relative to its sphere's largest scaled coordinate: covers
#: float64 -> float32 rounding (2^-24) and the float64 decision's few roundings (~2^-50).
_PAD_REL = 2.0**-22
#: Absolute pad in the caller's units: below ~1.5e-154 a square underflows and the float64
#: test's distance is off by up to ~3e-162.
_PAD_UNDERFLOW = 1e-150
#: Absolute pad in scaled units: float32 subnormals round by up to 2^-150.
_PAD_TINY = 2.0**-120
#: The cross axes go on a uint16 grid of this many cells (half float32's bytes: the window
#: pass 2.4x faster) unless more than one box in 20 is narrower than _GRID_MIN_CELLS cells.
_GRID_CELLS = 65535.0
_GRID_MIN_CELLS = 16.0
#: (bit 8t of a word) * this >> 56 = t: the byte index of a hit byte's bit.
_BYTE_INDEX = np.uint64(0x0001020304050607)


@njit(cache=True)
def sweep_layout(centers: np.ndarray, radii: np.ndarray, slots: np.ndarray, margin: float,
                 x32: np.ndarray, lo32: np.ndarray, hi32: np.ndarray,
                 keys: np.ndarray) -> int:
    """The float32 boxes of the spheres ``slots`` (radius + margin/2, rounded outward) and
    their sort keys; returns the sweep axis, the one of largest variance.

    Writes, for the i-th of ``slots``: ``x32[0, i]`` / ``x32[1, i]`` the box's min / max on
    the sweep axis, ``lo32[a, i]`` / ``hi32[a, i]`` on the two cross axes (a = 0, 1) and
    ``keys[i]`` the order-preserving uint32 image of ``x32[0, i]``. Every coordinate is first
    multiplied by the power of two (exact) that brings the largest ``|c|`` and ``r + margin/2``
    into [0.5, 1): float32 then neither overflows (coordinates past its 3.4e38) nor loses tiny
    scales to its subnormals. Each box is grown by 2^-22 of its sphere's largest scaled
    coordinate plus an absolute pad (the float64 test's underflow, 1e-150 in the caller's
    units, at most 4 scaled: then every box holds every centre), so it contains the box of
    every sphere the float64 decision (:func:`pair_touch`) can accept: no pair is lost.
    """
    n = slots.shape[0]
    half = 0.5 * margin
    big = 0.0
    for i in range(n):
        s = slots[i]
        big = max(big, abs(centers[s, 0]), abs(centers[s, 1]), abs(centers[s, 2]),
                  radii[s] + half)
    scale = 1.0
    if 0.0 < big < math.inf:
        scale = math.ldexp(1.0, min(1000, -math.frexp(big)[1]))
    pad = min(_PAD_UNDERFLOW * scale + _PAD_TINY, 4.0)
    axis = 0
    if n > 1:  # variance of the scaled centres, shifted by the first (no overflow, no loss)
        s1 = np.zeros(3)
        s2 = np.zeros(3)
        f = slots[0]
        for i in range(n):
            s = slots[i]
            for a in range(3):
                d = centers[s, a] * scale - centers[f, a] * scale
                s1[a] += d
                s2[a] += d * d
        best = -1.0
        for a in range(3):
            var = s2[a] / n - (s1[a] / n) ** 2
            if var > best:
                best = var
                axis = a
    b1 = 1 if axis == 0 else 0
    b2 = 2 if axis != 2 else 1
    for i in range(n):
        s = slots[i]
        cx = centers[s, axis] * scale
        cy = centers[s, b1] * scale
        cz = centers[s, b2] * scale
        h = (radii[s] + half) * scale
        h += (max(abs(cx), abs(cy), abs(cz)) + h) * _PAD_REL + pad
        x32[0, i] = np.float32(cx - h)
        x32[1, i] = np.float32(cx + h)
        lo32[0, i] = np.float32(cy - h)
        hi32[0, i] = np.float32(cy + h)
        lo32[1, i] = np.float32(cz - h)
        hi32[1, i] = np.float32(cz + h)
    # order-preserving uint32 image of a float32: all bits of negatives flipped, the sign
    # bit of the rest
    bits = x32[0].view(np.uint32)
    sign = np.uint32(0x80000000)
    for i in range(n):
        u = bits[i]
        keys[i] = ~u if u & sign else u | sign
    return axis


@njit(cache=True)
def radix_argsort(keys: np.ndarray, passes: int = 3) -> np.ndarray:
    """Stable LSD radix argsort of unsigned keys (uint32; uint64 too): ``passes`` passes of
    11 bits (three cover 32-bit keys, six 64-bit ones), int32 order."""
    n = keys.shape[0]
    order = np.arange(n).astype(np.int32)
    tmp_o = np.empty(n, np.int32)
    k = keys.copy()
    tmp_k = np.empty_like(k)
    count = np.zeros(_RADIX_MASK + 1, np.int64)
    mask = k.dtype.type(_RADIX_MASK)
    for p in range(passes):
        shift = k.dtype.type(p * _RADIX_BITS)
        count[:] = 0
        for i in range(n):
            count[(k[i] >> shift) & mask] += 1
        if count.max() == n:  # every key has the same digit: this pass keeps the order
            continue
        total = 0
        for d in range(_RADIX_MASK + 1):
            c = count[d]
            count[d] = total
            total += c
        for i in range(n):
            d = (k[i] >> shift) & mask
            j = count[d]
            count[d] = j + 1
            tmp_k[j] = k[i]
            tmp_o[j] = order[i]
        k, tmp_k = tmp_k, k
        order, tmp_o = tmp_o, order
    return order


@njit(cache=True)
def _sweep_grid(lo32: np.ndarray, hi32: np.ndarray, n: int, lo16: np.ndarray,
                hi16: np.ndarray) -> bool:
    """The first n cross-axis boxes of ``lo32`` / ``hi32`` on a uint16 grid per axis
    (``lo16`` / ``hi16``), or False (nothing usable written) when the grid is too coarse:
    more than one box in 20 narrower than 16 cells (a few far objects stretch it).

    Conservative: a bound maps to ``(v - min) / cell`` in float64, monotone in v, the mins
    rounded down and the maxes up, so boxes that overlap in float32 overlap on the grid.
    """
    for a in range(2):
        lo_min = np.inf
        hi_max = -np.inf
        for i in range(n):
            lo_min = min(lo_min, np.float64(lo32[a, i]))
            hi_max = max(hi_max, np.float64(hi32[a, i]))
        span = hi_max - lo_min
        if not 0.0 < span < np.inf:
            return False
        cell = span / _GRID_CELLS * (1.0 + 2.0**-20)  # (max - min) / cell stays < 65535
        thin = _GRID_MIN_CELLS * cell
        small = 0
        for i in range(n):
            small += np.float64(hi32[a, i]) - np.float64(lo32[a, i]) < thin
        if small * 20 > n:
            return False
        inv = 1.0 / cell
        for i in range(n):
            lo16[a, i] = np.uint16(math.floor((np.float64(lo32[a, i]) - lo_min) * inv))
            hi16[a, i] = np.uint16(min(_GRID_CELLS,
                                       math.ceil((np.float64(hi32[a, i]) - lo_min) * inv)))
    return True


@njit(cache=True, parallel=True)
def _sweep_gather_boxes(order, x32, lo32, hi32, s_x, s_lo, s_hi):
    """Lay the boxes (x32, lo, hi rows) out in sweep order. Two gathers of five and seven
    arrays instead of one of all twelve: numba's parfor lowering loses writes through arrays
    taken out of a tuple argument (the tests' pairs came out as -1), and its loop takes no
    record."""
    for k in prange(order.shape[0]):
        i = order[k]
        s_x[0, k] = x32[0, i]
        s_x[1, k] = x32[1, i]
        s_lo[0, k] = lo32[0, i]
        s_lo[1, k] = lo32[1, i]
        s_hi[0, k] = hi32[0, i]
        s_hi[1, k] = hi32[1, i]


@njit(cache=True, parallel=True)
def _sweep_gather_spheres(order, slots, labels, centers, radii, s_c, s_lab):
    """Lay the float64 spheres (``s_c`` rows: x, y, z, r) and the labels out in sweep order."""
    for k in prange(order.shape[0]):
        i = order[k]
        s = slots[i]
        s_c[k, 0] = centers[s, 0]
        s_c[k, 1] = centers[s, 1]
        s_c[k, 2] = centers[s, 2]
        s_c[k, 3] = radii[s]
        s_lab[k] = labels[i]


@njit(cache=True)
def _sweep_chosen(s_lab, sel, chosen) -> int:
    """The sorted rows whose label ``sel`` marks, in order, into ``chosen``; how many."""
    nc = 0
    for i in range(s_lab.shape[0]):
        chosen[nc] = i
        nc += sel[s_lab[i]]
    return nc


@njit(cache=True)
def _sweep_marked(pairs, sel) -> np.ndarray:
    """Which rows of ``pairs`` have a member ``sel`` marks."""
    out = np.empty(pairs.shape[0], np.bool_)
    for k in range(pairs.shape[0]):
        out[k] = sel[pairs[k, 0]] or sel[pairs[k, 1]]
    return out


@njit(cache=True)
def _sweep_reach(x0, x1) -> float:
    """How far behind a box's min (sweep axis) the min of a box reaching it can lie: the
    widest box, widened past the rounding of its float64 difference."""
    w = 0.0
    for i in range(x0.shape[0]):
        w = max(w, np.float64(x1[i]) - np.float64(x0[i]))
    return w * (1.0 + 2.0**-40) + 2.0**-140


@njit(cache=True)
def _sweep_ends(x0, x1, keys, ends) -> None:
    """``ends[i]``: one past the last sorted row whose min is <= row i's max (its window's
    end), for every row at once: the maxes radix-sorted (keys in ``keys``) and merged with
    the sorted mins, O(n) (a binary search per row costs 2-3x more)."""
    n = x0.shape[0]
    bits = x1.view(np.uint32)
    sign = np.uint32(0x80000000)
    for i in range(n):
        u = bits[i]
        keys[i] = ~u if u & sign else u | sign
    order = radix_argsort(keys)
    p = 0
    for j in range(n):
        i = order[j]
        v = x1[i]
        while p < n and x0[p] <= v:
            p += 1
        ends[i] = p


class SortedSweep(NamedTuple):
    """One sweep's rows in sweep order, as :func:`_sweep_rows` reads them."""

    nitems: int  # items to sweep: every row, or the chosen rows when filtered
    chosen: np.ndarray  # int64: the sorted rows a filter marks (filtered only)
    ends: np.ndarray  # int64: each row's window end ahead (unfiltered only)
    filtered: bool
    x0: np.ndarray  # float32: min along the sweep axis, sorted
    x1: np.ndarray  # float32: max along the sweep axis
    lo0: np.ndarray  # float32 or uint16: the first cross axis' min
    hi0: np.ndarray
    lo1: np.ndarray  # the second cross axis
    hi1: np.ndarray
    spheres: np.ndarray  # (n, 4) float64 x, y, z, r
    labels: np.ndarray  # int64: the label each row answers with
    margin: float
    sel: np.ndarray  # bool per label: the ids filter (empty: none)
    reach: float  # how far behind a chosen row a partner's min can lie (filtered only)


@njit(cache=True)
def _sweep_rows(t: int, nt: int, first: int, sw: SortedSweep, hit, out, k: int):
    """Thread ``t``'s share of the rows (blocks t, t + nt, ... of :data:`SWEEP_ROWS` items;
    item q is sorted row q, or ``chosen[q]`` when ``filtered``) from item ``first`` on, pairs
    written at ``out[k]`` (labels, smaller first): (count, the item whose pairs did not fit,
    or -1 when done).

    A row's window ahead: the rows after it whose min is <= its max (``ends``, or a binary
    search when ``filtered``), every pair. ``filtered``: also behind, the rows whose min lies
    within ``reach`` before its own, pairs with unchosen rows only (a chosen row behind finds
    this one ahead), so each pair once.

    Per window, one branch-free pass over its rows writes a byte per row, 1 when the boxes
    also overlap on the two cross axes (unsigned indices, and no count of the hits: a
    reduction in the loop halves its vector width, 1.8x slower); the bytes are then read
    eight at a time (``hit``: a multiple of 8 bytes, at least n + 8), each set byte of a word
    found by bit arithmetic and listed; then each listed candidate decided by
    :func:`pair_touch` (``s_c`` rows: x, y, z, r), its pair written whatever the answer and
    counted only if it touches: a loop without branches, so the CPU overlaps the float64
    tests (together 1.3x faster than a loop over each word's bytes). Written out in one
    function (no
    helper takes arrays: numba counts references to every array argument on every call,
    ~85 ns a row) and ``out`` never reassigned (that keeps the loops vectorised): a row whose
    pairs do not fit is left to the caller, who grows ``out``.
    """
    nitems, chosen, ends, filtered = sw.nitems, sw.chosen, sw.ends, sw.filtered
    x0, x1, lo0, hi0, lo1, hi1 = sw.x0, sw.x1, sw.lo0, sw.hi0, sw.lo1, sw.hi1
    s_c, s_lab, margin, sel, reach = sw.spheres, sw.labels, sw.margin, sw.sel, sw.reach
    words = hit.view(np.uint64)
    cand = np.empty(hit.shape[0], np.int64)
    room = out.shape[0]
    nblocks = (nitems + SWEEP_ROWS - 1) // SWEEP_ROWS
    for b in range(t, nblocks, nt):
        for q in range(max(b * SWEEP_ROWS, first), min(nitems, (b + 1) * SWEEP_ROWS)):
            if filtered:
                i = chosen[q]
                end = np.searchsorted(x0, x1[i], side="right")
            else:
                i = q
                end = ends[i]
            l0 = lo0[i]
            h0 = hi0[i]
            l1 = lo1[i]
            h1 = hi1[i]
            k0 = k
            for side in range(2 if filtered else 1):  # 0: ahead, 1: behind (filtered)
                if side == 0:
                    j0 = i + 1
                    w = end - j0
                else:
                    xi = np.float64(x0[i])  # (less the subtraction's rounding)
                    j0 = np.searchsorted(x0, xi - reach - (abs(xi) + reach) * 2.0**-50,
                                         side="left")
                    w = i - j0
                if w <= 0:
                    continue
                base = np.uint64(j0)
                for u in range(np.uint64(w)):
                    j = base + u
                    hit[u] = np.uint8((lo0[j] <= h0) & (hi0[j] >= l0) & (lo1[j] <= h1)
                                      & (hi1[j] >= l1))
                nw = (w + 7) >> 3
                for u in range(w, nw << 3):
                    hit[u] = 0
                ax = s_c[i, 0]
                ay = s_c[i, 1]
                az = s_c[i, 2]
                ar = s_c[i, 3]
                la = s_lab[i]
                nc = 0
                for wi in range(nw):
                    wd = words[wi]
                    while wd:
                        low = wd & (~wd + np.uint64(1))  # the lowest hit byte's bit
                        wd ^= low
                        cand[nc] = j0 + (wi << 3) + np.int64((low * _BYTE_INDEX)
                                                             >> np.uint64(56))
                        nc += 1
                for c in range(nc):  # no branches: the float64 tests overlap in the CPU
                    j = cand[c]
                    lb = s_lab[j]
                    ok = pair_touch(ax, ay, az, ar, s_c[j, 0], s_c[j, 1], s_c[j, 2], s_c[j, 3],
                                    margin)
                    if side == 1:
                        ok = ok and not sel[lb]
                    if k < room:  # written whatever the test says, counted if it touches
                        out[k, 0] = min(la, lb)
                        out[k, 1] = max(la, lb)
                    k += ok
            if k > room:
                return k0, q
    return k, -1


@njit(cache=True, parallel=True)
def _sweep_threads(nt: int, sw: SortedSweep, hits, buf, base, room, count, stop):
    """Thread ``t`` sweeps its share into ``buf[base[t] : base[t] + room[t]]`` (hit bytes in
    ``hits[t]``); a thread whose region fills records the item it stopped at in ``stop[t]``
    (else -1)."""
    for t in prange(nt):
        k, s = _sweep_rows(t, nt, 0, sw, hits[t], buf[base[t]: base[t] + room[t]], 0)
        count[t] = k
        stop[t] = s


@njit(cache=True, parallel=True)
def _sweep_concat(buf, base, count, extra, extra_n, total):
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


class SweepSpace:
    """The sort-and-sweep with its buffers, kept from one call to the next.

    :meth:`pairs` per call: one compiled pass picks the axis and writes every box as float32
    structure of arrays, rounded outward (:func:`sweep_layout`); the cross axes go on a
    uint16 grid when it is fine enough for the boxes (:func:`_sweep_grid`: half the bytes,
    the window pass 2.4x faster); a compiled LSD radix argsort of the boxes' mins
    (:func:`radix_argsort`, O(n)); one gather lays everything out in that order; each row's
    window end by one merge of the sorted maxes with the mins (:func:`_sweep_ends`); then
    each window is tested on the two cross axes in one branch-free vectorised pass writing a
    byte per box, and the few candidates decided by the contract's float64 test
    (:func:`pair_touch`) (:func:`_sweep_rows`). The kernels never grow the output: they stop
    when it is full, a driver grows it and resumes. On several threads (``parallel``,
    numba's current thread count): rows dealt to the threads in blocks of
    :data:`SWEEP_ROWS`, one output region per thread sized from the last call, a region that
    fills finished serially.
    """

    def __init__(self) -> None:
        self._cap = -1
        self._reserve(0)
        self._out = np.empty((1024, 2), np.int64)
        self._extra = np.empty((1024, 2), np.int64)
        self._hits = np.zeros((1, 16), np.uint8)
        #: Each thread's output rows for the next parallel call (grown from the last call's).
        self.room = np.zeros(0, np.int64)
        #: The last call's sweep axis (-1 before the first).
        self.axis = -1
        #: Whether the last call tested the cross axes on the uint16 grid (else float32).
        self.grid = False

    def _reserve(self, n: int) -> None:
        if n <= self._cap:
            return
        cap = max(n, self._cap + self._cap // 4)
        self._cap = cap
        self._x32 = np.empty((2, cap), np.float32)
        self._lo32 = np.empty((2, cap), np.float32)
        self._hi32 = np.empty((2, cap), np.float32)
        self._keys = np.empty(cap, np.uint32)
        self._s_x = np.empty((2, cap), np.float32)
        self._s_lo = np.empty((2, cap), np.float32)
        self._s_hi = np.empty((2, cap), np.float32)
        self._lo16 = np.empty((2, cap), np.uint16)
        self._hi16 = np.empty((2, cap), np.uint16)
        self._s_lo16 = np.empty((2, cap), np.uint16)
        self._s_hi16 = np.empty((2, cap), np.uint16)
        self._s_c = np.empty((cap, 4))
        self._s_lab = np.empty(cap, np.int64)
        self._chosen = np.empty(cap, np.int64)
        self._ends = np.empty(cap, np.int64)

    def pairs(self, centers: np.ndarray, radii: np.ndarray, slots: np.ndarray,
              labels: np.ndarray, margin: float, sel: np.ndarray | None = None,
              parallel: bool = False, copy: bool = True) -> np.ndarray:
        """Touching pairs among the spheres ``centers[slots]``, ``radii[slots]`` within
        ``margin``: int64 (K, 2) rows of ``labels`` (aligned with ``slots``), smaller first.

        ``sel``: the ``ids`` filter (:func:`selection`, indexed by label): only pairs with a
        marked member (the marked rows' windows ahead and behind; when more than half the
        rows are marked, every row's window ahead and the marked pairs kept). ``parallel``:
        on numba's current thread count (the caller picks it, e.g. ``threads_for``).
        ``copy=False``: the answer may be a view of a buffer the next call overwrites. No
        input checks: the caller's.
        """
        n = slots.shape[0]
        if n < 2:
            return np.zeros((0, 2), np.int64)
        self._reserve(n)
        margin = float(margin)
        keys = self._keys[:n]
        self.axis = sweep_layout(centers, radii, slots, margin, self._x32, self._lo32,
                                 self._hi32, keys)
        order = radix_argsort(keys)
        self.grid = _sweep_grid(self._lo32, self._hi32, n, self._lo16, self._hi16)
        lo, hi, s_lo, s_hi = ((self._lo16, self._hi16, self._s_lo16, self._s_hi16) if self.grid
                              else (self._lo32, self._hi32, self._s_lo, self._s_hi))
        _sweep_gather_boxes(order, self._x32, lo, hi, self._s_x, s_lo, s_hi)
        _sweep_gather_spheres(order, slots, labels, centers, radii, self._s_c, self._s_lab)
        x0, x1 = self._s_x[0, :n], self._s_x[1, :n]
        s_lab = self._s_lab[:n]
        filtered = sel is not None and sel.shape[0] > 0
        keep = None
        nitems = n
        if filtered:
            nitems = _sweep_chosen(s_lab, sel, self._chosen)
            if 2 * nitems > n:  # most rows chosen: sweep every row, keep the marked pairs
                filtered, keep, nitems = False, sel, n
        if filtered:
            reach = _sweep_reach(x0, x1)
        else:
            sel = np.zeros(0, np.bool_)
            reach = 0.0
            _sweep_ends(x0, x1, keys, self._ends[:n])
        sw = SortedSweep(nitems, self._chosen, self._ends, filtered, x0, x1, s_lo[0, :n],
                         s_hi[0, :n], s_lo[1, :n], s_hi[1, :n], self._s_c[:n], s_lab, margin,
                         sel, reach)
        res = self._sweep(n, nitems, sw, parallel, copy and keep is None)
        return res if keep is None else res[_sweep_marked(res, keep)]

    def _sweep(self, n: int, nitems: int, sw: SortedSweep, parallel: bool,
               copy: bool) -> np.ndarray:
        """The sweep of ``nitems`` rows of ``sw``, on one thread or on numba's thread count:
        (K, 2) pairs."""
        nt = numba.get_num_threads() if parallel else 1
        width = (n + 15) // 8 * 8
        if self._hits.shape[0] < nt or self._hits.shape[1] < width:
            self._hits = np.zeros((nt, width), np.uint8)
        if nt == 1 or nitems <= SWEEP_ROWS:
            self._out, k = _sweep_finish(0, 1, 0, sw, self._hits[0], self._out, 0)
            return self._out[:k].copy() if copy else self._out[:k]
        if self.room.shape[0] != nt:
            self.room = np.full(nt, 2 * n // nt + 1024, np.int64)
        base = np.zeros(nt, np.int64)
        base[1:] = np.cumsum(self.room)[:-1]
        total_room = int(self.room.sum())
        if self._out.shape[0] < total_room:
            self._out = np.empty((total_room, 2), np.int64)
        count = np.zeros(nt, np.int64)
        stop = np.full(nt, -1, np.int64)
        _sweep_threads(nt, sw, self._hits, self._out, base, self.room, count, stop)
        extra = self._extra
        ek = 0
        for t in range(nt):
            more = 0
            if stop[t] >= 0:  # region full: finish this thread's rows here, serially
                extra, ek2 = _sweep_finish(t, nt, int(stop[t]), sw, self._hits[t], extra, ek)
                more = ek2 - ek
                ek = ek2
            # next call's room: this call's count + 30 %
            self.room[t] = max(self.room[t], int(1.3 * (count[t] + more)) + 1024)
        self._extra = extra
        return _sweep_concat(self._out, base, count, extra, ek, int(count.sum()) + ek)


def _sweep_finish(t: int, nt: int, first: int, sw: SortedSweep, hit: np.ndarray,
                  out: np.ndarray, k: int) -> tuple[np.ndarray, int]:
    """Thread ``t``'s share from item ``first`` on into ``out`` from row ``k``, growing it
    between kernel calls: (out, count)."""
    while first >= 0:
        k, first = _sweep_rows(t, nt, first, sw, hit, out, k)
        if first >= 0:
            out = grown_pairs(out)
    return out, k


def sweep_pairs(centers: np.ndarray, radii: np.ndarray, slots: np.ndarray, margin: float,
                sel: np.ndarray) -> np.ndarray:
    """Touching pairs among ``slots`` by the sort-and-sweep (:class:`SweepSpace`, one
    thread, fresh buffers): int64 (K, 2) slot pairs. ``sel``: the ``ids`` filter
    (:func:`selection`); empty: every pair."""
    slots = np.ascontiguousarray(slots, dtype=np.int64)
    return SweepSpace().pairs(centers, radii, slots, slots, margin, sel)


@njit(cache=True)
def all_pairs(centers: np.ndarray, radii: np.ndarray, slots: np.ndarray, margin: float,
              sel: np.ndarray) -> np.ndarray:
    """Touching pairs among ``slots`` by testing every pair: the O(n^2) reference loop."""
    out, k = pairs_within(slots, 0, slots.shape[0], centers, radii, margin, sel,
                          new_pairs(slots.shape[0]), 0)
    return out[:k]


def slot_pairs_to_ids(pairs: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Slot pairs -> id pairs with the smaller id first (``ids``: the store's id per slot).

    The output is numpy's (huge pages for a big one): allocated inside a kernel, the 32 MB of
    two million pairs cost a page fault every 4 KiB, 16-17 ms against 7 here."""
    out = np.empty((pairs.shape[0], 2), dtype=np.int64)
    slot_pairs_into(pairs, ids, out)
    return out


@njit(cache=True)
def slot_pairs_into(pairs: np.ndarray, ids: np.ndarray, out: np.ndarray) -> None:
    """Row k of ``out``: slot pair k as ids, the smaller first (``out`` as long as ``pairs``)."""
    for k in range(pairs.shape[0]):
        a = ids[pairs[k, 0]]
        b = ids[pairs[k, 1]]
        out[k, 0] = min(a, b)
        out[k, 1] = max(a, b)


def check_margin(margin: float) -> float:
    """``margin`` as a float; ValueError unless it is finite and >= 0."""
    try:
        m = float(margin)
    except (TypeError, ValueError):
        raise ValueError(
            f"query_pairs: margin must be a finite number >= 0, got {margin!r}") from None
    if not math.isfinite(m) or m < 0.0:
        raise ValueError(f"query_pairs: margin must be finite and >= 0, got {m}")
    return m
