"""Insert, move and remove: linking objects into node lists, Matthews' in-place mutation,
cleanup of empty nodes, and the rebuild that refits every bound and repacks every object.

Updates follow the article's in-place mutation: an object whose view sphere still obeys its
node's rule stays put in O(1); otherwise it is relinked by searching up from its old node and
then down, and the old node is cleaned up last (so shared ancestors are not freed and
recreated).

The linked lists are the truth; every object in a node also has a row in its node's block of
the packed copy (:mod:`.heap`), which queries read: a link appends the row, an in-place move
rewrites it, a removal moves the block's last row into the hole. A move in place, and a move
out or a removal of an object on the node's bounds, queue the node for a refit of its bounds
(:mod:`.refit`). :func:`rebuild` does all of
it for every node at once (after a batch that inserted a large share of the objects, or when
asked).

The helpers called per object (here and in :mod:`.store`) take the ``Nodes`` bundle; numba
would incref and decref its arrays at every such call (a moved object cost 0.5 us more than
with two loose 2-D arrays), so they are compiled with ``_nrt=False``: they allocate nothing
and their caller holds the arrays. The batch kernels keep reference counting.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.object_store import moved_centre
from app.spatial.prefetch import PREFETCH_AHEAD, prefetch
from app.spatial.scan import to32
from app.spatial.viewdist_tree.heap import (
    append_row,
    block_rows,
    drop_row,
    free_node_block,
    has_room,
    write_row,
)
from app.spatial.viewdist_tree.refit import defines_bounds, queue_refit
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
def link(nd, ob, pk, tree, node, s, cx, cy, cz, r, vd, pack):
    """Push slot ``s`` at the front of a node's list (or the infinite list for IN_INF) and,
    in a node, append its row to the node's block (``pack``; a bulk load leaves the rows to
    the rebuild that follows it)."""
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
        if pack:
            append_row(nd, ob, pk, tree, node, s, cx, cy, cz, r, vd)


@njit(cache=True, _nrt=False)
def add_below(nd, node, d):
    """Add ``d`` to the subtree counts of ``node`` and its ancestors (O(depth): only a relink
    pays it, never an in-place move)."""
    while node != -1:
        nd.sub[node] += d
        node = nd.parent[node]


@njit(cache=True, _nrt=False)
def unlink(nd, ob, pk, tree, s):
    """Take slot ``s`` out of whatever list holds it, in O(1); returns the node it was in
    (queued for a refit if the object lay on its bounds)."""
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
        row = ob.row[s]
        if defines_bounds(nd, pk, node, row):
            queue_refit(nd, tree, node)
        drop_row(nd, ob, pk, node, row)
    ob.node[s] = NO_NODE
    ob.next[s] = -1
    ob.prev[s] = -1
    ob.row[s] = -1
    return node


@njit(cache=True, _nrt=False)
def cleanup(nd, pk, tree, node):
    """Free nodes left without objects or children, upward (the first one left queued for a
    refit: it lost a child); then shrink a lone-child root."""
    t = tree[0]
    released = False
    while node != -1 and nd.count[node] == 0 and nd.nchild[node] == 0:
        parent = nd.parent[node]
        if parent != -1:
            for j in range(8):
                if nd.child[parent, j] == node:
                    nd.child[parent, j] = -1
            nd.nchild[parent] -= 1
        else:
            t.root = -1
        free_node_block(nd, pk, tree, node)
        release_node(nd, tree, node)
        node = parent
        released = True
    if released and node != -1:
        queue_refit(nd, tree, node)
    # A root that holds nothing itself and has one child only adds a level to every query.
    root = t.root
    while root != -1 and nd.count[root] == 0 and nd.nchild[root] == 1:
        child = -1
        for j in range(8):
            if nd.child[root, j] != -1:
                child = nd.child[root, j]
        nd.parent[child] = -1
        free_node_block(nd, pk, tree, root)
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
def place(nd, ob, pk, tree, s, start, cx, cy, cz, r, vd, pack):
    """Link a finite-view-distance object into its node, searching up from ``start`` first."""
    node = start
    while node != -1 and not can_hold_below(nd, node, cx, cy, cz, vd):
        node = nd.parent[node]
    if node == -1:
        node = grow_root(nd, tree, cx, cy, cz, vd)
    node = descend(nd, tree, node, cx, cy, cz, vd)
    link(nd, ob, pk, tree, node, s, cx, cy, cz, r, vd, pack)
    expand_up(nd, node, cx, cy, cz, r, vd)


# ---------------------------------------------------------------- batch mutations


@njit(cache=True)
def insert_batch(nd, ob, pk, tree, sp, slots, first, pack):
    """Insert ``slots[first:]``; returns how far it got (it stops when the node pool or the
    packed copy is short of room). Without ``pack`` (a bulk load) the objects get no rows:
    :func:`rebuild` must follow."""
    t = tree[0]
    for i in range(first, slots.shape[0]):
        s = slots[i]
        cx = sp.centers[s, 0]
        cy = sp.centers[s, 1]
        cz = sp.centers[s, 2]
        r = sp.radii[s]
        vd = sp.vdist[s]
        if unbounded(cx, cy, cz, vd):
            link(nd, ob, pk, tree, IN_INF, s, cx, cy, cz, r, vd, False)
            continue
        if t.nfree < nodes_needed(nd, tree, cx, cy, cz, vd) or not has_room(pk, tree):
            return i
        place(nd, ob, pk, tree, s, t.root, cx, cy, cz, r, vd, pack)
    return slots.shape[0]


@njit(cache=True)
def move_batch(nd, ob, pk, tree, sp, slots, first, new_c, new_r, new_v, s32, out):
    """Re-place moved objects, writing the batch's new values (centres ``new_c``, radii
    ``new_r`` and view distances ``new_v``, None where it leaves them: numba compiles each
    combination apart) into the store as it goes; returns how far it got (the caller makes
    room and calls again from there, and the mover it stopped at, whose store rows were
    written already, is written again with the same values: its move reads no old value).

    In-place mutation: an object whose view sphere still satisfies its node's rule stays in
    its list (the bounds grow, its packed row is rewritten, and the node is queued for a
    refit); otherwise it is relinked starting from its old node and the old node is cleaned
    up last. When most of the tree's objects are in nodes, a later mover's node lines are
    worth asking for ahead (for movers in the infinite list those hints cost 20 ns a mover:
    10^4 of 10^6, 0.67 -> 0.87 ms; for movers in nodes they save up to 100 ns).

    The infinite list's float32 copy ``s32`` (rows by slot; empty arrays when it is not
    kept) is written in the same pass, while the mover's rows are at hand: a mover in the
    list gets its centre, or its whole sphere when the batch carried radii or view distances
    (and always one that just entered the list, whose row was dead), one that left it a
    dead row; ``out`` [0] and [1] grow to the largest coordinate magnitude and radius
    written (the scan's tolerances). A separate pass after the batch read the list's flags
    and wrote all five lanes of every row: 56-100 ns a mover (static, 10^4 of 10^6), most
    of the update. The store's write is this loop's too, not a pass of its own before it:
    the loop reads the mover's store rows anyway (as the AABB trees' update does).
    """
    t = tree[0]
    emin = t.emin
    in_nodes = t.in_nodes > t.inf_count
    n = slots.shape[0]
    onode, orow = ob.node, ob.row
    centers, radii, vdist = sp
    x32, y32, z32, r32, vd32 = s32
    copy = x32.shape[0] > 0
    whole = new_r is not None or new_v is not None
    big = out[0]
    rad = out[1]
    ahead = 2 * PREFETCH_AHEAD
    for i in range(first, n):
        # A later mover's lines asked for now: its node and the store rows the batch writes;
        # once the node is in, an infinite-list mover's view distance, or a node's mover's
        # row, then its packed row, its cube, its bounds and its refit flag; with the copy
        # kept, its float32 lanes.
        if i + ahead < n:
            u = slots[i + ahead]
            prefetch(onode, u)
            prefetch(centers, u)
            if new_r is not None:
                prefetch(radii, u)
            if new_v is not None:
                prefetch(vdist, u)
        if new_v is None and i + PREFETCH_AHEAD < n:
            u = slots[i + PREFETCH_AHEAD]
            if onode[u] < 0:
                prefetch(vdist, u)
        if in_nodes and i + PREFETCH_AHEAD // 2 < n:
            # Then, its row known, the packed row it reads and rewrites.
            u = slots[i + PREFETCH_AHEAD // 2]
            if onode[u] >= 0 and orow[u] >= 0:
                q = orow[u]
                prefetch(pk.center, q)
                prefetch(pk.radius, q)
                prefetch(pk.vdist, q)
        if copy and i + PREFETCH_AHEAD < n:
            u = slots[i + PREFETCH_AHEAD]
            prefetch(x32, u)
            prefetch(y32, u)
            prefetch(z32, u)
        if in_nodes and i + PREFETCH_AHEAD < n:
            u = slots[i + PREFETCH_AHEAD]
            v = onode[u]
            if v >= 0:
                prefetch(orow, u)
                prefetch(nd.size, v)
                prefetch(nd.lo, v)
                prefetch(nd.level, v)
                prefetch(nd.clo, v)
                prefetch(nd.chi, v)
                prefetch(nd.slo, v)
                prefetch(nd.shi, v)
                prefetch(nd.vmax, v)
                prefetch(nd.queued, v)
        s = slots[i]
        old = onode[s]
        # The batch's centre into the store (moved_centre); what it leaves alone is read
        # where it costs no store row of its own: a mover in a node takes its radius and view
        # distance from its packed row (asked for ahead; its move writes that row anyway),
        # and an infinite-list mover's radius is read only where it is used (it leaves the
        # list, or its float32 row is rewritten whole). Each was a cache miss a mover: 10^4
        # of 10^6, frames alternated on one index, static `churn100` 53.5-55.3 -> 46.9-47.8
        # ns a mover, `fixed` 25.7-32.4 -> 19.8-28.5; viewdist workload `churn100` 100.7-130.5
        # -> 94.2-121.3, `spawn` 65.2 -> 57.3.
        cx, cy, cz = moved_centre(i, s, new_c, centers)
        row = orow[s] if old >= 0 else -1
        if new_r is not None:
            r = new_r[i]
            radii[s] = r
        elif row >= 0:
            r = pk.radius[row]
        elif old != IN_INF or whole:
            r = radii[s]
        else:
            r = np.nan  # (read below if it leaves the list)
        if new_v is not None:
            vd = new_v[i]
            vdist[s] = vd
        elif row >= 0:
            vd = pk.vdist[row]
        else:
            vd = vdist[s]
        if unbounded(cx, cy, cz, vd):
            entered = old != IN_INF
            if entered:
                unlink(nd, ob, pk, tree, s)
                link(nd, ob, pk, tree, IN_INF, s, cx, cy, cz, r, vd, False)
                cleanup(nd, pk, tree, old)
            if copy:
                x32[s] = to32(cx)
                y32[s] = to32(cy)
                z32[s] = to32(cz)
                big = max(big, abs(cx), abs(cy), abs(cz))
                if entered or whole:
                    r32[s] = to32(r)
                    vd32[s] = to32(vd)
                    rad = max(rad, r)
            continue
        if old != IN_INF and fits_node(nd, old, cx, cy, cz, vd, emin):
            # Queued whether or not the object lay on the bounds: reading its old values
            # to tell cost more (10^4 of 10^6 moving, 0.83 -> 0.90 ms) than the refits
            # the test saves.
            queue_refit(nd, tree, old)
            expand_up(nd, old, cx, cy, cz, r, vd)
            write_row(pk, row, cx, cy, cz, r, vd)
            continue
        if t.nfree < nodes_needed(nd, tree, cx, cy, cz, vd) or not has_room(pk, tree):
            out[0] = big
            out[1] = rad
            return i
        unlink(nd, ob, pk, tree, s)
        if old == IN_INF:
            if copy:  # it leaves the list: its row dead (scan.kill32's values)
                r32[s] = -np.inf
                vd32[s] = np.inf
            if new_r is None:
                r = radii[s]
            place(nd, ob, pk, tree, s, t.root, cx, cy, cz, r, vd, True)
        else:
            place(nd, ob, pk, tree, s, old, cx, cy, cz, r, vd, True)
            cleanup(nd, pk, tree, old)
    out[0] = big
    out[1] = rad
    return slots.shape[0]


@njit(cache=True)
def remove_batch(nd, ob, pk, tree, slots):
    """Unlink each object in O(1) and free the nodes it leaves empty."""
    n = slots.shape[0]
    onode, orow = ob.node, ob.row
    ahead = 2 * PREFETCH_AHEAD
    for i in range(n):
        # A later object's links asked for now; once they are in, its packed row, its
        # node's bounds (does it lie on them?) and its block's last row (moved into its hole).
        if i + ahead < n:
            u = slots[i + ahead]
            prefetch(onode, u)
            prefetch(orow, u)
            prefetch(ob.next, u)
            prefetch(ob.prev, u)
        if i + PREFETCH_AHEAD < n:
            u = slots[i + PREFETCH_AHEAD]
            p = orow[u]
            v = onode[u]
            if p >= 0 and v >= 0:
                prefetch(pk.center, p)
                prefetch(pk.radius, p)
                prefetch(pk.vdist, p)
                prefetch(nd.clo, v)
                prefetch(nd.chi, v)
                prefetch(nd.slo, v)
                prefetch(nd.shi, v)
                prefetch(nd.vmax, v)
                prefetch(nd.pstart, v)
                prefetch(nd.plen, v)
        node = unlink(nd, ob, pk, tree, slots[i])
        if node != IN_INF:
            cleanup(nd, pk, tree, node)


@njit(cache=True)
def batch_bounds(slots, centers, vdist):
    """(count, lo, hi, largest view distance) over the batch's objects that the tree's nodes
    hold (not :func:`~.store.unbounded`), in one pass: a new root is sized from them.
    numpy's masks, gathers and reductions along the first axis of (n, 3) took 0.12 s of a
    10^6-object build (a third) and their temporaries' page faults more at 10^7."""
    lo = np.full(3, np.inf)
    hi = np.full(3, -np.inf)
    vmax = -np.inf
    count = 0
    for i in range(slots.shape[0]):
        s = slots[i]
        x = centers[s, 0]
        y = centers[s, 1]
        z = centers[s, 2]
        v = vdist[s]
        if unbounded(x, y, z, v):
            continue
        count += 1
        lo[0] = min(lo[0], x)
        lo[1] = min(lo[1], y)
        lo[2] = min(lo[2], z)
        hi[0] = max(hi[0], x)
        hi[1] = max(hi[1], y)
        hi[2] = max(hi[2], z)
        vmax = max(vmax, v)
    return count, lo, hi, vmax


