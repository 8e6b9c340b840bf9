"""The fixed octree's update cycle: placement, the pending-insert queue, moves, dead branches.

Placement
    An object lives in the smallest node that fully contains its sphere (or in a node of
    ``min_size`` if it fits there), so every node cube bounds all spheres of its subtree.

Lazy updates and the update cycle
    ``insert`` only queues slots, ``update`` only records moved slots and ``remove`` unlinks
    at once (:func:`unlink_batch`). The next query of any kind (or an explicit ``flush``)
    applies the queue in one compiled batch: the root grows first if anything left it, new
    objects descend from the root, moved objects climb to the first ancestor that contains
    them and descend again as far as they fit (:func:`place`). The common small move (the
    sphere is still in its node's cube and fits none of its octants) is settled while the
    moved objects' copies are refreshed (:func:`refresh`), with a few float tests
    (branch-free) and no tree walk; only the others go through the climb and descent, in
    entry (i.e. spatial) order.
    **One flush is one update cycle**: it happens at the first query after any
    insert/update/remove (a viewer frame "update batch then cull" is exactly one cycle) or
    when ``flush()`` is called; queries of an unchanged tree do not age anything.

Entry layout (renumber)
    Once half of the placed entries were linked into a node since the last layout (after a
    bulk insert; every few cycles when most objects keep changing nodes; never when only a
    few move), a flush ends by renumbering all entries in preorder of the tree, each node's
    list contiguous (:func:`renumber`, O(n), into a second set of arrays that are swapped
    in). The query then streams through memory instead of chasing scattered list links.
    Every node it reaches is marked ``clean``: its subtree's entries are exactly
    ``[estart, estart + subcount)``. Linking or unlinking an entry, or giving a node a new
    child, clears ``clean`` on the node and its ancestors (the walk stops at the first dirty
    one: dirty nodes only have dirty ancestors).

Dead branches
    A non-root leaf with no objects is kept for ``lifespan`` cycles (8 at first): every flush
    that finds it empty counts one, and the 8th prunes it (the countdown ``ttl`` runs from the
    lifespan down to 0). If an object or a child arrives while the countdown runs, the
    lifespan doubles (8, 16, 32, 64, capped at 64: the article's check lets it reach 128) and
    the countdown stops. A pruned leaf takes its whole dead branch with it: ancestors left
    with neither objects nor children go too, rather than each waiting out its own countdown
    (a chain of 17 single-child nodes would otherwise take 136 cycles to disappear).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.fixed_octree.store import (
    LIFE_MAX,
    NO_NODE,
    PENDING,
    alloc_node,
    free_node,
    shrink_root,
    start_ageing,
)

_PAD = 1e-12  # relative padding of subtree boxes: float rounding in node tests never cuts a sphere
# Entries are laid out again in query order (O(n), ~2-3 ms per 100k objects) once this
# fraction of the placed entries were linked into a node since the last layout: after bulk
# inserts, and every few cycles when most objects keep changing nodes; never when only a
# few objects move, however long (they are the only ones out of place).
RENUMBER_AT = 0.5


# ---------------------------------------------------------------- the queue (compiled)

@njit(cache=True)
def gather(slots, s2e, seen, emark):
    """Split queued slots into distinct pending slots (queue order) and distinct placed
    entries (ascending entry order, i.e. memory order); removed slots are dropped.

    ``seen`` (per slot) and ``emark`` (per entry) are all-False scratch, left all-False.
    """
    new = np.empty(slots.shape[0], dtype=np.int64)
    moved = np.empty(slots.shape[0], dtype=np.int64)
    nn = 0
    nm = 0
    for i in range(slots.shape[0]):
        s = slots[i]
        e = s2e[s]
        if e == PENDING:
            if not seen[s]:
                seen[s] = True
                new[nn] = s
                nn += 1
        elif e >= 0 and not emark[e]:
            emark[e] = True
            moved[nm] = e
            nm += 1
    for i in range(nn):
        seen[new[i]] = False
    if nm * 16 < emark.shape[0]:  # few: sort them
        for i in range(nm):
            emark[moved[i]] = False
        out = np.sort(moved[:nm])
    else:  # many: one scan of the marks yields them sorted
        out = moved[:nm]
        k = 0
        for e in range(emark.shape[0]):
            if emark[e]:
                emark[e] = False
                out[k] = e
                k += 1
    return new[:nn], out


@njit(cache=True)
def gather_sparse(slots, s2e, seen):
    """``gather`` for batches much smaller than the entry pool: the placed ones come as
    (entries, their slots), ascending and distinct, from one sort of packed keys, so that
    neither a per-entry mark nor ``slot`` is touched (each would be one more cache miss)."""
    new = np.empty(slots.shape[0], dtype=np.int64)
    keys = np.empty(slots.shape[0], dtype=np.int64)
    nn = 0
    nk = 0
    for i in range(slots.shape[0]):
        s = slots[i]
        e = s2e[s]
        if e == PENDING:
            if not seen[s]:
                seen[s] = True
                new[nn] = s
                nn += 1
        elif e >= 0:
            keys[nk] = (e << 32) | s
            nk += 1
    for i in range(nn):
        seen[new[i]] = False
    keys = np.sort(keys[:nk])
    ents = np.empty(nk, dtype=np.int64)
    sl = np.empty(nk, dtype=np.int64)
    k = 0
    for i in range(nk):
        if i > 0 and keys[i] == keys[i - 1]:
            continue  # the same slot queued twice
        ents[k] = keys[i] >> 32
        sl[k] = keys[i] & 0xFFFFFFFF
        k += 1
    return new[:nn], ents[:k], sl[:k]


# ---------------------------------------------------------------- entry copies (compiled)

@njit(cache=True)
def renumber(root, nd, en, out, s2e, stack):
    """Copy the placed entries of ``en`` into ``out``, renumbered so that every node's list
    is contiguous and the lists follow the order in which the frustum query visits the
    nodes: the query then streams through memory. Returns the count k; the entries are
    0..k-1 and everything above is free."""
    k = 0
    sp = 0
    if root >= 0:
        stack[0] = root
        sp = 1
    while sp > 0:
        sp -= 1
        n = stack[sp]
        nd.clean[n] = 1
        nd.estart[n] = k  # preorder: the subtree's entries follow, subcount of them
        s = nd.head[n]
        if s >= 0:
            nd.head[n] = k
            first = k
            while s >= 0:
                for a in range(3):
                    out.center[k, a] = en.center[s, a]
                out.radius[k] = en.radius[s]
                out.vdist[k] = en.vdist[s]
                out.node[k] = n
                sl = en.slot[s]
                out.slot[k] = sl
                s2e[sl] = k
                out.prev[k] = k - 1 if k > first else -1
                out.next[k] = k + 1
                k += 1
                s = en.next[s]
            out.next[k - 1] = -1
        for c in range(7, -1, -1):  # popped in octant order: memory order
            ch = nd.child[n, c]
            if ch >= 0:  # empty subtrees too: every node becomes clean
                stack[sp] = ch
                sp += 1
    for e in range(k, out.node.shape[0]):
        out.node[e] = NO_NODE
        out.next[e] = -1
        out.prev[e] = -1
        out.slot[e] = -1
    return k


@njit(cache=True)
def refresh(moved, mslots, en, centers, radii, vdist, nd, min_size, slow, bounds):
    """Refresh the packed copies of moved entries, and settle at once the common small move.

    An object whose new sphere still lies in its node's cube and fits no octant of it (or
    whose node has ``min_size``) stays where it is: only the bounds grow, a few float tests
    and no tree walk. The others are written to ``slow`` (returns how many) for :func:`place`,
    and ``bounds`` gets the AABB of their spheres (for root growth). ``mslots`` are the
    entries' slots when known (else empty: looked up in ``en.slot``).
    """
    for a in range(3):
        bounds[0, a] = np.inf
        bounds[1, a] = -np.inf
    lo = nd.lo
    size = nd.size
    tlo = nd.tlo
    thi = nd.thi
    vmax = nd.vmax
    vmin = nd.vmin
    parent = nd.parent
    center = en.center
    eradius = en.radius
    evdist = en.vdist
    enode = en.node
    eslot = en.slot
    ns = 0
    known = mslots.shape[0] == moved.shape[0]
    for i in range(moved.shape[0]):
        e = moved[i]
        s = mslots[i] if known else eslot[e]
        r = radii[s]
        vd = vdist[s]
        cx = centers[s, 0]
        cy = centers[s, 1]
        cz = centers[s, 2]
        center[e, 0] = cx
        center[e, 1] = cy
        center[e, 2] = cz
        eradius[e] = r
        evdist[e] = vd
        n = enode[e]
        lx = lo[n, 0]
        ly = lo[n, 1]
        lz = lo[n, 2]
        sz = size[n]
        # Branch-free (the outcome is unpredictable, and mispredictions cost more than the
        # arithmetic): the sphere lies in the cube and, unless the node has min_size, it
        # crosses a mid-plane, i.e. no octant holds it. With the sphere in the cube, "the
        # octant of the centre holds it" is, per axis, being wholly on one side of the mid-plane
        # (the same float expressions as octant and descend).
        inside = ((cx - r >= lx) & (cx + r <= lx + sz) & (cy - r >= ly) & (cy + r <= ly + sz)
                  & (cz - r >= lz) & (cz + r <= lz + sz))
        h = sz * 0.5
        mx = lx + h
        my = ly + h
        mz = lz + h
        fits = (((cx + r <= mx) | (cx - r >= mx)) & ((cy + r <= my) | (cy - r >= my))
                & ((cz + r <= mz) | (cz - r >= mz)))
        stay = inside and (sz == min_size or not fits)
        if stay:
            expand(tlo, thi, vmax, vmin, parent, n, cx, cy, cz, r, vd)
            continue
        slow[ns] = e
        ns += 1
        bounds[0, 0] = min(bounds[0, 0], cx - r)
        bounds[1, 0] = max(bounds[1, 0], cx + r)
        bounds[0, 1] = min(bounds[0, 1], cy - r)
        bounds[1, 1] = max(bounds[1, 1], cy + r)
        bounds[0, 2] = min(bounds[0, 2], cz - r)
        bounds[1, 2] = max(bounds[1, 2], cz + r)
    return ns


@njit(cache=True)
def copy_in(ents, en, centers, radii, vdist, bounds):
    """Refresh the packed copies of ``ents`` from the store; bounds = AABB of their spheres."""
    for a in range(3):
        bounds[0, a] = np.inf
        bounds[1, a] = -np.inf
    for i in range(ents.shape[0]):
        e = ents[i]
        s = en.slot[e]
        r = radii[s]
        en.radius[e] = r
        en.vdist[e] = vdist[s]
        for a in range(3):
            c = centers[s, a]
            en.center[e, a] = c
            bounds[0, a] = min(bounds[0, a], c - r)
            bounds[1, a] = max(bounds[1, a], c + r)


# ---------------------------------------------------------------- node lists (compiled)
# The helpers below run once per placed object (or per level of its climb and descent), so
# they take the few fields they touch, not the bundles: a call (or an inlined call) that
# passes a bundle costs per field, and with the bundles the moving bench's placement took
# 1.24 ms per frame instead of 0.30. The kernels that call them take the bundles.

@njit(cache=True)
def revive(life, ttl, n):
    """A dying leaf reused is evidently a hot region: keep it twice as long next time."""
    if ttl[n] >= 0:
        life[n] = min(2 * life[n], LIFE_MAX)
        ttl[n] = -1


@njit(cache=True)
def dirty(clean, parent, n):
    """The subtree of ``n`` and every ancestor's lose their entry range. A dirty node has
    only dirty ancestors, so the walk stops at the first dirty one."""
    while n >= 0 and clean[n] != 0:
        clean[n] = 0
        n = parent[n]


@njit(cache=True)
def link(s, n, enext, eprev, enode, head, count):
    """Put entry ``s`` at the head of node ``n``'s list (the caller dirties and revives n)."""
    h = head[n]
    enext[s] = h
    eprev[s] = -1
    if h >= 0:
        eprev[h] = s
    head[n] = s
    count[n] += 1
    enode[s] = n


