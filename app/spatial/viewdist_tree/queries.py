"""Compiled queries of the view distance tree: frustum with view distance (Matthews' point
query), frustum without it, and box, sphere and ray queries.

query_eye (frustum with view distance) is the point query "which view spheres contain the
eye": a node is entered only when the eye lies in its cube expanded by S/2 (at most two such
cubes per axis and level contain a point), pruned further by each subtree's bounds against the
planes and the Z-pyramid, followed by the exact per-object decision of
:func:`app.geom.decide.accept_sphere`; its working set is the objects of the entered nodes
plus the infinite list. Without view distance (and for box, sphere and ray queries) the tree
is walked through the subtree bounds of the objects' own spheres instead.

A node's objects are read from its block of the packed copy (sequential memory, see
:mod:`.heap`); the infinite list, which has no block, is walked through the store. Both make
the same exact per-object decision.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.geom.decide import (
    ACCEPTED,
    REGION_BOX,
    REGION_RAY,
    REGION_SPHERE,
    accept_sphere,
    node_verdict6,
    region_hit,
)
from app.geom.predicates import (
    NODE_INSIDE,
    NODE_NOT_VISITED,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
    ray_box_hits,
)

# Per-query rounding slack, relative to the magnitudes involved, so that node pruning never
# drops an object that the exact per-object predicate would keep.
_REL_PAD = 1e-9

# Kinds of region query (query_region's ``kind``): app.geom.decide's.
BOX = REGION_BOX
SPHERE = REGION_SPHERE
RAY = REGION_RAY


# ---------------------------------------------------------------- the shared decisions


# accept_sphere and node_verdict6 take arrays and the Occluder tuple; inlined into a traversal
# loop, numba increfs and decrefs each of those arrays at every call: 100k objects of the
# infinite list took 6.1 ms against 1.47 ms for the same tests written in the loop. Called
# through these wrappers, compiled without reference counting (``_nrt=False``: they allocate
# nothing, and the caller holds the arrays), the shared decision costs the same 1.49 ms.


@njit(cache=True, _nrt=False)
def _accept(planes, eye, use_vd, occ, cx, cy, cz, r, vd):
    """:func:`~app.geom.decide.accept_sphere` without reference counting."""
    return accept_sphere(planes, eye, use_vd, occ, cx, cy, cz, r, vd)


@njit(cache=True, _nrt=False)
def _verdict(planes, eye, use_vd, occ, lx, ly, lz, hx, hy, hz, max_vd):
    """:func:`~app.geom.decide.node_verdict6` without reference counting."""
    return node_verdict6(planes, eye, use_vd, occ, lx, ly, lz, hx, hy, hz, max_vd)


@njit(cache=True, inline="always")
def _tally(v: int, s: int, out, k: int, occluded: int, far: int):
    """Count one object's decision v: an accepted slot s goes to out[k]; returns
    (k, occluded, far) after it (culled by occlusion, by view distance)."""
    if v == ACCEPTED:
        out[k] = s
        return k + 1, occluded, far
    return k, occluded + (v == NODE_REJECT_OCCLUSION), far + (v == NODE_REJECT_VIEWDIST)


@njit(cache=True, _nrt=False)
def _decide_objects(nd, pk, node, planes, eye, use_vd, occ, take_all, out, k):
    """Decide a node's objects (its block's rows) into ``out[k:]``; returns (k, occluded,
    far). ``take_all``: the node is inside every plane and nothing occludes, so each object is
    taken as it is.

    Once per node, without reference counting like :func:`_accept`.
    """
    occluded = 0
    far = 0
    start = nd.pstart[node]
    for p in range(start, start + nd.plen[node]):
        v = ACCEPTED if take_all else _accept(
            planes, eye, use_vd, occ, pk.center[p, 0], pk.center[p, 1], pk.center[p, 2],
            pk.radius[p], pk.vdist[p])
        k, occluded, far = _tally(v, pk.slot[p], out, k, occluded, far)
    return k, occluded, far


# ---------------------------------------------------------------- node tests


@njit(cache=True, inline="always")
def _sphere_box(nd, node, qmag):
    """The node's padded sphere-bounds AABB as scalars (lx, ly, lz, hx, hy, hz) and the pad."""
    m = 0.0
    for a in range(3):
        m = max(m, abs(nd.slo[node, a]), abs(nd.shi[node, a]))
    pad = _REL_PAD * (m + qmag + 1.0)
    return (nd.slo[node, 0] - pad, nd.slo[node, 1] - pad, nd.slo[node, 2] - pad,
            nd.shi[node, 0] + pad, nd.shi[node, 1] + pad, nd.shi[node, 2] + pad, pad)


