"""validate for the hashed grid, in Box2D's shape: a few short checks, each a group of invariants.

Each compiled check returns (code, where): 0 when its invariants hold, else a key of
:data:`MESSAGES` and the slot, cell, item or level where it first failed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.hashgrid.store import (
    EMPTY,
    ST_HW,
    ST_IHW,
    ST_INFREE,
    ST_LIVE,
    ST_NDIRTY,
    ST_NFREE,
    ST_USED,
    coord,
    level_of,
    probe,
)

MESSAGES = {
    1: "object's cell is dead or out of range",
    2: "object is not in the cell of its center at its level",
    3: "linked list broken (prev/next disagree or a cycle)",
    4: "cell count differs from its list length",
    5: "object listed in a cell that is not its own",
    6: "some live objects are in no cell list",
    7: "hash table does not map a live cell's key back to it",
    8: "hash table entry points at a dead cell or the wrong key",
    9: "live-cell, used-bucket or free-list count is wrong",
    10: "per-level object or cell count is wrong",
    11: "level max radius is below a stored radius",
    12: "level extent does not contain a cell",
    13: "cell view-distance bounds are not conservative",
    14: "dirty-list flags disagree with the dirty list",
    15: "object's item is missing or its copied center/radius/view distance/id is stale",
    16: "item free list is wrong (a live item on it, or items leaked)",
}


@njit(cache=True)
def check_objects(alive, sph, objs, g, items):
    """Each live object has one item holding exact copies, in the cell of its center at its
    level, and its level's max radius covers it."""
    cells = g.cells
    sizes = g.levels.size
    for s in range(alive.shape[0]):
        if not alive[s]:
            continue
        it = objs.item[s]
        if it < 0 or it >= g.meta[ST_IHW] or items.slot[it] != s:
            return 15, s
        if items.cen[it, 0] != sph.centers[s, 0] or items.cen[it, 1] != sph.centers[s, 1] \
                or items.cen[it, 2] != sph.centers[s, 2] or items.rad[it] != sph.radii[s] \
                or items.vd[it] != sph.vdist[s] or items.ident[it] != sph.ids[s]:
            return 15, s
        c = objs.cell[s]
        if c < 0 or c >= g.meta[ST_HW] or cells.count[c] <= 0:
            return 1, s
        lvl = level_of(sph.radii[s], sizes)
        size = sizes[lvl]
        if cells.key[c, 0] != lvl or cells.key[c, 1] != coord(sph.centers[s, 0], size) \
                or cells.key[c, 2] != coord(sph.centers[s, 1], size) \
                or cells.key[c, 3] != coord(sph.centers[s, 2], size):
            return 2, s
        if sph.radii[s] > g.levels.rmax[lvl]:
            return 11, s
    return 0, -1


@njit(cache=True)
def check_lists(alive, objs, g, items):
    """Each live cell's list is a well-linked chain of its own objects' items, as long as its
    count, within its view-distance bounds; no live cell lies past the high-water mark."""
    cells = g.cells
    hw = g.meta[ST_HW]
    ihw = g.meta[ST_IHW]
    n = alive.shape[0]
    seen = np.zeros(ihw, dtype=np.bool_)
    for c in range(cells.count.shape[0]):
        if cells.count[c] <= 0:
            continue
        if c >= hw:
            return 9, c
        m = 0
        p = -1
        it = cells.head[c]
        while it >= 0:
            if it >= ihw or items.prev[it] != p or seen[it]:
                return 3, c
            s = items.slot[it]
            if s < 0 or s >= n or not alive[s] or objs.cell[s] != c or objs.item[s] != it:
                return 5, c
            if items.vd[it] > cells.vdmax[c] or items.vd[it] < cells.vdmin[c]:
                return 13, c
            seen[it] = True
            m += 1
            p = it
            it = items.next[it]
        if m != cells.count[c]:
            return 4, c
    return 0, -1


@njit(cache=True)
def check_counts(alive, g):
    """Cell counts add up to the live objects, per level and in total; live cells per level
    and in total match the counters; each level's extent contains its cells."""
    cells = g.cells
    lv = g.levels
    nlev = lv.size.shape[0]
    objects = np.zeros(nlev, dtype=np.int64)
    live = np.zeros(nlev, dtype=np.int64)
    for c in range(g.meta[ST_HW]):
        if cells.count[c] <= 0:
            continue
        lvl = cells.key[c, 0]
        objects[lvl] += cells.count[c]
        live[lvl] += 1
        for a in range(3):
            if not (lv.ext[lvl, a] <= cells.key[c, 1 + a] <= lv.ext[lvl, 3 + a]):
                return 12, c
    if objects.sum() != alive.sum():
        return 6, -1
    if live.sum() != g.meta[ST_LIVE]:
        return 9, -1
    for lvl in range(nlev):
        if objects[lvl] != lv.count[lvl] or live[lvl] != lv.cells[lvl]:
            return 10, lvl
    return 0, -1


@njit(cache=True)
def check_table(g):
    """The table maps every live cell's key to it and nothing else; at most half of it is
    used (live or tombstoned)."""
    cells = g.cells
    hkey = g.table.key
    hval = g.table.val
    hw = g.meta[ST_HW]
    for c in range(hw):
        if cells.count[c] <= 0:
            continue
        h = cells.pos[c]
        if h < 0 or h >= hval.shape[0] or hval[h] != c:
            return 7, c
        if probe(g.table, cells.key[c, 0], cells.key[c, 1], cells.key[c, 2],
                 cells.key[c, 3]) != c:
            return 7, c
    used = 0
    for h in range(hval.shape[0]):
        v = hval[h]
        if v != EMPTY:
            used += 1
        if v >= 0:
            if v >= hw or cells.count[v] <= 0 or cells.pos[v] != h:
                return 8, v
            for a in range(4):
                if hkey[h, a] != cells.key[v, a]:
                    return 8, v
    if used != g.meta[ST_USED] or 2 * used > hval.shape[0]:
        return 9, -1
    return 0, -1


@njit(cache=True)
def check_free_stacks(alive, g, items):
    """The free stacks hold exactly the unused cells and items, once each."""
    cells = g.cells
    cap = cells.count.shape[0]
    nfree = g.meta[ST_NFREE]
    isfree = np.zeros(cap, dtype=np.bool_)
    for i in range(nfree):
        c = cells.free[i]
        if c < 0 or c >= cap or cells.count[c] > 0 or isfree[c]:
            return 9, c
        isfree[c] = True
    if nfree + g.meta[ST_LIVE] != cap:
        return 9, -1
    icap = items.slot.shape[0]
    ninfree = g.meta[ST_INFREE]
    isfree = np.zeros(icap, dtype=np.bool_)
    for i in range(ninfree):
        it = items.free[i]
        if it < 0 or it >= icap or items.slot[it] >= 0 or isfree[it]:
            return 16, it
        isfree[it] = True
    if ninfree + alive.sum() != icap:
        return 16, -1
    return 0, -1


@njit(cache=True)
def check_dirty(g):
    """A cell is flagged dirty exactly when it is on the dirty list."""
    cells = g.cells
    hw = g.meta[ST_HW]
    listed = np.zeros(cells.count.shape[0], dtype=np.bool_)
    for i in range(g.meta[ST_NDIRTY]):
        listed[cells.dirty_list[i]] = True
    for c in range(hw):
        if listed[c] != cells.dirty[c]:
            return 14, c
    return 0, -1
