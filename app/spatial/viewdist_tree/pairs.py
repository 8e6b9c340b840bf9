"""Collision broad-phase of the view distance tree: ``_query_pairs``.

Matthews' tree files each object by its *view* sphere (a node of size S holds view distances in
[S/4, S/2], centres in its cube), so a node's level says nothing about the object's own radius:
what bounds a subtree's own spheres is its grow-only sphere box (``slo``/``shi``). Every pair is
therefore the same node-against-node descent as the AABB tree's: the octree's nodes, each with
its own object list (a radius class of view distances) and up to eight children, are taken in
one depth-first pass into a :class:`~app.spatial.tree_pairs.snapshot.TreePairSnapshot` with exact
boxes (the stored bounds may be loose: a move grows them, a refit shrinks them later) and
handed to :func:`~app.spatial.tree_pairs.parallel.snapshot_pairs`. The objects come from the packed
copy (each node's block, sequential rows). The objects of
unbounded view distance (the infinite list, which holds *every* object when none has a view
distance) form the own list of a virtual root above the real one: the descent sweeps that list
for its own pairs and sends each of its objects down the tree on its own.

With few ``ids`` (Matthews' "aggro" / collision-candidate query, one per object): a descent from
the root per given object on the live tree through the stored (loose, valid) sphere boxes, plus
the infinite list. A pair of two given objects is kept from the larger slot's side only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.pairs import new_pairs
from app.spatial.tree_pairs.refine import refine_own_list
from app.spatial.tree_pairs.snapshot import (
    REFINE_ABOVE,
    SnapshotMemory,
    TreePairSnapshot,
    given_sphere,
    hit_if_partner,
    new_snapshot,
    out_of_reach,
    pack_row,
    push_hits,
    refine_room,
    rows_box,
    set_mag,
    snapshot_head,
    subtree_box,
    sum_children_sel,
)
from app.spatial.viewdist_tree.queries import push_children, start_walk

# A node's objects are the rows of its block in ``pk``; the unbounded list has no block and is
# read from the store through its links.


@njit(cache=True)
def _pack_linked(nxt, centers, radii, s: int, pts, slot, op: int, sel):
    """Pack the unbounded list from slot s into rows op...: (the next row, how many of them
    the ids filter ``sel`` holds; 0 without a filter)."""
    filtered = sel.shape[0] > 0
    ns = 0
    while s != -1:
        op = pack_row(pts, slot, op, s, centers[s, 0], centers[s, 1], centers[s, 2], radii[s])
        if filtered and sel[s]:
            ns += 1
        s = nxt[s]
    return op, ns


@njit(cache=True, inline="always")
def _linked_hits(nxt, spheres, s: int, q: int, sel, query, margin: float, hits,
                 c: int) -> int:
    """:func:`~app.spatial.tree_pairs.snapshot.hit_if_partner` of object q (``query``: its
    centre and radius, scalars by value) over the unbounded list from slot s; ``spheres``
    (centers, radii) is a tuple the caller builds once outside its loops. Returns the new hit
    count."""
    centers, radii = spheres
    qx, qy, qz, qr = query
    while s != -1:
        c = hit_if_partner(hits, c, s, q, sel, qx, qy, qz, qr + radii[s] + margin,
                           centers[s, 0], centers[s, 1], centers[s, 2])
        s = nxt[s]
    return c


@njit(cache=True)
def build_snapshot(nd, ob, pk, tree, sp, sel, mem: SnapshotMemory) -> TreePairSnapshot:
    """The tree in depth-first order with exact boxes, for the pair descent.

    Node 0 is a virtual root holding the infinite list when that list is not empty. ``sel``
    (the ids filter, or empty) is counted per node; ``mem``: the index's arrays to build in
    (:meth:`~app.spatial.tree_pairs.snapshot.SnapshotArena.memory`).
    """
    t = tree[0]
    total = t.in_nodes + t.inf_count
    cap = t.nlive + 1
    sn = new_snapshot(cap + refine_room(total), total, mem)
    size, ostart, ocnt, oend = sn.size, sn.ostart, sn.ocnt, sn.oend
    box, obox, mag, nsel_own, nsel_sub, pts, slot = (sn.box, sn.obox, sn.mag, sn.nsel_own,
                                                     sn.nsel_sub, sn.pts, sn.slot)
    filtered = sel.shape[0] > 0
    centers = sp.centers
    radii = sp.radii
    m = 0
    op = 0
    virtual = t.inf_count > 0
    if virtual:
        m = 1
        ostart[0] = 0
        op, ns = _pack_linked(ob.next, centers, radii, t.inf_head, pts, slot, op, sel)
        ocnt[0] = op
        nsel_own[0] = ns
        rows_box(pts, 0, op, obox, 0)
        if op > REFINE_ABOVE:
            m = refine_own_list(sn, 0, m, sel, mem)
    stack = np.empty(2 * cap + 2, np.int64)  # each node enters twice: down (even), up (odd)
    top = 0
    if t.root != -1:
        stack[0] = t.root << 1
        top = 1
    while top > 0:
        top -= 1
        e = stack[top]
        if (e & 1) == 0:
            node = e >> 1
            i = m
            m += 1
            ostart[i] = op
            ns = 0
            start = nd.pstart[node]
            for p in range(start, start + nd.plen[node]):
                s = pk.slot[p]
                op = pack_row(pts, slot, op, s, pk.center[p, 0], pk.center[p, 1],
                              pk.center[p, 2], pk.radius[p])
                if filtered and sel[s]:
                    ns += 1
            ocnt[i] = op - ostart[i]
            nsel_own[i] = ns
            rows_box(pts, ostart[i], op, obox, i)
            if ocnt[i] > REFINE_ABOVE:
                m = refine_own_list(sn, i, m, sel, mem)
            stack[top] = (i << 1) | 1
            top += 1
            for j in range(8):
                c = nd.child[node, j]
                if c != -1:
                    stack[top] = c << 1
                    top += 1
        else:
            i = e >> 1
            size[i] = m - i
            oend[i] = op
            subtree_box(size, box, obox, i)
            set_mag(box, mag, i)
            if filtered:
                nsel_sub[i] = nsel_own[i] + sum_children_sel(size, nsel_sub, i)
    if virtual:
        size[0] = m
        oend[0] = op
        subtree_box(size, box, obox, 0)
        set_mag(box, mag, 0)
        if filtered:
            nsel_sub[0] = nsel_own[0] + sum_children_sel(size, nsel_sub, 0)
    return snapshot_head(sn, m, op)


@njit(cache=True)
def pairs_of_slots(nd, ob, pk, tree, sp, qslots, sel, margin: float) -> np.ndarray:
    """Touching pairs with a member among ``qslots`` (distinct; ``sel`` marks them).

    Per given object: the infinite list, then a descent from the root pruning nodes whose
    stored sphere box is farther than its radius plus the margin (plus a rounding pad). The
    hits of a list are compacted branch-free before they are appended.
    """
    t = tree[0]
    out = new_pairs(4 * qslots.shape[0])
    k = 0
    centers = sp.centers
    radii = sp.radii
    slo = nd.slo
    shi = nd.shi
    cap = 8 * (2 + (0 if t.root == -1 else nd.level[t.root] - t.emin))
    stack = np.empty(cap, np.int64)
    hits = np.empty(max(256, t.inf_count + 1), np.int64)
    spheres = (centers, radii)
    for qi in range(qslots.shape[0]):
        q = qslots[qi]
        qx, qy, qz, qr, base, qmag = given_sphere(centers, radii, q, margin)
        c = _linked_hits(ob.next, spheres, t.inf_head, q, sel, (qx, qy, qz, qr), margin, hits,
                         0)
        out, k = push_hits(out, k, q, hits, c)
        top = start_walk(stack, t.root)
        while top > 0:
            top -= 1
            node = stack[top]
            if out_of_reach(slo, shi, node, qx, qy, qz, base, qmag):
                continue
            if nd.count[node] > hits.shape[0]:
                hits = np.empty(2 * nd.count[node], np.int64)
            c = 0
            start = nd.pstart[node]
            for p in range(start, start + nd.plen[node]):
                c = hit_if_partner(hits, c, pk.slot[p], q, sel, qx, qy, qz,
                                   qr + pk.radius[p] + margin, pk.center[p, 0],
                                   pk.center[p, 1], pk.center[p, 2])
            out, k = push_hits(out, k, q, hits, c)
            top = push_children(nd.child, node, stack, top)
    return out[:k]
