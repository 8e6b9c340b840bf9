"""``viewdist``: Matthews' adaptive view distance tree (a variable-radius sphere octree).

Each object with a finite view distance ``vd`` is stored as its *view sphere*: centred on the
object, radius ``vd``. A node is a cube of size ``S = 2**level`` and holds the view spheres whose
centre lies in the cube (closed) and whose radius lies in the band ``[S/4, S/2]``. Smaller
spheres go to the child octant holding their centre (children are created lazily), bigger ones
to an ancestor. So the whole subtree of a node holds spheres within the node's cube expanded by
``S/2``; for any point, at most two such expanded cubes per axis (2**3 nodes per level) contain
it, which bounds the point query "which view spheres contain the eye" (a rounding pad of
~1e-9 relative makes it three per axis only within that sliver of a cell boundary). A dense
cluster farther than twice its view distances from the eye is never entered, so its size does
not change the query's cost (Matthews' promise).

query_frustum(use_view_distance=True) is that point query, pruned further by each subtree's
bounds against the planes and the Z-pyramid, followed by the exact per-object tests of
app.geom.predicates; its working set is the objects of the entered nodes plus the infinite
list. Without view distance (and for box, sphere and ray queries) the tree is walked through
the subtree bounds of the objects' own spheres instead.

Extreme levels (documented deviations from the band):
* the *finest* level is ``min_node_size`` (a power of two, an absolute size); its nodes also
  hold every sphere smaller than ``S/4`` there, down to ``vd = 0``;
* the root is chosen from the data (power-of-two size, lower corner a multiple of
  ``min_node_size`` so that every child corner is exact) and grows by doubling toward any
  sphere it cannot hold; it shrinks again when it holds nothing and has a single child.

Objects with an infinite view distance live apart in their own list and are always considered;
so do the few with a view distance or a coordinate beyond 2**60 (about 1e18), which would need
hundreds of levels.

State is flat: a node pool (``_nf`` floats, ``_ni`` ints, one row per node, columns below) with
a free stack, per-node doubly linked object lists threaded through ``_obj`` (one row per object
slot: node, next, prev, packed row), so that removal is O(1) plus the cleanup of nodes left
empty. Updates follow the article's in-place mutation: an object whose view sphere still obeys
its node's rule stays put in O(1); otherwise it is relinked by searching up from its old node
and then down, and the old node is cleaned up last.

Besides the structural cube, every node keeps grow-only *subtree bounds*: the AABB of object
centres, the AABB of the objects' own spheres, and the largest view distance. They tighten the
point query and serve the queries that have nothing to do with view distance (frustum without
view distance, box, sphere, ray). Moves and removals leave them loose but valid.

Walking a linked list through a million-slot store is a cache miss per object, so the tree
also keeps a *packed copy* of every node's objects (x, y, z, radius, view distance, one
contiguous range per node). The linked lists stay the truth; the copy follows them cheaply:
an in-place move rewrites the object's row, a removal moves the range's last row into the hole,
and an object linked since the last rebuild is simply not packed yet. Links push at the front,
so each list reads [unpacked..., packed...] and a query walks only the unpacked prefix before
scanning the range. A compiled rebuild in slot order refits all bounds and repacks everything
once enough unpacked objects or bound-loosening changes have piled up.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from app.geom.predicates import (
    INSIDE,
    NODE_INSIDE,
    NODE_NOT_VISITED,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
    OUTSIDE,
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

# ---------------------------------------------------------------- layout of the flat state

# Node float columns (_nf): cube corner and size, then the subtree bounds.
LO = 0  # 0..2 lower corner of the cube
SIZE = 3  # edge length, exactly 2**level
CLO = 4  # 4..6 min of object centres in the subtree
CHI = 7  # 7..9 max of object centres
SLO = 10  # 10..12 min of (centre - radius): the AABB of the objects' own spheres
SHI = 13  # 13..15 max of (centre + radius)
VMAX = 16  # largest view distance in the subtree (-inf when empty)
NF = 17

# Node int columns (_ni).
PARENT = 0
LEVEL = 1  # size exponent: SIZE == 2**LEVEL
HEAD = 2  # first object slot of the node's list, -1 when none
COUNT = 3  # objects in the node's own list
NCHILD = 4  # children that exist
CHILD = 5  # 5..12 child per octant (bit 0: x upper half, bit 1: y, bit 2: z), -1 when none
ALIVE = 13
PSTART = 14  # first row of the node's range in the packed copy
PLEN = 15  # rows of the range in use (objects removed since the rebuild are swapped out)
NI = 16

# Meta ints (_meta).
ROOT = 0  # root node, -1 for an empty tree
NFREE = 1  # number of entries on the node free stack
NLIVE = 2  # live nodes
INF_HEAD = 3  # first slot of the infinite-view-distance list
INF_COUNT = 4
STALE = 5  # moves and removals since the last rebuild (the bounds are that much looser)
EMIN = 6  # level of the finest nodes
TREE_COUNT = 7  # objects stored in nodes
UNPACKED = 8  # objects linked into nodes since the last rebuild (not in the packed copy)
NMETA = 9

# Object int columns (_obj), one row per store slot.
ONODE = 0  # node holding the object; NO_NODE when the slot is dead, IN_INF for the inf list
ONEXT = 1
OPREV = 2
OPK = 3  # row in the packed copy, -1 when not packed
NO_NODE = -1
IN_INF = -2

# Per-query rounding slack, relative to the magnitudes involved, so that node pruning never
# drops an object that the exact per-object predicate would keep.
_REL_PAD = 1e-9

# View distances and coordinates beyond this go to the infinite list (see _unbounded).
_UNBOUNDED = 2.0**60


# ---------------------------------------------------------------- node pool and lists


@njit(cache=True, inline="always")
def _clear_bounds(nf, node):
    """Empty subtree bounds: nothing covered yet, no view distance."""
    for a in range(3):
        nf[node, CLO + a] = np.inf
        nf[node, CHI + a] = -np.inf
        nf[node, SLO + a] = np.inf
        nf[node, SHI + a] = -np.inf
    nf[node, VMAX] = -np.inf


@njit(cache=True)
def _alloc_node(nf, ni, free, meta, x, y, z, level, parent):
    """Pop a node off the free stack and initialise it as an empty cube."""
    k = meta[NFREE] - 1
    node = free[k]
    meta[NFREE] = k
    meta[NLIVE] += 1
    nf[node, LO] = x
    nf[node, LO + 1] = y
    nf[node, LO + 2] = z
    nf[node, SIZE] = math.ldexp(1.0, level)
    _clear_bounds(nf, node)
    ni[node, PARENT] = parent
    ni[node, LEVEL] = level
    ni[node, HEAD] = -1
    ni[node, COUNT] = 0
    ni[node, NCHILD] = 0
    for j in range(8):
        ni[node, CHILD + j] = -1
    ni[node, ALIVE] = 1
    ni[node, PSTART] = 0
    ni[node, PLEN] = 0
    return node


@njit(cache=True)
def _release_node(ni, free, meta, node):
    ni[node, ALIVE] = 0
    ni[node, PARENT] = -1
    free[meta[NFREE]] = node
    meta[NFREE] += 1
    meta[NLIVE] -= 1


@njit(cache=True)
def _link(ni, obj, meta, node, s):
    """Push slot ``s`` at the front of a node's list (or the infinite list for IN_INF).

    The new object is not in the packed copy; pushing at the front keeps every node's list
    ordered as [unpacked..., packed...], so queries walk only the unpacked prefix.
    """
    head = meta[INF_HEAD] if node == IN_INF else ni[node, HEAD]
    obj[s, ONODE] = node
    obj[s, ONEXT] = head
    obj[s, OPREV] = -1
    obj[s, OPK] = -1
    if head != -1:
        obj[head, OPREV] = s
    if node == IN_INF:
        meta[INF_HEAD] = s
        meta[INF_COUNT] += 1
    else:
        ni[node, HEAD] = s
        ni[node, COUNT] += 1
        meta[TREE_COUNT] += 1
        meta[UNPACKED] += 1


@njit(cache=True)
def _unpack(ni, obj, pk, pk_slot, node, row):
    """Remove a row from a node's packed range by moving the range's last row into it."""
    last = ni[node, PSTART] + ni[node, PLEN] - 1
    if row != last:
        for j in range(5):
            pk[row, j] = pk[last, j]
        moved = pk_slot[last]
        pk_slot[row] = moved
        obj[moved, OPK] = row
    ni[node, PLEN] -= 1


@njit(cache=True)
def _unlink(ni, obj, meta, pk, pk_slot, s):
    """Take slot ``s`` out of whatever list holds it, in O(1); returns the node it was in."""
    node = obj[s, ONODE]
    nxt = obj[s, ONEXT]
    prv = obj[s, OPREV]
    if prv != -1:
        obj[prv, ONEXT] = nxt
    elif node == IN_INF:
        meta[INF_HEAD] = nxt
    else:
        ni[node, HEAD] = nxt
    if nxt != -1:
        obj[nxt, OPREV] = prv
    if node == IN_INF:
        meta[INF_COUNT] -= 1
    else:
        ni[node, COUNT] -= 1
        meta[TREE_COUNT] -= 1
        meta[STALE] += 1
        if obj[s, OPK] >= 0:
            _unpack(ni, obj, pk, pk_slot, node, obj[s, OPK])
        else:
            meta[UNPACKED] -= 1
    obj[s, ONODE] = NO_NODE
    obj[s, ONEXT] = -1
    obj[s, OPREV] = -1
    obj[s, OPK] = -1
    return node


@njit(cache=True)
def _cleanup(ni, free, meta, node):
    """Free nodes left without objects or children, upward; then shrink a lone-child root."""
    while node != -1 and ni[node, COUNT] == 0 and ni[node, NCHILD] == 0:
        parent = ni[node, PARENT]
        if parent != -1:
            for j in range(8):
                if ni[parent, CHILD + j] == node:
                    ni[parent, CHILD + j] = -1
            ni[parent, NCHILD] -= 1
        else:
            meta[ROOT] = -1
        _release_node(ni, free, meta, node)
        node = parent
    # A root that holds nothing itself and has one child only adds a level to every query.
    root = meta[ROOT]
    while root != -1 and ni[root, COUNT] == 0 and ni[root, NCHILD] == 1:
        child = -1
        for j in range(8):
            if ni[root, CHILD + j] != -1:
                child = ni[root, CHILD + j]
        ni[child, PARENT] = -1
        _release_node(ni, free, meta, root)
        meta[ROOT] = child
        root = child


@njit(cache=True)
def _expand_up(nf, ni, node, cx, cy, cz, r, vd):
    """Grow the subtree bounds of ``node`` and its ancestors to cover one object.

    Stops at the first ancestor that already covers it: parents always cover their children.
    """
    while node != -1:
        changed = False
        c = (cx, cy, cz)
        for a in range(3):
            if c[a] < nf[node, CLO + a]:
                nf[node, CLO + a] = c[a]
                changed = True
            if c[a] > nf[node, CHI + a]:
                nf[node, CHI + a] = c[a]
                changed = True
            if c[a] - r < nf[node, SLO + a]:
                nf[node, SLO + a] = c[a] - r
                changed = True
            if c[a] + r > nf[node, SHI + a]:
                nf[node, SHI + a] = c[a] + r
                changed = True
        if vd > nf[node, VMAX]:
            nf[node, VMAX] = vd
            changed = True
        if not changed:
            return
        node = ni[node, PARENT]


# ---------------------------------------------------------------- placement rule


@njit(cache=True)
def _unbounded(cx, cy, cz, vd):
    """Kept in the infinite list: an infinite (or absurd) view distance, or absurd coordinates.

    Beyond _UNBOUNDED the tree would need hundreds of levels (or overflow), so such objects
    are tested one by one like the infinite ones.
    """
    return not (vd <= _UNBOUNDED and abs(cx) <= _UNBOUNDED and abs(cy) <= _UNBOUNDED
                and abs(cz) <= _UNBOUNDED)


@njit(cache=True)
def _level_for(vd, emin):
    """Smallest level whose nodes may hold radius ``vd`` (``vd <= S/2``), at least ``emin``."""
    if vd <= math.ldexp(1.0, emin - 1):
        return emin
    m, e = math.frexp(vd)  # vd = m * 2**e with 0.5 <= m < 1, so vd <= 2**e
    level = e + 1
    if m == 0.5:  # vd is exactly 2**(e-1): a node one level down holds it at S/2
        level = e
    return max(level, emin)


@njit(cache=True)
def _center_in_cube(nf, node, cx, cy, cz):
    lo = nf[node, LO]
    s = nf[node, SIZE]
    if cx < lo or cx > lo + s:
        return False
    lo = nf[node, LO + 1]
    if cy < lo or cy > lo + s:
        return False
    lo = nf[node, LO + 2]
    return lo <= cz <= lo + s


@njit(cache=True)
def _can_hold_below(nf, node, cx, cy, cz, vd):
    """The sphere belongs in this node or its subtree: centre in the cube and ``vd <= S/2``."""
    return vd <= 0.5 * nf[node, SIZE] and _center_in_cube(nf, node, cx, cy, cz)


@njit(cache=True)
def _fits_node(nf, ni, node, cx, cy, cz, vd, emin):
    """The placement rule: the sphere belongs in exactly this node's list."""
    if not _can_hold_below(nf, node, cx, cy, cz, vd):
        return False
    return vd >= 0.25 * nf[node, SIZE] or ni[node, LEVEL] == emin


