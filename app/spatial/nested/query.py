"""The descent of a nested index: groups gated by their world spheres, then each group's
objects tested in the group's own frame, in one compiled pass over every group.

Exactness. An object is visible when its canonical world sphere (``groups.world_point``,
``ws * r``, ``ws * vd``) passes the contract's brute-force test. Testing it instead against
planes carried into the group's frame (``n_l = A^T n / ws``, ``d_l = (n.t + d) / ws``) gives
the same number in real arithmetic but not in float64, so the local test is only a filter:

1. the float32 verdict loop of ``app.spatial.scan`` runs on the local planes with its float32
   tolerance *plus* a float64 tolerance ``local.local_frame`` bounds from the magnitudes
   involved (the rounding of the local and of the world computation, ~900 roundings of the
   largest term): OUT and IN are then certain for the world test too;
2. the few NEAR objects (within that band of a plane or of their view distance) are decided
   by the world test itself (``local.world_test``), computed exactly as the oracle does.

View distance the same way: the eye is carried into the frame (``A^-1 (eye - t)``), the
distance compared with the local view distance with a relative slack for the transform's
stretch and rounding and an absolute one for the eye's own rounding.

A group whose own sphere is wholly inside every plane hands its block over without a plane
test; one whose sphere is outside a plane (or beyond its largest view distance) is skipped, and
a subtree sphere outside skips every group below it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from app.geom.predicates import (
    NODE_INSIDE,
    NODE_NOT_VISITED,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_VIEWDIST,
)
from app.spatial.nested.bounds import refresh_bounds_some
from app.spatial.nested.groups import ABS, REL, world_point
from app.spatial.nested.local import WORLD_DRAWN, WORLD_FAR, local_frame_into, world_test
from app.spatial.nested.state import STATE_TYPE
from app.spatial.nested.store import row32, sync32
from app.spatial.scan import (
    _F32_MAX,
    _ROUNDINGS,
    _U32,
    FAST,
    IN,
    NEAR,
    Spheres32,
    SphereTest,
    compact,
    verdict_words,
    verdicts,
)

_OUT = 0
_PARTIAL = 1
_INSIDE = 2

#: own-group actions of the descent
_SKIP = 0
_WHOLE = 1  # own sphere inside every plane
_SCAN = 2  # partly inside: the local verdict loop
_INNER = 3  # partly inside and large: the group's own index (in Python, after the kernel)
INNER_ACT = _INNER

#: float32 relative slack on a local view distance (the scan's own, see scan._VD_SLACK)
_VD32 = 4e-7


@njit(cache=True, inline="always")
def _sphere_class(planes, nn, n1, cx: float, cy: float, cz: float, r: float) -> int:
    """OUTSIDE / PARTIAL / INSIDE of a covering world sphere, widened for rounding.

    ``nn`` holds each plane normal's length (a sphere of radius r reaches r |n| along it),
    ``n1`` its 1-norm (the rounding of the plane value grows with it). A plane value that
    overflows (or NaN) decides nothing: PARTIAL.
    """
    inside = True
    big = max(abs(cx), abs(cy), abs(cz)) + r
    for p in range(planes.shape[0]):
        f = ((planes[p, 0] * cx + planes[p, 1] * cy) + planes[p, 2] * cz) + planes[p, 3]
        reach = r * nn[p] + ABS * (n1[p] * big + abs(planes[p, 3]) + r)
        if not abs(f) < np.inf:
            inside = False
            continue
        if f < -reach:
            return _OUT
        if not f >= reach:
            inside = False
    return _INSIDE if inside else _PARTIAL


@njit(cache=True, inline="always")
def _sphere_cut(planes, nn, n1, cx: float, cy: float, cz: float, r: float):
    """:func:`_sphere_class` and the planes the sphere is not certainly inside of (bit p of
    the mask; planes past the 64th always set): the planes left to test for what it holds."""
    cut = np.uint64(0)
    big = max(abs(cx), abs(cy), abs(cz)) + r
    for p in range(planes.shape[0]):
        f = ((planes[p, 0] * cx + planes[p, 1] * cy) + planes[p, 2] * cz) + planes[p, 3]
        reach = r * nn[p] + ABS * (n1[p] * big + abs(planes[p, 3]) + r)
        if not abs(f) < np.inf:
            cut |= np.uint64(1) << np.uint64(min(p, 63))
            continue
        if f < -reach:
            return _OUT, cut
        if not f >= reach:
            cut |= np.uint64(1) << np.uint64(min(p, 63))
    return (_INSIDE if cut == 0 else _PARTIAL), cut


@njit(cache=True)
def _out_flags(planes, nn, n1, order, sub_c, sub_r, flags) -> None:
    """``flags[i]`` 1 when the subtree sphere of group ``order[i]`` is certainly outside a
    plane, as :func:`_sphere_cut` decides OUT (a finite plane value below minus the widened
    reach), else 0: a pass without branches over every group, which vectorises, so that the
    descent runs the full test only on the few groups not outside."""
    K = planes.shape[0]
    for i in range(order.shape[0]):
        g = order[i]
        cx = sub_c[g, 0]
        cy = sub_c[g, 1]
        cz = sub_c[g, 2]
        r = sub_r[g]
        big = max(abs(cx), abs(cy), abs(cz)) + r
        out = False
        for p in range(K):
            f = ((planes[p, 0] * cx + planes[p, 1] * cy) + planes[p, 2] * cz) + planes[p, 3]
            reach = r * nn[p] + ABS * (n1[p] * big + abs(planes[p, 3]) + r)
            out = out | ((f < -reach) & (abs(f) < np.inf))
        flags[i] = np.uint64(out)


@njit(cache=True, inline="always")
def _beyond_view(eye, cx: float, cy: float, cz: float, r: float, vmax: float) -> bool:
    """Every sphere inside the covering sphere (c, r) is farther from the eye than ``vmax``
    (its largest world view distance), rounding included."""
    dx = cx - eye[0]
    dy = cy - eye[1]
    dz = cz - eye[2]
    d = math.sqrt(dx * dx + dy * dy + dz * dz)
    slack = ABS * (max(abs(eye[0]), abs(eye[1]), abs(eye[2]))
                   + max(abs(cx), abs(cy), abs(cz)) + r)
    return d < np.inf and d * (1.0 - REL) - r - slack > vmax


@njit(cache=True)
def _tol32_into(pl, eye_l, max_abs: float, max_r: float, p32):
    """``scan.tolerances`` written into a reused ``p32`` (rows past the planes: every point
    inside): (plane tolerance, distance tolerance) of the float32 verdicts."""
    term = 0.0
    for p in range(p32.shape[0]):
        if p >= pl.shape[0]:
            p32[p, 0] = p32[p, 1] = p32[p, 2] = 0.0
            p32[p, 3] = 1.0
            continue
        for a in range(4):
            p32[p, a] = pl[p, a]
        t = (abs(pl[p, 0]) + abs(pl[p, 1]) + abs(pl[p, 2])) * max_abs + abs(pl[p, 3]) + max_r
        term = max(term, t)
    e = max(abs(eye_l[0]), abs(eye_l[1]), abs(eye_l[2]))
    tol = min(_ROUNDINGS * _U32 * term + 1e-30, _F32_MAX)
    tol_d = min(_ROUNDINGS * _U32 * 4.0 * (max_abs + e) + 1e-30, _F32_MAX)
    return tol, tol_d


@njit(cache=True, fastmath=FAST)
def _distance_verdicts(x, y, z, vd, ex, ey, ez, rel, tol, lo: int, hi: int, out) -> int:
    """Lower ``out[lo:hi]`` to the view-distance verdict (OUT / NEAR / IN) in float32, with
    relative slack ``rel`` and absolute ``tol``; an infinite view distance is never OUT.
    Returns how many rows it finds certainly beyond their view distance (the stage count)."""
    a_rel = np.float32(1.0) - rel
    b_rel = np.float32(1.0) + rel
    far = 0
    for i in range(lo, hi):
        dx = x[i] - ex
        dy = y[i] - ey
        dz = z[i] - ez
        d2 = dx * dx + dy * dy + dz * dz
        a = vd[i] * a_rel - tol
        b = vd[i] * b_rel + tol
        c = np.uint8((a > 0) & (d2 < a * a)) + np.uint8(d2 <= b * b)
        o = out[i]
        out[i] = c if c < o else o
        far += c == 0
    return far


@njit(cache=True, fastmath=FAST)
def _verdicts1(x, y, z, r, p32, tol, out) -> None:
    """The scan's verdict loop (OUT / NEAR / IN) for one plane, ``p32[0]``; vectorises."""
    a = p32[0, 0]
    b = p32[0, 1]
    c = p32[0, 2]
    d = p32[0, 3]
    for i in range(x.shape[0]):
        m = a * x[i] + b * y[i] + c * z[i] + d + r[i]
        out[i] = np.uint8(m >= tol) + np.uint8(m >= -tol)


