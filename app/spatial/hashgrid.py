"""``grid``: the Bitsquid hashed grid (grid coordinates -> hash table -> linked list in an
array), made hierarchical so that objects of any size fit.

Structure
---------
* **Levels.** Level ``L`` is a uniform grid of cubes of side ``cell_size * 2**L``. An object
  lives in exactly one cell: the cell of its *center* at the smallest level whose cell side is
  at least its diameter (``2r <= cell_size * 2**L``; the top level takes whatever is larger).
  Queries therefore expand each cell by the largest radius stored at its level (``R_L``,
  kept conservatively), which is at most half a cell except at the top level.
* **Cells** are a pool of records in flat arrays (key = level and integer coordinates, head of
  the object list, object count, view-distance bounds) with a free list. The objects of a cell
  form a doubly linked list threaded through per-slot ``next``/``prev`` arrays, so moving an
  object between cells is O(1).
* **Hash table.** Open addressing with linear probing over (level, ix, iy, iz) keys, values are
  cell indices; empty cells are deleted (tombstones) and the table is rebuilt when live entries
  plus tombstones pass half of it.

Cell size
---------
``cell_size=None`` picks the finest side from the first inserted batch (see
:func:`choose_cell_size`): the side of a cube holding about ``TARGET_PER_CELL`` objects at the
batch's mean density, but never less than the median diameter. The Bitsquid note's table says
why: the number of cells a query must look at falls only slowly as cells grow past the search
diameter while the items per cell grow with the cube of the side. A frustum is huge compared
to any object, so here the "search" is dominated by the number of cells visited (a hash probe,
a plane test and a jump to another run of memory each, ~0.5 us) against ~10 ns per object
tested. Measured on the 1M-object benchmark (1000-unit cube, far 300): 12-unit cells 10.7 ms,
20: 3.9 ms, 28: 2.2 ms, 40: 1.4 ms, 56: 1.1 ms, 80: 1.3 ms, 120: 1.8 ms per frustum query. So
the default aims at ~100 objects per cell (46-unit cells there), far coarser than the note's
"cell = search diameter", which is right for small neighbourhood queries only.

Every per-object decision uses :mod:`app.geom.predicates`, so answers equal brute force bit
for bit; cell tests only ever skip work (their boxes carry a small relative margin).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from app.geom.hashing import mix64
from app.geom.predicates import (
    INSIDE,
    NODE_INSIDE,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
    OUTSIDE,
    PARTIAL,
    box_point_dist,
    box_vs_frustum,
    ray_box_hits,
    ray_sphere_entry,
    sphere_in_frustum,
    sphere_overlaps_box,
    spheres_touch,
    within_view_distance,
)
from app.geom.zpyramid import box_occluded, occlusion_arrays, sphere_occluded
from app.spatial.base import QueryResult, SpatialIndex

NLEVELS = 48  # cell sides cell_size * 2**0 .. 2**47: any radius a finite scene needs
LIM = 1 << 40  # grid coordinates are clamped to [-LIM, LIM]; such cells are unbounded
TARGET_PER_CELL = 100.0  # objects per cell aimed at by the default cell size (measured)
REL = 1e-10  # relative margin added to every cell box so rounding never loses an object

# Hash table values.
_EMPTY = -1
_TOMB = -2

# Scalar state shared with the kernels, in one int64 array so they can update it.
ST_HW = 0  # cell pool high-water mark (cells >= HW were never used)
ST_NFREE = 1  # freed cells on the free stack
ST_LIVE = 2  # live (non-empty) cells
ST_USED = 3  # hash buckets live or tombstoned (what probing pays for)
ST_NDIRTY = 4  # cells whose view-distance bounds may be loose
ST_IHW = 5  # item pool high-water mark
ST_INFREE = 6  # freed items on the item free stack
ST_RELINKS = 7  # items freed since the last compaction (each costs locality)
ST_SIZE = 8

# validate() error codes -> messages.
_ERRORS = {
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
    15: "object's item is missing or its copied center/radius/view distance is stale",
    16: "item free list is wrong (a live item on it, or items leaked)",
}


# ---------------------------------------------------------------------------- keys


@njit(cache=True, inline="always")
def _cell_hash(lvl, ix, iy, iz, mask):
    x = np.uint64(ix) * np.uint64(0x9E3779B97F4A7C15)
    x ^= np.uint64(iy) * np.uint64(0xC2B2AE3D27D4EB4F)
    x ^= np.uint64(iz) * np.uint64(0x165667B19E3779F9)
    x ^= np.uint64(lvl) * np.uint64(0x27D4EB2F165667C5)
    # Neighbouring cells must land far apart.
    return np.int64(mix64(x) & np.uint64(mask))


@njit(cache=True, inline="always")
def _level_of(r, sizes):
    """Smallest level whose cell side is at least the diameter (the top level otherwise)."""
    d = 2.0 * r
    lvl = 0
    top = sizes.shape[0] - 1
    while lvl < top and d > sizes[lvl]:
        lvl += 1
    return lvl


@njit(cache=True, inline="always")
def _coord(x, size):
    """Grid coordinate of ``x``, clamped so that it fits an int64 (LIM cells are unbounded)."""
    q = math.floor(x / size)
    if q >= LIM:
        return np.int64(LIM)
    if q <= -LIM:
        return np.int64(-LIM)
    return np.int64(q)


@njit(cache=True, inline="always")
def _margin(ix, iy, iz, size, rmax):
    # Rounding of a dot product is ~1e-16 of the coordinates involved; 1e-10 is ample.
    m = max(abs(ix), abs(iy), abs(iz)) + 2
    return REL * (m * size + rmax)


@njit(cache=True, inline="always")
def _bounded(ix, iy, iz):
    return abs(ix) < LIM and abs(iy) < LIM and abs(iz) < LIM


@njit(cache=True, inline="always")
def _block_box(i0, j0, k0, i1, j1, k1, size, grow, lo, hi):
    """Box of the centers of cells [i0..i1]x[j0..j1]x[k0..k1], grown by ``grow`` + margin."""
    m = _margin(max(abs(i0), abs(i1)), max(abs(j0), abs(j1)), max(abs(k0), abs(k1)),
                size, grow)
    lo[0] = i0 * size - grow - m
    lo[1] = j0 * size - grow - m
    lo[2] = k0 * size - grow - m
    hi[0] = (i1 + 1) * size + grow + m
    hi[1] = (j1 + 1) * size + grow + m
    hi[2] = (k1 + 1) * size + grow + m


# ---------------------------------------------------------------------------- hash table


@njit(cache=True)
def _probe(hkey, hval, lvl, ix, iy, iz):
    """Cell index of a key, or -1."""
    mask = hval.shape[0] - 1
    h = _cell_hash(lvl, ix, iy, iz, mask)
    while True:
        v = hval[h]
        if v == _EMPTY:
            return -1
        if v >= 0 and hkey[h, 1] == ix and hkey[h, 2] == iy and hkey[h, 3] == iz \
                and hkey[h, 0] == lvl:
            return v
        h = (h + 1) & mask


@njit(cache=True, inline="always")
def _allocate(st, free, nfree, hw):
    """A pool index: the last freed one (``free[:st[nfree]]``), else the next never used
    (``st[hw]``, the high-water mark). Cells and items share this rule."""
    if st[nfree] > 0:
        st[nfree] -= 1
        return free[st[nfree]]
    i = st[hw]
    st[hw] += 1
    return i


@njit(cache=True)
def _find_or_add(lvl, ix, iy, iz, G):
    """Cell of a key, creating an empty one (pool + table) when absent."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    mask = hval.shape[0] - 1
    h = _cell_hash(lvl, ix, iy, iz, mask)
    tomb = -1
    while True:
        v = hval[h]
        if v == _EMPTY:
            break
        if v == _TOMB:
            if tomb < 0:
                tomb = h
        elif hkey[h, 1] == ix and hkey[h, 2] == iy and hkey[h, 3] == iz and hkey[h, 0] == lvl:
            return v
        h = (h + 1) & mask
    if tomb >= 0:
        h = tomb
    else:
        st[ST_USED] += 1
    c = _allocate(st, cfree, ST_NFREE, ST_HW)
    hkey[h, 0] = lvl
    hkey[h, 1] = ix
    hkey[h, 2] = iy
    hkey[h, 3] = iz
    hval[h] = c
    cpos[c] = h
    ckey[c, 0] = lvl
    ckey[c, 1] = ix
    ckey[c, 2] = iy
    ckey[c, 3] = iz
    chead[c] = -1
    ccount[c] = 0
    cvdmax[c] = -np.inf
    cvdmin[c] = np.inf
    cout[c] = 0
    st[ST_LIVE] += 1
    lcells[lvl] += 1
    lext[lvl, 0] = min(lext[lvl, 0], ix)
    lext[lvl, 1] = min(lext[lvl, 1], iy)
    lext[lvl, 2] = min(lext[lvl, 2], iz)
    lext[lvl, 3] = max(lext[lvl, 3], ix)
    lext[lvl, 4] = max(lext[lvl, 4], iy)
    lext[lvl, 5] = max(lext[lvl, 5], iz)
    return c