@njit(cache=True)
def unlink(s, enext, eprev, enode, head, count):
    """Take entry ``s`` out of its node's list (the caller dirties the node)."""
    n = enode[s]
    p = eprev[s]
    q = enext[s]
    if p >= 0:
        enext[p] = q
    else:
        head[n] = q
    if q >= 0:
        eprev[q] = p
    count[n] -= 1
    enode[s] = NO_NODE
    enext[s] = -1
    eprev[s] = -1


@njit(cache=True, inline="always")
def contains(lo, size, n, cx, cy, cz, r):
    """The sphere lies in node ``n``'s cube."""
    lx = lo[n, 0]
    ly = lo[n, 1]
    lz = lo[n, 2]
    s = size[n]
    return (cx - r >= lx and cx + r <= lx + s and cy - r >= ly and cy + r <= ly + s
            and cz - r >= lz and cz + r <= lz + s)


@njit(cache=True, inline="always")
def octant(lo, size, n, cx, cy, cz):
    """Octant of node ``n`` holding point c (upper half on ties) and that octant's corner."""
    h = size[n] * 0.5
    lx = lo[n, 0]
    ly = lo[n, 1]
    lz = lo[n, 2]
    o = 0
    if cx >= lx + h:
        o |= 1
        lx += h
    if cy >= ly + h:
        o |= 2
        ly += h
    if cz >= lz + h:
        o |= 4
        lz += h
    return o, lx, ly, lz, h


