"""validate for the nested index: a few short compiled checks, each one invariant.

Each returns (code, where): 0 when its invariant holds, else a key of :data:`MESSAGES` and
the row or group slot where it first failed.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.spatial.idmap import hash_lookup
from app.spatial.nested.groups import world_point
from app.spatial.nested.store import NestedRows
from app.spatial.scan import to32

MESSAGES = {
    1: "a group's block leaves the used part of the arena",
    2: "two groups' blocks overlap",
    3: "a row inside a block's count is dead or belongs to another group",
    4: "a row past a block's count, or outside every block, is alive",
    5: "the float32 copy of a row differs from its float64 values",
    6: "a group's own sphere does not hold one of its objects (or its view distance or radius)",
    7: "a group's world sphere does not hold the world sphere of one of its objects",
    8: "a subtree's world sphere does not hold the world sphere of an object below it",
    9: "a group's stale count differs from its stale rows",
    10: "the id map does not point back at a live row",
    11: "the id map holds a different number of ids than there are live rows",
    12: "a stale flag is set on a dead row",
    13: "the move log or a group's float32 state is out of range",
}


@njit(cache=True)
def check_blocks(R: NestedRows, groups, b_start, b_cap, b_count, top: int):
    """Blocks lie in ``[0, top)``, are disjoint and packed; nothing lives outside them."""
    ids, lc, rad, vd, grp, stale, x, y, z, r32, vd32 = R
    owner = np.full(ids.shape[0], -1, np.int64)
    for q in range(groups.shape[0]):
        g = groups[q]
        lo = b_start[g]
        if b_cap[g] == 0:
            continue
        if lo < 0 or lo + b_cap[g] > top or b_count[g] > b_cap[g] or b_count[g] < 0:
            return 1, g
        for s in range(lo, lo + b_cap[g]):
            if owner[s] >= 0:
                return 2, g
            owner[s] = g
            live = ids[s] >= 0
            if s < lo + b_count[g]:
                if not live or grp[s] != g or r32[s] == -np.inf:
                    return 3, s
            elif live or r32[s] != -np.inf:
                return 4, s
    for s in range(ids.shape[0]):
        if owner[s] < 0 and (ids[s] >= 0 or r32[s] != -np.inf):
            return 4, s
        if ids[s] < 0 and stale[s]:
            return 12, s
    return 0, 0


@njit(cache=True)
def check_copy(R: NestedRows, dirty32, log_rows, nlog: int):
    """The float32 copy of every live row is its float64 values rounded, except the centres
    of groups waiting for a refresh: state 2 (the whole block) or state 1 with the row in the
    move log (update.apply_moves)."""
    ids, lc, rad, vd, grp, stale, x, y, z, r32, vd32 = R
    if nlog < 0 or nlog > log_rows.shape[0]:
        return 13, nlog
    logged = np.zeros(ids.shape[0], np.uint8)
    for q in range(nlog):
        logged[log_rows[q]] = 1
    for s in range(ids.shape[0]):
        if ids[s] < 0:
            continue
        d = dirty32[grp[s]]
        if d > 2:
            return 13, s
        fresh = (x[s] == to32(lc[s, 0])) & (y[s] == to32(lc[s, 1])) & (z[s] == to32(lc[s, 2]))
        if not (fresh or d == 2 or (d == 1 and logged[s])):
            return 5, s
        if (r32[s] != to32(rad[s])) | (vd32[s] != to32(vd[s])):
            return 5, s
    return 0, 0


@njit(cache=True)
def check_own(R: NestedRows, own_c, own_r, own_vd, own_rmax, nstale, groups):
    """Own spheres hold their objects; stale counts match the stale rows."""
    ids, lc, rad, vd, grp, stale, x, y, z, r32, vd32 = R
    count = np.zeros(nstale.shape[0], np.int64)
    for s in range(ids.shape[0]):
        if ids[s] < 0:
            continue
        g = grp[s]
        dx = lc[s, 0] - own_c[g, 0]
        dy = lc[s, 1] - own_c[g, 1]
        dz = lc[s, 2] - own_c[g, 2]
        if not (math.sqrt(dx * dx + dy * dy + dz * dz) + rad[s] <= own_r[g]) or (
                vd[s] > own_vd[g]) or rad[s] > own_rmax[g]:
            return 6, s
        count[g] += stale[s]
    for q in range(groups.shape[0]):
        g = groups[q]
        if count[g] != nstale[g]:
            return 9, g
    return 0, 0


@njit(cache=True)
def check_world(R: NestedRows, parent, W, ws, world_c, world_r, world_vd, sub_c, sub_r, sub_vd):
    """Every object's canonical world sphere lies in its group's world sphere and in the
    subtree sphere of its group and of every ancestor (view distances likewise)."""
    ids, lc, rad, vd, grp, stale, x, y, z, r32, vd32 = R
    for s in range(ids.shape[0]):
        if ids[s] < 0:
            continue
        g = grp[s]
        wx, wy, wz = world_point(W, g, lc[s, 0], lc[s, 1], lc[s, 2])
        wr = ws[g] * rad[s]
        wv = ws[g] * vd[s]
        dx = wx - world_c[g, 0]
        dy = wy - world_c[g, 1]
        dz = wz - world_c[g, 2]
        if not (math.sqrt(dx * dx + dy * dy + dz * dz) + wr <= world_r[g]) or wv > world_vd[g]:
            return 7, s
        a = g
        while a >= 0:
            dx = wx - sub_c[a, 0]
            dy = wy - sub_c[a, 1]
            dz = wz - sub_c[a, 2]
            if not (math.sqrt(dx * dx + dy * dy + dz * dz) + wr <= sub_r[a]) or wv > sub_vd[a]:
                return 8, s
            a = parent[a]
    return 0, 0


@njit(cache=True)
def check_idmap(R: NestedRows, keys, vals, dense):
    """The id map sends every live row's id back to that row; returns also the live count."""
    ids = R.ids
    nd = dense.shape[0]
    live = 0
    for s in range(ids.shape[0]):
        k = ids[s]
        if k < 0:
            continue
        live += 1
        got = dense[k] if k < nd else hash_lookup(keys, vals, k)
        if got != s:
            return 10, s, live
    return 0, 0, live
