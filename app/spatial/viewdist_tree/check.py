"""Compiled invariant checks of the view distance tree (behind ``ViewDistanceTree.validate``).

Five short checks in the order that lets each trust what the previous ones checked: the node
pool, the links between nodes, the packed copy's blocks and the refit queue, the objects'
lists against the nodes (and their packed rows), and the radius classes and bounds. Each
returns (code, where): a key of :data:`MESSAGES` (0 when all held) and the offending node or
slot (-1 when none in particular).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.spatial.viewdist_tree.store import IN_INF, NO_NODE, fits_node, unbounded

MESSAGES = {
    1: "node free stack holds a live, repeated or out-of-range node",
    2: "node counts do not add up (free + live, live nodes, objects in nodes)",
    3: "node size is not 2**level or the level is finer than the finest level",
    4: "broken parent link or parent level",
    5: "child cube is not an octant of its parent",
    6: "empty childless node was not cleaned up",
    7: "broken child links or child count",
    8: "subtree bounds do not cover the objects or the children",
    9: "broken object list links or count",
    10: "object violates the placement rule (band [S/4, S/2] or centre outside the cube)",
    11: "a live node is not reachable from the root",
    12: "broken infinite-view-distance list",
    13: "live object not in exactly the right list, or a dead slot still linked",
    14: "packed copy differs from the node's list or the store",
    15: "subtree object count is not the node's own count plus its children's",
    16: "packed blocks overlap, leave the rows handed out, or do not add up",
    17: "refit queue holds a node twice, or its flags and length disagree",
}


@njit(cache=True)
def check_pool(nd, tree):
    """The free stack holds distinct free nodes; free + live is the whole pool."""
    t = tree[0]
    ncap = nd.size.shape[0]
    on_stack = np.zeros(ncap, dtype=np.bool_)
    for i in range(t.nfree):
        node = nd.free[i]
        if node < 0 or node >= ncap or on_stack[node] or nd.size[node] != 0.0:
            return 1, node
        on_stack[node] = True
    nlive = 0
    for node in range(ncap):
        nlive += nd.size[node] > 0.0
    if t.nfree + t.nlive != ncap or nlive != t.nlive:
        return 2, -1
    return 0, -1


@njit(cache=True)
def check_links(nd, tree):
    """Cubes are 2**level; parents, octants and child tables agree; all hang from the root."""
    t = tree[0]
    ncap = nd.size.shape[0]
    for node in range(ncap):
        if nd.size[node] == 0.0:
            continue
        level = nd.level[node]
        if nd.size[node] != math.ldexp(1.0, level) or level < t.emin:
            return 3, node
        parent = nd.parent[node]
        if parent == -1:
            if t.root != node:
                return 4, node
        else:
            if parent < 0 or parent >= ncap or nd.size[parent] == 0.0 or (
                    nd.level[parent] != level + 1):
                return 4, node
            octant = 0
            for a in range(3):
                if nd.lo[node, a] == nd.lo[parent, a] + 0.5 * nd.size[parent]:
                    octant |= 1 << a
                elif nd.lo[node, a] != nd.lo[parent, a]:
                    return 5, node
            if nd.child[parent, octant] != node:
                return 5, node
            if nd.count[node] == 0 and nd.nchild[node] == 0:
                return 6, node
        nchild = 0
        for j in range(8):
            c = nd.child[node, j]
            if c != -1:
                nchild += 1
                if c < 0 or c >= ncap or nd.size[c] == 0.0 or nd.parent[c] != node:
                    return 7, node
        if nchild != nd.nchild[node]:
            return 7, node
    reach = 0
    if t.root != -1:
        stack = np.empty(8 * ncap + 8, dtype=np.int64)
        stack[0] = t.root
        top = 1
        while top > 0 and reach <= t.nlive:  # more than nlive: a cycle, no need to go on
            top -= 1
            node = stack[top]
            reach += 1
            for j in range(8):
                c = nd.child[node, j]
                if c != -1:
                    stack[top] = c
                    top += 1
    if reach != t.nlive:
        return 11, t.root
    return 0, -1


@njit(cache=True)
def check_blocks(nd, pk, tree):
    """Live nodes' blocks hold their rows and, with the free lists' blocks, tile the rows
    handed out without overlap; the refit queue holds each flagged node once."""
    t = tree[0]
    rows = pk.slot.shape[0]
    if not 0 <= t.pend <= rows:
        return 16, -1
    owner = np.zeros(t.pend, dtype=np.bool_)
    total = 0
    for node in range(nd.size.shape[0]):
        if nd.size[node] == 0.0:
            continue
        cap = nd.pcap[node]
        start = nd.pstart[node]
        if (cap & (cap - 1)) != 0 or cap > t.pmax or nd.plen[node] > cap \
                or nd.plen[node] != nd.count[node] or start < 0 or start + cap > t.pend:
            return 16, node
        for p in range(start, start + cap):
            if owner[p]:
                return 16, node
            owner[p] = True
        total += cap
    free = 0
    for k in range(pk.free.shape[0]):
        start = pk.free[k]
        cap = 1 << k
        while start != -1:
            if start < 0 or start + cap > t.pend or free > t.pend:
                return 16, -1
            for p in range(start, start + cap):
                if owner[p]:
                    return 16, -1
                owner[p] = True
            free += cap
            start = pk.slot[start]
    if free != t.pfree or total + free != t.pend:
        return 16, -1
    ncap = nd.size.shape[0]
    if not 0 <= t.qlen <= ncap or (ncap and not 0 <= t.qhead < ncap):
        return 17, -1
    seen = np.zeros(ncap, dtype=np.bool_)
    for i in range(t.qlen):
        j = t.qhead + i
        node = nd.queue[j - ncap if j >= ncap else j]
        if node < 0 or node >= ncap or seen[node] or nd.queued[node] == 0:
            return 17, node
        seen[node] = True
    flagged = 0
    for node in range(ncap):
        flagged += nd.queued[node] != 0
    if flagged != t.qlen:
        return 17, -1
    return 0, -1


@njit(cache=True)
def check_lists(nd, ob, pk, tree, sp, alive):
    """Every node's list and the infinite list are well linked; every object in a node has
    its row in the node's block, matching the store; each live object is in exactly the right
    list, each dead one in none."""
    t = tree[0]
    ncap = nd.size.shape[0]
    cap = ob.node.shape[0]
    in_nodes = 0
    for node in range(ncap):
        if nd.size[node] == 0.0:
            continue
        count = 0
        packed = 0
        prev = -1
        s = nd.head[node]
        while s != -1:
            count += 1
            if (s < 0 or s >= cap or count > nd.count[node] or ob.prev[s] != prev
                    or ob.node[s] != node):
                return 9, node
            packed += 1
            if not _packed_row_matches(nd, pk, sp, node, ob.row[s], s):
                return 14, s
            prev = s
            s = ob.next[s]
        if count != nd.count[node]:
            return 9, node
        below = count
        for j in range(8):
            if nd.child[node, j] != -1:
                below += nd.sub[nd.child[node, j]]
        if below != nd.sub[node]:
            return 15, node
        if packed != nd.plen[node]:
            return 14, node
        in_nodes += count
    if in_nodes != t.in_nodes:
        return 2, -1
    count = 0
    prev = -1
    s = t.inf_head
    while s != -1:
        count += 1
        if (s < 0 or s >= cap or count > t.inf_count or ob.prev[s] != prev
                or ob.node[s] != IN_INF or ob.row[s] != -1):
            return 12, s
        prev = s
        s = ob.next[s]
    if count != t.inf_count:
        return 12, -1
    nalive = 0
    for s in range(cap):
        if not alive[s]:
            if ob.node[s] != NO_NODE:
                return 13, s
            continue
        nalive += 1
        far = unbounded(sp.centers[s, 0], sp.centers[s, 1], sp.centers[s, 2], sp.vdist[s])
        if ob.node[s] == NO_NODE or (ob.node[s] == IN_INF) != far:
            return 13, s
    if nalive != t.in_nodes + t.inf_count:
        return 13, -1
    return 0, -1


@njit(cache=True, inline="always")
def _packed_row_matches(nd, pk, sp, node, row, s):
    """The row lies in the node's range, points back at the slot and copies its values."""
    start = nd.pstart[node]
    return (row >= 0 and start <= row < start + nd.plen[node] and row < pk.slot.shape[0]
            and pk.slot[row] == s and pk.center[row, 0] == sp.centers[s, 0]
            and pk.center[row, 1] == sp.centers[s, 1] and pk.center[row, 2] == sp.centers[s, 2]
            and pk.radius[row] == sp.radii[s] and pk.vdist[row] == sp.vdist[s])


