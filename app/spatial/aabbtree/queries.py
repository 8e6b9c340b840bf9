"""Compiled traversals of the dynamic AABB tree: frustum (with view distance and occlusion),
box, sphere and ray queries (Shagam, section 2.2.1).

Every traversal uses an explicit stack, refits the dirty nodes it does not reject on their
stored (conservative) box (lazy AABB determination, 2.1.5) and splits the overfull leaves it
reaches (2.1.1): splits happen at query time, in all four query kinds, and only in nodes the
query does not reject, i.e. in the part of the tree the application is looking at.
Splitting never changes an answer: the final per-object decision is always the shared
predicate of ``app.geom.predicates``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.geom.predicates import (
    INSIDE,
    NODE_INSIDE,
    NODE_NOT_VISITED,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
    OUTSIDE,
    box_point_dist,
    box_vs_frustum,
    ray_box_hits,
    ray_sphere_entry,
    sphere_in_frustum,
    sphere_overlaps_box,
    spheres_touch,
    within_view_distance,
)
from app.geom.zpyramid import box_occluded, sphere_occluded
from app.spatial.aabbtree.kernels import ROOT, needs_split, refit_node, split_node


@njit(cache=True, inline="always")
def _push_children(child, nchild, n: int, stack, sp: int, tag: int) -> int:
    """Push n's children (encoded as node << MASK_BITS | tag) and return the new stack size."""
    if nchild[n] > 0:
        for j in range(child.shape[1]):
            ch = child[n, j]
            if ch >= 0:
                stack[sp] = (ch << MASK_BITS) | tag
                sp += 1
    return sp


LANES = 16  # object lists walked side by side (see _gather_objects)
MASK_BITS = 9  # stack entries are node << MASK_BITS | plane mask
MAX_MASKED_PLANES = 8  # plane masking for frusta of up to 8 planes (design.md: 6)


@njit(cache=True)
def _plane_subsets(planes):
    """For every plane mask, the rows of the planes in it, packed: (subsets, counts).

    With more planes than masks can index, a single entry (mask 1) holds all of them.
    """
    k = planes.shape[0]
    nmask = (1 << k) if k <= MAX_MASKED_PLANES else 2
    subsets = np.zeros((nmask, k, 4))
    counts = np.zeros(nmask, np.int64)
    for m in range(1, nmask):
        c = 0
        for p in range(k):
            if k > MAX_MASKED_PLANES or (m >> p) & 1:
                for a in range(4):
                    subsets[m, c, a] = planes[p, a]
                c += 1
        counts[m] = c
    return subsets, counts


@njit(cache=True, inline="always")
def _next_list(head, qnode, qmask, qi: int, nq: int):
    """(head, mask, next qi) of the next queued node with a non-empty list; head -1 if none."""
    while qi < nq:
        h = head[qnode[qi]]
        m = qmask[qi]
        qi += 1
        if h >= 0:
            return h, m, qi
    return -1, 0, qi


