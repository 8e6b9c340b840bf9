"""The region queries' sieve: box, sphere and ray queries decided from float32 copies.

A float32 copy of a sphere (a tree block's record, a flat copy's row: ``scan.to32`` of the
store's float64 values) is within 2^-24 of the exact sphere in each coordinate and in the
radius. With a margin of twice the trees' record widening (2^-21 of the copy's magnitude)
plus 1e-12 of every magnitude in play, which covers the float64 roundings of this test and
of the exact one, the copy alone rules an object out, rules it in, or leaves it to the
store's float64 test (only objects within a few float32 roundings of the boundary, and a
ray's few candidates, which need their distances). Copies past :data:`SIEVE_BIG` (clamped
by ``to32``) are always left to the store. A dead flat row (radius ``-inf``) is ruled out.

The box and sphere sieves return sums of comparisons, not branches, so that a loop over a
block compacts its candidates without a branch an object: written as branches (one
unpredictable branch a face) the same sieve took 13 ns an object against 4.5.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.geom.decide import REGION_BOX, REGION_RAY, region_hit
from app.geom.predicates import ray_box_hits
from app.spatial.scan import compact, verdict_words

#: The relative margin (see the module docstring): twice the trees' 2^-22 record widening,
#: and 1e-12 for the float64 roundings.
SIEVE_MARGIN = 2.0 * 2.0 ** -22 + 1e-12
#: Copies at least this large (a coordinate's magnitude plus the radius) may be clamped.
SIEVE_BIG = 1e37


@njit(cache=True, inline="always")
def query_magnitude(qa, qb, qr: float) -> float:
    """The largest magnitude of a region query's numbers (its corners, centre, origin and
    direction, radius)."""
    return max(abs(qa[0]), abs(qa[1]), abs(qa[2]), abs(qb[0]), abs(qb[1]), abs(qb[2]), qr)


@njit(cache=True, inline="always")
def query_term(qmag: float) -> float:
    """The margin's part from the query's own magnitude ``qmag``
    (:func:`query_magnitude`): 1e-12 of it."""
    return 1e-12 * (1.0 + qmag)


@njit(cache=True, inline="always")
def margin(x: float, y: float, z: float, r: float, term: float):
    """(margin, clamped) of the copy (x, y, z, r): ``clamped`` 1 when only the store may
    decide it, else 0."""
    m = max(abs(x), abs(y), abs(z)) + r
    return SIEVE_MARGIN * m + term, np.int64(not m < SIEVE_BIG)


@njit(cache=True, inline="always")
def sieve_box(x: float, y: float, z: float, r: float, term: float, ax: float, ay: float,
              az: float, bx: float, by: float, bz: float):
    """A box query [a, b]'s sieve for the copy (x, y, z, r): (miss, sure) as integers, miss
    1 where the copy rules the object out, sure 1 where it is in the answer whatever the
    exact sphere; neither within the margin of the boundary."""
    w, big = margin(x, y, z, r, term)
    miss = (np.int64(x - r - w > bx) + np.int64(x + r + w < ax) + np.int64(y - r - w > by)
            + np.int64(y + r + w < ay) + np.int64(z - r - w > bz) + np.int64(z + r + w < az))
    sure = (np.int64(x - r + w <= bx) + np.int64(x + r - w >= ax) + np.int64(y - r + w <= by)
            + np.int64(y + r - w >= ay) + np.int64(z - r + w <= bz) + np.int64(z + r - w >= az))
    return np.int64(miss > 0) * (1 - big), np.int64(sure == 6) * (1 - big)


@njit(cache=True, inline="always")
def sieve_sphere(x: float, y: float, z: float, r: float, term: float, qx: float, qy: float,
                 qz: float, qr: float):
    """A sphere query's sieve (as :func:`sieve_box`'s): the centre's offset is at most
    sqrt(3) of a coordinate's, hence three margins."""
    w, big = margin(x, y, z, r, term)
    dx = x - qx
    dy = y - qy
    dz = z - qz
    d = math.sqrt(dx * dx + dy * dy + dz * dz)
    return (np.int64(d - 3.0 * w > r + qr) * (1 - big),
            np.int64(d + 3.0 * w <= r + qr) * (1 - big))


