"""A frame's batches on the dynamic AABB tree: insert (2.1.2), remove (2.1.3) and move
(2.1.4) objects, each batch one compiled pass over its slots.

A move that stays in its node's box writes its block record and nothing else; only escapes
climb to the node that covers them and descend again (:func:`move_escapes`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.aabbtree.blocks import (
    append_record,
    cut_record,
    fit_block,
    grow_block,
    prefetch_position,
    rewrite_sphere,
)
from app.spatial.aabbtree.bounds import (
    BOX_SLACK,
    box_contains,
    grow_up,
    invalidate_up,
    record_bounds,
    record_radius_up,
    slot_sphere,
    sphere_box,
)
from app.spatial.aabbtree.heuristics import KEEP_NONE, PAPER_LAZY, box_volume, child_index
from app.spatial.aabbtree.pool import ROOT, room_to_place
from app.spatial.aabbtree.split import (
    climb_to_cover,
    collect_garbage,
    find_place,
    is_empty_node,
    new_leaf,
)
from app.spatial.object_store import moved_centre
from app.spatial.prefetch import PREFETCH_AHEAD, prefetch


@njit(cache=True)
def find_places(child, is_split, axis, split, lo, hi, keep: int, sp, slots):
    """:func:`.split.find_place` from the root for every slot of a batch (:func:`descend`). Returns
    (node, c) arrays as find_place's pair."""
    centers, radii, _ = sp
    m = slots.shape[0]
    # The batch's spheres in order first: each level's pass reads them again.
    sph = np.empty((m, 4))
    for i in range(m):
        if i + PREFETCH_AHEAD < m:  # (a batch's new rows lie anywhere in the store)
            prefetch(centers, slots[i + PREFETCH_AHEAD])
            prefetch(radii, slots[i + PREFETCH_AHEAD])
        s = slots[i]
        sph[i, 0] = centers[s, 0]
        sph[i, 1] = centers[s, 1]
        sph[i, 2] = centers[s, 2]
        sph[i, 3] = radii[s]
    at = np.full(m, ROOT, np.int64)
    return at, descend(child, is_split, axis, split, lo, hi, keep, sph, at)


@njit(cache=True)
def descend(child, is_split, axis, split, lo, hi, keep: int, sph, at):
    """:func:`.split.find_place` for the spheres ``sph`` (rows cx, cy, cz, r), each from its node in
    ``at``, the descents interleaved: a pass over the batch takes every unfinished object one
    level down. Leaves in ``at`` where each stops and returns its c (find_place's pair).

    One descent is a chain of dependent loads (a node's split, then its child) and an
    unpredictable branch a level: an insert's walk took 115-150 ns at 10^6 (kd/leafy's
    leaves 11-16 levels deep), nodes that the cache holds. Level by level, the objects' loads
    are independent and overlap. The boxes read by the non-leafy rules are the batch's
    starting ones (an insert or a move only grows boxes; any placement the rule allows is
    valid).
    """
    m = sph.shape[0]
    c_of = np.full(m, -1, np.int64)
    todo = np.arange(m)
    left = m
    k = child.shape[1]
    kd = k == 2 and keep == KEEP_NONE
    while left > 0:
        kept = 0
        for j in range(left):
            i = todo[j]
            n = at[i]
            if not is_split[n]:
                continue
            a = axis[n]
            if kd:
                # The side by the node's axis as an index (child_index picks the coordinate
                # with branches, unpredictable as the axes vary from level to level): 80-105
                # -> 74-79 ns an object's walk at 10^6, kd/leafy.
                c = np.int64(sph[i, a] >= split[n, a])
            else:
                box = box_volume(lo, hi, n) if keep != KEEP_NONE else 0.0
                c = child_index(k, keep, a, split[n, 0], split[n, 1], split[n, 2], box,
                                sph[i, 0], sph[i, 1], sph[i, 2], sph[i, 3])
            if c < 0:
                continue
            ch = child[n, c]
            if ch < 0:
                c_of[i] = c
                continue
            at[i] = ch
            todo[kept] = i
            kept += 1
        left = kept
    return c_of


