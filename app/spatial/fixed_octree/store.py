"""The fixed octree's state: the node pool and the entries, as named arrays (Box2D-style fields).

Nodes (:class:`Nodes`)
    One element per node in every field, with a free stack (``free``, top at ``nfree[0]``)
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

Entries (:class:`Entries`)
    The tree's packed copy of placed objects (centre, radius, view distance), numbered apart
    from slots and taken in Morton order per batch (:func:`morton`); a moved object's copy is
    refreshed at the flush. Entries of a node form a doubly linked list through ``next`` /
    ``prev``; ``node[entry]`` is its node (``NO_NODE`` when free) and ``slot`` its slot.

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


class Nodes(NamedTuple):
    """The node pool: one element per node in each array, plus the free stack and ageing list."""

    parent: np.ndarray  # int32, -1 for the root
    child: np.ndarray  # (cap, 8) int32, octant bits: 1 = upper x, 2 = upper y, 4 = upper z
    nchild: np.ndarray  # int32
    head: np.ndarray  # int32, first entry of the node's list, -1 if none
    count: np.ndarray  # int32, objects in the node itself
    level: np.ndarray  # int32, side = min_size * 2**level; depth = root level - level
    life: np.ndarray  # int32, lifespan of the node once it is an empty leaf (8..64)
    ttl: np.ndarray  # int32, countdown of an empty leaf, -1 when not counting
    subcount: np.ndarray  # int32, objects in the subtree
    inlist: np.ndarray  # int32, the node has an entry in the ageing list
    alive: np.ndarray  # int32
    clean: np.ndarray  # int32, the subtree's entries are exactly [estart, estart + subcount)
    estart: np.ndarray  # int32
    lo: np.ndarray  # (cap, 3) float64, cube corner
    size: np.ndarray  # float64, cube side
    tlo: np.ndarray  # (cap, 3) float64, padded AABB of the subtree's spheres
    thi: np.ndarray  # (cap, 3) float64
    vmax: np.ndarray  # float64, max view distance in the subtree
    vmin: np.ndarray  # float64, min view distance in the subtree
    outcome: np.ndarray  # int8, NODE_* of the last frustum query
    free: np.ndarray  # int64 free stack
    nfree: np.ndarray  # (1,) int64
    aging: np.ndarray  # int64, empty leaves whose countdown may run
    naging: np.ndarray  # (1,) int64


class Entries(NamedTuple):
    """The tree's packed copies of placed objects and their per-node list links."""

    center: np.ndarray  # (cap, 3) float64
    radius: np.ndarray  # float64
    vdist: np.ndarray  # float64
    node: np.ndarray  # int64, NO_NODE when the entry is free
    next: np.ndarray  # int64
    prev: np.ndarray  # int64
    slot: np.ndarray  # int64, -1 when free


_NODE_DTYPES = {"child": (np.int32, 8), "lo": (np.float64, 3), "size": (np.float64, 0),
                "tlo": (np.float64, 3), "thi": (np.float64, 3), "vmax": (np.float64, 0),
                "vmin": (np.float64, 0), "outcome": (np.int8, 0)}
_PER_NODE = Nodes._fields[:20]  # the fields indexed by node (not the free stack, ageing list)


def new_nodes(capacity: int) -> Nodes:
    """An empty pool of ``capacity`` nodes, all on the free stack (lowest popped first)."""
    fields = {}
    for name in _PER_NODE:
        dtype, width = _NODE_DTYPES.get(name, (np.int32, 0))
        fields[name] = np.zeros((capacity, width) if width else capacity, dtype=dtype)
    return Nodes(**fields, free=np.arange(capacity - 1, -1, -1, dtype=np.int64),
                 nfree=np.array([capacity], dtype=np.int64),
                 aging=np.zeros(capacity, dtype=np.int64), naging=np.zeros(1, dtype=np.int64))


def grow_nodes(nd: Nodes, capacity: int) -> Nodes:
    """The pool copied into ``capacity`` nodes; new nodes go below the old free ones."""
    old = nd.parent.shape[0]
    free, nfree = grown_free_stack(nd.free, int(nd.nfree[0]), old, capacity)
    fields = {name: grown(getattr(nd, name), capacity, 0) for name in _PER_NODE}
    return Nodes(**fields, free=free, nfree=np.array([nfree], dtype=np.int64),
                 aging=grown(nd.aging, capacity, 0), naging=nd.naging)


def new_entries(capacity: int) -> Entries:
    """``capacity`` free entries."""
    return Entries(center=np.zeros((capacity, 3)), radius=np.zeros(capacity),
                   vdist=np.zeros(capacity), node=np.full(capacity, NO_NODE, dtype=np.int64),
                   next=np.full(capacity, -1, dtype=np.int64),
                   prev=np.full(capacity, -1, dtype=np.int64),
                   slot=np.full(capacity, -1, dtype=np.int64))