@njit(cache=True)
def _gather_objects(nd, ob, centers, radii, vdist, qnode, qmask, nq: int, subsets, counts,
                    eye, use_vd: bool, vp, zdata, zoff, zw, zh, out):
    """Final per-object decisions for the queued nodes' lists; (count, occluded objects).

    Pass 1 walks the lists. Walking one linked list is a chain of dependent loads, each a
    likely cache miss on a large store; walking LANES lists in turn, with a loop body kept
    tiny, lets many of those misses overlap. Objects of nodes inside the frustum go straight
    to the output, the others to a candidate buffer. Pass 2 tests the candidates in a plain
    loop whose loads do not depend on each other.

    qmask is the node's plane mask: 0 = inside the frustum (no frustum test), else only the
    planes its box straddles are tested (the others are passed by every sphere inside the
    box, exactly: same arithmetic, monotone rounding).
    """
    occl = zw.shape[0] > 0
    test_all = use_vd or occl
    cand = np.empty(out.shape[0], np.int64)
    cmask = np.empty(out.shape[0], np.int16)
    cur = np.full(LANES, -1, np.int64)
    md = np.zeros(LANES, np.int64)
    qi = 0
    active = 0
    for w in range(LANES):
        h, m, qi = _next_list(nd.head, qnode, qmask, qi, nq)
        if h >= 0:
            cur[w] = h
            md[w] = m
            active += 1
    k = 0
    nc = 0
    nxt_of = ob.next
    while active > 0:
        for w in range(LANES):
            s = cur[w]
            if s < 0:
                continue
            nxt = nxt_of[s]
            m = md[w]
            if m == 0 and not test_all:
                out[k] = s
                k += 1
            else:
                cand[nc] = s
                cmask[nc] = m
                nc += 1
            if nxt < 0:
                # This list is done: the lane takes the next queued node's list.
                nxt, m, qi = _next_list(nd.head, qnode, qmask, qi, nq)
                if nxt >= 0:
                    md[w] = m
                else:
                    active -= 1
            cur[w] = nxt

    ex = eye[0]
    ey = eye[1]
    ez = eye[2]
    occluded = 0
    for i in range(nc):
        s = cand[i]
        m = cmask[i]
        cx = centers[s, 0]
        cy = centers[s, 1]
        cz = centers[s, 2]
        r = radii[s]
        if use_vd and not within_view_distance(ex, ey, ez, cx, cy, cz, vdist[s]):
            continue
        if m != 0 and not sphere_in_frustum(subsets[m, :counts[m]], cx, cy, cz, r):
            continue
        if occl and sphere_occluded(cx, cy, cz, r, vp, zdata, zoff, zw, zh):
            occluded += 1
            continue
        out[k] = s
        k += 1
    return k, occluded


@njit(cache=True, inline="always")
def _classify(planes, mask: int, lo, hi) -> int:
    """The planes of ``mask`` that the box straddles (a new mask), or -1 if it is outside one.

    Each plane goes through geometry.box_vs_frustum on its own, so that the node test is
    the shared one; a frustum of more than MAX_MASKED_PLANES planes is tested whole (mask 1).
    """
    k = planes.shape[0]
    if k > MAX_MASKED_PLANES:
        cls = box_vs_frustum(planes, lo, hi)
        return -1 if cls == OUTSIDE else (0 if cls == INSIDE else 1)
    straddled = 0
    for p in range(k):
        if (mask >> p) & 1:
            cls = box_vs_frustum(planes[p:p + 1], lo, hi)
            if cls == OUTSIDE:
                return -1
            if cls != INSIDE:
                straddled |= 1 << p
    return straddled


