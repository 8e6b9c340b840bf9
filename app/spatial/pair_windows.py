"""Packed-sphere windows of a collision broad-phase: a branch-free distance prefilter over a
contiguous run of packed spheres (it vectorises), the exact test on its hits only, and the
growth of a pair buffer a walk stopped for. The hashed grid packs a cell's items into one
run, the fixed octree a node's own and handed-down lists: both walk them with these.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.pairs import pair_touch

_WIDEN = 1.0 + 1e-12  # relative widening of the vectorised distance prefilter


@njit(cache=True)
def grown_to(out: np.ndarray, need: int) -> np.ndarray:
    """``out`` copied into a pair buffer of at least ``need`` rows (doubling)."""
    cap = out.shape[0]
    while cap < need:
        cap = 2 * cap + 16
    bigger = np.empty((cap, 2), dtype=np.int64)
    bigger[: out.shape[0]] = out
    return bigger


@njit(cache=True, inline="always")
def window(px, py, pz, pr, j0, j1, ax, ay, az, reach, hit):
    """Branch-free: ``hit[j - j0]`` = 1 where |c_a - c_j| <= reach + r_j may hold, for j in
    j0 .. j1-1 of the packed spheres; returns how many. Conservative for :func:`pair_touch`:
    the bound is widened by 1e-12 relative (the squares and sums round a few times), and
    sums under 1e-100 always pass (their squares lose precision). Unsigned indices from a
    base and bytes from index 0: the loop vectorises."""
    m = 0
    base = np.uint64(j0)
    for j in range(np.uint64(max(j1 - j0, 0))):
        q = base + j
        dx = ax - px[q]
        dy = ay - py[q]
        dz = az - pz[q]
        t = (reach + pr[q]) * _WIDEN
        h = np.uint8((dx * dx + dy * dy + dz * dz <= t * t) | (t < 1e-100))
        hit[j] = h
        m += h
    return m


@njit(cache=True, inline="always")
def emit(query, j0, nhit, spheres, ps, hit, margin, sel, out, k):
    """The exact test on the ``nhit`` hits of the :func:`window` from ``j0``, stopping at the
    last hit; rows at out[k:] as far as they fit; returns the end.

    ``query`` is the tested object (slot a, centre ax ay az, radius ar, and fa: a is
    filtered out, only pairs with a marked member count), scalars that go by value;
    ``spheres`` the packed (x, y, z, r) arrays, a tuple the caller builds once outside its
    loops (a tuple of arrays built per call would count references per call), ``ps`` their
    slots."""
    a, ax, ay, az, ar, fa = query
    px, py, pz, pr = spheres
    cap = out.shape[0]
    j = j0 - 1
    for _ in range(nhit):
        j += 1
        while not hit[j - j0]:
            j += 1
        b = ps[j]
        if not (fa and not sel[b]) and pair_touch(ax, ay, az, ar, px[j], py[j], pz[j], pr[j],
                                                  margin):
            if k < cap:
                out[k, 0] = a
                out[k, 1] = b
            k += 1
    return k
