"""The fixed octree's update cycle: placement, the pending-insert queue, moves, dead branches.

Placement
    An object lives in the smallest node that fully contains its sphere (or in a node of
    ``min_size`` if it fits there), so every node cube bounds all spheres of its subtree.

Inserts wait, moves are placed at once
    ``insert`` only queues slots (Nevala's pending queue: a level's thousands of objects
    are placed in one batch); ``update`` places its moves in the same call and ``remove``
    unlinks at once (:func:`unlink_batch`). The next query of any kind (or an explicit
    ``flush``) places the queue in one compiled batch: the root grows first if anything left
    it, new objects descend from the root (:func:`place`). A move is settled in the update,
    in the pass that writes its store rows and its copy (:func:`move_now`): the common small
    move (the sphere is still in its node's cube and fits none of its octants) with a few
    float tests (branch-free) and no tree walk;
    only the others climb to the first ancestor that contains them and descend again as far
    as they fit (:func:`place`), as Nevala's ``Update`` moves its moved objects each frame.
    (Queued until the next query, the moves were first sorted and freed of repeats, and
    their store rows had left the cache by then: docs/bench-index-log.md has the figures.)
    **One flush is one update cycle** (empty leaves age at its end): it happens at the first
    query after any insert/update/remove (a viewer frame "update batch then cull" is exactly
    one cycle) or when ``flush()`` is called; queries of an unchanged tree do not age
    anything.

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
from app.spatial.object_store import moved_sphere
from app.spatial.prefetch import PREFETCH_AHEAD, prefetch, prefetch_at

_PAD = 1e-12  # relative padding of subtree boxes: float rounding in node tests never cuts a sphere
# Entries are laid out again in query order (O(n), ~2-3 ms per 100k objects) once this
# fraction of the placed entries were linked into a node since the last layout: after bulk
# inserts, and every few cycles when most objects keep changing nodes; never when only a
# few objects move, however long (they are the only ones out of place).
RENUMBER_AT = 0.5


# ---------------------------------------------------------------- the insert queue (compiled)

@njit(cache=True, inline="always")
def _first_time(seen, new, nn: int, s: int) -> int:
    """Append slot s to ``new[:nn]`` unless ``seen`` marks it already (and mark it); returns
    the new count."""
    if not seen[s]:
        seen[s] = True
        new[nn] = s
        nn += 1
    return nn


@njit(cache=True, inline="always")
def _unmark(seen, new, nn: int) -> None:
    """Leave ``seen`` all-False again after the slots ``new[:nn]``."""
    for i in range(nn):
        seen[new[i]] = False


@njit(cache=True)
def pending(slots, s2e, seen):
    """The distinct queued slots still pending, in queue order: removed ones (and slots
    reused since) are dropped. ``seen`` (per slot) is all-False scratch, left all-False."""
    new = np.empty(slots.shape[0], dtype=np.int64)
    nn = 0
    for i in range(slots.shape[0]):
        s = slots[i]
        if s2e[s] == PENDING:
            nn = _first_time(seen, new, nn, s)
    _unmark(seen, new, nn)
    return new[:nn]


# ---------------------------------------------------------------- entry copies (compiled)

@njit(cache=True)
def renumber(root, nd, en, out, s2e, stack):
    """Copy the placed entries of ``en`` into ``out``, renumbered so that every node's list
    is contiguous and the lists follow the order in which the frustum query visits the
    nodes: the query then streams through memory. Returns the count k; the entries are
    0..k-1 and everything above is free."""
    node = nd.node
    sph = en.sphere
    osph = out.sphere
    k = 0
    sp = 0
    if root >= 0:
        stack[0] = root
        sp = 1
    while sp > 0:
        sp -= 1
        n = stack[sp]
        rec = node[n]
        rec.clean = 1
        rec.estart = k  # preorder: the subtree's entries follow, subcount of them
        s = rec.head
        if s >= 0:
            rec.head = k
            first = k
            while s >= 0:
                osph[k] = sph[s]
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
            ch = rec.child[c]
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
def move_now(slots, new_c, new_r, new_v, s2e, ents, store, nodes, min_size, slow, bounds):
    """Write just-moved objects' new values (centres ``new_c``, radii ``new_r`` and view
    distances ``new_v``, None where the batch leaves them: numba compiles each combination
    apart) into the store (``store``: centres, radii, view distances) and their packed
    copies, and settle at once the common small move; returns how many others went to
    ``slow`` (their entries, for :func:`place`).

    Runs in the caller's update, in the caller's order, in one pass: the store's write is
    this loop's (the packed copy needs the same values). An object whose new sphere still
    lies in its node's cube and fits no octant of it (or whose node has ``min_size``) stays
    where it is: only the bounds grow, a few float tests and no tree walk. ``bounds`` gets
    the AABB of the others' spheres (for root growth). Pending slots (inserted, not yet
    placed) only get their store rows: the flush copies their latest values. ``ents`` is
    the entries' (sphere records, node ids), ``nodes`` the node records and their lines
    (:func:`~.store.node_lines`): records, not bundles, since a bundle argument costs ~1.5
    us per call.
    """
    sph, enode = ents
    centers, radii, vdist = store
    node, node_lines = nodes
    for a in range(3):
        bounds[0, a] = np.inf
        bounds[1, a] = -np.inf
    ns = 0
    n = slots.shape[0]
    for i in range(n):
        # A later mover's entry and store rows asked for now; nearer, its copy and its
        # node's lines.
        if i + 2 * PREFETCH_AHEAD < n:
            t = slots[i + 2 * PREFETCH_AHEAD]
            prefetch(s2e, t)
            prefetch(centers, t)
            prefetch(radii, t)
            prefetch(vdist, t)
        if i + PREFETCH_AHEAD < n:
            t = s2e[slots[i + PREFETCH_AHEAD]]
            if t >= 0:
                prefetch(sph, t)
                prefetch(enode, t)
        if i + PREFETCH_AHEAD // 2 < n:
            t = s2e[slots[i + PREFETCH_AHEAD // 2]]
            if t >= 0:  # its node's bounds (line 0) and cube (line 2)
                u = enode[t]
                prefetch(node, u)
                prefetch_at(node_lines, u, 2)
        s = slots[i]
        cx, cy, cz, r, vd = moved_sphere(i, s, new_c, new_r, new_v, centers, radii, vdist)
        e = s2e[s]
        if e < 0:
            continue  # pending: placed at the flush with its latest values
        rec = sph[e]
        rec.cx = cx
        rec.cy = cy
        rec.cz = cz
        rec.radius = r
        rec.vdist = vd
        nd = enode[e]
        lx = node[nd].lo[0]
        ly = node[nd].lo[1]
        lz = node[nd].lo[2]
        sz = node[nd].size
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
            expand(node, nd, cx, cy, cz, r, vd)
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
    sph = en.sphere
    eslot = en.slot
    for i in range(ents.shape[0]):
        e = ents[i]
        s = eslot[e]
        r = radii[s]
        rec = sph[e]
        rec.cx = centers[s, 0]
        rec.cy = centers[s, 1]
        rec.cz = centers[s, 2]
        rec.radius = r
        rec.vdist = vdist[s]
        for a in range(3):
            c = centers[s, a]
            bounds[0, a] = min(bounds[0, a], c - r)
            bounds[1, a] = max(bounds[1, a], c + r)


# ---------------------------------------------------------------- node lists (compiled)
# The helpers below run once per placed object (or per level of its climb and descent), so
# they take the record array and the entry arrays they touch, not the bundles: a call (or
# an inlined call) that passes a bundle costs a reference count pair per field, and with
# the bundles the moving bench's placement took 1.24 ms per frame instead of 0.30. The
# kernels that call them take the bundles and read their fields once.

@njit(cache=True)
def revive(node, n):
    """A dying leaf reused is evidently a hot region: keep it twice as long next time."""
    r = node[n]
    if r.ttl >= 0:
        r.life = min(2 * r.life, LIFE_MAX)
        r.ttl = -1


@njit(cache=True)
def dirty(node, n):
    """The subtree of ``n`` and every ancestor's lose their entry range. A dirty node has
    only dirty ancestors, so the walk stops at the first dirty one."""
    while n >= 0 and node[n].clean != 0:
        node[n].clean = 0
        n = node[n].parent


@njit(cache=True)
def link(s, n, enext, eprev, enode, node):
    """Put entry ``s`` at the head of node ``n``'s list (the caller dirties and revives n)."""
    h = node[n].head
    enext[s] = h
    eprev[s] = -1
    if h >= 0:
        eprev[h] = s
    node[n].head = s
    node[n].count += 1
    enode[s] = n


