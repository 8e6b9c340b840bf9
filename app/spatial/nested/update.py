"""Inserts, removals and moves in a nested index's arena: compiled batch kernels over the
rows (``store.NestedRows``) and the index's record (state.py).

A move writes one record, the float64 local centre, and logs its row (:func:`apply_moves`);
the same movers as the last batch skip the id look-ups (:func:`moves_fast`, its typed entry
point :func:`moves_hot`), and movers that keep coming are packed to the front of their
blocks once (:func:`movers_first`). New objects are written at a block's end
(:func:`write_new`); removed ones leave their block packed, its order kept
(:func:`remove_rows`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from app.spatial.idmap import assign, hash_lookup
from app.spatial.nested.groups import LIMIT, REL
from app.spatial.nested.state import STATE_TYPE
from app.spatial.nested.store import NestedRows, copy_row, kill_row
from app.spatial.scan import to32

#: A group's own sphere is tightened again (at the next query) once a move has grown it past
#: this many times the radius it had when last tightened.
LOOSE = 1.25
#: 1 / (1 + REL), a hair low: a reach test that passes with it passes exactly
_SHRINK = (1.0 - 1e-15) / (1.0 + REL)


@njit(cache=True, inline="always")
def _reaches(dx: float, dy: float, dz: float, r: float, R: float) -> float:
    """``(|d| + r) (1 + REL)`` when that exceeds ``R``, else -1; no square root when the
    point is clearly inside (``|d|^2 < (R / (1 + REL) - r)^2 (1 - 1e-12)``: a margin of many
    roundings, and that bound not tiny next to ``R``), which is what most moves are."""
    d2 = dx * dx + dy * dy + dz * dz
    q = R * _SHRINK - r
    if q > 0.01 * R and d2 < q * q * (1.0 - 1e-12):
        return -1.0
    reach = (math.sqrt(d2) + r) * (1.0 + REL)
    return reach if reach > R else -1.0


@njit(cache=True)
def write_new(R: NestedRows, lo: int, g: int, new_ids, centers, radii, vdist) -> None:
    """New objects of group ``g`` into the free rows ``lo ..`` (not stale: the group's index
    gets them at once)."""
    ids, lc, rad, vd, grp, stale, x, y, z, r32, vd32 = R
    for i in range(new_ids.shape[0]):
        s = lo + i
        ids[s] = new_ids[i]
        for a in range(3):
            lc[s, a] = centers[i, a]
        rad[s] = radii[i]
        vd[s] = vdist[i]
        grp[s] = g
        stale[s] = 0
        x[s] = to32(centers[i, 0])
        y[s] = to32(centers[i, 1])
        z[s] = to32(centers[i, 2])
        r32[s] = to32(radii[i])
        vd32[s] = to32(vdist[i])


@njit(cache=True)
def remove_rows(R: NestedRows, rows, groups, b_start, b_count, nstale, keys, vals, dense) -> None:
    """Kill ``rows``, then pack the blocks of ``groups`` (the groups they were in), keeping
    their order; moved rows' ids are re-pointed. The ids must already be out of the map."""
    ids, grp, stale, r32 = R.ids, R.grp, R.stale, R.r32
    for i in range(rows.shape[0]):
        s = rows[i]
        if stale[s]:
            nstale[grp[s]] -= 1
        kill_row(ids, stale, r32, s)
    for q in range(groups.shape[0]):
        g = groups[q]
        lo = b_start[g]
        hi = lo + b_count[g]
        k = lo
        for s in range(lo, hi):
            if ids[s] < 0:
                continue
            if s != k:
                copy_row(R, s, R, k)
                assign(keys, vals, dense, ids[k], k)
            k += 1
        for s in range(k, hi):
            kill_row(ids, stale, r32, s)
        b_count[g] = k - lo


@njit(cache=True)
def good_values(centers, radii, vdist) -> bool:
    """Every value of a move batch finite and in range (radii / view distances: when given,
    i.e. as long as the centres). A branch-free count, NaN-safe: it vectorises."""
    n = centers.shape[0]
    flat = centers.reshape(-1)
    bad = 0
    for i in range(flat.shape[0]):
        bad += not (abs(flat[i]) <= LIMIT)
    if radii.shape[0] == n:
        for i in range(n):
            bad += not (radii[i] >= 0.0 and radii[i] <= LIMIT)
    if vdist.shape[0] == n:
        for i in range(n):
            v = vdist[i]
            bad += not (v >= 0.0 and (v <= LIMIT or v == np.inf))
    return bad == 0


