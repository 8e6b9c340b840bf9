"""The dynamic AABB tree's shape: where an object goes (2.1.2, 2.1.4), splitting an
overfull leaf (2.1.1, at once or over several upkeep calls), undoing a pathological split,
and freeing empty leaves and unsplitting their parents (2.1.3).

A split moves objects between blocks; the places (node, position) of the slots it moved are
written once at the end of an upkeep call (:func:`place_later`), not at every split.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.aabbtree.blocks import (
    NO_ROOM,
    block_class,
    copy_record,
    give_block,
    grow_block,
    move_record,
    room_for_leaf,
    swap_records,
    take_blocks,
)
from app.spatial.aabbtree.bounds import (
    block_sphere,
    box_contains,
    grow_box_up,
    invalidate_up,
    record_bounds,
    refit_block,
    refit_node,
    sphere_box,
)
from app.spatial.aabbtree.heuristics import (
    PAPER_AXIS,
    PAPER_LAZY,
    PAPER_SPLIT_POINT,
    PAPER_THRESHOLD,
    box_volume,
    child_index,
    split_axis,
    which_child,
)
from app.spatial.aabbtree.pool import META_NFREE, META_WANT_GROW, ROOT, attach_child, free_node
from app.spatial.prefetch import PREFETCH_AHEAD, STREAM_AHEAD, prefetch


@njit(cache=True, _nrt=False)
def find_place(child, is_split, axis, split, lo, hi, keep: int, n: int,
               cx: float, cy: float, cz: float, r: float) -> tuple[int, int]:
    """Follow the heuristic from n down the existing nodes (2.1.2).

    Returns (node, c): the object goes to ``node`` when c is -1, else to a new child c of it.
    ``keep`` is the non-leafy rule (heuristics.KEEP_*), read against the box rows lo/hi.
    Takes the pool's arrays rather than the pool tuple: in numba a call that passes the whole
    tuple costs far more than this walk. Not inlined: the heuristic's code is large and
    inlining it slows every caller's loop, while most moves never need it.
    """
    while True:
        if not is_split[n]:
            return n, -1
        c = which_child(child, is_split, axis, split, lo, hi, keep, np.int64(n), cx, cy, cz, r)
        if c < 0:
            return n, -1
        ch = child[n, c]
        if ch < 0:
            return n, c
        n = ch


@njit(cache=True, _nrt=False)
def climb_to_cover(lo, hi, parent, x: int, lx: float, ly: float, lz: float, hx: float,
                   hy: float, hz: float) -> int:
    """The first node from x up whose box (rows of lo, hi) contains [l, h]; the root at worst.

    Where a moved object's search for its new node starts (2.1.4).
    """
    while x != ROOT and not box_contains(lo, hi, x, lx, ly, lz, hx, hy, hz):
        x = parent[x]
    return x


@njit(cache=True)
def new_leaf(nd, n: int, c: int, cx: float, cy: float, cz: float) -> int:
    """Create child c of n as an empty leaf for an object centred at (cx, cy, cz)."""
    ch = attach_child(nd, np.int64(n), c)
    # Seed the split point for fragmentation avoidance until the leaf is refitted.
    nd.split[ch, 0] = cx
    nd.split[ch, 1] = cy
    nd.split[ch, 2] = cz
    return ch


@njit(cache=True, inline="always")
def reset_root(nd) -> None:
    """An empty tree: the root is an unsplit leaf with an empty box."""
    nd.is_split[ROOT] = False
    nd.dirty[ROOT] = False
    for a in range(3):
        nd.lo[ROOT, a] = np.inf
        nd.hi[ROOT, a] = -np.inf
        nd.plo[ROOT, a] = np.inf
        nd.phi[ROOT, a] = -np.inf
    nd.maxvd[ROOT] = -np.inf


@njit(cache=True, inline="always")
def is_empty_node(count, nchild, n: int) -> bool:
    """Node n holds no object and has no child (garbage unless it is the root)."""
    return (count[n] == 0) & (nchild[n] == 0)


@njit(cache=True, inline="always")
def free_empty_node(nd, n: int) -> int:
    """Free empty non-root node n and take it out of its parent, which is unsplit when left
    without children; returns the parent."""
    p = nd.parent[n]
    nd.child[p, nd.slot_in_parent[n]] = -1
    nd.nchild[p] -= 1
    if nd.nchild[p] == 0:
        nd.is_split[p] = False
    free_node(nd, n)
    return p


@njit(cache=True)
def collect_garbage(nd, n: int, dirty: bool = True) -> None:
    """Free empty leaves from n upwards; a parent left without children is unsplit (2.1.3).
    ``dirty``: mark each parent for a refit (ours; the paper's ``TestSuicide`` does not)."""
    while n != ROOT and is_empty_node(nd.count, nd.nchild, n):
        n = free_empty_node(nd, n)
        if dirty:
            nd.dirty[n] = True  # its box may shrink now
    if is_empty_node(nd.count, nd.nchild, n):  # only the root stops the loop empty
        reset_root(nd)


@njit(cache=True)
def split_node(nd, ob, sp, n: int, rules, later=None) -> int:
    """Split leaf n around the mean of its centers (2.1.1); 1 split, 2 pathological, 0 no room.

    ``later`` (:func:`new_later`; the upkeep's) defers the moved slots' places (``node``,
    ``pos``): n and its children go on it and :func:`place_later` writes their blocks' places
    once the upkeep call ends. A slot's place is a line anywhere in the store, so writing it
    at every level of a catch-up cost a cache miss per object and level; once at the end, it
    is one per object. Nothing between reads a place (only moves, removals and validate do).

    The caller has refitted n (the non-leafy rule and the K-D axis read its box). When every
    object would go to the same child, nothing moves and n stays marked split, so it is not
    split again (the children would be copies of n).

    The paper mode's bits (``rules.flags``) switch in appendix A's ``DoSplit``: the split point
    is the mean of ``pos + (r, r, r)`` (PAPER_SPLIT_POINT), the K-D / ternary axis goes to Z on
    ties (PAPER_AXIS), and with PAPER_LAZY the pathological case has the listing's side
    effect: its objects are taken back from the child one by one with ``RemoveNode``, whose
    ``ShrinkExtents`` invalidates n's box (and every ancestor's the objects are flush with),
    so the next visit re-centres n's split point on the mean of its centres (DEFRAG).
    """
    k = nd.child.shape[1]
    if nd.meta[META_NFREE] < k:
        nd.meta[META_WANT_GROW] = 1
        return 0
    centers = sp.centers
    radii = sp.radii
    keep = rules.keep
    flags = rules.flags
    shift = (flags & PAPER_SPLIT_POINT) != 0
    # Our mode reads the block's float32 records in order (the heuristic's choice needs no
    # exact centre; the children's boxes are widened, see the module's docstring); the
    # paper's lazy mode reads the exact spheres from the store.
    exact = (flags & PAPER_LAZY) != 0
    # The pool's arrays as locals: numba reference-counts every array of a tuple at each use
    # or call inside a loop, even of an inlined helper. Through the tuples (17 arrays in the
    # pool) the first query of 10^6 objects took 2.2 s (kd), mostly in this function.
    child, is_split, axis, split, lo, hi = nd.child, nd.is_split, nd.axis, nd.split, nd.lo, nd.hi
    slot, ident, rec, vdp, pos, node = ob.slot, ob.ident, ob.rec, ob.vd, ob.pos, ob.node
    b = nd.start[n]
    m = nd.count[n]
    sx = 0.0
    sy = 0.0
    sz = 0.0
    for p in range(b, b + m):
        cx, cy, cz, r = block_sphere(exact, rec, slot, centers, radii, p)
        r = r if shift else 0.0
        sx += cx + r
        sy += cy + r
        sz += cz + r
    split[n, 0] = sx / m
    split[n, 1] = sy / m
    split[n, 2] = sz / m
    # K-D and ternary cut across the longest axis of the box.
    axis[n] = split_axis(hi[n, 0] - lo[n, 0], hi[n, 1] - lo[n, 1], hi[n, 2] - lo[n, 2],
                         (flags & PAPER_AXIS) != 0)
    is_split[n] = True

    # Pass 1: every object's child (-1: stays at n); are the objects separated at all?
    which = np.empty(m, np.int64)
    per_child = np.zeros(k, np.int64)
    first = -2
    separated = False
    # The node's heuristic inputs as scalars, read once: which_child per object passed six
    # arrays a call (kd at 10^6: this pass 9 -> 6 ns an object; child_index's branch-free
    # choice took it to 2.6).
    a, px, py, pz = axis[n], split[n, 0], split[n, 1], split[n, 2]
    box = box_volume(lo, hi, n)
    for i in range(m):
        cx, cy, cz, r = block_sphere(exact, rec, slot, centers, radii, b + i)
        c = child_index(k, keep, a, px, py, pz, box, cx, cy, cz, r)
        which[i] = c
        if c >= 0:
            per_child[c] += 1
        separated |= c < 0 or (first >= 0 and c != first)
        first = c
    if not separated:
        if flags & PAPER_LAZY:
            vdist = sp.vdist
            maxvd, parent, dirty = nd.maxvd, nd.parent, nd.dirty
            for p in range(b, b + m):
                s = slot[p]
                invalidate_up(lo, hi, maxvd, parent, dirty, np.int64(n), centers[s, 0],
                              centers[s, 1], centers[s, 2], radii[s], vdist[s], 0.0)
        return 2
    taken = take_blocks(ob, per_child)
    if taken[0] == NO_ROOM:
        is_split[n] = False  # (the caller makes room and splits again)
        nd.meta[META_WANT_GROW] = 1
        return 0

    # Pass 2: each child with its block, each object's record copied to its child's block;
    # the ones that stay close up at the front of n's block.
    for c in range(k):
        if per_child[c] > 0:
            ch = attach_child(nd, np.int64(n), c)
            nd.start[ch] = taken[c]
            nd.cap[ch] = 1 << block_class(per_child[c])
    kept = 0
    last = b + m - 1
    for i in range(m):
        if (i & 3) == 0:  # the records ahead, a line at a time (prefetch.STREAM_AHEAD)
            ahead = min(b + i + STREAM_AHEAD, last)
            prefetch(rec, ahead)
            if (i & 7) == 0:
                prefetch(which, min(i + STREAM_AHEAD, m - 1))
                if (i & 15) == 0:
                    prefetch(slot, ahead)
                    prefetch(vdp, ahead)
        if later is None and i + PREFETCH_AHEAD < m:
            # A later object's place (node and position share a line, by slot: anywhere in
            # the store), which its move rewrites: a cache miss an object, most of a split.
            prefetch(node, slot[b + i + PREFETCH_AHEAD])
        c = which[i]
        if c >= 0:
            ch = child[n, c]
            q = nd.start[ch] + nd.count[ch]
            if later is None:
                move_record(slot, ident, rec, vdp, pos, q, b + i)
                node[slot[q]] = ch
            else:
                copy_record(slot, ident, rec, vdp, q, b + i)
            nd.count[ch] += 1
        else:
            if kept != i:
                if later is None:
                    move_record(slot, ident, rec, vdp, pos, b + kept, b + i)
                else:
                    copy_record(slot, ident, rec, vdp, b + kept, b + i)
            kept += 1
    nd.count[n] = kept
    if later is not None:
        place_later_note(later, n)
        for j in range(k):
            if child[n, j] >= 0:
                place_later_note(later, child[n, j])
    if kept == 0:
        give_block(ob, b, nd.cap[n])
        nd.start[n] = -1
        nd.cap[n] = 0
    # The children's boxes lie inside n's box, which does not change: n still bounds them all.
    for j in range(k):
        ch = child[n, j]
        if ch >= 0:
            if exact:
                refit_node(nd, ob, sp, np.int64(ch), rules.threshold)
            else:
                refit_block(nd, ob, sp, np.int64(ch), rules.threshold)
    return 1


@njit(cache=True)
def split_step(nd, ob, sp, n: int, rules, budget: int, later) -> tuple[int, int]:
    """Split node n within about ``budget`` objects of work: (code, objects spent), code as
    :func:`split_node`'s (0 no room, 1 split, 2 pathological) or 3: under way, call again.

    A node of at most ``budget`` objects is split at once (:func:`split_node`). A larger one
    is split over several calls, so that no upkeep call stalls a frame: the first call sets
    its split point (the mean of its float32 centres) and marks it split, and every call
    hands up to ``budget`` objects from the end of its block to their children, the ones
    that stay moving to the front (``kept``). Meanwhile the node holds children and objects
    not yet handed down, which every query already reads (a non-leafy node does the same),
    so answers stay exact. A split that sent every object to one child is undone at the end,
    as :func:`split_node` refuses it at the start.
    """
    k = nd.child.shape[1]
    if nd.meta[META_NFREE] < k:
        nd.meta[META_WANT_GROW] = 1
        return 0, 0
    if nd.kept[n] < 0:
        m = nd.count[n]
        if m <= budget:
            return split_node(nd, ob, sp, n, rules, later), m + 1
        _start_split(nd, ob, n, rules)
    return _hand_down(nd, ob, sp, n, rules, budget)


@njit(cache=True, _nrt=False)
def _start_split(nd, ob, n: int, rules) -> None:
    """Split point (mean of the float32 centres, plus the radius with PAPER_SPLIT_POINT) and
    axis of node n, marked split with nothing handed down yet."""
    b = nd.start[n]
    m = nd.count[n]
    shift = (rules.flags & PAPER_SPLIT_POINT) != 0
    rec = ob.rec
    sx = 0.0
    sy = 0.0
    sz = 0.0
    for p in range(b, b + m):
        r = np.float64(rec[p, 3]) if shift else 0.0
        sx += rec[p, 0] + r
        sy += rec[p, 1] + r
        sz += rec[p, 2] + r
    nd.split[n, 0] = sx / m
    nd.split[n, 1] = sy / m
    nd.split[n, 2] = sz / m
    nd.axis[n] = split_axis(nd.hi[n, 0] - nd.lo[n, 0], nd.hi[n, 1] - nd.lo[n, 1],
                            nd.hi[n, 2] - nd.lo[n, 2], (rules.flags & PAPER_AXIS) != 0)
    nd.is_split[n] = True
    nd.kept[n] = 0


@njit(cache=True)
def _hand_down(nd, ob, sp, n: int, rules, budget: int) -> tuple[int, int]:
    """Up to ``budget`` objects of node n's block, from its end, to their children (see
    :func:`split_step`); a child's box grows by each object it gets (by its record's widened
    bounds in our mode), so it is clean."""
    centers, radii, vdist = sp
    child, is_split, axis, split, lo, hi = nd.child, nd.is_split, nd.axis, nd.split, nd.lo, nd.hi
    start, cap, count, maxvd = nd.start, nd.cap, nd.count, nd.maxvd
    slot, ident, rec, vdp, pos, node = ob.slot, ob.ident, ob.rec, ob.vd, ob.pos, ob.node
    keep = rules.keep
    exact = (rules.flags & PAPER_LAZY) != 0  # (as split_node)
    kept = min(nd.kept[n], count[n])  # (moves and removals may have taken some)
    done = 0
    while kept < count[n] and done < budget:
        q = start[n] + count[n] - 1
        if q - PREFETCH_AHEAD >= start[n] + kept:  # a later object's place (see split_node)
            prefetch(node, slot[q - PREFETCH_AHEAD])
        s = slot[q]
        cx, cy, cz, r = block_sphere(exact, rec, slot, centers, radii, q)
        c = which_child(child, is_split, axis, split, lo, hi, keep, np.int64(n), cx, cy, cz, r)
        if c < 0:
            swap_records(slot, ident, rec, vdp, pos, start[n] + kept, q)
            kept += 1
        else:
            ch = child[n, c]
            if ch < 0:
                if not room_for_leaf(ob):
                    nd.kept[n] = kept
                    nd.meta[META_WANT_GROW] = 1
                    return 0, done
                ch = new_leaf(nd, np.int64(n), c, cx, cy, cz)
                grow_block(nd, ob, ch)
            elif count[ch] == cap[ch] and not grow_block(nd, ob, ch):
                nd.kept[n] = kept
                nd.meta[META_WANT_GROW] = 1
                return 0, done
            if exact:
                lx, ly, lz, hx, hy, hz = sphere_box(cx, cy, cz, r)
                v = vdist[s]
            else:
                lx, ly, lz, hx, hy, hz, v = record_bounds(rec, vdp, slot, centers, radii, vdist, q)
            # (up the tree: a widened record may stand out of n's box where it is exact)
            grow_box_up(lo, hi, maxvd, nd.parent, ch, lx, ly, lz, hx, hy, hz, v)
            move_record(slot, ident, rec, vdp, pos, start[ch] + count[ch], q)
            node[s] = ch
            count[ch] += 1
            count[n] -= 1
        done += 1
    if kept < count[n]:
        nd.kept[n] = kept
        return 3, done
    nd.kept[n] = -1
    if count[n] == 0:
        if cap[n] > 0:
            give_block(ob, start[n], cap[n])
            start[n] = -1
            cap[n] = 0
        if nd.nchild[n] == 1 and _undo_split(nd, ob, n):
            return 2, done
    return 1, done


@njit(cache=True)
def _undo_split(nd, ob, n: int) -> bool:
    """Node n handed every object to one child: take that child's block back and free it;
    n stays marked split without children, so it is not split again (as split_node). Not
    when that child has children of its own (it was split meanwhile, and separated its
    objects: the split was no copy of n); returns whether it undid."""
    for j in range(nd.child.shape[1]):
        ch = nd.child[n, j]
        if ch >= 0:
            if nd.nchild[ch] > 0:
                return False
            nd.start[n] = nd.start[ch]
            nd.cap[n] = nd.cap[ch]
            nd.count[n] = nd.count[ch]
            for p in range(nd.start[n], nd.start[n] + nd.count[n]):
                ob.node[ob.slot[p]] = n
            nd.start[ch] = -1
            nd.cap[ch] = 0
            nd.count[ch] = 0
            free_empty_node(nd, ch)
    nd.is_split[n] = True
    return True


@njit(cache=True, inline="always")
def split_limit(rules) -> int:
    """The object count above which a query splits a leaf: the threshold, or one less with
    PAPER_THRESHOLD (the listing splits at ``size() >= s_splitval``)."""
    if rules.flags & PAPER_THRESHOLD:
        return rules.threshold - 1
    return rules.threshold


@njit(cache=True, inline="always")
def reach_rules(rules) -> tuple[bool, int]:
    """How a query treats the nodes it reaches: (the paper mode's GetExtents on every one,
    i.e. PAPER_LAZY; the object count above which a leaf is split)."""
    return (rules.flags & PAPER_LAZY) != 0, split_limit(rules)


@njit(cache=True, inline="always")
def needs_split(is_split, count, n: int, threshold: int) -> bool:
    """n is an unsplit leaf holding more objects than the threshold (2.1.1).

    Takes two arrays, not the pool: the queries ask it at every node they reach, and numba
    reference-counts every array of a tuple handed to an inlined helper.
    """
    return (not is_split[n]) & (count[n] > threshold)



# ---------------------------------------------------------------------- deferred places

@njit(cache=True)
def new_later(capacity: int):
    """The nodes whose blocks' places a split deferred (:func:`split_node`): a stack, its
    height, a mark per node of a pool of ``capacity`` (the pool does not grow during an
    upkeep call: a split that lacks nodes stops it)."""
    return np.empty(capacity, np.int64), np.zeros(1, np.int64), np.zeros(capacity, np.bool_)


@njit(cache=True, inline="always")
def place_later_note(later, n: int) -> None:
    """Put node n on ``later`` (once)."""
    stack, height, mark = later
    if not mark[n]:
        mark[n] = True
        stack[height[0]] = n
        height[0] += 1


@njit(cache=True, _nrt=False)
def place_later(nd, ob, later) -> None:
    """Write the place (node, position) of every slot in the blocks of the nodes on
    ``later``, as they are now: where each moved slot ended after all the upkeep's splits
    (a node freed since is skipped; one reused since holds its new objects)."""
    stack, height, mark = later
    node, pos, slot = ob.node, ob.pos, ob.slot
    depth, start, count = nd.depth, nd.start, nd.count
    for j in range(height[0]):
        t = stack[j]
        mark[t] = False
        if depth[t] < 0:
            continue
        b = start[t]
        m = count[t]
        for p in range(b, b + m):
            if p + PREFETCH_AHEAD < b + m:
                prefetch(node, slot[p + PREFETCH_AHEAD])
            s = slot[p]
            node[s] = t
            pos[s] = p
    height[0] = 0