@njit(cache=True)
def unlink(s, enext, eprev, enode, node):
    """Take entry ``s`` out of its node's list (the caller dirties the node)."""
    n = enode[s]
    p = eprev[s]
    q = enext[s]
    if p >= 0:
        enext[p] = q
    else:
        node[n].head = q
    if q >= 0:
        eprev[q] = p
    node[n].count -= 1
    enode[s] = NO_NODE
    enext[s] = -1
    eprev[s] = -1


@njit(cache=True, inline="always")
def contains(node, n, cx, cy, cz, r):
    """The sphere lies in node ``n``'s cube."""
    lx = node[n].lo[0]
    ly = node[n].lo[1]
    lz = node[n].lo[2]
    s = node[n].size
    return (cx - r >= lx and cx + r <= lx + s and cy - r >= ly and cy + r <= ly + s
            and cz - r >= lz and cz + r <= lz + s)


@njit(cache=True, inline="always")
def octant(node, n, cx, cy, cz):
    """Octant of node ``n`` holding point c (upper half on ties) and that octant's corner."""
    h = node[n].size * 0.5
    lx = node[n].lo[0]
    ly = node[n].lo[1]
    lz = node[n].lo[2]
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
def fits_octant(node, n, cx, cy, cz, r):
    """The octant of ``n`` that holds the sphere, or -1 (none does, or n has min_size)."""
    if node[n].level <= 0:
        return -1
    o, lx, ly, lz, h = octant(node, n, cx, cy, cz)
    if (cx - r >= lx and cx + r <= lx + h and cy - r >= ly and cy + r <= ly + h
            and cz - r >= lz and cz + r <= lz + h):
        return o
    return -1


