"""Compiled invariant checks of the dynamic AABB tree (behind ``AABBTree.validate``).

A few short checks, run in an order that keeps each one safe once the previous ones held (the
later ones follow the links and lists the earlier ones vouched for). Each returns (code,
where): a key of :data:`MESSAGES` and the node or slot its message names, or (0, -1).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.aabbtree.blocks import META_TOP, MIN_CLASS
from app.spatial.aabbtree.bounds import slack_of
from app.spatial.aabbtree.pool import META_NFREE, ROOT
from app.spatial.scan import to32

MESSAGES = {
    1: "free stack entry is an invalid or repeated node",
    2: "node on the free stack is marked live (depth >= 0)",
    3: "node is neither live nor on the free stack (leaked)",
    4: "root is missing, has a parent or depth != 0",
    5: "node's parent is not a live node",
    6: "node is not in its parent's child table at its slot_in_parent",
    7: "node's depth is not its parent's depth + 1",
    8: "empty non-root leaf was not garbage-collected",
    9: "child table entry is a node that is free or has another parent",
    10: "child's box is not inside its parent's box",
    11: "child's max view distance exceeds its parent's",
    12: "node's nchild differs from the number of child table entries",
    13: "node with children is not marked split",
    14: "slot in a node's block is dead or out of range",
    15: "slot is in two blocks (or twice in one)",
    16: "slot's node is not the node whose block holds it",
    17: "slot's pos is not its position in its node's block",
    18: "slot's sphere bounds stick out of its node's box",
    19: "slot's view distance exceeds its node's max view distance",
    20: "node's block is malformed (count above its size, size not a power of two >= 4, "
        "outside the heap, or a block without objects)",
    21: "clean (not dirty) node's box is not the union of its contents (exactly in the "
        "paper's lazy mode, within the records' slack in ours)",
    22: "live slot is in no node's block",
    23: "empty root is split or has a non-empty box",
    24: "paper mode: clean node's stored (paper) box differs from its box",
    25: "pending list entry is out of range, repeated or not flagged as noted",
    26: "node flagged as noted is not on the pending list",
    27: "slot's float32 record differs from its sphere in the store",
    28: "heap blocks overlap, or a free list is broken",
    29: "unused position of a block holds a slot",
    30: "split under way is not on the pending list or not marked split",
    31: "a block position's id is not its slot's id in the store",
}


@njit(cache=True)
def check_pool(nd):
    """The free stack holds distinct free nodes; every other node is live (nothing leaks)."""
    m = nd.parent.shape[0]
    infree = np.zeros(m, np.bool_)
    for i in range(nd.meta[META_NFREE]):
        n = nd.free[i]
        if n < 0 or n >= m or infree[n]:
            return 1, n
        infree[n] = True
        if nd.depth[n] != -1:
            return 2, n
    for n in range(m):
        if not infree[n] and nd.depth[n] < 0:
            return 3, n
    return 0, -1


@njit(cache=True)
def check_root(nd):
    """The root is live at depth 0 without a parent; an empty root is an unsplit, empty box."""
    if nd.depth[ROOT] != 0 or nd.parent[ROOT] != -1:
        return 4, ROOT
    if nd.count[ROOT] == 0 and nd.nchild[ROOT] == 0 and (
            nd.is_split[ROOT] or nd.lo[ROOT, 0] != np.inf or nd.hi[ROOT, 0] != -np.inf):
        return 23, ROOT
    return 0, -1


@njit(cache=True)
def check_links(nd):
    """Parent and child links agree both ways, depths count from the root, no empty leaves."""
    m = nd.parent.shape[0]
    k = nd.child.shape[1]
    for n in range(m):
        if nd.depth[n] < 0:
            continue
        if n != ROOT:
            p = nd.parent[n]
            if p < 0 or p >= m or nd.depth[p] < 0:
                return 5, n
            c = nd.slot_in_parent[n]
            if c < 0 or c >= k or nd.child[p, c] != n:
                return 6, n
            if nd.depth[n] != nd.depth[p] + 1:
                return 7, n
            if nd.count[n] == 0 and nd.nchild[n] == 0:
                return 8, n
        kids = 0
        for j in range(k):
            ch = nd.child[n, j]
            if ch < 0:
                continue
            kids += 1
            if ch >= m or nd.depth[ch] < 0 or nd.parent[ch] != n or nd.slot_in_parent[ch] != j:
                return 9, ch
        if kids != nd.nchild[n]:
            return 12, n
        if kids > 0 and not nd.is_split[n]:
            return 13, n
    return 0, -1


@njit(cache=True)
def check_blocks(nd, ob, sp, alive, ids):
    """Every live slot is in exactly one block, its own node's, at its ``pos``, with its
    sphere's float32 record and its id (the store's ``ids`` by slot); blocks and free blocks
    tile the heap without overlap."""
    cap = alive.shape[0]
    top = ob.meta[META_TOP]
    if top < 0 or top > ob.slot.shape[0]:
        return 28, top
    used = np.zeros(top, np.bool_)
    seen = np.zeros(cap, np.bool_)
    for n in range(nd.parent.shape[0]):
        if nd.depth[n] < 0:
            continue
        b = nd.start[n]
        size = nd.cap[n]
        if nd.count[n] == 0:
            if b != -1 or size != 0:
                return 20, n
            continue
        if (nd.count[n] > size or size < (1 << MIN_CLASS) or size & (size - 1) != 0 or b < 0
                or b + size > top):
            return 20, n
        for p in range(b, b + size):
            if used[p]:
                return 28, p
            used[p] = True
            if p >= b + nd.count[n] and ob.slot[p] != -1:
                return 29, p
        for p in range(b, b + nd.count[n]):
            s = ob.slot[p]
            if s < 0 or s >= cap or not alive[s]:
                return 14, s
            if seen[s]:
                return 15, s
            seen[s] = True
            if ob.node[s] != n:
                return 16, s
            if ob.pos[s] != p:
                return 17, s
            if (ob.rec[p, 0] != to32(sp.centers[s, 0]) or ob.rec[p, 1] != to32(sp.centers[s, 1])
                    or ob.rec[p, 2] != to32(sp.centers[s, 2])
                    or ob.rec[p, 3] != to32(sp.radii[s]) or ob.vd[p] != to32(sp.vdist[s])):
                return 27, s
            if ob.ident[p] != ids[s]:
                return 31, s
    for c in range(ob.free.shape[0]):
        b = ob.free[c]
        while b >= 0:
            if b + (1 << c) > top:
                return 28, b
            for p in range(b, b + (1 << c)):
                if used[p]:
                    return 28, p  # (also what a cycle in the list comes to)
                used[p] = True
            b = -ob.slot[b] - 3
    for s in range(cap):
        if alive[s] and not seen[s]:
            return 22, s
    return 0, -1


@njit(cache=True)
def check_boxes(nd, ob, sp, slack: float):
    """Boxes contain their children's boxes and their objects' bounds; clean ones are their
    union, exactly when ``slack`` is 0, else within ``bounds.slack_of`` of it."""
    for n in range(nd.parent.shape[0]):
        if nd.depth[n] < 0:
            continue
        ulo = np.full(3, np.inf)
        uhi = np.full(3, -np.inf)
        for j in range(nd.child.shape[1]):
            ch = nd.child[n, j]
            if ch < 0:
                continue
            for a in range(3):
                if nd.lo[ch, a] < nd.lo[n, a] or nd.hi[ch, a] > nd.hi[n, a]:
                    return 10, ch
                ulo[a] = min(ulo[a], nd.lo[ch, a])
                uhi[a] = max(uhi[a], nd.hi[ch, a])
        for p in range(nd.start[n], nd.start[n] + nd.count[n]):
            s = ob.slot[p]
            r = sp.radii[s]
            for a in range(3):
                lo_a = sp.centers[s, a] - r
                hi_a = sp.centers[s, a] + r
                if lo_a < nd.lo[n, a] or hi_a > nd.hi[n, a]:
                    return 18, s
                ulo[a] = min(ulo[a], lo_a)
                uhi[a] = max(uhi[a], hi_a)
        if not nd.dirty[n]:
            t = slack_of(nd.lo, nd.hi, np.int64(n), slack)
            for a in range(3):
                if ulo[a] > nd.lo[n, a] + t or uhi[a] < nd.hi[n, a] - t:
                    return 21, n
    return 0, -1


@njit(cache=True)
def check_view_distances(nd, ob, sp):
    """A node's max view distance bounds its children's and its objects' view distances."""
    for n in range(nd.parent.shape[0]):
        if nd.depth[n] < 0:
            continue
        for j in range(nd.child.shape[1]):
            ch = nd.child[n, j]
            if ch >= 0 and nd.maxvd[ch] > nd.maxvd[n]:
                return 11, ch
        for p in range(nd.start[n], nd.start[n] + nd.count[n]):
            if sp.vdist[ob.slot[p]] > nd.maxvd[n]:
                return 19, ob.slot[p]
    return 0, -1


@njit(cache=True)
def check_pending(nd, pd):
    """The upkeep's pending list holds distinct nodes of the pool, exactly the flagged ones.

    A listed node may have been freed since a query noted it (the upkeep drops it); every
    live one is checked by the other checks like any node.
    """
    m = nd.parent.shape[0]
    npend = pd.count[0]
    if (npend < 0 or npend > m or pd.noted.shape[0] != m or pd.pending.shape[0] != m
            or pd.waited.shape[0] != m):
        return 25, npend
    listed = np.zeros(m, np.bool_)
    for i in range(npend):
        n = pd.pending[i]
        if n < 0 or n >= m or listed[n] or not pd.noted[n]:
            return 25, n
        listed[n] = True
    for n in range(m):
        if pd.noted[n] and not listed[n]:
            return 26, n
        if nd.depth[n] >= 0 and nd.kept[n] >= 0 and (
                not listed[n] or not nd.is_split[n]):
            return 30, n
    return 0, -1
