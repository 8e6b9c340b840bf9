"""Compiled queries of the hashed grid: frustum (+ view distance, + occlusion), box, sphere, ray.

Per level, a query reduces to a range of cell coordinates (the bounding box of the frustum
clipped to the level's extent, or of the box or sphere grown by the level's max radius) and
visits the live cells in it: by probing the table when the range has few coordinates, else by
one scan of the cell pool. The frustum walks its range as an implicit octree of coordinate
blocks, so that blocks outside cost no probe and blocks inside no plane test per cell; the ray
walks each level's grid along the ray (DDA).

Every per-object decision uses :mod:`app.geom.predicates` (the frustum's makes
:func:`app.geom.decide.accept_sphere`'s decision), so answers equal brute force bit for bit;
cell tests only ever skip work (their boxes carry a small relative margin).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from app.geom.decide import VIEWDIST_SLACK
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
from app.geom.zpyramid import Occluder, ZPyramid, box_hidden, occluder, sphere_hidden
from app.spatial.hashgrid.store import (
    ST_HW,
    ST_LIVE,
    ST_NDIRTY,
    Items,
    as_grid,
    block_box,
    bounded,
    coord,
    probe,
)
from app.spatial.hashgrid.update import refresh_dirty


class View(NamedTuple):
    """What a frustum query culls against (one argument for the kernels)."""

    planes: np.ndarray  # (K, 4) float64
    eye: np.ndarray
    use_vd: bool
    occ: Occluder


def view_args(planes: np.ndarray, eye: np.ndarray, use_vd: bool,
              occlusion: ZPyramid | None) -> tuple:
    """A :class:`View` as plain tuples, for :func:`frustum`'s entry (see store.grid_args)."""
    return (planes, eye, use_vd, tuple(occluder(occlusion)))


@njit(cache=True, inline="always")
def as_view(t):
    """The :class:`View` of :func:`view_args`' tuples."""
    return View(t[0], t[1], t[2], Occluder(*t[3]))


# ---------------------------------------------------------------------------- cell ranges


@njit(cache=True)
def polytope_bbox(planes, grow, elo, ehi, out_lo, out_hi):
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
def frustum_range(planes, lvl, size, grow, ext, rng):
    """Cell range of a level that can hold a frustum hit, clipped to the level's extent.

    Returns False when no cell can. Levels reaching the clamped coordinates keep their full
    extent (those cells are unbounded).
    """
    for a in range(6):
        rng[a] = ext[lvl, a]
    if not (bounded(ext[lvl, 0], ext[lvl, 1], ext[lvl, 2])
            and bounded(ext[lvl, 3], ext[lvl, 4], ext[lvl, 5])):
        return True
    elo = np.empty(3)
    ehi = np.empty(3)
    block_box(ext[lvl, 0], ext[lvl, 1], ext[lvl, 2], ext[lvl, 3], ext[lvl, 4], ext[lvl, 5],
              size, 0.0, elo, ehi)
    blo = np.empty(3)
    bhi = np.empty(3)
    if not polytope_bbox(planes, grow, elo, ehi, blo, bhi):
        return True  # nothing found: fall back to the whole extent (blocks prune it)
    for a in range(3):
        span = bhi[a] - blo[a] + abs(blo[a]) + abs(bhi[a])
        rng[a] = max(rng[a], coord(blo[a] - 1e-7 * span, size) - 1)
        rng[3 + a] = min(rng[3 + a], coord(bhi[a] + 1e-7 * span, size) + 1)
        if rng[a] > rng[3 + a]:
            return False
    return True


@njit(cache=True)
def box_range(lvl, size, grow, lo, hi, ext, rng):
    """Cell range of a level whose cells, grown by ``grow``, can touch the box [lo, hi]."""
    for a in range(3):
        span = abs(lo[a]) + abs(hi[a]) + grow
        rng[a] = max(ext[lvl, a], coord(lo[a] - grow - 1e-9 * span, size) - 1)
        rng[3 + a] = min(ext[lvl, 3 + a], coord(hi[a] + grow + 1e-9 * span, size) + 1)
        if rng[a] > rng[3 + a]:
            return False
    return True