@njit(cache=True)
def new_child(nd, n, o):
    """Create octant ``o`` of ``n`` (rare: once per new cell, so it takes the bundle)."""
    node = nd.node
    revive(node, n)
    dirty(node, n)  # a new (dirty) child needs dirty ancestors
    h = node[n].size * 0.5
    ch = alloc_node(nd, n, node[n].level - 1, node[n].lo[0] + (h if o & 1 else 0.0),
                    node[n].lo[1] + (h if o & 2 else 0.0),
                    node[n].lo[2] + (h if o & 4 else 0.0), h)
    node[n].child[o] = ch
    node[n].nchild += 1
    return ch


# ---------------------------------------------------------------- batch updates (compiled)

@njit(cache=True)
def walk_up_ahead(ents, en, nd) -> None:
    """Walk from each removed entry's node to the root, level by level for the whole batch,
    reading only: :func:`unlink_batch`'s walks then find their records in the cache. One
    walk is a chain of parent links through records beyond the cache (627,590 nodes of 192
    bytes at 10^6); a pass takes every unfinished walk one level up, so that the misses of
    different entries overlap (a removal: 418-488 -> 258-335 ns, static `spawn`)."""
    node = nd.node
    enode = en.node
    m = ents.shape[0]
    at = np.empty(m, np.int64)
    left = 0
    for i in range(m):
        n = enode[ents[i]]
        if n >= 0:
            at[left] = n
            left += 1
    while left > 0:
        kept = 0
        for j in range(left):
            p = node[at[j]].parent
            if p >= 0:
                at[kept] = p
                kept += 1
        left = kept


@njit(cache=True)
def place(ents, start, need, en, nd, root, displaced, relinked):
    """Put queued (new or moved) entries in their smallest containing node: moved ones climb
    to the first ancestor that contains them, then everything descends as far as it fits.

    Returns the index of the first entry not processed: it stops early when fewer than
    ``need`` free nodes remain, so the caller can grow the pool and call again.
    The fields are read out of the bundles once: in numba every ``bundle.field`` read in a
    loop costs a reference count pair (with them this kernel was 4x slower).
    """
    node = nd.node
    aging = nd.aging
    naging = nd.naging
    nfree = nd.nfree
    sph = en.sphere
    enode = en.node
    enext = en.next
    eprev = en.prev
    for i in range(start, ents.shape[0]):
        if nfree[0] < need:
            return i
        s = ents[i]
        cx = sph[s].cx
        cy = sph[s].cy
        cz = sph[s].cz
        r = sph[s].radius
        cur = enode[s]
        n = root
        if cur >= 0:
            # Climb to the first ancestor that still contains the sphere (the root does);
            # the object leaves the subtrees of the nodes passed on the way.
            n = cur
            while not contains(node, n, cx, cy, cz, r) and node[n].parent >= 0:
                count_out(node, n)
                n = node[n].parent
        else:
            node[root].subcount += 1
        while True:  # descend; the bundle only goes to the rare new_child
            o = fits_octant(node, n, cx, cy, cz, r)
            if o < 0:
                break
            ch = node[n].child[o]
            if ch < 0:
                ch = new_child(nd, n, o)
            node[ch].subcount += 1  # the object now lies in this subtree
            n = ch
        if n != cur:
            if not displaced[s]:  # first time out of the query-order layout
                displaced[s] = True
                relinked[0] += 1
            if cur >= 0:
                dirty(node, cur)
                unlink(s, enext, eprev, enode, node)
                if node[cur].count == 0 and node[cur].nchild == 0:  # call only if it may act
                    start_ageing(node, aging, naging, cur, root)
            dirty(node, n)
            revive(node, n)
            link(s, n, enext, eprev, enode, node)
        expand(node, n, cx, cy, cz, r, sph[s].vdist)
    return ents.shape[0]


