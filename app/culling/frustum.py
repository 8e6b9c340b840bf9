"""A compiled filter of a list of ids by the indexes' own frustum and view-distance
predicates, and a compiled count of the objects each of those predicates keeps (the HUD's
culled-by-stage line). The camera math (view, projection, planes) is ``app.geom.camera``."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

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


_COUNT_BLOCK = 2048  # rows transposed at a time into the stage count's SoA buffers
#: Rows from which the stage count wakes the second core (below, one core is as fast:
#: 60,000 rows take ~0.3 ms either way).
COUNT_PARALLEL_MIN = 131_072


@njit(cache=True)
def _count_soa(x, y, z, radii, view_distances, planes, eye):  # pragma: no cover - compiled
    """(in the frustum, also within view distance) over SoA rows: the plane tests of
    ``sphere_in_frustum`` and the distance of ``within_view_distance`` written out without
    branches (the same arithmetic in the same order, so the same verdicts): it vectorises."""
    a0, b0, c0, d0 = planes[0, 0], planes[0, 1], planes[0, 2], planes[0, 3]
    a1, b1, c1, d1 = planes[1, 0], planes[1, 1], planes[1, 2], planes[1, 3]
    a2, b2, c2, d2 = planes[2, 0], planes[2, 1], planes[2, 2], planes[2, 3]
    a3, b3, c3, d3 = planes[3, 0], planes[3, 1], planes[3, 2], planes[3, 3]
    a4, b4, c4, d4 = planes[4, 0], planes[4, 1], planes[4, 2], planes[4, 3]
    a5, b5, c5, d5 = planes[5, 0], planes[5, 1], planes[5, 2], planes[5, 3]
    ex, ey, ez = eye[0], eye[1], eye[2]
    in_frustum = 0
    in_view = 0
    for i in range(x.shape[0]):
        px = x[i]
        py = y[i]
        pz = z[i]
        m = -radii[i]
        f = ((a0 * px + b0 * py + c0 * pz + d0 >= m) & (a1 * px + b1 * py + c1 * pz + d1 >= m)
             & (a2 * px + b2 * py + c2 * pz + d2 >= m) & (a3 * px + b3 * py + c3 * pz + d3 >= m)
             & (a4 * px + b4 * py + c4 * pz + d4 >= m) & (a5 * px + b5 * py + c5 * pz + d5 >= m))
        dx = px - ex
        dy = py - ey
        dz = pz - ez
        near = math.sqrt(dx * dx + dy * dy + dz * dz) <= view_distances[i]
        in_frustum += f
        in_view += f & near
    return in_frustum, in_view


@njit(cache=True)
def _count_rows(centers, radii, view_distances, planes, eye, start, stop):  # pragma: no cover
    """_count_soa over rows [start, stop) of the (n, 3) centres, a block at a time (the
    strided reads of an (n, 3) array keep the plane tests from vectorising: 3x slower)."""
    xs = np.empty(_COUNT_BLOCK)
    ys = np.empty(_COUNT_BLOCK)
    zs = np.empty(_COUNT_BLOCK)
    in_frustum = 0
    in_view = 0
    for s in range(start, stop, _COUNT_BLOCK):
        e = min(stop, s + _COUNT_BLOCK)
        k = e - s
        for j in range(k):
            xs[j] = centers[s + j, 0]
            ys[j] = centers[s + j, 1]
            zs[j] = centers[s + j, 2]
        f, v = _count_soa(xs[:k], ys[:k], zs[:k], radii[s:e], view_distances[s:e], planes, eye)
        in_frustum += f
        in_view += v
    return in_frustum, in_view


@njit(cache=True)
def _count_serial(centers, radii, view_distances, planes, eye):  # pragma: no cover
    return _count_rows(centers, radii, view_distances, planes, eye, 0, centers.shape[0])


@njit(cache=True, parallel=True)
def _count_parallel(centers, radii, view_distances, planes, eye):  # pragma: no cover
    n = centers.shape[0]
    parts = 16
    fr = np.zeros(parts, np.int64)
    vw = np.zeros(parts, np.int64)
    for p in prange(parts):
        f, v = _count_rows(centers, radii, view_distances, planes, eye, p * n // parts,
                           (p + 1) * n // parts)
        fr[p] = f
        vw[p] = v
    return fr.sum(), vw.sum()


def count_in_view(centers: np.ndarray, radii: np.ndarray, view_distances: np.ndarray,
                  planes: np.ndarray, eye: np.ndarray, use_vd: bool,
                  parallel: bool | None = None) -> tuple[int, int]:
    """(objects whose sphere meets the frustum, those of them also within their view distance
    when ``use_vd``): compiled passes over every row with the indexes' predicates, so the
    second count is the size of an unoccluded ``query_frustum`` answer. Both cores from
    :data:`COUNT_PARALLEL_MIN` rows on (``parallel`` forces either kernel)."""
    planes = np.ascontiguousarray(planes, np.float64)
    eye = np.ascontiguousarray(eye, np.float64)
    if parallel is None:
        parallel = centers.shape[0] >= COUNT_PARALLEL_MIN
    if parallel:
        f, v = _count_parallel(centers, radii, view_distances, planes, eye)
    else:
        f, v = _count_serial(centers, radii, view_distances, planes, eye)
    return int(f), int(v) if use_vd else int(f)