@njit(cache=True)
def fits_octant(lo, size, level, n, cx, cy, cz, r):
    """The octant of ``n`` that holds the sphere, or -1 (none does, or n has min_size)."""
    if level[n] <= 0:
        return -1
    o, lx, ly, lz, h = octant(lo, size, n, cx, cy, cz)
    if (cx - r >= lx and cx + r <= lx + h and cy - r >= ly and cy + r <= ly + h
            and cz - r >= lz and cz + r <= lz + h):
        return o
    return -1


@njit(cache=True)
def new_child(nd, n, o):
    """Create octant ``o`` of ``n`` (rare: once per new cell, so it takes the bundle)."""
    revive(nd.life, nd.ttl, n)
    dirty(nd.clean, nd.parent, n)  # a new (dirty) child needs dirty ancestors
    h = nd.size[n] * 0.5
    ch = alloc_node(nd, n, nd.level[n] - 1, nd.lo[n, 0] + (h if o & 1 else 0.0),
                    nd.lo[n, 1] + (h if o & 2 else 0.0), nd.lo[n, 2] + (h if o & 4 else 0.0), h)
    nd.child[n, o] = ch
    nd.nchild[n] += 1
    return ch


@njit(cache=True)
def descend(nd, n, cx, cy, cz, r):
    """Smallest node below ``n`` (creating nodes on the way) that fully holds the sphere."""
    lo = nd.lo
    size = nd.size
    level = nd.level
    child = nd.child
    subcount = nd.subcount
    while True:
        o = fits_octant(lo, size, level, n, cx, cy, cz, r)
        if o < 0:
            return n
        ch = child[n, o]
        if ch < 0:
            ch = new_child(nd, n, o)
        subcount[ch] += 1  # the object now lies in this subtree
        n = ch