@njit(cache=True)
def _fill_table(ckey, ccount, hw, cpos, hkey, hval):
    """Insert every live cell into a fresh (empty) table; returns the buckets used."""
    mask = hval.shape[0] - 1
    n = 0
    for c in range(hw):
        if ccount[c] <= 0:
            continue
        h = _cell_hash(ckey[c, 0], ckey[c, 1], ckey[c, 2], ckey[c, 3], mask)
        while hval[h] != _EMPTY:
            h = (h + 1) & mask
        hkey[h, 0] = ckey[c, 0]
        hkey[h, 1] = ckey[c, 1]
        hkey[h, 2] = ckey[c, 2]
        hkey[h, 3] = ckey[c, 3]
        hval[h] = c
        cpos[c] = h
        n += 1
    return n


# ---------------------------------------------------------------------------- linking
#
# Cell lists are linked lists of *items* (Bitsquid's items array): an item holds a copy of its
# object's center, radius and view distance next to the list links, so walking a cell reads
# one contiguous run of memory once the items are compacted in cell order (see _compact).
# I = (icen (M,3), irad, ivd, islot, inext, iprev, ifree); slots map to items by ``oitem``.


@njit(cache=True, inline="always")
def _mark_dirty(c, cdirty, dirty, st):
    # A cell is on the dirty list at most once: the flag is cleared only by the refresh.
    if not cdirty[c]:
        cdirty[c] = True
        dirty[st[ST_NDIRTY]] = c
        st[ST_NDIRTY] += 1


@njit(cache=True, inline="always")
def _copy_item(it, s, centers, radii, vdist, icen, irad, ivd):
    icen[it, 0] = centers[s, 0]
    icen[it, 1] = centers[s, 1]
    icen[it, 2] = centers[s, 2]
    irad[it] = radii[s]
    ivd[it] = vdist[s]


@njit(cache=True)
def _link(s, c, centers, radii, vdist, oitem, ocell, G, I):
    """Give object ``s`` a new item at the head of cell ``c``; widen cell and level bounds."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    icen, irad, ivd, islot, inext, iprev, ifree = I
    it = _allocate(st, ifree, ST_INFREE, ST_IHW)
    _copy_item(it, s, centers, radii, vdist, icen, irad, ivd)
    islot[it] = s
    oitem[s] = it
    ocell[s] = c
    h = chead[c]
    inext[it] = h
    iprev[it] = -1
    if h >= 0:
        iprev[h] = it
    chead[c] = it
    ccount[c] += 1
    v = vdist[s]
    cvdmax[c] = max(cvdmax[c], v)
    cvdmin[c] = min(cvdmin[c], v)
    lvl = ckey[c, 0]
    lcount[lvl] += 1
    lrmax[lvl] = max(lrmax[lvl], radii[s])


@njit(cache=True)
def _unlink(s, old_vd, oitem, ocell, G, I):
    """Free object ``s``'s item; an emptied cell leaves the pool and the table."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    icen, irad, ivd, islot, inext, iprev, ifree = I
    it = oitem[s]
    c = ocell[s]
    p = iprev[it]
    n = inext[it]
    if p >= 0:
        inext[p] = n
    else:
        chead[c] = n
    if n >= 0:
        iprev[n] = p
    inext[it] = -1
    iprev[it] = -1
    islot[it] = -1
    ifree[st[ST_INFREE]] = it
    st[ST_INFREE] += 1
    st[ST_RELINKS] += 1
    oitem[s] = -1
    ocell[s] = -1
    ccount[c] -= 1
    lvl = ckey[c, 0]
    lcount[lvl] -= 1
    if ccount[c] == 0:
        hval[cpos[c]] = _TOMB
        cfree[st[ST_NFREE]] = c
        st[ST_NFREE] += 1
        st[ST_LIVE] -= 1
        lcells[lvl] -= 1
    elif old_vd >= cvdmax[c] or old_vd <= cvdmin[c]:
        _mark_dirty(c, cdirty, dirty, st)  # the bound it set may now be loose


@njit(cache=True, inline="always")
def _has_room(G, I):
    st = G[10]
    hval = G[12]
    cfree = G[7]
    ifree = I[6]
    free_cells = st[ST_NFREE] + (cfree.shape[0] - st[ST_HW])
    free_items = st[ST_INFREE] + (ifree.shape[0] - st[ST_IHW])
    return free_cells > 0 and free_items > 0 and 2 * (st[ST_USED] + 1) <= hval.shape[0]


@njit(cache=True)
def _insert_batch(slots, start, centers, radii, vdist, oitem, ocell, sizes, G, I):
    """Link new objects; stops early (returning where) when a pool or the table is full."""
    for i in range(start, slots.shape[0]):
        if not _has_room(G, I):
            return i
        s = slots[i]
        lvl = _level_of(radii[s], sizes)
        size = sizes[lvl]
        c = _find_or_add(lvl, _coord(centers[s, 0], size), _coord(centers[s, 1], size),
                         _coord(centers[s, 2], size), G)
        _link(s, c, centers, radii, vdist, oitem, ocell, G, I)
    return slots.shape[0]


