"""Collision pairs of the hashed grid (Bitsquid's "finding nearby stuff", hierarchical).

All pairs
    Cell by cell: a cell's own items against each other, then against the items of the
    cells near it, at its own level and at every *larger* level (a pair across levels is
    found once, from the smaller object's cell looking up into the bigger cells). At its own
    level a cell only looks at cells whose key (ix, iy, iz) comes after its own, so each
    same-level pair is found once too. The cells near a cell are gathered once per cell and
    level: the union of its items' reach ranges (centre +- radius + the level's max radius
    + margin, in that level's coordinates), probed in the table coordinate by coordinate, or
    taken from one pass over the level's live cells when the range has more coordinates than
    the level has cells (huge margins or radii). Each item then only walks the gathered cells
    inside its own range: a pair is tested exactly when b's cell lies in a's range, and
    b's centre lies in a's range whenever the spheres are within the margin of touching.

Pairs of given objects
    Per object of ``ids``, one look-up of its reach range at every level in use; a pair of
    two given objects is kept from the lower slot's side. When the given objects are a large
    part of the grid, the all-pairs walk with the per-slot filter is cheaper.

Output and inner loops
    The items are packed cell by cell per query (one array per field), so a cell is one
    contiguous run: a branch-free distance window over it (it vectorises) finds the
    candidates, and only its hits get the exact test, stopping at the last one. The walk
    never grows the pair buffer: a cell writes the rows that fit and the walk returns, and
    the driver grows the buffer and resumes at that cell. Growing inside the inner loops
    (``out = push_pair(out, ...)``) made numba carry the buffer through every iteration at
    ~10x the cost of the whole walk, and a kernel that reassigns an array loses the
    vectorisation of its loops.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from app.spatial.hashgrid.store import ST_HW, Grid, Items, as_grid, coord, probe
from app.spatial.pair_windows import emit, grown_to, window
from app.spatial.pairs import pair_touch

_EPS = 1e-9  # relative padding of reach ranges (float rounding never drops a cell)
#: Absolute padding: below ~1.5e-154 the squares of the exact test underflow, so it accepts
#: spheres that far apart whatever their radii (tiny scenes then scan whole levels).
_TINY = 1e-150
_BIG = 1 << 62  # start of a range union
#: With at least this fraction of the objects given, the all-pairs walk (filtered) is cheaper
#: than one look-up per given object (each of which sees both sides of its neighbourhood,
#: without the packed windows): measured even at 25-30 % for 10^4 and 10^5 uniform objects.
ALL_PAIRS_FROM = 0.25


@njit(cache=True)
def level_cells(ckey, count, hw, nlev):
    """Live cells grouped by level: (cells, start) with level L's at cells[start[L]:start[L+1]]."""
    start = np.zeros(nlev + 1, dtype=np.int64)
    for c in range(hw):
        if count[c] > 0:
            start[ckey[c, 0] + 1] += 1
    for lvl in range(nlev):
        start[lvl + 1] += start[lvl]
    fill = start[:nlev].copy()
    cells = np.empty(start[nlev], dtype=np.int64)
    for c in range(hw):
        if count[c] > 0:
            lvl = ckey[c, 0]
            cells[fill[lvl]] = c
            fill[lvl] += 1
    return cells, start


@njit(cache=True, inline="always")
def _range(x, y, z, reach, size, rng):
    """Cell coordinates (i0, j0, k0, i1, j1, k1) of a level whose objects' centres can lie
    within ``reach`` of (x, y, z) on each axis (padded: rounding and underflow in the exact
    test never drop a cell)."""
    px = _EPS * (abs(x) + reach) + _TINY
    py = _EPS * (abs(y) + reach) + _TINY
    pz = _EPS * (abs(z) + reach) + _TINY
    rng[0] = coord(x - reach - px, size)
    rng[1] = coord(y - reach - py, size)
    rng[2] = coord(z - reach - pz, size)
    rng[3] = coord(x + reach + px, size)
    rng[4] = coord(y + reach + py, size)
    rng[5] = coord(z + reach + pz, size)