@njit(cache=True)
def _growth_steps(nf, ni, meta, cx, cy, cz, vd):
    """(root doublings needed to hold the sphere, root level afterwards); no state changes."""
    root = meta[ROOT]
    if root == -1:
        return 1, _level_for(vd, meta[EMIN])
    x = nf[root, LO]
    y = nf[root, LO + 1]
    z = nf[root, LO + 2]
    s = nf[root, SIZE]
    level = ni[root, LEVEL]
    steps = 0
    while not (vd <= 0.5 * s and x <= cx <= x + s and y <= cy <= y + s and z <= cz <= z + s):
        x = x - s if cx < x else x
        y = y - s if cy < y else y
        z = z - s if cz < z else z
        s *= 2.0
        level += 1
        steps += 1
    return steps, level


@njit(cache=True)
def _grow_root(nf, ni, free, meta, cx, cy, cz, vd):
    """Make the root hold the sphere: create one, or double it toward the sphere."""
    root = meta[ROOT]
    if root == -1:
        m = math.ldexp(1.0, meta[EMIN])
        level = _level_for(vd, meta[EMIN])
        root = _alloc_node(nf, ni, free, meta, math.floor(cx / m) * m, math.floor(cy / m) * m,
                           math.floor(cz / m) * m, level, -1)
        meta[ROOT] = root
        return root
    while not _can_hold_below(nf, root, cx, cy, cz, vd):
        s = nf[root, SIZE]
        octant = 0
        x = nf[root, LO]
        y = nf[root, LO + 1]
        z = nf[root, LO + 2]
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
        new = _alloc_node(nf, ni, free, meta, x, y, z, ni[root, LEVEL] + 1, -1)
        for j in range(CLO, NF):
            nf[new, j] = nf[root, j]  # the old subtree's bounds are the new root's bounds
        ni[new, CHILD + octant] = root
        ni[new, NCHILD] = 1
        ni[root, PARENT] = new
        meta[ROOT] = new
        root = new
    return root