@njit(cache=True)
def _update_batch(slots, old_vd, start, centers, radii, vdist, oitem, ocell, sizes, G, I):
    """Relink moved objects whose cell or level changed; others refresh their item only."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    icen, irad, ivd, islot, inext, iprev, ifree = I
    for i in range(start, slots.shape[0]):
        s = slots[i]
        lvl = _level_of(radii[s], sizes)
        size = sizes[lvl]
        ix = _coord(centers[s, 0], size)
        iy = _coord(centers[s, 1], size)
        iz = _coord(centers[s, 2], size)
        c = ocell[s]
        if ckey[c, 0] == lvl and ckey[c, 1] == ix and ckey[c, 2] == iy and ckey[c, 3] == iz:
            _copy_item(oitem[s], s, centers, radii, vdist, icen, irad, ivd)
            v = vdist[s]
            ov = old_vd[i]
            if v != ov and (ov >= cvdmax[c] or ov <= cvdmin[c]):
                _mark_dirty(c, cdirty, dirty, st)
            cvdmax[c] = max(cvdmax[c], v)
            cvdmin[c] = min(cvdmin[c], v)
            lrmax[lvl] = max(lrmax[lvl], radii[s])
            continue
        if not _has_room(G, I):
            return i
        _unlink(s, old_vd[i], oitem, ocell, G, I)
        c = _find_or_add(lvl, ix, iy, iz, G)
        _link(s, c, centers, radii, vdist, oitem, ocell, G, I)
    return slots.shape[0]


@njit(cache=True)
def _remove_batch(slots, vdist, oitem, ocell, G, I):
    """Unlink objects about to be freed (the store still holds them)."""
    for i in range(slots.shape[0]):
        s = slots[i]
        _unlink(s, vdist[s], oitem, ocell, G, I)


@njit(cache=True)
def _compact(oitem, G, I, J):
    """Copy items into the fresh arrays J cell by cell, in pool order, so that each cell's
    list is one contiguous run and neighbouring cells' runs are adjacent."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    icen, irad, ivd, islot, inext, iprev, ifree = I
    jcen, jrad, jvd, jslot, jnext, jprev, jfree = J
    j = 0
    for c in range(st[ST_HW]):
        if ccount[c] <= 0:
            continue
        it = chead[c]
        chead[c] = j
        first = j
        while it >= 0:
            jcen[j, 0] = icen[it, 0]
            jcen[j, 1] = icen[it, 1]
            jcen[j, 2] = icen[it, 2]
            jrad[j] = irad[it]
            jvd[j] = ivd[it]
            s = islot[it]
            jslot[j] = s
            oitem[s] = j
            jprev[j] = j - 1 if j > first else -1
            jnext[j] = j + 1
            j += 1
            it = inext[it]
        jnext[j - 1] = -1
    st[ST_IHW] = j
    st[ST_INFREE] = 0
    st[ST_RELINKS] = 0


def _morton(off: np.ndarray) -> np.ndarray:
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
def _refresh_dirty(ivd, inext, G):
    """Recompute the view-distance bounds of the cells on the dirty list (lazily, per query)."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    for i in range(st[ST_NDIRTY]):
        c = dirty[i]
        cdirty[c] = False
        if ccount[c] <= 0:
            continue
        hi = -np.inf
        lo = np.inf
        it = chead[c]
        while it >= 0:
            hi = max(hi, ivd[it])
            lo = min(lo, ivd[it])
            it = inext[it]
        cvdmax[c] = hi
        cvdmin[c] = lo
    st[ST_NDIRTY] = 0


@njit(cache=True)
def _recompute_levels(irad, inext, G):
    """Tighten per-level max radius and extent (they only grow between rebuilds)."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    lrmax[:] = 0.0
    lext[:, :3] = LIM + 1
    lext[:, 3:] = -LIM - 1
    for c in range(st[ST_HW]):
        if ccount[c] <= 0:
            continue
        lvl = ckey[c, 0]
        for a in range(3):
            lext[lvl, a] = min(lext[lvl, a], ckey[c, 1 + a])
            lext[lvl, 3 + a] = max(lext[lvl, 3 + a], ckey[c, 1 + a])
        it = chead[c]
        while it >= 0:
            lrmax[lvl] = max(lrmax[lvl], irad[it])
            it = inext[it]


# ---------------------------------------------------------------------------- cell ranges


@njit(cache=True)
def _polytope_bbox(planes, grow, elo, ehi, out_lo, out_hi):
    """Bounding box of {x in [elo, ehi] : n.x + d >= -grow for every plane}; False if empty.

    Vertex enumeration over triples of the planes and the six box faces: the region is
    bounded by the box, so its bbox is the bbox of its vertices. Tolerances only widen it.
    """
    k = planes.shape[0]
    m = k + 6
    P = np.zeros((m, 4))
    for i in range(k):
        P[i, 0] = planes[i, 0]
        P[i, 1] = planes[i, 1]
        P[i, 2] = planes[i, 2]
        P[i, 3] = planes[i, 3] + grow
    for a in range(3):
        P[k + 2 * a, a] = 1.0
        P[k + 2 * a, 3] = -elo[a]
        P[k + 2 * a + 1, a] = -1.0
        P[k + 2 * a + 1, 3] = ehi[a]
    scale = 1.0
    for i in range(m):
        scale = max(scale, abs(P[i, 3]))
    tol = 1e-9 * scale
    found = False
    for a in range(3):
        out_lo[a] = np.inf
        out_hi[a] = -np.inf
    for i in range(m):
        for j in range(i + 1, m):
            # n_i x n_j, reused for every third plane
            cx = P[i, 1] * P[j, 2] - P[i, 2] * P[j, 1]
            cy = P[i, 2] * P[j, 0] - P[i, 0] * P[j, 2]
            cz = P[i, 0] * P[j, 1] - P[i, 1] * P[j, 0]
            for q in range(j + 1, m):
                det = P[q, 0] * cx + P[q, 1] * cy + P[q, 2] * cz
                ni = math.sqrt(P[i, 0] ** 2 + P[i, 1] ** 2 + P[i, 2] ** 2)
                nj = math.sqrt(P[j, 0] ** 2 + P[j, 1] ** 2 + P[j, 2] ** 2)
                nq = math.sqrt(P[q, 0] ** 2 + P[q, 1] ** 2 + P[q, 2] ** 2)
                if abs(det) <= 1e-12 * ni * nj * nq:
                    continue
                # Solve n_i.x = -d_i, n_j.x = -d_j, n_q.x = -d_q by Cramer's rule.
                b0 = -P[i, 3]
                b1 = -P[j, 3]
                b2 = -P[q, 3]
                # x = (b0 (nj x nq) + b1 (nq x ni) + b2 (ni x nj)) / det
                jqx = P[j, 1] * P[q, 2] - P[j, 2] * P[q, 1]
                jqy = P[j, 2] * P[q, 0] - P[j, 0] * P[q, 2]
                jqz = P[j, 0] * P[q, 1] - P[j, 1] * P[q, 0]
                qix = P[q, 1] * P[i, 2] - P[q, 2] * P[i, 1]
                qiy = P[q, 2] * P[i, 0] - P[q, 0] * P[i, 2]
                qiz = P[q, 0] * P[i, 1] - P[q, 1] * P[i, 0]
                x = (b0 * jqx + b1 * qix + b2 * cx) / det
                y = (b0 * jqy + b1 * qiy + b2 * cy) / det
                z = (b0 * jqz + b1 * qiz + b2 * cz) / det
                ok = True
                for p in range(m):
                    if P[p, 0] * x + P[p, 1] * y + P[p, 2] * z + P[p, 3] < -tol:
                        ok = False
                        break
                if ok:
                    found = True
                    out_lo[0] = min(out_lo[0], x)
                    out_lo[1] = min(out_lo[1], y)
                    out_lo[2] = min(out_lo[2], z)
                    out_hi[0] = max(out_hi[0], x)
                    out_hi[1] = max(out_hi[1], y)
                    out_hi[2] = max(out_hi[2], z)
    return found


@njit(cache=True)
def _frustum_range(planes, lvl, size, grow, lext, rng):
    """Cell range of a level that can hold a frustum hit, clipped to the level's extent.

    Returns False when no cell can. Levels reaching the clamped coordinates keep their full
    extent (those cells are unbounded).
    """
    for a in range(6):
        rng[a] = lext[lvl, a]
    if not (_bounded(lext[lvl, 0], lext[lvl, 1], lext[lvl, 2])
            and _bounded(lext[lvl, 3], lext[lvl, 4], lext[lvl, 5])):
        return True
    elo = np.empty(3)
    ehi = np.empty(3)
    _block_box(lext[lvl, 0], lext[lvl, 1], lext[lvl, 2], lext[lvl, 3], lext[lvl, 4],
               lext[lvl, 5], size, 0.0, elo, ehi)
    blo = np.empty(3)
    bhi = np.empty(3)
    if not _polytope_bbox(planes, grow, elo, ehi, blo, bhi):
        return True  # nothing found: fall back to the whole extent (blocks prune it)
    for a in range(3):
        span = bhi[a] - blo[a] + abs(blo[a]) + abs(bhi[a])
        rng[a] = max(rng[a], _coord(blo[a] - 1e-7 * span, size) - 1)
        rng[3 + a] = min(rng[3 + a], _coord(bhi[a] + 1e-7 * span, size) + 1)
        if rng[a] > rng[3 + a]:
            return False
    return True


