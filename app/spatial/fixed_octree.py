"""``fixed-octree``: Nevala's octree over a power-of-two cube (seeds/nevala-octree.txt).

Structure
    The root is a cube of side ``min_size * 2**L`` whose low corner lies on the ``min_size``
    grid; every node splits at its centre into eight octants, down to nodes of ``min_size``.
    ``min_size`` must be a power of two so that every corner and half-size is exact in
    floating point: a child's corner is its parent's corner plus 0 or half the side, bit for
    bit, and validate() can check that exactly.
    An object lives in the smallest node that fully contains its sphere (or in a node of
    ``min_size`` if it fits there), so every node cube bounds all spheres of its subtree.

State (flat arrays, compiled kernels)
    ``_nodei`` (int32) and ``_nodef`` (float64) are the node pool, one row per node, with a
    free stack.  Entries (``_ent``: centre, radius, view distance) are the tree's packed copy
    of placed objects, numbered apart from slots and taken in Morton order per batch; a
    moved object's copy is refreshed at the flush.
    Entries of a node form a doubly linked list threaded through ``_enext``/``_eprev``;
    ``_enode[entry]`` is its node, ``_eslot``/``_s2e`` map entries and slots both ways
    (``_s2e`` is -1 for no object, -2 for an object still in the insert queue).
    Each node also keeps its subtree's object count and a slightly padded AABB and view
    distance range of its subtree's spheres.  Counts are exact (updated along the climb and
    descent paths); bounds only grow (along the path up, stopping at the first node that
    already covers the sphere) and are reset when a subtree empties.  They are therefore
    conservative, but never looser than the node cube, and exact for static scenes: culling
    with them is much better than with the loose cube, and keeping them costs O(1) per move.

Entry layout (renumber)
    Once half of the placed entries were linked into a node since the last layout (after a
    bulk insert; every few cycles when most objects keep changing nodes; never when only a
    few move), a flush ends by renumbering all entries in preorder of the tree, each node's
    list contiguous (``_renumber``, O(n), into a second set of arrays that are swapped in).
    The query then streams through memory instead of chasing scattered list links. Every node
    it reaches is marked ``CLEAN``: its subtree's entries are exactly
    ``[ESTART, ESTART + SUBCOUNT)``. Linking or unlinking an entry, or giving a node a new
    child, clears ``CLEAN`` on the node and its ancestors (the walk stops at the first
    dirty one: dirty nodes only have dirty ancestors).

Lazy updates and the update cycle
    ``insert`` only queues slots, ``update`` only records moved slots and ``remove`` unlinks
    at once.  The next query of any kind (or an explicit :meth:`FixedOctree.flush`) applies
    the queue in one compiled batch: the root grows first if anything left it, new objects
    descend from the root, moved objects climb to the first ancestor that contains them and
    descend again as far as they fit.  The common small move (the sphere is still in its
    node's cube and fits none of its octants) is settled while the moved objects' copies are
    refreshed, with a few float tests (branch-free) and no tree walk; only the others go
    through the climb and descent, in entry (i.e. spatial) order.
    **One flush is one update cycle**: it happens at the first query after any
    insert/update/remove (a viewer frame "update batch then cull" is exactly one cycle) or
    when ``flush()`` is called; queries of an unchanged tree do not age anything.

Dead branches
    A non-root leaf with no objects is kept for ``lifespan`` cycles (8 at first): every flush
    that finds it empty counts one, and the 8th prunes it (the countdown ``TTL`` runs from the
    lifespan down to 0).  If an object or a child arrives while the countdown runs, the
    lifespan doubles (8, 16, 32, 64, capped at 64: the article's check lets it reach 128) and
    the countdown stops.  A pruned leaf takes its whole dead branch with it: ancestors left
    with neither objects nor children go too, rather than each waiting out its own countdown
    (a chain of 17 single-child nodes would otherwise take 136 cycles to disappear).

Frustum query
    Nodes are tested through their subtree bounds: rejected by view distance
    (``box_point_dist`` > subtree max view distance), by the planes, or by the Z-pyramid;
    a node inside the planes (and, with view distance, whose farthest point is within the
    subtree's min view distance, and with no occlusion) is accepted wholesale: a clean
    subtree as one copy of its entry run, without visiting its nodes (``node_outcomes``
    marks them inside on demand, for the overlay), others by walking them.  Otherwise
    its own objects are tested with the shared predicates.  ``working_set`` counts tested
    plus wholesale-accepted objects; ``nodes_visited`` counts tested nodes plus the nodes
    walked to collect accepted subtrees (a bulk-copied subtree counts as one).  Children are
    pushed so that they pop in octant order, which is the renumbered memory order.

Root growth (unlike the article)
    An object that leaves the root is never destroyed: the root doubles towards it (the old
    root becomes one octant of the new one) until everything fits.  Conversely, when the
    root holds no object and has a single child, that child becomes the root, so the root
    stays the smallest cube the tree needs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from app.geom.predicates import (
    INSIDE,
    NODE_INSIDE,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
    OUTSIDE,
    box_point_dist,
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

# ---------------------------------------------------------------- node pool layout
# int32 columns of _nodei
PARENT = 0
CHILD0 = 1  # eight child columns, octant bits: 1 = upper x, 2 = upper y, 4 = upper z
NCHILD = 9
HEAD = 10  # first object slot of the node's list, -1 if none
COUNT = 11  # objects in the node itself
LEVEL = 12  # side = min_size * 2**LEVEL; depth = root level - LEVEL
LIFE = 13  # current lifespan of the node once it is an empty leaf (8..64)
TTL = 14  # countdown of an empty leaf, -1 when not counting
SUBCOUNT = 15  # objects in the subtree
INLIST = 16  # node has an entry in the ageing list
ALIVE = 17
CLEAN = 18  # the subtree's entries are exactly [ESTART, ESTART + SUBCOUNT) (see _renumber)
ESTART = 19
NI = 20
# float64 columns of _nodef
LO = 0  # cube corner (3)
SIZE = 3
TLO = 4  # tight padded AABB of the subtree's spheres (3 + 3)
THI = 7
VMAX = 10  # max view distance in the subtree
VMIN = 11  # min view distance in the subtree
NF = 12

LIFE_START = 8
LIFE_MAX = 64
PENDING = -2  # _s2e value of an object waiting in the insert queue
NO_NODE = -1
# float64 columns of _ent, the tree's own packed copy of each placed object
EX = 0  # centre (3)
ER = 3  # radius
EV = 4  # view distance
NE = 5

# Node decisions get a relative slack so float rounding can only make them more permissive;
# the final per-object decision always uses the shared predicates of geometry.py.
_SLACK = 1e-12
_PAD = 1e-12  # relative padding of tight boxes, same reason
# Entries are laid out again in query order (O(n), ~2-3 ms per 100k objects) once this
# fraction of the placed entries were linked into a node since the last layout: after bulk
# inserts, and every few cycles when most objects keep changing nodes; never when only a
# few objects move, however long (they are the only ones out of place).
_RENUMBER_AT = 0.5


# ---------------------------------------------------------------- batch helpers (compiled)

@njit(cache=True)
def _gather(slots, s2e, seen, emark):
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
def _gather_sparse(slots, s2e, seen):
    """``_gather`` for batches much smaller than the entry pool: the placed ones come as
    (entries, their slots), ascending and distinct, from one sort of packed keys, so that
    neither a per-entry mark nor ``eslot`` is touched (each would be one more cache miss)."""
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


@njit(cache=True)
def _renumber(root, nodei, ent, enode, enext, eslot, s2e,
              ent2, enode2, enext2, eprev2, eslot2, stack):
    """Copy the placed entries into the second set of arrays, renumbered so that every
    node's list is contiguous and the lists follow the order in which the frustum query
    visits the nodes: the query then streams through memory. Returns the count k; the
    entries are 0..k-1 and everything above is free."""
    k = 0
    sp = 0
    if root >= 0:
        stack[0] = root
        sp = 1
    while sp > 0:
        sp -= 1
        n = stack[sp]
        nodei[n, CLEAN] = 1
        nodei[n, ESTART] = k  # preorder: the subtree's entries follow, SUBCOUNT of them
        s = nodei[n, HEAD]
        if s >= 0:
            nodei[n, HEAD] = k
            first = k
            while s >= 0:
                for j in range(NE):
                    ent2[k, j] = ent[s, j]
                enode2[k] = n
                sl = eslot[s]
                eslot2[k] = sl
                s2e[sl] = k
                eprev2[k] = k - 1 if k > first else -1
                enext2[k] = k + 1
                k += 1
                s = enext[s]
            enext2[k - 1] = -1
        for c in range(7, -1, -1):  # popped in octant order: memory order
            ch = nodei[n, CHILD0 + c]
            if ch >= 0:  # empty subtrees too: every node becomes clean
                stack[sp] = ch
                sp += 1
    for e in range(k, enode2.shape[0]):
        enode2[e] = NO_NODE
        enext2[e] = -1
        eprev2[e] = -1
        eslot2[e] = -1
    return k


@njit(cache=True)
def _refresh(moved, mslots, eslot, ent, enode, centers, radii, vdist, nodei, nodef, min_size,
             slow, bounds):
    """Refresh the packed copies of moved entries, and settle at once the common small move.

    An object whose new sphere still lies in its node's cube and fits no octant of it (or
    whose node has ``min_size``) stays where it is: only the bounds grow, a few float tests
    and no tree walk. The others are written to ``slow`` (returns how many) for ``_place``,
    and ``bounds`` gets the AABB of their spheres (for root growth). ``mslots`` are the
    entries' slots when known (else empty: looked up in ``eslot``).
    """
    for a in range(3):
        bounds[0, a] = np.inf
        bounds[1, a] = -np.inf
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
        ent[e, 0] = cx
        ent[e, 1] = cy
        ent[e, 2] = cz
        ent[e, ER] = r
        ent[e, EV] = vd
        n = enode[e]
        lx = nodef[n, LO]
        ly = nodef[n, LO + 1]
        lz = nodef[n, LO + 2]
        sz = nodef[n, SIZE]
        # Branch-free (the outcome is unpredictable, and mispredictions cost more than the
        # arithmetic): the sphere lies in the cube and, unless the node has min_size, it
        # crosses a mid-plane, i.e. no octant holds it. With the sphere in the cube, "the
        # octant of the centre holds it" is, per axis, being wholly on one side of the mid-plane
        # (the same float expressions as _octant and _descend).
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
            _expand(n, cx, cy, cz, r, vd, nodei, nodef)
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
def _copy_in(ents, eslot, ent, centers, radii, vdist, bounds):
    """Refresh the packed copies of ``ents`` from the store; bounds = AABB of their spheres."""
    for a in range(3):
        bounds[0, a] = np.inf
        bounds[1, a] = -np.inf
    for i in range(ents.shape[0]):
        e = ents[i]
        s = eslot[e]
        r = radii[s]
        ent[e, ER] = r
        ent[e, EV] = vdist[s]
        for a in range(3):
            c = centers[s, a]
            ent[e, EX + a] = c
            bounds[0, a] = min(bounds[0, a], c - r)
            bounds[1, a] = max(bounds[1, a], c + r)


# ---------------------------------------------------------------- node helpers (compiled)

@njit(cache=True)
def _alloc_node(nodei, nodef, free, nfree, parent, level, lx, ly, lz, size):
    """Pop a node from the free stack and initialise it (dirty, empty, lifespan 8)."""
    k = nfree[0] - 1
    n = free[k]
    nfree[0] = k
    for j in range(NI):
        nodei[n, j] = 0
    nodei[n, PARENT] = parent
    for j in range(8):
        nodei[n, CHILD0 + j] = -1
    nodei[n, HEAD] = -1
    nodei[n, LEVEL] = level
    nodei[n, LIFE] = LIFE_START
    nodei[n, TTL] = -1
    nodei[n, ALIVE] = 1
    nodef[n, LO] = lx
    nodef[n, LO + 1] = ly
    nodef[n, LO + 2] = lz
    nodef[n, SIZE] = size
    for j in range(3):
        nodef[n, TLO + j] = np.inf
        nodef[n, THI + j] = -np.inf
    nodef[n, VMAX] = -np.inf
    nodef[n, VMIN] = np.inf
    return n


@njit(cache=True)
def _free_node(nodei, free, nfree, n):
    nodei[n, ALIVE] = 0
    nodei[n, INLIST] = 0
    free[nfree[0]] = n
    nfree[0] += 1


@njit(cache=True)
def _revive(nodei, n):
    # Reuse of a dying leaf: it is evidently a hot region, so keep it twice as long next time.
    if nodei[n, TTL] >= 0:
        nodei[n, LIFE] = min(2 * nodei[n, LIFE], LIFE_MAX)
        nodei[n, TTL] = -1


@njit(cache=True)
def _start_ageing(nodei, aging, naging, n, root):
    """Start the countdown of ``n`` if it is a non-root empty leaf not already counting."""
    if n == root or nodei[n, COUNT] != 0 or nodei[n, NCHILD] != 0 or nodei[n, TTL] >= 0:
        return
    nodei[n, TTL] = nodei[n, LIFE]
    if nodei[n, INLIST] == 0:
        nodei[n, INLIST] = 1
        aging[naging[0]] = n
        naging[0] += 1


@njit(cache=True)
def _dirty(nodei, n):
    """The subtree of ``n`` and every ancestor's lose their entry range. A dirty node has
    only dirty ancestors, so the walk stops at the first dirty one."""
    while n >= 0 and nodei[n, CLEAN] != 0:
        nodei[n, CLEAN] = 0
        n = nodei[n, PARENT]


@njit(cache=True)
def _link(s, n, enode, enext, eprev, nodei):
    _dirty(nodei, n)
    _revive(nodei, n)
    h = nodei[n, HEAD]
    enext[s] = h
    eprev[s] = -1
    if h >= 0:
        eprev[h] = s
    nodei[n, HEAD] = s
    nodei[n, COUNT] += 1
    enode[s] = n


@njit(cache=True)
def _unlink(s, enode, enext, eprev, nodei):
    n = enode[s]
    _dirty(nodei, n)
    p = eprev[s]
    q = enext[s]
    if p >= 0:
        enext[p] = q
    else:
        nodei[n, HEAD] = q
    if q >= 0:
        eprev[q] = p
    nodei[n, COUNT] -= 1
    enode[s] = NO_NODE
    enext[s] = -1
    eprev[s] = -1


@njit(cache=True, inline="always")
def _contains(nodef, n, cx, cy, cz, r):
    lx = nodef[n, LO]
    ly = nodef[n, LO + 1]
    lz = nodef[n, LO + 2]
    s = nodef[n, SIZE]
    return (cx - r >= lx and cx + r <= lx + s and cy - r >= ly and cy + r <= ly + s
            and cz - r >= lz and cz + r <= lz + s)


@njit(cache=True, inline="always")
def _octant(nodef, n, cx, cy, cz):
    """Octant of node ``n`` holding point c (upper half on ties) and that octant's corner."""
    h = nodef[n, SIZE] * 0.5
    lx = nodef[n, LO]
    ly = nodef[n, LO + 1]
    lz = nodef[n, LO + 2]
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
def _descend(n, cx, cy, cz, r, nodei, nodef, free, nfree):
    """Smallest node below ``n`` (creating nodes on the way) that fully holds the sphere."""
    while nodei[n, LEVEL] > 0:
        o, lx, ly, lz, h = _octant(nodef, n, cx, cy, cz)
        if not (cx - r >= lx and cx + r <= lx + h and cy - r >= ly and cy + r <= ly + h
                and cz - r >= lz and cz + r <= lz + h):
            break
        ch = nodei[n, CHILD0 + o]
        if ch < 0:
            _revive(nodei, n)
            _dirty(nodei, n)  # a new (dirty) child needs dirty ancestors
            ch = _alloc_node(nodei, nodef, free, nfree, n, nodei[n, LEVEL] - 1, lx, ly, lz, h)
            nodei[n, CHILD0 + o] = ch
            nodei[n, NCHILD] += 1
        nodei[ch, SUBCOUNT] += 1  # the object now lies in this subtree
        n = ch
    return n