@njit(cache=True)
def _descend(nf, ni, free, meta, node, cx, cy, cz, vd):
    """From a node that can hold the sphere, walk down (creating children) to its node."""
    emin = meta[EMIN]
    while vd < 0.25 * nf[node, SIZE] and ni[node, LEVEL] > emin:
        half = 0.5 * nf[node, SIZE]
        x = nf[node, LO]
        y = nf[node, LO + 1]
        z = nf[node, LO + 2]
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
        child = ni[node, CHILD + octant]
        if child == -1:
            child = _alloc_node(nf, ni, free, meta, x, y, z, ni[node, LEVEL] - 1, node)
            ni[node, CHILD + octant] = child
            ni[node, NCHILD] += 1
        node = child
    return node


@njit(cache=True)
def _nodes_needed(nf, ni, meta, cx, cy, cz, vd):
    """Upper bound on the nodes that placing one sphere may allocate."""
    steps, level = _growth_steps(nf, ni, meta, cx, cy, cz, vd)
    return steps + level - meta[EMIN] + 1


@njit(cache=True)
def _place(nf, ni, free, meta, obj, s, start, cx, cy, cz, r, vd):
    """Link a finite-view-distance object into its node, searching up from ``start`` first."""
    node = start
    while node != -1 and not _can_hold_below(nf, node, cx, cy, cz, vd):
        node = ni[node, PARENT]
    if node == -1:
        node = _grow_root(nf, ni, free, meta, cx, cy, cz, vd)
    node = _descend(nf, ni, free, meta, node, cx, cy, cz, vd)
    _link(ni, obj, meta, node, s)
    _expand_up(nf, ni, node, cx, cy, cz, r, vd)


# ---------------------------------------------------------------- batch mutations


@njit(cache=True)
def _insert_batch(nf, ni, free, meta, obj, pk, pk_slot, centers, radii, vdist, slots, first):
    """Insert ``slots[first:]``; returns how far it got (it stops when the node pool is low).

    New objects are not packed (``pk`` is unused; the batch kernels share one signature).
    """
    for i in range(first, slots.shape[0]):
        s = slots[i]
        cx = centers[s, 0]
        cy = centers[s, 1]
        cz = centers[s, 2]
        vd = vdist[s]
        if _unbounded(cx, cy, cz, vd):
            _link(ni, obj, meta, IN_INF, s)
            continue
        if meta[NFREE] < _nodes_needed(nf, ni, meta, cx, cy, cz, vd):
            return i
        _place(nf, ni, free, meta, obj, s, meta[ROOT], cx, cy, cz, radii[s], vd)
    return slots.shape[0]


@njit(cache=True)
def _update_batch(nf, ni, free, meta, obj, pk, pk_slot, centers, radii, vdist, slots, first):
    """Re-place moved objects (the store holds the new values); returns how far it got.

    In-place mutation: an object whose view sphere still satisfies its node's rule stays in
    its list (only the bounds grow); otherwise it is relinked starting from its old node and
    the old node is cleaned up last, so shared ancestors are not freed and recreated.
    """
    emin = meta[EMIN]
    for i in range(first, slots.shape[0]):
        s = slots[i]
        cx = centers[s, 0]
        cy = centers[s, 1]
        cz = centers[s, 2]
        r = radii[s]
        vd = vdist[s]
        old = obj[s, ONODE]
        if _unbounded(cx, cy, cz, vd):
            if old != IN_INF:
                _unlink(ni, obj, meta, pk, pk_slot, s)
                _link(ni, obj, meta, IN_INF, s)
                _cleanup(ni, free, meta, old)
            continue
        if old != IN_INF and _fits_node(nf, ni, old, cx, cy, cz, vd, emin):
            _expand_up(nf, ni, old, cx, cy, cz, r, vd)
            row = obj[s, OPK]
            if row >= 0:  # keep the packed copy current in place
                pk[row, 0] = cx
                pk[row, 1] = cy
                pk[row, 2] = cz
                pk[row, 3] = r
                pk[row, 4] = vd
            meta[STALE] += 1
            continue
        if meta[NFREE] < _nodes_needed(nf, ni, meta, cx, cy, cz, vd):
            return i
        _unlink(ni, obj, meta, pk, pk_slot, s)
        if old == IN_INF:
            _place(nf, ni, free, meta, obj, s, meta[ROOT], cx, cy, cz, r, vd)
        else:
            _place(nf, ni, free, meta, obj, s, old, cx, cy, cz, r, vd)
            _cleanup(ni, free, meta, old)
    return slots.shape[0]