@njit(cache=True, fastmath=FAST)
def _verdicts2(x, y, z, r, p32, tol, out) -> None:
    """:func:`_verdicts1` for two planes, ``p32[0]`` and ``p32[1]``."""
    a0 = p32[0, 0]
    b0 = p32[0, 1]
    c0 = p32[0, 2]
    d0 = p32[0, 3]
    a1 = p32[1, 0]
    b1 = p32[1, 1]
    c1 = p32[1, 2]
    d1 = p32[1, 3]
    for i in range(x.shape[0]):
        xi = x[i]
        yi = y[i]
        zi = z[i]
        v0 = a0 * xi + b0 * yi + c0 * zi + d0
        v1 = a1 * xi + b1 * yi + c1 * zi + d1
        m = (v0 if v0 < v1 else v1) + r[i]
        out[i] = np.uint8(m >= tol) + np.uint8(m >= -tol)


@njit(cache=True, fastmath=FAST)
def _verdicts3(x, y, z, r, p32, tol, out) -> None:
    """:func:`_verdicts1` for three planes, ``p32[0:3]``."""
    for i in range(x.shape[0]):
        xi = x[i]
        yi = y[i]
        zi = z[i]
        m = np.float32(np.inf)
        for p in range(3):
            v = p32[p, 0] * xi + p32[p, 1] * yi + p32[p, 2] * zi + p32[p, 3]
            m = v if v < m else m
        m = m + r[i]
        out[i] = np.uint8(m >= tol) + np.uint8(m >= -tol)