# ---------------------------------------------------------------- batch updates (compiled)

@njit(cache=True)
def _place(ents, start, need, ent, enode, enext, eprev,
           nodei, nodef, free, nfree, aging, naging, root, displaced, relinked):
    """Put queued (new or moved) entries in their smallest containing node.

    Returns the index of the first entry not processed: it stops early when fewer than
    ``need`` free nodes remain, so the caller can grow the pool and call again.
    """
    for i in range(start, ents.shape[0]):
        if nfree[0] < need:
            return i
        s = ents[i]
        cx = ent[s, 0]
        cy = ent[s, 1]
        cz = ent[s, 2]
        r = ent[s, ER]
        cur = enode[s]
        n = root
        if cur >= 0:
            # Climb to the first ancestor that still contains the sphere (the root does);
            # the object leaves the subtrees of the nodes passed on the way.
            n = cur
            while not _contains(nodef, n, cx, cy, cz, r) and nodei[n, PARENT] >= 0:
                _count_out(nodei, nodef, n)
                n = nodei[n, PARENT]
        else:
            nodei[root, SUBCOUNT] += 1
        n = _descend(n, cx, cy, cz, r, nodei, nodef, free, nfree)
        if n != cur:
            if not displaced[s]:  # first time out of the query-order layout
                displaced[s] = True
                relinked[0] += 1
            if cur >= 0:
                _unlink(s, enode, enext, eprev, nodei)
                _start_ageing(nodei, aging, naging, cur, root)
            _link(s, n, enode, enext, eprev, nodei)
        _expand(n, cx, cy, cz, r, ent[s, EV], nodei, nodef)
    return ents.shape[0]


