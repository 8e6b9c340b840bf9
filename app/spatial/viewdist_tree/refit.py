"""Bounds kept tight a few nodes a batch: the refit queue.

A node's subtree bounds only grow as objects arrive or move in (``update.expand_up``); a move
out of a node or a removal leaves them loose, which costs queries nodes they need not enter.
Such a node enters a FIFO ring (once: its ``queued`` flag): on every move in place, and on a
removal or a move out when the object lay on one of its bounds (:func:`defines_bounds`:
bounds are exact copies of some object's values, so the test is an equality). After each batch
:func:`refit_step` refits queued nodes, oldest first, until a budget of rows is spent: a node's
bounds from its packed block and its children's bounds. Refitted from contents that the old
bounds held, a node's bounds never grow, so its parent still holds them; a node that shrank
queues its parent, which is thereby refitted after it. Before, a full refit of every node ran
once changes passed twice the object count: 39 ms at 10^6 objects every ~200 frames of 1 %
movers; the budget spreads as much work over the frames.
"""

from __future__ import annotations

import math

from numba import njit


@njit(cache=True, _nrt=False)
def queue_refit(nd, tree, node):
    """Queue a node whose bounds may be looser than its contents (once until refitted)."""
    if nd.queued[node] != 0:
        return
    nd.queued[node] = 1
    t = tree[0]
    cap = nd.queue.shape[0]
    i = t.qhead + t.qlen
    if i >= cap:
        i -= cap
    nd.queue[i] = node
    t.qlen += 1


@njit(cache=True, _nrt=False)
def defines_bounds(nd, pk, node, row):
    """The object at ``row`` (its values before a move or removal) lies on one of its node's
    bounds: only then can the node's bounds shrink when it leaves."""
    x = pk.center[row, 0]
    y = pk.center[row, 1]
    z = pk.center[row, 2]
    r = pk.radius[row]
    return (x == nd.clo[node, 0] or y == nd.clo[node, 1] or z == nd.clo[node, 2]
            or x == nd.chi[node, 0] or y == nd.chi[node, 1] or z == nd.chi[node, 2]
            or x - r == nd.slo[node, 0] or y - r == nd.slo[node, 1] or z - r == nd.slo[node, 2]
            or x + r == nd.shi[node, 0] or y + r == nd.shi[node, 1] or z + r == nd.shi[node, 2]
            or pk.vdist[row] == nd.vmax[node])


@njit(cache=True, _nrt=False)
def refit_node(nd, pk, node):
    """Recompute a node's bounds from its rows and its children's bounds; True when they
    shrank."""
    clx = cly = clz = slx = sly = slz = math.inf
    chx = chy = chz = shx = shy = shz = vmax = -math.inf
    start = nd.pstart[node]
    for p in range(start, start + nd.plen[node]):
        x = pk.center[p, 0]
        y = pk.center[p, 1]
        z = pk.center[p, 2]
        r = pk.radius[p]
        clx = min(clx, x)
        cly = min(cly, y)
        clz = min(clz, z)
        chx = max(chx, x)
        chy = max(chy, y)
        chz = max(chz, z)
        slx = min(slx, x - r)
        sly = min(sly, y - r)
        slz = min(slz, z - r)
        shx = max(shx, x + r)
        shy = max(shy, y + r)
        shz = max(shz, z + r)
        vmax = max(vmax, pk.vdist[p])
    for j in range(8):
        c = nd.child[node, j]
        if c == -1:
            continue
        clx = min(clx, nd.clo[c, 0])
        cly = min(cly, nd.clo[c, 1])
        clz = min(clz, nd.clo[c, 2])
        chx = max(chx, nd.chi[c, 0])
        chy = max(chy, nd.chi[c, 1])
        chz = max(chz, nd.chi[c, 2])
        slx = min(slx, nd.slo[c, 0])
        sly = min(sly, nd.slo[c, 1])
        slz = min(slz, nd.slo[c, 2])
        shx = max(shx, nd.shi[c, 0])
        shy = max(shy, nd.shi[c, 1])
        shz = max(shz, nd.shi[c, 2])
        vmax = max(vmax, nd.vmax[c])
    shrank = (clx != nd.clo[node, 0] or cly != nd.clo[node, 1] or clz != nd.clo[node, 2]
              or chx != nd.chi[node, 0] or chy != nd.chi[node, 1] or chz != nd.chi[node, 2]
              or slx != nd.slo[node, 0] or sly != nd.slo[node, 1] or slz != nd.slo[node, 2]
              or shx != nd.shi[node, 0] or shy != nd.shi[node, 1] or shz != nd.shi[node, 2]
              or vmax != nd.vmax[node])
    nd.clo[node, 0] = clx
    nd.clo[node, 1] = cly
    nd.clo[node, 2] = clz
    nd.chi[node, 0] = chx
    nd.chi[node, 1] = chy
    nd.chi[node, 2] = chz
    nd.slo[node, 0] = slx
    nd.slo[node, 1] = sly
    nd.slo[node, 2] = slz
    nd.shi[node, 0] = shx
    nd.shi[node, 1] = shy
    nd.shi[node, 2] = shz
    nd.vmax[node] = vmax
    return shrank


@njit(cache=True)
def refit_step(nd, pk, tree, budget):
    """Refit queued nodes, oldest first, until ``budget`` rows are spent (a node counts its
    rows plus 8 for its children); returns the rows spent."""
    t = tree[0]
    cap = nd.queue.shape[0]
    spent = 0
    while t.qlen > 0 and spent < budget:
        node = nd.queue[t.qhead]
        t.qhead = t.qhead + 1 if t.qhead + 1 < cap else 0
        t.qlen -= 1
        nd.queued[node] = 0
        if nd.size[node] == 0.0:  # released since it was queued
            continue
        spent += nd.plen[node] + 8
        if refit_node(nd, pk, node) and nd.parent[node] != -1:
            queue_refit(nd, tree, nd.parent[node])
    return spent