@njit(cache=True)
def query_frustum(nd, ob, centers, radii, vdist, planes, eye, use_vd: bool,
                  vp, zdata, zoff, zw, zh, leafy: bool, threshold: int):
    """Visible slots and counters: (slots, working_set, nodes_visited, occ_nodes, occ_objects).

    Two phases: the node traversal decides which nodes' objects must be looked at (and
    against which planes), then :func:`_gather_objects` walks those lists. Each stack entry
    carries the planes its parent's box straddles; a node inside them all (mask 0) hands
    its whole subtree over without frustum tests. View distance and occlusion are still
    tested there, per node first (subtree max view distance, box occlusion) and then per
    object.
    """
    m = nd.parent.shape[0]
    nd.outcome[:] = NODE_NOT_VISITED
    occl = zw.shape[0] > 0
    subsets, counts = _plane_subsets(planes)
    full = subsets.shape[0] - 1
    low = (1 << MASK_BITS) - 1
    stack = np.empty(m + 1, np.int64)
    qnode = np.empty(m, np.int32)
    qmask = np.empty(m, np.int16)
    nq = 0
    stack[0] = (ROOT << MASK_BITS) | full
    sp = 1
    working = 0
    visited = 0
    occ_nodes = 0
    ex = eye[0]
    ey = eye[1]
    ez = eye[2]
    while sp > 0:
        sp -= 1
        e = stack[sp]
        n = e >> MASK_BITS
        mask = e & low
        inside = mask == 0
        visited += 1
        # Test the stored box first: it is conservative even when dirty, so a rejection is
        # final. Only a dirty node that survives is refitted (2.1.5) and tested again; the
        # big unsplit leaves just outside the view are never walked for a refit.
        rejected = NODE_NOT_VISITED
        newmask = 0
        for _attempt in range(2):
            lo = nd.lo[n]
            hi = nd.hi[n]
            rejected = NODE_NOT_VISITED
            newmask = 0
            if use_vd and box_point_dist(lo, hi, ex, ey, ez) > nd.maxvd[n]:
                rejected = NODE_REJECT_VIEWDIST
            elif not inside:
                newmask = _classify(planes, mask, lo, hi)
                if newmask < 0:
                    rejected = NODE_REJECT_FRUSTUM
            if rejected != NODE_NOT_VISITED or inside or not nd.dirty[n]:
                break
            refit_node(nd, ob, centers, radii, vdist, n, threshold)
            # An overfull leaf the query reached is split even if its refitted box turns out
            # to be outside: otherwise a big leaf grazing the view, dirtied by its movers,
            # would be walked for a refit every frame.
            if needs_split(nd.is_split, nd.count, n, threshold):
                split_node(nd, ob, centers, radii, vdist, n, leafy, threshold)
        if rejected != NODE_NOT_VISITED:
            nd.outcome[n] = rejected
            continue
        lo = nd.lo[n]
        hi = nd.hi[n]
        if occl and box_occluded(lo, hi, vp, zdata, zoff, zw, zh):
            nd.outcome[n] = NODE_REJECT_OCCLUSION
            occ_nodes += 1
            continue
        if newmask == 0:
            nd.outcome[n] = NODE_INSIDE
        else:
            nd.outcome[n] = NODE_PARTIAL
            if needs_split(nd.is_split, nd.count, n, threshold):
                split_node(nd, ob, centers, radii, vdist, n, leafy, threshold)
        if nd.count[n] > 0:
            working += nd.count[n]
            qnode[nq] = n
            qmask[nq] = newmask
            nq += 1
        sp = _push_children(nd.child, nd.nchild, n, stack, sp, newmask)
    # Every output is one of the working set: buffers of that size, not of the whole store
    # (a store-sized allocation is a fresh mapping whose touched pages fault every frame).
    out = np.empty(working, np.int64)
    k, occ_objects = _gather_objects(nd, ob, centers, radii, vdist, qnode, qmask, nq, subsets,
                                     counts, eye, use_vd, vp, zdata, zoff, zw, zh, out)
    return out[:k], working, visited, occ_nodes, occ_objects


@njit(cache=True, inline="always")
def _boxes_overlap(lo, hi, qlo, qhi) -> bool:
    return ((lo[0] <= qhi[0]) & (hi[0] >= qlo[0]) & (lo[1] <= qhi[1]) & (hi[1] >= qlo[1])
            & (lo[2] <= qhi[2]) & (hi[2] >= qlo[2]))


@njit(cache=True)
def query_box(nd, ob, centers, radii, vdist, qlo, qhi, leafy: bool, threshold: int,
              total: int):
    """Slots whose sphere's bounding box overlaps [qlo, qhi]."""
    out = np.empty(total, np.int64)
    stack = np.empty(nd.parent.shape[0] + 1, np.int64)
    stack[0] = ROOT << MASK_BITS
    sp = 1
    k = 0
    while sp > 0:
        sp -= 1
        n = stack[sp] >> MASK_BITS
        if not _boxes_overlap(nd.lo[n], nd.hi[n], qlo, qhi):
            continue
        if nd.dirty[n]:
            refit_node(nd, ob, centers, radii, vdist, n, threshold)
            if not _boxes_overlap(nd.lo[n], nd.hi[n], qlo, qhi):
                continue
        if needs_split(nd.is_split, nd.count, n, threshold):
            split_node(nd, ob, centers, radii, vdist, n, leafy, threshold)
        s = nd.head[n]
        while s >= 0:
            if sphere_overlaps_box(centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                                   qlo, qhi):
                out[k] = s
                k += 1
            s = ob.next[s]
        sp = _push_children(nd.child, nd.nchild, n, stack, sp, 0)
    return out[:k]


