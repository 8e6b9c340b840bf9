"""State of the view distance tree as named arrays, pool growth, the placement rule and root growth.

State is flat, in the manner of Box2D's dynamic tree:

* the node pool (:class:`Nodes`): one entry per node in parallel arrays, a free stack of node
  indices; a free node has ``size`` 0 (a live one has ``2**level`` > 0);
* per-node doubly linked object lists threaded through :class:`Objects` (one entry per store
  slot: node, next, prev, packed row), so that removal is O(1) plus the cleanup of nodes left
  empty;
* the *packed copy* (:class:`Packed`) of every node's objects, one block of ``2**k`` rows per
  node, the rows in use at its start (see :mod:`.heap` for how blocks are handed out);
* a queue of nodes whose bounds may be loose (see :mod:`.refit`), a ring in ``Nodes.queue``;
* the tree's scalars (root, free stack size, list heads, counters) in a one-row record array of
  dtype :data:`TREE`: numba cannot assign to a NamedTuple's fields, and one record costs the
  dispatcher one argument to type where nine one-element arrays would cost nine.

Besides the structural cube, every node keeps grow-only *subtree bounds*: the AABB of object
centres, the AABB of the objects' own spheres, and the largest view distance. They tighten the
point query and serve the queries that have nothing to do with view distance (frustum without
view distance, box, sphere, ray). Moves and removals leave them loose but valid, and queue the
node for a refit that a budget per batch works through.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from app.spatial.pool import grown, grown_free_stack, reserved

# Objects.node of a slot that is in no list, and of one in the infinite list.
NO_NODE = -1
IN_INF = -2

# View distances and coordinates beyond this go to the infinite list (see unbounded).
UNBOUNDED = 2.0**60


class ViewDistNodes(NamedTuple):
    """The node pool, one entry per node; a node is a cube of size ``2**level``."""

    lo: np.ndarray  # (N, 3) lower corner of the cube
    size: np.ndarray  # edge length, exactly 2**level; 0 marks a free node
    level: np.ndarray  # size exponent
    parent: np.ndarray  # -1 for the root and for free nodes
    child: np.ndarray  # (N, 8) per octant (bit 0: x upper half, bit 1: y, bit 2: z), -1: none
    nchild: np.ndarray  # children that exist
    head: np.ndarray  # first object slot of the node's list, -1 when none
    count: np.ndarray  # objects in the node's own list
    sub: np.ndarray  # objects in the subtree (own list and below): a rejected node's count
    pstart: np.ndarray  # first row of the node's block in the packed copy
    plen: np.ndarray  # rows of the block in use (the node's objects, in no particular order)
    pcap: np.ndarray  # rows of the block: 0 (no block) or a power of two
    clo: np.ndarray  # (N, 3) min of the object centres in the subtree
    chi: np.ndarray  # (N, 3) max of the object centres
    slo: np.ndarray  # (N, 3) min of (centre - radius): the AABB of the objects' own spheres
    shi: np.ndarray  # (N, 3) max of (centre + radius)
    vmax: np.ndarray  # largest view distance in the subtree (-inf when empty)
    outcome: np.ndarray  # int8 NODE_* of the last frustum query
    queued: np.ndarray  # int8: the node is in the refit queue (so it enters it once)
    free: np.ndarray  # free stack of node indices (top at TREE.nfree)
    queue: np.ndarray  # ring of nodes whose bounds may be loose (TREE.qhead, TREE.qlen)


class ViewDistObjects(NamedTuple):
    """Per store slot: the list the object is in and where it is in the packed copy."""

    node: np.ndarray  # node holding the object; NO_NODE when the slot is dead, IN_INF
    next: np.ndarray  # next slot in the list, -1 at the end
    prev: np.ndarray  # previous slot in the list, -1 at the head
    row: np.ndarray  # row in the packed copy; -1 in the infinite list and when dead


class ViewDistPacked(NamedTuple):
    """The packed copy of the objects in nodes: centre, radius, view distance and slot, in
    blocks; a free block's first ``slot`` links it to the next free block of its size."""

    center: np.ndarray  # (P, 3)
    radius: np.ndarray
    vdist: np.ndarray
    slot: np.ndarray
    free: np.ndarray  # (BLOCK_CLASSES,) first free block of 2**k rows, -1 when none


