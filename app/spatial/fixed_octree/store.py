"""The fixed octree's state: the node pool and the entries, as named arrays (Box2D-style fields).

Nodes (:class:`Nodes`)
    One record per node (:data:`NODE`), with a free stack (``free``, top at ``nfree[0]``)
    and the list of ageing empty leaves (``aging``, ``naging[0]`` long). The root is a cube
    of side ``min_size * 2**level`` whose low corner lies on the ``min_size`` grid; a child's
    corner is its parent's corner plus 0 or half the side, bit for bit (``min_size`` is a
    power of two), which validate checks exactly.
    Each node also keeps its subtree's object count and a slightly padded AABB (``tlo``,
    ``thi``) and view distance range (``vmin``, ``vmax``) of its subtree's spheres. Counts are
    exact (updated along the climb and descent paths); bounds only grow (along the path up,
    stopping at the first node that already covers the sphere) and are reset when a subtree
    empties. They are therefore conservative, but never looser than the node cube, and exact
    for static scenes: culling with them is much better than with the loose cube, and keeping
    them costs O(1) per move.
    A record is three cache lines, laid out by use: the subtree bounds (what a query tests
    and a placement grows), the links (what every walk follows), then the cube, counts and
    lifespan (what a placement tests, what ageing reads). A walk touches two lines per
    node; one array per field made it up to a dozen, and placement twice as slow.

Entries (:class:`Entries`)
    The tree's packed copy of placed objects (a :data:`SPHERE` record: centre, radius, view
    distance, what a query tests), numbered apart from slots and taken in Morton order per
    batch (:func:`morton`); a moved object's copy is refreshed in its update. Entries of a
    node form a doubly linked list through ``next`` / ``prev``; ``node[entry]`` is its node
    (``NO_NODE`` when free) and ``slot`` its slot.

Root growth (unlike the article)
    An object that leaves the root is never destroyed: the root doubles towards it
    (:func:`grow_root_once`, the old root becomes one octant of the new one) until everything
    fits. Conversely, when the root holds no object and has a single child, that child
    becomes the root (:func:`shrink_root`), so the root stays the smallest cube the tree needs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from app.spatial.pool import grown, grown_free_stack

LIFE_START = 8  # lifespan of a new empty leaf, in update cycles
LIFE_MAX = 64  # the lifespan doubles on each reuse up to this
PENDING = -2  # slot -> entry value of an object waiting in the insert queue
NO_NODE = -1


# One node, 192 bytes = three 64-byte lines (the pool is 64-byte aligned, see _records).
NODE = np.dtype({
    # line 0: the subtree bounds; line 1: the links; line 2: the cube, counts and ageing
    "names": ["tlo", "thi", "vmax", "vmin",
              "child", "subcount", "head", "clean", "estart", "parent", "level",
              "lo", "size", "count", "nchild", "life", "ttl", "inlist", "alive"],
    "formats": [(np.float64, 3), (np.float64, 3), np.float64, np.float64,
                (np.int32, 8), np.int32, np.int32, np.int32, np.int32, np.int32, np.int32,
                (np.float64, 3), np.float64, np.int32, np.int32, np.int32, np.int32, np.int32,
                np.int32],
    "offsets": [0, 24, 48, 56,
                64, 96, 100, 104, 108, 112, 116,
                128, 152, 160, 164, 168, 172, 176, 180],
    "itemsize": 192,
}, align=True)  # an aligned struct: numba then emits aligned loads and stores
# The fields of a NODE record:
#   tlo, thi (3 float64): padded AABB of the subtree's spheres; vmax, vmin: its view distances
#   child (8 int32): octant bits 1 = upper x, 2 = upper y, 4 = upper z; -1 for none
#   subcount: objects in the subtree; head: first entry of the node's list, -1 if none
#   clean: the subtree's entries are exactly [estart, estart + subcount)
#   parent: -1 for the root; level: side = min_size * 2**level (depth = root level - level)
#   lo (3 float64), size: the cube; count: objects in the node itself; nchild: children
#   life: lifespan as an empty leaf (8..64); ttl: countdown of an empty leaf, -1 when not
#   counting; inlist: listed in ``aging``; alive: in use (ageing reads line 2 only)


class Nodes(NamedTuple):
    """The node pool: NODE records, the outcomes, the free stack and the ageing list."""

    node: np.ndarray  # NODE records
    outcome: np.ndarray  # int8, NODE_* of the last frustum query (apart: cleared per query)
    free: np.ndarray  # int64 free stack
    nfree: np.ndarray  # (1,) int64
    aging: np.ndarray  # int64, empty leaves whose countdown may run
    naging: np.ndarray  # (1,) int64


# The tree's packed copy of an object's sphere: what the queries test and a move rewrites,
# together (40 bytes). Scalar fields: numba reads and writes them a
# little faster than a nested (3,) field (10-15% in a micro-benchmark).
SPHERE = np.dtype([("cx", np.float64), ("cy", np.float64), ("cz", np.float64),
                   ("radius", np.float64), ("vdist", np.float64)], align=True)


class Entries(NamedTuple):
    """The tree's packed copies of placed objects and their per-node list links. The links
    stay apart from the spheres: a walk chases ``next`` through a dense array (inside
    64-byte records the chase was 2.7x slower, the query 10-20%)."""

    sphere: np.ndarray  # SPHERE records
    node: np.ndarray  # int64, NO_NODE when the entry is free
    next: np.ndarray  # int64
    prev: np.ndarray  # int64
    slot: np.ndarray  # int64, -1 when free


def node_lines(node: np.ndarray) -> np.ndarray:
    """The NODE records as a (nodes, 3) byte array whose element (n, k) starts line k of
    node n: what a prefetch of a record's later line takes (``prefetch_at(lines, n, 2)``)."""
    return node.view(np.uint8).reshape(-1, 3, 64)[:, :, 0]


