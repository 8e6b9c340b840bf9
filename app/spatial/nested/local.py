"""A query seen from one group's frame: the planes and the eye carried into the group's local
coordinates with the tolerances that keep the local test a safe filter (:func:`local_frame`),
the contract's test on an object's canonical world sphere (:func:`world_test`), and the
settling of what a group's own index returns for the widened local planes
(:func:`settle_candidates`). ``query.py``'s docstring gives the exactness argument.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from app.geom.predicates import sphere_in_frustum, within_view_distance
from app.spatial.idmap import hash_lookup
from app.spatial.nested.groups import ABS, world_point

#: The float32 filter is trusted with local coordinates and eye positions up to this size (a
#: squared distance stays finite in float32) and plane values up to :data:`F32_VALUES`;
#: beyond, every object of the group goes to the world test.
F32_SAFE = 1e18
F32_VALUES = 1e30


class LocalView(NamedTuple):
    """A query seen from one group's frame (:func:`local_frame`)."""

    planes: np.ndarray  # (K, 4) the planes in the group's local coordinates
    tol: float  # a local plane value plus radius is within tol of the world one (over ws)
    eye: np.ndarray  # (3,) the eye in local coordinates
    rel: float  # a local distance is within rel * vd + dabs of the world one (over ws)
    dabs: float
    ok: bool  # False: some number is too large for the float32 filter


@njit(cache=True)
def local_frame_into(st, planes, eye, use_vd: bool, g: int, pl, eye_l):
    """Group ``g``'s view of the query into ``pl`` (K, 4) (local planes) and ``eye_l`` (the
    local eye); returns (plane tolerance, relative and absolute distance slack, ok).

    A local plane value plus radius differs from the world one (over ``ws``) by less than the
    tolerance for every object inside the group's own sphere; a local distance from the world
    one (over ``ws``) by less than ``rel * vd + abs``. ``ok`` is False when some number is too
    large for the float32 filter (then every object goes to the world test). ``st``: the
    index's record (state.py).
    """
    W, ws, stretch_hi, stretch_lo = st.W, st.ws, st.stretch_hi, st.stretch_lo
    world_mag, own_c, own_r = st.world_mag, st.own_c, st.own_r
    K = planes.shape[0]
    s = ws[g]
    nmax = 0.0
    dmax = 0.0
    for p in range(K):
        a = planes[p, 0]
        b = planes[p, 1]
        c = planes[p, 2]
        for j in range(3):
            pl[p, j] = ((W[g, 0, j] * a + W[g, 1, j] * b) + W[g, 2, j] * c) / s
        pl[p, 3] = (((a * W[g, 0, 3] + b * W[g, 1, 3]) + c * W[g, 2, 3]) + planes[p, 3]) / s
        nmax = max(nmax, abs(a) + abs(b) + abs(c))
        dmax = max(dmax, abs(planes[p, 3]))
    cmax = max(abs(own_c[g, 0]), abs(own_c[g, 1]), abs(own_c[g, 2])) + own_r[g]
    mag = world_mag[g]
    lmax = 0.0
    lmaxd = 0.0
    for p in range(K):
        lmax = max(lmax, abs(pl[p, 0]) + abs(pl[p, 1]) + abs(pl[p, 2]))
        lmaxd = max(lmaxd, abs(pl[p, 3]))
    tol = ABS * ((nmax * (2.0 * mag) + dmax) / s + lmax * cmax + lmaxd + own_r[g])
    rel = 0.0
    dabs = 0.0
    ok = np.isfinite(tol) and cmax < F32_SAFE and lmax * cmax + lmaxd + own_r[g] < F32_VALUES
    eye_l[0] = eye_l[1] = eye_l[2] = 0.0
    if use_vd:
        ex = eye[0] - W[g, 0, 3]
        ey = eye[1] - W[g, 1, 3]
        ez = eye[2] - W[g, 2, 3]
        s2 = s * s
        for j in range(3):
            eye_l[j] = ((W[g, 0, j] * ex + W[g, 1, j] * ey) + W[g, 2, j] * ez) / s2
        stretch = stretch_hi[g] + stretch_lo[g]
        rel = 4.0 * stretch + ABS
        emax = max(abs(eye[0]), abs(eye[1]), abs(eye[2]))
        dabs = (4.0 * stretch * math.sqrt(ex * ex + ey * ey + ez * ez)
                + ABS * (mag + 3.0 * emax)) / s
        ok = ok and np.isfinite(dabs) and abs(eye_l[0]) < F32_SAFE and (
            abs(eye_l[1]) < F32_SAFE) and abs(eye_l[2]) < F32_SAFE
    return tol, rel, dabs, ok


