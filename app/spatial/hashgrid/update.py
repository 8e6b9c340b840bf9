"""Compiled updates of the hashed grid: link, unlink, move, compaction and lazy bounds.

Cell lists are linked lists of *items* (Bitsquid's items array, :class:`~.store.Items`): an
item holds a copy of its object's center, radius and view distance next to the list links, so
walking a cell reads one contiguous run of memory once the items are compacted in cell order
(:func:`compact_items`). Slots map to items through :class:`~.store.Objects`.

Bounds only grow eagerly: a cell's view-distance bounds widen on link and move, and a cell
whose bound may have become loose goes on the dirty list, refreshed by the next query that
uses view distances. The levels' max radius and extent are tightened on every rehash.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.hashgrid.store import (
    LIM,
    ST_HW,
    ST_IHW,
    ST_INFREE,
    ST_LIVE,
    ST_NDIRTY,
    ST_NFREE,
    ST_RELINKS,
    ST_USED,
    TOMB,
    Items,
    Objects,
    Spheres,
    allocate,
    as_grid,
    cell_hash,
    coord,
    find_or_add,
    level_of,
)
from app.spatial.prefetch import PREFETCH_AHEAD, prefetch, spread_out


@njit(cache=True, inline="always")
def mark_dirty(c, cells, meta):
    """Queue cell ``c`` for a bounds refresh; the flag keeps it on the list at most once (only
    the refresh clears it)."""
    if not cells.dirty[c]:
        cells.dirty[c] = True
        cells.dirty_list[meta[ST_NDIRTY]] = c
        meta[ST_NDIRTY] += 1


@njit(cache=True, inline="always")
def copy_item(it, s, sph, items):
    """Copy object ``s``'s center, radius, view distance and id into item ``it``."""
    items.cen[it, 0] = sph.centers[s, 0]
    items.cen[it, 1] = sph.centers[s, 1]
    items.cen[it, 2] = sph.centers[s, 2]
    items.rad[it] = sph.radii[s]
    items.vd[it] = sph.vdist[s]
    items.ident[it] = sph.ids[s]


# link and unlink run per relinked object and take whole bundles: compiled without reference
# counting (they allocate nothing), see store.probe.


@njit(cache=True, _nrt=False)
def link(s, c, sph, objs, g, items):
    """Give object ``s`` a new item at the head of cell ``c``; widen cell and level bounds."""
    cells = g.cells
    inext = items.next
    iprev = items.prev
    head = cells.head
    it = allocate(g.meta, items.free, ST_INFREE, ST_IHW)
    copy_item(it, s, sph, items)
    items.slot[it] = s
    objs.item[s] = it
    objs.cell[s] = c
    h = head[c]
    inext[it] = h
    iprev[it] = -1
    if h >= 0:
        iprev[h] = it
    head[c] = it
    cells.count[c] += 1
    v = sph.vdist[s]
    cells.vdmax[c] = max(cells.vdmax[c], v)
    cells.vdmin[c] = min(cells.vdmin[c], v)
    lvl = cells.key[c, 0]
    levels = g.levels
    levels.count[lvl] += 1
    levels.rmax[lvl] = max(levels.rmax[lvl], sph.radii[s])


@njit(cache=True, _nrt=False)
def unlink(s, old_vd, objs, g, items):
    """Free object ``s``'s item; an emptied cell leaves the pool and the table."""
    cells = g.cells
    meta = g.meta
    inext = items.next
    iprev = items.prev
    count = cells.count
    it = objs.item[s]
    c = objs.cell[s]
    p = iprev[it]
    n = inext[it]
    if p >= 0:
        inext[p] = n
    else:
        cells.head[c] = n
    if n >= 0:
        iprev[n] = p
    inext[it] = -1
    iprev[it] = -1
    items.slot[it] = -1
    items.free[meta[ST_INFREE]] = it
    meta[ST_INFREE] += 1
    meta[ST_RELINKS] += 1
    objs.item[s] = -1
    objs.cell[s] = -1
    count[c] -= 1
    lvl = cells.key[c, 0]
    levels = g.levels
    levels.count[lvl] -= 1
    if count[c] == 0:
        g.table.val[cells.pos[c]] = TOMB
        cells.free[meta[ST_NFREE]] = c
        meta[ST_NFREE] += 1
        meta[ST_LIVE] -= 1
        levels.cells[lvl] -= 1
    elif old_vd >= cells.vdmax[c] or old_vd <= cells.vdmin[c]:
        mark_dirty(c, cells, meta)  # the bound it set may now be loose


@njit(cache=True, inline="always")
def has_room(meta, buckets, item: bool):
    """A free cell, a table bucket below half load and (``item``) a free item: room for one
    more link (``buckets``: the table's size; the kernels read it and ``meta`` out of the Grid
    once). A relink needs no free item: it frees its old one first."""
    return (meta[ST_NFREE] > 0 and (meta[ST_INFREE] > 0 or not item)
            and 2 * (meta[ST_USED] + 1) <= buckets)