@njit(cache=True, _nrt=False)
def _eye_in_reach(nd, node, ex, ey, ez, emag):
    """The structural test: the eye lies in the cube expanded by its largest radius, S/2."""
    s = nd.size[node]
    reach = 0.5 * s + _REL_PAD * (abs(nd.lo[node, 0]) + abs(nd.lo[node, 1])
                                  + abs(nd.lo[node, 2]) + s + emag + 1.0)
    e = (ex, ey, ez)
    for a in range(3):
        lo = nd.lo[node, a]
        if e[a] < lo - reach or e[a] > lo + s + reach:
            return False
    return True


@njit(cache=True, _nrt=False)
def _eye_near_centres(nd, node, ex, ey, ez, emag):
    """The tight test: some centre of the subtree may be within its view distance of the eye."""
    d2 = 0.0
    m = emag
    e = (ex, ey, ez)
    for a in range(3):
        lo = nd.clo[node, a]
        hi = nd.chi[node, a]
        m = max(m, abs(lo), abs(hi))
        d = max(lo - e[a], 0.0, e[a] - hi)
        d2 += d * d
    return math.sqrt(d2) <= nd.vmax[node] + _REL_PAD * (m + nd.vmax[node] + 1.0)


@njit(cache=True, inline="always")
def _is_empty(nd, node):
    return nd.vmax[node] == -np.inf


@njit(cache=True, inline="always")
def start_walk(stack, root: int) -> int:
    """The root (if the tree has one) on an empty walk stack; returns the stack's size."""
    if root == -1:
        return 0
    stack[0] = root
    return 1


@njit(cache=True, inline="always")
def push_children(child, node: int, stack, top: int) -> int:
    """Push the node's children onto the walk stack; returns the stack's new size."""
    for j in range(8):
        c = child[node, j]
        if c != -1:
            stack[top] = c
            top += 1
    return top


@njit(cache=True, inline="always")
def _stack_cap(nd, tree):
    """Room for an explicit-stack walk: at most 8 entries per level below the root."""
    t = tree[0]
    depth = 0 if t.root == -1 else nd.level[t.root] - t.emin
    return 8 * (depth + 2)


# ---------------------------------------------------------------- frustum queries


@njit(cache=True)
def _scan_infinite(ob, tree, sp, planes, eye, use_vd, occ, out):
    """Decide the unbounded list into ``out``; returns (kept, considered, occluded, far).

    Its view distances are infinite or beyond UNBOUNDED, so the view-distance test is kept
    for the exact answer (it only rejects objects at absurd coordinates).
    """
    k = 0
    considered = 0
    occluded = 0
    far = 0
    s = tree[0].inf_head
    while s != -1:
        considered += 1
        v = _accept(planes, eye, use_vd, occ, sp.centers[s, 0], sp.centers[s, 1],
                    sp.centers[s, 2], sp.radii[s], sp.vdist[s])
        k, occluded, far = _tally(v, s, out, k, occluded, far)
        s = ob.next[s]
    return k, considered, occluded, far