@njit(cache=True, inline="always")
def range_cells(rng):
    """Coordinates in the range r = [i0, j0, k0, i1, j1, k1], in floats (clamped ranges can
    exceed int64)."""
    return (float(rng[3] - rng[0] + 1) * float(rng[4] - rng[1] + 1)
            * float(rng[5] - rng[2] + 1))


@njit(cache=True, inline="always")
def key_in_range(ckey, c, r):
    """Whether cell ``c``'s coordinates lie in the range r = [i0, j0, k0, i1, j1, k1]."""
    return (r[0] <= ckey[c, 1] <= r[3] and r[1] <= ckey[c, 2] <= r[4]
            and r[2] <= ckey[c, 3] <= r[5])


@njit(cache=True, inline="always")
def scan_pool(cells, scan, ranges, hw, out, k):
    """Append to ``out`` (from ``k``) the live cells of the ``scan`` levels that lie in their
    level's range, by one pass over the cell pool; returns the new count. For levels whose
    range has more coordinates than the grid has live cells, this is cheaper than probing."""
    ckey = cells.key
    for c in range(hw):
        if cells.count[c] <= 0:
            continue
        lvl = ckey[c, 0]
        if scan[lvl] and key_in_range(ckey, c, ranges[lvl]):
            out[k] = c
            k += 1
    return k


@njit(cache=True, inline="always")
def cells_in_ranges(ranges, active, g):
    """Live cells inside each active level's coordinate range.

    Per level, probes every coordinate of the range when that is cheaper than scanning the
    pool, else the level joins one scan of the pool.
    """
    nlev = ranges.shape[0]
    table = g.table
    lcells = g.levels.cells
    live = g.meta[ST_LIVE]
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
        if range_cells(r) > 2.0 * live:
            scan[lvl] = True
            any_scan = True
            continue
        for ix in range(r[0], r[3] + 1):
            for iy in range(r[1], r[4] + 1):
                for iz in range(r[2], r[5] + 1):
                    c = probe(table, lvl, ix, iy, iz)
                    if c >= 0:
                        out[k] = c
                        k += 1
    if any_scan:
        k = scan_pool(g.cells, scan, ranges, g.meta[ST_HW], out, k)
    return out[:k]


# ---------------------------------------------------------------------------- frustum


