"""``brute``: no structure at all, every query tests every live object (compiled).

The baseline every index is measured against, and the reference the property tests trust
alongside the numpy oracle.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.culling.occlusion import occlusion_arrays, sphere_occluded
from app.spatial.base import QueryResult, SpatialIndex
from app.spatial.geometry import (
    ray_sphere_entry,
    sphere_in_frustum,
    sphere_overlaps_box,
    spheres_touch,
    within_view_distance,
)


@njit(cache=True)
def _frustum(alive, centers, radii, vdist, planes, eye, use_vd,
             vp, zdata, zoff, zw, zh):
    n = alive.shape[0]
    out = np.empty(n, dtype=np.int64)
    k = 0
    considered = 0
    occluded = 0
    for s in range(n):
        if not alive[s]:
            continue
        considered += 1
        cx = centers[s, 0]
        cy = centers[s, 1]
        cz = centers[s, 2]
        if use_vd and not within_view_distance(eye[0], eye[1], eye[2], cx, cy, cz, vdist[s]):
            continue
        if not sphere_in_frustum(planes, cx, cy, cz, radii[s]):
            continue
        if sphere_occluded(cx, cy, cz, radii[s], vp, zdata, zoff, zw, zh):
            occluded += 1
            continue
        out[k] = s
        k += 1
    return out[:k], considered, occluded


@njit(cache=True)
def _box(alive, centers, radii, lo, hi):
    n = alive.shape[0]
    out = np.empty(n, dtype=np.int64)
    k = 0
    for s in range(n):
        if alive[s] and sphere_overlaps_box(centers[s, 0], centers[s, 1], centers[s, 2],
                                            radii[s], lo, hi):
            out[k] = s
            k += 1
    return out[:k]


@njit(cache=True)
def _sphere(alive, centers, radii, q, qr):
    n = alive.shape[0]
    out = np.empty(n, dtype=np.int64)
    k = 0
    for s in range(n):
        if alive[s] and spheres_touch(centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                                      q[0], q[1], q[2], qr):
            out[k] = s
            k += 1
    return out[:k]


@njit(cache=True)
def _ray(alive, centers, radii, o, d):
    n = alive.shape[0]
    out = np.empty(n, dtype=np.int64)
    ts = np.empty(n, dtype=np.float64)
    k = 0
    for s in range(n):
        if not alive[s]:
            continue
        t = ray_sphere_entry(o[0], o[1], o[2], d[0], d[1], d[2],
                             centers[s, 0], centers[s, 1], centers[s, 2], radii[s])
        if t >= 0.0:
            out[k] = s
            ts[k] = t
            k += 1
    return out[:k], ts[:k]


class BruteIndex(SpatialIndex):
    """Every query is a compiled linear scan over the object store."""

    name = "brute"

    def __init__(self, **kwargs) -> None:
        if kwargs.get("leafy") not in (None, False) or kwargs.get("split_threshold") is not None:
            raise ValueError("brute has no heuristic: leafy and split_threshold do not apply")
        super().__init__()

    def _query_frustum(self, planes, eye, use_vd, occlusion):
        vp, zd, zo, zw, zh = occlusion_arrays(occlusion)
        slots, considered, occluded = _frustum(self._alive, self._centers, self._radii,
                                               self._vdist, planes, eye, use_vd,
                                               vp, zd, zo, zw, zh)
        return QueryResult(visible=slots, working_set=int(considered), nodes_visited=0,
                           occluded_objects=int(occluded))

    def _query_box(self, lo, hi):
        return _box(self._alive, self._centers, self._radii, lo, hi)

    def _query_sphere(self, center, radius):
        return _sphere(self._alive, self._centers, self._radii, center, radius)

    def _query_ray(self, origin, direction):
        return _ray(self._alive, self._centers, self._radii, origin, direction)