def grow_entries(en: Entries, capacity: int) -> Entries:
    """The entries copied into ``capacity`` rows; the new ones are free."""
    fills = {"node": NO_NODE, "next": -1, "prev": -1, "slot": -1}
    return Entries(**{name: grown(getattr(en, name), capacity, fills.get(name, 0.0))
                      for name in Entries._fields})


def morton(points: np.ndarray) -> np.ndarray:
    """Morton (Z-order) codes of points, 21 bits per axis over their bounding box."""
    lo = points.min(axis=0)
    ext = max(float((points.max(axis=0) - lo).max()), 1e-300)
    q = np.clip((points - lo) * ((2**21 - 1) / ext), 0, 2**21 - 1).astype(np.uint64)
    code = np.zeros(points.shape[0], dtype=np.uint64)
    for a in range(3):
        v = q[:, a]
        v = (v | (v << np.uint64(32))) & np.uint64(0x1F00000000FFFF)
        v = (v | (v << np.uint64(16))) & np.uint64(0x1F0000FF0000FF)
        v = (v | (v << np.uint64(8))) & np.uint64(0x100F00F00F00F00F)
        v = (v | (v << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
        v = (v | (v << np.uint64(2))) & np.uint64(0x1249249249249249)
        code |= v << np.uint64(a)
    return code


# ---------------------------------------------------------------- node pool (compiled)

@njit(cache=True)
def alloc_node(nd, parent, level, lx, ly, lz, size):
    """Pop a node from the free stack and initialise it (dirty, empty, lifespan 8)."""
    k = nd.nfree[0] - 1
    n = nd.free[k]
    nd.nfree[0] = k
    nd.parent[n] = parent
    for j in range(8):
        nd.child[n, j] = -1
    nd.nchild[n] = 0
    nd.head[n] = -1
    nd.count[n] = 0
    nd.level[n] = level
    nd.life[n] = LIFE_START
    nd.ttl[n] = -1
    nd.subcount[n] = 0
    nd.inlist[n] = 0
    nd.alive[n] = 1
    nd.clean[n] = 0
    nd.estart[n] = 0
    nd.lo[n, 0] = lx
    nd.lo[n, 1] = ly
    nd.lo[n, 2] = lz
    nd.size[n] = size
    for a in range(3):
        nd.tlo[n, a] = np.inf
        nd.thi[n, a] = -np.inf
    nd.vmax[n] = -np.inf
    nd.vmin[n] = np.inf
    return n


@njit(cache=True)
def free_node(nd, n):
    """Put ``n`` back on the free stack."""
    nd.alive[n] = 0
    nd.inlist[n] = 0
    nd.free[nd.nfree[0]] = n
    nd.nfree[0] += 1


@njit(cache=True)
def start_ageing(nd, n, root):
    """Start the countdown of ``n`` if it is a non-root empty leaf not already counting."""
    if n == root or nd.count[n] != 0 or nd.nchild[n] != 0 or nd.ttl[n] >= 0:
        return
    nd.ttl[n] = nd.life[n]
    if nd.inlist[n] == 0:
        nd.inlist[n] = 1
        nd.aging[nd.naging[0]] = n
        nd.naging[0] += 1


@njit(cache=True)
def grow_root_once(nd, root, bmin, bmax):
    """Double the root towards the box [bmin, bmax]; the old root becomes one octant."""
    s = nd.size[root]
    o = 0
    lo = np.empty(3)
    for a in range(3):
        lo[a] = nd.lo[root, a]
        if bmin[a] < lo[a]:
            lo[a] -= s
            o |= 1 << a
    new = alloc_node(nd, -1, nd.level[root] + 1, lo[0], lo[1], lo[2], 2.0 * s)
    nd.child[new, o] = root
    nd.nchild[new] = 1
    nd.parent[root] = new
    nd.subcount[new] = nd.subcount[root]
    for a in range(3):  # same objects, same bounds
        nd.tlo[new, a] = nd.tlo[root, a]
        nd.thi[new, a] = nd.thi[root, a]
    nd.vmax[new] = nd.vmax[root]
    nd.vmin[new] = nd.vmin[root]
    start_ageing(nd, root, new)  # an empty old root is now a dying leaf
    return new


@njit(cache=True)
def shrink_root(nd, root):
    """While the root holds no object and has one child, that child becomes the root."""
    while nd.count[root] == 0 and nd.nchild[root] == 1:
        ch = -1
        for j in range(8):
            if nd.child[root, j] >= 0:
                ch = nd.child[root, j]
        nd.parent[ch] = -1
        nd.ttl[ch] = -1  # the root never dies; a stale ageing entry is dropped at the next tick
        free_node(nd, root)
        root = ch
    return root