@njit(cache=True)
def _remove_batch(ni, free, meta, obj, pk, pk_slot, slots):
    """Unlink each object in O(1) and free the nodes it leaves empty."""
    for i in range(slots.shape[0]):
        node = _unlink(ni, obj, meta, pk, pk_slot, slots[i])
        if node != IN_INF:
            _cleanup(ni, free, meta, node)


@njit(cache=True)
def _rebuild(nf, ni, meta, obj, centers, radii, vdist, pk, pk_slot):
    """Refit every node's subtree bounds exactly and repack every node's objects.

    The packed copy (rows x, y, z, radius, view distance, grouped by node) lets queries read
    a node's objects sequentially instead of chasing its linked list through the store. One
    pass in slot order, so the store is read sequentially too.
    """
    ncap = ni.shape[0]
    fill = np.empty(ncap, dtype=np.int64)
    pos = 0
    for node in range(ncap):
        if ni[node, ALIVE] == 1:
            _clear_bounds(nf, node)
            ni[node, PSTART] = pos
            ni[node, PLEN] = ni[node, COUNT]
            fill[node] = pos
            pos += ni[node, COUNT]
    for s in range(obj.shape[0]):
        node = obj[s, ONODE]
        if node < 0:
            continue
        p = fill[node]
        fill[node] = p + 1
        r = radii[s]
        for a in range(3):
            c = centers[s, a]
            pk[p, a] = c
            nf[node, CLO + a] = min(nf[node, CLO + a], c)
            nf[node, CHI + a] = max(nf[node, CHI + a], c)
            nf[node, SLO + a] = min(nf[node, SLO + a], c - r)
            nf[node, SHI + a] = max(nf[node, SHI + a], c + r)
        pk[p, 3] = r
        pk[p, 4] = vdist[s]
        pk_slot[p] = s
        obj[s, OPK] = p
        nf[node, VMAX] = max(nf[node, VMAX], vdist[s])
    # Children are exactly one level below their parent: merging finest levels first makes
    # every child complete before it is merged into its parent.
    live = np.flatnonzero(ni[:, ALIVE] == 1)
    levels = np.empty(live.shape[0], dtype=np.int64)
    for k in range(live.shape[0]):
        levels[k] = ni[live[k], LEVEL]
    order = np.argsort(levels)
    for k in range(order.shape[0]):
        node = live[order[k]]
        p = ni[node, PARENT]
        if p == -1:
            continue
        for a in range(3):
            nf[p, CLO + a] = min(nf[p, CLO + a], nf[node, CLO + a])
            nf[p, CHI + a] = max(nf[p, CHI + a], nf[node, CHI + a])
            nf[p, SLO + a] = min(nf[p, SLO + a], nf[node, SLO + a])
            nf[p, SHI + a] = max(nf[p, SHI + a], nf[node, SHI + a])
        nf[p, VMAX] = max(nf[p, VMAX], nf[node, VMAX])
    meta[STALE] = 0
    meta[UNPACKED] = 0


# ---------------------------------------------------------------- node tests for queries


@njit(cache=True)
def _sphere_bounds(nf, node, qmag, lo, hi):
    """Write the node's padded sphere-bounds AABB into ``lo``/``hi``; returns the pad."""
    m = 0.0
    for a in range(3):
        m = max(m, abs(nf[node, SLO + a]), abs(nf[node, SHI + a]))
    pad = _REL_PAD * (m + qmag + 1.0)
    for a in range(3):
        lo[a] = nf[node, SLO + a] - pad
        hi[a] = nf[node, SHI + a] + pad
    return pad


@njit(cache=True)
def _eye_in_reach(nf, node, ex, ey, ez, emag):
    """The structural test: the eye lies in the cube expanded by its largest radius, S/2."""
    s = nf[node, SIZE]
    reach = 0.5 * s + _REL_PAD * (abs(nf[node, LO]) + abs(nf[node, LO + 1])
                                  + abs(nf[node, LO + 2]) + s + emag + 1.0)
    e = (ex, ey, ez)
    for a in range(3):
        lo = nf[node, LO + a]
        if e[a] < lo - reach or e[a] > lo + s + reach:
            return False
    return True


@njit(cache=True)
def _eye_near_centres(nf, node, ex, ey, ez, emag):
    """The tight test: some centre of the subtree may be within its view distance of the eye."""
    d2 = 0.0
    m = emag
    e = (ex, ey, ez)
    for a in range(3):
        lo = nf[node, CLO + a]
        hi = nf[node, CHI + a]
        m = max(m, abs(lo), abs(hi))
        d = max(lo - e[a], 0.0, e[a] - hi)
        d2 += d * d
    return math.sqrt(d2) <= nf[node, VMAX] + _REL_PAD * (m + nf[node, VMAX] + 1.0)


@njit(cache=True)
def _is_empty(nf, node):
    return nf[node, VMAX] == -np.inf


# ---------------------------------------------------------------- queries
#
# A node's objects are read from the packed copy when it is current (sequential memory), or by
# walking the node's linked list through the store when the node changed since the last
# rebuild. Both paths make the same exact per-object decision.


@njit(cache=True)
def _scan_infinite(obj, meta, centers, radii, vdist, planes, use_vd, eye, out):
    """Test the unbounded list into ``out``; returns (kept, considered).

    Its view distances are infinite or beyond _UNBOUNDED, so the view-distance test is kept
    for the exact answer (it only rejects objects at absurd coordinates).
    """
    k = 0
    considered = 0
    s = meta[INF_HEAD]
    while s != -1:
        considered += 1
        x = centers[s, 0]
        y = centers[s, 1]
        z = centers[s, 2]
        if (not use_vd or within_view_distance(eye[0], eye[1], eye[2], x, y, z, vdist[s])) and (
                sphere_in_frustum(planes, x, y, z, radii[s])):
            out[k] = s
            k += 1
        s = obj[s, ONEXT]
    return k, considered


@njit(cache=True)
def _drop_occluded(out, k, centers, radii, vp, zd, zo, zw, zh):
    """Compact away the kept objects hidden by the Z-pyramid; returns (kept, occluded).

    A pass of its own, after the traversal: a call that passes arrays costs reference counting,
    which would dominate the hot loops if made per candidate rather than per kept object.
    """
    if zw.shape[0] == 0:
        return k, 0
    j = 0
    for i in range(k):
        s = out[i]
        if not sphere_occluded(centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                               vp, zd, zo, zw, zh):
            out[j] = s
            j += 1
    return j, k - j