@njit(cache=True)
def _count_out(nodei, nodef, n):
    """One object fewer in the subtree of ``n``; an emptied subtree forgets its bounds."""
    nodei[n, SUBCOUNT] -= 1
    if nodei[n, SUBCOUNT] == 0:
        for a in range(3):
            nodef[n, TLO + a] = np.inf
            nodef[n, THI + a] = -np.inf
        nodef[n, VMAX] = -np.inf
        nodef[n, VMIN] = np.inf


@njit(cache=True)
def _expand(n, cx, cy, cz, r, vd, nodei, nodef):
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
        grew = False
        if lx < nodef[n, TLO]:
            nodef[n, TLO] = lx
            grew = True
        if ly < nodef[n, TLO + 1]:
            nodef[n, TLO + 1] = ly
            grew = True
        if lz < nodef[n, TLO + 2]:
            nodef[n, TLO + 2] = lz
            grew = True
        if hx > nodef[n, THI]:
            nodef[n, THI] = hx
            grew = True
        if hy > nodef[n, THI + 1]:
            nodef[n, THI + 1] = hy
            grew = True
        if hz > nodef[n, THI + 2]:
            nodef[n, THI + 2] = hz
            grew = True
        if vd > nodef[n, VMAX]:
            nodef[n, VMAX] = vd
            grew = True
        if vd < nodef[n, VMIN]:
            nodef[n, VMIN] = vd
            grew = True
        if not grew:
            return
        n = nodei[n, PARENT]


@njit(cache=True)
def _unlink_batch(ents, enode, enext, eprev, nodei, nodef, aging, naging, root):
    """Take removed objects' entries out of their nodes at once."""
    for i in range(ents.shape[0]):
        s = ents[i]
        n = enode[s]
        if n < 0:
            enode[s] = NO_NODE
            continue
        _unlink(s, enode, enext, eprev, nodei)
        _start_ageing(nodei, aging, naging, n, root)
        while n >= 0:
            _count_out(nodei, nodef, n)
            n = nodei[n, PARENT]


@njit(cache=True)
def _grow_root_once(nodei, nodef, free, nfree, aging, naging, root, bmin, bmax):
    """Double the root towards the box [bmin, bmax]; the old root becomes one octant."""
    s = nodef[root, SIZE]
    o = 0
    lo = np.empty(3)
    for a in range(3):
        lo[a] = nodef[root, LO + a]
        if bmin[a] < lo[a]:
            lo[a] -= s
            o |= 1 << a
    new = _alloc_node(nodei, nodef, free, nfree, -1, nodei[root, LEVEL] + 1,
                      lo[0], lo[1], lo[2], 2.0 * s)
    nodei[new, CHILD0 + o] = root
    nodei[new, NCHILD] = 1
    nodei[root, PARENT] = new
    nodei[new, SUBCOUNT] = nodei[root, SUBCOUNT]
    for j in range(TLO, NF):  # same objects, same bounds
        nodef[new, j] = nodef[root, j]
    _start_ageing(nodei, aging, naging, root, new)  # an empty old root is now a dying leaf
    return new


@njit(cache=True)
def _tick(nodei, free, nfree, aging, naging, root, outcome):
    """End of an update cycle: age every empty leaf by one and prune those that reach 0.

    Returns the number of nodes pruned.
    """
    pruned = 0
    keep = 0
    i = 0
    while i < naging[0]:  # pruning may append parents, which age in this same cycle
        n = aging[i]
        i += 1
        if (nodei[n, ALIVE] == 0 or nodei[n, TTL] < 0 or n == root
                or nodei[n, COUNT] != 0 or nodei[n, NCHILD] != 0):
            nodei[n, INLIST] = 0
            if n == root:
                nodei[n, TTL] = -1
            continue
        nodei[n, TTL] -= 1
        if nodei[n, TTL] > 0:
            aging[keep] = n
            keep += 1
            continue
        # The countdown expired: cut the whole dead branch, i.e. this leaf and every
        # ancestor left with neither objects nor children (they only led to it).
        while True:
            p = nodei[n, PARENT]
            for j in range(8):
                if nodei[p, CHILD0 + j] == n:
                    nodei[p, CHILD0 + j] = -1
            nodei[p, NCHILD] -= 1
            outcome[n] = 0
            _free_node(nodei, free, nfree, n)
            pruned += 1
            if p == root or nodei[p, COUNT] != 0 or nodei[p, NCHILD] != 0:
                break
            n = p
    naging[0] = keep
    return pruned


