"""The bounds of a nested index's groups (Shagam's R(N)): each group's own sphere around its
objects, in local coordinates, and its world and subtree spheres.

A group keeps a *local* sphere around its own objects, grown at once when an object moves
out of it (``update.apply_moves``) and tightened lazily (:func:`tighten`, once it has grown
past ``update.LOOSE`` times its tight radius, or after removals); :func:`refresh_bounds`
turns them into world spheres and merges every subtree bottom-up at query time (O(groups),
compiled), :func:`refresh_bounds_some` does it for the groups listed as changed only. Each
sphere is widened by a relative ``groups.REL`` and an absolute ``groups.ABS`` times the
magnitudes involved, so that it covers the *computed* world spheres (``groups.world_point``)
of everything below it, rounding included.
"""

from __future__ import annotations

import math

from numba import njit

from app.spatial.nested.groups import ABS, REL, world_point


@njit(cache=True, inline="always")
def magnitude(W, g: int, cmax: float) -> float:
    """Bound on every term of ``W[g] c`` for ``|c|_inf <= cmax``: 3 max|A| cmax + max|t|."""
    amax = 0.0
    tmax = 0.0
    for i in range(3):
        tmax = max(tmax, abs(W[g, i, 3]))
        for j in range(3):
            amax = max(amax, abs(W[g, i, j]))
    return 3.0 * amax * cmax + tmax


@njit(cache=True, inline="always")
def own_worlds(st, groups, n: int) -> None:
    """The own world sphere of each of groups ``groups[:n]`` (``world_c``, ``world_r``,
    ``world_vd``, ``world_mag``), and its subtree sphere reset to it (see
    :func:`refresh_bounds`); ``st``: the index's record (state.py), its arrays taken into
    locals once, before the loop."""
    W, ws, stretch_hi, count = st.W, st.ws, st.stretch_hi, st.b_count
    own_c, own_r, own_vd = st.own_c, st.own_r, st.own_vd
    world_c, world_r, world_vd, world_mag = st.world_c, st.world_r, st.world_vd, st.world_mag
    sub_c, sub_r, sub_vd = st.sub_c, st.sub_r, st.sub_vd
    for q in range(n):
        g = groups[q]
        if count[g] > 0:
            cx, cy, cz = world_point(W, g, own_c[g, 0], own_c[g, 1], own_c[g, 2])
            cmax = max(abs(own_c[g, 0]), abs(own_c[g, 1]), abs(own_c[g, 2])) + own_r[g]
            mag = magnitude(W, g, cmax)
            world_mag[g] = mag
            world_c[g, 0] = cx
            world_c[g, 1] = cy
            world_c[g, 2] = cz
            world_r[g] = ws[g] * (1.0 + stretch_hi[g]) * own_r[g] * (1.0 + REL) + ABS * mag
            world_vd[g] = ws[g] * own_vd[g] * (1.0 + REL)
            for a in range(3):
                sub_c[g, a] = world_c[g, a]
            sub_r[g] = world_r[g]
            sub_vd[g] = world_vd[g]
        else:
            world_mag[g] = 0.0
            world_r[g] = -1.0
            world_vd[g] = -1.0
            for a in range(3):
                world_c[g, a] = W[g, a, 3]
                sub_c[g, a] = W[g, a, 3]
            sub_r[g] = -1.0
            sub_vd[g] = -1.0


@njit(cache=True, inline="always")
def merge_up(parent, sub_c, sub_r, sub_vd, g: int) -> None:
    """Grow the subtree sphere of ``g``'s parent to hold ``g``'s (Shagam's R(N))."""
    p = parent[g]
    if p < 0 or sub_r[g] < 0.0:
        return
    dx = sub_c[g, 0] - sub_c[p, 0]
    dy = sub_c[g, 1] - sub_c[p, 1]
    dz = sub_c[g, 2] - sub_c[p, 2]
    reach = (math.sqrt(dx * dx + dy * dy + dz * dz) + sub_r[g]) * (1.0 + REL)
    if reach > sub_r[p]:
        sub_r[p] = reach
    if sub_vd[g] > sub_vd[p]:
        sub_vd[p] = sub_vd[g]


@njit(cache=True)
def refresh_bounds(st) -> None:
    """World spheres of each group's own objects (``world_c``, ``world_r``, largest world view
    distance ``world_vd``) and of each subtree (``sub_c``, ``sub_r``, ``sub_vd``), merged bottom-up.

    A group without objects has radius -1 (nothing); a subtree sphere is centred on the
    group's own sphere, or on its origin when it has no objects of its own (Shagam's R(N)).
    ``world_mag`` gets the magnitude bound of the group's world transform over its own sphere.
    ``st``: the index's record (state.py); its groups in preorder (``order``).
    """
    order, parent, sub_c, sub_r, sub_vd = st.order, st.parent, st.sub_c, st.sub_r, st.sub_vd
    n = order.shape[0]
    own_worlds(st, order, n)
    for i in range(n - 1, -1, -1):
        merge_up(parent, sub_c, sub_r, sub_vd, order[i])


