"""``brute``: no structure at all, every query tests every live object (compiled).

The baseline every index is measured against, and the reference the property tests trust
alongside the numpy oracle.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.geom.decide import ACCEPTED, accept_sphere
from app.geom.predicates import (
    NODE_REJECT_OCCLUSION,
    ray_sphere_entry,
    sphere_overlaps_box,
    spheres_touch,
)
from app.geom.zpyramid import occluder
from app.spatial.base import QueryResult, SpatialIndex


@njit(cache=True)
def _frustum(alive, centers, radii, vdist, planes, eye, use_vd, occ):
    n = alive.shape[0]
    out = np.empty(n, dtype=np.int64)
    k = 0
    considered = 0
    occluded = 0
    for s in range(n):
        if not alive[s]:
            continue
        considered += 1
        verdict = accept_sphere(planes, eye, use_vd, occ, centers[s, 0], centers[s, 1],
                                centers[s, 2], radii[s], vdist[s])
        if verdict == ACCEPTED:
            out[k] = s
            k += 1
        elif verdict == NODE_REJECT_OCCLUSION:
            occluded += 1
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
        slots, considered, occluded = _frustum(self._alive, self._centers, self._radii,
                                               self._vdist, planes, eye, use_vd,
                                               occluder(occlusion))
        return QueryResult(visible=slots, working_set=int(considered), nodes_visited=0,
                           occluded_objects=int(occluded))

    def _query_box(self, lo, hi):
        return _box(self._alive, self._centers, self._radii, lo, hi)

    def _query_sphere(self, center, radius):
        return _sphere(self._alive, self._centers, self._radii, center, radius)

    def _query_ray(self, origin, direction):
        return _ray(self._alive, self._centers, self._radii, origin, direction)