@njit(cache=True, inline="always")
def _cut_verdicts(x32, y32, z32, r32, vd32, p32, q32, cut, tol, lo: int, hi: int, codes):
    """The float32 verdicts of rows ``lo .. hi-1`` by the planes of ``p32`` whose bit is set
    in ``cut`` (the others hold the group's whole sphere: every row passes them)."""
    k = 0
    for p in range(min(p32.shape[0], 64)):
        if (cut >> np.uint64(p)) & np.uint64(1):
            if k < 3:
                for a in range(4):
                    q32[k, a] = p32[p, a]
            k += 1
    if p32.shape[0] > 63:  # planes past the 63rd share bit 63: test them all
        k = 0
    t = np.float32(tol)
    if k == 1:
        _verdicts1(x32[lo:hi], y32[lo:hi], z32[lo:hi], r32[lo:hi], q32, t, codes[lo:hi])
    elif k == 2:
        _verdicts2(x32[lo:hi], y32[lo:hi], z32[lo:hi], r32[lo:hi], q32, t, codes[lo:hi])
    elif k == 3:
        _verdicts3(x32[lo:hi], y32[lo:hi], z32[lo:hi], r32[lo:hi], q32, t, codes[lo:hi])
    else:
        verdicts(Spheres32(x32, y32, z32, r32, vd32), SphereTest(p32, p32[0], False, tol, 0.0),
                 lo, hi, codes)