@njit(cache=True, inline="always")
def _in_range(ckey, b, rng):
    return (rng[0] <= ckey[b, 1] <= rng[3] and rng[1] <= ckey[b, 2] <= rng[4]
            and rng[2] <= ckey[b, 3] <= rng[5])


@njit(cache=True, inline="always")
def _after(ckey, b, ox, oy, oz):
    """Whether cell ``b``'s coordinates come after (ox, oy, oz) (same level assumed)."""
    bx = ckey[b, 1]
    if bx != ox:
        return bx > ox
    by = ckey[b, 2]
    if by != oy:
        return by > oy
    return ckey[b, 3] > oz


@njit(cache=True)
def _gather(table, ckey, lcells, lstart, lvl, rng, own, cand):
    """Live cells of level ``lvl`` in the range ``rng`` into ``cand`` (only those after the
    cell ``own`` when it is >= 0, a cell of this level); returns their count.

    Probes the table per coordinate, or scans the level's cells when that is cheaper."""
    k = 0
    vol = (float(rng[3] - rng[0] + 1) * float(rng[4] - rng[1] + 1)
           * float(rng[5] - rng[2] + 1))
    ox = oy = oz = np.int64(0)
    if own >= 0:
        ox = ckey[own, 1]
        oy = ckey[own, 2]
        oz = ckey[own, 3]
    if vol > 2.0 * (lstart[lvl + 1] - lstart[lvl]) + 8.0:
        for j in range(lstart[lvl], lstart[lvl + 1]):
            b = lcells[j]
            if _in_range(ckey, b, rng) and (own < 0 or _after(ckey, b, ox, oy, oz)):
                cand[k] = b
                k += 1
        return k
    for ix in range(rng[0], rng[3] + 1):
        for iy in range(rng[1], rng[4] + 1):
            for iz in range(rng[2], rng[5] + 1):
                if own >= 0 and (ix < ox or (ix == ox and (
                        iy < oy or (iy == oy and iz <= oz)))):
                    continue
                b = probe(table, lvl, ix, iy, iz)
                if b >= 0:
                    cand[k] = b
                    k += 1
    return k


class PackedItems(NamedTuple):
    """The items copied cell by cell (one array per field): cell ``c``'s are the rows
    [start[c], start[c] + its count), so a cell is one contiguous run for :func:`window`."""

    x: np.ndarray  # float64 centre x
    y: np.ndarray
    z: np.ndarray
    r: np.ndarray  # float64 radius
    slot: np.ndarray  # int64 store slot
    start: np.ndarray  # int64 first row of each cell of the pool


class LevelCells(NamedTuple):
    """The live cells by level (:func:`level_cells`) and the levels holding any."""

    cells: np.ndarray  # live cells, level by level
    start: np.ndarray  # (levels + 1,) where each level's cells start in ``cells``
    used: np.ndarray  # the levels with live cells, ascending (``nused`` of them)
    nused: int


class CellScratch(NamedTuple):
    """The all-pairs walk's working arrays."""

    cand: np.ndarray  # int64: the cells gathered near the current cell
    rng: np.ndarray  # (6,) int64: the union of the cell's items' reach ranges
    arng: np.ndarray  # (6,) int64: one item's reach range
    hit: np.ndarray  # uint8: the window's hit bytes


@njit(cache=True)
def pack(g: Grid, items: Items, packed: PackedItems, order):
    """Copy the items cell by cell (pool order) into ``packed``; ``order`` gets the live
    cells. Returns their count."""
    count, head, hw = g.cells.count, g.cells.head, g.meta[ST_HW]
    cen, rad, slot, nxt = items.cen, items.rad, items.slot, items.next
    px, py, pz, pr, ps, cstart = packed
    p = 0
    nc = 0
    for c in range(hw):
        if count[c] <= 0:
            continue
        order[nc] = c
        nc += 1
        cstart[c] = p
        it = head[c]
        while it >= 0:
            px[p] = cen[it, 0]
            py[p] = cen[it, 1]
            pz[p] = cen[it, 2]
            pr[p] = rad[it]
            ps[p] = slot[it]
            p += 1
            it = nxt[it]
    return nc