@njit(cache=True)
def _shrink_root(nodei, free, nfree, root):
    """While the root holds no object and has one child, that child becomes the root."""
    while nodei[root, COUNT] == 0 and nodei[root, NCHILD] == 1:
        ch = -1
        for j in range(8):
            if nodei[root, CHILD0 + j] >= 0:
                ch = nodei[root, CHILD0 + j]
        nodei[ch, PARENT] = -1
        nodei[ch, TTL] = -1  # the root never dies; a stale ageing entry is dropped at the next tick
        _free_node(nodei, free, nfree, root)
        root = ch
    return root


# ---------------------------------------------------------------- queries (compiled)

@njit(cache=True, inline="always")
def _far_dist(lo, hi, x, y, z):
    dx = max(abs(x - lo[0]), abs(hi[0] - x))
    dy = max(abs(y - lo[1]), abs(hi[1] - y))
    dz = max(abs(z - lo[2]), abs(hi[2] - z))
    return math.sqrt(dx * dx + dy * dy + dz * dz)


@njit(cache=True, inline="always")
def _push_children(nodei, n, stack, sp):
    """Push n's non-empty children so that they pop in octant order (memory order after a
    renumbering); returns the new stack size."""
    for c in range(7, -1, -1):
        ch = nodei[n, CHILD0 + c]
        if ch >= 0 and nodei[ch, SUBCOUNT] > 0:
            stack[sp] = ch
            sp += 1
    return sp


@njit(cache=True)
def _collect(top, nodei, enext, eslot, out, k, outcome, stack):
    """Append every object of the subtree of ``top`` to ``out``; returns (k, nodes walked).

    A clean subtree (entries laid out by _renumber, nothing relinked in it since) is one
    contiguous run of entries: copied without walking its nodes. Its nodes below are marked
    inside for the overlay only on demand (:meth:`FixedOctree.node_outcomes`).
    """
    sp = 1
    stack[0] = top
    walked = 0
    while sp > 0:
        sp -= 1
        n = stack[sp]
        walked += 1
        outcome[n] = NODE_INSIDE
        if nodei[n, CLEAN] != 0:
            e0 = nodei[n, ESTART]
            for j in range(nodei[n, SUBCOUNT]):
                out[k + j] = eslot[e0 + j]
            k += nodei[n, SUBCOUNT]
            continue
        s = nodei[n, HEAD]
        while s >= 0:
            out[k] = eslot[s]
            k += 1
            s = enext[s]
        sp = _push_children(nodei, n, stack, sp)
    return k, walked


@njit(cache=True)
def _fill_inside(root, nodei, outcome, stack):
    """Mark inside the non-empty nodes below inside nodes that a bulk copy did not visit."""
    if root < 0:
        return
    sp = 1
    stack[0] = root
    while sp > 0:
        sp -= 1
        n = stack[sp]
        inside = outcome[n] == NODE_INSIDE
        for c in range(7, -1, -1):
            ch = nodei[n, CHILD0 + c]
            if ch >= 0 and nodei[ch, SUBCOUNT] > 0:
                if inside and outcome[ch] == 0:
                    outcome[ch] = NODE_INSIDE
                stack[sp] = ch
                sp += 1


@njit(cache=True)
def _frustum(root, nodei, nodef, enext, eslot, ent, planes, eye, use_vd,
             vp, zd, zo, zw, zh, out, outcome, stack, inside_stack, stack2):
    """Cull the tree: reject nodes, accept inside subtrees wholesale, test the rest."""
    occl = zw.shape[0] > 0
    k = 0
    ws = 0
    visited = 0
    occ_nodes = 0
    occ_objs = 0
    if root < 0 or nodei[root, SUBCOUNT] == 0:
        return k, ws, visited, occ_nodes, occ_objs
    ex = eye[0]
    ey = eye[1]
    ez = eye[2]
    sp = 1
    stack[0] = root
    inside_stack[0] = 0
    while sp > 0:
        sp -= 1
        n = stack[sp]
        inside = inside_stack[sp] != 0
        visited += 1
        lo = nodef[n, TLO:TLO + 3]
        hi = nodef[n, THI:THI + 3]
        if use_vd and box_point_dist(lo, hi, ex, ey, ez) > nodef[n, VMAX] * (1.0 + _SLACK):
            outcome[n] = NODE_REJECT_VIEWDIST
            continue
        if not inside:
            cls = box_vs_frustum(planes, lo, hi)
            if cls == OUTSIDE:
                outcome[n] = NODE_REJECT_FRUSTUM
                continue
            inside = cls == INSIDE
        if occl and box_occluded(lo, hi, vp, zd, zo, zw, zh):
            outcome[n] = NODE_REJECT_OCCLUSION
            occ_nodes += 1
            continue
        if inside and not occl and (
                not use_vd or _far_dist(lo, hi, ex, ey, ez) * (1.0 + _SLACK) <= nodef[n, VMIN]):
            # every sphere below is inside the planes and within its view distance
            k0 = k
            k, walked = _collect(n, nodei, enext, eslot, out, k, outcome, stack2)
            ws += k - k0
            visited += walked - 1
            continue
        outcome[n] = NODE_INSIDE if inside else NODE_PARTIAL
        s = nodei[n, HEAD]
        while s >= 0:
            ws += 1
            cx = ent[s, 0]
            cy = ent[s, 1]
            cz = ent[s, 2]
            ok = not use_vd or within_view_distance(ex, ey, ez, cx, cy, cz, ent[s, EV])
            if ok and not inside:
                ok = sphere_in_frustum(planes, cx, cy, cz, ent[s, ER])
            if ok and occl and sphere_occluded(cx, cy, cz, ent[s, ER], vp, zd, zo, zw, zh):
                occ_objs += 1
                ok = False
            if ok:
                out[k] = eslot[s]
                k += 1
            s = enext[s]
        for c in range(7, -1, -1):  # popped in octant order: memory order
            ch = nodei[n, CHILD0 + c]
            if ch >= 0 and nodei[ch, SUBCOUNT] > 0:
                stack[sp] = ch
                inside_stack[sp] = 1 if inside else 0
                sp += 1
    return k, ws, visited, occ_nodes, occ_objs


@njit(cache=True)
def _box(root, nodei, nodef, enext, eslot, ent, qlo, qhi, out, stack, stack2, outcome):
    k = 0
    if root < 0 or nodei[root, SUBCOUNT] == 0:
        return k
    sp = 1
    stack[0] = root
    while sp > 0:
        sp -= 1
        n = stack[sp]
        if not _box_touches(nodef, n, qlo, qhi):
            continue
        inside = True
        for a in range(3):
            if nodef[n, TLO + a] < qlo[a] or nodef[n, THI + a] > qhi[a]:
                inside = False
        if inside:
            # the whole subtree's bounding box lies in the query box: all spheres overlap it
            k, _w = _collect(n, nodei, enext, eslot, out, k, outcome, stack2)
            continue
        s = nodei[n, HEAD]
        while s >= 0:
            if sphere_overlaps_box(ent[s, 0], ent[s, 1], ent[s, 2], ent[s, ER], qlo, qhi):
                out[k] = eslot[s]
                k += 1
            s = enext[s]
        sp = _push_children(nodei, n, stack, sp)
    return k


