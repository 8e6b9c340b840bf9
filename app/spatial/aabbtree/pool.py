"""The dynamic AABB tree's node pool and the upkeep's pending list (Shagam, section 2.1).

State lives in flat arrays, in the manner of Box2D's dynamic tree:

* the node pool (:class:`Nodes`): one row per node, a free list as a stack of node indices,
  a (capacity, K) child table (K = number of children of the heuristic);
* per-node object blocks in a packed float32 heap (:mod:`.blocks`): a node's objects lie at
  positions ``start .. start + count - 1``, so queries scan them as one range;
* the nodes queries noted for the upkeep (:class:`Pending`, :mod:`.upkeep`).

Kernels take these bundles (plus the store's :class:`Spheres` and the tree's :class:`Rules`)
rather than their arrays one by one; only the hottest inlined helpers take single arrays.
The rest of the tree's compiled core: boxes and refits (:mod:`.bounds`), splits and
garbage collection (:mod:`.split`), a frame's inserts, removals and moves (:mod:`.batches`),
the upkeep (:mod:`.upkeep`), the queries (:mod:`.queries`).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from app.spatial.aabbtree.blocks import make_room
from app.spatial.aabbtree.heuristics import (
    KEEP_NONE,
    KEEP_OURS,
    KEEP_PAPER,
    PAPER_LAZY,
    PAPER_NONLEAFY,
)
from app.spatial.pool import grown, grown_free_stack

ROOT = 0  # the root is the first node allocated and is never freed
META_NFREE = 0  # meta[0]: number of entries on the free stack
META_WANT_GROW = 1  # meta[1]: a query skipped a split for lack of free nodes
META_CATCHUP = 2  # meta[2]: a query's catch-up (queries._finish asks, the tree runs it)
CATCHUP_ASKED = 1  # a query stopped early: its noted backlog calls for a catch-up
CATCHUP_DONE = 2  # the catch-up ran: the query runs again and does not ask again


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
#: Nodes a query reached that the upkeep should refit or split (see :func:`.upkeep.maintain`):
#: ``noted`` flags them and ``pending[:count[0]]`` lists them, each once (a flagged node is
#: never listed again, so the list fits in the pool's size). Allocation and freeing leave the
#: flag alone: a node freed while listed stays listed until the upkeep drops it. Apart from
#: the pool: numba reference-counts every array of the pool at each call that passes it, and
#: with these two fields in it the update of 10^5 moving objects took about a third longer.
#: ``waited`` counts, per node, the upkeeps that passed its refit over (see ``patience`` in
#: :func:`.upkeep.maintain`); a freed node keeps its count, which only moves its next refit.
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