@njit(cache=True)
def new_root(nd, tree, x, y, z, level):
    """Allocate the root of an empty tree (its cube chosen from the first batch)."""
    tree[0].root = alloc_node(nd, tree, x, y, z, level, -1)


# ---------------------------------------------------------------- rebuild


@njit(cache=True)
def rebuilt_rows(nd):
    """(rows, largest block) of the blocks :func:`rebuild` lays out for the live nodes."""
    rows = 0
    largest = 0
    for node in range(nd.size.shape[0]):
        if nd.size[node] > 0.0:
            cap = block_rows(nd.count[node])
            rows += cap
            largest = max(largest, cap)
    return rows, largest


@njit(cache=True)
def rebuild(nd, ob, pk, tree, sp):
    """Refit every node's subtree bounds exactly and lay its objects out in fresh blocks, in
    pool order (``pk`` holds at least :func:`rebuilt_rows` rows); the refit queue empties.

    One pass in slot order, so the store is read sequentially.
    """
    t = tree[0]
    ncap = nd.size.shape[0]
    fill = np.empty(ncap, dtype=np.int64)
    pos = 0
    largest = 0
    for node in range(ncap):
        nd.queued[node] = 0
        if nd.size[node] > 0.0:
            clear_bounds(nd, node)
            cap = block_rows(nd.count[node])
            nd.pstart[node] = pos
            nd.plen[node] = nd.count[node]
            nd.pcap[node] = cap
            fill[node] = pos
            pos += cap
            largest = max(largest, cap)
    for k in range(pk.free.shape[0]):
        pk.free[k] = -1
    t.pend = pos
    t.pfree = 0
    t.pmax = largest
    t.qhead = 0
    t.qlen = 0
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