@njit(cache=True, _nrt=False)
def cull_cell(c, res, size, grow, view, g, items, out, k, cnt, scr, whole):
    """Frustum-test one live cell (``res``: its class if known, else -1); emit its objects' ids,
    or, when every one of them passes, queue its list on ``whole`` (its count at [0], the
    lists' first items after it) for :func:`emit_lists`.

    ``cnt`` accumulates [working set, cells visited, occluded cells, objects culled by
    occlusion, objects culled by view distance] (a rejected cell counts all its objects under
    its test, the frustum's being the rest; an object counts under the first test it fails);
    ``scr`` is (4, 3) scratch for boxes (no allocation per cell).

    The cell's decision is not :func:`app.geom.decide.node_verdict`: a cell tests view
    distance on its bare box (it bounds the centers, which is what view distance measures,
    so it rejects more than the grown box would), reuses the class its block already has
    (blocks inside the frustum skip the plane test), and also learns whether every object is
    within its view distance (then no object pays that test).

    Compiled without reference counting (it allocates nothing): inlined, or called as an
    ordinary kernel, it increfed and decrefed the ~30 arrays of its bundles at every cell.
    """
    cells = g.cells
    cnt[1] += 1
    ix = cells.key[c, 1]
    iy = cells.key[c, 2]
    iz = cells.key[c, 3]
    lo = scr[0]
    hi = scr[1]
    block_box(ix, iy, iz, ix, iy, iz, size, grow, lo, hi)
    finite = bounded(ix, iy, iz)
    if not finite:
        res = PARTIAL
    elif res < 0:
        res = box_vs_frustum(view.planes, lo, hi)
    if res == OUTSIDE:
        cells.outcome[c] = NODE_REJECT_FRUSTUM
        return k
    vd_all = True  # every object of the cell is within its view distance
    if view.use_vd:
        vd_all = False
        if finite:
            eye = view.eye
            clo = scr[2]
            chi = scr[3]
            block_box(ix, iy, iz, ix, iy, iz, size, 0.0, clo, chi)
            near = box_point_dist(clo, chi, eye[0], eye[1], eye[2])
            if near > cells.vdmax[c] * (1.0 + VIEWDIST_SLACK):
                cells.outcome[c] = NODE_REJECT_VIEWDIST
                cnt[4] += cells.count[c]
                return k
            fx = max(abs(clo[0] - eye[0]), abs(chi[0] - eye[0]))
            fy = max(abs(clo[1] - eye[1]), abs(chi[1] - eye[1]))
            fz = max(abs(clo[2] - eye[2]), abs(chi[2] - eye[2]))
            far = math.sqrt(fx * fx + fy * fy + fz * fz)
            vd_all = far * (1.0 + VIEWDIST_SLACK) < cells.vdmin[c]
    if finite and view.occ.widths.shape[0] > 0 and box_hidden(view.occ, lo, hi):
        cells.outcome[c] = NODE_REJECT_OCCLUSION
        cnt[2] += 1
        cnt[3] += cells.count[c]
        return k
    cells.outcome[c] = NODE_INSIDE if res == INSIDE else NODE_PARTIAL
    # The per-object decision is accept_sphere's (view distance, frustum, occlusion, with the
    # same predicates), written out so that objects skip what the cell settled: the view
    # distance test when vd_all, the plane test when the cell is inside.
    planes = view.planes
    eye = view.eye
    occ = view.occ
    occlusion = occ.widths.shape[0] > 0
    cen = items.cen
    rad = items.rad
    vd = items.vd
    ident = items.ident
    nxt = items.next
    it = cells.head[c]
    if res == INSIDE and vd_all and not occlusion:
        whole[0] += 1
        whole[whole[0]] = it
        cnt[0] += cells.count[c]
        return k
    while it >= 0:
        cnt[0] += 1
        cx = cen[it, 0]
        cy = cen[it, 1]
        cz = cen[it, 2]
        r = rad[it]
        ok = vd_all or within_view_distance(eye[0], eye[1], eye[2], cx, cy, cz, vd[it])
        cnt[4] += not ok
        if ok and res != INSIDE:
            ok = sphere_in_frustum(planes, cx, cy, cz, r)
        if ok and occlusion and sphere_hidden(occ, cx, cy, cz, r):
            cnt[3] += 1
            ok = False
        if ok:
            out[k] = ident[it]
            k += 1
        it = nxt[it]
    return k


@njit(cache=True, inline="always")
def _take_list(it, whole, q):
    """A lane without a list (``it`` < 0) takes the next queued one: (its item, next q)."""
    if it < 0 and q <= whole[0]:
        return whole[q], q + 1
    return it, q


@njit(cache=True, inline="always")
def _emit_item(it, ident, nxt, out, k):
    """A lane's item's id into ``out[k]`` and the lane on to the next item: (item, k)."""
    if it >= 0:
        out[k] = ident[it]
        return nxt[it], k + 1
    return it, k


