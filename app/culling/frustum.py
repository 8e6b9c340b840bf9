"""A compiled filter of a list of ids by the indexes' own frustum and view-distance
predicates (two-pass occlusion's early cull). The camera math (view, projection, planes) is
``app.geom.camera``."""

from __future__ import annotations

import numpy as np
from numba import njit

# The viewer, the pipeline and the benchmarks take the camera math from here with the filter.
from app.geom.camera import camera_planes, look_at, perspective, planes_from_matrix  # noqa: F401
from app.geom.predicates import sphere_in_frustum, within_view_distance


@njit(cache=True)
def filter_in_view(ids: np.ndarray, centers: np.ndarray, radii: np.ndarray,
                   view_distances: np.ndarray, planes: np.ndarray, eye: np.ndarray,
                   use_vd: bool) -> np.ndarray:  # pragma: no cover - compiled
    """The ids (rows of ``centers``) whose sphere meets the frustum and, with ``use_vd``, whose
    centre is within its view distance: the same predicates every index applies, so the result
    is a subset of what ``query_frustum`` without occlusion returns."""
    out = np.empty(ids.shape[0], dtype=np.int64)
    k = 0
    for j in range(ids.shape[0]):
        i = ids[j]
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        if use_vd and not within_view_distance(eye[0], eye[1], eye[2], cx, cy, cz,
                                                view_distances[i]):
            continue
        if sphere_in_frustum(planes, cx, cy, cz, radii[i]):
            out[k] = i
            k += 1
    return out[:k]
