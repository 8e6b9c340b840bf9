"""The fixed octree's queries: frustum (with view distance and occlusion), box, sphere, ray.

Frustum query
    Nodes are tested through their subtree bounds with the node decision of
    :func:`~app.geom.decide.node_verdict6` (view distance against the subtree's max view
    distance, the planes, the Z-pyramid; written out, see :func:`frustum`); a node inside
    the planes (and, with view distance, whose farthest point is within the subtree's min
    view distance, and with no occlusion) is accepted wholesale: a clean subtree as one copy
    of its entry run, without visiting its nodes (``node_outcomes`` marks them inside on
    demand, for the overlay, through :func:`fill_inside`), others by walking them.
    Otherwise its own objects are tested with the per-object decision of
    :func:`~app.geom.decide.accept_sphere` (written out too).
    ``working_set`` counts tested plus wholesale-accepted objects; ``nodes_visited`` counts
    tested nodes plus the nodes walked to collect accepted subtrees (a bulk-copied subtree
    counts as one). Children are pushed so that they pop in octant order, which is the
    renumbered memory order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.geom.decide import (
    REGION_BOX,
    REGION_RAY,
    REGION_SPHERE,
    VIEWDIST_SLACK,
    region_hit,
)
from app.geom.predicates import (
    INSIDE,
    NODE_INSIDE,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
    OUTSIDE,
    box_point_dist6,
    box_point_far6,
    box_vs_frustum6,
    ray_box_hits,
    sphere_in_frustum,
    within_view_distance,
)
from app.geom.zpyramid import box_hidden6, sphere_hidden
from app.spatial.prefetch import prefetch

# Relative slack of the "every sphere below is within its view distance" test: rounding can
# only make the wholesale acceptance rarer, never accept an object that fails the test.
_SLACK = 1e-12


@njit(cache=True, inline="always")
def _push_children(node, n, stack, sp):
    """Push n's non-empty children so that they pop in octant order (memory order after a
    renumbering); returns the new stack size. Takes the records, not the node bundle: every
    kernel here reads the bundles' fields once, since each ``bundle.field`` read in a loop
    (or bundle passed to an inlined call) costs a reference count pair per field."""
    for c in range(7, -1, -1):
        ch = node[n].child[c]
        if ch >= 0 and node[ch].subcount > 0:
            stack[sp] = ch
            sp += 1
    return sp


@njit(cache=True)
def collect(top, nd, en, out, k, outcome, stack):
    """Append every object of the subtree of ``top`` to ``out``; returns (k, nodes walked).

    A clean subtree (entries laid out by renumber, nothing relinked in it since) is one
    contiguous run of entries: copied without walking its nodes. Its nodes below are marked
    inside for the overlay only on demand (:func:`fill_inside`).
    """
    node = nd.node
    eslot = en.slot
    enext = en.next
    sp = 1
    stack[0] = top
    walked = 0
    while sp > 0:
        sp -= 1
        n = stack[sp]
        walked += 1
        outcome[n] = NODE_INSIDE
        rec = node[n]
        if rec.clean != 0:
            e0 = rec.estart
            m = rec.subcount
            for j in range(m):
                out[k + j] = eslot[e0 + j]
            k += m
            continue
        s = rec.head
        while s >= 0:
            out[k] = eslot[s]
            k += 1
            s = enext[s]
        sp = _push_children(node, n, stack, sp)
    return k, walked


@njit(cache=True)
def fill_inside(root, nd, stack):
    """Mark inside the non-empty nodes below inside nodes that a bulk copy did not visit."""
    if root < 0:
        return
    node = nd.node
    outcome = nd.outcome
    sp = 1
    stack[0] = root
    while sp > 0:
        sp -= 1
        n = stack[sp]
        inside = outcome[n] == NODE_INSIDE
        for c in range(7, -1, -1):
            ch = node[n].child[c]
            if ch >= 0 and node[ch].subcount > 0:
                if inside and outcome[ch] == 0:
                    outcome[ch] = NODE_INSIDE
                stack[sp] = ch
                sp += 1


@njit(cache=True)
def frustum(root, nd, en, planes, eye, use_vd, occ, out, stack, inside_stack, stack2):
    """Cull the tree: reject nodes, accept inside subtrees wholesale, test the rest.

    Returns (visible count, working set, nodes visited, occluded nodes, objects culled by
    occlusion, objects culled by view distance): a rejected node counts its whole subtree
    under its test (the frustum's are the rest), a tested object under the first it fails.
    """
    occl = occ.widths.shape[0] > 0
    k = 0
    ws = 0
    visited = 0
    occ_nodes = 0
    occ_objs = 0
    far = 0
    node = nd.node
    if root < 0 or node[root].subcount == 0:
        return k, ws, visited, occ_nodes, occ_objs, far
    # The decisions are node_verdict6's and accept_sphere's, written out: those take the
    # Occluder by value, and an inlined call copies the tuple (a reference count pair per
    # array, every node and every object): with them this loop took 0.9 ms instead of 0.14
    # on the static bench scene (100k objects, no occlusion). Below an inside node the
    # planes are not tested again, and the occluder is only touched when occlusion is on.
    outcome = nd.outcome
    sph = en.sphere
    nxt = en.next
    slot = en.slot
    sp = 1
    stack[0] = root
    inside_stack[0] = 0
    while sp > 0:
        sp -= 1
        n = stack[sp]
        visited += 1
        rec = node[n]
        lx = rec.tlo[0]
        ly = rec.tlo[1]
        lz = rec.tlo[2]
        hx = rec.thi[0]
        hy = rec.thi[1]
        hz = rec.thi[2]
        inside = inside_stack[sp] != 0
        if use_vd and box_point_dist6(lx, ly, lz, hx, hy, hz, eye[0], eye[1], eye[2]) > (
                rec.vmax * (1.0 + VIEWDIST_SLACK)):
            outcome[n] = NODE_REJECT_VIEWDIST
            far += rec.subcount
            continue
        if not inside:
            cls = box_vs_frustum6(planes, lx, ly, lz, hx, hy, hz)
            if cls == OUTSIDE:
                outcome[n] = NODE_REJECT_FRUSTUM
                continue
            inside = cls == INSIDE
        if occl and box_hidden6(occ, lx, ly, lz, hx, hy, hz):
            outcome[n] = NODE_REJECT_OCCLUSION
            occ_nodes += 1
            occ_objs += rec.subcount
            continue
        if inside and not occl and (not use_vd or box_point_far6(
                lx, ly, lz, hx, hy, hz, eye[0], eye[1], eye[2]) * (1.0 + _SLACK) <= rec.vmin):
            # every sphere below is inside the planes and within its view distance
            k0 = k
            k, walked = collect(n, nd, en, out, k, outcome, stack2)
            ws += k - k0
            visited += walked - 1
            continue
        outcome[n] = NODE_INSIDE if inside else NODE_PARTIAL
        s = rec.head
        while s >= 0:
            ws += 1
            rs = sph[s]
            cx = rs.cx
            cy = rs.cy
            cz = rs.cz
            r = rs.radius
            ok = not use_vd or within_view_distance(eye[0], eye[1], eye[2], cx, cy, cz, rs.vdist)
            far += not ok
            if ok and not inside:
                ok = sphere_in_frustum(planes, cx, cy, cz, r)
            if ok and occl and sphere_hidden(occ, cx, cy, cz, r):
                occ_objs += 1
                ok = False
            if ok:
                out[k] = slot[s]
                k += 1
            s = nxt[s]
        for c in range(7, -1, -1):  # popped in octant order: memory order
            ch = rec.child[c]
            if ch >= 0 and node[ch].subcount > 0:
                # Its bounds asked for now, with its siblings': the records lie all over a
                # pool of 120 MB at 10^6 (627,590 nodes), and one node at a time each pop
                # waited for its own miss (the walk from a cold cache 1.65 -> 1.5 ms).
                prefetch(node, ch)
                stack[sp] = ch
                inside_stack[sp] = 1 if inside else 0
                sp += 1
    return k, ws, visited, occ_nodes, occ_objs, far


@njit(cache=True, inline="always")
def _box_touches(tlo, thi, qlo, qhi):
    return not (tlo[0] > qhi[0] or thi[0] < qlo[0] or tlo[1] > qhi[1] or thi[1] < qlo[1]
                or tlo[2] > qhi[2] or thi[2] < qlo[2])


@njit(cache=True, inline="always")
def _box_within(tlo, thi, qlo, qhi):
    """The box [tlo, thi] lies in [qlo, qhi]."""
    inside = True
    for a in range(3):
        if tlo[a] < qlo[a] or thi[a] > qhi[a]:
            inside = False
    return inside


@njit(cache=True, inline="always")
def _node_hit(kind, tlo, thi, qa, qb, reach, idx, idy, idz):
    """The subtree box [tlo, thi] may hold an answer of the region query (conservative)."""
    if kind == REGION_BOX:
        return _box_touches(tlo, thi, qa, qb)
    if kind == REGION_SPHERE:
        return box_point_dist6(tlo[0], tlo[1], tlo[2], thi[0], thi[1], thi[2],
                               qa[0], qa[1], qa[2]) <= reach
    return ray_box_hits(qa[0], qa[1], qa[2], idx, idy, idz, tlo, thi)


@njit(cache=True)
def region(root, nd, en, kind, qa, qb, qr, out, ts, stack, stack2, scratch):
    """Slots (and, for a ray, entry distances in ``ts``; unused otherwise) of the spheres a
    region query keeps; returns their count in ``out``. The kinds and qa, qb, qr are those of
    :func:`~app.geom.decide.region_hit`.

    A box query takes a subtree whose bounding box lies in the query box whole
    (:func:`collect`); ``scratch`` (per node) takes its marks, so that the last frustum
    query's outcomes stay as they were.
    """
    k = 0
    node = nd.node
    if root < 0 or node[root].subcount == 0:
        return k
    reach = qr * (1.0 + 1e-9) + 1e-9 * (1.0 + abs(qa[0]) + abs(qa[1]) + abs(qa[2]))
    idx = 1.0 / qb[0] if qb[0] != 0.0 else np.inf
    idy = 1.0 / qb[1] if qb[1] != 0.0 else np.inf
    idz = 1.0 / qb[2] if qb[2] != 0.0 else np.inf
    sph = en.sphere
    eslot = en.slot
    enext = en.next
    sp = 1
    stack[0] = root
    while sp > 0:
        sp -= 1
        n = stack[sp]
        tlo = node[n].tlo
        thi = node[n].thi
        if not _node_hit(kind, tlo, thi, qa, qb, reach, idx, idy, idz):
            continue
        if kind == REGION_BOX and _box_within(tlo, thi, qa, qb):
            # the whole subtree's bounding box lies in the query box: all spheres overlap it
            k, _w = collect(n, nd, en, out, k, scratch, stack2)
            continue
        s = node[n].head
        while s >= 0:
            t = region_hit(kind, sph[s].cx, sph[s].cy, sph[s].cz, sph[s].radius, qa, qb, qr)
            if t >= 0.0:
                out[k] = eslot[s]
                if kind == REGION_RAY:
                    ts[k] = t
                k += 1
            s = enext[s]
        sp = _push_children(node, n, stack, sp)
    return k


@njit(cache=True)
def box(root, nd, en, qlo, qhi, out, stack, stack2, scratch):
    """Slots of the spheres overlapping the box [qlo, qhi]; returns their count in ``out``."""
    return region(root, nd, en, REGION_BOX, qlo, qhi, 0.0, out, np.empty(0), stack,
                  stack2, scratch)


@njit(cache=True)
def sphere(root, nd, en, q, qr, out, stack):
    """Slots of the spheres touching the sphere (q, qr); returns their count in ``out``."""
    return region(root, nd, en, REGION_SPHERE, q, q, qr, out, np.empty(0), stack,
                  stack, np.empty(0, np.int8))


@njit(cache=True)
def ray(root, nd, en, o, d, out, ts, stack):
    """Slots and entry distances of the spheres the ray hits; returns their count."""
    return region(root, nd, en, REGION_RAY, o, d, 0.0, out, ts, stack, stack,
                  np.empty(0, np.int8))