@njit(cache=True, _nrt=False)
def emit_lists(whole, ident, nxt, out, k):
    """The ids of every object in the lists queued on ``whole`` (see :func:`cull_cell`), into
    ``out`` from ``k``; returns the new ``k``.

    Four lists are followed side by side, an item of each in turn, each lane in its own
    variable: one list is a chain of dependent loads, and once relinks have scattered its
    items each is a cache miss (a view of the whole world at 10^6 objects took 19 ms after a
    tenth of them had spawned again, against 1.7 for the brute force); the four chains
    overlap. (Eight lanes were no faster.)
    """
    q = 1
    a = b = c = d = -1
    while True:
        a, q = _take_list(a, whole, q)
        b, q = _take_list(b, whole, q)
        c, q = _take_list(c, whole, q)
        d, q = _take_list(d, whole, q)
        if (a < 0) & (b < 0) & (c < 0) & (d < 0):
            return k
        a, k = _emit_item(a, ident, nxt, out, k)
        b, k = _emit_item(b, ident, nxt, out, k)
        c, k = _emit_item(c, ident, nxt, out, k)
        d, k = _emit_item(d, ident, nxt, out, k)


@njit(cache=True, inline="always")
def split_block(stack, sp, res):
    """Replace the block on top of the stack (at ``sp``) by its two halves along its longest
    side, both carrying the class ``res``; returns the new stack size."""
    i0, j0, k0, i1, j1, k1 = stack[sp, 0], stack[sp, 1], stack[sp, 2], stack[sp, 3], \
        stack[sp, 4], stack[sp, 5]
    for a in range(7):
        stack[sp + 1, a] = stack[sp, a]
    stack[sp, 6] = res
    stack[sp + 1, 6] = res
    di = i1 - i0
    dj = j1 - j0
    dk = k1 - k0
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
    return sp + 2


@njit(cache=True)
def frustum(view_t, n_objects, grid_t, items_t):
    """Frustum (+ view distance, + occlusion) query over every level; one call per frame
    (the bundles come as plain tuples, see store.grid_args).

    Returns (ids, [working set, cells visited, occluded cells, objects culled by occlusion,
    objects culled by view distance]).
    """
    view = as_view(view_t)
    g = as_grid(grid_t)
    items = Items(*items_t)
    if view.use_vd and g.meta[ST_NDIRTY] > 0:
        refresh_dirty(g, items)  # loose bounds are safe but cull less
    cells = g.cells
    table = g.table
    lv = g.levels
    planes = view.planes
    hw = g.meta[ST_HW]
    cells.outcome[:hw] = 0
    out = np.empty(n_objects, dtype=np.int64)
    k = 0
    cnt = np.zeros(5, dtype=np.int64)
    nlev = lv.size.shape[0]
    ranges = np.zeros((nlev, 6), dtype=np.int64)
    scan = np.zeros(nlev, dtype=np.bool_)
    any_scan = False
    # The lists of cells whose every object passes (emit_lists): their count, then them.
    whole = np.empty(hw + 1, dtype=np.int64)
    whole[0] = 0
    # Explicit stack of coordinate blocks: [i0, j0, k0, i1, j1, k1, known class or -1].
    stack = np.empty((512, 7), dtype=np.int64)
    scr = np.empty((4, 3))
    lo = np.empty(3)
    hi = np.empty(3)
    for lvl in range(nlev):
        if lv.count[lvl] == 0:
            continue
        size = lv.size[lvl]
        grow = lv.rmax[lvl]
        rng = ranges[lvl]
        if not frustum_range(planes, lvl, size, grow, lv.ext, rng):
            continue
        if range_cells(rng) > 2.0 * g.meta[ST_LIVE]:
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
                if bounded(i0, j0, k0) and bounded(i1, j1, k1):
                    block_box(i0, j0, k0, i1, j1, k1, size, grow, lo, hi)
                    res = box_vs_frustum(planes, lo, hi)
                    if res == OUTSIDE:
                        continue
                else:
                    res = PARTIAL
            single = i0 == i1 and j0 == j1 and k0 == k1
            if res == INSIDE or single or sp > 500:
                hint = res if (res == INSIDE or single) else -1
                for ix in range(i0, i1 + 1):
                    for iy in range(j0, j1 + 1):
                        for iz in range(k0, k1 + 1):
                            c = probe(table, lvl, ix, iy, iz)
                            if c >= 0:
                                k = cull_cell(c, hint, size, grow, view, g, items, out, k, cnt,
                                              scr, whole)
                continue
            sp = split_block(stack, sp, res)
    if any_scan:
        found = np.empty(hw, dtype=np.int64)
        for j in range(scan_pool(cells, scan, ranges, hw, found, 0)):
            c = found[j]
            lvl = cells.key[c, 0]
            k = cull_cell(c, -1, lv.size[lvl], lv.rmax[lvl], view, g, items, out, k, cnt, scr,
                          whole)
    k = emit_lists(whole, items.ident, items.next, out, k)
    return out[:k], cnt


