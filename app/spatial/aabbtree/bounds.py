"""Node boxes and refits of the dynamic AABB tree (Shagam, sections 2.1.5 and 2.1.6).

Box invariant (what makes every query exact at any time): a node's box contains the bounds of
its own objects and is contained in its parent's box, so it contains its whole subtree. Boxes
only grow eagerly (insert, move); they shrink lazily. ``dirty`` means "may be larger than
needed"; a clean node's box is the union of its objects' bounds and its children's boxes
(validate checks both). The same holds for ``maxvd``, the subtree's largest view distance,
except that removing an object of infinite view distance does not invalidate (it would dirty
every chain up to the root in scenes without view distances).

"The union" is exact in the paper's lazy mode (PAPER_LAZY: its listing compares extents for
equality). In our mode refits and splits build boxes from the blocks' float32 records, read
in order, instead of the float64 store by slot (a cache miss or three per object, which made
a split cost 80-90 ns an object at 10^6): each record's bounds are widened by
:data:`BOX_SLACK` of its magnitude, enough to hold the exact sphere, so a clean box may exceed
the exact union by up to ``2 * BOX_SLACK`` of its largest coordinate (:func:`slack_of`), and
the flush test that dirties a box uses the same tolerance.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.aabbtree.heuristics import PAPER_LAZY
from app.spatial.prefetch import STREAM_AHEAD, prefetch
from app.spatial.scan import FAST

# The helpers called per object by the loops over objects (insert, update, split) take
# arrays, or are compiled without reference counting (_nrt=False: they allocate nothing),
# as covers, grow_up, invalidate_up, climb_to_cover, find_place, the heuristic's
# which_child and the block operations of .blocks are. Taking the pool's tuples with
# reference counting, they counted references of every array at every call: the first query
# of 10^6 objects (kd), which splits the visible part of the tree, took 2.2 s that way and
# 0.37 s this way; inserting 10^6 objects 0.21 s and 0.10 s.

#: Relative widening of a float32 record's bounds (and view distance) in our mode: four
#: float32 roundings, so the widened bounds hold the exact float64 sphere (see the module's
#: docstring). Records beyond :data:`RECORD_BIG` (clamped by ``to32``) read the store instead.
BOX_SLACK = 2.0 ** -22
RECORD_BIG = 1e37


def box_slack(flags: int) -> float:
    """The boxes' relative slack for a tree of these mode flags: 0 (exact) in the paper's lazy
    mode, :data:`BOX_SLACK` otherwise."""
    return 0.0 if flags & PAPER_LAZY else BOX_SLACK


@njit(cache=True, inline="always")
def slack_of(lo, hi, n: int, slack: float) -> float:
    """How far node n's box may stand beyond the exact union of its contents: twice its
    records' widening, from its largest coordinate (0 with an exact tree's slack of 0)."""
    if slack == 0.0:
        return 0.0
    m = max(max(abs(lo[n, 0]), abs(lo[n, 1]), abs(lo[n, 2])),
            max(abs(hi[n, 0]), abs(hi[n, 1]), abs(hi[n, 2])))
    return 2.0 * slack * m


@njit(cache=True, inline="always")
def record_bounds(rec, vdp, slot, centers, radii, vdist, p: int):
    """Bounds (lx, ly, lz, hx, hy, hz) and view distance of the object at heap position p,
    from its float32 record widened by BOX_SLACK so that they hold its exact sphere; a record
    too large for float32 (clamped) reads the store instead."""
    x, y, z, r = record_sphere(rec, p)
    v = np.float64(vdp[p])
    m = max(abs(x), abs(y), abs(z)) + r
    if m < RECORD_BIG and (v < RECORD_BIG or v == np.inf):
        t = m * BOX_SLACK
        return x - r - t, y - r - t, z - r - t, x + r + t, y + r + t, z + r + t, v + v * BOX_SLACK
    s = slot[p]
    cx, cy, cz, cr = centers[s, 0], centers[s, 1], centers[s, 2], radii[s]
    return cx - cr, cy - cr, cz - cr, cx + cr, cy + cr, cz + cr, vdist[s]


@njit(cache=True, inline="always")
def record_sphere(rec, p: int):
    """The float32 record at heap position p as a sphere (cx, cy, cz, r) in float64."""
    return (np.float64(rec[p, 0]), np.float64(rec[p, 1]), np.float64(rec[p, 2]),
            np.float64(rec[p, 3]))


@njit(cache=True, inline="always")
def record_radius_up(rec, p: int) -> float:
    """The radius of the float32 record at heap position p rounded up to at least the exact
    one (a rounding to nearest is within 2^-24 of it); inf for a record clamped by ``to32``."""
    r = rec[p, 3]
    return np.float64(r) * (1.0 + 2.0 ** -23) if r < RECORD_BIG else np.inf


@njit(cache=True, inline="always")
def block_sphere(exact: bool, rec, slot, centers, radii, p: int):
    """The sphere of the object at heap position p as a split reads it: the store's exact one
    in the paper's lazy mode (``exact``), its float32 record, read in order, in ours."""
    if exact:
        return slot_sphere(centers, radii, slot[p])
    return record_sphere(rec, p)


