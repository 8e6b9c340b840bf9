"""Compiled core of the dynamic AABB tree: node pool, object lists, insert, remove, update,
split, refit and garbage collection (Shagam, section 2.1).

State lives in flat arrays, in the manner of Box2D's dynamic tree:

* the node pool (:class:`Nodes`): one row per node, a free list as a stack of node indices,
  a (capacity, K) child table (K = number of children of the heuristic);
* per-node object blocks in a packed float32 heap (:mod:`.blocks`): a node's objects lie at
  positions ``start .. start + count - 1``, so queries scan them as one range.

Kernels take these bundles (plus the store's :class:`Spheres` and the tree's :class:`Rules`)
rather than their arrays one by one; only the hottest inlined helpers take single arrays.

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

from collections import namedtuple

import numpy as np
from numba import njit

from app.geom.predicates import OUTSIDE, box_vs_frustum6
from app.spatial.aabbtree.blocks import (
    NO_ROOM,
    append_record,
    block_class,
    copy_record,
    cut_record,
    fit_block,
    give_block,
    grow_block,
    make_room,
    move_record,
    prefetch_position,
    rewrite_sphere,
    room_for_leaf,
    swap_records,
    take_blocks,
)
from app.spatial.aabbtree.heuristics import (
    KEEP_NONE,
    KEEP_OURS,
    KEEP_PAPER,
    PAPER_AXIS,
    PAPER_LAZY,
    PAPER_NONLEAFY,
    PAPER_SPLIT_POINT,
    PAPER_THRESHOLD,
    box_volume,
    child_index,
    split_axis,
    which_child,
)
from app.spatial.object_store import moved_centre
from app.spatial.pool import grown, grown_free_stack
from app.spatial.prefetch import PREFETCH_AHEAD, STREAM_AHEAD, prefetch
from app.spatial.scan import FAST

ROOT = 0  # the root is the first node allocated and is never freed
META_NFREE = 0  # meta[0]: number of entries on the free stack
META_WANT_GROW = 1  # meta[1]: a query skipped a split for lack of free nodes
META_CATCHUP = 2  # meta[2]: a query's catch-up (below)
CATCHUP_ASKED = 1  # a query stopped early: its noted backlog calls for a catch-up
CATCHUP_DONE = 2  # the catch-up ran: the query runs again and does not ask again
MIN_STEP = 256  # the least work an upkeep call does on a split under way (objects)
#: A leaf of more than GUARD_OBJECTS objects outside the view but within GUARD of its own
#: largest side of it is split as if seen (:func:`near_view`). Smaller leaves are left to
#: the paper's laziness: one stretched into the view costs a scan of a few microseconds,
#: and keeping every leaf beside the view at the threshold made the upkeep follow every
#: object that entered one (static `teleport`, kd: update 0.85 -> 1.14 ms).
GUARD = 0.125
GUARD_OBJECTS = 4096

Nodes = namedtuple(
    "AABBNodes",
    ["parent", "slot_in_parent", "child", "nchild", "start", "cap", "kept", "count", "depth",
     "is_split",
     "dirty", "axis", "lo", "hi", "split", "maxvd", "outcome", "plo", "phi", "free", "meta"],
)
#: The store's spheres (the base class's arrays, rebuilt per call: the store may reallocate).
Spheres = namedtuple("AABBSpheres", ["centers", "radii", "vdist"])
#: The tree's construction rules: objects only in leaves (or big ones at internal nodes too),
#: the split threshold (ours: a leaf with more objects is split; also the weight of a child's
#: split point in the re-centring), the mode's feature bits (heuristics.PAPER_*) and the
#: non-leafy rule as heuristics.KEEP_* (what which_child takes).
Rules = namedtuple("AABBRules", ["leafy", "threshold", "flags", "keep"])
#: The same rules for a tree in the paper mode's extents bookkeeping (PAPER_LAZY). A class of
#: its own so that a traversal compiled for our mode leaves the listing's GetExtents out at
#: compile time (``paper.reach_node``): compiled in, it cost every first start 2-4 s.
LazyRules = namedtuple("AABBLazyRules", Rules._fields)
# Each class also under its own name: numba's cache pickles argument types with cloudpickle,
# which pickles a class *by value* unless module.<class name> is that class; by value, every
# process unpickled a new class, never matched its cached kernels and compiled them again
# (20-40 s at the first query, and a new cache entry each run).
#: Nodes a query reached that the upkeep should refit or split (see :func:`maintain`):
#: ``noted`` flags them and ``pending[:count[0]]`` lists them, each once (a flagged node is
#: never listed again, so the list fits in the pool's size). Allocation and freeing leave the
#: flag alone: a node freed while listed stays listed until the upkeep drops it. Apart from
#: the pool: numba reference-counts every array of the pool at each call that passes it, and
#: with these two fields in it the update of 10^5 moving objects took about a third longer.
#: ``waited`` counts, per node, the upkeeps that passed its refit over (see ``patience`` in
#: :func:`maintain`); a freed node keeps its count, which only moves its next refit.
Pending = namedtuple("AABBPending", ["noted", "pending", "count", "waited"])
AABBNodes, AABBSpheres, AABBRules = Nodes, Spheres, Rules
AABBPending = Pending
AABBLazyRules = LazyRules


def make_rules(leafy: bool, threshold: int, flags: int = 0) -> Rules:
    """The Rules of a tree: ``keep`` follows from leafy and the PAPER_NONLEAFY bit."""
    keep = KEEP_NONE if leafy else (KEEP_PAPER if flags & PAPER_NONLEAFY else KEEP_OURS)
    kind = LazyRules if flags & PAPER_LAZY else Rules
    return kind(bool(leafy), int(threshold), int(flags), keep)

# Per-node field -> (dtype, row shape, value of a free node); the child table is (K,) wide.
_NODE_FIELDS = {
    "parent": (np.int32, (), -1),
    "slot_in_parent": (np.int8, (), -1),
    "child": (np.int32, ("k",), -1),
    "nchild": (np.int32, (), 0),
    "start": (np.int32, (), -1),  # the node's block in the heap (-1: none)
    "cap": (np.int32, (), 0),  # its size
    # A split spread over upkeep calls (split_step): the objects at the front of the node's
    # block that stay there; -1 when no split is under way.
    "kept": (np.int32, (), -1),
    "count": (np.int32, (), 0),
    "depth": (np.int32, (), -1),  # -1 marks a free node
    "is_split": (np.bool_, (), False),
    "dirty": (np.bool_, (), False),
    "axis": (np.int8, (), 0),
    "lo": (np.float64, (3,), np.inf),
    "hi": (np.float64, (3,), -np.inf),
    "split": (np.float64, (3,), 0.0),
    "maxvd": (np.float64, (), -np.inf),
    "outcome": (np.int8, (), 0),
    # The paper mode's box (appendix A's m_min/m_max): equal to lo/hi while the node is clean;
    # frozen when it is invalidated (the listing grows only correct extents), while lo/hi keep
    # growing so that every query can still prune on them. Only the paper mode reads it.
    "plo": (np.float64, (3,), np.inf),
    "phi": (np.float64, (3,), -np.inf),
}


# ---------------------------------------------------------------------- pool (numpy, not per frame)

def new_nodes(capacity: int, k: int) -> Nodes:
    """An empty node pool of ``capacity`` nodes for a heuristic of ``k`` children."""
    fields = {name: np.full((capacity,) + tuple(k if d == "k" else d for d in row), fill, dt)
              for name, (dt, row, fill) in _NODE_FIELDS.items()}
    free, nfree = grown_free_stack(np.zeros(0, np.int64), 0, 0, capacity)
    return Nodes(**fields, free=free, meta=np.array([nfree, 0, 0], np.int64))


#: The fields a free node must hold (``free_node`` sets them; ``depth`` -1 marks it free):
#: a grown pool sets only these in its new rows, ``allocate_node`` sets every field. Filling
#: the rest touched every page of the new half (an icoseptree pool of 27,664 nodes grew in
#: 5.1-7.8 ms, 0.7-3.1 without: a stall in the frame whose upkeep ran out of nodes).
FREE_NODE_FIELDS = ("parent", "depth", "is_split", "dirty")


def grow_nodes(nd: Nodes, capacity: int) -> Nodes:
    """A copy of the pool with room for ``capacity`` nodes; new nodes go on the free stack
    below the old free ones, so that freed nodes (warm in the cache) are reused first."""
    fields = {name: grown(getattr(nd, name), capacity,
                          fill if name in FREE_NODE_FIELDS else None)
              for name, (_dt, _row, fill) in _NODE_FIELDS.items()}
    free, nfree = grown_free_stack(nd.free, int(nd.meta[META_NFREE]), nd.parent.shape[0],
                                   capacity)
    meta = nd.meta.copy()
    meta[META_NFREE] = nfree
    meta[META_WANT_GROW] = 0
    return Nodes(**fields, free=free, meta=meta)


def new_pending(capacity: int) -> Pending:
    """An empty pending list for a pool of ``capacity`` nodes."""
    return Pending(np.zeros(capacity, np.bool_), np.full(capacity, -1, np.int32),
                   np.zeros(1, np.int64), np.zeros(capacity, np.uint8))


def grow_pending(pd: Pending, capacity: int) -> Pending:
    """A copy of the pending list for a pool grown to ``capacity`` nodes."""
    return Pending(grown(pd.noted, capacity, False), grown(pd.pending, capacity, -1),
                   pd.count.copy(), grown(pd.waited, capacity, 0))


# ---------------------------------------------------------------------- node pool

@njit(cache=True, _nrt=False)
def allocate_node(nd, parent: int) -> int:
    """Pop a node off the free stack and reset it as an empty leaf under ``parent`` (-1 if full)."""
    nfree = nd.meta[META_NFREE]
    if nfree == 0:
        return -1
    n = nd.free[nfree - 1]
    nd.meta[META_NFREE] = nfree - 1
    nd.parent[n] = parent
    nd.slot_in_parent[n] = -1
    for j in range(nd.child.shape[1]):
        nd.child[n, j] = -1
    nd.nchild[n] = 0
    nd.start[n] = -1
    nd.cap[n] = 0
    nd.kept[n] = -1
    nd.count[n] = 0
    nd.depth[n] = 0 if parent < 0 else nd.depth[parent] + 1
    nd.is_split[n] = False
    nd.dirty[n] = False
    nd.axis[n] = 0
    for a in range(3):
        nd.lo[n, a] = np.inf
        nd.hi[n, a] = -np.inf
        nd.split[n, a] = 0.0
        nd.plo[n, a] = np.inf
        nd.phi[n, a] = -np.inf
    nd.maxvd[n] = -np.inf
    nd.outcome[n] = 0
    return n


@njit(cache=True, inline="always")
def free_node(nd, n: int) -> None:
    """Push a node back on the free stack (the caller has unlinked it from its parent)."""
    nd.depth[n] = -1
    nd.parent[n] = -1
    nd.is_split[n] = False
    nd.dirty[n] = False
    nd.free[nd.meta[META_NFREE]] = n
    nd.meta[META_NFREE] += 1


@njit(cache=True, _nrt=False)
def attach_child(nd, n: int, c: int) -> int:
    """Create child ``c`` of node ``n`` (an empty leaf)."""
    ch = allocate_node(nd, np.int64(n))
    nd.child[n, c] = ch
    nd.slot_in_parent[ch] = c
    nd.nchild[n] += 1
    return ch


@njit(cache=True, _nrt=False)
def room_to_place(nd, ob, n: int, leaf: bool) -> bool:
    """``blocks.make_room``, and for a new leaf under n a free node too: False, with the room
    asked for (``META_WANT_GROW`` for the node), when either lacks. Inserts and moves then
    grow the pool when it runs out, not ahead of each batch by its worst case (one leaf per
    object), which doubled pools a third used."""
    if leaf and nd.meta[META_NFREE] == 0:
        nd.meta[META_WANT_GROW] = 1
        return False
    return make_room(nd, ob, n, leaf)


# ---------------------------------------------------------------------- boxes

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


# ---------------------------------------------------------------------- structure

@njit(cache=True, _nrt=False)
def find_place(child, is_split, axis, split, lo, hi, keep: int, n: int,
               cx: float, cy: float, cz: float, r: float) -> tuple[int, int]:
    """Follow the heuristic from n down the existing nodes (2.1.2).

    Returns (node, c): the object goes to ``node`` when c is -1, else to a new child c of it.
    ``keep`` is the non-leafy rule (heuristics.KEEP_*), read against the box rows lo/hi.
    Takes the pool's arrays rather than the pool tuple: in numba a call that passes the whole
    tuple costs far more than this walk. Not inlined: the heuristic's code is large and
    inlining it slows every caller's loop, while most moves never need it.
    """
    while True:
        if not is_split[n]:
            return n, -1
        c = which_child(child, is_split, axis, split, lo, hi, keep, np.int64(n), cx, cy, cz, r)
        if c < 0:
            return n, -1
        ch = child[n, c]
        if ch < 0:
            return n, c
        n = ch


@njit(cache=True, _nrt=False)
def climb_to_cover(lo, hi, parent, x: int, lx: float, ly: float, lz: float, hx: float,
                   hy: float, hz: float) -> int:
    """The first node from x up whose box (rows of lo, hi) contains [l, h]; the root at worst.

    Where a moved object's search for its new node starts (2.1.4).
    """
    while x != ROOT and not box_contains(lo, hi, x, lx, ly, lz, hx, hy, hz):
        x = parent[x]
    return x


@njit(cache=True)
def new_leaf(nd, n: int, c: int, cx: float, cy: float, cz: float) -> int:
    """Create child c of n as an empty leaf for an object centred at (cx, cy, cz)."""
    ch = attach_child(nd, np.int64(n), c)
    # Seed the split point for fragmentation avoidance until the leaf is refitted.
    nd.split[ch, 0] = cx
    nd.split[ch, 1] = cy
    nd.split[ch, 2] = cz
    return ch


@njit(cache=True, inline="always")
def reset_root(nd) -> None:
    """An empty tree: the root is an unsplit leaf with an empty box."""
    nd.is_split[ROOT] = False
    nd.dirty[ROOT] = False
    for a in range(3):
        nd.lo[ROOT, a] = np.inf
        nd.hi[ROOT, a] = -np.inf
        nd.plo[ROOT, a] = np.inf
        nd.phi[ROOT, a] = -np.inf
    nd.maxvd[ROOT] = -np.inf


@njit(cache=True, inline="always")
def is_empty_node(count, nchild, n: int) -> bool:
    """Node n holds no object and has no child (garbage unless it is the root)."""
    return (count[n] == 0) & (nchild[n] == 0)


@njit(cache=True, inline="always")
def free_empty_node(nd, n: int) -> int:
    """Free empty non-root node n and take it out of its parent, which is unsplit when left
    without children; returns the parent."""
    p = nd.parent[n]
    nd.child[p, nd.slot_in_parent[n]] = -1
    nd.nchild[p] -= 1
    if nd.nchild[p] == 0:
        nd.is_split[p] = False
    free_node(nd, n)
    return p


@njit(cache=True)
def collect_garbage(nd, n: int, dirty: bool = True) -> None:
    """Free empty leaves from n upwards; a parent left without children is unsplit (2.1.3).
    ``dirty``: mark each parent for a refit (ours; the paper's ``TestSuicide`` does not)."""
    while n != ROOT and is_empty_node(nd.count, nd.nchild, n):
        n = free_empty_node(nd, n)
        if dirty:
            nd.dirty[n] = True  # its box may shrink now
    if is_empty_node(nd.count, nd.nchild, n):  # only the root stops the loop empty
        reset_root(nd)


@njit(cache=True)
def split_node(nd, ob, sp, n: int, rules, later=None) -> int:
    """Split leaf n around the mean of its centers (2.1.1); 1 split, 2 pathological, 0 no room.

    ``later`` (:func:`new_later`; the upkeep's) defers the moved slots' places (``node``,
    ``pos``): n and its children go on it and :func:`place_later` writes their blocks' places
    once the upkeep call ends. A slot's place is a line anywhere in the store, so writing it
    at every level of a catch-up cost a cache miss per object and level; once at the end, it
    is one per object. Nothing between reads a place (only moves, removals and validate do).

    The caller has refitted n (the non-leafy rule and the K-D axis read its box). When every
    object would go to the same child, nothing moves and n stays marked split, so it is not
    split again (the children would be copies of n).

    The paper mode's bits (``rules.flags``) switch in appendix A's ``DoSplit``: the split point
    is the mean of ``pos + (r, r, r)`` (PAPER_SPLIT_POINT), the K-D / ternary axis goes to Z on
    ties (PAPER_AXIS), and with PAPER_LAZY the pathological case has the listing's side
    effect: its objects are taken back from the child one by one with ``RemoveNode``, whose
    ``ShrinkExtents`` invalidates n's box (and every ancestor's the objects are flush with),
    so the next visit re-centres n's split point on the mean of its centres (DEFRAG).
    """
    k = nd.child.shape[1]
    if nd.meta[META_NFREE] < k:
        nd.meta[META_WANT_GROW] = 1
        return 0
    centers = sp.centers
    radii = sp.radii
    keep = rules.keep
    flags = rules.flags
    shift = (flags & PAPER_SPLIT_POINT) != 0
    # Our mode reads the block's float32 records in order (the heuristic's choice needs no
    # exact centre; the children's boxes are widened, see the module's docstring); the
    # paper's lazy mode reads the exact spheres from the store.
    exact = (flags & PAPER_LAZY) != 0
    # The pool's arrays as locals: numba reference-counts every array of a tuple at each use
    # or call inside a loop, even of an inlined helper. Through the tuples (17 arrays in the
    # pool) the first query of 10^6 objects took 2.2 s (kd), mostly in this function.
    child, is_split, axis, split, lo, hi = nd.child, nd.is_split, nd.axis, nd.split, nd.lo, nd.hi
    slot, ident, rec, vdp, pos, node = ob.slot, ob.ident, ob.rec, ob.vd, ob.pos, ob.node
    b = nd.start[n]
    m = nd.count[n]
    sx = 0.0
    sy = 0.0
    sz = 0.0
    for p in range(b, b + m):
        cx, cy, cz, r = block_sphere(exact, rec, slot, centers, radii, p)
        r = r if shift else 0.0
        sx += cx + r
        sy += cy + r
        sz += cz + r
    split[n, 0] = sx / m
    split[n, 1] = sy / m
    split[n, 2] = sz / m
    # K-D and ternary cut across the longest axis of the box.
    axis[n] = split_axis(hi[n, 0] - lo[n, 0], hi[n, 1] - lo[n, 1], hi[n, 2] - lo[n, 2],
                         (flags & PAPER_AXIS) != 0)
    is_split[n] = True

    # Pass 1: every object's child (-1: stays at n); are the objects separated at all?
    which = np.empty(m, np.int64)
    per_child = np.zeros(k, np.int64)
    first = -2
    separated = False
    # The node's heuristic inputs as scalars, read once: which_child per object passed six
    # arrays a call (kd at 10^6: this pass 9 -> 6 ns an object; child_index's branch-free
    # choice took it to 2.6).
    a, px, py, pz = axis[n], split[n, 0], split[n, 1], split[n, 2]
    box = box_volume(lo, hi, n)
    for i in range(m):
        cx, cy, cz, r = block_sphere(exact, rec, slot, centers, radii, b + i)
        c = child_index(k, keep, a, px, py, pz, box, cx, cy, cz, r)
        which[i] = c
        if c >= 0:
            per_child[c] += 1
        separated |= c < 0 or (first >= 0 and c != first)
        first = c
    if not separated:
        if flags & PAPER_LAZY:
            vdist = sp.vdist
            maxvd, parent, dirty = nd.maxvd, nd.parent, nd.dirty
            for p in range(b, b + m):
                s = slot[p]
                invalidate_up(lo, hi, maxvd, parent, dirty, np.int64(n), centers[s, 0],
                              centers[s, 1], centers[s, 2], radii[s], vdist[s], 0.0)
        return 2
    taken = take_blocks(ob, per_child)
    if taken[0] == NO_ROOM:
        is_split[n] = False  # (the caller makes room and splits again)
        nd.meta[META_WANT_GROW] = 1
        return 0

    # Pass 2: each child with its block, each object's record copied to its child's block;
    # the ones that stay close up at the front of n's block.
    for c in range(k):
        if per_child[c] > 0:
            ch = attach_child(nd, np.int64(n), c)
            nd.start[ch] = taken[c]
            nd.cap[ch] = 1 << block_class(per_child[c])
    kept = 0
    last = b + m - 1
    for i in range(m):
        if (i & 3) == 0:  # the records ahead, a line at a time (prefetch.STREAM_AHEAD)
            ahead = min(b + i + STREAM_AHEAD, last)
            prefetch(rec, ahead)
            if (i & 7) == 0:
                prefetch(which, min(i + STREAM_AHEAD, m - 1))
                if (i & 15) == 0:
                    prefetch(slot, ahead)
                    prefetch(vdp, ahead)
        if later is None and i + PREFETCH_AHEAD < m:
            # A later object's place (node and position share a line, by slot: anywhere in
            # the store), which its move rewrites: a cache miss an object, most of a split.
            prefetch(node, slot[b + i + PREFETCH_AHEAD])
        c = which[i]
        if c >= 0:
            ch = child[n, c]
            q = nd.start[ch] + nd.count[ch]
            if later is None:
                move_record(slot, ident, rec, vdp, pos, q, b + i)
                node[slot[q]] = ch
            else:
                copy_record(slot, ident, rec, vdp, q, b + i)
            nd.count[ch] += 1
        else:
            if kept != i:
                if later is None:
                    move_record(slot, ident, rec, vdp, pos, b + kept, b + i)
                else:
                    copy_record(slot, ident, rec, vdp, b + kept, b + i)
            kept += 1
    nd.count[n] = kept
    if later is not None:
        place_later_note(later, n)
        for j in range(k):
            if child[n, j] >= 0:
                place_later_note(later, child[n, j])
    if kept == 0:
        give_block(ob, b, nd.cap[n])
        nd.start[n] = -1
        nd.cap[n] = 0
    # The children's boxes lie inside n's box, which does not change: n still bounds them all.
    for j in range(k):
        ch = child[n, j]
        if ch >= 0:
            if exact:
                refit_node(nd, ob, sp, np.int64(ch), rules.threshold)
            else:
                refit_block(nd, ob, sp, np.int64(ch), rules.threshold)
    return 1


@njit(cache=True)
def split_step(nd, ob, sp, n: int, rules, budget: int, later) -> tuple[int, int]:
    """Split node n within about ``budget`` objects of work: (code, objects spent), code as
    :func:`split_node`'s (0 no room, 1 split, 2 pathological) or 3: under way, call again.

    A node of at most ``budget`` objects is split at once (:func:`split_node`). A larger one
    is split over several calls, so that no upkeep call stalls a frame: the first call sets
    its split point (the mean of its float32 centres) and marks it split, and every call
    hands up to ``budget`` objects from the end of its block to their children, the ones
    that stay moving to the front (``kept``). Meanwhile the node holds children and objects
    not yet handed down, which every query already reads (a non-leafy node does the same),
    so answers stay exact. A split that sent every object to one child is undone at the end,
    as :func:`split_node` refuses it at the start.
    """
    k = nd.child.shape[1]
    if nd.meta[META_NFREE] < k:
        nd.meta[META_WANT_GROW] = 1
        return 0, 0
    if nd.kept[n] < 0:
        m = nd.count[n]
        if m <= budget:
            return split_node(nd, ob, sp, n, rules, later), m + 1
        _start_split(nd, ob, n, rules)
    return _hand_down(nd, ob, sp, n, rules, budget)


@njit(cache=True, _nrt=False)
def _start_split(nd, ob, n: int, rules) -> None:
    """Split point (mean of the float32 centres, plus the radius with PAPER_SPLIT_POINT) and
    axis of node n, marked split with nothing handed down yet."""
    b = nd.start[n]
    m = nd.count[n]
    shift = (rules.flags & PAPER_SPLIT_POINT) != 0
    rec = ob.rec
    sx = 0.0
    sy = 0.0
    sz = 0.0
    for p in range(b, b + m):
        r = np.float64(rec[p, 3]) if shift else 0.0
        sx += rec[p, 0] + r
        sy += rec[p, 1] + r
        sz += rec[p, 2] + r
    nd.split[n, 0] = sx / m
    nd.split[n, 1] = sy / m
    nd.split[n, 2] = sz / m
    nd.axis[n] = split_axis(nd.hi[n, 0] - nd.lo[n, 0], nd.hi[n, 1] - nd.lo[n, 1],
                            nd.hi[n, 2] - nd.lo[n, 2], (rules.flags & PAPER_AXIS) != 0)
    nd.is_split[n] = True
    nd.kept[n] = 0


@njit(cache=True)
def _hand_down(nd, ob, sp, n: int, rules, budget: int) -> tuple[int, int]:
    """Up to ``budget`` objects of node n's block, from its end, to their children (see
    :func:`split_step`); a child's box grows by each object it gets (by its record's widened
    bounds in our mode), so it is clean."""
    centers, radii, vdist = sp
    child, is_split, axis, split, lo, hi = nd.child, nd.is_split, nd.axis, nd.split, nd.lo, nd.hi
    start, cap, count, maxvd = nd.start, nd.cap, nd.count, nd.maxvd
    slot, ident, rec, vdp, pos, node = ob.slot, ob.ident, ob.rec, ob.vd, ob.pos, ob.node
    keep = rules.keep
    exact = (rules.flags & PAPER_LAZY) != 0  # (as split_node)
    kept = min(nd.kept[n], count[n])  # (moves and removals may have taken some)
    done = 0
    while kept < count[n] and done < budget:
        q = start[n] + count[n] - 1
        if q - PREFETCH_AHEAD >= start[n] + kept:  # a later object's place (see split_node)
            prefetch(node, slot[q - PREFETCH_AHEAD])
        s = slot[q]
        cx, cy, cz, r = block_sphere(exact, rec, slot, centers, radii, q)
        c = which_child(child, is_split, axis, split, lo, hi, keep, np.int64(n), cx, cy, cz, r)
        if c < 0:
            swap_records(slot, ident, rec, vdp, pos, start[n] + kept, q)
            kept += 1
        else:
            ch = child[n, c]
            if ch < 0:
                if not room_for_leaf(ob):
                    nd.kept[n] = kept
                    nd.meta[META_WANT_GROW] = 1
                    return 0, done
                ch = new_leaf(nd, np.int64(n), c, cx, cy, cz)
                grow_block(nd, ob, ch)
            elif count[ch] == cap[ch] and not grow_block(nd, ob, ch):
                nd.kept[n] = kept
                nd.meta[META_WANT_GROW] = 1
                return 0, done
            if exact:
                lx, ly, lz, hx, hy, hz = sphere_box(cx, cy, cz, r)
                v = vdist[s]
            else:
                lx, ly, lz, hx, hy, hz, v = record_bounds(rec, vdp, slot, centers, radii, vdist, q)
            # (up the tree: a widened record may stand out of n's box where it is exact)
            grow_box_up(lo, hi, maxvd, nd.parent, ch, lx, ly, lz, hx, hy, hz, v)
            move_record(slot, ident, rec, vdp, pos, start[ch] + count[ch], q)
            node[s] = ch
            count[ch] += 1
            count[n] -= 1
        done += 1
    if kept < count[n]:
        nd.kept[n] = kept
        return 3, done
    nd.kept[n] = -1
    if count[n] == 0:
        if cap[n] > 0:
            give_block(ob, start[n], cap[n])
            start[n] = -1
            cap[n] = 0
        if nd.nchild[n] == 1 and _undo_split(nd, ob, n):
            return 2, done
    return 1, done


@njit(cache=True)
def _undo_split(nd, ob, n: int) -> bool:
    """Node n handed every object to one child: take that child's block back and free it;
    n stays marked split without children, so it is not split again (as split_node). Not
    when that child has children of its own (it was split meanwhile, and separated its
    objects: the split was no copy of n); returns whether it undid."""
    for j in range(nd.child.shape[1]):
        ch = nd.child[n, j]
        if ch >= 0:
            if nd.nchild[ch] > 0:
                return False
            nd.start[n] = nd.start[ch]
            nd.cap[n] = nd.cap[ch]
            nd.count[n] = nd.count[ch]
            for p in range(nd.start[n], nd.start[n] + nd.count[n]):
                ob.node[ob.slot[p]] = n
            nd.start[ch] = -1
            nd.cap[ch] = 0
            nd.count[ch] = 0
            free_empty_node(nd, ch)
    nd.is_split[n] = True
    return True


@njit(cache=True, inline="always")
def split_limit(rules) -> int:
    """The object count above which a query splits a leaf: the threshold, or one less with
    PAPER_THRESHOLD (the listing splits at ``size() >= s_splitval``)."""
    if rules.flags & PAPER_THRESHOLD:
        return rules.threshold - 1
    return rules.threshold


@njit(cache=True, inline="always")
def reach_rules(rules) -> tuple[bool, int]:
    """How a query treats the nodes it reaches: (the paper mode's GetExtents on every one,
    i.e. PAPER_LAZY; the object count above which a leaf is split)."""
    return (rules.flags & PAPER_LAZY) != 0, split_limit(rules)


@njit(cache=True, inline="always")
def needs_split(is_split, count, n: int, threshold: int) -> bool:
    """n is an unsplit leaf holding more objects than the threshold (2.1.1).

    Takes two arrays, not the pool: the queries ask it at every node they reach, and numba
    reference-counts every array of a tuple handed to an inlined helper.
    """
    return (not is_split[n]) & (count[n] > threshold)


# ---------------------------------------------------------------------- batches

@njit(cache=True)
def find_places(child, is_split, axis, split, lo, hi, keep: int, sp, slots):
    """:func:`find_place` from the root for every slot of a batch (:func:`descend`). Returns
    (node, c) arrays as find_place's pair."""
    centers, radii, _ = sp
    m = slots.shape[0]
    # The batch's spheres in order first: each level's pass reads them again.
    sph = np.empty((m, 4))
    for i in range(m):
        if i + PREFETCH_AHEAD < m:  # (a batch's new rows lie anywhere in the store)
            prefetch(centers, slots[i + PREFETCH_AHEAD])
            prefetch(radii, slots[i + PREFETCH_AHEAD])
        s = slots[i]
        sph[i, 0] = centers[s, 0]
        sph[i, 1] = centers[s, 1]
        sph[i, 2] = centers[s, 2]
        sph[i, 3] = radii[s]
    at = np.full(m, ROOT, np.int64)
    return at, descend(child, is_split, axis, split, lo, hi, keep, sph, at)


@njit(cache=True)
def descend(child, is_split, axis, split, lo, hi, keep: int, sph, at):
    """:func:`find_place` for the spheres ``sph`` (rows cx, cy, cz, r), each from its node in
    ``at``, the descents interleaved: a pass over the batch takes every unfinished object one
    level down. Leaves in ``at`` where each stops and returns its c (find_place's pair).

    One descent is a chain of dependent loads (a node's split, then its child) and an
    unpredictable branch a level: an insert's walk took 115-150 ns at 10^6 (kd/leafy's
    leaves 11-16 levels deep), nodes that the cache holds. Level by level, the objects' loads
    are independent and overlap. The boxes read by the non-leafy rules are the batch's
    starting ones (an insert or a move only grows boxes; any placement the rule allows is
    valid).
    """
    m = sph.shape[0]
    c_of = np.full(m, -1, np.int64)
    todo = np.arange(m)
    left = m
    k = child.shape[1]
    kd = k == 2 and keep == KEEP_NONE
    while left > 0:
        kept = 0
        for j in range(left):
            i = todo[j]
            n = at[i]
            if not is_split[n]:
                continue
            a = axis[n]
            if kd:
                # The side by the node's axis as an index (child_index picks the coordinate
                # with branches, unpredictable as the axes vary from level to level): 80-105
                # -> 74-79 ns an object's walk at 10^6, kd/leafy.
                c = np.int64(sph[i, a] >= split[n, a])
            else:
                box = box_volume(lo, hi, n) if keep != KEEP_NONE else 0.0
                c = child_index(k, keep, a, split[n, 0], split[n, 1], split[n, 2], box,
                                sph[i, 0], sph[i, 1], sph[i, 2], sph[i, 3])
            if c < 0:
                continue
            ch = child[n, c]
            if ch < 0:
                c_of[i] = c
                continue
            at[i] = ch
            todo[kept] = i
            kept += 1
        left = kept
    return c_of


@njit(cache=True)
def insert_objects(nd, ob, sp, slots, ids, keep: int) -> int:
    """Insert new slots (the store's ids by slot: ``ids``): descend with the heuristic, add
    to the node's block, grow boxes up (2.1.2). Returns how many were inserted: fewer than
    all when the heap ran out of room (meta[META_NEED] says how much; the caller repacks and
    calls again with the rest).

    The places are found first for the whole batch (:func:`find_places`); an object whose
    place was a new child that an earlier object of the batch has since made goes into that
    leaf, as its own descent would have. Knowing each place ahead, the loop asks for the
    block end it appends to (four lines a record) a few objects early.
    """
    # The arrays out of their tuples once: numba counts references at every use in the loop.
    centers, radii, vdist = sp
    child, is_split, axis, split, lo, hi = nd.child, nd.is_split, nd.axis, nd.split, nd.lo, nd.hi
    maxvd, parent = nd.maxvd, nd.parent
    start, cap, count = nd.start, nd.cap, nd.count
    node, pos, slot, ident, rec, vd = ob.node, ob.pos, ob.slot, ob.ident, ob.rec, ob.vd
    at, c_of = find_places(child, is_split, axis, split, lo, hi, keep, sp, slots)
    m = slots.shape[0]
    for i in range(m):
        if i + PREFETCH_AHEAD < m:  # a later object's store rows, place and block end
            t = slots[i + PREFETCH_AHEAD]
            prefetch(centers, t)
            prefetch(radii, t)
            prefetch(vdist, t)
            prefetch(node, t)
            prefetch(ids, t)
            u = at[i + PREFETCH_AHEAD]
            if c_of[i + PREFETCH_AHEAD] < 0 and start[u] >= 0:
                prefetch_position(slot, ident, rec, vd, start[u] + count[u])
        s = slots[i]
        cx, cy, cz, r = slot_sphere(centers, radii, s)
        n = at[i]
        c = c_of[i]
        if c >= 0 and child[n, c] >= 0:
            n = child[n, c]  # (a new unsplit leaf: its own descent would stop there)
            c = -1
        if (c >= 0 or count[n] == cap[n]) and not room_to_place(nd, ob, n, c >= 0):
            return i
        if c >= 0:
            n = new_leaf(nd, np.int64(n), c, cx, cy, cz)
            grow_block(nd, ob, n)
        append_record(start, count, node, slot, ident, rec, vd, pos, n, s, sp, ids[s])
        grow_up(lo, hi, maxvd, parent, n, cx, cy, cz, r, vdist[s])
    return slots.shape[0]


@njit(cache=True)
def remove_objects(nd, ob, sp, slots, rules) -> None:
    """Remove slots: mark the boxes their spheres were flush against (within the tree's
    slack, :func:`box_slack`) for recomputation, take them out of their blocks, collect
    empty nodes (2.1.3) the tree's way (the paper's lazy mode marks no parent dirty).

    Takes the rules, not the collecting function: a function passed as an argument is typed
    by its dispatcher object, which differs in every process, so numba compiled this kernel
    again in every process and added it to its cache each time (29 copies of one version
    after a day's work, and a cache whose index then failed to save: "underlying object has
    vanished")."""
    lazy = (rules.flags & PAPER_LAZY) != 0
    slack = 0.0 if lazy else BOX_SLACK
    # The arrays out of their tuples once: numba counts references at every use in the loop.
    centers, radii, vdist = sp
    lo, hi, maxvd, parent, dirty = nd.lo, nd.hi, nd.maxvd, nd.parent, nd.dirty
    start, cap, count = nd.start, nd.cap, nd.count
    node, pos, slot, ident, rec, vd = ob.node, ob.pos, ob.slot, ob.ident, ob.rec, ob.vd
    m = slots.shape[0]
    ahead = PREFETCH_AHEAD
    for i in range(m):
        # A later object's lines: its slot's (and, in the paper's mode, its store rows), then
        # (its node and position in) its record, the record that will fill its place and its
        # node's box.
        if i + ahead < m:
            t = slots[i + ahead]
            prefetch(node, t)
            if lazy:
                prefetch(centers, t)
                prefetch(radii, t)
                prefetch(vdist, t)
        if i + ahead // 2 < m:
            t = slots[i + ahead // 2]
            u = node[t]
            prefetch_position(slot, ident, rec, vd, pos[t])
            prefetch_position(slot, ident, rec, vd, start[u] + count[u] - 1)
            prefetch(lo, u)
            prefetch(hi, u)
        if i + ahead // 4 < m:
            # The slot whose record fills the hole: its position is rewritten.
            t = slots[i + ahead // 4]
            u = node[t]
            prefetch(pos, slot[start[u] + count[u] - 1])
        s = slots[i]
        n = node[s]
        p = pos[s]
        if lazy:  # the listing's exact extents
            cx, cy, cz, r = slot_sphere(centers, radii, s)
            v = vdist[s]
        else:
            # The record's sphere, widened to hold the exact one (record_bounds): the flush
            # test only grows more cautious, and the store's three rows (a cache miss each
            # at 10^6) are not read.
            lx, ly, lz, hx, hy, hz, v = record_bounds(rec, vd, slot, centers, radii, vdist, p)
            cx, cy, cz = (lx + hx) * 0.5, (ly + hy) * 0.5, (lz + hz) * 0.5
            r = max(hx - cx, hy - cy, hz - cz)
        invalidate_up(lo, hi, maxvd, parent, dirty, np.int64(n), cx, cy, cz, r, v, slack)
        if cut_record(start, cap, count, slot, ident, rec, vd, pos, n, p):
            fit_block(nd, ob, n)
        node[s] = -1
        pos[s] = -1
        if is_empty_node(count, nd.nchild, n):
            collect_garbage(nd, n, not lazy)


@njit(cache=True)
def update_objects(nd, ob, sp, slots, new_c, new_r, new_v, keep: int) -> tuple[int, int]:
    """Move slots (2.1.4) to the checked values ``new_c``, ``new_r``, ``new_v`` (row i for
    slots[i]; the radii and view distances None where the batch leaves them alone: numba
    compiles each combination apart, the dead branches removed), writing the store as it goes;
    returns (how many were done, how many changed node). Fewer are done than given when the
    heap ran out of room (as :func:`insert_objects`): every mover before the count is done;
    from there on, a mover that stayed in its leaf may be done too (given again, it is moved
    to where it is, which changes nothing but, at worst, marks a box for a refit) and every
    other one has its store unwritten.

    The store's write is this loop's, not a pass of its own before it: a mover's store rows
    are among the lines its move reads anyway (its old sphere for the flush test), and a
    separate pass fetched them once to write them and again here once evicted (10^4 movers
    of 10^6 touch about 3 MB of lines).

    Fast path (most small moves): the new bounds still fit the box of the object's node, and
    that node is a leaf or the heuristic keeps the object there, so the object stays and no
    box grows (a view distance past the node's bound grows the bounds up the tree): its
    float32 record is rewritten where it is, and only the old sphere's flush test remains.
    The others (escapes) are moved after that pass, in :func:`move_escapes`.
    """
    # The arrays out of their tuples once: numba counts references at every use in the loop.
    centers, radii, vdist = sp
    lo, hi, maxvd, parent, dirty = nd.lo, nd.hi, nd.maxvd, nd.parent, nd.dirty
    is_split = nd.is_split
    node, pos, rec, vdp = ob.node, ob.pos, ob.rec, ob.vd
    n = slots.shape[0]
    # The escapes by batch row, and for each the node its new bounds climbed to (2.1.4).
    esc = np.empty(n, np.int64)
    esc_at = np.empty(n, np.int64)
    ne = 0
    ahead = 2 * PREFETCH_AHEAD  # (the lines of a fresh mover come from memory: a longer lead)
    for i in range(n):
        # A later mover's lines asked for now: its slot's (node and position share a line),
        # its store rows the batch writes; once its position and node are in, its record's
        # and its node's box.
        if i + ahead < n:
            t = slots[i + ahead]
            prefetch(node, t)
            prefetch(centers, t)
            if new_r is not None:
                prefetch(radii, t)
            if new_v is not None:
                prefetch(vdist, t)
        if i + ahead // 2 < n:
            t = slots[i + ahead // 2]
            prefetch(rec, pos[t])
            u = node[t]  # and its node's box (the pool of a big tree outgrows the cache)
            prefetch(lo, u)
            prefetch(hi, u)
            prefetch(maxvd, u)
        s = slots[i]
        x = node[s]
        # The old centre read and the new one written before the box test, an escape's put
        # back after it: written after the test, 10^4 cold movers (no escape) took 5-8 %
        # longer (the line's fetch for the write started late).
        ox = centers[s, 0]
        oy = centers[s, 1]
        oz = centers[s, 2]
        cx, cy, cz = moved_centre(i, s, new_c, centers)
        # A column the batch leaves alone is not read from the store here (a cache miss a
        # mover: 10^4 fresh movers of 10^6 took 0.82 ms reading both, 0.47 without): the
        # radius is the record's, rounded up (the box test and the flush test only grow more
        # cautious), and an unchanged view distance neither fails its node's bound nor leaves
        # it. An escape reads both exactly.
        if new_r is None:
            orad = r = record_radius_up(rec, pos[s])
        else:
            orad = radii[s]
            r = new_r[i]
        if new_v is None:
            ov = vd = -np.inf
        else:
            ov = vdist[s]
            vd = new_v[i]
        lx, ly, lz, hx, hy, hz = sphere_box(cx, cy, cz, r)
        stays = box_contains(lo, hi, np.int64(x), lx, ly, lz, hx, hy, hz)
        if stays and is_split[x]:
            # A non-leafy node's own object: it stays if the heuristic keeps it there.
            d, c = find_place(nd.child, is_split, nd.axis, nd.split, lo, hi, keep,
                              np.int64(x), cx, cy, cz, r)
            stays = (d == x) & (c < 0)
        if not stays:
            # Moved later, its store unwritten till then; the climb reads the boxes as they
            # stand now (they only grow in this call: a start a little high is still valid).
            centers[s, 0] = ox
            centers[s, 1] = oy
            centers[s, 2] = oz
            esc[ne] = i
            esc_at[ne] = climb_to_cover(lo, hi, parent, x, lx, ly, lz, hx, hy, hz)
            ne += 1
            continue
        # Same node, its box does not grow; invalidate_up returns at once unless the old
        # sphere was flush against x's box. Without radii in the batch the record keeps its
        # own radius.
        if new_r is not None:
            radii[s] = r
        if new_v is not None:
            vdist[s] = vd
        p = pos[s]
        rewrite_sphere(rec, vdp, p, cx, cy, cz, rec[p, 3] if new_r is None else r, ov, vd)
        invalidate_up(lo, hi, maxvd, parent, dirty, np.int64(x), ox, oy, oz, orad, ov,
                      BOX_SLACK)
        if vd > maxvd[x]:
            # A view distance past its node's bound: the bounds grow up the tree, the box
            # stays (as an escape's would when it lands where it was, without its pass).
            grow_up(lo, hi, maxvd, parent, np.int64(x), cx, cy, cz, r, vd)
    if ne == 0:
        return n, 0
    return move_escapes(nd, ob, sp, slots, new_c, new_r, new_v, keep, esc[:ne], esc_at[:ne])


@njit(cache=True)
def move_escapes(nd, ob, sp, slots, new_c, new_r, new_v, keep: int, esc, at):
    """The second pass of :func:`update_objects`: the movers (batch rows ``esc``) whose new
    bounds left their node's box, each from the node its bounds climbed to (``at``), down
    with the heuristic, into the block of the node it lands on (or its own node's box grown,
    when it lands where it was). Returns update_objects' pair.

    As a batch, not one by one in the first pass: an escape reads lines that no earlier step
    asked for (its hole and its block's last record, the block end it goes to, its exact
    radius and view distance: a dozen cache misses, 250-490 ns a teleport at 10^6), and here
    they are known ahead and asked for a few escapes early, as the inserts' and removals'
    are. Nodes emptied by the escapes are collected at the end (until then no node is freed,
    so every place found ahead stays a live node).
    """
    centers, radii, vdist = sp
    lo, hi, maxvd, parent, dirty = nd.lo, nd.hi, nd.maxvd, nd.parent, nd.dirty
    child = nd.child
    start, cap, count = nd.start, nd.cap, nd.count
    node, pos, slot, ident, rec, vdp = ob.node, ob.pos, ob.slot, ob.ident, ob.rec, ob.vd
    ne = esc.shape[0]
    ahead = PREFETCH_AHEAD
    # The escapes' new spheres (their exact radii: the descent's rules read them), then
    # their places, level by level.
    sph = np.empty((ne, 4))
    for j in range(ne):
        if new_r is None and j + ahead < ne:
            prefetch(radii, slots[esc[j + ahead]])
        i = esc[j]
        sph[j, 0] = new_c[i, 0]
        sph[j, 1] = new_c[i, 1]
        sph[j, 2] = new_c[i, 2]
        sph[j, 3] = radii[slots[i]] if new_r is None else new_r[i]
    c_of = descend(child, nd.is_split, nd.axis, nd.split, lo, hi, keep, sph, at)
    emptied = np.empty(ne, np.int64)
    ng = 0
    moved = 0
    done = slots.shape[0]
    for j in range(ne):
        # A later escape's lines: its slot's and store rows; then its record (the hole) and
        # the last record of its block (which fills the hole), and the block end it goes to;
        # then the position of the slot whose record fills the hole.
        if j + ahead < ne:
            t = slots[esc[j + ahead]]
            prefetch(node, t)
            prefetch(centers, t)
            prefetch(radii, t)
            prefetch(vdist, t)
        if j + ahead // 2 < ne:
            t = slots[esc[j + ahead // 2]]
            u = node[t]
            prefetch_position(slot, ident, rec, vdp, pos[t])
            prefetch_position(slot, ident, rec, vdp, start[u] + count[u] - 1)
            w = at[j + ahead // 2]
            if c_of[j + ahead // 2] < 0 and start[w] >= 0:
                prefetch_position(slot, ident, rec, vdp, start[w] + count[w])
        if j + ahead // 4 < ne:
            t = slots[esc[j + ahead // 4]]
            u = node[t]
            prefetch(pos, slot[start[u] + count[u] - 1])
        i = esc[j]
        s = slots[i]
        x = node[s]
        ox = centers[s, 0]
        oy = centers[s, 1]
        oz = centers[s, 2]
        orad = radii[s]
        ov = vdist[s]
        r = orad if new_r is None else new_r[i]
        vd = ov if new_v is None else new_v[i]
        d = at[j]
        c = c_of[j]
        if c >= 0 and child[d, c] >= 0:
            d = child[d, c]  # (a leaf an earlier escape made: its own descent would stop there)
            c = -1
        if (c >= 0 or (d != x and count[d] == cap[d])) and not room_to_place(nd, ob, d,
                                                                                  c >= 0):
            done = i  # stopped before this escape: its store rows as they were
            break
        cx, cy, cz = moved_centre(i, s, new_c, centers)
        if new_r is not None:
            radii[s] = r
        if new_v is not None:
            vdist[s] = vd
        if c >= 0:
            d = new_leaf(nd, np.int64(d), c, cx, cy, cz)
            grow_block(nd, ob, d)
        invalidate_up(lo, hi, maxvd, parent, dirty, np.int64(x), ox, oy, oz, orad, ov,
                      BOX_SLACK)
        if d != x:
            # Added first, so that the shrink of x's block cannot take the room d was given.
            p = pos[s]
            append_record(start, count, node, slot, ident, rec, vdp, pos, d, s, sp, ident[p])
            if cut_record(start, cap, count, slot, ident, rec, vdp, pos, x, p):
                fit_block(nd, ob, x)
            moved += 1
            if is_empty_node(count, nd.nchild, x):
                emptied[ng] = x
                ng += 1
        else:
            rewrite_sphere(rec, vdp, pos[s], cx, cy, cz, r, ov, vd)
        grow_up(lo, hi, maxvd, parent, d, cx, cy, cz, r, vd)
    for k in range(ng):
        x = emptied[k]
        # (refilled when a later escape landed there; a node is listed once, and only as a
        # leaf, so no earlier collection can have freed it: the depth check is a guard)
        if nd.depth[x] >= 0 and is_empty_node(count, nd.nchild, x):
            collect_garbage(nd, x)
    return done, moved


# ---------------------------------------------------------------------- upkeep

@njit(cache=True, inline="always")
def note_node(noted, pending, npend, n: int) -> None:
    """Put node n on the upkeep's pending list (npend: its one-element count), unless it is
    there already."""
    if not noted[n]:
        noted[n] = True
        pending[npend[0]] = n
        npend[0] += 1


@njit(cache=True)
def maintain(nd, ob, sp, rules, budget: int, planes, pd, patience: int) -> int:
    """The upkeep (:func:`upkeep`), the places of the slots its splits moved written once at
    the end (:func:`place_later`). Returns the objects spent."""
    later = new_later(nd.depth.shape[0])
    spent = upkeep(nd, ob, sp, rules, budget, planes, pd, patience, later)
    place_later(nd, ob, later)
    return spent


@njit(cache=True)
def new_later(capacity: int):
    """The nodes whose blocks' places a split deferred (:func:`split_node`): a stack, its
    height, a mark per node of a pool of ``capacity`` (the pool does not grow during an
    upkeep call: a split that lacks nodes stops it)."""
    return np.empty(capacity, np.int64), np.zeros(1, np.int64), np.zeros(capacity, np.bool_)


@njit(cache=True, inline="always")
def place_later_note(later, n: int) -> None:
    """Put node n on ``later`` (once)."""
    stack, height, mark = later
    if not mark[n]:
        mark[n] = True
        stack[height[0]] = n
        height[0] += 1


@njit(cache=True, _nrt=False)
def place_later(nd, ob, later) -> None:
    """Write the place (node, position) of every slot in the blocks of the nodes on
    ``later``, as they are now: where each moved slot ended after all the upkeep's splits
    (a node freed since is skipped; one reused since holds its new objects)."""
    stack, height, mark = later
    node, pos, slot = ob.node, ob.pos, ob.slot
    depth, start, count = nd.depth, nd.start, nd.count
    for j in range(height[0]):
        t = stack[j]
        mark[t] = False
        if depth[t] < 0:
            continue
        b = start[t]
        m = count[t]
        for p in range(b, b + m):
            if p + PREFETCH_AHEAD < b + m:
                prefetch(node, slot[p + PREFETCH_AHEAD])
            s = slot[p]
            node[s] = t
            pos[s] = p
    height[0] = 0


@njit(cache=True)
def upkeep(nd, ob, sp, rules, budget: int, planes, pd, patience: int, later) -> int:
    """The upkeep: refit and split the nodes queries noted, within ``budget`` objects; a
    dirty node (not overfull, no split under way) is refitted only once queries have noted
    it ``patience`` times (1: at once; at most 255), our mode only.

    Takes nodes off the pending list last-noted first (a traversal notes parents before
    children, so children are refitted before their parents read their boxes). A refit or a
    split costs the node's objects plus one; a split bigger than what is left of the budget
    (at least MIN_STEP) goes on over calls (:func:`split_step`), its node put back first in
    line, so every call makes progress and none does much more than its budget. A node
    freed since it was noted, or no longer dirty nor overfull, is dropped. The children of a
    split that are overfull and not outside ``planes`` (the last frustum query's, empty
    before any) are noted in turn: the split carries on the descent that query would have
    made into them, as when queries split. A split not under way of a node the last query's
    view has left (``planes``, with the band :func:`near_view` adds) is dropped. Stops, the
    node back on the list, when a split lacks free nodes or heap room (``META_WANT_GROW``;
    the caller makes room and calls again). Returns the objects spent.
    """
    limit = split_limit(rules)
    k = nd.child.shape[1]
    noted, pending, npend, waited = pd
    lazy = (rules.flags & PAPER_LAZY) != 0
    spent = 0
    while npend[0] > 0 and spent < budget:
        n = pending[npend[0] - 1]
        if nd.depth[n] >= 0 and nd.meta[META_NFREE] < k and needs_split(nd.is_split, nd.count,
                                                                         n, limit):
            nd.meta[META_WANT_GROW] = 1
            return spent
        noted[n] = False
        npend[0] -= 1
        splitting = nd.depth[n] >= 0 and nd.kept[n] >= 0
        if nd.depth[n] < 0 or not (nd.dirty[n] or splitting
                                   or needs_split(nd.is_split, nd.count, n, limit)):
            continue
        step = max(budget - spent, MIN_STEP)
        overfull = needs_split(nd.is_split, nd.count, n, limit)
        if (overfull and not splitting and planes.shape[0] == 6
                and not (rules.flags & PAPER_LAZY)
                and not near_view(planes, nd.lo[n, 0], nd.lo[n, 1], nd.lo[n, 2], nd.hi[n, 0],
                                  nd.hi[n, 1], nd.hi[n, 2])):
            # The last query's view (and the band beside it) has left it: its split is
            # dropped, as the paper splits only what a query reaches; a query that reaches it
            # again notes it again. A turn leaves hundreds of such nodes pending (315 after
            # `turn` at 10^6, octree), and the frames after it spent their budget on them.
            overfull = False
        if (nd.dirty[n] and not splitting and not overfull and not lazy
                and waited[n] + 1 < patience):
            # Passed over: a dirty box is conservative, so it serves the queries as it is
            # until a query has noted it ``patience`` times (one a frame at most); it is
            # loose by what its objects moved since. Refitting every noted box each frame
            # cost most of a static frame's upkeep (10^6 objects, octree/leafy, `churn100`:
            # 156 refits a frame, about 100 of them parents that a child no query reaches
            # keeps dirty, refitted again at every noting).
            waited[n] += 1
            continue
        if nd.dirty[n] and not splitting and not (overfull and nd.count[n] > step):
            # (A node split over several calls is not refitted first: a refit costs all its
            # objects at once, and its stored box, loose but conservative, serves the split;
            # it is refitted when next noted, holding few objects of its own by then.)
            waited[n] = 0
            if lazy:
                refit_node(nd, ob, sp, np.int64(n), rules.threshold)
            else:
                refit_block(nd, ob, sp, np.int64(n), rules.threshold)
            spent += nd.count[n] + 1
            step = max(budget - spent, MIN_STEP)
        if splitting or overfull:
            code, used = split_step(nd, ob, sp, n, rules, step, later)
            spent += used
            if code == 1:
                _note_seen_children(nd, n, limit, planes, noted, pending, npend)
            elif code == 0 or code == 3:
                # Under way (the budget is spent) or no room in the heap: back on the list,
                # first in line, until the next call (the caller makes room first).
                note_node(noted, pending, npend, n)
                return spent
    return spent


@njit(cache=True)
def near_view(planes, lx: float, ly: float, lz: float, hx: float, hy: float,
              hz: float) -> bool:
    """Whether the box, grown by :data:`GUARD` of its largest side, is not outside
    ``planes``: a leaf in view or beside it.

    Why beside it: the paper splits only what a query reaches, and a big leaf just outside
    the view (the root's child whose corner is the eye, at 10^6 objects 124K of them) then
    stays whole until one mover stretches its box into the view; from that frame every query
    scans it, and the upkeep takes a dozen frames to split it (world at 10^6, `icoseptree`:
    working set 455 -> 124,963, frames 0.13 -> 1.5 ms). Splitting the leaves beside the view
    too, with the visible ones, leaves such a mover a small leaf to stretch. The margin is
    the leaf's own scale, so the band narrows level by level as the leaves shrink.
    Scalars, not the pool's arrays: an array argument counts references at every call.
    The caller asks it of leaves of more than :data:`GUARD_OBJECTS` objects only."""
    m = GUARD * max(hx - lx, hy - ly, hz - lz)
    return box_vs_frustum6(planes, lx - m, ly - m, lz - m, hx + m, hy + m, hz + m) != OUTSIDE


@njit(cache=True)
def _note_seen_children(nd, n: int, limit: int, planes, noted, pending, npend) -> None:
    """Note node n's overfull children not outside ``planes``, and the big ones beside them
    (:func:`near_view`)."""
    if planes.shape[0] == 0:
        return
    for j in range(nd.child.shape[1]):
        ch = nd.child[n, j]
        if ch < 0 or not needs_split(nd.is_split, nd.count, ch, limit):
            continue
        lx, ly, lz = nd.lo[ch, 0], nd.lo[ch, 1], nd.lo[ch, 2]
        hx, hy, hz = nd.hi[ch, 0], nd.hi[ch, 1], nd.hi[ch, 2]
        if box_vs_frustum6(planes, lx, ly, lz, hx, hy, hz) != OUTSIDE or (
                nd.count[ch] > GUARD_OBJECTS and near_view(planes, lx, ly, lz, hx, hy, hz)):
            note_node(noted, pending, npend, ch)
