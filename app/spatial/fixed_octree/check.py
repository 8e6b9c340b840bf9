"""Compiled invariant checks of the fixed octree (behind ``FixedOctree.validate``).

A few short checks in the order that keeps each one safe to run once the previous held (the
later ones follow links the earlier ones vouched for). Each returns (code, where): a key of
:data:`MESSAGES` and the node or entry where it broke, or (0, -1).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.spatial.fixed_octree.update import contains, octant

MESSAGES = {
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
def _live_count(node):
    n = 0
    for i in range(node.shape[0]):
        if node[i].alive != 0:
            n += 1
    return n


@njit(cache=True)
def check_pool(nd, root, min_size):
    """Free stack and live nodes partition the pool; the root is a live power-of-two cube."""
    node = nd.node
    cap = node.shape[0]
    nfree = nd.nfree[0]
    nalive = _live_count(node)
    for i in range(nfree):
        if node[nd.free[i]].alive != 0:
            return 3, nd.free[i]
    if nalive + nfree != cap:
        return 3, -1
    if root < 0:
        return (7, -1) if nalive != 0 else (0, -1)
    if node[root].alive == 0 or node[root].parent != -1:
        return 1, root
    ratio = node[root].size / min_size
    if ratio != 2.0 ** node[root].level or math.frexp(ratio)[0] != 0.5:
        return 2, root
    return 0, -1


@njit(cache=True)
def check_links(nd, root):
    """Every live node is reached once from the root; each child is its parent's octant."""
    node = nd.node
    cap = node.shape[0]
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
        h = node[n].size * 0.5
        for o in range(8):
            ch = node[n].child[o]
            if ch < 0:
                continue
            nch += 1
            if node[ch].alive == 0 or node[ch].parent != n or seen[ch]:
                return 4, ch
            if node[ch].level != node[n].level - 1 or node[ch].size != h:
                return 5, ch
            for a in range(3):
                if node[ch].lo[a] != node[n].lo[a] + (h if (o >> a) & 1 else 0.0):
                    return 5, ch
            seen[ch] = True
            stack[sp] = ch
            sp += 1
        if nch != node[n].nchild:
            return 6, n
    if reached != _live_count(node):
        return 7, -1
    return 0, -1


@njit(cache=True)
def check_lists(nd, en):
    """Each live node's entry list is well linked, names the node, and has ``count`` entries;
    every placed entry is on one list."""
    node = nd.node
    listed = 0
    for n in range(node.shape[0]):
        if node[n].alive == 0:
            continue
        cnt = 0
        prev = -1
        s = node[n].head
        while s >= 0:
            if en.prev[s] != prev:
                return 8, s
            if en.node[s] != n:
                return 9, s
            cnt += 1
            if cnt > en.node.shape[0]:
                return 8, s
            prev = s
            s = en.next[s]
        if cnt != node[n].count:
            return 10, n
        listed += cnt
    if listed != np.count_nonzero(en.node >= 0):
        return 16, -1
    return 0, -1


@njit(cache=True)
def check_placement(nd, en, s2e, alive, centers, radii, vdist):
    """Each placed entry is its slot's, copies the store, and sits in the smallest node cube
    that holds it (moves are placed in their update, so none is exempt)."""
    node = nd.node
    cap = node.shape[0]
    for s in range(en.node.shape[0]):
        n = en.node[s]
        if n < 0:
            continue
        if n >= cap or node[n].alive == 0:
            return 21, s
        slot = en.slot[s]
        if slot < 0 or slot >= s2e.shape[0] or s2e[slot] != s or not alive[slot]:
            return 23, s
        cx = en.sphere[s].cx
        cy = en.sphere[s].cy
        cz = en.sphere[s].cz
        r = en.sphere[s].radius
        if (cx != centers[slot, 0] or cy != centers[slot, 1] or cz != centers[slot, 2]
                or r != radii[slot] or en.sphere[s].vdist != vdist[slot]):
            return 24, s
        if not contains(node, n, cx, cy, cz, r):
            return 11, s
        if node[n].level > 0:
            _o, lx, ly, lz, h = octant(node, n, cx, cy, cz)
            if (cx - r >= lx and cx + r <= lx + h and cy - r >= ly and cy + r <= ly + h
                    and cz - r >= lz and cz + r <= lz + h):
                return 12, s
    return 0, -1


@njit(cache=True)
def check_ages(nd, root):
    """Lifespans are 8..64 doublings; exactly the non-root empty leaves count down, each
    listed once in the ageing list."""
    node = nd.node
    cap = node.shape[0]
    inlist = np.zeros(cap, dtype=np.bool_)
    for i in range(nd.naging[0]):
        n = nd.aging[i]
        if inlist[n]:
            return 22, n
        inlist[n] = True
    for n in range(cap):
        if node[n].alive == 0:
            continue
        life = node[n].life
        if life != 8 and life != 16 and life != 32 and life != 64:
            return 13, n
        ttl = node[n].ttl
        empty_leaf = node[n].count == 0 and node[n].nchild == 0
        if ttl < -1 or ttl > life or (ttl >= 0 and (not empty_leaf or n == root)):
            return 14, n
        if empty_leaf and n != root and ttl < 1:
            return 15, n
        if ttl >= 0 and not inlist[n]:
            return 22, n
    return 0, -1


@njit(cache=True)
def check_ranges(nd, en):
    """Dirty nodes have dirty ancestors; a clean node's entries lie in its range, which lies
    in its clean parent's."""
    node = nd.node
    for n in range(node.shape[0]):
        if node[n].alive == 0:
            continue
        p = node[n].parent
        if node[n].clean == 0:
            if p >= 0 and node[p].clean != 0:
                return 25, n
            continue
        e0 = node[n].estart
        if p >= 0 and node[p].clean != 0 and (
                e0 < node[p].estart or e0 + node[n].subcount > node[p].estart + node[p].subcount):
            return 25, n
        s = node[n].head
        while s >= 0:
            if s < e0 or s >= e0 + node[n].subcount:
                return 25, n
            s = en.next[s]
    return 0, -1


@njit(cache=True)
def check_bounds(nd, en):
    """Subtree counts are exact; subtree boxes and view-distance ranges nest and cover every
    object's packed copy (what they were grown with)."""
    node = nd.node
    for n in range(node.shape[0]):
        if node[n].alive == 0:
            continue
        sub = node[n].count
        for o in range(8):
            ch = node[n].child[o]
            if ch >= 0:
                sub += node[ch].subcount
        if sub != node[n].subcount:
            return 18, n
        if sub == 0:
            continue
        for o in range(8):
            ch = node[n].child[o]
            if ch < 0 or node[ch].subcount == 0:
                continue
            for a in range(3):
                if node[ch].tlo[a] < node[n].tlo[a] or node[ch].thi[a] > node[n].thi[a]:
                    return 19, n
            if node[ch].vmax > node[n].vmax or node[ch].vmin < node[n].vmin:
                return 20, n
        s = node[n].head
        while s >= 0:
            r = en.sphere[s].radius
            c = (en.sphere[s].cx, en.sphere[s].cy, en.sphere[s].cz)
            for a in range(3):
                if c[a] - r < node[n].tlo[a] or c[a] + r > node[n].thi[a]:
                    return 19, n
            if en.sphere[s].vdist > node[n].vmax or en.sphere[s].vdist < node[n].vmin:
                return 20, n
            s = en.next[s]
    return 0, -1