@njit(cache=True)
def _query_eye(nf, ni, meta, obj, centers, radii, vdist, pk, pk_slot, planes, eye, tight,
               stack_cap, outcome, vp, zd, zo, zw, zh):
    """Frustum query with view distance: the point query for the eye, then exact tests.

    Returns (slots, considered, nodes visited, nodes occluded, objects occluded).
    """
    out = np.empty(meta[TREE_COUNT] + meta[INF_COUNT], dtype=np.int64)
    k, considered = _scan_infinite(obj, meta, centers, radii, vdist, planes, True, eye, out)
    visited = 0
    occ_nodes = 0
    ex = eye[0]
    ey = eye[1]
    ez = eye[2]
    emag = max(abs(ex), abs(ey), abs(ez))
    qmag = emag
    for p in range(planes.shape[0]):
        qmag = max(qmag, abs(planes[p, 3]))
    lo = np.empty(3)
    hi = np.empty(3)
    stack = np.empty(stack_cap, dtype=np.int64)
    top = 0
    if meta[ROOT] != -1:
        stack[0] = meta[ROOT]
        top = 1
    while top > 0:
        top -= 1
        node = stack[top]
        if not _eye_in_reach(nf, node, ex, ey, ez, emag) or _is_empty(nf, node) or (
                tight and not _eye_near_centres(nf, node, ex, ey, ez, emag)):
            outcome[node] = NODE_REJECT_VIEWDIST
            continue
        _sphere_bounds(nf, node, qmag, lo, hi)
        cls = box_vs_frustum(planes, lo, hi)
        if cls == OUTSIDE:
            outcome[node] = NODE_REJECT_FRUSTUM
            continue
        if box_occluded(lo, hi, vp, zd, zo, zw, zh):
            outcome[node] = NODE_REJECT_OCCLUSION
            occ_nodes += 1
            continue
        outcome[node] = NODE_INSIDE if cls == INSIDE else NODE_PARTIAL
        visited += 1
        considered += ni[node, COUNT]
        s = ni[node, HEAD]
        while s != -1 and obj[s, OPK] < 0:  # linked since the last rebuild: not packed
            x = centers[s, 0]
            y = centers[s, 1]
            z = centers[s, 2]
            if within_view_distance(ex, ey, ez, x, y, z, vdist[s]) and sphere_in_frustum(
                    planes, x, y, z, radii[s]):
                out[k] = s
                k += 1
            s = obj[s, ONEXT]
        start = ni[node, PSTART]
        for p in range(start, start + ni[node, PLEN]):
            x = pk[p, 0]
            y = pk[p, 1]
            z = pk[p, 2]
            if within_view_distance(ex, ey, ez, x, y, z, pk[p, 4]) and sphere_in_frustum(
                    planes, x, y, z, pk[p, 3]):
                out[k] = pk_slot[p]
                k += 1
        for j in range(8):
            c = ni[node, CHILD + j]
            if c != -1:
                stack[top] = c
                top += 1
    k, occ_obj = _drop_occluded(out, k, centers, radii, vp, zd, zo, zw, zh)
    return out[:k], considered, visited, occ_nodes, occ_obj


@njit(cache=True)
def _query_planes(nf, ni, meta, obj, centers, radii, pk, pk_slot, planes, stack_cap, outcome,
                  vp, zd, zo, zw, zh):
    """Frustum query without view distance, on the subtree bounds of the objects' spheres.

    Subtrees whose bounds are inside every plane are accepted without per-object plane tests.
    """
    out = np.empty(meta[TREE_COUNT] + meta[INF_COUNT], dtype=np.int64)
    k, considered = _scan_infinite(obj, meta, centers, radii, radii, planes, False, planes[0],
                                   out)
    visited = 0
    occ_nodes = 0
    qmag = 0.0
    for p in range(planes.shape[0]):
        qmag = max(qmag, abs(planes[p, 3]))
    lo = np.empty(3)
    hi = np.empty(3)
    stack = np.empty(stack_cap, dtype=np.int64)
    inside = np.empty(stack_cap, dtype=np.bool_)  # the parent was wholly inside
    top = 0
    if meta[ROOT] != -1:
        stack[0] = meta[ROOT]
        inside[0] = False
        top = 1
    while top > 0:
        top -= 1
        node = stack[top]
        whole = inside[top]
        if _is_empty(nf, node):
            outcome[node] = NODE_REJECT_FRUSTUM
            continue
        if not whole:
            _sphere_bounds(nf, node, qmag, lo, hi)
            cls = box_vs_frustum(planes, lo, hi)
            if cls == OUTSIDE:
                outcome[node] = NODE_REJECT_FRUSTUM
                continue
            if box_occluded(lo, hi, vp, zd, zo, zw, zh):
                outcome[node] = NODE_REJECT_OCCLUSION
                occ_nodes += 1
                continue
            whole = cls == INSIDE
        outcome[node] = NODE_INSIDE if whole else NODE_PARTIAL
        visited += 1
        considered += ni[node, COUNT]
        s = ni[node, HEAD]
        while s != -1 and obj[s, OPK] < 0:  # linked since the last rebuild: not packed
            if whole or sphere_in_frustum(planes, centers[s, 0], centers[s, 1], centers[s, 2],
                                          radii[s]):
                out[k] = s
                k += 1
            s = obj[s, ONEXT]
        start = ni[node, PSTART]
        for p in range(start, start + ni[node, PLEN]):
            if whole or sphere_in_frustum(planes, pk[p, 0], pk[p, 1], pk[p, 2], pk[p, 3]):
                out[k] = pk_slot[p]
                k += 1
        for j in range(8):
            c = ni[node, CHILD + j]
            if c != -1:
                stack[top] = c
                inside[top] = whole
                top += 1
    k, occ_obj = _drop_occluded(out, k, centers, radii, vp, zd, zo, zw, zh)
    return out[:k], considered, visited, occ_nodes, occ_obj


@njit(cache=True)
def _query_region(nf, ni, meta, obj, centers, radii, pk, pk_slot, kind, q, qr, stack_cap):
    """Box (kind 0), sphere (1) or ray (2) query over the subtree bounds of the spheres.

    ``q`` is a (3, 3) array: rows (lo, hi, -) for a box, (centre, -, -) for a sphere and
    (origin, unit direction, inverse direction) for a ray. Returns (slots, entry distances).
    """
    n = meta[TREE_COUNT] + meta[INF_COUNT]
    out = np.empty(n, dtype=np.int64)
    ts = np.empty(n, dtype=np.float64)
    k = 0
    qmag = qr
    for i in range(3):
        for a in range(3):
            if not math.isinf(q[i, a]):
                qmag = max(qmag, abs(q[i, a]))
    lo = np.empty(3)
    hi = np.empty(3)
    stack = np.empty(stack_cap, dtype=np.int64)
    top = 0
    if meta[ROOT] != -1:
        stack[0] = meta[ROOT]
        top = 1
    s = meta[INF_HEAD]  # the infinite list first, then each node's objects
    while True:
        while s != -1 and obj[s, OPK] < 0:  # a list, up to the node's packed objects
            t = _object_hit(centers[s, 0], centers[s, 1], centers[s, 2], radii[s], kind, q, qr)
            if t >= 0.0:
                out[k] = s
                ts[k] = t
                k += 1
            s = obj[s, ONEXT]
        if top == 0:
            break
        top -= 1
        node = stack[top]
        if _is_empty(nf, node):
            continue
        pad = _sphere_bounds(nf, node, qmag, lo, hi)
        if not _box_hit(lo, hi, kind, q, qr, pad):
            continue
        start = ni[node, PSTART]
        for p in range(start, start + ni[node, PLEN]):
            t = _object_hit(pk[p, 0], pk[p, 1], pk[p, 2], pk[p, 3], kind, q, qr)
            if t >= 0.0:
                out[k] = pk_slot[p]
                ts[k] = t
                k += 1
        s = ni[node, HEAD]
        for j in range(8):
            c = ni[node, CHILD + j]
            if c != -1:
                stack[top] = c
                top += 1
    return out[:k], ts[:k]


