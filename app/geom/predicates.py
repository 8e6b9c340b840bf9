"""Compiled geometric predicates shared by every index.

Every index uses these same functions for its final per-object decision, so that all of
them agree bit for bit with each other and with the brute-force definition in design.md.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

OUTSIDE = 0
PARTIAL = 1
INSIDE = 2

# Outcome codes of a node in the last frustum query (for the overlay).
NODE_NOT_VISITED = 0
NODE_INSIDE = 1
NODE_PARTIAL = 2
NODE_REJECT_FRUSTUM = 3
NODE_REJECT_VIEWDIST = 4
NODE_REJECT_OCCLUSION = 5


@njit(cache=True, inline="always")
def sphere_in_frustum(planes: np.ndarray, cx: float, cy: float, cz: float, r: float) -> bool:
    """True unless the sphere lies entirely outside one of the six planes."""
    for p in range(planes.shape[0]):
        if planes[p, 0] * cx + planes[p, 1] * cy + planes[p, 2] * cz + planes[p, 3] < -r:
            return False
    return True


@njit(cache=True, inline="always")
def within_view_distance(
    ex: float, ey: float, ez: float, cx: float, cy: float, cz: float, vd: float
) -> bool:
    """``|center - eye| <= view_distance`` (the contract's definition)."""
    dx = cx - ex
    dy = cy - ey
    dz = cz - ez
    return math.sqrt(dx * dx + dy * dy + dz * dz) <= vd


@njit(cache=True, inline="always")
def box_vs_frustum(planes: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> int:
    """Classify an AABB against the planes: OUTSIDE, PARTIAL or INSIDE (see box_vs_frustum6)."""
    return box_vs_frustum6(planes, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2])


@njit(cache=True, inline="always")
def box_vs_frustum6(planes: np.ndarray, lx: float, ly: float, lz: float, hx: float, hy: float,
                    hz: float) -> int:
    """Classify the AABB [l, h] against the planes: OUTSIDE, PARTIAL or INSIDE.

    Uses the positive/negative vertex of the box per plane (the box is outside when its most
    inward corner is outside, inside when its most outward corner is inside). Scalars, so a
    traversal reading boxes from a table makes no array views (each costs reference counts).
    """
    result = INSIDE
    for p in range(planes.shape[0]):
        a = planes[p, 0]
        b = planes[p, 1]
        c = planes[p, 2]
        d = planes[p, 3]
        px = hx if a >= 0.0 else lx
        py = hy if b >= 0.0 else ly
        pz = hz if c >= 0.0 else lz
        if a * px + b * py + c * pz + d < 0.0:
            return OUTSIDE
        nx = lx if a >= 0.0 else hx
        ny = ly if b >= 0.0 else hy
        nz = lz if c >= 0.0 else hz
        if a * nx + b * ny + c * nz + d < 0.0:
            result = PARTIAL
    return result


@njit(cache=True, inline="always")
def box_point_dist(lo: np.ndarray, hi: np.ndarray, x: float, y: float, z: float) -> float:
    """Distance from a point to an AABB (0 inside)."""
    return box_point_dist6(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], x, y, z)


@njit(cache=True, inline="always")
def box_with_sphere(box: tuple, x: float, y: float, z: float, r: float) -> tuple:
    """The box (lx, ly, lz, hx, hy, hz) grown to hold the bounds of sphere (x, y, z, r).
    Scalars in and out: a loop keeps its box in registers (accumulated in an array, every
    step loads and stores it, the compiler being unable to tell that array from the ones it
    reads)."""
    lx, ly, lz, hx, hy, hz = box
    return (min(lx, x - r), min(ly, y - r), min(lz, z - r), max(hx, x + r), max(hy, y + r),
            max(hz, z + r))


@njit(cache=True, inline="always")
def box_point_dist6(lx: float, ly: float, lz: float, hx: float, hy: float, hz: float,
                    x: float, y: float, z: float) -> float:
    """Distance from a point to the AABB [l, h] (0 inside)."""
    dx = max(lx - x, 0.0, x - hx)
    dy = max(ly - y, 0.0, y - hy)
    dz = max(lz - z, 0.0, z - hz)
    return math.sqrt(dx * dx + dy * dy + dz * dz)


@njit(cache=True, inline="always")
def sphere_overlaps_box(
    cx: float, cy: float, cz: float, r: float, lo: np.ndarray, hi: np.ndarray
) -> bool:
    """The sphere's bounding box overlaps the closed box [lo, hi] (contract of query_box)."""
    # '&' of the six comparisons, not an 'and' chain: returning a short-circuit chain compiled
    # to ~60 ns a call in numba against ~2 ns for this.
    return (
        (cx - r <= hi[0])
        & (cx + r >= lo[0])
        & (cy - r <= hi[1])
        & (cy + r >= lo[1])
        & (cz - r <= hi[2])
        & (cz + r >= lo[2])
    )


@njit(cache=True, inline="always")
def spheres_touch(
    cx: float, cy: float, cz: float, r: float, qx: float, qy: float, qz: float, qr: float
) -> bool:
    """``|c - q| <= r + qr`` (contract of query_sphere)."""
    dx = cx - qx
    dy = cy - qy
    dz = cz - qz
    return math.sqrt(dx * dx + dy * dy + dz * dz) <= r + qr


@njit(cache=True, inline="always")
def ray_sphere_entry(
    ox: float, oy: float, oz: float, dx: float, dy: float, dz: float,
    cx: float, cy: float, cz: float, r: float,
) -> float:
    """Entry distance of a ray (unit direction) into a sphere; 0 inside; -1 on a miss."""
    mx = cx - ox
    my = cy - oy
    mz = cz - oz
    m2 = mx * mx + my * my + mz * mz
    if m2 <= r * r:
        return 0.0
    tca = mx * dx + my * dy + mz * dz
    if tca < 0.0:
        return -1.0
    d2 = m2 - tca * tca
    if d2 > r * r:
        return -1.0
    return max(tca - math.sqrt(max(r * r - d2, 0.0)), 0.0)


@njit(cache=True, inline="always")
def ray_box_hits(
    ox: float, oy: float, oz: float, idx: float, idy: float, idz: float,
    lo: np.ndarray, hi: np.ndarray,
) -> bool:
    """Slab test of a ray (given inverse direction) against a box, conservative at the edges."""
    tmin = 0.0
    tmax = np.inf
    for a in range(3):
        o = ox if a == 0 else (oy if a == 1 else oz)
        inv = idx if a == 0 else (idy if a == 1 else idz)
        if math.isinf(inv):
            if o < lo[a] or o > hi[a]:
                return False
            continue
        t1 = (lo[a] - o) * inv
        t2 = (hi[a] - o) * inv
        if t1 > t2:
            t1, t2 = t2, t1
        tmin = max(tmin, t1)
        tmax = min(tmax, t2)
    # A small relative slack keeps spheres tangent to the box edge from being missed.
    return tmin <= tmax * (1.0 + 1e-9) + 1e-9


@njit(cache=True, inline="always")
def box_point_far6(lx: float, ly: float, lz: float, hx: float, hy: float, hz: float,
                   x: float, y: float, z: float) -> float:
    """Distance from a point to the farthest point of the AABB [l, h] (all of it is nearer)."""
    dx = max(abs(lx - x), abs(hx - x))
    dy = max(abs(ly - y), abs(hy - y))
    dz = max(abs(lz - z), abs(hz - z))
    return math.sqrt(dx * dx + dy * dy + dz * dz)