@njit(cache=True)
def local_frame(st, planes, eye, use_vd: bool, g: int) -> LocalView:
    """:func:`local_frame_into` with fresh arrays, as a :class:`LocalView`."""
    pl = np.empty((planes.shape[0], 4))
    eye_l = np.zeros(3)
    tol, rel, dabs, ok = local_frame_into(st, planes, eye, use_vd, g, pl, eye_l)
    return LocalView(pl, tol, eye_l, rel, dabs, ok)


#: :func:`world_test`'s answers: drawn, beyond its view distance, outside the frustum.
WORLD_DRAWN = 0
WORLD_FAR = 1
WORLD_OUTSIDE = 2


@njit(cache=True, inline="always")
def world_test(planes, eye, use_vd: bool, W, ws, g: int, lx: float, ly: float, lz: float,
               r: float, vd: float) -> int:
    """The contract's test on the canonical world sphere of a local sphere of group ``g``:
    WORLD_DRAWN, or the first test it fails (WORLD_FAR, WORLD_OUTSIDE), for the stage counts."""
    wx, wy, wz = world_point(W, g, lx, ly, lz)
    s = ws[g]
    if use_vd and not within_view_distance(eye[0], eye[1], eye[2], wx, wy, wz, s * vd):
        return WORLD_FAR
    return WORLD_DRAWN if sphere_in_frustum(planes, wx, wy, wz, s * r) else WORLD_OUTSIDE


@njit(cache=True)
def settle_candidates(cand, id_table, st, planes, eye, use_vd: bool, g: int,
                      view: LocalView):
    """(the ids among ``cand`` that pass the world test, how many of the others view distance
    rejected): ``cand`` is what group ``g``'s own index returned for the widened local planes
    ``view.planes``, without view distance; the local float64 values decide the clear cases,
    :func:`world_test` the ones within the tolerances. ``id_table``: the id map's (keys, vals,
    dense); ``st``: the index's record."""
    keys, vals, dense = id_table
    lc, rad, vdist, W, ws = st.lc, st.rad, st.vd, st.W, st.ws
    pl, tol, eye_l, rel, dabs = view.planes, view.tol, view.eye, view.rel, view.dabs
    out = np.empty(cand.shape[0], np.int64)
    nd = dense.shape[0]
    k = 0
    far = 0
    K = pl.shape[0]
    for i in range(cand.shape[0]):
        key = cand[i]
        s = dense[key] if key >= 0 and key < nd else hash_lookup(keys, vals, key)
        x = lc[s, 0]
        y = lc[s, 1]
        z = lc[s, 2]
        r = rad[s]
        m = np.inf
        for p in range(K):
            v = ((pl[p, 0] * x + pl[p, 1] * y) + pl[p, 2] * z) + pl[p, 3]
            if not v >= m:  # NaN sticks: then only the world test decides
                m = v
        m += r
        if m < -tol:
            continue
        sure = m >= tol
        if use_vd and sure:
            dx = x - eye_l[0]
            dy = y - eye_l[1]
            dz = z - eye_l[2]
            d = math.sqrt(dx * dx + dy * dy + dz * dz)
            v = vdist[s]
            if d > v * (1.0 + rel) + dabs:
                far += 1
                continue
            sure = d <= v * (1.0 - rel) - dabs
        verdict = WORLD_DRAWN if sure else world_test(planes, eye, use_vd, W, ws, g, x, y, z,
                                                      r, vdist[s])
        if verdict == WORLD_DRAWN:
            out[k] = key
            k += 1
        far += verdict == WORLD_FAR
    return out[:k], far
