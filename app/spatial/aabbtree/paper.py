"""The paper mode's extents bookkeeping: appendix A's ``BBTree`` as written (PAPER_LAZY).

Our mode keeps every node's box conservative at all times (boxes grow eagerly, shrink
lazily, ``dirty`` = may be too large). The listing differs in what a node *decides with*:

* ``m_min``/``m_max`` are grown (``GrowExtents``) only while ``m_extentsCorrect``; once an
  object leaves a box it was flush against (``ShrinkExtents``) the box is frozen until the
  next ``UpdateExtents``. ``UpdateNode``'s walk up (``Contains``) and the non-leafy rule in
  ``WhichChild`` read that stored box, current or stale. Here it is ``plo``/``phi``; ``lo``/
  ``hi`` stay conservative so that every query (and ``query_pairs``) can still prune on them
  and answers exactly. A clean node has ``plo == lo`` (validate checks it).
* a node created by ``GetChild`` starts with ``m_extentsCorrect = false`` and garbage
  extents: here dirty, with an empty ``plo`` box (``Contains`` fails, so movers walk up).
* ``GetExtents(split = true)`` is how a query reads a node's box, so every node a query
  reaches is first recomputed if invalid (``UpdateExtents``, recursing into invalid children
  and re-centring every split point on the way: DEFRAG) and then split if it is a leaf with
  ``>= threshold`` objects (the threshold comparison is its own bit, PAPER_THRESHOLD).
  The query code itself is not in the listing; that it calls ``GetExtents`` on every node it
  reaches, rejected or not, follows from the interface and section 2.2.1.
* ``UpdateNode`` grows the new extent before it shrinks the old one (ours: the other way
  round, which invalidates a node whenever its extreme object moves outward).
* ``RemoveChild`` does not invalidate the parent (ours marks it dirty).

``ShrinkExtents`` walks to the root; :func:`~.bounds.invalidate_up` stops at the first box
the old sphere is strictly inside. Both mark the same nodes (this mode's boxes are exact,
not widened from the records as our mode's are): every clean box is exact and
contains its children's, so an ancestor of a box the sphere is strictly inside cannot be
flush with it, and a stale box's node is already invalid.

Not reproduced, on purpose: the listing's ``UpdateExtents`` of an empty root divides by zero
(NaN split point) and keeps the old extents; here an emptied tree resets its root. A split of
a single object taken back would use a deleted node in the listing (``TestSuicide``); here
the node just keeps it. Nothing else is left out; the view-distance bound (which the paper's
tree does not have) is kept as in our mode.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.core import types
from numba.extending import overload

from app.spatial.aabbtree.blocks import (
    append_record,
    cut_record,
    fit_block,
    grow_block,
    write_record,
)
from app.spatial.aabbtree.bounds import (
    copy_box,
    covers,
    grow_node,
    invalidate_up,
    refit_node,
    slot_sphere,
    sphere_box,
)
from app.spatial.aabbtree.heuristics import PAPER_THRESHOLD
from app.spatial.aabbtree.pool import ROOT, LazyRules, attach_child, room_to_place
from app.spatial.aabbtree.split import (
    climb_to_cover,
    collect_garbage,
    find_place,
    is_empty_node,
    needs_split,
    split_node,
)


@njit(cache=True, _nrt=False)
def paper_grow_up(nd, n: int, cx: float, cy: float, cz: float, r: float, vd: float) -> None:
    """``GrowExtents``: every box up to the root covers the sphere; the paper's box only where
    it is current.

    Stops at the first node whose conservative box already covers it: its ancestors' do too,
    and a clean ancestor's paper box is its conservative box. Compiled without reference
    counting, so that taking the pool (a tuple of arrays) costs nothing per call.
    """
    lo, hi, plo, phi, dirty, maxvd, parent = (nd.lo, nd.hi, nd.plo, nd.phi, nd.dirty, nd.maxvd,
                                              nd.parent)
    lx, ly, lz, hx, hy, hz = sphere_box(cx, cy, cz, r)
    while n >= 0 and not covers(lo, hi, maxvd, np.int64(n), lx, ly, lz, hx, hy, hz, vd):
        grow_node(lo, hi, maxvd, n, lx, ly, lz, hx, hy, hz, vd)
        if not dirty[n]:
            copy_box(lo, hi, plo, phi, n)
        n = parent[n]


@njit(cache=True)
def paper_new_leaf(nd, n: int, c: int) -> int:
    """``GetChild``: a new child c of n, an empty leaf whose extents are not yet correct."""
    ch = attach_child(nd, np.int64(n), c)
    nd.dirty[ch] = True
    return ch


@njit(cache=True)
def paper_insert_objects(nd, ob, sp, slots, ids, keep: int) -> int:
    """``AddNode``: ``FindNode`` from the root (the non-leafy rule on the paper's boxes), add
    to the node's block (with its id from the store's ``ids``), ``GrowExtents``. Returns how
    many were inserted (as :func:`~.batches.insert_objects`: fewer when the heap ran out of
    room)."""
    # The arrays out of their tuples once: numba counts references at every use in the loop.
    centers, radii, vdist = sp
    child, is_split, axis, split, plo, phi = (nd.child, nd.is_split, nd.axis, nd.split, nd.plo,
                                              nd.phi)
    start, cap, count = nd.start, nd.cap, nd.count
    node, pos, slot, ident, rec, vd = ob.node, ob.pos, ob.slot, ob.ident, ob.rec, ob.vd
    for i in range(slots.shape[0]):
        s = slots[i]
        cx, cy, cz, r = slot_sphere(centers, radii, s)
        n, c = find_place(child, is_split, axis, split, plo, phi, keep, np.int64(ROOT), cx, cy,
                          cz, r)
        if (c >= 0 or count[n] == cap[n]) and not room_to_place(nd, ob, n, c >= 0):
            return i
        if c >= 0:
            n = paper_new_leaf(nd, n, c)
            grow_block(nd, ob, n)
        append_record(start, count, node, slot, ident, rec, vd, pos, n, s, sp, ids[s])
        paper_grow_up(nd, n, cx, cy, cz, r, vdist[s])
    return slots.shape[0]


@njit(cache=True)
def paper_update_objects(nd, ob, sp, slots, old, keep: int) -> tuple[int, int]:
    """``UpdateNode`` for slots whose previous spheres are ``old``; returns (how many were
    done, how many changed node), as :func:`~.batches.update_objects`.

    Walk up from the object's node while its stored (paper) box does not contain the new
    bounds (stopping at the root), ``FindNode`` down from there; another node: ``AddNode``
    there (grow) and ``RemoveNode`` here (shrink with the old sphere, garbage collection);
    the same node: grow, then shrink with the old sphere.
    """
    # The arrays out of their tuples once: numba counts references at every use in the loop.
    centers, radii, vdist = sp
    old_c, old_r, old_v = old
    child, is_split, axis, split, plo, phi = (nd.child, nd.is_split, nd.axis, nd.split, nd.plo,
                                              nd.phi)
    lo, hi, dirty, maxvd, parent = nd.lo, nd.hi, nd.dirty, nd.maxvd, nd.parent
    start, cap, count = nd.start, nd.cap, nd.count
    node, pos, slot, ident, rec, vdp = ob.node, ob.pos, ob.slot, ob.ident, ob.rec, ob.vd
    moved = 0
    for i in range(slots.shape[0]):
        s = slots[i]
        cx, cy, cz, r = slot_sphere(centers, radii, s)
        x = node[s]
        lx, ly, lz, hx, hy, hz = sphere_box(cx, cy, cz, r)
        a = climb_to_cover(plo, phi, parent, x, lx, ly, lz, hx, hy, hz)
        d, c = find_place(child, is_split, axis, split, plo, phi, keep, np.int64(a), cx, cy, cz, r)
        if (c >= 0 or (d != x and count[d] == cap[d])) and not room_to_place(nd, ob, d, c >= 0):
            return i, moved
        if c >= 0:
            d = paper_new_leaf(nd, d, c)
            grow_block(nd, ob, d)
        if d != x:
            p = pos[s]  # added first: the shrink of x's block cannot take d's room
            append_record(start, count, node, slot, ident, rec, vdp, pos, d, s, sp, ident[p])
            if cut_record(start, cap, count, slot, ident, rec, vdp, pos, x, p):
                fit_block(nd, ob, x)
            moved += 1
        else:
            write_record(slot, rec, vdp, pos, pos[s], s, sp)
        paper_grow_up(nd, d, cx, cy, cz, r, vdist[s])
        ox, oy, oz, orad = slot_sphere(old_c, old_r, i)
        invalidate_up(lo, hi, maxvd, parent, dirty, np.int64(x), ox, oy, oz, orad, old_v[i],
                      0.0)
        if (d != x) & is_empty_node(nd.count, nd.nchild, x):
            collect_garbage(nd, x, False)  # TestSuicide: no parent's extents invalidated
    return slots.shape[0], moved


@njit(cache=True)
def paper_update_extents(nd, ob, sp, n: int, weight: int) -> None:
    """``UpdateExtents`` of n: its invalid children first (recursively), then its box from its
    objects and children, and its split point re-centred (DEFRAG: centres weight 1, the
    children's split points weight ``weight``, the split threshold). Leaves n's whole invalid
    subtree clean.

    Without a stack: descend to an invalid child while there is one, recompute a node once
    all its children are valid, climb back to its parent.
    """
    child = nd.child
    k = child.shape[1]
    cur = n
    while True:
        down = -1
        if nd.nchild[cur] > 0:
            for j in range(k):
                ch = child[cur, j]
                if ch >= 0 and nd.dirty[ch]:
                    down = ch
                    break
        if down >= 0:
            cur = down
            continue
        refit_node(nd, ob, sp, np.int64(cur), weight)  # all children clean: cur is clean now
        if cur == n:
            return
        cur = nd.parent[cur]


@njit(cache=True)
def paper_get_extents(nd, ob, sp, n: int, rules) -> None:
    """``GetExtents(split = true)``, as a query reaches node n: recompute it if invalid, then
    split it if it is a leaf over the threshold (``>=`` with PAPER_THRESHOLD, else ``>``)."""
    if nd.dirty[n]:
        paper_update_extents(nd, ob, sp, n, rules.threshold)
    t = rules.threshold - 1 if rules.flags & PAPER_THRESHOLD else rules.threshold
    if (not nd.is_split[n]) and nd.count[n] > t:
        split_node(nd, ob, sp, n, rules)


def reach_node(nd, ob, sp, n: int, rules, limit: int) -> None:
    """What a traversal does first at every node it reaches: in the paper mode (PAPER_LAZY,
    :class:`~.pool.LazyRules`) the listing's ``GetExtents`` when the node is invalid or
    overfull; in our mode nothing. Chosen by the rules' type when a traversal is compiled,
    so that our mode's kernels do not compile the listing's bookkeeping."""
    raise NotImplementedError("only callable from compiled code")


@overload(reach_node)
def _reach_node(nd, ob, sp, n, rules, limit):
    if isinstance(rules, types.BaseNamedTuple) and rules.instance_class is LazyRules:
        def get_extents(nd, ob, sp, n, rules, limit):
            # Only then: a call with the pool's tuples costs more than the test.
            if nd.dirty[n] or needs_split(nd.is_split, nd.count, n, limit):
                paper_get_extents(nd, ob, sp, n, rules)
        return get_extents

    def nothing(nd, ob, sp, n, rules, limit):
        return None
    return nothing


def check_paper_boxes(nd) -> tuple[int, int]:
    """(24, node) for a clean node whose paper box differs from its box, else (0, -1)."""
    live = nd.depth >= 0
    clean = live & ~nd.dirty
    bad = clean & ((nd.plo != nd.lo).any(axis=1) | (nd.phi != nd.hi).any(axis=1))
    idx = np.flatnonzero(bad)
    return (24, int(idx[0])) if idx.shape[0] else (0, -1)
