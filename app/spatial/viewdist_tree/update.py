"""Insert, move and remove: linking objects into node lists, Matthews' in-place mutation,
cleanup of empty nodes, and the rebuild that refits bounds and repacks the objects.

Updates follow the article's in-place mutation: an object whose view sphere still obeys its
node's rule stays put in O(1); otherwise it is relinked by searching up from its old node and
then down, and the old node is cleaned up last (so shared ancestors are not freed and
recreated).

Walking a linked list through a million-slot store is a cache miss per object, so the tree
also keeps a *packed copy* of every node's objects (centre, radius, view distance, one
contiguous range per node). The linked lists stay the truth; the copy follows them cheaply:
an in-place move rewrites the object's row, a removal moves the range's last row into the hole,
and an object linked since the last rebuild is simply not packed yet. Links push at the front,
so each list reads [unpacked..., packed...] and a query walks only the unpacked prefix before
scanning the range. A compiled rebuild in slot order refits all bounds and repacks everything
once enough unpacked objects or bound-loosening changes have piled up.

The helpers called per object (here and in :mod:`.store`) take the ``Nodes`` bundle; numba
would incref and decref its 17 arrays at every such call (a moved object cost 0.5 us more than
with two loose 2-D arrays), so they are compiled with ``_nrt=False``: they allocate nothing
and their caller holds the arrays. The batch kernels keep reference counting.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.viewdist_tree.store import (
    IN_INF,
    NO_NODE,
    alloc_node,
    can_hold_below,
    clear_bounds,
    descend,
    fits_node,
    grow_root,
    nodes_needed,
    release_node,
    unbounded,
)

# ---------------------------------------------------------------- lists


@njit(cache=True, _nrt=False)
def link(nd, ob, tree, node, s):
    """Push slot ``s`` at the front of a node's list (or the infinite list for IN_INF).

    The new object is not in the packed copy; pushing at the front keeps every node's list
    ordered as [unpacked..., packed...], so queries walk only the unpacked prefix.
    """
    t = tree[0]
    head = t.inf_head if node == IN_INF else nd.head[node]
    ob.node[s] = node
    ob.next[s] = head
    ob.prev[s] = -1
    ob.row[s] = -1
    if head != -1:
        ob.prev[head] = s
    if node == IN_INF:
        t.inf_head = s
        t.inf_count += 1
    else:
        nd.head[node] = s
        nd.count[node] += 1
        add_below(nd, node, 1)
        t.in_nodes += 1
        t.unpacked += 1


@njit(cache=True, _nrt=False)
def add_below(nd, node, d):
    """Add ``d`` to the subtree counts of ``node`` and its ancestors (O(depth): only a relink
    pays it, never an in-place move)."""
    while node != -1:
        nd.sub[node] += d
        node = nd.parent[node]


@njit(cache=True, _nrt=False)
def unpack(nd, ob, pk, node, row):
    """Remove a row from a node's packed range by moving the range's last row into it."""
    last = nd.pstart[node] + nd.plen[node] - 1
    if row != last:
        for a in range(3):
            pk.center[row, a] = pk.center[last, a]
        pk.radius[row] = pk.radius[last]
        pk.vdist[row] = pk.vdist[last]
        moved = pk.slot[last]
        pk.slot[row] = moved
        ob.row[moved] = row
    nd.plen[node] -= 1


@njit(cache=True, _nrt=False)
def unlink(nd, ob, pk, tree, s):
    """Take slot ``s`` out of whatever list holds it, in O(1); returns the node it was in."""
    t = tree[0]
    node = ob.node[s]
    nxt = ob.next[s]
    prv = ob.prev[s]
    if prv != -1:
        ob.next[prv] = nxt
    elif node == IN_INF:
        t.inf_head = nxt
    else:
        nd.head[node] = nxt
    if nxt != -1:
        ob.prev[nxt] = prv
    if node == IN_INF:
        t.inf_count -= 1
    else:
        nd.count[node] -= 1
        add_below(nd, node, -1)
        t.in_nodes -= 1
        t.stale += 1
        if ob.row[s] >= 0:
            unpack(nd, ob, pk, node, ob.row[s])
        else:
            t.unpacked -= 1
    ob.node[s] = NO_NODE
    ob.next[s] = -1
    ob.prev[s] = -1
    ob.row[s] = -1
    return node


@njit(cache=True, _nrt=False)
def cleanup(nd, tree, node):
    """Free nodes left without objects or children, upward; then shrink a lone-child root."""
    t = tree[0]
    while node != -1 and nd.count[node] == 0 and nd.nchild[node] == 0:
        parent = nd.parent[node]
        if parent != -1:
            for j in range(8):
                if nd.child[parent, j] == node:
                    nd.child[parent, j] = -1
            nd.nchild[parent] -= 1
        else:
            t.root = -1
        release_node(nd, tree, node)
        node = parent
    # A root that holds nothing itself and has one child only adds a level to every query.
    root = t.root
    while root != -1 and nd.count[root] == 0 and nd.nchild[root] == 1:
        child = -1
        for j in range(8):
            if nd.child[root, j] != -1:
                child = nd.child[root, j]
        nd.parent[child] = -1
        release_node(nd, tree, root)
        t.root = child
        root = child


@njit(cache=True, _nrt=False)
def expand_up(nd, node, cx, cy, cz, r, vd):
    """Grow the subtree bounds of ``node`` and its ancestors to cover one object.

    Stops at the first ancestor that already covers it: parents always cover their children.
    """
    while node != -1:
        changed = False
        c = (cx, cy, cz)
        for a in range(3):
            if c[a] < nd.clo[node, a]:
                nd.clo[node, a] = c[a]
                changed = True
            if c[a] > nd.chi[node, a]:
                nd.chi[node, a] = c[a]
                changed = True
            if c[a] - r < nd.slo[node, a]:
                nd.slo[node, a] = c[a] - r
                changed = True
            if c[a] + r > nd.shi[node, a]:
                nd.shi[node, a] = c[a] + r
                changed = True
        if vd > nd.vmax[node]:
            nd.vmax[node] = vd
            changed = True
        if not changed:
            return
        node = nd.parent[node]


@njit(cache=True, _nrt=False)
def place(nd, ob, tree, s, start, cx, cy, cz, r, vd):
    """Link a finite-view-distance object into its node, searching up from ``start`` first."""
    node = start
    while node != -1 and not can_hold_below(nd, node, cx, cy, cz, vd):
        node = nd.parent[node]
    if node == -1:
        node = grow_root(nd, tree, cx, cy, cz, vd)
    node = descend(nd, tree, node, cx, cy, cz, vd)
    link(nd, ob, tree, node, s)
    expand_up(nd, node, cx, cy, cz, r, vd)


# ---------------------------------------------------------------- batch mutations


@njit(cache=True)
def insert_batch(nd, ob, pk, tree, sp, slots, first):
    """Insert ``slots[first:]``; returns how far it got (it stops when the node pool is low).

    New objects are not packed (``pk`` is unused; the batch kernels share one signature).
    """
    t = tree[0]
    for i in range(first, slots.shape[0]):
        s = slots[i]
        cx = sp.centers[s, 0]
        cy = sp.centers[s, 1]
        cz = sp.centers[s, 2]
        vd = sp.vdist[s]
        if unbounded(cx, cy, cz, vd):
            link(nd, ob, tree, IN_INF, s)
            continue
        if t.nfree < nodes_needed(nd, tree, cx, cy, cz, vd):
            return i
        place(nd, ob, tree, s, t.root, cx, cy, cz, sp.radii[s], vd)
    return slots.shape[0]


@njit(cache=True)
def move_batch(nd, ob, pk, tree, sp, slots, first):
    """Re-place moved objects (the store holds the new values); returns how far it got.

    In-place mutation: an object whose view sphere still satisfies its node's rule stays in
    its list (only the bounds grow, and its packed row is rewritten); otherwise it is relinked
    starting from its old node and the old node is cleaned up last.
    """
    t = tree[0]
    emin = t.emin
    for i in range(first, slots.shape[0]):
        s = slots[i]
        cx = sp.centers[s, 0]
        cy = sp.centers[s, 1]
        cz = sp.centers[s, 2]
        r = sp.radii[s]
        vd = sp.vdist[s]
        old = ob.node[s]
        if unbounded(cx, cy, cz, vd):
            if old != IN_INF:
                unlink(nd, ob, pk, tree, s)
                link(nd, ob, tree, IN_INF, s)
                cleanup(nd, tree, old)
            continue
        if old != IN_INF and fits_node(nd, old, cx, cy, cz, vd, emin):
            expand_up(nd, old, cx, cy, cz, r, vd)
            row = ob.row[s]
            if row >= 0:  # keep the packed copy current in place
                pk.center[row, 0] = cx
                pk.center[row, 1] = cy
                pk.center[row, 2] = cz
                pk.radius[row] = r
                pk.vdist[row] = vd
            t.stale += 1
            continue
        if t.nfree < nodes_needed(nd, tree, cx, cy, cz, vd):
            return i
        unlink(nd, ob, pk, tree, s)
        if old == IN_INF:
            place(nd, ob, tree, s, t.root, cx, cy, cz, r, vd)
        else:
            place(nd, ob, tree, s, old, cx, cy, cz, r, vd)
            cleanup(nd, tree, old)
    return slots.shape[0]


@njit(cache=True)
def remove_batch(nd, ob, pk, tree, slots):
    """Unlink each object in O(1) and free the nodes it leaves empty."""
    for i in range(slots.shape[0]):
        node = unlink(nd, ob, pk, tree, slots[i])
        if node != IN_INF:
            cleanup(nd, tree, node)


@njit(cache=True)
def new_root(nd, tree, x, y, z, level):
    """Allocate the root of an empty tree (its cube chosen from the first batch)."""
    tree[0].root = alloc_node(nd, tree, x, y, z, level, -1)


# ---------------------------------------------------------------- rebuild


@njit(cache=True)
def rebuild(nd, ob, pk, tree, sp):
    """Refit every node's subtree bounds exactly and repack every node's objects.

    The packed copy lets queries read a node's objects sequentially instead of chasing its
    linked list through the store. One pass in slot order, so the store is read sequentially
    too.
    """
    ncap = nd.size.shape[0]
    fill = np.empty(ncap, dtype=np.int64)
    pos = 0
    for node in range(ncap):
        if nd.size[node] > 0.0:
            clear_bounds(nd, node)
            nd.pstart[node] = pos
            nd.plen[node] = nd.count[node]
            fill[node] = pos
            pos += nd.count[node]
    for s in range(ob.node.shape[0]):
        node = ob.node[s]
        if node < 0:
            continue
        p = fill[node]
        fill[node] = p + 1
        r = sp.radii[s]
        for a in range(3):
            c = sp.centers[s, a]
            pk.center[p, a] = c
            nd.clo[node, a] = min(nd.clo[node, a], c)
            nd.chi[node, a] = max(nd.chi[node, a], c)
            nd.slo[node, a] = min(nd.slo[node, a], c - r)
            nd.shi[node, a] = max(nd.shi[node, a], c + r)
        pk.radius[p] = r
        pk.vdist[p] = sp.vdist[s]
        pk.slot[p] = s
        ob.row[s] = p
        nd.vmax[node] = max(nd.vmax[node], sp.vdist[s])
    # Children are exactly one level below their parent: merging finest levels first makes
    # every child complete before it is merged into its parent.
    live = np.flatnonzero(nd.size > 0.0)
    levels = np.empty(live.shape[0], dtype=np.int64)
    for k in range(live.shape[0]):
        levels[k] = nd.level[live[k]]
    order = np.argsort(levels)
    for k in range(order.shape[0]):
        node = live[order[k]]
        p = nd.parent[node]
        if p == -1:
            continue
        for a in range(3):
            nd.clo[p, a] = min(nd.clo[p, a], nd.clo[node, a])
            nd.chi[p, a] = max(nd.chi[p, a], nd.chi[node, a])
            nd.slo[p, a] = min(nd.slo[p, a], nd.slo[node, a])
            nd.shi[p, a] = max(nd.shi[p, a], nd.shi[node, a])
        nd.vmax[p] = max(nd.vmax[p], nd.vmax[node])
    t = tree[0]
    t.stale = 0
    t.unpacked = 0