@njit(cache=True)
def same_ids(ids, last) -> bool:
    """``ids`` equal to ``last`` (as long), element by element (a branch-free count)."""
    diff = 0
    for i in range(ids.shape[0]):
        diff += ids[i] != last[i]
    return diff == 0


@njit(cache=True)
def resolve_moves(ids, keys, vals, dense, grp, want: int, stamp, epoch: int, rows,
                  grps) -> bool:
    """Rows and groups of a move batch's ids into ``rows`` / ``grps``, and whether they are
    good: every id known (and in group slot ``want`` unless it is -1) and given once. Changes
    nothing else but the repeat marks (an increasing batch needs none); False sends the
    caller to the slow path that names the offenders."""
    n = ids.shape[0]
    nd = dense.shape[0]
    increasing = True
    for i in range(n):
        k = ids[i]
        s = dense[k] if k >= 0 and k < nd else hash_lookup(keys, vals, k)
        if s < 0:
            return False
        rows[i] = s
        g = grp[s]
        grps[i] = g
        if want >= 0 and g != want:
            return False
        if i > 0 and k <= ids[i - 1]:
            increasing = False
    if not increasing:
        for i in range(n):
            s = rows[i]
            if stamp[s] == epoch:
                return False
            stamp[s] = epoch
    return True


@njit(cache=True, inline="always")
def _run_end(grps, i: int) -> int:
    """One past the run of moves of group ``grps[i]`` that starts at ``i`` (a batch comes in
    runs of one group)."""
    j = i + 1
    while j < grps.shape[0] and grps[j] == grps[i]:
        j += 1
    return j


@njit(cache=True, inline="always")
def _apply(st, rows, grps, centers, radii, vdist, inner_min: int) -> None:
    """:func:`apply_moves`, a run of moves of one group at a time (the group's state read and
    written once a run); the record's arrays taken into locals first."""
    lc, rad, vd, stale, r32, vd32 = st.lc, st.rad, st.vd, st.stale, st.r32, st.vd32
    own_c, own_r, own_tight = st.own_c, st.own_r, st.own_tight
    own_vd, own_rmax = st.own_vd, st.own_rmax
    loose, nstale, b_count, dirty32, gdirty = st.loose, st.nstale, st.b_count, st.dirty32, st.gdirty
    log_rows, log_grp, nlog = st.log_rows, st.log_grp, st.nlog
    bmark, blist, nbl = st.bmark, st.blist, st.nbl
    m = rows.shape[0]
    has_r = radii.shape[0] == m
    has_v = vdist.shape[0] == m
    n = nlog[0]
    nl = log_rows.shape[0]
    nb = nbl[0]
    i = 0
    while i < m:
        g = grps[i]
        j = _run_end(grps, i)
        d = dirty32[g]
        big = b_count[g] >= inner_min
        ox = own_c[g, 0]
        oy = own_c[g, 1]
        oz = own_c[g, 2]
        orad = own_r[g]
        rmax = own_rmax[g]
        vmax = own_vd[g]
        grew = False
        nst = 0
        for q in range(i, j):
            s = rows[q]
            cx = centers[q, 0]
            cy = centers[q, 1]
            cz = centers[q, 2]
            lc[s, 0] = cx
            lc[s, 1] = cy
            lc[s, 2] = cz
            if d != 2:
                if n < nl:
                    log_rows[n] = s
                    log_grp[n] = g
                    n += 1
                    d = 1
                else:  # the log is full: this group's block is refreshed whole
                    d = 2
            r = rmax
            if has_r:
                r = radii[q]
                rad[s] = r
                r32[s] = to32(r)
                rmax = max(rmax, r)
            if has_v:
                v = vdist[q]
                vd[s] = v
                vd32[s] = to32(v)
                if v > vmax:
                    vmax = v
                    grew = True
            if big and stale[s] == 0:
                stale[s] = 1
                nst += 1
            reach = _reaches(cx - ox, cy - oy, cz - oz, r, orad)
            if reach > 0.0:
                orad = reach
                grew = True
        dirty32[g] = d
        own_rmax[g] = rmax
        own_vd[g] = vmax
        if big:
            nstale[g] += nst
        else:
            gdirty[g] = 1
        if grew:
            if orad > own_r[g]:
                own_r[g] = orad
                if orad > LOOSE * own_tight[g]:
                    loose[g] = True
            if not bmark[g]:
                bmark[g] = 1
                blist[nb] = g
                nb += 1
        i = j
    nlog[0] = n
    nbl[0] = nb