@njit(cache=True)
def query_eye(nd, ob, pk, tree, sp, planes, eye, tight, occ, walk_infinite):
    """Frustum query with view distance: the point query for the eye, then exact tests.

    Returns (slots, considered, nodes visited, nodes occluded, objects culled by occlusion,
    objects culled by view distance): a rejected node counts its subtree (``sub``) under its
    test, the frustum's being the rest; an object counts under the first test it fails.
    ``walk_infinite`` False: the infinite list is left to the caller (its float32 scan).
    """
    t = tree[0]
    nd.outcome[:] = NODE_NOT_VISITED
    out = np.empty(t.in_nodes + t.inf_count, dtype=np.int64)
    k = considered = occ_obj = far = 0
    if walk_infinite:
        k, considered, occ_obj, far = _scan_infinite(ob, tree, sp, planes, eye, True, occ, out)
    visited = 0
    occ_nodes = 0
    ex = eye[0]
    ey = eye[1]
    ez = eye[2]
    emag = max(abs(ex), abs(ey), abs(ez))
    qmag = emag
    for p in range(planes.shape[0]):
        qmag = max(qmag, abs(planes[p, 3]))
    stack = np.empty(_stack_cap(nd, tree), dtype=np.int64)
    top = start_walk(stack, t.root)
    while top > 0:
        top -= 1
        node = stack[top]
        # The view-distance stage is the tree's own (the cube's reach, then the centres' box
        # against the largest view distance), tighter than node_verdict's distance from the
        # sphere-bounds box; the frustum and occlusion stages are node_verdict's.
        if not _eye_in_reach(nd, node, ex, ey, ez, emag) or _is_empty(nd, node) or (
                tight and not _eye_near_centres(nd, node, ex, ey, ez, emag)):
            nd.outcome[node] = NODE_REJECT_VIEWDIST
            far += nd.sub[node]
            continue
        lx, ly, lz, hx, hy, hz, _ = _sphere_box(nd, node, qmag)
        verdict = _verdict(planes, eye, False, occ, lx, ly, lz, hx, hy, hz, nd.vmax[node])
        nd.outcome[node] = verdict
        if verdict == NODE_REJECT_OCCLUSION:
            occ_nodes += 1
            occ_obj += nd.sub[node]
        if verdict != NODE_INSIDE and verdict != NODE_PARTIAL:
            continue
        visited += 1
        considered += nd.count[node]
        k, occluded, far_objects = _decide_objects(nd, pk, node, planes, eye, True, occ,
                                                   False, out, k)
        occ_obj += occluded
        far += far_objects
        top = push_children(nd.child, node, stack, top)
    return out[:k], considered, visited, occ_nodes, occ_obj, far


@njit(cache=True)
def query_planes(nd, ob, pk, tree, sp, planes, eye, occ, walk_infinite):
    """Frustum query without view distance, on the subtree bounds of the objects' spheres.

    Below a node inside every plane only occlusion is left to decide per object (the planes
    are then an empty set), and with no occlusion either the objects are taken as they are.
    ``walk_infinite`` as :func:`query_eye`'s.
    """
    t = tree[0]
    nd.outcome[:] = NODE_NOT_VISITED
    out = np.empty(t.in_nodes + t.inf_count, dtype=np.int64)
    k = considered = occ_obj = 0
    if walk_infinite:
        k, considered, occ_obj, _ = _scan_infinite(ob, tree, sp, planes, eye, False, occ, out)
    occluding = occ.widths.shape[0] > 0
    no_planes = np.empty((0, planes.shape[1]), dtype=planes.dtype)
    visited = 0
    occ_nodes = 0
    qmag = 0.0
    for p in range(planes.shape[0]):
        qmag = max(qmag, abs(planes[p, 3]))
    cap = _stack_cap(nd, tree)
    stack = np.empty(cap, dtype=np.int64)
    inside = np.empty(cap, dtype=np.bool_)  # the parent was wholly inside
    top = 0
    if t.root != -1:
        stack[0] = t.root
        inside[0] = False
        top = 1
    while top > 0:
        top -= 1
        node = stack[top]
        whole = inside[top]
        if _is_empty(nd, node):
            nd.outcome[node] = NODE_REJECT_FRUSTUM
            continue
        if not whole:
            lx, ly, lz, hx, hy, hz, _ = _sphere_box(nd, node, qmag)
            verdict = _verdict(planes, eye, False, occ, lx, ly, lz, hx, hy, hz,
                                    nd.vmax[node])
            if verdict == NODE_REJECT_OCCLUSION:
                occ_nodes += 1
                occ_obj += nd.sub[node]
            if verdict != NODE_INSIDE and verdict != NODE_PARTIAL:
                nd.outcome[node] = verdict
                continue
            whole = verdict == NODE_INSIDE
        nd.outcome[node] = NODE_INSIDE if whole else NODE_PARTIAL
        visited += 1
        considered += nd.count[node]
        pl = no_planes if whole else planes
        k, occluded, _ = _decide_objects(nd, pk, node, pl, eye, False, occ,
                                         whole and not occluding, out, k)
        occ_obj += occluded
        for j in range(8):
            c = nd.child[node, j]
            if c != -1:
                stack[top] = c
                inside[top] = whole
                top += 1
    return out[:k], considered, visited, occ_nodes, occ_obj, 0