def _records(capacity: int) -> np.ndarray:
    """``capacity`` zeroed NODE records starting on a 64-byte boundary (a record is then
    exactly three cache lines)."""
    buf = np.zeros(capacity * NODE.itemsize + 64, dtype=np.uint8)
    off = -buf.ctypes.data % 64
    return buf[off: off + capacity * NODE.itemsize].view(NODE)


def new_nodes(capacity: int) -> Nodes:
    """An empty pool of ``capacity`` nodes, all on the free stack (lowest popped first)."""
    return Nodes(node=_records(capacity), outcome=np.zeros(capacity, dtype=np.int8),
                 free=np.arange(capacity - 1, -1, -1, dtype=np.int64),
                 nfree=np.array([capacity], dtype=np.int64),
                 aging=np.zeros(capacity, dtype=np.int64), naging=np.zeros(1, dtype=np.int64))


def grow_nodes(nd: Nodes, capacity: int) -> Nodes:
    """The pool copied into ``capacity`` nodes; new nodes go below the old free ones."""
    old = nd.node.shape[0]
    free, nfree = grown_free_stack(nd.free, int(nd.nfree[0]), old, capacity)
    node = _records(capacity)
    node[:old] = nd.node
    return Nodes(node=node, outcome=grown(nd.outcome, capacity, 0), free=free,
                 nfree=np.array([nfree], dtype=np.int64), aging=grown(nd.aging, capacity, 0),
                 naging=nd.naging)


def new_entries(capacity: int) -> Entries:
    """``capacity`` free entries."""
    return Entries(sphere=np.zeros(capacity, dtype=SPHERE),
                   node=np.full(capacity, NO_NODE, dtype=np.int64),
                   next=np.full(capacity, -1, dtype=np.int64),
                   prev=np.full(capacity, -1, dtype=np.int64),
                   slot=np.full(capacity, -1, dtype=np.int64))


def grow_entries(en: Entries, capacity: int) -> Entries:
    """The entries copied into ``capacity`` rows; the new ones are free."""
    fills = {"node": NO_NODE, "next": -1, "prev": -1, "slot": -1}
    return Entries(**{name: grown(getattr(en, name), capacity, fills.get(name, 0.0))
                      for name in Entries._fields})