@njit(cache=True)
def _box_range(lvl, size, grow, lo, hi, lext, rng):
    """Cell range of a level whose cells, grown by ``grow``, can touch the box [lo, hi]."""
    for a in range(3):
        span = abs(lo[a]) + abs(hi[a]) + grow
        rng[a] = max(lext[lvl, a], _coord(lo[a] - grow - 1e-9 * span, size) - 1)
        rng[3 + a] = min(lext[lvl, 3 + a], _coord(hi[a] + grow + 1e-9 * span, size) + 1)
        if rng[a] > rng[3 + a]:
            return False
    return True


@njit(cache=True, inline="always")
def _range_cells(rng):
    # In floats: clamped ranges can exceed int64.
    return (float(rng[3] - rng[0] + 1) * float(rng[4] - rng[1] + 1)
            * float(rng[5] - rng[2] + 1))


@njit(cache=True, inline="always")
def _key_in_range(ckey, c, r):
    """Whether cell ``c``'s coordinates lie in the range r = [i0, j0, k0, i1, j1, k1]."""
    return (r[0] <= ckey[c, 1] <= r[3] and r[1] <= ckey[c, 2] <= r[4]
            and r[2] <= ckey[c, 3] <= r[5])


@njit(cache=True)
def _cells_in_ranges(ranges, active, hw, ckey, ccount, hkey, hval, lcells, st):
    """Live cells inside each active level's coordinate range.

    Per level, probes every coordinate of the range when that is cheaper than scanning the
    pool, else the level joins one scan of the pool.
    """
    nlev = ranges.shape[0]
    total = 0
    for lvl in range(nlev):
        if active[lvl]:
            total += lcells[lvl]
    out = np.empty(total, dtype=np.int64)
    k = 0
    scan = np.zeros(nlev, dtype=np.bool_)
    any_scan = False
    for lvl in range(nlev):
        if not active[lvl]:
            continue
        r = ranges[lvl]
        if _range_cells(r) > 2.0 * st[ST_LIVE]:
            scan[lvl] = True
            any_scan = True
            continue
        for ix in range(r[0], r[3] + 1):
            for iy in range(r[1], r[4] + 1):
                for iz in range(r[2], r[5] + 1):
                    c = _probe(hkey, hval, lvl, ix, iy, iz)
                    if c >= 0:
                        out[k] = c
                        k += 1
    if any_scan:
        k = _scan_pool(ccount, ckey, scan, ranges, hw, out, k)
    return out[:k]


@njit(cache=True, inline="always")
def _scan_pool(ccount, ckey, scan, ranges, hw, out, k):
    """Append to ``out`` (from ``k``) the live cells of the ``scan`` levels that lie in their
    level's range, by one pass over the cell pool; returns the new count. For levels whose
    range has more coordinates than the grid has live cells, this is cheaper than probing."""
    for c in range(hw):
        if ccount[c] <= 0:
            continue
        lvl = ckey[c, 0]
        if scan[lvl] and _key_in_range(ckey, c, ranges[lvl]):
            out[k] = c
            k += 1
    return k


# ---------------------------------------------------------------------------- frustum


@njit(cache=True, inline="always")
def _cull_cell(c, res, size, grow, planes, eye, use_vd, vp, zd, zo, zw, zh,
               centers, radii, vdist, nxt, islot, ckey, chead, cvdmax, cvdmin, cout, out, k, cnt,
               scr):
    """Frustum-test one live cell (``res``: its class if known, else -1); emit its objects.

    ``cnt`` accumulates [working set, cells visited, occluded cells, occluded objects];
    ``scr`` is (4, 3) scratch for boxes (no allocation per cell).
    """
    cnt[1] += 1
    ix = ckey[c, 1]
    iy = ckey[c, 2]
    iz = ckey[c, 3]
    lo = scr[0]
    hi = scr[1]
    _block_box(ix, iy, iz, ix, iy, iz, size, grow, lo, hi)
    bounded = _bounded(ix, iy, iz)
    if not bounded:
        res = PARTIAL
    elif res < 0:
        res = box_vs_frustum(planes, lo, hi)
    if res == OUTSIDE:
        cout[c] = NODE_REJECT_FRUSTUM
        return k
    vd_all = True  # every object of the cell is within its view distance
    if use_vd:
        vd_all = False
        if bounded:
            clo = scr[2]
            chi = scr[3]
            _block_box(ix, iy, iz, ix, iy, iz, size, 0.0, clo, chi)
            near = box_point_dist(clo, chi, eye[0], eye[1], eye[2])
            if near > cvdmax[c] * (1.0 + 1e-9):
                cout[c] = NODE_REJECT_VIEWDIST
                return k
            fx = max(abs(clo[0] - eye[0]), abs(chi[0] - eye[0]))
            fy = max(abs(clo[1] - eye[1]), abs(chi[1] - eye[1]))
            fz = max(abs(clo[2] - eye[2]), abs(chi[2] - eye[2]))
            far = math.sqrt(fx * fx + fy * fy + fz * fz)
            vd_all = far * (1.0 + 1e-9) < cvdmin[c]
    occ = zw.shape[0] > 0
    if occ and bounded and box_occluded(lo, hi, vp, zd, zo, zw, zh):
        cout[c] = NODE_REJECT_OCCLUSION
        cnt[2] += 1
        return k
    cout[c] = NODE_INSIDE if res == INSIDE else NODE_PARTIAL
    s = chead[c]
    while s >= 0:
        cnt[0] += 1
        cx = centers[s, 0]
        cy = centers[s, 1]
        cz = centers[s, 2]
        r = radii[s]
        ok = vd_all or within_view_distance(eye[0], eye[1], eye[2], cx, cy, cz, vdist[s])
        if ok and res != INSIDE:
            ok = sphere_in_frustum(planes, cx, cy, cz, r)
        if ok and occ and sphere_occluded(cx, cy, cz, r, vp, zd, zo, zw, zh):
            cnt[3] += 1
            ok = False
        if ok:
            out[k] = islot[s]
            k += 1
        s = nxt[s]
    return k