@njit(cache=True, inline="always")
def _box_touches(nodef, n, qlo, qhi):
    return not (nodef[n, TLO] > qhi[0] or nodef[n, THI] < qlo[0]
                or nodef[n, TLO + 1] > qhi[1] or nodef[n, THI + 1] < qlo[1]
                or nodef[n, TLO + 2] > qhi[2] or nodef[n, THI + 2] < qlo[2])


@njit(cache=True)
def _sphere(root, nodei, nodef, enext, eslot, ent, q, qr, out, stack):
    k = 0
    if root < 0 or nodei[root, SUBCOUNT] == 0:
        return k
    reach = qr * (1.0 + 1e-9) + 1e-9 * (1.0 + abs(q[0]) + abs(q[1]) + abs(q[2]))
    sp = 1
    stack[0] = root
    while sp > 0:
        sp -= 1
        n = stack[sp]
        if box_point_dist(nodef[n, TLO:TLO + 3], nodef[n, THI:THI + 3], q[0], q[1], q[2]) > reach:
            continue
        s = nodei[n, HEAD]
        while s >= 0:
            if spheres_touch(ent[s, 0], ent[s, 1], ent[s, 2], ent[s, ER],
                             q[0], q[1], q[2], qr):
                out[k] = eslot[s]
                k += 1
            s = enext[s]
        sp = _push_children(nodei, n, stack, sp)
    return k


@njit(cache=True)
def _ray(root, nodei, nodef, enext, eslot, ent, o, d, out, ts, stack):
    k = 0
    if root < 0 or nodei[root, SUBCOUNT] == 0:
        return k
    idx = 1.0 / d[0] if d[0] != 0.0 else np.inf
    idy = 1.0 / d[1] if d[1] != 0.0 else np.inf
    idz = 1.0 / d[2] if d[2] != 0.0 else np.inf
    sp = 1
    stack[0] = root
    while sp > 0:
        sp -= 1
        n = stack[sp]
        if not ray_box_hits(o[0], o[1], o[2], idx, idy, idz,
                            nodef[n, TLO:TLO + 3], nodef[n, THI:THI + 3]):
            continue
        s = nodei[n, HEAD]
        while s >= 0:
            t = ray_sphere_entry(o[0], o[1], o[2], d[0], d[1], d[2],
                                 ent[s, 0], ent[s, 1], ent[s, 2], ent[s, ER])
            if t >= 0.0:
                out[k] = eslot[s]
                ts[k] = t
                k += 1
            s = enext[s]
        sp = _push_children(nodei, n, stack, sp)
    return k


# ---------------------------------------------------------------- validation (compiled)

_ERRORS = {
    1: "root is not alive or has a parent",
    2: "root side is not min_size times a power of two",
    3: "free list is broken (a free node is alive, or alive + free != capacity)",
    4: "child does not point back at its parent",
    5: "child cube is not the octant of its parent (corner, size or level wrong)",
    6: "child count does not match the child links",
    7: "a live node is not reachable from the root",
    8: "object list links are broken (prev/next disagree)",
    9: "object listed in a node that is not its node",
    10: "object count of a node does not match its list",
    11: "object sphere is not inside its node cube",
    12: "object is not in the smallest octant that contains it",
    13: "lifespan is not one of 8, 16, 32, 64",
    14: "countdown out of [0, lifespan] or running on a node that is not an empty leaf",
    15: "empty non-root leaf whose countdown is not running",
    16: "placed objects counted in nodes differ from placed slots",
    18: "subtree object count is wrong",
    19: "tight box does not contain an object or a child's box",
    20: "subtree view distance bounds are wrong",
    21: "object refers to a dead node",
    22: "node in the ageing list twice or counting without an entry",
    23: "entry and slot do not point at each other",
    24: "the tree's packed copy of an object differs from the store",
    25: "clean entry range is wrong (a dirty node under a clean one, or an entry outside it)",
}


@njit(cache=True)
def _check(root, nodei, nodef, free, nfree, aging, naging, min_size,
           enode, enext, eprev, eslot, ent, s2e, alive, centers, radii, vdist, moved):
    """Check every structural invariant; returns (error code, node or slot) or (0, -1)."""
    cap = nodei.shape[0]
    nalive = 0
    for n in range(cap):
        if nodei[n, ALIVE] != 0:
            nalive += 1
    for i in range(nfree):
        if nodei[free[i], ALIVE] != 0:
            return 3, free[i]
    if nalive + nfree != cap:
        return 3, -1
    if root < 0:
        if nalive != 0:
            return 7, -1
    else:
        if nodei[root, ALIVE] == 0 or nodei[root, PARENT] != -1:
            return 1, root
        ratio = nodef[root, SIZE] / min_size
        if ratio != 2.0 ** nodei[root, LEVEL] or math.frexp(ratio)[0] != 0.5:
            return 2, root
    # reachability and parent/child geometry
    seen = np.zeros(cap, dtype=np.bool_)
    stack = np.empty(cap + 1, dtype=np.int64)
    sp = 0
    if root >= 0:
        stack[0] = root
        sp = 1
        seen[root] = True
    reached = 0
    while sp > 0:
        sp -= 1
        n = stack[sp]
        reached += 1
        nch = 0
        h = nodef[n, SIZE] * 0.5
        for o in range(8):
            ch = nodei[n, CHILD0 + o]
            if ch < 0:
                continue
            nch += 1
            if nodei[ch, ALIVE] == 0 or nodei[ch, PARENT] != n or seen[ch]:
                return 4, ch
            if nodei[ch, LEVEL] != nodei[n, LEVEL] - 1 or nodef[ch, SIZE] != h:
                return 5, ch
            for a in range(3):
                want = nodef[n, LO + a] + (h if (o >> a) & 1 else 0.0)
                if nodef[ch, LO + a] != want:
                    return 5, ch
            seen[ch] = True
            stack[sp] = ch
            sp += 1
        if nch != nodei[n, NCHILD]:
            return 6, n
    if reached != nalive:
        return 7, -1
    # object lists
    listed = 0
    for n in range(cap):
        if nodei[n, ALIVE] == 0:
            continue
        cnt = 0
        prev = -1
        s = nodei[n, HEAD]
        while s >= 0:
            if eprev[s] != prev:
                return 8, s
            if enode[s] != n:
                return 9, s
            cnt += 1
            if cnt > enode.shape[0]:
                return 8, s
            prev = s
            s = enext[s]
        if cnt != nodei[n, COUNT]:
            return 10, n
        listed += cnt
    placed = 0
    for s in range(enode.shape[0]):
        n = enode[s]
        if n < 0:
            continue
        placed += 1
        if n >= cap or nodei[n, ALIVE] == 0:
            return 21, s
        slot = eslot[s]
        if slot < 0 or slot >= s2e.shape[0] or s2e[slot] != s or not alive[slot]:
            return 23, s
        if moved[slot]:
            continue  # will be copied and relocated at the next flush
        if (ent[s, 0] != centers[slot, 0] or ent[s, 1] != centers[slot, 1]
                or ent[s, 2] != centers[slot, 2] or ent[s, ER] != radii[slot]
                or ent[s, EV] != vdist[slot]):
            return 24, s
        cx = ent[s, 0]
        cy = ent[s, 1]
        cz = ent[s, 2]
        r = ent[s, ER]
        if not _contains(nodef, n, cx, cy, cz, r):
            return 11, s
        if nodei[n, LEVEL] > 0:
            o, lx, ly, lz, h = _octant(nodef, n, cx, cy, cz)
            if (cx - r >= lx and cx + r <= lx + h and cy - r >= ly and cy + r <= ly + h
                    and cz - r >= lz and cz + r <= lz + h):
                return 12, s
    if placed != listed:
        return 16, -1
    # lifespans and the ageing list
    inlist = np.zeros(cap, dtype=np.bool_)
    for i in range(naging):
        n = aging[i]
        if inlist[n]:
            return 22, n
        inlist[n] = True
    for n in range(cap):
        if nodei[n, ALIVE] == 0:
            continue
        life = nodei[n, LIFE]
        if life != 8 and life != 16 and life != 32 and life != 64:
            return 13, n
        ttl = nodei[n, TTL]
        empty_leaf = nodei[n, COUNT] == 0 and nodei[n, NCHILD] == 0
        if ttl < -1 or ttl > life or (ttl >= 0 and (not empty_leaf or n == root)):
            return 14, n
        if empty_leaf and n != root and ttl < 1:
            return 15, n
        if ttl >= 0 and not inlist[n]:
            return 22, n
        # entry ranges: dirty nodes have dirty ancestors; a clean node's range holds its list
        p = nodei[n, PARENT]
        if nodei[n, CLEAN] == 0 and p >= 0 and nodei[p, CLEAN] != 0:
            return 25, n
        if nodei[n, CLEAN] != 0:
            e0 = nodei[n, ESTART]
            if p >= 0 and nodei[p, CLEAN] != 0 and (
                    e0 < nodei[p, ESTART]
                    or e0 + nodei[n, SUBCOUNT] > nodei[p, ESTART] + nodei[p, SUBCOUNT]):
                return 25, n
            s = nodei[n, HEAD]
            while s >= 0:
                if s < e0 or s >= e0 + nodei[n, SUBCOUNT]:
                    return 25, n
                s = enext[s]
        # subtree bounds: conservative, nested, and covering every object
        sub = nodei[n, COUNT]
        for o in range(8):
            ch = nodei[n, CHILD0 + o]
            if ch >= 0:
                sub += nodei[ch, SUBCOUNT]
        if sub != nodei[n, SUBCOUNT]:
            return 18, n
        if sub == 0:
            continue
        for o in range(8):
            ch = nodei[n, CHILD0 + o]
            if ch < 0 or nodei[ch, SUBCOUNT] == 0:
                continue
            for a in range(3):
                if nodef[ch, TLO + a] < nodef[n, TLO + a] or nodef[ch, THI + a] > nodef[n, THI + a]:
                    return 19, n
            if nodef[ch, VMAX] > nodef[n, VMAX] or nodef[ch, VMIN] < nodef[n, VMIN]:
                return 20, n
        s = nodei[n, HEAD]
        while s >= 0:  # the packed copy is what the bounds were grown with
            for a in range(3):
                if (ent[s, a] - ent[s, ER] < nodef[n, TLO + a]
                        or ent[s, a] + ent[s, ER] > nodef[n, THI + a]):
                    return 19, n
            if ent[s, EV] > nodef[n, VMAX] or ent[s, EV] < nodef[n, VMIN]:
                return 20, n
            s = enext[s]
    return 0, -1