@njit(cache=True, inline="always")
def box_contains(lo, hi, n: int, lx: float, ly: float, lz: float,
                 hx: float, hy: float, hz: float) -> bool:
    """Node n's box (rows of the pool's lo, hi arrays) contains the box [l, h]."""
    # Bitwise & on the comparisons: numba compiles a returned `and` chain very poorly.
    return ((lo[n, 0] <= lx) & (lo[n, 1] <= ly) & (lo[n, 2] <= lz)
            & (hi[n, 0] >= hx) & (hi[n, 1] >= hy) & (hi[n, 2] >= hz))


@njit(cache=True, inline="always")
def sphere_box(cx: float, cy: float, cz: float, r: float):
    """The bounds (lx, ly, lz, hx, hy, hz) of a sphere."""
    return cx - r, cy - r, cz - r, cx + r, cy + r, cz + r


@njit(cache=True, inline="always")
def empty_box():
    """The empty box (lx, ly, lz, hx, hy, hz): +inf lows, -inf highs, so any box grows it."""
    return np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf


@njit(cache=True, inline="always")
def slot_sphere(centers, radii, s: int):
    """Slot s's sphere (cx, cy, cz, r) from the store's arrays."""
    return centers[s, 0], centers[s, 1], centers[s, 2], radii[s]


@njit(cache=True, inline="always")
def add_sphere(lx: float, ly: float, lz: float, hx: float, hy: float, hz: float,
               cx: float, cy: float, cz: float, r: float):
    """The box (lx..hz) grown to cover a sphere, as a new (lx, ly, lz, hx, hy, hz)."""
    return (min(lx, cx - r), min(ly, cy - r), min(lz, cz - r),
            max(hx, cx + r), max(hy, cy + r), max(hz, cz + r))


@njit(cache=True, _nrt=False)
def covers(lo, hi, maxvd, n: int, lx: float, ly: float, lz: float, hx: float, hy: float,
           hz: float, vd: float) -> bool:
    """Node n's box contains [l, h] and its view-distance bound reaches vd."""
    return box_contains(lo, hi, n, lx, ly, lz, hx, hy, hz) & (maxvd[n] >= vd)


@njit(cache=True, inline="always")
def grow_node(lo, hi, maxvd, n: int, lx: float, ly: float, lz: float, hx: float, hy: float,
              hz: float, vd: float) -> None:
    """Grow node n's box to contain [l, h] and its view-distance bound to reach vd."""
    lo[n, 0] = min(lo[n, 0], lx)
    lo[n, 1] = min(lo[n, 1], ly)
    lo[n, 2] = min(lo[n, 2], lz)
    hi[n, 0] = max(hi[n, 0], hx)
    hi[n, 1] = max(hi[n, 1], hy)
    hi[n, 2] = max(hi[n, 2], hz)
    maxvd[n] = max(maxvd[n], vd)


@njit(cache=True, inline="always")
def copy_box(lo, hi, to_lo, to_hi, n: int) -> None:
    """Row n of to_lo/to_hi = row n of lo/hi (the paper mode's box of a clean node)."""
    for a in range(3):
        to_lo[n, a] = lo[n, a]
        to_hi[n, a] = hi[n, a]


@njit(cache=True, _nrt=False)
def grow_up(lo, hi, maxvd, parent, n: int, cx: float, cy: float, cz: float, r: float,
            vd: float) -> None:
    """Expand boxes and view-distance bounds from n towards the root to cover a sphere.

    Stops at the first node that already covers it: its ancestors contain its box.
    """
    lx, ly, lz, hx, hy, hz = sphere_box(cx, cy, cz, r)
    grow_box_up(lo, hi, maxvd, parent, n, lx, ly, lz, hx, hy, hz, vd)


@njit(cache=True, _nrt=False)
def grow_box_up(lo, hi, maxvd, parent, n: int, lx: float, ly: float, lz: float, hx: float,
                hy: float, hz: float, vd: float) -> None:
    """:func:`grow_up` for a box [l, h] and view distance vd (a record's widened bounds, a
    refitted child's box)."""
    while n >= 0 and not covers(lo, hi, maxvd, np.int64(n), lx, ly, lz, hx, hy, hz, vd):
        grow_node(lo, hi, maxvd, n, lx, ly, lz, hx, hy, hz, vd)
        n = parent[n]