# ---------------------------------------------------------------------------- box, sphere


@njit(cache=True, inline="always")
def cells_near_box(lo, hi, g):
    """Live cells of every level whose cells, grown by the level's max radius, can touch
    the box [lo, hi] (the candidates of box and sphere queries)."""
    lv = g.levels
    count = lv.count
    size = lv.size
    rmax = lv.rmax
    ext = lv.ext
    nlev = size.shape[0]
    ranges = np.zeros((nlev, 6), dtype=np.int64)
    active = np.zeros(nlev, dtype=np.bool_)
    for lvl in range(nlev):
        if count[lvl] > 0:
            active[lvl] = box_range(lvl, size[lvl], rmax[lvl], lo, hi, ext, ranges[lvl])
    return cells_in_ranges(ranges, active, g)


@njit(cache=True)
def box(lo, hi, n_objects, grid_t, items_t):
    """Objects whose sphere's bounding box overlaps [lo, hi] (bundles as plain tuples)."""
    g = as_grid(grid_t)
    items = Items(*items_t)
    out = np.empty(n_objects, dtype=np.int64)
    k = 0
    head = g.cells.head
    cen = items.cen
    rad = items.rad
    slot = items.slot
    nxt = items.next
    for c in cells_near_box(lo, hi, g):
        it = head[c]
        while it >= 0:
            if sphere_overlaps_box(cen[it, 0], cen[it, 1], cen[it, 2], rad[it], lo, hi):
                out[k] = slot[it]
                k += 1
            it = nxt[it]
    return out[:k]


@njit(cache=True)
def sphere(q, qr, n_objects, grid_t, items_t):
    """Objects with |c - q| <= r + qr (bundles as plain tuples)."""
    g = as_grid(grid_t)
    items = Items(*items_t)
    cells = g.cells
    lv = g.levels
    lo = np.empty(3)
    hi = np.empty(3)
    for a in range(3):
        lo[a] = q[a] - qr
        hi[a] = q[a] + qr
    found = cells_near_box(lo, hi, g)
    out = np.empty(n_objects, dtype=np.int64)
    k = 0
    ckey = cells.key
    head = cells.head
    sizes = lv.size
    rmax = lv.rmax
    cen = items.cen
    rad = items.rad
    slot = items.slot
    nxt = items.next
    for c in found:
        lvl = ckey[c, 0]
        ix = ckey[c, 1]
        iy = ckey[c, 2]
        iz = ckey[c, 3]
        if bounded(ix, iy, iz):
            block_box(ix, iy, iz, ix, iy, iz, sizes[lvl], rmax[lvl], lo, hi)
            if box_point_dist(lo, hi, q[0], q[1], q[2]) > qr * (1.0 + 1e-9):
                continue
        it = head[c]
        while it >= 0:
            if spheres_touch(cen[it, 0], cen[it, 1], cen[it, 2], rad[it], q[0], q[1], q[2], qr):
                out[k] = slot[it]
                k += 1
            it = nxt[it]
    return out[:k]


# ---------------------------------------------------------------------------- ray