@njit(cache=True)
def descend(st, planes, eye, use_vd: bool, inner_min: int):
    """One query over every group: (visible ids, working set, groups visited, how many groups
    are left to their own index, objects rejected by view distance, code); code 1 (nothing
    done) when a plane is not 4 finite numbers, 2 when the eye is not 3. A group rejected by
    view distance counts its objects (its subtree's, for its subtree sphere) under it, a
    scanned object when its view-distance verdict rejects it; the frustum's are the rest.
    The groups left to their own index are those whose ``act`` is ``_INNER``. ``gcode[g]``
    gets each group's outcome (``NODE_*``). The float32 centres of the groups it scans are
    brought up to date first: the logged moved rows of a group with state 1, the whole block
    with state 2; the log is then emptied and the groups it leaves unscanned go to state 2
    (update.apply_moves).

    Scratch (the caller's, reused): ``act`` / ``cuts`` a byte / word per group position,
    ``scanned`` a byte per group slot (zero on entry and on return), ``sure`` and ``near``
    a row each per arena row plus 8. A group without subgroups has its subtree sphere equal
    to its own (refresh_bounds), so it is tested once; a partly visible group's objects are
    tested only against the planes its own sphere is cut by (:func:`_sphere_cut`).

    ``st`` is the index's record of its arrays (state.py): one argument, not fifty (a call
    between compiled functions costs ~13 ns an array argument, ~50 ns from Python)."""
    order, send, W, ws = st.order, st.send, st.W, st.ws
    own_c, own_r, world_c, world_r, world_vd = (st.own_c, st.own_r, st.world_c, st.world_r,
                                                st.world_vd)
    sub_c, sub_r, sub_vd = st.sub_c, st.sub_r, st.sub_vd
    b_start, b_count, ids, lc, rad, vdist = st.b_start, st.b_count, st.ids, st.lc, st.rad, st.vd
    x32, y32, z32, r32, vd32, codes = st.x, st.y, st.z, st.r32, st.vd32, st.codes
    gcode, dirty32, log_rows, log_grp, nlog = (st.code, st.dirty32, st.log_rows, st.log_grp,
                                               st.nlog)
    act, cuts, scanned, sure, near = st.act, st.cuts, st.scanned, st.sure, st.near
    ng = order.shape[0]
    K = planes.shape[0]
    if planes.shape[1] != 4:
        return np.empty(0, np.int64), 0, 0, 0, 0, 1
    for p in range(K):
        for a in range(4):
            if not np.isfinite(planes[p, a]):
                return np.empty(0, np.int64), 0, 0, 0, 0, 1
    if eye.shape[0] != 3 or not (np.isfinite(eye[0]) and np.isfinite(eye[1])
                                 and np.isfinite(eye[2])):
        return np.empty(0, np.int64), 0, 0, 0, 0, 2
    nn = np.empty(K)
    n1 = np.empty(K)
    for p in range(K):
        a = planes[p, 0]
        b = planes[p, 1]
        c = planes[p, 2]
        nn[p] = math.sqrt(a * a + b * b + c * c) * (1.0 + REL)
        n1[p] = abs(a) + abs(b) + abs(c)
    _out_flags(planes, nn, n1, order, sub_c, sub_r, cuts)
    # Objects of the groups before preorder position i: a subtree's count in O(1).
    below = np.empty(ng + 1, np.int64)
    below[0] = 0
    for i in range(ng):
        below[i + 1] = below[i] + b_count[order[i]]
    far = 0
    total = 0
    n_inner = 0
    visited = 0
    skip_to = 0
    inside_to = 0
    for i in range(ng):
        g = order[i]
        out_flag = cuts[i]
        act[i] = _SKIP
        gcode[g] = NODE_NOT_VISITED
        if i < skip_to:
            continue
        if sub_r[g] < 0.0:  # nothing in the subtree
            skip_to = send[i]
            continue
        visited += 1
        leaf = send[i] == i + 1
        if use_vd and _beyond_view(eye, sub_c[g, 0], sub_c[g, 1], sub_c[g, 2], sub_r[g], sub_vd[g]):
            gcode[g] = NODE_REJECT_VIEWDIST
            skip_to = send[i]
            far += below[send[i]] - below[i]
            continue
        own = _INSIDE
        cut = np.uint64(0)
        if i >= inside_to:
            cls = _OUT
            if not out_flag:
                cls, cut = _sphere_cut(planes, nn, n1, sub_c[g, 0], sub_c[g, 1], sub_c[g, 2],
                                       sub_r[g])
            if cls == _OUT:
                gcode[g] = NODE_REJECT_FRUSTUM
                skip_to = send[i]
                continue
            if cls == _INSIDE:
                inside_to = send[i]
            own = cls
        if b_count[g] == 0:
            gcode[g] = NODE_INSIDE if i < inside_to else NODE_PARTIAL
            continue
        if not leaf:  # its own sphere differs from its subtree's
            if use_vd and _beyond_view(eye, world_c[g, 0], world_c[g, 1], world_c[g, 2],
                                       world_r[g], world_vd[g]):
                gcode[g] = NODE_REJECT_VIEWDIST
                far += b_count[g]
                continue
            own = _INSIDE
            cut = np.uint64(0)
            if i >= inside_to:
                own, cut = _sphere_cut(planes, nn, n1, world_c[g, 0], world_c[g, 1],
                                       world_c[g, 2], world_r[g])
            if own == _OUT:
                gcode[g] = NODE_REJECT_FRUSTUM
                continue
        if own == _INSIDE:
            gcode[g] = NODE_INSIDE
            act[i] = _WHOLE
        else:
            gcode[g] = NODE_PARTIAL
            act[i] = _INNER if b_count[g] >= inner_min else _SCAN
            cuts[i] = cut
        if act[i] == _INNER:
            n_inner += 1
        else:
            total += b_count[g]
    for i in range(ng):
        if act[i] == _SCAN or (act[i] == _WHOLE and use_vd):
            scanned[order[i]] = 1
    for q in range(nlog[0]):
        g = log_grp[q]
        if scanned[g] and dirty32[g] == 1:
            row32(lc, x32, y32, z32, log_rows[q])
    for i in range(ng):
        g = order[i]
        if dirty32[g] == 1:
            dirty32[g] = 0 if scanned[g] else 2
        scanned[g] = 0
    nlog[0] = 0
    pl = np.empty((K, 4))
    eye_l = np.zeros(3)
    p32 = np.zeros((max(K, 6), 4), np.float32)
    q32 = np.zeros((3, 4), np.float32)
    words = verdict_words(codes)
    ns = 0
    for i in range(ng):
        k = act[i]
        if k in (_SKIP, _INNER):
            continue
        g = order[i]
        lo = b_start[g]
        hi = lo + b_count[g]
        if k == _WHOLE and not use_vd:
            for s in range(lo, hi):
                sure[ns] = s
                ns += 1
            continue
        tol, rel, dabs, ok = local_frame_into(st, planes, eye, use_vd, g, pl, eye_l)
        if ok:
            if dirty32[g] == 2:
                sync32(lc, x32, y32, z32, lo, hi)
                dirty32[g] = 0
            cmax = max(abs(own_c[g, 0]), abs(own_c[g, 1]), abs(own_c[g, 2])) + own_r[g]
            tol32, tol_d32 = _tol32_into(pl, eye_l, cmax, own_r[g], p32)
            if k == _WHOLE:
                codes[lo:hi] = IN
            else:
                _cut_verdicts(x32, y32, z32, r32, vd32, p32, q32, cuts[i], tol32 + tol, lo, hi,
                              codes)
            if use_vd:
                far += _distance_verdicts(x32, y32, z32, vd32, np.float32(eye_l[0]),
                                   np.float32(eye_l[1]), np.float32(eye_l[2]),
                                   np.float32(_VD32 + rel), np.float32(tol_d32 + dabs), lo, hi,
                                   codes)
        else:
            codes[lo:hi] = NEAR
        ns, nn_g, _ = compact(codes, words, lo, hi, sure, ns, near, 0)
        for q in range(nn_g):
            s = near[q]
            verdict = world_test(planes, eye, use_vd, W, ws, g, lc[s, 0], lc[s, 1], lc[s, 2],
                                 rad[s], vdist[s])
            if verdict == WORLD_DRAWN:
                sure[ns] = s
                ns += 1
            far += verdict == WORLD_FAR
    # Rows to ids once at the end, not group by group: reading back the rows the compaction
    # has just written with overlapping 8-wide stores stalls on store forwarding (measured:
    # 0.6-1.1 us a 100 x 1,000 frame).
    out = np.empty(ns, np.int64)
    for q in range(ns):
        out[q] = ids[sure[q]]
    return out, total, visited, n_inner, far, 0