@njit(cache=True)
def apply_moves(st, rows, grps, centers, radii, vdist, inner_min: int) -> None:
    """Write a checked move batch and grow each group's own sphere at once to cover it (the
    eager half of Shagam's R(N) upkeep; tightening waits for a query).

    A move writes one record, the float64 local centre, and appends its row to the move log
    (``log_rows`` / ``log_grp``, ``nlog[0]`` entries): the next query refreshes the float32
    copies of the logged rows of the groups it scans and marks the other groups for a whole
    block refresh (``dirty32``: 0 fresh, 1 rows in the log, 2 whole block), and the
    group's own index learns of it row by row (``stale``) only in a group large enough to be
    queried through it (``inner_min``); a smaller group is only marked (``gdirty``) and its
    index is brought up to date as a whole when something reads it. Without new radii the
    reach uses the group's largest radius, so the store's radius is not read either. A group
    whose own sphere grew is listed bounds-dirty (``bmark`` / ``blist`` / ``nbl[0]``).
    ``st``: the index's record (state.py) of its group and row arrays."""
    _apply(st, rows, grps, centers, radii, vdist, inner_min)


@njit(cache=True)
def moves_fast(st, ids, last, rows, grps, centers, radii, vdist, inner_min: int) -> int:
    """The per-frame move in one call, on the index's record ``st`` (state.py): the values
    checked (:func:`good_values`), ``ids`` compared with the last batch's ``last`` (whose
    ``rows`` / ``grps`` are known), then :func:`apply_moves`. Returns 0 done, 1 a bad shape
    or value, 2 other ids (nothing written). Radii and view distances are given when as long
    as ``ids``, absent when empty."""
    n = ids.shape[0]
    if centers.shape[0] != n or centers.shape[1] != 3 or (
            radii.shape[0] != n and radii.shape[0] != 0) or (
            vdist.shape[0] != n and vdist.shape[0] != 0):
        return 1
    if not good_values(centers, radii, vdist):
        return 1
    if last.shape[0] != ids.shape[0] or not same_ids(ids, last):
        return 2
    _apply(st, rows, grps, centers, radii, vdist, inner_min)
    return 0


# Typed entry point (state.py): other argument types raise TypeError instead of compiling.
@njit((STATE_TYPE, types.int64[::1], types.int64[::1], types.int64[::1], types.int64[::1],
       types.float64[:, ::1], types.float64[::1], types.float64[::1], types.int64), cache=True)
def moves_hot(st, ids, last, rows, grps, centers, radii, vdist, inner_min: int) -> int:
    """:func:`moves_fast` for ``NestedIndex.update``'s per-frame path."""
    return moves_fast(st, ids, last, rows, grps, centers, radii, vdist, inner_min)


@njit(cache=True)
def movers_first(R: NestedRows, rows, grps, b_start, stamp, epoch: int, keys, vals,
                 dense) -> None:
    """Move the rows ``rows`` (a move batch's, in runs of one group) to the front of their
    groups' blocks, swapping each with a row that is not in the batch (every field, the ids
    re-pointed): a batch that comes every frame then writes a few packed cache lines per
    group instead of one line per object. ``rows`` gets the new rows (the batch's cached
    rows stay right); ``stamp`` marks rows (``epoch``: in the batch)."""
    ids, lc, rad, vd, grp, stale, x, y, z, r32, vd32 = R
    m = rows.shape[0]
    for i in range(m):
        stamp[rows[i]] = epoch
    i = 0
    while i < m:
        g = grps[i]
        j = _run_end(grps, i)
        lo = b_start[g]
        zone = lo + (j - i)  # the first j - i rows of the block: the batch's place
        t = lo
        for q in range(i, j):
            s = rows[q]
            if s < zone:
                continue
            while t < s and stamp[t] == epoch:  # a batch row already in place
                t += 1
            if t >= s:  # (a group in several runs: no row in front of it to take)
                continue
            # swap rows s and t: t (not in the batch) takes s's place
            ids[s], ids[t] = ids[t], ids[s]
            for a in range(3):
                lc[s, a], lc[t, a] = lc[t, a], lc[s, a]
            rad[s], rad[t] = rad[t], rad[s]
            vd[s], vd[t] = vd[t], vd[s]
            stale[s], stale[t] = stale[t], stale[s]
            x[s], x[t] = x[t], x[s]
            y[s], y[t] = y[t], y[s]
            z[s], z[t] = z[t], z[s]
            r32[s], r32[t] = r32[t], r32[s]
            vd32[s], vd32[t] = vd32[t], vd32[s]
            assign(keys, vals, dense, ids[s], s)
            assign(keys, vals, dense, ids[t], t)
            stamp[t] = epoch
            stamp[s] = epoch - 1
            rows[q] = t
            t += 1
        i = j