class ViewDistSpheres(NamedTuple):
    """The store's arrays the kernels read (the base class owns them)."""

    centers: np.ndarray
    radii: np.ndarray
    vdist: np.ndarray


# numba keys its cache of argument types by a named tuple's class *name*: two structures with
# a class called ``Nodes`` in one process made every viewdist kernel call type its arguments
# in Python again (3x slower frames once the AABB tree had run). Hence the unique names, and
# short aliases for use here (tests/test_layering.py checks the names stay unique).
Nodes, Objects, Packed, Spheres = ViewDistNodes, ViewDistObjects, ViewDistPacked, ViewDistSpheres


#: The tree's scalars (kernels read ``tree[0].root`` etc. and write them in place).
TREE = np.dtype([
    ("root", np.int64),  # root node, -1 for an empty tree
    ("nfree", np.int64),  # entries on the node free stack
    ("nlive", np.int64),  # live nodes
    ("emin", np.int64),  # level of the finest nodes
    ("inf_head", np.int64),  # first slot of the infinite-view-distance list, -1 when empty
    ("inf_count", np.int64),
    ("in_nodes", np.int64),  # objects stored in nodes
    ("pend", np.int64),  # rows of the packed copy handed out as blocks (free blocks included)
    ("pfree", np.int64),  # rows in free blocks
    ("pmax", np.int64),  # largest block ever handed out (bounds what one growth may need)
    ("qhead", np.int64),  # first entry of the refit queue's ring
    ("qlen", np.int64),  # nodes in the refit queue
])

#: Block sizes 2**0 .. 2**62 (a free list each).
BLOCK_CLASSES = 63

# What a node entry holds while free (alloc_node sets every field of a new node).
_NODE_FILL = {"lo": 0.0, "size": 0.0, "level": 0, "parent": -1, "child": -1, "nchild": 0,
              "head": -1, "count": 0, "sub": 0, "pstart": 0, "plen": 0, "pcap": 0,
              "clo": np.inf, "chi": -np.inf, "slo": np.inf, "shi": -np.inf, "vmax": -np.inf,
              "outcome": 0, "queued": 0}


# ---------------------------------------------------------------- pools (numpy, not per frame)


def new_tree(emin: int) -> np.ndarray:
    """The scalars of an empty tree whose finest nodes have level ``emin``."""
    tree = np.zeros(1, dtype=TREE)
    tree["root"] = -1
    tree["inf_head"] = -1
    tree["emin"] = emin
    return tree


def new_nodes() -> Nodes:
    """An empty node pool (:func:`grown_nodes` adds the nodes)."""
    f3 = np.zeros((0, 3))
    i1 = np.zeros(0, dtype=np.int64)
    return Nodes(lo=f3, size=np.zeros(0), level=i1, parent=i1, child=np.zeros((0, 8), np.int64),
                 nchild=i1, head=i1, count=i1, sub=i1, pstart=i1, plen=i1, pcap=i1, clo=f3,
                 chi=f3, slo=f3, shi=f3, vmax=np.zeros(0), outcome=np.zeros(0, np.int8),
                 queued=np.zeros(0, np.int8), free=i1, queue=i1)


def grown_nodes(nd: Nodes, tree: np.ndarray, capacity: int) -> Nodes:
    """The pool with room for ``capacity`` nodes; new nodes go on the free stack below the
    old free ones (so the warm, low nodes are reused first)."""
    old = nd.size.shape[0]
    capacity = max(capacity, old + 1)
    fields = {name: grown(getattr(nd, name), capacity, fill) for name, fill in _NODE_FILL.items()}
    free, nfree = grown_free_stack(nd.free, int(tree["nfree"][0]), old, capacity)
    tree["nfree"] = nfree
    # The refit queue's ring, unrolled from its head into the larger one.
    head, n = int(tree["qhead"][0]), int(tree["qlen"][0])
    queue = np.empty(capacity, dtype=np.int64)
    if n:
        queue[:n] = np.roll(nd.queue, -head)[:n]
    tree["qhead"] = 0
    return Nodes(**fields, free=free, queue=queue)


def new_objects(capacity: int) -> Objects:
    """Per-slot links of ``capacity`` slots, all in no list."""
    return Objects(*(np.full(capacity, -1, dtype=np.int64) for _ in Objects._fields))


def grown_objects(ob: Objects, capacity: int) -> Objects:
    """The per-slot links with room for ``capacity`` slots."""
    return Objects(*(grown(a, capacity, -1) for a in ob))