@njit(cache=True, inline="always")
def _object_hit(x, y, z, r, kind, q, qr):
    """The exact per-object predicate of a region query: >= 0 on a hit (the ray's entry t)."""
    if kind == 0:
        return 0.0 if sphere_overlaps_box(x, y, z, r, q[0], q[1]) else -1.0
    if kind == 1:
        return 0.0 if spheres_touch(x, y, z, r, q[0, 0], q[0, 1], q[0, 2], qr) else -1.0
    return ray_sphere_entry(q[0, 0], q[0, 1], q[0, 2], q[1, 0], q[1, 1], q[1, 2], x, y, z, r)


@njit(cache=True, inline="always")
def _box_hit(lo, hi, kind, q, qr, pad):
    """Conservative node test of a region query against padded subtree sphere bounds."""
    if kind == 0:
        return (lo[0] <= q[1, 0] and hi[0] >= q[0, 0] and lo[1] <= q[1, 1]
                and hi[1] >= q[0, 1] and lo[2] <= q[1, 2] and hi[2] >= q[0, 2])
    if kind == 1:
        d2 = 0.0
        for a in range(3):
            d = max(lo[a] - q[0, a], 0.0, q[0, a] - hi[a])
            d2 += d * d
        return math.sqrt(d2) <= qr + pad
    return ray_box_hits(q[0, 0], q[0, 1], q[0, 2], q[2, 0], q[2, 1], q[2, 2], lo, hi)


# ---------------------------------------------------------------- validation


@njit(cache=True)
def _check(nf, ni, free, meta, obj, centers, radii, vdist, alive_slots, pk, pk_slot):
    """Check every structural invariant; returns (error code, offending node or slot), 0 = ok."""
    ncap = ni.shape[0]
    emin = meta[EMIN]
    # Free stack: distinct dead nodes, and together with the live ones the whole pool.
    seen = np.zeros(ncap, dtype=np.bool_)
    for i in range(meta[NFREE]):
        node = free[i]
        if node < 0 or node >= ncap or seen[node] or ni[node, ALIVE] != 0:
            return 1, node
        seen[node] = True
    if meta[NFREE] + meta[NLIVE] != ncap:
        return 2, -1
    nlive = 0
    tree_count = 0
    unpacked = 0
    for node in range(ncap):
        if ni[node, ALIVE] == 0:
            continue
        nlive += 1
        level = ni[node, LEVEL]
        size = nf[node, SIZE]
        if size != math.ldexp(1.0, level) or level < emin:
            return 3, node
        parent = ni[node, PARENT]
        if parent == -1:
            if meta[ROOT] != node:
                return 4, node
        else:
            if ni[parent, ALIVE] == 0 or ni[parent, LEVEL] != level + 1:
                return 4, node
            octant = 0
            for a in range(3):
                mid = nf[parent, LO + a] + 0.5 * nf[parent, SIZE]
                if nf[node, LO + a] == mid:
                    octant |= 1 << a
                elif nf[node, LO + a] != nf[parent, LO + a]:
                    return 5, node
            if ni[parent, CHILD + octant] != node:
                return 5, node
            if ni[node, COUNT] == 0 and ni[node, NCHILD] == 0:
                return 6, node  # an empty leaf should have been cleaned up
        nchild = 0
        for j in range(8):
            c = ni[node, CHILD + j]
            if c != -1:
                nchild += 1
                if c < 0 or c >= ncap or ni[c, ALIVE] == 0 or ni[c, PARENT] != node:
                    return 7, node
                for a in range(3):
                    if (nf[c, CLO + a] < nf[node, CLO + a] or nf[c, CHI + a] > nf[node, CHI + a]
                            or nf[c, SLO + a] < nf[node, SLO + a]
                            or nf[c, SHI + a] > nf[node, SHI + a]):
                        return 8, node
                if nf[c, VMAX] > nf[node, VMAX]:
                    return 8, node
        if nchild != ni[node, NCHILD]:
            return 7, node
        # The node's list: links, membership, placement band, bounds, packed copy.
        count = 0
        packed = 0
        prev = -1
        start = ni[node, PSTART]
        s = ni[node, HEAD]
        while s != -1:
            count += 1
            if count > ni[node, COUNT] or obj[s, OPREV] != prev or obj[s, ONODE] != node:
                return 9, node
            row = obj[s, OPK]
            if row < 0:
                if packed:
                    return 14, s  # unpacked objects must precede the packed ones
                unpacked += 1
            else:
                packed += 1
                if (row < start or row >= start + ni[node, PLEN] or row >= pk.shape[0]
                        or pk_slot[row] != s or pk[row, 0] != centers[s, 0]
                        or pk[row, 1] != centers[s, 1] or pk[row, 2] != centers[s, 2]
                        or pk[row, 3] != radii[s] or pk[row, 4] != vdist[s]):
                    return 14, s
            vd = vdist[s]
            if not _fits_node(nf, ni, node, centers[s, 0], centers[s, 1], centers[s, 2],
                              vd, emin):
                return 10, s
            for a in range(3):
                c = centers[s, a]
                if (c < nf[node, CLO + a] or c > nf[node, CHI + a]
                        or c - radii[s] < nf[node, SLO + a] or c + radii[s] > nf[node, SHI + a]):
                    return 8, node
            if vd > nf[node, VMAX]:
                return 8, node
            prev = s
            s = obj[s, ONEXT]
        if count != ni[node, COUNT]:
            return 9, node
        tree_count += count
        if packed != ni[node, PLEN]:
            return 14, node
    if nlive != meta[NLIVE] or tree_count != meta[TREE_COUNT] or unpacked != meta[UNPACKED]:
        return 2, -1
    # Every live node must hang from the root.
    reach = 0
    if meta[ROOT] != -1:
        stack = np.empty(8 * ncap + 8, dtype=np.int64)
        stack[0] = meta[ROOT]
        top = 1
        while top > 0:
            top -= 1
            node = stack[top]
            reach += 1
            if reach > nlive:
                break  # a cycle: no need to go on
            for j in range(8):
                c = ni[node, CHILD + j]
                if c != -1:
                    stack[top] = c
                    top += 1
    if reach != nlive:
        return 11, meta[ROOT]
    # The infinite list.
    count = 0
    prev = -1
    s = meta[INF_HEAD]
    while s != -1:
        count += 1
        if (count > meta[INF_COUNT] or obj[s, OPREV] != prev or obj[s, ONODE] != IN_INF
                or not _unbounded(centers[s, 0], centers[s, 1], centers[s, 2], vdist[s])
                or obj[s, OPK] != -1):
            return 12, s
        prev = s
        s = obj[s, ONEXT]
    if count != meta[INF_COUNT]:
        return 12, -1
    # Every live object is in exactly one list; dead slots are in none.
    if alive_slots.shape[0] != meta[TREE_COUNT] + meta[INF_COUNT]:
        return 13, -1
    for i in range(alive_slots.shape[0]):
        s = alive_slots[i]
        unbounded = _unbounded(centers[s, 0], centers[s, 1], centers[s, 2], vdist[s])
        if obj[s, ONODE] == NO_NODE or (obj[s, ONODE] == IN_INF) != unbounded:
            return 13, s
    return 0, -1