@njit(cache=True)
def insert_objects(nd, ob, sp, slots, ids, keep: int) -> int:
    """Insert new slots (the store's ids by slot: ``ids``): descend with the heuristic, add
    to the node's block, grow boxes up (2.1.2). Returns how many were inserted: fewer than
    all when the heap ran out of room (meta[META_NEED] says how much; the caller repacks and
    calls again with the rest).

    The places are found first for the whole batch (:func:`find_places`); an object whose
    place was a new child that an earlier object of the batch has since made goes into that
    leaf, as its own descent would have. Knowing each place ahead, the loop asks for the
    block end it appends to (four lines a record) a few objects early.
    """
    # The arrays out of their tuples once: numba counts references at every use in the loop.
    centers, radii, vdist = sp
    child, is_split, axis, split, lo, hi = nd.child, nd.is_split, nd.axis, nd.split, nd.lo, nd.hi
    maxvd, parent = nd.maxvd, nd.parent
    start, cap, count = nd.start, nd.cap, nd.count
    node, pos, slot, ident, rec, vd = ob.node, ob.pos, ob.slot, ob.ident, ob.rec, ob.vd
    at, c_of = find_places(child, is_split, axis, split, lo, hi, keep, sp, slots)
    m = slots.shape[0]
    for i in range(m):
        if i + PREFETCH_AHEAD < m:  # a later object's store rows, place and block end
            t = slots[i + PREFETCH_AHEAD]
            prefetch(centers, t)
            prefetch(radii, t)
            prefetch(vdist, t)
            prefetch(node, t)
            prefetch(ids, t)
            u = at[i + PREFETCH_AHEAD]
            if c_of[i + PREFETCH_AHEAD] < 0 and start[u] >= 0:
                prefetch_position(slot, ident, rec, vd, start[u] + count[u])
        s = slots[i]
        cx, cy, cz, r = slot_sphere(centers, radii, s)
        n = at[i]
        c = c_of[i]
        if c >= 0 and child[n, c] >= 0:
            n = child[n, c]  # (a new unsplit leaf: its own descent would stop there)
            c = -1
        if (c >= 0 or count[n] == cap[n]) and not room_to_place(nd, ob, n, c >= 0):
            return i
        if c >= 0:
            n = new_leaf(nd, np.int64(n), c, cx, cy, cz)
            grow_block(nd, ob, n)
        append_record(start, count, node, slot, ident, rec, vd, pos, n, s, sp, ids[s])
        grow_up(lo, hi, maxvd, parent, n, cx, cy, cz, r, vdist[s])
    return slots.shape[0]