@njit(cache=True)
def _cells_from(i0: int, order, nc: int, g: Grid, packed: PackedItems, lv: LevelCells,
                margin: float, sel, scratch: CellScratch, out, k: int):
    """The pairs of the live cells order[i0:nc] (see the module docstring) at ``out[k:]``.
    Returns (k, i, need): i = nc when done; else cell i's pairs did not fit (k is where they
    start, ``need`` the rows they take): grow the buffer and call again from i.

    It never grows ``out`` itself: a kernel that reassigns the buffer does not get its
    window loops vectorised."""
    ckey, count, table, sizes, rmax = g.cells.key, g.cells.count, g.table, g.levels.size, (
        g.levels.rmax)
    px, py, pz, pr, ps, cstart = packed
    spheres = (px, py, pz, pr)  # emit's view of the packed run, built once
    lcells, lstart, used, nused = lv
    cand, rng, arng, hit = scratch
    cap = out.shape[0]
    filtered = sel.shape[0] > 0
    for ci in range(i0, nc):
        k0 = k
        c = order[ci]
        lvl = ckey[c, 0]
        p0 = cstart[c]
        p1 = p0 + count[c]
        for i in range(p0, p1):  # the cell's own items against each other
            ax = px[i]
            ay = py[i]
            az = pz[i]
            ar = pr[i]
            m = window(px, py, pz, pr, i + 1, p1, ax, ay, az, ar + margin, hit)
            if m:
                sa = ps[i]
                k = emit((sa, ax, ay, az, ar, filtered and not sel[sa]), i + 1, m, spheres,
                         ps, hit, margin, sel, out, k)
        for u in range(nused):  # cells near it: after it at its level, any at larger ones
            l2 = used[u]
            if l2 < lvl:
                continue
            size = sizes[l2]
            grow = rmax[l2] + margin
            for t in range(3):
                rng[t] = _BIG
                rng[3 + t] = -_BIG
            for i in range(p0, p1):
                _range(px[i], py[i], pz[i], pr[i] + grow, size, arng)
                for t in range(3):
                    rng[t] = min(rng[t], arng[t])
                    rng[3 + t] = max(rng[3 + t], arng[3 + t])
            ncand = _gather(table, ckey, lcells, lstart, l2, rng, c if l2 == lvl else -1,
                            cand)
            if ncand == 0:
                continue
            for i in range(p0, p1):
                ax = px[i]
                ay = py[i]
                az = pz[i]
                ar = pr[i]
                sa = ps[i]
                fa = filtered and not sel[sa]
                _range(ax, ay, az, ar + grow, size, arng)
                for jc in range(ncand):
                    cb = cand[jc]
                    if not _in_range(ckey, cb, arng):
                        continue
                    q0 = cstart[cb]
                    q1 = q0 + count[cb]
                    m = window(px, py, pz, pr, q0, q1, ax, ay, az, ar + margin, hit)
                    if m:
                        k = emit((sa, ax, ay, az, ar, fa), q0, m, spheres, ps, hit,
                                 margin, sel, out, k)
        if k > cap:
            return k0, ci, k
    return k, nc, k


@njit(cache=True)
def _levels_in_use(lstart, nlev):
    used = np.empty(nlev, dtype=np.int64)
    nused = 0
    for lvl in range(nlev):
        if lstart[lvl + 1] > lstart[lvl]:
            used[nused] = lvl
            nused += 1
    return used, nused