# ---------------------------------------------------------------- box, sphere and ray


@njit(cache=True)
def query_region(nd, ob, pk, tree, sp, kind, q, qr, walk_infinite):
    """Box (kind BOX), sphere (SPHERE) or ray (RAY) query over the subtree sphere bounds.

    ``q`` is a (3, 3) array: rows (lo, hi, -) for a box, (centre, -, -) for a sphere and
    (origin, unit direction, inverse direction) for a ray. Returns (slots, entry distances).
    The unbounded list is walked only if ``walk_infinite`` (else the caller sieves its
    float32 copy).
    """
    t = tree[0]
    n = t.in_nodes + t.inf_count
    out = np.empty(n, dtype=np.int64)
    ts = np.empty(n, dtype=np.float64)
    k = 0
    qmag = qr
    for i in range(3):
        for a in range(3):
            if not math.isinf(q[i, a]):
                qmag = max(qmag, abs(q[i, a]))
    lo = np.empty(3)
    hi = np.empty(3)
    qa = q[0]
    qb = q[1]
    stack = np.empty(_stack_cap(nd, tree), dtype=np.int64)
    top = start_walk(stack, t.root)
    s = t.inf_head if walk_infinite else -1  # the infinite list first, then the blocks
    while s != -1:
        hit = region_hit(kind, sp.centers[s, 0], sp.centers[s, 1], sp.centers[s, 2],
                         sp.radii[s], qa, qb, qr)
        if hit >= 0.0:
            out[k] = s
            ts[k] = hit
            k += 1
        s = ob.next[s]
    while top > 0:
        top -= 1
        node = stack[top]
        if _is_empty(nd, node):
            continue
        lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], pad = _sphere_box(nd, node, qmag)
        if not _box_hit(lo, hi, kind, q, qr, pad):
            continue
        start = nd.pstart[node]
        for p in range(start, start + nd.plen[node]):
            hit = region_hit(kind, pk.center[p, 0], pk.center[p, 1], pk.center[p, 2],
                             pk.radius[p], qa, qb, qr)
            if hit >= 0.0:
                out[k] = pk.slot[p]
                ts[k] = hit
                k += 1
        top = push_children(nd.child, node, stack, top)
    return out[:k], ts[:k]


@njit(cache=True, inline="always")
def _box_hit(lo, hi, kind, q, qr, pad):
    """Conservative node test of a region query against padded subtree sphere bounds."""
    if kind == BOX:
        return (lo[0] <= q[1, 0] and hi[0] >= q[0, 0] and lo[1] <= q[1, 1]
                and hi[1] >= q[0, 1] and lo[2] <= q[1, 2] and hi[2] >= q[0, 2])
    if kind == SPHERE:
        d2 = 0.0
        for a in range(3):
            d = max(lo[a] - q[0, a], 0.0, q[0, a] - hi[a])
            d2 += d * d
        return math.sqrt(d2) <= qr + pad
    return ray_box_hits(q[0, 0], q[0, 1], q[0, 2], q[2, 0], q[2, 1], q[2, 2], lo, hi)