@njit(cache=True)
def remove_objects(nd, ob, sp, slots, rules) -> None:
    """Remove slots: mark the boxes their spheres were flush against (within the tree's
    slack, :func:`.bounds.box_slack`) for recomputation, take them out of their blocks, collect
    empty nodes (2.1.3) the tree's way (the paper's lazy mode marks no parent dirty).

    Takes the rules, not the collecting function: a function passed as an argument is typed
    by its dispatcher object, which differs in every process, so numba compiled this kernel
    again in every process and added it to its cache each time (29 copies of one version
    after a day's work, and a cache whose index then failed to save: "underlying object has
    vanished")."""
    lazy = (rules.flags & PAPER_LAZY) != 0
    slack = 0.0 if lazy else BOX_SLACK
    # The arrays out of their tuples once: numba counts references at every use in the loop.
    centers, radii, vdist = sp
    lo, hi, maxvd, parent, dirty = nd.lo, nd.hi, nd.maxvd, nd.parent, nd.dirty
    start, cap, count = nd.start, nd.cap, nd.count
    node, pos, slot, ident, rec, vd = ob.node, ob.pos, ob.slot, ob.ident, ob.rec, ob.vd
    m = slots.shape[0]
    ahead = PREFETCH_AHEAD
    for i in range(m):
        # A later object's lines: its slot's (and, in the paper's mode, its store rows), then
        # (its node and position in) its record, the record that will fill its place and its
        # node's box.
        if i + ahead < m:
            t = slots[i + ahead]
            prefetch(node, t)
            if lazy:
                prefetch(centers, t)
                prefetch(radii, t)
                prefetch(vdist, t)
        if i + ahead // 2 < m:
            t = slots[i + ahead // 2]
            u = node[t]
            prefetch_position(slot, ident, rec, vd, pos[t])
            prefetch_position(slot, ident, rec, vd, start[u] + count[u] - 1)
            prefetch(lo, u)
            prefetch(hi, u)
        if i + ahead // 4 < m:
            # The slot whose record fills the hole: its position is rewritten.
            t = slots[i + ahead // 4]
            u = node[t]
            prefetch(pos, slot[start[u] + count[u] - 1])
        s = slots[i]
        n = node[s]
        p = pos[s]
        if lazy:  # the listing's exact extents
            cx, cy, cz, r = slot_sphere(centers, radii, s)
            v = vdist[s]
        else:
            # The record's sphere, widened to hold the exact one (record_bounds): the flush
            # test only grows more cautious, and the store's three rows (a cache miss each
            # at 10^6) are not read.
            lx, ly, lz, hx, hy, hz, v = record_bounds(rec, vd, slot, centers, radii, vdist, p)
            cx, cy, cz = (lx + hx) * 0.5, (ly + hy) * 0.5, (lz + hz) * 0.5
            r = max(hx - cx, hy - cy, hz - cz)
        invalidate_up(lo, hi, maxvd, parent, dirty, np.int64(n), cx, cy, cz, r, v, slack)
        if cut_record(start, cap, count, slot, ident, rec, vd, pos, n, p):
            fit_block(nd, ob, n)
        node[s] = -1
        pos[s] = -1
        if is_empty_node(count, nd.nchild, n):
            collect_garbage(nd, n, not lazy)


@njit(cache=True)
def update_objects(nd, ob, sp, slots, new_c, new_r, new_v, keep: int) -> tuple[int, int]:
    """Move slots (2.1.4) to the checked values ``new_c``, ``new_r``, ``new_v`` (row i for
    slots[i]; the radii and view distances None where the batch leaves them alone: numba
    compiles each combination apart, the dead branches removed), writing the store as it goes;
    returns (how many were done, how many changed node). Fewer are done than given when the
    heap ran out of room (as :func:`insert_objects`): every mover before the count is done;
    from there on, a mover that stayed in its leaf may be done too (given again, it is moved
    to where it is, which changes nothing but, at worst, marks a box for a refit) and every
    other one has its store unwritten.

    The store's write is this loop's, not a pass of its own before it: a mover's store rows
    are among the lines its move reads anyway (its old sphere for the flush test), and a
    separate pass fetched them once to write them and again here once evicted (10^4 movers
    of 10^6 touch about 3 MB of lines).

    Fast path (most small moves): the new bounds still fit the box of the object's node, and
    that node is a leaf or the heuristic keeps the object there, so the object stays and no
    box grows (a view distance past the node's bound grows the bounds up the tree): its
    float32 record is rewritten where it is, and only the old sphere's flush test remains.
    The others (escapes) are moved after that pass, in :func:`move_escapes`.
    """
    # The arrays out of their tuples once: numba counts references at every use in the loop.
    centers, radii, vdist = sp
    lo, hi, maxvd, parent, dirty = nd.lo, nd.hi, nd.maxvd, nd.parent, nd.dirty
    is_split = nd.is_split
    node, pos, rec, vdp = ob.node, ob.pos, ob.rec, ob.vd
    n = slots.shape[0]
    # The escapes by batch row, and for each the node its new bounds climbed to (2.1.4).
    esc = np.empty(n, np.int64)
    esc_at = np.empty(n, np.int64)
    ne = 0
    ahead = 2 * PREFETCH_AHEAD  # (the lines of a fresh mover come from memory: a longer lead)
    for i in range(n):
        # A later mover's lines asked for now: its slot's (node and position share a line),
        # its store rows the batch writes; once its position and node are in, its record's
        # and its node's box.
        if i + ahead < n:
            t = slots[i + ahead]
            prefetch(node, t)
            prefetch(centers, t)
            if new_r is not None:
                prefetch(radii, t)
            if new_v is not None:
                prefetch(vdist, t)
        if i + ahead // 2 < n:
            t = slots[i + ahead // 2]
            prefetch(rec, pos[t])
            u = node[t]  # and its node's box (the pool of a big tree outgrows the cache)
            prefetch(lo, u)
            prefetch(hi, u)
            prefetch(maxvd, u)
        s = slots[i]
        x = node[s]
        # The old centre read and the new one written before the box test, an escape's put
        # back after it: written after the test, 10^4 cold movers (no escape) took 5-8 %
        # longer (the line's fetch for the write started late).
        ox = centers[s, 0]
        oy = centers[s, 1]
        oz = centers[s, 2]
        cx, cy, cz = moved_centre(i, s, new_c, centers)
        # A column the batch leaves alone is not read from the store here (a cache miss a
        # mover: 10^4 fresh movers of 10^6 took 0.82 ms reading both, 0.47 without): the
        # radius is the record's, rounded up (the box test and the flush test only grow more
        # cautious), and an unchanged view distance neither fails its node's bound nor leaves
        # it. An escape reads both exactly.
        if new_r is None:
            orad = r = record_radius_up(rec, pos[s])
        else:
            orad = radii[s]
            r = new_r[i]
        if new_v is None:
            ov = vd = -np.inf
        else:
            ov = vdist[s]
            vd = new_v[i]
        lx, ly, lz, hx, hy, hz = sphere_box(cx, cy, cz, r)
        stays = box_contains(lo, hi, np.int64(x), lx, ly, lz, hx, hy, hz)
        if stays and is_split[x]:
            # A non-leafy node's own object: it stays if the heuristic keeps it there.
            d, c = find_place(nd.child, is_split, nd.axis, nd.split, lo, hi, keep,
                              np.int64(x), cx, cy, cz, r)
            stays = (d == x) & (c < 0)
        if not stays:
            # Moved later, its store unwritten till then; the climb reads the boxes as they
            # stand now (they only grow in this call: a start a little high is still valid).
            centers[s, 0] = ox
            centers[s, 1] = oy
            centers[s, 2] = oz
            esc[ne] = i
            esc_at[ne] = climb_to_cover(lo, hi, parent, x, lx, ly, lz, hx, hy, hz)
            ne += 1
            continue
        # Same node, its box does not grow; invalidate_up returns at once unless the old
        # sphere was flush against x's box. Without radii in the batch the record keeps its
        # own radius.
        if new_r is not None:
            radii[s] = r
        if new_v is not None:
            vdist[s] = vd
        p = pos[s]
        rewrite_sphere(rec, vdp, p, cx, cy, cz, rec[p, 3] if new_r is None else r, ov, vd)
        invalidate_up(lo, hi, maxvd, parent, dirty, np.int64(x), ox, oy, oz, orad, ov,
                      BOX_SLACK)
        if vd > maxvd[x]:
            # A view distance past its node's bound: the bounds grow up the tree, the box
            # stays (as an escape's would when it lands where it was, without its pass).
            grow_up(lo, hi, maxvd, parent, np.int64(x), cx, cy, cz, r, vd)
    if ne == 0:
        return n, 0
    return move_escapes(nd, ob, sp, slots, new_c, new_r, new_v, keep, esc[:ne], esc_at[:ne])


@njit(cache=True)
def move_escapes(nd, ob, sp, slots, new_c, new_r, new_v, keep: int, esc, at):
    """The second pass of :func:`update_objects`: the movers (batch rows ``esc``) whose new
    bounds left their node's box, each from the node its bounds climbed to (``at``), down
    with the heuristic, into the block of the node it lands on (or its own node's box grown,
    when it lands where it was). Returns update_objects' pair.

    As a batch, not one by one in the first pass: an escape reads lines that no earlier step
    asked for (its hole and its block's last record, the block end it goes to, its exact
    radius and view distance: a dozen cache misses, 250-490 ns a teleport at 10^6), and here
    they are known ahead and asked for a few escapes early, as the inserts' and removals'
    are. Nodes emptied by the escapes are collected at the end (until then no node is freed,
    so every place found ahead stays a live node).
    """
    centers, radii, vdist = sp
    lo, hi, maxvd, parent, dirty = nd.lo, nd.hi, nd.maxvd, nd.parent, nd.dirty
    child = nd.child
    start, cap, count = nd.start, nd.cap, nd.count
    node, pos, slot, ident, rec, vdp = ob.node, ob.pos, ob.slot, ob.ident, ob.rec, ob.vd
    ne = esc.shape[0]
    ahead = PREFETCH_AHEAD
    # The escapes' new spheres (their exact radii: the descent's rules read them), then
    # their places, level by level.
    sph = np.empty((ne, 4))
    for j in range(ne):
        if new_r is None and j + ahead < ne:
            prefetch(radii, slots[esc[j + ahead]])
        i = esc[j]
        sph[j, 0] = new_c[i, 0]
        sph[j, 1] = new_c[i, 1]
        sph[j, 2] = new_c[i, 2]
        sph[j, 3] = radii[slots[i]] if new_r is None else new_r[i]
    c_of = descend(child, nd.is_split, nd.axis, nd.split, lo, hi, keep, sph, at)
    emptied = np.empty(ne, np.int64)
    ng = 0
    moved = 0
    done = slots.shape[0]
    for j in range(ne):
        # A later escape's lines: its slot's and store rows; then its record (the hole) and
        # the last record of its block (which fills the hole), and the block end it goes to;
        # then the position of the slot whose record fills the hole.
        if j + ahead < ne:
            t = slots[esc[j + ahead]]
            prefetch(node, t)
            prefetch(centers, t)
            prefetch(radii, t)
            prefetch(vdist, t)
        if j + ahead // 2 < ne:
            t = slots[esc[j + ahead // 2]]
            u = node[t]
            prefetch_position(slot, ident, rec, vdp, pos[t])
            prefetch_position(slot, ident, rec, vdp, start[u] + count[u] - 1)
            w = at[j + ahead // 2]
            if c_of[j + ahead // 2] < 0 and start[w] >= 0:
                prefetch_position(slot, ident, rec, vdp, start[w] + count[w])
        if j + ahead // 4 < ne:
            t = slots[esc[j + ahead // 4]]
            u = node[t]
            prefetch(pos, slot[start[u] + count[u] - 1])
        i = esc[j]
        s = slots[i]
        x = node[s]
        ox = centers[s, 0]
        oy = centers[s, 1]
        oz = centers[s, 2]
        orad = radii[s]
        ov = vdist[s]
        r = orad if new_r is None else new_r[i]
        vd = ov if new_v is None else new_v[i]
        d = at[j]
        c = c_of[j]
        if c >= 0 and child[d, c] >= 0:
            d = child[d, c]  # (a leaf an earlier escape made: its own descent would stop there)
            c = -1
        if (c >= 0 or (d != x and count[d] == cap[d])) and not room_to_place(nd, ob, d,
                                                                                  c >= 0):
            done = i  # stopped before this escape: its store rows as they were
            break
        cx, cy, cz = moved_centre(i, s, new_c, centers)
        if new_r is not None:
            radii[s] = r
        if new_v is not None:
            vdist[s] = vd
        if c >= 0:
            d = new_leaf(nd, np.int64(d), c, cx, cy, cz)
            grow_block(nd, ob, d)
        invalidate_up(lo, hi, maxvd, parent, dirty, np.int64(x), ox, oy, oz, orad, ov,
                      BOX_SLACK)
        if d != x:
            # Added first, so that the shrink of x's block cannot take the room d was given.
            p = pos[s]
            append_record(start, count, node, slot, ident, rec, vdp, pos, d, s, sp, ident[p])
            if cut_record(start, cap, count, slot, ident, rec, vdp, pos, x, p):
                fit_block(nd, ob, x)
            moved += 1
            if is_empty_node(count, nd.nchild, x):
                emptied[ng] = x
                ng += 1
        else:
            rewrite_sphere(rec, vdp, pos[s], cx, cy, cz, r, ov, vd)
        grow_up(lo, hi, maxvd, parent, d, cx, cy, cz, r, vd)
    for k in range(ng):
        x = emptied[k]
        # (refilled when a later escape landed there; a node is listed once, and only as a
        # leaf, so no earlier collection can have freed it: the depth check is a guard)
        if nd.depth[x] >= 0 and is_empty_node(count, nd.nchild, x):
            collect_garbage(nd, x)
    return done, moved