@njit(cache=True)
def all_pairs(grid_t, items_t, margin, sel, out, px, py, pz, pr, ps, cstart):
    """Every pair within ``margin`` of touching as (slot, slot) rows, in ``out`` or a grown
    copy of it (returned cut to the pairs); ``sel`` non-empty: only the pairs with at least
    one member marked in it. ``px`` .. ``ps`` (one per live object or more) and ``cstart``
    (one per cell of the pool) are scratch for the packed items. The bundles come as plain
    tuples (see store.grid_args)."""
    g = as_grid(grid_t)
    items = Items(*items_t)
    ckey = g.cells.key
    count = g.cells.count
    hw = g.meta[ST_HW]
    sizes = g.levels.size
    lcells, lstart = level_cells(ckey, count, hw, sizes.shape[0])
    used, nused = _levels_in_use(lstart, sizes.shape[0])
    order = np.empty(max(lcells.shape[0], 1), dtype=np.int64)
    packed = PackedItems(px, py, pz, pr, ps, cstart)
    nc = pack(g, items, packed, order)
    most = 1
    for i in range(nc):
        most = max(most, count[order[i]])
    scratch = CellScratch(np.empty(max(lcells.shape[0], 1), dtype=np.int64),
                          np.empty(6, dtype=np.int64), np.empty(6, dtype=np.int64),
                          np.empty(most, dtype=np.uint8))
    lv = LevelCells(lcells, lstart, used, nused)
    k = 0
    i = 0
    while True:
        k, i, need = _cells_from(i, order, nc, g, packed, lv, margin, sel, scratch, out, k)
        if i >= nc:
            return out[:k]
        out = grown_to(out, need)


@njit(cache=True)
def _objects_from(i0: int, slots, item_of, g: Grid, items: Items, lv: LevelCells,
                  margin: float, sel, cand, rng, out, k: int):
    """The pairs of the given objects slots[i0:], each kept from its side, at out[k:].
    Returns (k, i, need): i = len(slots) when done; else object i's pairs did not fit (they
    start at k and end at need): grow the buffer and call again from i."""
    ckey, head, table, sizes, rmax = g.cells.key, g.cells.head, g.table, g.levels.size, (
        g.levels.rmax)
    nxt, cen, rad, slot = items.next, items.cen, items.rad, items.slot
    lcells, lstart, used, nused = lv
    cap = out.shape[0]
    for i in range(i0, slots.shape[0]):
        k0 = k
        sa = slots[i]
        a = item_of[sa]
        ax = cen[a, 0]
        ay = cen[a, 1]
        az = cen[a, 2]
        ar = rad[a]
        for u in range(nused):
            l2 = used[u]
            _range(ax, ay, az, ar + rmax[l2] + margin, sizes[l2], rng)
            nc = _gather(table, ckey, lcells, lstart, l2, rng, -1, cand)
            for j in range(nc):
                b = head[cand[j]]
                while b >= 0:
                    sb = slot[b]
                    if b != a and (not sel[sb] or sa < sb) and pair_touch(
                            ax, ay, az, ar, cen[b, 0], cen[b, 1], cen[b, 2], rad[b], margin):
                        if k < cap:
                            out[k, 0] = sa
                            out[k, 1] = sb
                        k += 1
                    b = nxt[b]
        if k > cap:
            return k0, i, k
    return k, slots.shape[0], k


@njit(cache=True)
def pairs_of(slots, grid_t, items_t, item_of, margin, sel, out):
    """Pairs with at least one member among the distinct ``slots`` (``sel``: those slots
    marked), in ``out`` or a grown copy; a pair of two given objects is kept once, from its
    lower slot."""
    g = as_grid(grid_t)
    items = Items(*items_t)
    ckey = g.cells.key
    sizes = g.levels.size
    lcells, lstart = level_cells(ckey, g.cells.count, g.meta[ST_HW], sizes.shape[0])
    used, nused = _levels_in_use(lstart, sizes.shape[0])
    cand = np.empty(max(lcells.shape[0], 1), dtype=np.int64)
    rng = np.empty(6, dtype=np.int64)
    lv = LevelCells(lcells, lstart, used, nused)
    k = 0
    i = 0
    while True:
        k, i, need = _objects_from(i, slots, item_of, g, items, lv, margin, sel, cand, rng,
                                   out, k)
        if i >= slots.shape[0]:
            return out[:k]
        out = grown_to(out, need)