@njit(cache=True, _nrt=False)
def ray_cell(c, ray, size, grow, g, items, out, ts, k, scratch):
    """Test one cell's grown box (built in the ``scratch`` pair of 3-arrays), then its
    objects, against the ``ray`` (origin, direction, 1 / direction). No reference counting
    (it allocates nothing), as cull_cell, so the tuples cost nothing per call."""
    o, d, inv = ray
    lo, hi = scratch
    cells = g.cells
    ix = cells.key[c, 1]
    iy = cells.key[c, 2]
    iz = cells.key[c, 3]
    if bounded(ix, iy, iz):
        block_box(ix, iy, iz, ix, iy, iz, size, grow, lo, hi)
        if not ray_box_hits(o[0], o[1], o[2], inv[0], inv[1], inv[2], lo, hi):
            return k
    cen = items.cen
    rad = items.rad
    slot = items.slot
    nxt = items.next
    it = cells.head[c]
    while it >= 0:
        t = ray_sphere_entry(o[0], o[1], o[2], d[0], d[1], d[2],
                             cen[it, 0], cen[it, 1], cen[it, 2], rad[it])
        if t >= 0.0:
            out[k] = slot[it]
            ts[k] = t
            k += 1
        it = nxt[it]
    return k


@njit(cache=True)
def clip_ray(o, d, lo, hi):
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
def ray(o, d, n_objects, grid_t, items_t, stamp):
    """Spheres hit by the ray: per level, a grid walk (DDA) along the ray visiting the cells
    within the level's reach of each cell crossed (or a scan when that is cheaper). Bundles
    as plain tuples."""
    g = as_grid(grid_t)
    items = Items(*items_t)
    cells = g.cells
    table = g.table
    lv = g.levels
    inv = np.empty(3)
    for a in range(3):
        inv[a] = 1.0 / d[a] if d[a] != 0.0 else np.inf
    out = np.empty(n_objects, dtype=np.int64)
    ts = np.empty(n_objects, dtype=np.float64)
    k = 0
    lo = np.empty(3)
    hi = np.empty(3)
    ray = (o, d, inv)
    cell_box = (np.empty(3), np.empty(3))  # ray_cell's scratch
    cur = np.empty(3, dtype=np.int64)
    end = np.empty(3, dtype=np.int64)
    step = np.empty(3, dtype=np.int64)
    tmax = np.empty(3)
    tdel = np.empty(3)
    for lvl in range(lv.size.shape[0]):
        if lv.count[lvl] == 0:
            continue
        size = lv.size[lvl]
        grow = lv.rmax[lvl]
        e = lv.ext[lvl]
        reach = np.int64(grow / size) + 1  # neighbourhood holding every possible hit
        walkable = bounded(e[0], e[1], e[2]) and bounded(e[3], e[4], e[5]) and reach < 8
        t0 = 0.0
        t1 = -1.0
        if walkable:
            block_box(e[0], e[1], e[2], e[3], e[4], e[5], size, grow, lo, hi)
            t0, t1 = clip_ray(o, d, lo, hi)
            if t0 > t1:
                continue
            steps = 1.0
            for a in range(3):
                cur[a] = coord(o[a] + t0 * d[a], size)
                end[a] = coord(o[a] + t1 * d[a], size)
                steps += abs(end[a] - cur[a])
            walkable = steps * (2 * reach + 1) ** 3 <= 2.0 * lv.cells[lvl] + 64.0
        if not walkable:
            for c in range(g.meta[ST_HW]):
                if cells.count[c] > 0 and cells.key[c, 0] == lvl:
                    k = ray_cell(c, ray, size, grow, g, items, out, ts, k, cell_box)
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
                        c = probe(table, lvl, ix, iy, iz)
                        if c >= 0 and cells.stamp[c] != stamp:
                            cells.stamp[c] = stamp  # a cell near several crossed cells: once
                            k = ray_cell(c, ray, size, grow, g, items, out, ts, k, cell_box)
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