_CHECK_MESSAGES = {
    1: "node free stack holds a live, repeated or out-of-range node",
    2: "node counts do not add up (free + live, live nodes, objects in nodes)",
    3: "node size is not 2**level or the level is finer than the finest level",
    4: "broken parent link or parent level",
    5: "child cube is not an octant of its parent",
    6: "empty childless node was not cleaned up",
    7: "broken child links or child count",
    8: "subtree bounds do not cover the objects or the children",
    9: "broken object list links or count",
    10: "object violates the placement rule (band [S/4, S/2] or centre outside the cube)",
    11: "a live node is not reachable from the root",
    12: "broken infinite-view-distance list",
    13: "live object not in exactly the right list",
    14: "packed copy differs from the node's list or the store, or out of list order",
}


# ---------------------------------------------------------------- the index


def _pow2_at_least(x: float) -> int:
    """Smallest integer e with 2**e >= x (x > 0)."""
    m, e = math.frexp(x)
    return e - 1 if m == 0.5 else e


class ViewDistanceTree(SpatialIndex):
    """Matthews' variable-radius sphere octree over the objects' view spheres."""

    name = "viewdist"
    # After a batch of changes the packed copy is rebuilt (and the bounds refitted) once more
    # than max(rebuild_min, objects / 16) objects were linked into nodes since the last
    # rebuild (queries read those through the lists, a cache miss each), or once moves and
    # removals have loosened the bounds by more than max(rebuild_min, 2 * objects) changes.
    # Doing it in the mutation keeps the cost out of the cull.
    rebuild_min = 4096

    def __init__(self, min_node_size: float = 1.0 / 16.0, tight: bool = True,
                 **kwargs: Any) -> None:
        if kwargs.get("leafy") not in (None, False) or kwargs.get("split_threshold") is not None:
            raise ValueError("viewdist has no heuristic: leafy and split_threshold do not apply")
        unknown = set(kwargs) - {"leafy", "split_threshold"}
        if unknown:
            raise ValueError(f"viewdist: unknown arguments {sorted(unknown)}")
        if not (min_node_size > 0 and math.isfinite(min_node_size)):
            raise ValueError(f"viewdist: min_node_size must be > 0, got {min_node_size}")
        super().__init__()
        self._tight = bool(tight)
        self._obj = np.full((self.capacity, 4), -1, dtype=np.int64)
        self._meta = np.zeros(NMETA, dtype=np.int64)
        self._meta[ROOT] = -1
        self._meta[INF_HEAD] = -1
        self._meta[EMIN] = _pow2_at_least(float(min_node_size))
        self._nf = np.zeros((0, NF), dtype=np.float64)
        self._ni = np.zeros((0, NI), dtype=np.int64)
        self._node_free = np.zeros(0, dtype=np.int64)
        self._outcome = np.zeros(0, dtype=np.int8)
        self._pk = np.zeros((0, 5), dtype=np.float64)  # packed x, y, z, radius, view distance
        self._pk_slot = np.zeros(0, dtype=np.int64)
        self._grow_nodes(256)

    # ------------------------------------------------------------ public extras

    @property
    def min_node_size(self) -> float:
        """Edge length of the finest nodes (a power of two)."""
        return math.ldexp(1.0, int(self._meta[EMIN]))

    def describe(self) -> str:
        """Index name and finest node size."""
        return f"viewdist (finest node {self.min_node_size:g})"

    def _live_nodes(self) -> np.ndarray:
        """Indices of the allocated nodes, in pool order."""
        return np.flatnonzero(self._ni[:, ALIVE] == 1)

    def stats(self) -> dict[str, Any]:
        """Nodes, depth, objects per level, root size and the infinite list's length."""
        live = self._live_nodes()
        st = super().stats()
        st["nodes"] = int(live.shape[0])
        root = int(self._meta[ROOT])
        if root == -1:
            return st | {"infinite": int(self._meta[INF_COUNT]), "root_size": 0.0}
        levels = self._ni[live, LEVEL]
        root_level = int(self._ni[root, LEVEL])
        st["max_depth"] = int(root_level - levels.min())
        per_level = np.bincount(root_level - levels, weights=self._ni[live, COUNT])
        st["objects_per_depth"] = [int(x) for x in per_level]
        st["infinite"] = int(self._meta[INF_COUNT])
        st["root_size"] = float(self._nf[root, SIZE])
        st["stale"] = int(self._meta[STALE])
        return st

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node cubes (the structural cells, not the loose bounds) and their depth."""
        live = self._live_nodes()
        lo = self._nf[live, LO:LO + 3].copy()
        hi = lo + self._nf[live, SIZE][:, None]
        root = int(self._meta[ROOT])
        depth = (self._ni[root, LEVEL] - self._ni[live, LEVEL]) if root != -1 else \
            np.zeros(0, dtype=np.int64)
        return lo, hi, depth.astype(np.int64)

    def node_outcomes(self) -> np.ndarray:
        """Outcome of each node of :meth:`node_boxes` in the last frustum query."""
        return self._outcome[self._live_nodes()].copy()

    def rebuild(self) -> None:
        """Refit every node's bounds exactly and repack its objects (one compiled pass)."""
        n = int(self._meta[TREE_COUNT])
        if self._pk.shape[0] < n or self._pk.shape[0] > 2 * n + 1024:
            self._pk = np.empty((n + n // 8, 5), dtype=np.float64)
            self._pk_slot = np.empty(n + n // 8, dtype=np.int64)
        _rebuild(self._nf, self._ni, self._meta, self._obj, self._centers, self._radii,
                 self._vdist, self._pk, self._pk_slot)

    # ------------------------------------------------------------ mutation hooks

    def _on_insert(self, slots: np.ndarray) -> None:
        if self._meta[ROOT] == -1:
            self._choose_root(slots)
        self._run_batch(_insert_batch, slots)
        self._maybe_rebuild()

    def _on_update(self, slots, old_centers, old_radii, old_vdist) -> None:
        self._run_batch(_update_batch, slots)
        self._maybe_rebuild()

    def _on_remove(self, slots: np.ndarray) -> None:
        _remove_batch(self._ni, self._node_free, self._meta, self._obj, self._pk, self._pk_slot,
                      slots)
        self._maybe_rebuild()

    def _grow(self, new_capacity: int) -> None:
        grown = np.full((new_capacity, 4), -1, dtype=np.int64)
        grown[: self._obj.shape[0]] = self._obj
        self._obj = grown

    def _run_batch(self, kernel, slots: np.ndarray) -> None:
        """Run a compiled batch, growing the node pool whenever it stops for room."""
        done = 0
        while done < slots.shape[0]:
            done = kernel(self._nf, self._ni, self._node_free, self._meta, self._obj, self._pk,
                          self._pk_slot, self._centers, self._radii, self._vdist, slots, done)
            if done < slots.shape[0]:
                self._grow_nodes(2 * self._ni.shape[0] + 4096)

    def _choose_root(self, slots: np.ndarray) -> None:
        """Root cube for an empty tree, sized from the batch so it need not grow at once."""
        vd = self._vdist[slots]
        finite = (vd <= _UNBOUNDED) & (np.abs(self._centers[slots]) <= _UNBOUNDED).all(axis=1)
        if not finite.any():
            return
        c = self._centers[slots[finite]]
        m = self.min_node_size
        lo = np.floor(c.min(axis=0) / m) * m
        need = max(float((c.max(axis=0) - lo).max()), 2.0 * float(vd[finite].max()), m)
        level = _pow2_at_least(need)
        while (lo + math.ldexp(1.0, level) < c.max(axis=0)).any():
            level += 1
        self._ensure_nodes(1)
        self._meta[ROOT] = _alloc_node(self._nf, self._ni, self._node_free, self._meta,
                                       lo[0], lo[1], lo[2], level, -1)

    def _ensure_nodes(self, n: int) -> None:
        if self._meta[NFREE] < n:
            self._grow_nodes(self._ni.shape[0] + n)

    def _grow_nodes(self, new_cap: int) -> None:
        """Enlarge the node pool; new nodes go on the free stack below the old free ones."""
        old = self._ni.shape[0]
        new_cap = max(new_cap, old + 1)
        nf = np.zeros((new_cap, NF), dtype=np.float64)
        ni = np.full((new_cap, NI), -1, dtype=np.int64)
        nf[:old] = self._nf
        ni[:old] = self._ni
        ni[old:, ALIVE] = 0
        free = np.empty(new_cap, dtype=np.int64)
        nfree = int(self._meta[NFREE])
        extra = np.arange(new_cap - 1, old - 1, -1, dtype=np.int64)
        free[: extra.shape[0]] = extra
        free[extra.shape[0]: extra.shape[0] + nfree] = self._node_free[:nfree]
        self._meta[NFREE] = nfree + extra.shape[0]
        outcome = np.zeros(new_cap, dtype=np.int8)
        outcome[:old] = self._outcome
        self._nf, self._ni, self._node_free, self._outcome = nf, ni, free, outcome

    # ------------------------------------------------------------ queries

    def _stack_cap(self) -> int:
        root = int(self._meta[ROOT])
        depth = 0 if root == -1 else int(self._ni[root, LEVEL] - self._meta[EMIN])
        return 8 * (depth + 2)

    def _maybe_rebuild(self) -> None:
        n = int(self._meta[TREE_COUNT])
        if (self._meta[UNPACKED] > max(self.rebuild_min, n // 16)
                or self._meta[STALE] > max(self.rebuild_min, 2 * n)):
            self.rebuild()

    def _query_frustum(self, planes, eye, use_vd, occlusion):
        vp, zd, zo, zw, zh = occlusion_arrays(occlusion)
        self._outcome[:] = NODE_NOT_VISITED
        if use_vd:
            slots, considered, visited, occ_n, occ_o = _query_eye(
                self._nf, self._ni, self._meta, self._obj, self._centers, self._radii,
                self._vdist, self._pk, self._pk_slot, planes, eye, self._tight,
                self._stack_cap(), self._outcome, vp, zd, zo, zw, zh)
        else:
            slots, considered, visited, occ_n, occ_o = _query_planes(
                self._nf, self._ni, self._meta, self._obj, self._centers, self._radii,
                self._pk, self._pk_slot, planes, self._stack_cap(), self._outcome,
                vp, zd, zo, zw, zh)
        return QueryResult(visible=slots, working_set=int(considered),
                           nodes_visited=int(visited), occluded_nodes=int(occ_n),
                           occluded_objects=int(occ_o))

    def _region(self, kind: int, q: np.ndarray, qr: float) -> tuple[np.ndarray, np.ndarray]:
        return _query_region(self._nf, self._ni, self._meta, self._obj, self._centers,
                             self._radii, self._pk, self._pk_slot, kind, q, qr, self._stack_cap())

    def _query_box(self, lo, hi):
        q = np.zeros((3, 3))
        q[0] = lo
        q[1] = hi
        return self._region(0, q, 0.0)[0]

    def _query_sphere(self, center, radius):
        q = np.zeros((3, 3))
        q[0] = center
        return self._region(1, q, float(radius))[0]

    def _query_ray(self, origin, direction):
        q = np.zeros((3, 3))
        q[0] = origin
        q[1] = direction
        with np.errstate(divide="ignore"):
            q[2] = np.where(direction == 0.0, np.inf, 1.0 / np.where(direction == 0.0, 1.0,
                                                                     direction))
        return self._region(2, q, 0.0)

    # ------------------------------------------------------------ validation

    def _validate(self) -> None:
        alive = np.flatnonzero(self._alive)
        code, where = _check(self._nf, self._ni, self._node_free, self._meta, self._obj,
                             self._centers, self._radii, self._vdist, alive, self._pk,
                             self._pk_slot)
        if code:
            raise AssertionError(f"viewdist: {_CHECK_MESSAGES[int(code)]} (at {int(where)})")
        dead = np.flatnonzero(~self._alive)
        if (self._obj[dead, ONODE] != NO_NODE).any():
            raise AssertionError("viewdist: a dead slot is still linked")