@njit(cache=True)
def _frustum(planes, eye, use_vd, vp, zd, zo, zw, zh, n_objects,
             centers, radii, vdist, nxt, islot, sizes, G):
    """Frustum (+ view distance, + occlusion) query over every level; one call per frame."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    hw = st[ST_HW]
    cout[:hw] = 0
    out = np.empty(n_objects, dtype=np.int64)
    k = 0
    cnt = np.zeros(4, dtype=np.int64)
    nlev = sizes.shape[0]
    ranges = np.zeros((nlev, 6), dtype=np.int64)
    scan = np.zeros(nlev, dtype=np.bool_)
    any_scan = False
    # Explicit stack of coordinate blocks: [i0, j0, k0, i1, j1, k1, known class or -1].
    stack = np.empty((512, 7), dtype=np.int64)
    scr = np.empty((4, 3))
    lo = np.empty(3)
    hi = np.empty(3)
    for lvl in range(nlev):
        if lcount[lvl] == 0:
            continue
        size = sizes[lvl]
        grow = lrmax[lvl]
        rng = ranges[lvl]
        if not _frustum_range(planes, lvl, size, grow, lext, rng):
            continue
        if _range_cells(rng) > 2.0 * st[ST_LIVE]:
            scan[lvl] = True
            any_scan = True
            continue
        # Walk the range as an implicit octree of blocks: outside blocks are skipped without
        # a probe, inside blocks accept their cells without a plane test.
        for a in range(6):
            stack[0, a] = rng[a]
        stack[0, 6] = -1
        sp = 1
        while sp > 0:
            sp -= 1
            i0 = stack[sp, 0]
            j0 = stack[sp, 1]
            k0 = stack[sp, 2]
            i1 = stack[sp, 3]
            j1 = stack[sp, 4]
            k1 = stack[sp, 5]
            res = stack[sp, 6]
            if res != INSIDE:
                if _bounded(i0, j0, k0) and _bounded(i1, j1, k1):
                    _block_box(i0, j0, k0, i1, j1, k1, size, grow, lo, hi)
                    res = box_vs_frustum(planes, lo, hi)
                    if res == OUTSIDE:
                        continue
                else:
                    res = PARTIAL
            di = i1 - i0
            dj = j1 - j0
            dk = k1 - k0
            if res == INSIDE or (di == 0 and dj == 0 and dk == 0) or sp > 500:
                single = di == 0 and dj == 0 and dk == 0
                for ix in range(i0, i1 + 1):
                    for iy in range(j0, j1 + 1):
                        for iz in range(k0, k1 + 1):
                            c = _probe(hkey, hval, lvl, ix, iy, iz)
                            if c >= 0:
                                hint = res if (res == INSIDE or single) else -1
                                k = _cull_cell(c, hint, size, grow, planes, eye, use_vd,
                                               vp, zd, zo, zw, zh, centers, radii, vdist,
                                               nxt, islot, ckey, chead, cvdmax, cvdmin, cout, out,
                                               k, cnt, scr)
                continue
            # Split the longest side in two.
            for a in range(7):
                stack[sp + 1, a] = stack[sp, a]
            stack[sp, 6] = res
            stack[sp + 1, 6] = res
            if di >= dj and di >= dk:
                mid = i0 + di // 2
                stack[sp, 3] = mid
                stack[sp + 1, 0] = mid + 1
            elif dj >= dk:
                mid = j0 + dj // 2
                stack[sp, 4] = mid
                stack[sp + 1, 1] = mid + 1
            else:
                mid = k0 + dk // 2
                stack[sp, 5] = mid
                stack[sp + 1, 2] = mid + 1
            sp += 2
    if any_scan:
        cells = np.empty(hw, dtype=np.int64)
        for j in range(_scan_pool(ccount, ckey, scan, ranges, hw, cells, 0)):
            c = cells[j]
            lvl = ckey[c, 0]
            k = _cull_cell(c, -1, sizes[lvl], lrmax[lvl], planes, eye, use_vd,
                           vp, zd, zo, zw, zh, centers, radii, vdist, nxt, islot, ckey, chead,
                           cvdmax, cvdmin, cout, out, k, cnt, scr)
    return out[:k], cnt


# ---------------------------------------------------------------------------- box, sphere


@njit(cache=True)
def _cells_near_box(lo, hi, sizes, G):
    """Live cells of every level whose cells, grown by the level's max radius, can touch
    the box [lo, hi] (the candidates of box and sphere queries)."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    nlev = sizes.shape[0]
    ranges = np.zeros((nlev, 6), dtype=np.int64)
    active = np.zeros(nlev, dtype=np.bool_)
    for lvl in range(nlev):
        if lcount[lvl] > 0:
            active[lvl] = _box_range(lvl, sizes[lvl], lrmax[lvl], lo, hi, lext, ranges[lvl])
    return _cells_in_ranges(ranges, active, st[ST_HW], ckey, ccount, hkey, hval, lcells, st)


@njit(cache=True)
def _box(lo, hi, n_objects, centers, radii, nxt, islot, sizes, G):
    """Objects whose sphere's bounding box overlaps [lo, hi]."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    cells = _cells_near_box(lo, hi, sizes, G)
    out = np.empty(n_objects, dtype=np.int64)
    k = 0
    for c in cells:
        s = chead[c]
        while s >= 0:
            if sphere_overlaps_box(centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                                   lo, hi):
                out[k] = islot[s]
                k += 1
            s = nxt[s]
    return out[:k]


@njit(cache=True)
def _sphere(q, qr, n_objects, centers, radii, nxt, islot, sizes, G):
    """Objects with |c - q| <= r + qr."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    lo = np.empty(3)
    hi = np.empty(3)
    for a in range(3):
        lo[a] = q[a] - qr
        hi[a] = q[a] + qr
    cells = _cells_near_box(lo, hi, sizes, G)
    out = np.empty(n_objects, dtype=np.int64)
    k = 0
    for c in cells:
        lvl = ckey[c, 0]
        ix = ckey[c, 1]
        iy = ckey[c, 2]
        iz = ckey[c, 3]
        if _bounded(ix, iy, iz):
            _block_box(ix, iy, iz, ix, iy, iz, sizes[lvl], lrmax[lvl], lo, hi)
            if box_point_dist(lo, hi, q[0], q[1], q[2]) > qr * (1.0 + 1e-9):
                continue
        s = chead[c]
        while s >= 0:
            if spheres_touch(centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                             q[0], q[1], q[2], qr):
                out[k] = islot[s]
                k += 1
            s = nxt[s]
    return out[:k]


# ---------------------------------------------------------------------------- ray


@njit(cache=True)
def _ray_cell(c, o, d, inv, size, grow, centers, radii, nxt, islot, ckey, chead, out, ts,
              k):
    """Test one cell's grown box, then its objects, against the ray."""
    ix = ckey[c, 1]
    iy = ckey[c, 2]
    iz = ckey[c, 3]
    if _bounded(ix, iy, iz):
        lo = np.empty(3)
        hi = np.empty(3)
        _block_box(ix, iy, iz, ix, iy, iz, size, grow, lo, hi)
        if not ray_box_hits(o[0], o[1], o[2], inv[0], inv[1], inv[2], lo, hi):
            return k
    s = chead[c]
    while s >= 0:
        t = ray_sphere_entry(o[0], o[1], o[2], d[0], d[1], d[2],
                             centers[s, 0], centers[s, 1], centers[s, 2], radii[s])
        if t >= 0.0:
            out[k] = islot[s]
            ts[k] = t
            k += 1
        s = nxt[s]
    return k


@njit(cache=True)
def _clip_ray(o, d, lo, hi):
    """Parameter interval [t0, t1] (t0 >= 0) of the ray inside the box, or t0 > t1."""
    t0 = 0.0
    t1 = np.inf
    for a in range(3):
        if d[a] == 0.0:
            if o[a] < lo[a] or o[a] > hi[a]:
                return 1.0, 0.0
            continue
        ta = (lo[a] - o[a]) / d[a]
        tb = (hi[a] - o[a]) / d[a]
        if ta > tb:
            ta, tb = tb, ta
        t0 = max(t0, ta)
        t1 = min(t1, tb)
    return t0, t1


