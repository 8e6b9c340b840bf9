"""Collision broad-phase kernels every index shares (design.md, "Collision broad-phase").

The contract: every pair of live objects whose spheres are within ``margin`` of touching,
``|c_a - c_b| <= r_a + r_b + margin`` (:func:`pair_touch`, float64, the oracle's arithmetic),
each pair once. Indexes answer in *slots*: ``SpatialIndex._query_pairs(slots, margin)`` returns
an int64 ``(K, 2)`` array of slot pairs (any row order, either order inside a row); the public
``query_pairs`` maps them to ids with ``a < b`` (:func:`slot_pairs_to_ids`).

What a structure's own pair query builds on:

* the output buffer: :func:`new_pairs` then ``out = push_pair(out, k, a, b); k += 1`` (doubles
  when full, no Python in the loop), ``out[:k]`` at the end. In a hot kernel, do not reassign
  the buffer: a function that does gets no vectorised loops (measured 3-4x slower). Write
  ``out[k]`` directly, stop and return (k, where) when the next hits would not fit, and let a
  small driver grow it (:func:`grown_pairs`) and call again (as :func:`sweep_pairs` does);
* index vectorisable loops with unsigned integers (``np.uint64``): signed indices carry
  numba's negative-index wraparound, which kept the sweep's window loop scalar (3x);
* the ``ids`` filter as a per-slot mark (:func:`selection`): an empty array means "every pair";
  :func:`keep` says whether a pair involves a marked slot;
* brute force on ranges of a slot list (a leaf, a cell): :func:`pairs_within` (every pair of
  one range) and :func:`pairs_between` (every pair across two ranges);
* :func:`sweep_pairs`: the standard broad-phase, a sort-and-sweep of a slot list along the axis
  of largest spread; every index's default (``SpatialIndex._query_pairs``) and brute's answer.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: float64 unit roundoff; the sweep's pruning bound allows 16 roundings of the largest term.
_U64 = 2.0 ** -53
_SWEEP_ROUNDINGS = 16.0


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


@njit(cache=True)
def spread_axis(centers: np.ndarray, slots: np.ndarray) -> int:
    """The axis (0, 1, 2) along which the centres of ``slots`` vary most (largest variance)."""
    n = slots.shape[0]
    if n < 2:
        return 0
    best = 0
    best_var = -1.0
    for a in range(3):
        # Shifted by the first centre: the variance of large coordinates stays accurate.
        c0 = centers[slots[0], a]
        s = 0.0
        s2 = 0.0
        for i in range(n):
            d = centers[slots[i], a] - c0
            s += d
            s2 += d * d
        var = s2 / n - (s / n) ** 2
        if var > best_var:
            best_var = var
            best = a
    return best


@njit(cache=True)
def sweep_pairs(centers: np.ndarray, radii: np.ndarray, slots: np.ndarray, margin: float,
                sel: np.ndarray) -> np.ndarray:
    """Touching pairs among ``slots`` by sort-and-sweep: int64 (K, 2) slot pairs.

    The standard broad-phase (Baraff's sweep and prune on one axis): sort the spheres' lower
    ends along the axis of largest spread; each sphere's candidates are those that start
    before it ends (plus the margin), a window found by binary search. The window runs a
    branch-free float64 distance test (it vectorises) widened by a few roundings
    (:func:`_sweep_slack`), and the few candidates it lets through get the exact test
    (:func:`pair_touch`), so no pair the exact test accepts is ever dropped.
    ``sel``: the ``ids`` filter (:func:`selection`): then only the chosen spheres' windows
    are swept, ahead and behind (:func:`_sweep_chosen_from`).
    """
    n = slots.shape[0]
    if n < 2:
        return new_pairs(16)[:0]
    axis = spread_axis(centers, slots)
    lo = np.empty(n)
    big = 0.0
    rmax = 0.0
    for i in range(n):
        s = slots[i]
        lo[i] = centers[s, axis] - radii[s]
        big = max(big, abs(centers[s, 0]), abs(centers[s, 1]), abs(centers[s, 2]))
        rmax = max(rmax, radii[s])
    order = np.argsort(lo)
    # The sorted spheres, one array per field: the window loop reads consecutive memory.
    sx = np.empty(n)
    sy = np.empty(n)
    sz = np.empty(n)
    sr = np.empty(n)
    los = np.empty(n)
    ss = np.empty(n, dtype=np.int64)
    for i in range(n):
        s = slots[order[i]]
        ss[i] = s
        los[i] = lo[order[i]]
        sx[i] = centers[s, 0]
        sy[i] = centers[s, 1]
        sz[i] = centers[s, 2]
        sr[i] = radii[s]
    sa = sx if axis == 0 else (sy if axis == 1 else sz)
    wide = margin + _sweep_slack(big, rmax, margin)
    hit = np.empty(n, dtype=np.uint8)
    out = new_pairs(n)
    k = 0
    if sel.shape[0] > 0:  # the ids filter: only the chosen spheres' windows, both ways
        chosen = np.empty(n, dtype=np.int64)
        nc = 0
        for i in range(n):
            chosen[nc] = i
            nc += sel[ss[i]]
        back = np.empty(n, dtype=np.uint8)
        q = 0
        while True:
            k, q = _sweep_chosen_from(q, chosen[:nc], sx, sy, sz, sr, sa, los, ss, margin,
                                      wide, 2.0 * rmax, sel, hit, back, out, k)
            if q >= nc:
                return out[:k]
            out = grown_pairs(out)
    i = 0
    while True:  # the sweep stops before overflowing the buffer; grow it and go on
        k, i = _sweep_from(i, sx, sy, sz, sr, sa, los, ss, margin, wide, hit, out, k)
        if i >= n:
            return out[:k]
        out = grown_pairs(out)  # (out holds >= n rows: doubled, it holds any window's hits)


@njit(cache=True)
def _sweep_from(i0: int, sx, sy, sz, sr, sa, los, ss, margin: float, wide: float, hit,
                out, k: int):
    """The sweep of :func:`sweep_pairs` from sorted sphere ``i0`` on, writing pairs at
    ``out[k]``; returns (k, i): i = n when done, else the sphere whose hits would not fit.

    It never grows ``out`` itself: a function that reassigns the buffer does not get its
    window loop vectorised (measured 4x slower), so the caller grows it and calls again.
    """
    n = sx.shape[0]
    for i in range(i0, n):
        ax = sx[i]
        ay = sy[i]
        az = sz[i]
        ar = sr[i]
        j1 = np.searchsorted(los, sa[i] + ar + wide, side="right")
        m = _window(sx, sy, sz, sr, i + 1, j1, ax, ay, az, ar + wide, hit)
        if m == 0:
            continue
        if k + m > out.shape[0]:
            return k, i
        a = ss[i]
        for j in range(i + 1, j1):
            if hit[j - i - 1] and pair_touch(ax, ay, az, ar, sx[j], sy[j], sz[j], sr[j],
                                             margin):
                out[k, 0] = a
                out[k, 1] = ss[j]
                k += 1
    return k, n


@njit(cache=True)
def _sweep_chosen_from(q0: int, chosen, sx, sy, sz, sr, sa, los, ss, margin: float,
                       wide: float, span: float, sel, hit, back, out, k: int):
    """The filtered sweep from chosen sphere ``q0`` on: each chosen sphere's window ahead
    (every pair) and behind (pairs with unchosen spheres: a chosen one behind finds it in
    its own window ahead), so each pair comes once; returns (k, q) as :func:`_sweep_from`.

    Behind, a sphere can reach the chosen one only if it starts at most ``span`` (twice the
    largest radius) plus the margin before it: that bounds the window behind.
    """
    nc = chosen.shape[0]
    for q in range(q0, nc):
        i = chosen[q]
        ax = sx[i]
        ay = sy[i]
        az = sz[i]
        ar = sr[i]
        j1 = np.searchsorted(los, sa[i] + ar + wide, side="right")
        jb = min(np.searchsorted(los, los[i] - span - 2.0 * wide, side="left"), i)
        m = _window(sx, sy, sz, sr, i + 1, j1, ax, ay, az, ar + wide, hit)
        m += _window(sx, sy, sz, sr, jb, i, ax, ay, az, ar + wide, back)
        if m == 0:
            continue
        if k + m > out.shape[0]:
            return k, q
        a = ss[i]
        for j in range(i + 1, j1):
            if hit[j - i - 1] and pair_touch(ax, ay, az, ar, sx[j], sy[j], sz[j], sr[j],
                                             margin):
                out[k, 0] = a
                out[k, 1] = ss[j]
                k += 1
        for j in range(jb, i):
            if back[j - jb] and not sel[ss[j]] and pair_touch(ax, ay, az, ar, sx[j], sy[j],
                                                              sz[j], sr[j], margin):
                out[k, 0] = a
                out[k, 1] = ss[j]
                k += 1
    return k, nc


@njit(cache=True, inline="always")
def _window(sx, sy, sz, sr, j0: int, j1: int, ax, ay, az, reach, hit) -> int:
    """Branch-free: ``hit[j - j0]`` = |c_a - c_j| <= reach + r_j (squared) for j in j0 ..
    j1-1; returns how many hit. Unsigned indices (no negative-index wraparound) and bytes
    from index 0: the loop vectorises (3x faster than signed indices, 3.5x than bools at j)."""
    m = 0
    base = np.uint64(j0)
    for j in range(np.uint64(max(j1 - j0, 0))):
        k = base + j
        dx = ax - sx[k]
        dy = ay - sy[k]
        dz = az - sz[k]
        t = reach + sr[k]
        h = np.uint8(dx * dx + dy * dy + dz * dz <= t * t)
        hit[j] = h
        m += h
    return m


@njit(cache=True, inline="always")
def _sweep_slack(big: float, rmax: float, margin: float) -> float:
    """Widening of the sweep's window bound and of its squared distance test, so that both
    are conservative for the exact test: many float64 roundings of the largest coordinate,
    radius and margin (the window bound's ends and the squares each round a few times); and
    1e-150 absolute: below about 1.5e-154 a squared component underflows, so the exact test's
    distance can be off by that much."""
    return _SWEEP_ROUNDINGS * _U64 * (2.0 * big + 2.0 * rmax + margin) + 1e-150


@njit(cache=True)
def all_pairs(centers: np.ndarray, radii: np.ndarray, slots: np.ndarray, margin: float,
              sel: np.ndarray) -> np.ndarray:
    """Touching pairs among ``slots`` by testing every pair: the O(n^2) reference loop."""
    out, k = pairs_within(slots, 0, slots.shape[0], centers, radii, margin, sel,
                          new_pairs(slots.shape[0]), 0)
    return out[:k]


@njit(cache=True)
def slot_pairs_to_ids(pairs: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Slot pairs -> id pairs with the smaller id first (``ids``: the store's id per slot)."""
    out = np.empty((pairs.shape[0], 2), dtype=np.int64)
    for k in range(pairs.shape[0]):
        a = ids[pairs[k, 0]]
        b = ids[pairs[k, 1]]
        out[k, 0] = min(a, b)
        out[k, 1] = max(a, b)
    return out


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