@njit(cache=True)
def check_bounds(nd, ob, tree, sp):
    """Each object in a node obeys the placement rule (its radius class) and lies within the
    node's subtree bounds; each child's bounds lie within its parent's."""
    emin = tree[0].emin
    for node in range(nd.size.shape[0]):
        if nd.size[node] == 0.0:
            continue
        for j in range(8):
            c = nd.child[node, j]
            if c == -1:
                continue
            for a in range(3):
                if (nd.clo[c, a] < nd.clo[node, a] or nd.chi[c, a] > nd.chi[node, a]
                        or nd.slo[c, a] < nd.slo[node, a] or nd.shi[c, a] > nd.shi[node, a]):
                    return 8, node
            if nd.vmax[c] > nd.vmax[node]:
                return 8, node
    for s in range(ob.node.shape[0]):
        node = ob.node[s]
        if node < 0:
            continue
        vd = sp.vdist[s]
        if not fits_node(nd, node, sp.centers[s, 0], sp.centers[s, 1], sp.centers[s, 2], vd,
                         emin):
            return 10, s
        r = sp.radii[s]
        for a in range(3):
            c = sp.centers[s, a]
            if (c < nd.clo[node, a] or c > nd.chi[node, a] or c - r < nd.slo[node, a]
                    or c + r > nd.shi[node, a]):
                return 8, node
        if vd > nd.vmax[node]:
            return 8, node
    return 0, -1