@njit(cache=True, inline="always")
def _spread3(v):
    """The 21 low bits of ``v`` spread two bits apart (bit k to bit 3k)."""
    v = (v | (v << np.uint64(32))) & np.uint64(0x1F00000000FFFF)
    v = (v | (v << np.uint64(16))) & np.uint64(0x1F0000FF0000FF)
    v = (v | (v << np.uint64(8))) & np.uint64(0x100F00F00F00F00F)
    v = (v | (v << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
    return (v | (v << np.uint64(2))) & np.uint64(0x1249249249249249)


@njit(cache=True)
def morton(points, rows):
    """Morton (Z-order) codes of ``points[rows]``, 21 bits per axis over their bounding box.
    Compiled, two passes over the rows (the bounds, the codes): numpy's version, a gather of
    the rows, reductions along the first axis and a pass a step, took 140 ms of a first query
    at 10^6 (the fixed octree's flush of every object)."""
    n = rows.shape[0]
    lo = np.full(3, np.inf)
    hi = np.full(3, -np.inf)
    for i in range(n):
        for a in range(3):
            v = points[rows[i], a]
            lo[a] = min(lo[a], v)
            hi[a] = max(hi[a], v)
    ext = max(max(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]), 1e-300)
    scale = (2**21 - 1) / ext
    top = float(2**21 - 1)
    code = np.zeros(n, dtype=np.uint64)
    for i in range(n):
        c = np.uint64(0)
        for a in range(3):
            q = min(max((points[rows[i], a] - lo[a]) * scale, 0.0), top)
            c |= _spread3(np.uint64(q)) << np.uint64(a)
        code[i] = c
    return code


# ---------------------------------------------------------------- node pool (compiled)
# These take the record array, not the bundle, where they run per object (start_ageing).

@njit(cache=True)
def alloc_node(nd, parent, level, lx, ly, lz, size):
    """Pop a node from the free stack and initialise it (dirty, empty, lifespan 8)."""
    k = nd.nfree[0] - 1
    n = nd.free[k]
    nd.nfree[0] = k
    r = nd.node[n]
    for a in range(3):
        r.tlo[a] = np.inf
        r.thi[a] = -np.inf
    r.vmax = -np.inf
    r.vmin = np.inf
    for j in range(8):
        r.child[j] = -1
    r.subcount = 0
    r.head = -1
    r.clean = 0
    r.estart = 0
    r.parent = parent
    r.level = level
    r.nchild = 0
    r.count = 0
    r.lo[0] = lx
    r.lo[1] = ly
    r.lo[2] = lz
    r.size = size
    r.life = LIFE_START
    r.ttl = -1
    r.inlist = 0
    r.alive = 1
    return n


@njit(cache=True)
def free_node(node, free, nfree, n):
    """Put ``n`` back on the free stack."""
    node[n].alive = 0
    node[n].inlist = 0
    free[nfree[0]] = n
    nfree[0] += 1


@njit(cache=True)
def start_ageing(node, aging, naging, n, root):
    """Start the countdown of ``n`` if it is a non-root empty leaf not already counting."""
    r = node[n]
    if n == root or r.count != 0 or r.nchild != 0 or r.ttl >= 0:
        return
    r.ttl = r.life
    if r.inlist == 0:
        r.inlist = 1
        aging[naging[0]] = n
        naging[0] += 1


@njit(cache=True)
def grow_root_once(nd, root, bmin, bmax):
    """Double the root towards the box [bmin, bmax]; the old root becomes one octant."""
    node = nd.node
    s = node[root].size
    o = 0
    lo = np.empty(3)
    for a in range(3):
        lo[a] = node[root].lo[a]
        if bmin[a] < lo[a]:
            lo[a] -= s
            o |= 1 << a
    new = alloc_node(nd, -1, node[root].level + 1, lo[0], lo[1], lo[2], 2.0 * s)
    node[new].child[o] = root
    node[new].nchild = 1
    node[root].parent = new
    node[new].subcount = node[root].subcount
    for a in range(3):  # same objects, same bounds
        node[new].tlo[a] = node[root].tlo[a]
        node[new].thi[a] = node[root].thi[a]
    node[new].vmax = node[root].vmax
    node[new].vmin = node[root].vmin
    start_ageing(node, nd.aging, nd.naging, root, new)  # an empty old root is now dying
    return new


@njit(cache=True)
def shrink_root(nd, root):
    """While the root holds no object and has one child, that child becomes the root."""
    node = nd.node
    while node[root].count == 0 and node[root].nchild == 1:
        ch = -1
        for j in range(8):
            if node[root].child[j] >= 0:
                ch = node[root].child[j]
        node[ch].parent = -1
        node[ch].ttl = -1  # the root never dies; a stale ageing entry is dropped at the next tick
        free_node(node, nd.free, nd.nfree, root)
        root = ch
    return root