@njit(cache=True, _nrt=False)
def invalidate_up(lo, hi, maxvd, parent, dirty, n: int, cx: float, cy: float, cz: float,
                  r: float, vd: float, slack: float) -> None:
    """A sphere leaves n's subtree: mark boxes it was flush against for lazy recomputation.

    Walks up while the sphere touches a face of the box (or held the subtree's largest finite
    view distance), within the boxes' tolerance (:func:`slack_of`; none when ``slack`` is 0):
    a node it does not touch cannot shrink, nor can any ancestor on its account.
    """
    lx, ly, lz, hx, hy, hz = sphere_box(cx, cy, cz, r)
    while n >= 0:
        t = slack_of(lo, hi, n, slack)
        flush = ((lx <= lo[n, 0] + t) | (ly <= lo[n, 1] + t) | (lz <= lo[n, 2] + t)
                 | (hx >= hi[n, 0] - t) | (hy >= hi[n, 1] - t) | (hz >= hi[n, 2] - t)
                 | ((vd >= maxvd[n] * (1.0 - 2.0 * slack)) & (vd < np.inf)))
        if not flush:
            return
        dirty[n] = True
        n = parent[n]


@njit(cache=True)
def refit_node(nd, ob, sp, n: int, threshold: int) -> None:
    """Recompute a node's box and view-distance bound from its objects and children (2.1.5).

    Also re-centres the split point (fragmentation avoidance, 2.1.6): the weighted mean of
    the node's object centers (weight 1) and its children's split points (weight = split
    threshold). A leaf's split point is simply the mean of its centers, which is what a split
    would use. Children are not refitted here: the node stays dirty while any child is, and is
    recomputed again the next time a query reaches it.
    """
    lx, ly, lz, hx, hy, hz = empty_box()
    mv = -np.inf
    sx = 0.0
    sy = 0.0
    sz = 0.0
    w = 0.0
    centers = sp.centers
    radii = sp.radii
    vdist = sp.vdist
    slot = ob.slot  # a local: a tuple's arrays are reference-counted at each use in a loop
    b = nd.start[n]
    for p in range(b, b + nd.count[n]):
        s = slot[p]
        cx, cy, cz, r = slot_sphere(centers, radii, s)
        lx, ly, lz, hx, hy, hz = add_sphere(lx, ly, lz, hx, hy, hz, cx, cy, cz, r)
        mv = max(mv, vdist[s])
        sx += cx
        sy += cy
        sz += cz
        w += 1.0
    finish_refit(nd, np.int64(n), (lx, ly, lz, hx, hy, hz), mv, (sx, sy, sz, w), threshold)


@njit(cache=True, _nrt=False)
def refit_block(nd, ob, sp, n: int, threshold: int) -> None:
    """:func:`refit_node` from node n's block, read in order: its records' bounds and float32
    centres instead of the store's spheres by slot; our mode's refit (the paper's lazy mode
    calls refit_node). Callers choose between the two themselves: a dispatching function
    between them cost 2-3 us a call (numba copies the pool's 21 arrays at every call level),
    0.4 ms an upkeep of 150 refits.

    The block's bounds are widened once, by BOX_SLACK of its largest record magnitude (at
    least each record's own widening, :func:`record_bounds`, and within validate's slack of
    the box), so the pass over the records is one straight loop with no branch
    (:func:`block_bounds`: 3.3 ns a record against 4.3 with the widening per record); a
    block holding a record too large for float32 takes the per-record path.
    """
    rec, vdp, slot = ob.rec, ob.vd, ob.slot  # locals: see refit_node
    b = nd.start[n]
    m = nd.count[n]
    lx, ly, lz, hx, hy, hz, mv, big, sx, sy, sz, huge_vd = block_bounds(rec, vdp, b, m)
    if big < RECORD_BIG and not huge_vd:
        t = big * BOX_SLACK
        lx, ly, lz, hx, hy, hz = lx - t, ly - t, lz - t, hx + t, hy + t, hz + t
        mv = mv + mv * BOX_SLACK
    else:
        centers, radii, vdist = sp
        lx, ly, lz, hx, hy, hz = empty_box()
        mv = -np.inf
        for p in range(b, b + m):
            ax, ay, az, bx, by, bz, v = record_bounds(rec, vdp, slot, centers, radii, vdist, p)
            lx, ly, lz, hx, hy, hz = (min(lx, ax), min(ly, ay), min(lz, az),
                                      max(hx, bx), max(hy, by), max(hz, bz))
            mv = max(mv, v)
    finish_refit(nd, np.int64(n), (lx, ly, lz, hx, hy, hz), mv, (sx, sy, sz, np.float64(m)),
                 threshold)
    # The widened box may stand out of a parent whose side is exact (grown by an insert).
    lo, hi = nd.lo, nd.hi
    grow_box_up(lo, hi, nd.maxvd, nd.parent, nd.parent[n], lo[n, 0], lo[n, 1], lo[n, 2],
                hi[n, 0], hi[n, 1], hi[n, 2], nd.maxvd[n])


