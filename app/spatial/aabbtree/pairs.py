"""Collision broad-phase of the dynamic AABB tree (Shagam 2.2.4): ``_query_pairs``.

Every pair (no ``ids``) is the classic self-collision descent of a bounding-volume tree
(:mod:`app.spatial.tree_pairs`), run on a *snapshot* of the tree that :func:`build_snapshot`
takes in one pass:

* the pass walks the tree depth first, splits the overfull leaves it meets (lazy splitting,
  2.1.1, as every query does) and refits every dirty node once its children are done (lazy
  AABBs, 2.1.5), so all boxes are clean (tight, within the records' slack) afterwards;
* it copies every node's objects, in depth-first order, into the snapshot's packed array and
  keeps the box of each node's own objects besides its subtree box; long own lists are
  refined in the snapshot only (:func:`app.spatial.tree_pairs.refine`).

With ``ids`` (Nevala: only moved objects can start a contact) and few of them,
:func:`pairs_of_slots` runs one descent from the root per given object with its sphere grown
by the margin, refitting and splitting like a sphere query, on the live tree: no whole-tree
pass. A pair of two given objects is found from both sides and kept from the side of the
larger slot only. With many ids the class takes the snapshot path with the ids as a filter
(subtrees without a given object are not paired with each other).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.aabbtree.bounds import add_sphere, empty_box, refit_block, refit_node, slot_sphere
from app.spatial.aabbtree.paper import paper_get_extents
from app.spatial.aabbtree.pool import ROOT
from app.spatial.aabbtree.split import needs_split, reach_rules, split_node
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
    set_mag,
    snapshot_head,
    sum_children_sel,
)

# ---------------------------------------------------------------------- the AABB tree's side

@njit(cache=True)
def build_snapshot(nd, ob, sp, rules, sel, total: int, mem: SnapshotMemory) -> TreePairSnapshot:
    """Split overfull leaves, refit dirty nodes and pack the tree (see the module docstring).

    One depth-first pass: a node is split (when overfull) and its objects packed on the way
    down, refitted (when dirty) on the way up, after its children, so that every box is
    exact. ``sel`` (the ids filter, or empty) is counted per node. A split skipped for lack of
    free nodes leaves an overfull leaf (the answer is still exact; the caller grows the pool
    and runs again for the tree's sake). ``mem``: the index's arrays to build in
    (:meth:`~app.spatial.tree_pairs.snapshot.SnapshotArena.memory`).
    """
    cap = nd.parent.shape[0]
    sn = new_snapshot(cap + refine_room(total), total, mem)
    size, ostart, ocnt, oend = sn.size, sn.ostart, sn.ocnt, sn.oend
    box, obox, mag, nsel_own, nsel_sub, pts, slot = (sn.box, sn.obox, sn.mag, sn.nsel_own,
                                                     sn.nsel_sub, sn.pts, sn.slot)
    cnode = np.empty(cap + refine_room(total), np.int64)
    filtered = sel.shape[0] > 0
    centers = sp.centers
    radii = sp.radii
    slot_at = ob.slot
    lazy, limit = reach_rules(rules)
    kk = nd.child.shape[1]
    stack = np.empty(2 * cap + 2, np.int64)  # each node enters twice: down (even), up (odd)
    stack[0] = ROOT << 1
    top = 1
    m = 0
    op = 0
    while top > 0:
        top -= 1
        e = stack[top]
        if (e & 1) == 0:
            n = e >> 1
            if lazy:
                if nd.dirty[n] or needs_split(nd.is_split, nd.count, n, limit):
                    paper_get_extents(nd, ob, sp, n, rules)  # as the paper mode's queries
            elif needs_split(nd.is_split, nd.count, n, limit):
                refit_block(nd, ob, sp, np.int64(n), rules.threshold)  # the split reads the box
                split_node(nd, ob, sp, n, rules)
            i = m
            m += 1
            cnode[i] = n
            ostart[i] = op
            lx, ly, lz, hx, hy, hz = empty_box()
            ns = 0
            b = nd.start[n]
            for p in range(b, b + nd.count[n]):
                s = slot_at[p]
                x, y, z, r = slot_sphere(centers, radii, s)
                op = pack_row(pts, slot, op, s, x, y, z, r)
                lx, ly, lz, hx, hy, hz = add_sphere(lx, ly, lz, hx, hy, hz, x, y, z, r)
                if filtered and sel[s]:
                    ns += 1
            obox[i, 0] = lx
            obox[i, 1] = ly
            obox[i, 2] = lz
            obox[i, 3] = hx
            obox[i, 4] = hy
            obox[i, 5] = hz
            ocnt[i] = op - ostart[i]
            nsel_own[i] = ns
            if ocnt[i] > REFINE_ABOVE:
                m = refine_own_list(sn, np.int64(i), m, sel, mem)
            stack[top] = (i << 1) | 1
            top += 1
            if nd.nchild[n] > 0:
                for j in range(kk):
                    ch = nd.child[n, j]
                    if ch >= 0:
                        stack[top] = ch << 1
                        top += 1
        else:
            i = e >> 1
            n = cnode[i]
            size[i] = m - i
            oend[i] = op
            if nd.dirty[n]:
                # (children are clean: this one is clean now)
                if lazy:
                    refit_node(nd, ob, sp, np.int64(n), rules.threshold)
                else:
                    refit_block(nd, ob, sp, np.int64(n), rules.threshold)
            for a in range(3):
                box[i, a] = nd.lo[n, a]
                box[i, 3 + a] = nd.hi[n, a]
            set_mag(box, mag, i)
            if filtered:
                nsel_sub[i] = nsel_own[i] + sum_children_sel(size, nsel_sub, i)
    return snapshot_head(sn, m, op)


@njit(cache=True)
def pairs_of_slots(nd, ob, sp, rules, qslots, sel, margin: float) -> np.ndarray:
    """Touching pairs with a member among ``qslots`` (distinct; ``sel`` marks them).

    One descent from the root per given object, pruning nodes farther than its radius plus
    the margin (plus a rounding pad), refitting dirty nodes and splitting overfull leaves on
    the way like a sphere query. A pair of two given objects is kept from the larger slot's
    descent only.
    """
    out = new_pairs(4 * qslots.shape[0])
    k = 0
    centers = sp.centers
    radii = sp.radii
    slot_at = ob.slot
    lazy, limit = reach_rules(rules)
    lo = nd.lo
    hi = nd.hi
    stack = np.empty(nd.parent.shape[0] + 1, np.int64)
    hits = np.empty(256, np.int64)
    for t in range(qslots.shape[0]):
        q = qslots[t]
        qx, qy, qz, qr, base, qmag = given_sphere(centers, radii, q, margin)
        stack[0] = ROOT
        top = 1
        while top > 0:
            top -= 1
            n = stack[top]
            if lazy and (nd.dirty[n] or needs_split(nd.is_split, nd.count, n, limit)):
                paper_get_extents(nd, ob, sp, n, rules)  # as the paper mode's queries
            if out_of_reach(lo, hi, n, qx, qy, qz, base, qmag):
                continue
            if nd.dirty[n] and not lazy:
                refit_block(nd, ob, sp, np.int64(n), rules.threshold)
                if out_of_reach(lo, hi, n, qx, qy, qz, base, qmag):
                    continue
            if needs_split(nd.is_split, nd.count, n, limit):
                split_node(nd, ob, sp, n, rules)
            if nd.count[n] > hits.shape[0]:
                hits = np.empty(2 * nd.count[n], np.int64)
            c = 0
            b = nd.start[n]
            for p in range(b, b + nd.count[n]):
                s = slot_at[p]
                c = hit_if_partner(hits, c, s, q, sel, qx, qy, qz, qr + radii[s] + margin,
                                   centers[s, 0], centers[s, 1], centers[s, 2])
            out, k = push_hits(out, k, q, hits, c)
            if nd.nchild[n] > 0:
                for j in range(nd.child.shape[1]):
                    ch = nd.child[n, j]
                    if ch >= 0:
                        stack[top] = ch
                        top += 1
    return out[:k]