@njit(cache=True)
def _ray(o, d, n_objects, centers, radii, nxt, islot, sizes, G, cstamp, stamp):
    """Spheres hit by the ray: per level, a grid walk (DDA) along the ray visiting the cells
    within the level's reach of each cell crossed (or a scan when that is cheaper)."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    inv = np.empty(3)
    for a in range(3):
        inv[a] = 1.0 / d[a] if d[a] != 0.0 else np.inf
    out = np.empty(n_objects, dtype=np.int64)
    ts = np.empty(n_objects, dtype=np.float64)
    k = 0
    lo = np.empty(3)
    hi = np.empty(3)
    cur = np.empty(3, dtype=np.int64)
    end = np.empty(3, dtype=np.int64)
    step = np.empty(3, dtype=np.int64)
    tmax = np.empty(3)
    tdel = np.empty(3)
    for lvl in range(sizes.shape[0]):
        if lcount[lvl] == 0:
            continue
        size = sizes[lvl]
        grow = lrmax[lvl]
        e = lext[lvl]
        reach = np.int64(grow / size) + 1  # neighbourhood holding every possible hit
        walkable = _bounded(e[0], e[1], e[2]) and _bounded(e[3], e[4], e[5]) and reach < 8
        t0 = 0.0
        t1 = -1.0
        if walkable:
            _block_box(e[0], e[1], e[2], e[3], e[4], e[5], size, grow, lo, hi)
            t0, t1 = _clip_ray(o, d, lo, hi)
            if t0 > t1:
                continue
            steps = 1.0
            for a in range(3):
                cur[a] = _coord(o[a] + t0 * d[a], size)
                end[a] = _coord(o[a] + t1 * d[a], size)
                steps += abs(end[a] - cur[a])
            walkable = steps * (2 * reach + 1) ** 3 <= 2.0 * lcells[lvl] + 64.0
        if not walkable:
            for c in range(st[ST_HW]):
                if ccount[c] > 0 and ckey[c, 0] == lvl:
                    k = _ray_cell(c, o, d, inv, size, grow, centers, radii, nxt, islot, ckey,
                                  chead, out, ts, k)
            continue
        for a in range(3):
            if d[a] > 0.0:
                step[a] = 1
                tmax[a] = ((cur[a] + 1) * size - o[a]) / d[a]
                tdel[a] = size / d[a]
            elif d[a] < 0.0:
                step[a] = -1
                tmax[a] = (cur[a] * size - o[a]) / d[a]
                tdel[a] = -size / d[a]
            else:
                step[a] = 0
                tmax[a] = np.inf
                tdel[a] = np.inf
        budget = 3 + abs(end[0] - cur[0]) + abs(end[1] - cur[1]) + abs(end[2] - cur[2])
        while True:
            for ix in range(cur[0] - reach, cur[0] + reach + 1):
                for iy in range(cur[1] - reach, cur[1] + reach + 1):
                    for iz in range(cur[2] - reach, cur[2] + reach + 1):
                        c = _probe(hkey, hval, lvl, ix, iy, iz)
                        if c >= 0 and cstamp[c] != stamp:
                            cstamp[c] = stamp  # a cell near several crossed cells: once
                            k = _ray_cell(c, o, d, inv, size, grow, centers, radii, nxt,
                                          islot, ckey, chead, out, ts, k)
            budget -= 1
            if budget < 0 or (cur[0] == end[0] and cur[1] == end[1] and cur[2] == end[2]):
                break
            a = 0
            if tmax[1] < tmax[a]:
                a = 1
            if tmax[2] < tmax[a]:
                a = 2
            if tmax[a] > t1 + 1e-9 * (abs(t1) + size):
                break
            cur[a] += step[a]
            tmax[a] += tdel[a]
    return out[:k], ts[:k]


# ---------------------------------------------------------------------------- validate


@njit(cache=True)
def _check(alive, centers, radii, vdist, oitem, ocell, sizes, G, I):
    """Every invariant of the grid; returns (error code, offending slot or cell) or (0, -1)."""
    (ckey, chead, ccount, cvdmax, cvdmin, cdirty, cpos, cfree, dirty, cout, st,
     hkey, hval, lcount, lcells, lrmax, lext) = G
    icen, irad, ivd, islot, inext, iprev, ifree = I
    hw = st[ST_HW]
    ihw = st[ST_IHW]
    n = alive.shape[0]
    # Objects: one item holding exact copies, in the cell of their center at their level.
    for s in range(n):
        if not alive[s]:
            continue
        it = oitem[s]
        if it < 0 or it >= ihw or islot[it] != s:
            return 15, s
        if icen[it, 0] != centers[s, 0] or icen[it, 1] != centers[s, 1] \
                or icen[it, 2] != centers[s, 2] or irad[it] != radii[s] or ivd[it] != vdist[s]:
            return 15, s
        c = ocell[s]
        if c < 0 or c >= hw or ccount[c] <= 0:
            return 1, s
        lvl = _level_of(radii[s], sizes)
        size = sizes[lvl]
        if ckey[c, 0] != lvl or ckey[c, 1] != _coord(centers[s, 0], size) \
                or ckey[c, 2] != _coord(centers[s, 1], size) \
                or ckey[c, 3] != _coord(centers[s, 2], size):
            return 2, s
        if radii[s] > lrmax[lvl]:
            return 11, s
    # Cells: lists, counts, bounds, table.
    seen = np.zeros(ihw, dtype=np.bool_)
    live = 0
    nitems = 0
    nlev = sizes.shape[0]
    lc = np.zeros(nlev, dtype=np.int64)
    lcl = np.zeros(nlev, dtype=np.int64)
    mask = hval.shape[0] - 1
    for c in range(hw):
        if ccount[c] <= 0:
            continue
        live += 1
        lvl = ckey[c, 0]
        lcl[lvl] += 1
        m = 0
        p = -1
        it = chead[c]
        while it >= 0:
            if it >= ihw or iprev[it] != p or seen[it]:
                return 3, c
            s = islot[it]
            if s < 0 or s >= n or not alive[s] or ocell[s] != c or oitem[s] != it:
                return 5, c
            if ivd[it] > cvdmax[c] or ivd[it] < cvdmin[c]:
                return 13, c
            seen[it] = True
            m += 1
            p = it
            it = inext[it]
        if m != ccount[c]:
            return 4, c
        nitems += m
        lc[lvl] += m
        for a in range(3):
            if not (lext[lvl, a] <= ckey[c, 1 + a] <= lext[lvl, 3 + a]):
                return 12, c
        h = cpos[c]
        if h < 0 or h > mask or hval[h] != c:
            return 7, c
        if _probe(hkey, hval, lvl, ckey[c, 1], ckey[c, 2], ckey[c, 3]) != c:
            return 7, c
    nalive = 0
    for s in range(n):
        if alive[s]:
            nalive += 1
    if nitems != nalive:
        return 6, -1
    if live != st[ST_LIVE]:
        return 9, -1
    for lvl in range(nlev):
        if lc[lvl] != lcount[lvl] or lcl[lvl] != lcells[lvl]:
            return 10, lvl
    used = 0
    for h in range(hval.shape[0]):
        v = hval[h]
        if v != _EMPTY:
            used += 1
        if v >= 0:
            if v >= hw or ccount[v] <= 0 or cpos[v] != h:
                return 8, v
            for a in range(4):
                if hkey[h, a] != ckey[v, a]:
                    return 8, v
    if used != st[ST_USED] or 2 * used > hval.shape[0]:
        return 9, -1
    # Free cells and items: exactly the unused ones below the high-water marks.
    isfree = np.zeros(hw, dtype=np.bool_)
    for i in range(st[ST_NFREE]):
        c = cfree[i]
        if c < 0 or c >= hw or ccount[c] > 0 or isfree[c]:
            return 9, c
        isfree[c] = True
    if st[ST_NFREE] + live != hw:
        return 9, -1
    for i in range(st[ST_INFREE]):
        it = ifree[i]
        if it < 0 or it >= ihw or seen[it]:
            return 16, it
        seen[it] = True
    if st[ST_INFREE] + nitems != ihw:
        return 16, -1
    ondirty = np.zeros(hw, dtype=np.bool_)
    for i in range(st[ST_NDIRTY]):
        ondirty[dirty[i]] = True
    for c in range(hw):
        if ondirty[c] != cdirty[c]:
            return 14, c
    return 0, -1


# ---------------------------------------------------------------------------- cell size


def choose_cell_size(centers: np.ndarray, radii: np.ndarray) -> float:
    """Default finest cell side for a batch: ~TARGET_PER_CELL objects per cell, >= median diameter.

    The density is taken inside the 1st-99th percentile box of the centers (outliers do not
    dilute it), each side at least one median diameter (flat or linear data keep a thickness).
    """
    n = centers.shape[0]
    if n == 0:
        return 1.0
    step = max(1, n // 100_000)  # a sample is plenty for percentiles and a median
    c = centers[::step]
    diam = float(np.median(radii[::step])) * 2.0
    lo = np.percentile(c, 1.0, axis=0)
    hi = np.percentile(c, 99.0, axis=0)
    side = np.maximum(hi - lo, diam)
    inside = n * 0.98 if n >= 100 else n
    if float(side.min()) > 0.0:
        dense = float(np.cbrt(np.prod(side) * TARGET_PER_CELL / inside))
    else:
        dense = float(side.max())  # all centers on a point (and zero radii): one cell
    size = max(dense, diam)
    if not np.isfinite(size) or size <= 0.0:
        size = 1.0
    return size


# ---------------------------------------------------------------------------- the index


class HashedGrid(SpatialIndex):
    """Hierarchical hashed grid: each object in the cell of its center at its size's level."""

    name = "grid"

    def __init__(self, cell_size: float | None = None, **kwargs: Any) -> None:
        if kwargs.get("leafy") not in (None, False) or kwargs.get("split_threshold") is not None:
            raise ValueError("grid has no tree heuristic: leafy and split_threshold do not apply")
        unknown = set(kwargs) - {"leafy", "split_threshold"}
        if unknown:
            raise ValueError(f"grid: unknown arguments {sorted(unknown)}")
        if cell_size is not None:
            cell_size = float(cell_size)
            if not np.isfinite(cell_size) or cell_size <= 0.0:
                raise ValueError(f"grid: cell_size must be finite and > 0, got {cell_size}")
        super().__init__()
        self._cell_size = cell_size
        self._auto = cell_size is None
        self._chosen_at = 0  # object count when the automatic cell size was last chosen
        self._stamp = 0
        self._empty_structure(cell_size or 1.0)

    # ------------------------------------------------------------------ public extras

    @property
    def cell_size(self) -> float | None:
        """Side of the finest level's cells (None until chosen at the first insert)."""
        return self._cell_size

    def describe(self) -> str:
        """Index name and cell size."""
        cs = "auto" if self._cell_size is None else f"{self._cell_size:.3g}"
        return f"grid (cell {cs}{', auto' if self._auto and self._cell_size else ''})"

    def stats(self) -> dict[str, Any]:
        """Cells, levels in use, objects per level, hash-table load."""
        used = np.flatnonzero(self._lcount)
        return {
            "objects": self._count,
            "nodes": int(self._st[ST_LIVE]),
            "max_depth": int(used.max()) if used.size else 0,
            "cell_size": self._cell_size,
            "levels": {int(lv): int(self._lcount[lv]) for lv in used},
            "cells_per_level": {int(lv): int(self._lcells[lv]) for lv in used},
            "table_size": int(self._hval.shape[0]),
            "table_used": int(self._st[ST_USED]),
            "mean_per_cell": self._count / max(int(self._st[ST_LIVE]), 1),
        }

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Occupied cells (without the radius margin), depth = level; pool order."""
        hw = int(self._st[ST_HW])
        live = np.flatnonzero(self._ccount[:hw] > 0)
        key = self._ckey[live]
        size = self._sizes[key[:, 0]][:, None]
        lo = key[:, 1:].astype(np.float64) * size
        return lo, lo + size, key[:, 0].copy()

    def node_outcomes(self) -> np.ndarray:
        """NODE_* outcome of each cell of :meth:`node_boxes` in the last frustum query."""
        hw = int(self._st[ST_HW])
        return self._cout[:hw][self._ccount[:hw] > 0].copy()

    def level_of(self, radii: np.ndarray) -> np.ndarray:
        """Level an object of each radius is stored at (for tests and overlays)."""
        r = np.asarray(radii, dtype=np.float64)
        lv = np.searchsorted(self._sizes, 2.0 * r, side="left")
        return np.minimum(lv, NLEVELS - 1)

    # ------------------------------------------------------------------ hooks

    def _on_insert(self, slots: np.ndarray) -> None:
        if self._cell_size is None:
            self._cell_size = choose_cell_size(self._centers[slots], self._radii[slots])
            self._sizes = self._level_sizes(self._cell_size)
            self._chosen_at = self._count
        elif self._auto and self._count >= max(4 * self._chosen_at, 1000):
            # Grown a lot since the size was chosen (e.g. a scene inserted in chunks): the
            # first chunk's density may be far off. Re-choose, and rebuild if it moved much.
            self._chosen_at = self._count
            alive = np.flatnonzero(self._alive)
            size = choose_cell_size(self._centers[alive], self._radii[alive])
            if not 0.67 < size / self._cell_size < 1.5:
                self._rebuild(size)
                return
        self._link_new(slots)
        self._maybe_compact()

    def _link_new(self, slots: np.ndarray) -> None:
        start = 0
        while start < slots.shape[0]:
            self._reserve(slots.shape[0] - start)
            start = _insert_batch(slots, start, self._centers, self._radii, self._vdist,
                                  self._oitem, self._ocell, self._sizes, self._grid(),
                                  self._items)

    def _on_update(self, slots, old_centers, old_radii, old_vdist) -> None:
        old_vd = np.ascontiguousarray(old_vdist, dtype=np.float64)
        start = 0
        while start < slots.shape[0]:
            start = _update_batch(slots, old_vd, start, self._centers, self._radii,
                                  self._vdist, self._oitem, self._ocell, self._sizes,
                                  self._grid(), self._items)
            if start < slots.shape[0]:
                self._reserve(slots.shape[0] - start)
        self._maybe_compact()

    def _on_remove(self, slots: np.ndarray) -> None:
        _remove_batch(slots, self._vdist, self._oitem, self._ocell, self._grid(), self._items)

    def _grow(self, new_capacity: int) -> None:
        old = self._oitem.shape[0]
        for name in ("_oitem", "_ocell"):
            a = np.full(new_capacity, -1, dtype=np.int64)
            a[:old] = getattr(self, name)
            setattr(self, name, a)

    def _validate(self) -> None:
        code, where = _check(self._alive, self._centers, self._radii, self._vdist,
                             self._oitem, self._ocell, self._sizes, self._grid(), self._items)
        if code:
            raise AssertionError(f"grid: {_ERRORS[int(code)]} (at {int(where)})")

    # ------------------------------------------------------------------ queries

    def _query_frustum(self, planes, eye, use_vd, occlusion):
        if use_vd and self._st[ST_NDIRTY]:
            _refresh_dirty(self._items[2], self._items[4], self._grid())
        vp, zd, zo, zw, zh = occlusion_arrays(occlusion)
        slots, cnt = _frustum(planes, eye, use_vd, vp, zd, zo, zw, zh, self._count,
                              *self._item_walk(), self._sizes, self._grid())
        return QueryResult(visible=slots, working_set=int(cnt[0]), nodes_visited=int(cnt[1]),
                           occluded_nodes=int(cnt[2]), occluded_objects=int(cnt[3]))

    def _query_box(self, lo, hi):
        icen, irad, _, inext, islot = self._item_walk()
        return _box(lo, hi, self._count, icen, irad, inext, islot, self._sizes, self._grid())

    def _query_sphere(self, center, radius):
        icen, irad, _, inext, islot = self._item_walk()
        return _sphere(center, radius, self._count, icen, irad, inext, islot, self._sizes,
                       self._grid())

    def _query_ray(self, origin, direction):
        self._stamp += 1
        icen, irad, _, inext, islot = self._item_walk()
        return _ray(origin, direction, self._count, icen, irad, inext, islot, self._sizes,
                    self._grid(), self._cstamp, self._stamp)

    # ------------------------------------------------------------------ internals

    def _empty_structure(self, cell_size: float) -> None:
        """No cells, no items: every live object unlinked (used by __init__ and _rebuild)."""
        self._sizes = self._level_sizes(cell_size)
        cap = self.capacity
        self._oitem = np.full(cap, -1, dtype=np.int64)
        self._ocell = np.full(cap, -1, dtype=np.int64)
        self._items = self._new_items(cap)
        self._new_cells(256)
        self._new_table(256)
        self._lcount = np.zeros(NLEVELS, dtype=np.int64)
        self._lcells = np.zeros(NLEVELS, dtype=np.int64)
        self._lrmax = np.zeros(NLEVELS, dtype=np.float64)
        self._lext = np.empty((NLEVELS, 6), dtype=np.int64)
        self._lext[:, :3] = LIM + 1
        self._lext[:, 3:] = -LIM - 1
        self._compacted_hw = 0  # item high-water mark right after the last compaction

    def _rebuild(self, cell_size: float) -> None:
        """Relink every live object under a new finest cell size (one compiled pass)."""
        self._cell_size = cell_size
        self._empty_structure(cell_size)
        self._link_new(np.flatnonzero(self._alive))
        self._compact()

    @staticmethod
    def _level_sizes(cell_size: float) -> np.ndarray:
        # Powers of two keep every level's side exact in floating point.
        return cell_size * np.ldexp(1.0, np.arange(NLEVELS))

    def _grid(self) -> tuple:
        return (self._ckey, self._chead, self._ccount, self._cvdmax, self._cvdmin,
                self._cdirty, self._cpos, self._cfree, self._dirty, self._cout, self._st,
                self._hkey, self._hval, self._lcount, self._lcells, self._lrmax, self._lext)

    def _new_cells(self, cap: int) -> None:
        self._ckey = np.zeros((cap, 4), dtype=np.int64)
        self._chead = np.full(cap, -1, dtype=np.int64)
        self._ccount = np.zeros(cap, dtype=np.int64)
        self._cvdmax = np.full(cap, -np.inf)
        self._cvdmin = np.full(cap, np.inf)
        self._cdirty = np.zeros(cap, dtype=np.bool_)
        self._cpos = np.full(cap, -1, dtype=np.int64)
        self._cfree = np.zeros(cap, dtype=np.int64)
        self._dirty = np.zeros(cap, dtype=np.int64)
        self._cout = np.zeros(cap, dtype=np.int8)
        self._cstamp = np.zeros(cap, dtype=np.int64)
        self._st = np.zeros(ST_SIZE, dtype=np.int64)

    def _grow_cells(self, cap: int) -> None:
        old = self._ckey.shape[0]

        def grown(a: np.ndarray, fill: Any) -> np.ndarray:
            out = np.full((cap,) + a.shape[1:], fill, dtype=a.dtype)
            out[:old] = a
            return out

        self._ckey = grown(self._ckey, 0)
        self._chead = grown(self._chead, -1)
        self._ccount = grown(self._ccount, 0)
        self._cvdmax = grown(self._cvdmax, -np.inf)
        self._cvdmin = grown(self._cvdmin, np.inf)
        self._cdirty = grown(self._cdirty, False)
        self._cpos = grown(self._cpos, -1)
        self._cfree = grown(self._cfree, 0)
        self._dirty = grown(self._dirty, 0)
        self._cout = grown(self._cout, 0)
        self._cstamp = grown(self._cstamp, 0)

    def _new_table(self, cap: int) -> None:
        self._hkey = np.zeros((cap, 4), dtype=np.int64)
        self._hval = np.full(cap, _EMPTY, dtype=np.int64)

    def _reserve(self, n: int) -> None:
        """Room for about ``n`` new cells (kernels stop early and come back if not enough)."""
        st = self._st
        live = int(st[ST_LIVE])
        want = min(n, max(1024, live // 2))
        cap = self._ckey.shape[0]
        free = int(st[ST_NFREE]) + cap - int(st[ST_HW])
        if free < want:
            self._grow_cells(max(2 * cap, cap + want))
        icap = self._items[0].shape[0]
        free_items = int(st[ST_INFREE]) + icap - int(st[ST_IHW])
        if free_items < n:
            self._grow_items(max(2 * icap, icap + n - free_items))
        if 2 * (int(st[ST_USED]) + want) > self._hval.shape[0]:
            self._rehash(live + want)

    def _rehash(self, need: int) -> None:
        """Rebuild the table without tombstones at a quarter load; tighten level bounds."""
        cap = 256
        while cap < 4 * need:
            cap *= 2
        self._new_table(cap)
        self._st[ST_USED] = _fill_table(self._ckey, self._ccount, int(self._st[ST_HW]),
                                        self._cpos, self._hkey, self._hval)
        _recompute_levels(self._items[1], self._items[4], self._grid())

    def _item_walk(self) -> tuple:
        # What the query kernels read per object: (centers, radii, view dist, slot, next).
        icen, irad, ivd, islot, inext, _iprev, _ifree = self._items
        return icen, irad, ivd, inext, islot

    @staticmethod
    def _new_items(cap: int) -> tuple:
        return (np.zeros((cap, 3)), np.zeros(cap), np.zeros(cap),
                np.full(cap, -1, dtype=np.int64), np.full(cap, -1, dtype=np.int64),
                np.full(cap, -1, dtype=np.int64), np.zeros(cap, dtype=np.int64))

    def _grow_items(self, cap: int) -> None:
        old = self._items[0].shape[0]
        fresh = self._new_items(cap)
        for a, b in zip(self._items, fresh, strict=True):
            b[:old] = a
        self._items = fresh

    def _maybe_compact(self) -> None:
        """Re-lay items in cell order once relinks have scattered a quarter of them."""
        relinks = int(self._st[ST_RELINKS]) + int(self._st[ST_IHW]) - self._compacted_hw
        if relinks > max(self._count // 4, 4096):
            self._compact()

    def _compact(self) -> None:
        """Renumber cells in (level, Z-order) and items cell by cell: a frustum then reads
        long contiguous runs of memory instead of one cache miss per object."""
        st = self._st
        hw = int(st[ST_HW])
        live = np.flatnonzero(self._ccount[:hw] > 0)
        key = self._ckey[live]
        off = key[:, 1:] - key[:, 1:].min(axis=0) if live.size else key[:, 1:]
        order = live[np.lexsort((_morton(np.minimum(off, (1 << 21) - 1)), key[:, 0]))]
        newidx = np.full(hw, -1, dtype=np.int64)
        newidx[order] = np.arange(order.shape[0])
        nl = order.shape[0]
        for name, fill in (("_ckey", 0), ("_chead", -1), ("_ccount", 0), ("_cvdmax", -np.inf),
                           ("_cvdmin", np.inf), ("_cdirty", False), ("_cout", 0),
                           ("_cstamp", 0)):
            a = getattr(self, name)
            a[:nl] = a[order]
            a[nl:hw] = fill
        nd = int(st[ST_NDIRTY])
        d = newidx[self._dirty[:nd]]
        d = d[d >= 0]
        self._dirty[: d.shape[0]] = d
        st[ST_NDIRTY] = d.shape[0]
        alive = self._alive
        self._ocell[alive] = newidx[self._ocell[alive]]
        st[ST_HW] = nl
        st[ST_NFREE] = 0
        self._rehash(nl)
        fresh = self._new_items(self._items[0].shape[0])
        _compact(self._oitem, self._grid(), self._items, fresh)
        self._items = fresh
        self._compacted_hw = int(st[ST_IHW])