@njit(cache=True, fastmath=FAST)
def block_bounds(rec, vdp, b: int, m: int):
    """Over the records b .. b+m-1: the bounds of their spheres (lx, ly, lz, hx, hy, hz), not
    widened; their largest view distance; their largest magnitude max(|x|, |y|, |z|) + r;
    the sums of their centres; whether a finite view distance is too large for float32.
    One straight loop over the flat records (its twelve reductions do not vectorise; a
    single one does, at 0.6 ns a record), asking for the records ahead
    (:data:`~app.spatial.prefetch.STREAM_AHEAD`): a block beyond the cache took 10 ns a
    record without the hints, 3 with them, as within the cache."""
    flat = rec.reshape(rec.size)
    lx = ly = lz = np.inf
    hx = hy = hz = -np.inf
    mv = -np.inf
    big = 0.0
    sx = sy = sz = 0.0
    huge = 0
    p0 = np.uint64(b)
    last = b + m - 1
    for i in range(m):
        if (i & 3) == 0:  # a line of records (four) at a time: see prefetch.STREAM_AHEAD
            prefetch(rec, min(b + i + STREAM_AHEAD, last))
            if (i & 15) == 0:
                prefetch(vdp, min(b + i + STREAM_AHEAD, last))
        p = p0 + np.uint64(i)
        f = p * np.uint64(4)
        x = np.float64(flat[f])
        y = np.float64(flat[f + np.uint64(1)])
        z = np.float64(flat[f + np.uint64(2)])
        r = np.float64(flat[f + np.uint64(3)])
        v = np.float64(vdp[p])
        lx = min(lx, x - r)
        ly = min(ly, y - r)
        lz = min(lz, z - r)
        hx = max(hx, x + r)
        hy = max(hy, y + r)
        hz = max(hz, z + r)
        mv = max(mv, v)
        big = max(big, max(abs(x), abs(y), abs(z)) + r)
        huge += (v >= RECORD_BIG) & (v != np.inf)
        sx += x
        sy += y
        sz += z
    return lx, ly, lz, hx, hy, hz, mv, big, sx, sy, sz, huge > 0


@njit(cache=True, _nrt=False)
def finish_refit(nd, n: int, own_box, mv: float, own_sums, threshold: int) -> None:
    """The second half of :func:`refit_node`, given its own objects' bounds and sums.

    ``own_box`` (lx, ly, lz, hx, hy, hz) is the box of n's own objects, mv their largest view
    distance, ``own_sums`` (sx, sy, sz, w) the sum of their centres and their number (tuples
    of floats go by value: no cost over separate arguments). Compiled without reference
    counting (it allocates nothing and its callers hold the pool): passing the pool's 17
    arrays to it otherwise costs an atomic increment and decrement of each at every call.
    """
    lx, ly, lz, hx, hy, hz = own_box
    sx, sy, sz, w = own_sums
    still_dirty = False
    if nd.nchild[n] > 0:
        for j in range(nd.child.shape[1]):
            ch = nd.child[n, j]
            if ch < 0:
                continue
            lx = min(lx, nd.lo[ch, 0])
            ly = min(ly, nd.lo[ch, 1])
            lz = min(lz, nd.lo[ch, 2])
            hx = max(hx, nd.hi[ch, 0])
            hy = max(hy, nd.hi[ch, 1])
            hz = max(hz, nd.hi[ch, 2])
            mv = max(mv, nd.maxvd[ch])
            sx += threshold * nd.split[ch, 0]
            sy += threshold * nd.split[ch, 1]
            sz += threshold * nd.split[ch, 2]
            w += threshold
            still_dirty |= nd.dirty[ch]
    nd.lo[n, 0] = lx
    nd.lo[n, 1] = ly
    nd.lo[n, 2] = lz
    nd.hi[n, 0] = hx
    nd.hi[n, 1] = hy
    nd.hi[n, 2] = hz
    nd.maxvd[n] = mv
    if w > 0.0:
        nd.split[n, 0] = sx / w
        nd.split[n, 1] = sy / w
        nd.split[n, 2] = sz / w
    nd.dirty[n] = still_dirty
    if not still_dirty:
        # The paper mode's box is the clean box (unused, and harmless, in our mode).
        copy_box(nd.lo, nd.hi, nd.plo, nd.phi, n)