# ---------------------------------------------------------------- batch updates (compiled)

@njit(cache=True)
def place(ents, start, need, en, nd, root, displaced, relinked):
    """Put queued (new or moved) entries in their smallest containing node.

    Returns the index of the first entry not processed: it stops early when fewer than
    ``need`` free nodes remain, so the caller can grow the pool and call again.
    The fields are read out of the bundles once: in numba every ``bundle.field`` read in a
    loop costs a reference count pair (with them this kernel was 4x slower).
    """
    lo = nd.lo
    size = nd.size
    level = nd.level
    child = nd.child
    subcount = nd.subcount
    parent = nd.parent
    clean = nd.clean
    head = nd.head
    count = nd.count
    nchild = nd.nchild
    tlo = nd.tlo
    thi = nd.thi
    vmax = nd.vmax
    vmin = nd.vmin
    center = en.center
    enode = en.node
    enext = en.next
    eprev = en.prev
    radius = en.radius
    vdist = en.vdist
    life = nd.life
    ttl = nd.ttl
    nfree = nd.nfree
    for i in range(start, ents.shape[0]):
        if nfree[0] < need:
            return i
        s = ents[i]
        cx = center[s, 0]
        cy = center[s, 1]
        cz = center[s, 2]
        r = radius[s]
        cur = enode[s]
        n = root
        if cur >= 0:
            # Climb to the first ancestor that still contains the sphere (the root does);
            # the object leaves the subtrees of the nodes passed on the way.
            n = cur
            while not contains(lo, size, n, cx, cy, cz, r) and parent[n] >= 0:
                count_out(subcount, tlo, thi, vmax, vmin, n)
                n = parent[n]
        else:
            subcount[root] += 1
        while True:  # descend (as :func:`descend`; the bundle only goes to new_child)
            o = fits_octant(lo, size, level, n, cx, cy, cz, r)
            if o < 0:
                break
            ch = child[n, o]
            if ch < 0:
                ch = new_child(nd, n, o)
            subcount[ch] += 1  # the object now lies in this subtree
            n = ch
        if n != cur:
            if not displaced[s]:  # first time out of the query-order layout
                displaced[s] = True
                relinked[0] += 1
            if cur >= 0:
                dirty(clean, parent, cur)
                unlink(s, enext, eprev, enode, head, count)
                if count[cur] == 0 and nchild[cur] == 0:  # the call only when it may act
                    start_ageing(nd, cur, root)
            dirty(clean, parent, n)
            revive(life, ttl, n)
            link(s, n, enext, eprev, enode, head, count)
        expand(tlo, thi, vmax, vmin, parent, n, cx, cy, cz, r, vdist[s])
    return ents.shape[0]