@njit(cache=True)
def refresh_descend(st, planes, eye, use_vd: bool, inner_min: int):
    """The per-frame query in one call, on the index's record ``st`` (state.py): the bounds
    of the groups listed bounds-dirty (bounds.refresh_bounds_some), then :func:`descend`."""
    if st.nbl[0]:
        refresh_bounds_some(st)
    return descend(st, planes, eye, use_vd, inner_min)


# Typed entry point (state.py): other argument types raise TypeError instead of compiling.
@njit((STATE_TYPE, types.float64[:, ::1], types.float64[::1], types.boolean, types.int64),
      cache=True)
def query_hot(st, planes, eye, use_vd: bool, inner_min: int):
    """:func:`refresh_descend` for ``NestedIndex.query_frustum``'s per-frame path."""
    return refresh_descend(st, planes, eye, use_vd, inner_min)


@njit(cache=True)
def world_spheres_of(rows, lc, rad, vdist, grp, W, ws):
    """Canonical world (centres, radii, view distances) of ``rows``."""
    n = rows.shape[0]
    c = np.empty((n, 3))
    r = np.empty(n)
    v = np.empty(n)
    for i in range(n):
        s = rows[i]
        g = grp[s]
        wx, wy, wz = world_point(W, g, lc[s, 0], lc[s, 1], lc[s, 2])
        c[i, 0] = wx
        c[i, 1] = wy
        c[i, 2] = wz
        r[i] = ws[g] * rad[s]
        v[i] = ws[g] * vdist[s]
    return c, r, v


@njit(cache=True)
def world_corners(lo, hi, grp_of_box, W):
    """The 8 world corners (K, 8, 3) of local boxes ``[lo, hi]`` of groups ``grp_of_box``;
    corner k takes hi on axis a when bit a of k is set."""
    n = lo.shape[0]
    out = np.empty((n, 8, 3))
    for i in range(n):
        g = grp_of_box[i]
        for k in range(8):
            x = hi[i, 0] if k & 1 else lo[i, 0]
            y = hi[i, 1] if k & 2 else lo[i, 1]
            z = hi[i, 2] if k & 4 else lo[i, 2]
            wx, wy, wz = world_point(W, g, x, y, z)
            out[i, k, 0] = wx
            out[i, k, 1] = wy
            out[i, k, 2] = wz
    return out
