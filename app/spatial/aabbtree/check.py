"""Compiled invariant check of the dynamic AABB tree (behind ``AABBTree.validate``)."""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.aabbtree.kernels import META_NFREE, ROOT

# error code -> message; the check returns (code, node, slot).
MESSAGES = {
    1: "free stack holds an invalid or repeated node",
    2: "a node on the free stack is marked live (depth >= 0)",
    3: "a node is neither live nor on the free stack (leaked)",
    4: "the root is missing, has a parent or depth != 0",
    5: "a live node's parent is not a live node",
    6: "a node is not in its parent's child table at its slot_in_parent",
    7: "a node's depth is not its parent's depth + 1",
    8: "an empty non-root leaf was not garbage-collected",
    9: "a child table entry points at a node that is free or has another parent",
    10: "a child's box is not inside its parent's box",
    11: "a child's max view distance exceeds its parent's",
    12: "nchild differs from the number of child table entries",
    13: "a node with children is not marked split",
    14: "an object list holds a dead or out-of-range slot",
    15: "a slot is listed twice (or an object list has a cycle)",
    16: "a listed slot's owning node is not the node listing it",
    17: "an object list's prev link is broken",
    18: "an object's sphere bounds stick out of its node's box",
    19: "an object's view distance exceeds its node's max view distance",
    20: "a node's object count differs from its list length",
    21: "a clean (not dirty) node's box is not exactly the union of its contents",
    22: "a live object is in no node's list",
    23: "the empty root is split or has a non-empty box",
}


@njit(cache=True)
def check_tree(nd, ob, centers, radii, vdist, alive):
    """First broken invariant as (code, node, slot); (0, -1, -1) when all hold."""
    m = nd.parent.shape[0]
    k = nd.child.shape[1]
    nfree = nd.meta[META_NFREE]
    infree = np.zeros(m, np.bool_)
    for i in range(nfree):
        n = nd.free[i]
        if n < 0 or n >= m or infree[n]:
            return 1, n, -1
        infree[n] = True
        if nd.depth[n] != -1:
            return 2, n, -1
    for n in range(m):
        if not infree[n] and nd.depth[n] < 0:
            return 3, n, -1
    if infree[ROOT] or nd.parent[ROOT] != -1 or nd.depth[ROOT] != 0:
        return 4, ROOT, -1
    cap = alive.shape[0]
    seen = np.zeros(cap, np.bool_)
    for n in range(m):
        if nd.depth[n] < 0:
            continue
        if n != ROOT:
            p = nd.parent[n]
            if p < 0 or p >= m or nd.depth[p] < 0:
                return 5, n, -1
            c = nd.slot_in_parent[n]
            if c < 0 or c >= k or nd.child[p, c] != n:
                return 6, n, -1
            if nd.depth[n] != nd.depth[p] + 1:
                return 7, n, -1
            if nd.count[n] == 0 and nd.nchild[n] == 0:
                return 8, n, -1
        elif nd.count[n] == 0 and nd.nchild[n] == 0 and (
                nd.is_split[n] or nd.lo[n, 0] != np.inf or nd.hi[n, 0] != -np.inf):
            return 23, n, -1
        # the exact union of the contents, for clean nodes
        ulo = np.full(3, np.inf)
        uhi = np.full(3, -np.inf)
        kids = 0
        for j in range(k):
            ch = nd.child[n, j]
            if ch < 0:
                continue
            kids += 1
            if ch >= m or nd.depth[ch] < 0 or nd.parent[ch] != n or nd.slot_in_parent[ch] != j:
                return 9, ch, -1
            for a in range(3):
                if nd.lo[ch, a] < nd.lo[n, a] or nd.hi[ch, a] > nd.hi[n, a]:
                    return 10, ch, -1
                ulo[a] = min(ulo[a], nd.lo[ch, a])
                uhi[a] = max(uhi[a], nd.hi[ch, a])
            if nd.maxvd[ch] > nd.maxvd[n]:
                return 11, ch, -1
        if kids != nd.nchild[n]:
            return 12, n, -1
        if kids > 0 and not nd.is_split[n]:
            return 13, n, -1
        s = nd.head[n]
        prev = -1
        cnt = 0
        while s >= 0:
            if s >= cap or not alive[s]:
                return 14, n, s
            if seen[s]:
                return 15, n, s
            seen[s] = True
            if ob.node[s] != n:
                return 16, n, s
            if ob.prev[s] != prev:
                return 17, n, s
            r = radii[s]
            for a in range(3):
                lo_a = centers[s, a] - r
                hi_a = centers[s, a] + r
                if lo_a < nd.lo[n, a] or hi_a > nd.hi[n, a]:
                    return 18, n, s
                ulo[a] = min(ulo[a], lo_a)
                uhi[a] = max(uhi[a], hi_a)
            if vdist[s] > nd.maxvd[n]:
                return 19, n, s
            prev = s
            s = ob.next[s]
            cnt += 1
        if cnt != nd.count[n]:
            return 20, n, -1
        if not nd.dirty[n]:
            for a in range(3):
                if ulo[a] != nd.lo[n, a] or uhi[a] != nd.hi[n, a]:
                    return 21, n, -1
    for s in range(cap):
        if alive[s] and not seen[s]:
            return 22, -1, s
    return 0, -1, -1