# ---------------------------------------------------------------- the index

class FixedOctree(SpatialIndex):
    """Nevala's octree: power-of-two root cube, smallest-octant placement, lazy batches."""

    name = "fixed-octree"

    def __init__(self, min_size: float = 1.0, leafy: bool | None = None,
                 split_threshold: int | None = None, capacity: int = 1024) -> None:
        if leafy not in (None, False) or split_threshold is not None:
            raise ValueError("fixed-octree has no split heuristic: leafy and split_threshold "
                             "do not apply (objects go to the smallest containing octant)")
        m = float(min_size)
        if not (math.isfinite(m) and m > 0.0 and math.frexp(m)[0] == 0.5):
            raise ValueError("min_size must be a positive power of two (e.g. 0.5, 1, 2), "
                             f"got {min_size!r}")
        super().__init__(capacity)
        self.min_size = m
        self._s2e = np.full(self.capacity, NO_NODE, dtype=np.int64)  # slot -> entry
        self._seen = np.zeros(self.capacity, dtype=np.bool_)  # per-slot scratch of _queued
        self._emark = np.zeros(0, dtype=np.bool_)  # per-entry scratch of _queued
        self._relinked = np.zeros(1, dtype=np.int64)  # entries displaced since the renumber
        self._spare: tuple[np.ndarray, ...] | None = None  # second entry arrays (renumber)
        self._init_entries(self.capacity)
        self._init_pool(1024)
        self._root = -1
        self._pending: list[np.ndarray] = []  # inserted slots waiting for the next flush
        self._moved: list[np.ndarray] = []  # placed slots whose sphere changed
        self._changed = False
        self.cycles = 0  # update cycles (flushes) so far
        self._fill_pending = False  # node_outcomes() still has to mark bulk-copied subtrees
        self._outcome_cycle = -1
        self.pruned = 0  # dead leaves pruned so far

    # ------------------------------------------------------------ pools

    def _init_entries(self, cap: int) -> None:
        # Entries are the tree's packed copies of placed objects. They are numbered apart from
        # the caller's slots so that a batch can take them in spatial (Morton) order: objects
        # of a node and of neighbouring nodes then sit close in memory, which is what makes
        # walking the per-node linked lists fast.
        self._ent = np.zeros((cap, NE), dtype=np.float64)
        self._enode = np.full(cap, NO_NODE, dtype=np.int64)
        self._enext = np.full(cap, -1, dtype=np.int64)
        self._eprev = np.full(cap, -1, dtype=np.int64)
        self._eslot = np.full(cap, -1, dtype=np.int64)
        self._displaced = np.zeros(cap, dtype=np.bool_)  # linked since the last renumber
        self._ent_free = np.arange(cap - 1, -1, -1, dtype=np.int64)  # top = lowest index
        self._ent_nfree = cap

    def _alloc_entries(self, n: int) -> np.ndarray:
        """Pop ``n`` entries, in ascending order when the pool is fresh."""
        if n > self._ent_nfree:
            old = self._ent.shape[0]
            new = max(2 * old, old - self._ent_nfree + n)

            def grown(a: np.ndarray, fill: float) -> np.ndarray:
                out = np.full((new,) + a.shape[1:], fill, dtype=a.dtype)
                out[:old] = a
                return out

            self._spare = None
            self._ent = grown(self._ent, 0.0)
            self._enode = grown(self._enode, NO_NODE)
            self._enext = grown(self._enext, -1)
            self._eprev = grown(self._eprev, -1)
            self._eslot = grown(self._eslot, -1)
            self._displaced = grown(self._displaced, False)
            free = np.empty(new, dtype=np.int64)
            extra = np.arange(new - 1, old - 1, -1, dtype=np.int64)
            free[: extra.shape[0]] = extra
            nf = self._ent_nfree
            free[extra.shape[0]: extra.shape[0] + nf] = self._ent_free[:nf]
            self._ent_free = free
            self._ent_nfree += extra.shape[0]
        out = self._ent_free[self._ent_nfree - n: self._ent_nfree][::-1].copy()
        self._ent_nfree -= n
        return out

    def _init_pool(self, cap: int) -> None:
        self._nodei = np.zeros((cap, NI), dtype=np.int32)
        self._nodef = np.zeros((cap, NF), dtype=np.float64)
        self._node_free = np.arange(cap - 1, -1, -1, dtype=np.int64)
        self._node_nfree = np.array([cap], dtype=np.int64)
        self._aging = np.zeros(cap, dtype=np.int64)
        self._naging = np.zeros(1, dtype=np.int64)
        self._outcome = np.zeros(cap, dtype=np.int8)

    def _ensure_nodes(self, k: int) -> None:
        """Make sure at least ``k`` nodes are free (the pool doubles when it must grow)."""
        if self._node_nfree[0] >= k:
            return
        old = self._nodei.shape[0]
        new = max(2 * old, old + k)

        def grown(a: np.ndarray) -> np.ndarray:
            out = np.zeros((new,) + a.shape[1:], dtype=a.dtype)
            out[:old] = a
            return out

        self._nodei = grown(self._nodei)
        self._nodef = grown(self._nodef)
        self._aging = grown(self._aging)
        self._outcome = grown(self._outcome)
        nf = int(self._node_nfree[0])
        free = np.empty(new, dtype=np.int64)
        extra = np.arange(new - 1, old - 1, -1, dtype=np.int64)
        # new nodes go below the existing free ones so low indices are reused first
        free[: extra.shape[0]] = extra
        free[extra.shape[0]: extra.shape[0] + nf] = self._node_free[:nf]
        self._node_free = free
        self._node_nfree[0] = nf + extra.shape[0]

    # ------------------------------------------------------------ hooks of the base class

    def _grow(self, new_capacity: int) -> None:
        s2e = np.full(new_capacity, NO_NODE, dtype=np.int64)
        s2e[: self._s2e.shape[0]] = self._s2e
        self._s2e = s2e

    def _on_insert(self, slots: np.ndarray) -> None:
        self._s2e[slots] = PENDING
        self._pending.append(slots.copy())
        self._changed = True

    def _on_update(self, slots, old_centers, old_radii, old_vdist) -> None:
        # Pending objects are copied with their latest values at the flush anyway.
        self._moved.append(slots)  # pending or removed ones are sorted out at the flush
        self._changed = True

    def _on_remove(self, slots: np.ndarray) -> None:
        ents = self._s2e[slots]
        ents = np.ascontiguousarray(ents[ents >= 0])
        _unlink_batch(ents, self._enode, self._enext, self._eprev, self._nodei, self._nodef,
                      self._aging, self._naging, self._root)
        self._eslot[ents] = -1
        self._displaced[ents] = False
        n = ents.shape[0]
        self._ent_free[self._ent_nfree: self._ent_nfree + n] = ents
        self._ent_nfree += n
        self._s2e[slots] = NO_NODE
        self._changed = True

    # ------------------------------------------------------------ the update cycle

    def flush(self) -> None:
        """Apply queued inserts and moves now; this is one update cycle (empty leaves age)."""
        new, moved, mslots = self._queued(with_slots=True)
        self._pending.clear()
        self._moved.clear()
        ents = np.zeros(0, dtype=np.int64)
        bounds = np.empty((2, 3))
        if moved.shape[0]:
            # small moves are settled here; the rest are placed after the new objects
            slow = np.empty(moved.shape[0], dtype=np.int64)
            ns = _refresh(moved, mslots, self._eslot, self._ent, self._enode, self._centers,
                          self._radii, self._vdist, self._nodei, self._nodef, self.min_size,
                          slow, bounds)
            ents = slow[:ns]
        if new.shape[0]:
            fresh = self._take_entries(new)
            nb = np.empty((2, 3))
            _copy_in(fresh, self._eslot, self._ent, self._centers, self._radii, self._vdist,
                     nb)
            if ents.shape[0]:
                nb[0] = np.minimum(nb[0], bounds[0])
                nb[1] = np.maximum(nb[1], bounds[1])
            bounds = nb
            ents = np.concatenate((fresh, ents))
        if ents.shape[0]:
            self._fit_root(bounds[0], bounds[1])
            start = 0
            while start < ents.shape[0]:
                need = int(self._nodei[self._root, LEVEL]) + 2
                self._ensure_nodes(max(need, min(ents.shape[0] - start, 1 << 16)))
                start = _place(ents, start, need, self._ent, self._enode, self._enext,
                               self._eprev, self._nodei, self._nodef, self._node_free,
                               self._node_nfree, self._aging, self._naging, self._root,
                               self._displaced, self._relinked)
        if self._root >= 0:
            self.pruned += _tick(self._nodei, self._node_free, self._node_nfree, self._aging,
                                 self._naging, self._root, self._outcome)
            self._root = int(_shrink_root(self._nodei, self._node_free, self._node_nfree,
                                          self._root))
        placed = self._ent.shape[0] - self._ent_nfree
        if placed and self._relinked[0] >= _RENUMBER_AT * placed:
            self._renumber()
        self.cycles += 1
        self._changed = False

    def _renumber(self) -> None:
        """Lay the entries out again in query order, each node's list contiguous (O(n))."""
        cap = self._ent.shape[0]
        sp = self._spare
        if sp is None or sp[0].shape[0] != cap:
            sp = (np.empty((cap, NE)), np.empty(cap, np.int64), np.empty(cap, np.int64),
                  np.empty(cap, np.int64), np.empty(cap, np.int64))
        k = int(_renumber(self._root, self._nodei, self._ent, self._enode, self._enext,
                          self._eslot, self._s2e, sp[0], sp[1], sp[2], sp[3], sp[4],
                          self._stack()))
        self._spare = (self._ent, self._enode, self._enext, self._eprev, self._eslot)
        self._ent, self._enode, self._enext, self._eprev, self._eslot = sp
        self._ent_free[: cap - k] = np.arange(cap - 1, k - 1, -1, dtype=np.int64)
        self._ent_nfree = cap - k
        self._relinked[0] = 0
        self._displaced.fill(False)

    def _queued(self, with_slots: bool = False) -> tuple[np.ndarray, ...]:
        """(distinct slots still pending, distinct entries of moved objects still placed,
        ascending) and with ``with_slots`` the moved entries' slots (empty: not gathered)."""
        empty = np.zeros(0, dtype=np.int64)
        if not self._pending and not self._moved:
            return (empty, empty, empty) if with_slots else (empty, empty)
        slots = np.concatenate(self._pending + self._moved)
        if self._seen.shape[0] != self.capacity:
            self._seen = np.zeros(self.capacity, dtype=np.bool_)
        if (with_slots and slots.shape[0] * 16 < self._ent.shape[0] < 2**31
                and self.capacity < 2**32):  # keys pack (entry, slot) in one int64
            return _gather_sparse(slots, self._s2e, self._seen)
        if self._emark.shape[0] != self._ent.shape[0]:
            self._emark = np.zeros(self._ent.shape[0], dtype=np.bool_)
        new, moved = _gather(slots, self._s2e, self._seen, self._emark)
        return (new, moved, empty) if with_slots else (new, moved)

    def _take_entries(self, new: np.ndarray) -> np.ndarray:
        """Entries for newly inserted slots, allocated in Morton order of their centres."""
        new = new[np.argsort(_morton(self._centers[new]), kind="stable")]
        fresh = self._alloc_entries(new.shape[0])
        self._s2e[new] = fresh
        self._eslot[fresh] = new
        self._enode[fresh] = NO_NODE
        return fresh

    def _fit_root(self, bmin: np.ndarray, bmax: np.ndarray) -> None:
        """Create the root around [bmin, bmax], or grow it until it contains that box."""
        m = self.min_size
        if self._root < 0:
            lo = np.floor(bmin / m) * m
            ext = float((bmax - lo).max())
            level = 0
            size = m
            while size < ext:
                size *= 2.0
                level += 1
            self._ensure_nodes(1)
            self._root = int(_alloc_node(self._nodei, self._nodef, self._node_free,
                                         self._node_nfree, -1, level, lo[0], lo[1], lo[2], size))
            return
        while True:
            lo = self._nodef[self._root, LO:LO + 3]
            size = self._nodef[self._root, SIZE]
            if (bmin >= lo).all() and (bmax <= lo + size).all():
                return
            self._ensure_nodes(1)
            self._root = int(_grow_root_once(self._nodei, self._nodef, self._node_free,
                                             self._node_nfree, self._aging, self._naging,
                                             self._root, bmin, bmax))

    def _sync(self) -> None:
        if self._changed:
            self.flush()

    # ------------------------------------------------------------ queries

    def _stack(self) -> np.ndarray:
        depth = int(self._nodei[self._root, LEVEL]) + 2 if self._root >= 0 else 2
        return np.empty(8 * depth + 8, dtype=np.int64)

    def _query_frustum(self, planes, eye, use_vd, occlusion) -> QueryResult:
        self._sync()
        vp, zd, zo, zw, zh = occlusion_arrays(occlusion)
        out = np.empty(self._count, dtype=np.int64)
        self._outcome.fill(0)
        stack = self._stack()
        self._fill_pending = True
        self._outcome_cycle = self.cycles
        k, ws, visited, occ_n, occ_o = _frustum(
            self._root, self._nodei, self._nodef, self._enext, self._eslot, self._ent,
            planes, eye, use_vd, vp, zd, zo, zw, zh, out, self._outcome,
            stack, np.empty_like(stack), self._stack())
        return QueryResult(visible=out[:k], working_set=int(ws), nodes_visited=int(visited),
                           occluded_nodes=int(occ_n), occluded_objects=int(occ_o))

    def _query_box(self, lo, hi) -> np.ndarray:
        self._sync()
        out = np.empty(self._count, dtype=np.int64)
        scratch = np.zeros(self._outcome.shape[0], dtype=np.int8)
        k = _box(self._root, self._nodei, self._nodef, self._enext, self._eslot, self._ent,
                 lo, hi, out, self._stack(), self._stack(), scratch)
        return out[:k]

    def _query_sphere(self, center, radius) -> np.ndarray:
        self._sync()
        out = np.empty(self._count, dtype=np.int64)
        k = _sphere(self._root, self._nodei, self._nodef, self._enext, self._eslot, self._ent,
                    center, radius, out, self._stack())
        return out[:k]

    def _query_ray(self, origin, direction) -> tuple[np.ndarray, np.ndarray]:
        self._sync()
        out = np.empty(self._count, dtype=np.int64)
        ts = np.empty(self._count, dtype=np.float64)
        k = _ray(self._root, self._nodei, self._nodef, self._enext, self._eslot, self._ent,
                 origin, direction, out, ts, self._stack())
        return out[:k], ts[:k]

    def object_cells(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(corner (n,3), side (n,)) of the node cube each object lives in (flushes first)."""
        ids = self._check_ids(ids)
        slots = self._idmap.lookup(ids)
        if (slots < 0).any():
            raise ValueError(f"object_cells: unknown ids: {ids[slots < 0][:8].tolist()}")
        self._sync()
        nodes = self._enode[self._s2e[slots]]
        return self._nodef[nodes, LO:LO + 3].copy(), self._nodef[nodes, SIZE].copy()

    # ------------------------------------------------------------ overlays, stats, checks

    def _live_nodes(self) -> np.ndarray:
        return np.flatnonzero(self._nodei[:, ALIVE] != 0)

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, depth) of every node cube (pool order; aligned with node_outcomes)."""
        live = self._live_nodes()
        lo = self._nodef[live, LO:LO + 3].copy()
        hi = lo + self._nodef[live, SIZE][:, None]
        depth = self._root_level() - self._nodei[live, LEVEL].astype(np.int64)
        return lo, hi, depth

    def node_outcomes(self) -> np.ndarray:
        """NODE_* outcome of each node of node_boxes() in the last frustum query."""
        if self._fill_pending and self._outcome_cycle == self.cycles:
            _fill_inside(self._root, self._nodei, self._outcome, self._stack())
        self._fill_pending = False
        return self._outcome[self._live_nodes()].copy()

    def _root_level(self) -> int:
        return int(self._nodei[self._root, LEVEL]) if self._root >= 0 else 0

    def stats(self) -> dict[str, Any]:
        """Nodes, depth, objects per depth, queued work, dying leaves, root cube."""
        live = self._live_nodes()
        placed = self._enode[self._enode >= 0]
        depth_of = self._root_level() - self._nodei[placed, LEVEL].astype(np.int64)
        node_depth = self._root_level() - self._nodei[live, LEVEL].astype(np.int64)
        ttl = self._nodei[live, TTL]
        out = super().stats()
        out.update({
            "nodes": int(live.shape[0]),
            "max_depth": int(node_depth.max()) if live.shape[0] else 0,
            "objects_per_level": np.bincount(depth_of).tolist() if placed.shape[0] else [],
            "pending": int(sum(a.shape[0] for a in self._queued())),
            "dead_branches": int((ttl >= 0).sum()),
            "root_lo": self._nodef[self._root, LO:LO + 3].tolist() if self._root >= 0 else None,
            "root_size": float(self._nodef[self._root, SIZE]) if self._root >= 0 else 0.0,
            "min_size": self.min_size,
            "cycles": self.cycles,
            "pruned": self.pruned,
            "node_capacity": int(self._nodei.shape[0]),
        })
        return out

    def describe(self) -> str:
        """Name and parameters for HUDs and logs."""
        size = self._nodef[self._root, SIZE] if self._root >= 0 else 0.0
        return (f"fixed-octree (min node {self.min_size:g}, root {size:g}, "
                f"dead leaves kept {LIFE_START}..{LIFE_MAX} cycles)")

    def _validate(self) -> None:
        alive = self._alive
        if (self._s2e[alive] == NO_NODE).any():
            raise AssertionError("a live object is neither placed nor pending")
        if (self._s2e[~alive] != NO_NODE).any():
            raise AssertionError("a dead slot is still placed or pending")
        used = self._enode >= 0
        if used.sum() + self._ent_nfree != self._ent.shape[0]:
            raise AssertionError("entries leaked: placed + free != entry capacity")
        if used[self._ent_free[: self._ent_nfree]].any():
            raise AssertionError("a placed entry is on the entry free list")
        moved = np.zeros(self.capacity, dtype=np.bool_)
        if self._moved:
            moved[np.concatenate(self._moved)] = True
        queued = np.zeros(self.capacity, dtype=np.bool_)
        if self._pending:
            queued[np.concatenate(self._pending)] = True
        if ((self._s2e == PENDING) & ~queued).any():
            raise AssertionError("an object is pending but not in the insert queue")
        if not self._changed and (self._s2e == PENDING).any():
            raise AssertionError("objects pending although nothing is queued")
        code, which = _check(self._root, self._nodei, self._nodef, self._node_free,
                             int(self._node_nfree[0]), self._aging, int(self._naging[0]),
                             self.min_size, self._enode, self._enext, self._eprev, self._eslot,
                             self._ent, self._s2e, self._alive, self._centers, self._radii,
                             self._vdist, moved)
        if code:
            raise AssertionError(f"fixed-octree: {_ERRORS[int(code)]} (at {int(which)})")


def _morton(points: np.ndarray) -> np.ndarray:
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