def new_packed(rows: int, head: int = 0) -> Packed:
    """An unfilled packed copy of ``rows`` rows, no block handed out; the first ``head`` rows
    (those about to be written) in huge pages, the room to grow into in small ones
    (:func:`~app.spatial.pool.reserved`: blocks handed out from the end then fault a few
    microseconds at a time, not a 2 MB page's 0.2-4.7 ms)."""
    return Packed(center=reserved((rows, 3), np.float64, head),
                  radius=reserved((rows,), np.float64, head),
                  vdist=reserved((rows,), np.float64, head),
                  slot=reserved((rows,), np.int64, head),
                  free=np.full(BLOCK_CLASSES, -1, dtype=np.int64))


def grown_packed(pk: Packed, used: int, rows: int) -> Packed:
    """The packed copy with room for ``rows`` rows, its first ``used`` (the blocks handed out)
    and its free lists kept."""
    out = new_packed(rows, used)
    for a, b in zip(pk[:4], out[:4], strict=True):
        b[:used] = a[:used]
    out.free[:] = pk.free
    return out


def pow2_at_least(x: float) -> int:
    """Smallest integer e with 2**e >= x (x > 0)."""
    m, e = math.frexp(x)
    return e - 1 if m == 0.5 else e


# ---------------------------------------------------------------- node pool (compiled)


@njit(cache=True, _nrt=False)
def clear_bounds(nd, node):
    """Empty subtree bounds: nothing covered yet, no view distance."""
    for a in range(3):
        nd.clo[node, a] = np.inf
        nd.chi[node, a] = -np.inf
        nd.slo[node, a] = np.inf
        nd.shi[node, a] = -np.inf
    nd.vmax[node] = -np.inf


@njit(cache=True, _nrt=False)
def alloc_node(nd, tree, x, y, z, level, parent):
    """Pop a node off the free stack and initialise it as an empty cube."""
    t = tree[0]
    k = t.nfree - 1
    node = nd.free[k]
    t.nfree = k
    t.nlive += 1
    nd.lo[node, 0] = x
    nd.lo[node, 1] = y
    nd.lo[node, 2] = z
    nd.size[node] = math.ldexp(1.0, level)
    clear_bounds(nd, node)
    nd.parent[node] = parent
    nd.level[node] = level
    nd.head[node] = -1
    nd.count[node] = 0
    nd.sub[node] = 0
    nd.nchild[node] = 0
    for j in range(8):
        nd.child[node, j] = -1
    nd.pstart[node] = 0
    nd.plen[node] = 0
    nd.pcap[node] = 0
    return node


@njit(cache=True, _nrt=False)
def release_node(nd, tree, node):
    """Mark a node free and push it on the free stack."""
    t = tree[0]
    nd.size[node] = 0.0
    nd.parent[node] = -1
    nd.free[t.nfree] = node
    t.nfree += 1
    t.nlive -= 1


# ---------------------------------------------------------------- placement rule


@njit(cache=True, _nrt=False)
def unbounded(cx, cy, cz, vd):
    """Kept in the infinite list: an infinite (or absurd) view distance, or absurd coordinates.

    Beyond UNBOUNDED the tree would need hundreds of levels (or overflow), so such objects
    are tested one by one like the infinite ones.
    """
    return not (vd <= UNBOUNDED and abs(cx) <= UNBOUNDED and abs(cy) <= UNBOUNDED
                and abs(cz) <= UNBOUNDED)


@njit(cache=True, _nrt=False)
def level_for(vd, emin):
    """Smallest level whose nodes may hold radius ``vd`` (``vd <= S/2``), at least ``emin``."""
    if vd <= math.ldexp(1.0, emin - 1):
        return emin
    m, e = math.frexp(vd)  # vd = m * 2**e with 0.5 <= m < 1, so vd <= 2**e
    level = e + 1
    if m == 0.5:  # vd is exactly 2**(e-1): a node one level down holds it at S/2
        level = e
    return max(level, emin)


@njit(cache=True, _nrt=False)
def center_in_cube(nd, node, cx, cy, cz):
    """The centre lies in the node's closed cube."""
    s = nd.size[node]
    lo = nd.lo[node, 0]
    if cx < lo or cx > lo + s:
        return False
    lo = nd.lo[node, 1]
    if cy < lo or cy > lo + s:
        return False
    lo = nd.lo[node, 2]
    return lo <= cz <= lo + s