@njit(cache=True)
def insert_batch(slots, start, sph_t, objs_t, grid_t, items_t):
    """Link new objects; stops early (returning where) when a pool or the table is full.
    The bundles come as plain tuples (see store.grid_args)."""
    sph = Spheres(*sph_t)
    objs = Objects(*objs_t)
    g = as_grid(grid_t)
    items = Items(*items_t)
    sizes = g.levels.size
    centers = sph.centers
    radii = sph.radii
    meta = g.meta
    buckets = g.table.val.shape[0]
    # The arrays the hints read, out of their bundles once (see update_batch).
    vdist, ids, oitem, ocell = sph.vdist, sph.ids, objs.item, objs.cell
    hval, hkey = g.table.val, g.table.key
    n = slots.shape[0]
    ahead = PREFETCH_AHEAD
    for i in range(start, n):
        # A later object's lines asked for in two steps: its slot's store rows and places
        # (a new slot lies anywhere in the store), then, once they are in, its key's bucket.
        # 10^3 spawned of 10^6: 144-268 -> 132-217 ns an object. (A third step, the cell's
        # row and its head item's link found by a probe ahead, made it slower: 167-271 ->
        # 184-283.)
        if i + ahead < n:
            t = slots[i + ahead]
            prefetch(centers, t)
            prefetch(radii, t)
            prefetch(vdist, t)
            prefetch(ids, t)
            prefetch(oitem, t)
            prefetch(ocell, t)
        if i + ahead // 2 < n:
            t = slots[i + ahead // 2]
            lvl = level_of(radii[t], sizes)
            size = sizes[lvl]
            h = cell_hash(lvl, coord(centers[t, 0], size), coord(centers[t, 1], size),
                          coord(centers[t, 2], size), buckets - 1)
            prefetch(hval, h)
            prefetch(hkey, h)
        if not has_room(meta, buckets, True):
            return i
        s = slots[i]
        lvl = level_of(radii[s], sizes)
        size = sizes[lvl]
        c = find_or_add(g, lvl, coord(centers[s, 0], size), coord(centers[s, 1], size),
                        coord(centers[s, 2], size))
        link(s, c, sph, objs, g, items)
    return n


@njit(cache=True)
def update_batch(slots, new_c, new_r, new_v, start, sph_t, objs_t, grid_t, items_t):
    """Move objects to the batch's new values (centres ``new_c``, radii ``new_r`` and view
    distances ``new_v``, None where the batch leaves them: numba compiles each combination
    apart), writing the store's rows as it goes: those whose cell and level stay refresh
    their item only, the others are relinked. Returns how far it got; it stops before a
    relink short of room, that mover's store rows not yet written (the caller makes room
    and calls again from there). The store's write is this loop's, not a pass of its own
    before it; the old radius and view distance (the level, the cell's bounds) are read
    from the mover's item, whose lines the move writes anyway. The bundles come as plain
    tuples (see store.grid_args)."""
    sph = Spheres(*sph_t)
    objs = Objects(*objs_t)
    g = as_grid(grid_t)
    items = Items(*items_t)
    # Arrays read per object are taken out of their bundles once, here.
    centers = sph.centers
    radii = sph.radii
    vdist = sph.vdist
    ocell = objs.cell
    oitem = objs.item
    meta = g.meta
    buckets = g.table.val.shape[0]
    cells = g.cells
    ckey = cells.key
    vdmax = cells.vdmax
    vdmin = cells.vdmin
    sizes = g.levels.size
    rmax = g.levels.rmax
    icen = items.cen
    irad = items.rad
    ivd = items.vd
    n = slots.shape[0]
    # A later mover's lines asked for ahead (app.spatial.prefetch) when the batch is spread
    # over the store; a batch as dense as the store (every object moving) reads it in order,
    # which the hardware already streams: the hints cost it 0.1-0.3 ms at 10^5.
    ahead = PREFETCH_AHEAD if spread_out(slots) else n
    for i in range(start, n):
        # Its slot's store rows and cell and item entries, then (those in) its cell's key
        # and its item's copy.
        if i + ahead < n:
            t = slots[i + ahead]
            prefetch(centers, t)
            if new_r is not None:
                prefetch(radii, t)
            if new_v is not None:
                prefetch(vdist, t)
            prefetch(ocell, t)
            prefetch(oitem, t)
        if i + ahead // 2 < n:
            t = slots[i + ahead // 2]
            prefetch(ckey, ocell[t])
            it = oitem[t]
            prefetch(icen, it)
            prefetch(irad, it)
            prefetch(ivd, it)
        s = slots[i]
        # The old radius and view distance from the object's item (a copy of the store's,
        # whose lines the move writes anyway), not from two more store rows: 10^4 of 10^6,
        # frames alternated on one index, `churn100` 82-87 -> 68-73 ns a mover, `fixed`
        # 32-40 -> 28-32.
        it = oitem[s]
        r = irad[it] if new_r is None else new_r[i]
        ov = ivd[it]
        v = ov if new_v is None else new_v[i]
        lvl = level_of(r, sizes)
        size = sizes[lvl]
        x = new_c[i, 0]
        y = new_c[i, 1]
        z = new_c[i, 2]
        ix = coord(x, size)
        iy = coord(y, size)
        iz = coord(z, size)
        c = ocell[s]
        stay = ckey[c, 0] == lvl and ckey[c, 1] == ix and ckey[c, 2] == iy and ckey[c, 3] == iz
        if not stay and not has_room(meta, buckets, False):
            return i
        centers[s, 0] = x
        centers[s, 1] = y
        centers[s, 2] = z
        if new_r is not None:
            radii[s] = r
        if new_v is not None:
            vdist[s] = v
        if stay:
            icen[it, 0] = x
            icen[it, 1] = y
            icen[it, 2] = z
            irad[it] = r
            ivd[it] = v
            if v != ov and (ov >= vdmax[c] or ov <= vdmin[c]):
                mark_dirty(c, cells, meta)
            vdmax[c] = max(vdmax[c], v)
            vdmin[c] = min(vdmin[c], v)
            rmax[lvl] = max(rmax[lvl], r)
            continue
        unlink(s, ov, objs, g, items)
        c = find_or_add(g, lvl, ix, iy, iz)
        link(s, c, sph, objs, g, items)
    return slots.shape[0]


@njit(cache=True)
def remove_batch(slots, vdist, objs_t, grid_t, items_t):
    """Unlink objects about to be freed (the store still holds them). The bundles come as
    plain tuples (see store.grid_args)."""
    objs = Objects(*objs_t)
    g = as_grid(grid_t)
    items = Items(*items_t)
    # The arrays the hints read, out of their bundles once (see update_batch).
    oitem = objs.item
    ocell = objs.cell
    inext = items.next
    iprev = items.prev
    islot = items.slot
    chead, ccount, ckey, cvdmax, cvdmin, cpos = (g.cells.head, g.cells.count, g.cells.key,
                                                g.cells.vdmax, g.cells.vdmin, g.cells.pos)
    n = slots.shape[0]
    ahead = PREFETCH_AHEAD
    for i in range(n):
        # A later object's lines in three steps, each once the lines it needs are in: its
        # places and view distance; its item's links and its cell's row; its neighbours'
        # links. 10^3 of 10^6 removed: 158-214 -> 77-122 ns an object.
        if i + ahead < n:
            t = slots[i + ahead]
            prefetch(oitem, t)
            prefetch(ocell, t)
            prefetch(vdist, t)
        if i + ahead // 2 < n:
            t = slots[i + ahead // 2]
            it = oitem[t]
            c = ocell[t]
            prefetch(inext, it)
            prefetch(iprev, it)
            prefetch(islot, it)
            prefetch(chead, c)
            prefetch(ccount, c)
            prefetch(ckey, c)
            prefetch(cvdmax, c)
            prefetch(cvdmin, c)
            prefetch(cpos, c)
        if i + ahead // 4 < n:
            it = oitem[slots[i + ahead // 4]]
            if it >= 0 and iprev[it] >= 0:
                prefetch(inext, iprev[it])
            if it >= 0 and inext[it] >= 0:
                prefetch(iprev, inext[it])
        s = slots[i]
        unlink(s, vdist[s], objs, g, items)


@njit(cache=True, _nrt=False)
def clear_levels(rmax, ext) -> None:
    """Every level's largest radius and cell extent emptied, for a pass to set again."""
    rmax[:] = 0.0
    ext[:, :3] = LIM + 1
    ext[:, 3:] = -LIM - 1


@njit(cache=True, _nrt=False)
def widen_level(ext, ckey, c: int) -> int:
    """Widen cell ``c``'s level's extent to hold the cell; returns the level. Compiled
    without reference counts: called per cell, its arrays would pay them at every call."""
    lvl = ckey[c, 0]
    for a in range(3):
        ext[lvl, a] = min(ext[lvl, a], ckey[c, 1 + a])
        ext[lvl, 3 + a] = max(ext[lvl, 3 + a], ckey[c, 1 + a])
    return lvl


@njit(cache=True)
def compact_items(objs, g, items, fresh):
    """Copy items into the pool ``fresh`` (of ``items``' size; new, or the spare from the
    last compaction, whatever it holds) cell by cell, in pool order, so that each cell's list
    is one contiguous run and neighbouring cells' runs are adjacent. Items ``j ..`` are left
    unused (no slot) and the free stack's bottom holds them, highest first.

    Measured and not kept (10^5 objects all moving, 1.8-2.0 ms here): items written from the
    store in slot order (2.4 ms: every write scattered) and eight cells' lists walked side
    by side (3.8 ms: eight write streams). Most items lie in order since the last compaction;
    the cost is the scattered ``objs.item`` write of each.

    On the way it sets each object's cell (``objs.cell``: the cells were renumbered) and the
    levels' largest radius and extent (:func:`recompute_levels`' pass over every item, 0.34
    ms at 10^5, folded in, with its helpers).
    """
    # Every array out of its bundle once: a bundle's field read inside the loop counts the
    # array's references at every turn (2.7 against 3.2 ms).
    count = g.cells.count
    head = g.cells.head
    ckey = g.cells.key
    meta = g.meta
    rmax = g.levels.rmax
    ext = g.levels.ext
    oitem = objs.item
    ocell = objs.cell
    cen, rad, vd, ident, slot, nxt = (items.cen, items.rad, items.vd, items.ident, items.slot,
                                      items.next)
    fcen, frad, fvd, fident, fslot, fnext, fprev, ffree = (
        fresh.cen, fresh.rad, fresh.vd, fresh.ident, fresh.slot, fresh.next, fresh.prev,
        fresh.free)
    clear_levels(rmax, ext)
    j = 0
    for c in range(meta[ST_HW]):
        if count[c] <= 0:
            continue
        lvl = widen_level(ext, ckey, c)
        big = rmax[lvl]
        it = head[c]
        head[c] = j
        first = j
        while it >= 0:
            fcen[j, 0] = cen[it, 0]
            fcen[j, 1] = cen[it, 1]
            fcen[j, 2] = cen[it, 2]
            frad[j] = rad[it]
            fvd[j] = vd[it]
            fident[j] = ident[it]
            big = max(big, rad[it])
            s = slot[it]
            fslot[j] = s
            oitem[s] = j
            ocell[s] = c
            fprev[j] = j - 1 if j > first else -1
            fnext[j] = j + 1
            j += 1
            it = nxt[it]
        fnext[j - 1] = -1
        rmax[lvl] = big
    cap = ffree.shape[0]
    for k in range(j, cap):
        fslot[k] = -1
        ffree[cap - 1 - k] = k
    meta[ST_IHW] = j
    meta[ST_INFREE] = cap - j
    meta[ST_RELINKS] = 0


def morton(off: np.ndarray) -> np.ndarray:
    """Z-order code of (K, 3) non-negative ints below 2**21 (vectorised bit spreading)."""
    code = np.zeros(off.shape[0], dtype=np.uint64)
    for a in range(3):
        x = off[:, a].astype(np.uint64) & np.uint64(0x1FFFFF)
        x = (x | (x << np.uint64(32))) & np.uint64(0x1F00000000FFFF)
        x = (x | (x << np.uint64(16))) & np.uint64(0x1F0000FF0000FF)
        x = (x | (x << np.uint64(8))) & np.uint64(0x100F00F00F00F00F)
        x = (x | (x << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
        x = (x | (x << np.uint64(2))) & np.uint64(0x1249249249249249)
        code |= x << np.uint64(a)
    return code


@njit(cache=True)
def refresh_dirty(g, items):
    """Recompute the view-distance bounds of the cells on the dirty list (lazily: called by
    the frustum queries that use view distances)."""
    cells = g.cells
    meta = g.meta
    for i in range(meta[ST_NDIRTY]):
        c = cells.dirty_list[i]
        cells.dirty[c] = False
        if cells.count[c] <= 0:
            continue
        hi = -np.inf
        lo = np.inf
        it = cells.head[c]
        while it >= 0:
            hi = max(hi, items.vd[it])
            lo = min(lo, items.vd[it])
            it = items.next[it]
        cells.vdmax[c] = hi
        cells.vdmin[c] = lo
    meta[ST_NDIRTY] = 0


@njit(cache=True)
def recompute_levels(g, items):
    """Tighten per-level max radius and extent (they only grow between rebuilds)."""
    cells = g.cells
    ckey = cells.key
    count = cells.count
    head = cells.head
    rad = items.rad  # (out of their bundles: a field read in the loop counts references)
    nxt = items.next
    rmax = g.levels.rmax
    ext = g.levels.ext
    clear_levels(rmax, ext)
    for c in range(g.meta[ST_HW]):
        if count[c] <= 0:
            continue
        lvl = widen_level(ext, ckey, c)
        it = head[c]
        while it >= 0:
            rmax[lvl] = max(rmax[lvl], rad[it])
            it = nxt[it]