@njit(cache=True)
def own_sphere(lc, rad, vd, lo: int, hi: int):
    """(centre x, y, z, radius, largest view distance, largest radius) of rows ``lo .. hi-1``:
    the centre of their centres' box, the radius reaching every sphere (widened by REL)."""
    if hi <= lo:
        return 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    lx = hx = lc[lo, 0]
    ly = hy = lc[lo, 1]
    lz = hz = lc[lo, 2]
    for s in range(lo + 1, hi):
        lx = min(lx, lc[s, 0])
        hx = max(hx, lc[s, 0])
        ly = min(ly, lc[s, 1])
        hy = max(hy, lc[s, 1])
        lz = min(lz, lc[s, 2])
        hz = max(hz, lc[s, 2])
    cx = 0.5 * lx + 0.5 * hx  # halves first: no overflow
    cy = 0.5 * ly + 0.5 * hy
    cz = 0.5 * lz + 0.5 * hz
    r = 0.0
    v = 0.0
    rmax = 0.0
    for s in range(lo, hi):
        dx = lc[s, 0] - cx
        dy = lc[s, 1] - cy
        dz = lc[s, 2] - cz
        r = max(r, math.sqrt(dx * dx + dy * dy + dz * dz) + rad[s])
        v = max(v, vd[s])
        rmax = max(rmax, rad[s])
    return cx, cy, cz, r * (1.0 + REL), v, rmax


@njit(cache=True, inline="always")
def tighten_group(g: int, lc, rad, vd, b_start, b_count, own_c, own_r, own_tight, own_vd, own_rmax,
                  loose) -> None:
    """Group ``g``'s own sphere recomputed from its block (the lazy half of R(N))."""
    lo = b_start[g]
    cx, cy, cz, r, v, rmax = own_sphere(lc, rad, vd, lo, lo + b_count[g])
    own_rmax[g] = rmax
    own_c[g, 0] = cx
    own_c[g, 1] = cy
    own_c[g, 2] = cz
    own_r[g] = r
    own_tight[g] = r
    own_vd[g] = v
    loose[g] = False


@njit(cache=True)
def refresh_bounds_some(st) -> None:
    """:func:`refresh_bounds` for the listed groups only (``blist[:nbl[0]]``, those whose own
    sphere or world matrix changed; ``bmark`` cleared, the list emptied), on the index's
    record ``st`` (state.py): loose own spheres tightened first, their own world spheres
    recomputed, the subtree spheres of their ancestors rebuilt from their own and their
    children's. Every other group's spheres are what the full pass computes from the same
    inputs (max-merges do not depend on the order), so the result is the full pass's, bit for
    bit."""
    order, send, pos, parent = st.order, st.send, st.pos, st.parent
    world_c, world_r, world_vd = st.world_c, st.world_r, st.world_vd
    sub_c, sub_r, sub_vd = st.sub_c, st.sub_r, st.sub_vd
    bmark, blist, nbl = st.bmark, st.blist, st.nbl
    count, own_c, own_r, own_vd = st.b_count, st.own_c, st.own_r, st.own_vd
    own_tight, own_rmax, loose = st.own_tight, st.own_rmax, st.loose
    b_start, lc, rad, vd = st.b_start, st.lc, st.rad, st.vd
    n = nbl[0]
    nested = False
    for q in range(n):
        g = blist[q]
        if loose[g]:
            tighten_group(g, lc, rad, vd, b_start, count, own_c, own_r, own_tight, own_vd, own_rmax,
                          loose)
        nested = nested or parent[g] >= 0 or send[pos[g]] > pos[g] + 1
    own_worlds(st, blist, n)  # each group's own: the order of the two loops does not matter
    if nested:  # reset every ancestor of a listed group, then merge every child into them
        for q in range(n):
            p = parent[blist[q]]
            while p >= 0 and bmark[p] != 2:
                if bmark[p] == 0:  # not listed: its own world sphere is current
                    for a in range(3):
                        sub_c[p, a] = world_c[p, a]
                    sub_r[p] = world_r[p]
                    sub_vd[p] = world_vd[p]
                bmark[p] = 2
                p = parent[p]
        for i in range(order.shape[0] - 1, -1, -1):  # listed or reset parents: rebuilt
            g = order[i]
            p = parent[g]
            if p >= 0 and bmark[p] != 0:
                merge_up(parent, sub_c, sub_r, sub_vd, g)
        for i in range(order.shape[0]):
            bmark[order[i]] = 0
    for q in range(n):
        bmark[blist[q]] = 0
    nbl[0] = 0


@njit(cache=True)
def tighten(lc, rad, vd, groups, b_start, b_count, own_c, own_r, own_tight, own_vd, own_rmax,
            loose) -> None:
    """Recompute the own spheres of ``groups`` from their blocks (the lazy half of R(N))."""
    for q in range(groups.shape[0]):
        tighten_group(groups[q], lc, rad, vd, b_start, b_count, own_c, own_r, own_tight, own_vd,
                      own_rmax, loose)