@njit(cache=True, inline="always")
def ray_may_hit(x: float, y: float, z: float, r: float, term: float, o, idx: float,
                idy: float, idz: float, box) -> bool:
    """A ray query's sieve: False when the ray from ``o`` (inverse direction idx, idy, idz)
    misses the copy's box widened by the margin, and so the exact sphere; ``box`` is (2, 3)
    scratch."""
    w, big = margin(x, y, z, r, term)
    box[0, 0] = x - r - w
    box[0, 1] = y - r - w
    box[0, 2] = z - r - w
    box[1, 0] = x + r + w
    box[1, 1] = y + r + w
    box[1, 2] = z + r + w
    return big or ray_box_hits(o[0], o[1], o[2], idx, idy, idz, box[0], box[1])


@njit(cache=True, inline="always")
def settle_region(kind: int, k0: int, k: int, centers, radii, qa, qb, qr: float, out, ts) -> int:
    """The sieve's candidates out[k0:k] (slots; ts 1 where sure) settled: the unsure ones by
    the store's float64 sphere (``region_hit``), the answer compacted in place with ts 0;
    returns the new count."""
    j = k0
    for i in range(k0, k):
        s = out[i]
        if ts[i] == 0.0 and region_hit(kind, centers[s, 0], centers[s, 1], centers[s, 2],
                                       radii[s], qa, qb, qr) < 0.0:
            continue
        out[j] = s
        ts[j] = 0.0
        j += 1
    return j


@njit(cache=True)
def region_rows(s32, n: int, codes, centers, radii, kind: int, qa, qb, qr: float):
    """Slots (and a ray's entry distances) of a box, sphere or ray query over the first
    ``n`` rows of a float32 copy by slot (``scan.Spheres32``: a flat copy's, the view
    distance tree's unbounded list's): the copy sieves every row (dead rows fail it)
    and the store's float64 sphere decides what it leaves open (a ray: each live row's).

    The box and sphere sieves write a verdict byte a row (OUT, NEAR, IN: a loop without
    branches, which vectorises), compacted as the frustum scan's are (``scan.compact``);
    the NEAR rows, within a few roundings of the boundary, are settled in float64.
    ``codes``: n bytes of scratch."""
    x32, y32, z32, r32 = s32.x, s32.y, s32.z, s32.r
    term = query_term(query_magnitude(qa, qb, qr))
    ax, ay, az, bx, by, bz = qa[0], qa[1], qa[2], qb[0], qb[1], qb[2]
    if kind == REGION_RAY:
        # Each row's exact test, early exits and all: a sieve by the record's widened box
        # (the trees' blocks' way) took 7.5 ms at 10^6 rows against 2.1 for this.
        out = np.empty(n, dtype=np.int64)
        ts = np.empty(n, dtype=np.float64)
        k = 0
        for p in range(n):
            if r32[p] == -np.inf:  # a dead row
                continue
            t = region_hit(kind, centers[p, 0], centers[p, 1], centers[p, 2], radii[p], qa,
                           qb, qr)
            if t >= 0.0:
                out[k] = p
                ts[k] = t
                k += 1
        return out[:k], ts[:k]
    if kind == REGION_BOX:
        for p in range(n):
            miss, sure = sieve_box(np.float64(x32[p]), np.float64(y32[p]), np.float64(z32[p]),
                                   np.float64(r32[p]), term, ax, ay, az, bx, by, bz)
            codes[p] = np.uint8((1 - miss) * (1 + sure))
    else:
        for p in range(n):
            miss, sure = sieve_sphere(np.float64(x32[p]), np.float64(y32[p]),
                                      np.float64(z32[p]), np.float64(r32[p]), term, ax, ay, az,
                                      qr)
            codes[p] = np.uint8((1 - miss) * (1 + sure))
    found = np.empty(n + 8, dtype=np.int64)
    near = np.empty(n + 8, dtype=np.int64)
    ns, nn, _ = compact(codes, verdict_words(codes[:n]), 0, n, found, 0, near, 0)
    for i in range(nn):
        p = near[i]
        if region_hit(kind, centers[p, 0], centers[p, 1], centers[p, 2], radii[p], qa, qb,
                      qr) >= 0.0:
            found[ns] = p
            ns += 1
    return found[:ns], np.zeros(ns)