@njit(cache=True)
def count_out(node, n):
    """One object fewer in the subtree of ``n``; an emptied subtree forgets its bounds."""
    rec = node[n]
    rec.subcount -= 1
    if rec.subcount == 0:
        for a in range(3):
            rec.tlo[a] = np.inf
            rec.thi[a] = -np.inf
        rec.vmax = -np.inf
        rec.vmin = np.inf


@njit(cache=True)
def expand(node, n, cx, cy, cz, r, vd):
    """Grow the subtree bounds of ``n`` and its ancestors to include a sphere.

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
        rec = node[n]
        tlo = rec.tlo
        thi = rec.thi
        grew = False
        if lx < tlo[0]:
            tlo[0] = lx
            grew = True
        if ly < tlo[1]:
            tlo[1] = ly
            grew = True
        if lz < tlo[2]:
            tlo[2] = lz
            grew = True
        if hx > thi[0]:
            thi[0] = hx
            grew = True
        if hy > thi[1]:
            thi[1] = hy
            grew = True
        if hz > thi[2]:
            thi[2] = hz
            grew = True
        if vd > rec.vmax:
            rec.vmax = vd
            grew = True
        if vd < rec.vmin:
            rec.vmin = vd
            grew = True
        if not grew:
            return
        n = rec.parent


@njit(cache=True)
def unlink_batch(ents, en, nd, root):
    """Take removed objects' entries out of their nodes at once (their walks to the root
    found first for the whole batch: :func:`walk_up_ahead`)."""
    node = nd.node
    enode = en.node
    walk_up_ahead(ents, en, nd)
    for i in range(ents.shape[0]):
        s = ents[i]
        n = enode[s]
        if n < 0:
            enode[s] = NO_NODE
            continue
        dirty(node, n)
        unlink(s, en.next, en.prev, enode, node)
        start_ageing(node, nd.aging, nd.naging, n, root)
        while n >= 0:
            count_out(node, n)
            n = node[n].parent


# ---------------------------------------------------------------- end of a cycle (compiled)

@njit(cache=True)
def tick(nd, root):
    """Age every empty leaf by one and prune those that reach 0; returns the nodes pruned."""
    node = nd.node
    aging = nd.aging
    naging = nd.naging
    outcome = nd.outcome
    free = nd.free
    nfree = nd.nfree
    pruned = 0
    keep = 0
    i = 0
    while i < naging[0]:  # pruning may append parents, which age in this same cycle
        n = aging[i]
        i += 1
        rec = node[n]
        if rec.alive == 0 or rec.ttl < 0 or n == root or rec.count != 0 or rec.nchild != 0:
            rec.inlist = 0
            if n == root:
                rec.ttl = -1
            continue
        rec.ttl -= 1
        if rec.ttl > 0:
            aging[keep] = n
            keep += 1
            continue
        pruned += prune_branch(node, outcome, free, nfree, n, root)
    naging[0] = keep
    return pruned


@njit(cache=True)
def prune_branch(node, outcome, free, nfree, n, root):
    """Cut the dead leaf ``n`` and every ancestor left with neither objects nor children
    (they only led to it); returns how many nodes went."""
    pruned = 0
    while True:
        p = node[n].parent
        for j in range(8):
            if node[p].child[j] == n:
                node[p].child[j] = -1
        node[p].nchild -= 1
        outcome[n] = 0
        free_node(node, free, nfree, n)
        pruned += 1
        if p == root or node[p].count != 0 or node[p].nchild != 0:
            return pruned
        n = p


@njit(cache=True)
def end_cycle(nd, root):
    """End of an update cycle: :func:`tick`, then :func:`shrink_root` (one call, since every
    call that unboxes the node bundle costs a few microseconds). Returns (pruned, root)."""
    pruned = tick(nd, root)
    return pruned, shrink_root(nd, root)
