"""Collision broad-phase of the view distance tree: ``_query_pairs``.

Matthews' tree files each object by its *view* sphere (a node of size S holds view distances in
[S/4, S/2], centres in its cube), so a node's level says nothing about the object's own radius:
what bounds a subtree's own spheres is its grow-only sphere box (``slo``/``shi``). Every pair is
therefore the same node-against-node descent as the AABB tree's: the octree's nodes, each with
its own object list (a radius class of view distances) and up to eight children, are taken in
one depth-first pass into a :class:`~app.spatial.aabbtree.pairs.TreePairSnapshot` with exact
boxes (the stored bounds are loose between rebuilds: every move only grows them) and handed to
:func:`~app.spatial.aabbtree.pairs.snapshot_pairs`. The objects come from the packed copy
(sequential rows) and, for those linked since the last rebuild, from the store. The objects of
unbounded view distance (the infinite list, which holds *every* object when none has a view
distance) form the own list of a virtual root above the real one: the descent sweeps that list
for its own pairs and sends each of its objects down the tree on its own.

With few ``ids`` (Matthews' "aggro" / collision-candidate query, one per object): a descent from
the root per given object on the live tree through the stored (loose, valid) sphere boxes, plus
the infinite list. A pair of two given objects is kept from the larger slot's side only.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.geom.predicates import box_point_dist6
from app.spatial.aabbtree.pairs import (
    REFINE_ABOVE,
    TreePairSnapshot,
    new_snapshot_arrays,
    refine,
    refine_room,
    rows_box,
    set_mag,
    subtree_box,
    sum_children_sel,
)
from app.spatial.pairs import new_pairs, push_pair

_REL_PAD = 1e-9  # node pruning slack, relative to the magnitudes involved


@njit(cache=True)
def build_snapshot(nd, ob, pk, tree, sp, sel) -> TreePairSnapshot:
    """The tree in depth-first order with exact boxes, for the pair descent.

    Node 0 is a virtual root holding the infinite list when that list is not empty. ``sel``
    (the ids filter, or empty) is counted per node.
    """
    t = tree[0]
    total = t.in_nodes + t.inf_count
    cap = t.nlive + 1
    (size, ostart, ocnt, oend, box, obox, mag, nsel_own, nsel_sub, pts,
     slot) = new_snapshot_arrays(cap + refine_room(total), total)
    filtered = sel.shape[0] > 0
    centers = sp.centers
    radii = sp.radii
    m = 0
    op = 0
    virtual = t.inf_count > 0
    if virtual:
        m = 1
        ostart[0] = 0
        s = t.inf_head
        ns = 0
        while s != -1:
            for a in range(3):
                pts[op, a] = centers[s, a]
            pts[op, 3] = radii[s]
            slot[op] = s
            op += 1
            if filtered and sel[s]:
                ns += 1
            s = ob.next[s]
        ocnt[0] = op
        nsel_own[0] = ns
        rows_box(pts, 0, op, obox, 0)
        if op > REFINE_ABOVE:
            ocnt[0] = 0
            nsel_own[0] = 0
            m = refine(pts, slot, 0, op, m, size, ostart, ocnt, oend, box, obox, mag,
                       nsel_own, nsel_sub, sel)
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
            s = nd.head[node]
            while s != -1 and ob.row[s] < 0:  # linked since the last rebuild: not packed
                for a in range(3):
                    pts[op, a] = centers[s, a]
                pts[op, 3] = radii[s]
                slot[op] = s
                op += 1
                if filtered and sel[s]:
                    ns += 1
                s = ob.next[s]
            start = nd.pstart[node]
            for p in range(start, start + nd.plen[node]):
                for a in range(3):
                    pts[op, a] = pk.center[p, a]
                pts[op, 3] = pk.radius[p]
                s = pk.slot[p]
                slot[op] = s
                op += 1
                if filtered and sel[s]:
                    ns += 1
            ocnt[i] = op - ostart[i]
            nsel_own[i] = ns
            rows_box(pts, ostart[i], op, obox, i)
            if ocnt[i] > REFINE_ABOVE:
                ocnt[i] = 0
                nsel_own[i] = 0
                m = refine(pts, slot, ostart[i], op, m, size, ostart, ocnt, oend, box, obox,
                           mag, nsel_own, nsel_sub, sel)
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
    return TreePairSnapshot(size[:m], ostart[:m], ocnt[:m], oend[:m], box[:m], obox[:m],
                            mag[:m], nsel_own[:m], nsel_sub[:m], pts[:op], slot[:op])


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
    nxt = ob.next
    row = ob.row
    slo = nd.slo
    shi = nd.shi
    cap = 8 * (2 + (0 if t.root == -1 else nd.level[t.root] - t.emin))
    stack = np.empty(cap, np.int64)
    hits = np.empty(max(256, t.inf_count + 1), np.int64)
    for qi in range(qslots.shape[0]):
        q = qslots[qi]
        qx = centers[q, 0]
        qy = centers[q, 1]
        qz = centers[q, 2]
        qr = radii[q]
        base = qr + margin
        qmag = 1.0 + max(abs(qx), abs(qy), abs(qz)) + base
        c = 0
        s = t.inf_head
        while s != -1:
            dx = qx - centers[s, 0]
            dy = qy - centers[s, 1]
            dz = qz - centers[s, 2]
            hits[c] = s
            c += ((s != q) & ~(sel[s] & (s < q))
                  & (math.sqrt(dx * dx + dy * dy + dz * dz) <= qr + radii[s] + margin))
            s = nxt[s]
        for u in range(c):
            out = push_pair(out, k, q, hits[u])
            k += 1
        top = 0
        if t.root != -1:
            stack[0] = t.root
            top = 1
        while top > 0:
            top -= 1
            node = stack[top]
            nmag = max(abs(slo[node, 0]), abs(slo[node, 1]), abs(slo[node, 2]),
                       abs(shi[node, 0]), abs(shi[node, 1]), abs(shi[node, 2]))
            if box_point_dist6(slo[node, 0], slo[node, 1], slo[node, 2], shi[node, 0],
                               shi[node, 1], shi[node, 2], qx, qy, qz) > (
                    base + _REL_PAD * (qmag + nmag)):
                continue
            if nd.count[node] > hits.shape[0]:
                hits = np.empty(2 * nd.count[node], np.int64)
            c = 0
            s = nd.head[node]
            while s != -1 and row[s] < 0:  # linked since the last rebuild: not packed
                dx = qx - centers[s, 0]
                dy = qy - centers[s, 1]
                dz = qz - centers[s, 2]
                hits[c] = s
                c += ((s != q) & ~(sel[s] & (s < q))
                      & (math.sqrt(dx * dx + dy * dy + dz * dz) <= qr + radii[s] + margin))
                s = nxt[s]
            start = nd.pstart[node]
            for p in range(start, start + nd.plen[node]):
                s = pk.slot[p]
                dx = qx - pk.center[p, 0]
                dy = qy - pk.center[p, 1]
                dz = qz - pk.center[p, 2]
                hits[c] = s
                c += ((s != q) & ~(sel[s] & (s < q))
                      & (math.sqrt(dx * dx + dy * dy + dz * dz) <= qr + pk.radius[p] + margin))
            for u in range(c):
                out = push_pair(out, k, q, hits[u])
                k += 1
            for j in range(8):
                ch = nd.child[node, j]
                if ch != -1:
                    stack[top] = ch
                    top += 1
    return out[:k]