@njit(cache=True)
def query_sphere(nd, ob, centers, radii, vdist, q, qr: float, leafy: bool, threshold: int,
                 total: int):
    """Slots with ``|c - q| <= r + qr``."""
    out = np.empty(total, np.int64)
    stack = np.empty(nd.parent.shape[0] + 1, np.int64)
    stack[0] = ROOT << MASK_BITS
    sp = 1
    k = 0
    qx = q[0]
    qy = q[1]
    qz = q[2]
    # A node is pruned when its box is farther than qr; the slack covers rounding in the
    # distance so that a sphere exactly touching the query is never pruned.
    reach = qr + 1e-9 * (1.0 + qr + abs(qx) + abs(qy) + abs(qz))
    while sp > 0:
        sp -= 1
        n = stack[sp] >> MASK_BITS
        if box_point_dist(nd.lo[n], nd.hi[n], qx, qy, qz) > reach:
            continue
        if nd.dirty[n]:
            refit_node(nd, ob, centers, radii, vdist, n, threshold)
            if box_point_dist(nd.lo[n], nd.hi[n], qx, qy, qz) > reach:
                continue
        if needs_split(nd.is_split, nd.count, n, threshold):
            split_node(nd, ob, centers, radii, vdist, n, leafy, threshold)
        s = nd.head[n]
        while s >= 0:
            if spheres_touch(centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                             qx, qy, qz, qr):
                out[k] = s
                k += 1
            s = ob.next[s]
        sp = _push_children(nd.child, nd.nchild, n, stack, sp, 0)
    return out[:k]


@njit(cache=True)
def query_ray(nd, ob, centers, radii, vdist, o, d, leafy: bool, threshold: int, total: int):
    """(slots, entry distances) of spheres hit by the ray from o along unit direction d."""
    out = np.empty(total, np.int64)
    ts = np.empty(total, np.float64)
    stack = np.empty(nd.parent.shape[0] + 1, np.int64)
    stack[0] = ROOT << MASK_BITS
    sp = 1
    k = 0
    ox = o[0]
    oy = o[1]
    oz = o[2]
    dx = d[0]
    dy = d[1]
    dz = d[2]
    idx = 1.0 / dx if dx != 0.0 else math.inf
    idy = 1.0 / dy if dy != 0.0 else math.inf
    idz = 1.0 / dz if dz != 0.0 else math.inf
    while sp > 0:
        sp -= 1
        n = stack[sp] >> MASK_BITS
        if not ray_box_hits(ox, oy, oz, idx, idy, idz, nd.lo[n], nd.hi[n]):
            continue
        if nd.dirty[n]:
            refit_node(nd, ob, centers, radii, vdist, n, threshold)
            if not ray_box_hits(ox, oy, oz, idx, idy, idz, nd.lo[n], nd.hi[n]):
                continue
        if needs_split(nd.is_split, nd.count, n, threshold):
            split_node(nd, ob, centers, radii, vdist, n, leafy, threshold)
        s = nd.head[n]
        while s >= 0:
            t = ray_sphere_entry(ox, oy, oz, dx, dy, dz,
                                 centers[s, 0], centers[s, 1], centers[s, 2], radii[s])
            if t >= 0.0:
                out[k] = s
                ts[k] = t
                k += 1
            s = ob.next[s]
        sp = _push_children(nd.child, nd.nchild, n, stack, sp, 0)
    return out[:k], ts[:k]