@njit(cache=True)
def count_out(subcount, tlo, thi, vmax, vmin, n):
    """One object fewer in the subtree of ``n``; an emptied subtree forgets its bounds."""
    subcount[n] -= 1
    if subcount[n] == 0:
        for a in range(3):
            tlo[n, a] = np.inf
            thi[n, a] = -np.inf
        vmax[n] = -np.inf
        vmin[n] = np.inf


@njit(cache=True)
def expand(tlo, thi, vmax, vmin, parent, n, cx, cy, cz, r, vd):
    """Grow the subtree bounds of ``n`` and its ancestors to include a sphere.

    Takes the node fields it uses rather than the node bundle: it runs once per moved
    object, and passing the bundle costs a reference count pair per field per call (the
    static bench's flush took 0.43 ms instead of 0.26).

    Bounds only grow (shrinking would need a rescan), so they are conservative: never
    smaller than the objects, never larger than the node cube, since every sphere of a
    subtree lies inside it. The climb stops at the first node that already covers the
    sphere, because every node's bounds lie inside its parent's.
    """
    lx = cx - r
    hx = cx + r
    ly = cy - r
    hy = cy + r
    lz = cz - r
    hz = cz + r
    # pad outward so that float rounding in node tests can never cut off a sphere
    lx -= _PAD * (abs(lx) + 1.0)
    ly -= _PAD * (abs(ly) + 1.0)
    lz -= _PAD * (abs(lz) + 1.0)
    hx += _PAD * (abs(hx) + 1.0)
    hy += _PAD * (abs(hy) + 1.0)
    hz += _PAD * (abs(hz) + 1.0)
    while n >= 0:
        grew = False
        if lx < tlo[n, 0]:
            tlo[n, 0] = lx
            grew = True
        if ly < tlo[n, 1]:
            tlo[n, 1] = ly
            grew = True
        if lz < tlo[n, 2]:
            tlo[n, 2] = lz
            grew = True
        if hx > thi[n, 0]:
            thi[n, 0] = hx
            grew = True
        if hy > thi[n, 1]:
            thi[n, 1] = hy
            grew = True
        if hz > thi[n, 2]:
            thi[n, 2] = hz
            grew = True
        if vd > vmax[n]:
            vmax[n] = vd
            grew = True
        if vd < vmin[n]:
            vmin[n] = vd
            grew = True
        if not grew:
            return
        n = parent[n]


@njit(cache=True)
def unlink_batch(ents, en, nd, root):
    """Take removed objects' entries out of their nodes at once."""
    for i in range(ents.shape[0]):
        s = ents[i]
        n = en.node[s]
        if n < 0:
            en.node[s] = NO_NODE
            continue
        dirty(nd.clean, nd.parent, n)
        unlink(s, en.next, en.prev, en.node, nd.head, nd.count)
        start_ageing(nd, n, root)
        while n >= 0:
            count_out(nd.subcount, nd.tlo, nd.thi, nd.vmax, nd.vmin, n)
            n = nd.parent[n]


# ---------------------------------------------------------------- end of a cycle (compiled)

@njit(cache=True)
def tick(nd, root):
    """Age every empty leaf by one and prune those that reach 0; returns the nodes pruned."""
    pruned = 0
    keep = 0
    i = 0
    while i < nd.naging[0]:  # pruning may append parents, which age in this same cycle
        n = nd.aging[i]
        i += 1
        if (nd.alive[n] == 0 or nd.ttl[n] < 0 or n == root
                or nd.count[n] != 0 or nd.nchild[n] != 0):
            nd.inlist[n] = 0
            if n == root:
                nd.ttl[n] = -1
            continue
        nd.ttl[n] -= 1
        if nd.ttl[n] > 0:
            nd.aging[keep] = n
            keep += 1
            continue
        pruned += prune_branch(nd, n, root)
    nd.naging[0] = keep
    return pruned


@njit(cache=True)
def prune_branch(nd, n, root):
    """Cut the dead leaf ``n`` and every ancestor left with neither objects nor children
    (they only led to it); returns how many nodes went."""
    pruned = 0
    while True:
        p = nd.parent[n]
        for j in range(8):
            if nd.child[p, j] == n:
                nd.child[p, j] = -1
        nd.nchild[p] -= 1
        nd.outcome[n] = 0
        free_node(nd, n)
        pruned += 1
        if p == root or nd.count[p] != 0 or nd.nchild[p] != 0:
            return pruned
        n = p


@njit(cache=True)
def end_cycle(nd, root):
    """End of an update cycle: :func:`tick`, then :func:`shrink_root` (one call, since every
    call that unboxes the node bundle costs a few microseconds). Returns (pruned, root)."""
    pruned = tick(nd, root)
    return pruned, shrink_root(nd, root)