@njit(cache=True, _nrt=False)
def can_hold_below(nd, node, cx, cy, cz, vd):
    """The sphere belongs in this node or its subtree: centre in the cube and ``vd <= S/2``."""
    return vd <= 0.5 * nd.size[node] and center_in_cube(nd, node, cx, cy, cz)


@njit(cache=True, _nrt=False)
def fits_node(nd, node, cx, cy, cz, vd, emin):
    """The placement rule: the sphere belongs in exactly this node's list."""
    if not can_hold_below(nd, node, cx, cy, cz, vd):
        return False
    return vd >= 0.25 * nd.size[node] or nd.level[node] == emin


# ---------------------------------------------------------------- root growth


@njit(cache=True, _nrt=False)
def growth_steps(nd, tree, cx, cy, cz, vd):
    """(root doublings needed to hold the sphere, root level afterwards); no state changes."""
    t = tree[0]
    root = t.root
    if root == -1:
        return 1, level_for(vd, t.emin)
    x = nd.lo[root, 0]
    y = nd.lo[root, 1]
    z = nd.lo[root, 2]
    s = nd.size[root]
    level = nd.level[root]
    steps = 0
    while not (vd <= 0.5 * s and x <= cx <= x + s and y <= cy <= y + s and z <= cz <= z + s):
        x = x - s if cx < x else x
        y = y - s if cy < y else y
        z = z - s if cz < z else z
        s *= 2.0
        level += 1
        steps += 1
    return steps, level


@njit(cache=True, _nrt=False)
def nodes_needed(nd, tree, cx, cy, cz, vd):
    """Upper bound on the nodes that placing one sphere may allocate."""
    steps, level = growth_steps(nd, tree, cx, cy, cz, vd)
    return steps + level - tree[0].emin + 1


@njit(cache=True, _nrt=False)
def grow_root(nd, tree, cx, cy, cz, vd):
    """Make the root hold the sphere: create one, or double it toward the sphere."""
    t = tree[0]
    root = t.root
    if root == -1:
        m = math.ldexp(1.0, t.emin)
        level = level_for(vd, t.emin)
        root = alloc_node(nd, tree, math.floor(cx / m) * m, math.floor(cy / m) * m,
                          math.floor(cz / m) * m, level, -1)
        t.root = root
        return root
    while not can_hold_below(nd, root, cx, cy, cz, vd):
        s = nd.size[root]
        octant = 0
        x = nd.lo[root, 0]
        y = nd.lo[root, 1]
        z = nd.lo[root, 2]
        # Grow downward on an axis where the sphere lies below; the old root then becomes
        # the upper half on that axis.
        if cx < x:
            x -= s
            octant |= 1
        if cy < y:
            y -= s
            octant |= 2
        if cz < z:
            z -= s
            octant |= 4
        new = alloc_node(nd, tree, x, y, z, nd.level[root] + 1, -1)
        for a in range(3):  # the old subtree's bounds are the new root's bounds
            nd.clo[new, a] = nd.clo[root, a]
            nd.chi[new, a] = nd.chi[root, a]
            nd.slo[new, a] = nd.slo[root, a]
            nd.shi[new, a] = nd.shi[root, a]
        nd.vmax[new] = nd.vmax[root]
        nd.sub[new] = nd.sub[root]
        nd.child[new, octant] = root
        nd.nchild[new] = 1
        nd.parent[root] = new
        t.root = new
        root = new
    return root


@njit(cache=True, _nrt=False)
def descend(nd, tree, node, cx, cy, cz, vd):
    """From a node that can hold the sphere, walk down (creating children) to its node."""
    emin = tree[0].emin
    while vd < 0.25 * nd.size[node] and nd.level[node] > emin:
        half = 0.5 * nd.size[node]
        x = nd.lo[node, 0]
        y = nd.lo[node, 1]
        z = nd.lo[node, 2]
        octant = 0
        if cx >= x + half:
            x += half
            octant |= 1
        if cy >= y + half:
            y += half
            octant |= 2
        if cz >= z + half:
            z += half
            octant |= 4
        child = nd.child[node, octant]
        if child == -1:
            child = alloc_node(nd, tree, x, y, z, nd.level[node] - 1, node)
            nd.child[node, octant] = child
            nd.nchild[node] += 1
        node = child
    return node
