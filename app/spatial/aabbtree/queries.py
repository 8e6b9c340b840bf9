"""Compiled traversals of the dynamic AABB tree: frustum (with view distance and occlusion),
box, sphere and ray queries (Shagam, section 2.2.1).

In our mode the traversals are read-only on the tree's shape: a node they do not reject
that is dirty (its stored box may be loose, 2.1.5) or an overfull leaf (2.1.1) is answered
from as it is (its stored box is conservative, its list complete) and noted on the pending
list; the upkeep (:func:`~.upkeep.maintain`, run by the tree outside queries) refits and
splits it. The paper's laziness stays: only nodes a query reached are ever split.
Splitting never changes an answer: the decisions are the shared ones, per node
(:func:`~app.geom.decide.node_verdict_masked`, against the planes the parent's box straddles) and
per object (:func:`~app.geom.decide.accept_sphere`'s stages for the frustum, written out for
speed; the predicates of ``app.geom.predicates`` for the other queries).

In the paper mode with its extents bookkeeping (PAPER_LAZY) every node a traversal reaches
is first brought up to date as the listing's ``GetExtents`` does (recomputed if invalid,
split if overfull; :func:`~.paper.reach_node`), before its box is tested, and not
refitted again within the visit (a pathological split leaves its node invalid until the next
visit, as in the listing).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.core import types
from numba.extending import overload

from app.geom.decide import (
    MASKED_PLANES,
    REGION_BOX,
    REGION_RAY,
    REGION_SPHERE,
    VIEWDIST_SLACK,
    node_verdict_masked,
    region_hit,
)
from app.geom.predicates import (
    NODE_INSIDE,
    NODE_NOT_VISITED,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
    box_point_dist,
    box_point_dist6,
    ray_box_hits,
)
from app.geom.zpyramid import OCCLUSION_OFF, box_hidden6
from app.spatial.aabbtree.bounds import record_sphere
from app.spatial.aabbtree.paper import reach_node
from app.spatial.aabbtree.pool import CATCHUP_ASKED, META_CATCHUP, META_WANT_GROW, ROOT, LazyRules
from app.spatial.aabbtree.split import needs_split, reach_rules, split_node
from app.spatial.aabbtree.upkeep import GUARD_OBJECTS, near_view, note_node
from app.spatial.scan import (
    FAST,
    OUT,
    SphereTest,
    compact,
    distance_code,
    many_plane_code,
    settle,
    six_plane_code,
    tolerances32,
    verdict_words,
)
from app.spatial.sieve import (
    query_magnitude,
    query_term,
    ray_may_hit,
    settle_region,
    sieve_box,
    sieve_sphere,
)

MASK_BITS = 9  # stack entries are node << MASK_BITS | plane mask


@njit(cache=True, inline="always")
def _push_children(child, nchild, n: int, stack, top: int, tag: int) -> int:
    """Push n's children (encoded as node << MASK_BITS | tag) and return the new stack size."""
    if nchild[n] > 0:
        for j in range(child.shape[1]):
            ch = child[n, j]
            if ch >= 0:
                stack[top] = (ch << MASK_BITS) | tag
                top += 1
    return top


@njit(cache=True, inline="always")
def _verdict(lo, hi, maxvd, n: int, planes, k: int, mask: int, use_vd: bool,
             eye: tuple) -> tuple[int, int]:
    """The shared node decision's view distance and frustum stages on node n's stored box
    and subtree view distance, against the planes of ``mask`` (those its parent's box
    straddles), and the planes its own box straddles.

    Takes the pool's arrays, not the Nodes tuple: numba reference-counts every array of a
    tuple handed to an inlined helper, and with the tuple passed at every node the frustum
    query took 2.5x as long (static workload, 10^5 objects).
    """
    return node_verdict_masked(planes, k, mask, use_vd, eye,
                               (lo[n, 0], lo[n, 1], lo[n, 2], hi[n, 0], hi[n, 1], hi[n, 2]),
                               maxvd[n])


@njit(cache=True, inline="always")
def _objects_below(child, nchild, count, n: int, stack, top: int) -> int:
    """Objects in node n's subtree (its list and every list below), for the stage counts of
    a node rejected by view distance or occlusion; walks only nodes, on the free part of the
    traversal's stack above ``top`` (the subtree and the pending entries are distinct nodes,
    so the stack has room for both)."""
    total = 0
    stack[top] = n << MASK_BITS
    sp = top + 1
    while sp > top:
        sp -= 1
        k = stack[sp] >> MASK_BITS
        total += count[k]
        sp = _push_children(child, nchild, k, stack, sp, 0)
    return total


@njit(cache=True, fastmath=FAST)
def _scan_blocks(ob, start, count, qnode, qmask, nq: int, t: SphereTest, test_all: bool,
                 codes) -> int:
    """The branch-free float32 verdict bytes (:mod:`app.spatial.scan`) of every object of the
    queued nodes that needs a test (all of them with view distance or occlusion; otherwise
    those of nodes not inside the planes); returns how many view distance culls for certain.

    One range a node: a node's objects are contiguous, so the lane loop vectorises as the
    flat scan does (unsigned positions: no negative-index checks). Every frustum plane is
    tested, not only the straddled ones: six planes cost the vector loop no more than two.
    """
    # The records as one flat array: indexed rec[i, a], the row stride is a run-time value
    # to the compiler, which then loads lane by lane (3.3 ns a sphere against 0.3-0.8 ns
    # with the constant stride of 4 * i + a).
    rec = ob.rec.reshape(ob.rec.size)
    vd = ob.vd
    p32 = t.planes
    ex = t.eye[0]
    ey = t.eye[1]
    ez = t.eye[2]
    use_vd = t.use_vd
    tol = np.float32(t.tol)
    tol_d = np.float32(t.tol_d)
    six = p32.shape[0] == 6
    far = 0
    for j in range(nq):
        if qmask[j] == 0 and not test_all:
            continue
        n = qnode[j]
        p0 = np.uint64(start[n])
        for lane in range(count[n]):
            i = p0 + np.uint64(lane)
            f = i * np.uint64(4)
            xi = rec[f]
            yi = rec[f + np.uint64(1)]
            zi = rec[f + np.uint64(2)]
            ri = rec[f + np.uint64(3)]
            if six:
                code = six_plane_code(p32, xi, yi, zi, ri, tol)
            else:
                code = many_plane_code(p32, xi, yi, zi, ri, tol)
            if use_vd:
                c2 = distance_code(xi - ex, yi - ey, zi - ez, vd[i], tol_d)
                code = c2 if c2 < code else code
                far += c2 == OUT
            codes[i] = code
    return far


@njit(cache=True)
def _sphere_test(nd, planes, eye, use_vd: bool) -> SphereTest:
    """The float32 test of the planes and eye for every sphere in the tree: the tolerances
    are bounded by the root's box, which holds them all."""
    max_abs = 0.0
    max_r = 0.0
    for a in range(3):
        max_abs = max(max_abs, abs(nd.lo[ROOT, a]), abs(nd.hi[ROOT, a]))
        max_r = max(max_r, (nd.hi[ROOT, a] - nd.lo[ROOT, a]) / 2)
    p32, tol, tol_d = tolerances32(planes, eye, max_abs, max_r)
    return SphereTest(p32, eye.astype(np.float32), use_vd, tol, tol_d)


@njit(cache=True)
def _gather_blocks(nd, ob, sp, qnode, qmask, planes, eye, use_vd: bool, occ, codes,
                   working: int):
    """Final per-object decisions for the queued nodes' blocks: (drawn ids, occluded
    objects, objects culled by view distance).

    A node inside the frustum (mask 0) hands over its block's slots untested unless view
    distance or occlusion is on; the other blocks are scanned in float32
    (:func:`_scan_blocks`), compacted, and the few within float32's tolerance decided again
    in float64 by the contract's predicate (:func:`app.spatial.scan.settle`), which also
    tests the drawn ones for occlusion.
    """
    test_all = use_vd or occ.widths.shape[0] > 0
    start = nd.start
    count = nd.count
    nq = qnode.shape[0]
    far = _scan_blocks(ob, start, count, qnode, qmask, nq, _sphere_test(nd, planes, eye, use_vd),
                       test_all, codes)
    sure = np.empty(working + 8, np.int64)
    near = np.empty(working + 8, np.int64)
    words = verdict_words(codes)
    ns = 0
    nn = 0
    for j in range(nq):
        n = qnode[j]
        b = start[n]
        if qmask[j] == 0 and not test_all:
            for p in range(b, b + count[n]):
                sure[ns] = p
                ns += 1
        else:
            ns, nn, _ = compact(codes, words, b, b + count[n], sure, ns, near, nn)
    k, occluded, outside = settle(sure, ns, near, nn, sp.centers, sp.radii, sp.vdist, planes,
                                  eye, use_vd, occ, ob.slot)
    out = np.empty(k, np.int64)
    ident = ob.ident  # the answer's ids, read in block order (not gathered from the store)
    for i in range(k):
        out[i] = ident[sure[i]]
    # The NEAR ones the settle found beyond their view distance: neither drawn nor occluded
    # (k + occluded - ns of them, the sure ones being one or the other) nor outside.
    far += nn - (k + occluded - ns) - outside
    return out, occluded, far


@njit(cache=True)
def query_frustum(nd, ob, sp, planes, eye, use_vd: bool, rules, catchup: int, share: float,
                  pd, codes):
    """Visible ids and counters without occlusion: (ids, working_set, nodes_visited,
    occ_nodes, occ_objects, far_objects), occ_* 0; far_objects: culled by view distance.

    Stage counts: a node rejected by view distance or occlusion counts its subtree's objects
    under that test (:func:`_objects_below`), one rejected by the frustum is left to the rest;
    an object tested alone counts under the first test it fails.

    The traversal gets the constant OCCLUSION_OFF, whose arrays numba does not reference-count
    (passing the caller's occluder into the shared node test at every node made the query
    1.5x slower) and whose type leaves the pyramid tests out at compile time. A kernel of its
    own (not a branch on the occluder) so that a run without occlusion never compiles the
    occluded traversal (3-6 s at the first start).
    """
    return _frustum(nd, ob, sp, planes, eye, use_vd, OCCLUSION_OFF, rules, catchup, share, pd,
                    codes)


@njit(cache=True)
def query_frustum_occluded(nd, ob, sp, planes, eye, use_vd: bool, occ, rules, catchup: int,
                           share: float, pd, codes):
    """:func:`query_frustum` against the Z-pyramid ``occ``."""
    return _frustum(nd, ob, sp, planes, eye, use_vd, occ, rules, catchup, share, pd, codes)


def _frustum(nd, ob, sp, planes, eye, use_vd: bool, occ, rules, catchup: int, share: float,
             pd, codes):
    """:func:`query_frustum`'s traversal: our mode's tests a node's children together
    (:func:`_frustum_wide`), the paper mode's each node as it reaches it
    (:func:`_frustum_lazy`). Chosen by the rules' type when a query kernel is compiled (as
    :func:`~.paper.reach_node` is), so that each mode compiles its own traversal only."""
    raise NotImplementedError("only callable from compiled code")


@overload(_frustum)
def _frustum_for_rules(nd, ob, sp, planes, eye, use_vd, occ, rules, catchup, share, pd, codes):
    if isinstance(rules, types.BaseNamedTuple) and rules.instance_class is LazyRules:
        def lazy(nd, ob, sp, planes, eye, use_vd, occ, rules, catchup, share, pd, codes):
            return _frustum_lazy(nd, ob, sp, planes, eye, use_vd, occ, rules, catchup, share,
                                 pd, codes)
        return lazy

    def wide(nd, ob, sp, planes, eye, use_vd, occ, rules, catchup, share, pd, codes):
        return _frustum_wide(nd, ob, sp, planes, eye, use_vd, occ, rules, catchup, share, pd,
                             codes)
    return wide


@njit(cache=True)
def _frustum_lazy(nd, ob, sp, planes, eye, use_vd: bool, occ, rules, catchup: int,
                  share: float, pd, codes):
    """The paper mode's traversal (every node brought up to date as it is reached), one node
    at a time. Given our mode's rules it is our mode's traversal as it was before
    :func:`_frustum_wide`, which the tests hold that one to (both note a node that passes
    through :func:`_note_reached`).

    Two phases: the node traversal decides which nodes' objects must be looked at (and
    against which planes), then :func:`_gather_blocks` scans their blocks. When the overfull
    leaves it noted hold more than ``catchup`` objects or ``share`` of its working set, it
    stops before the objects and sets META_CATCHUP (the caller catches up and asks again).
    Each stack entry carries the planes its parent's box straddles; a node inside them all
    (mask 0) hands its whole subtree over without frustum tests. View distance and
    occlusion are still tested there, per node first (subtree max view distance, box
    occlusion) and then per object.
    """
    m = nd.parent.shape[0]
    nd.outcome[:] = NODE_NOT_VISITED
    k = planes.shape[0]
    six = k == 6
    eye3 = (eye[0], eye[1], eye[2])
    has_occ = occ.widths.shape[0] > 0
    full = ((1 << k) - 1) if k <= MASKED_PLANES else 1
    low = (1 << MASK_BITS) - 1
    stack = np.empty(m + 1, np.int64)
    qnode = np.empty(m, np.int32)
    qmask = np.empty(m, np.int16)
    nq = 0
    stack[0] = (ROOT << MASK_BITS) | full
    top = 1
    working = 0
    visited = 0
    occ_nodes = 0
    occ_objects = 0
    far = 0
    lazy, limit = reach_rules(rules)
    noted_objects = 0  # objects in the overfull leaves noted for a split
    noted, pending, npend = pd.noted, pd.pending, pd.count
    # The pool's arrays as locals: numba reference-counts a tuple's arrays at every use in a
    # loop (with them read through ``nd`` at each node the traversal cost ~2x as much).
    lo, hi, maxvd, outcome, count = nd.lo, nd.hi, nd.maxvd, nd.outcome, nd.count
    child, nchild, dirty, is_split = nd.child, nd.nchild, nd.dirty, nd.is_split
    while top > 0:
        top -= 1
        e = stack[top]
        n = e >> MASK_BITS
        mask = e & low
        visited += 1
        if lazy:
            reach_node(nd, ob, sp, n, rules, limit)
        if six:  # a literal count: the plane loop unrolls
            v, newmask = _verdict(lo, hi, maxvd, n, planes, 6, mask, use_vd, eye3)
        else:
            v, newmask = _verdict(lo, hi, maxvd, n, planes, k, mask, use_vd, eye3)
        if has_occ and v <= NODE_PARTIAL and box_hidden6(occ, lo[n, 0], lo[n, 1], lo[n, 2],
                                                        hi[n, 0], hi[n, 1], hi[n, 2]):
            v = NODE_REJECT_OCCLUSION
        outcome[n] = v
        if v not in (NODE_PARTIAL, NODE_INSIDE):
            if (v == NODE_REJECT_FRUSTUM and not lazy and count[n] > GUARD_OBJECTS
                    and needs_split(is_split, count, n, limit)
                    and near_view(planes, lo[n, 0], lo[n, 1], lo[n, 2], hi[n, 0], hi[n, 1],
                                  hi[n, 2])):
                # A big leaf beside the view is split before a mover stretches it into the
                # view (upkeep.near_view); not in the working set, so not in noted_objects.
                note_node(noted, pending, npend, n)
            if v == NODE_REJECT_OCCLUSION:
                occ_nodes += 1
                occ_objects += _objects_below(child, nchild, count, n, stack, top)
            elif v == NODE_REJECT_VIEWDIST:
                far += _objects_below(child, nchild, count, n, stack, top)
            continue
        if lazy:
            # The paper mode splits where the listing does: reach_node did; this is a split
            # it skipped for lack of nodes.
            if v == NODE_PARTIAL and needs_split(nd.is_split, nd.count, n, limit):
                split_node(nd, ob, sp, n, rules)
        elif mask != 0:
            # Below a node inside the planes nothing is noted, as nothing was refitted or
            # split there before.
            noted_objects += _note_reached(noted, pending, npend, dirty, is_split, count, n,
                                           limit)
        if count[n] > 0:
            working += count[n]
            qnode[nq] = n
            qmask[nq] = newmask
            nq += 1
        top = _push_children(child, nchild, n, stack, top, newmask)
    return _finish(nd, ob, sp, (qnode[:nq], qmask[:nq]), planes, eye, use_vd, occ, codes,
                   (working, visited, occ_nodes, occ_objects, far, noted_objects),
                   (catchup, share))


@njit(cache=True, inline="always")
def _note_reached(noted, pending, npend, dirty, is_split, count, n: int, limit: int) -> int:
    """A node a query reached across a plane: on the upkeep's list when its box is dirty or
    it is overfull; returns the objects that adds to the noted overfull ones. Read-only: the
    stored box is conservative even when dirty, so the answer is exact from the node as it
    is; the upkeep refits it (2.1.5) and splits it if overfull (2.1.1)."""
    over = needs_split(is_split, count, n, limit)
    if not (dirty[n] or over):
        return 0
    note_node(noted, pending, npend, n)
    return count[n] if over else 0


@njit(cache=True)
def _finish(nd, ob, sp, queued, planes, eye, use_vd: bool, occ, codes, counts, asks):
    """The end of a frustum traversal: a catch-up or a pool growth asked for, else the queued
    blocks' objects decided (:func:`_gather_blocks`). ``queued`` = (nodes, their masks),
    ``counts`` = (working, visited, occ_nodes, occ_objects, far, noted_objects), ``asks`` =
    (catchup, share)."""
    working, visited, occ_nodes, occ_objects, far, noted_objects = counts
    catchup, share = asks
    if nd.meta[META_CATCHUP] == 0 and (noted_objects > catchup or noted_objects > share * working):
        # The tree is badly out of shape for this view (a big scene's first query; unsplit
        # leaves would be most of the objects to look at): the
        # caller runs the upkeep without a budget and asks again, and this run's answer
        # would be thrown away.
        nd.meta[META_CATCHUP] = CATCHUP_ASKED
        return np.empty(0, np.int64), working, visited, occ_nodes, 0, 0
    if nd.meta[META_WANT_GROW]:
        # A split was skipped for lack of nodes: the caller grows the pool and runs the query
        # again, so this run's answer would be thrown away. Testing the objects of the big
        # unsplit leaves it reached cost the first query of 10^6 objects about a third.
        return np.empty(0, np.int64), working, visited, occ_nodes, 0, 0
    # Every output is one of the working set: buffers of that size, not of the whole store
    # (a store-sized allocation is a fresh mapping whose touched pages fault every frame).
    out, occ_each, far_each = _gather_blocks(nd, ob, sp, queued[0], queued[1], planes, eye,
                                             use_vd, occ, codes, working)
    return out, working, visited, occ_nodes, occ_objects + occ_each, far + far_each


@njit(cache=True)
def _frustum_wide(nd, ob, sp, planes, eye, use_vd: bool, occ, rules, catchup: int,
                  share: float, pd, codes):
    """Our mode's traversal: a node's children are tested together, their boxes gathered
    into lane arrays and every plane its box straddles tested over the lanes in one loop
    that vectorises (issue 25, item 4); only the children that pass are pushed, each with
    the planes its box straddles and its parent's.

    The decisions are :func:`~app.geom.decide.node_verdict_masked`'s (view distance, then
    the frustum against the parent's planes) and the occlusion test's, with the same
    arithmetic, so every node's outcome is the one the node-by-node traversal gives. The
    pool's sibling order does not matter here (siblings in adjacent node ids measured no
    faster: the pools fit the second-level cache); testing one node at a time cost 20-30 ns
    a node, most of a static query's traversal.
    """
    nd.outcome[:] = NODE_NOT_VISITED
    k = planes.shape[0]
    eye3 = (eye[0], eye[1], eye[2])
    ex, ey, ez = eye[0], eye[1], eye[2]
    has_occ = occ.widths.shape[0] > 0
    full = ((1 << k) - 1) if k <= MASKED_PLANES else 1
    low = (1 << MASK_BITS) - 1
    stack = np.empty(nd.parent.shape[0] + 1, np.int64)
    qnode = np.empty(nd.parent.shape[0], np.int32)
    qmask = np.empty(nd.parent.shape[0], np.int16)
    nq = 0
    working = 0
    occ_nodes = 0
    occ_objects = 0
    far = 0
    limit = reach_rules(rules)[1]
    noted_objects = 0  # objects in the overfull leaves noted for a split
    noted, pending, npend = pd.noted, pd.pending, pd.count
    # The pool's arrays as locals (see _frustum_lazy).
    lo, hi, maxvd, outcome, count = nd.lo, nd.hi, nd.maxvd, nd.outcome, nd.count
    child, nchild, dirty, is_split = nd.child, nd.nchild, nd.dirty, nd.is_split
    kids = child.shape[1]
    box = np.empty((6, kids))  # the children's boxes, a row per bound, a lane per child
    ids = np.empty(kids, np.int64)
    outside = np.empty(kids, np.int64)
    cut = np.empty(kids, np.int64)
    # Each plane's far and near corner, as rows of ``box`` (the plane's signs choose them).
    far_row = np.empty((k, 3), np.int64)
    for p in range(k):
        for a in range(3):
            far_row[p, a] = a + 3 if planes[p, a] >= 0.0 else a
    vd_scale = 1.0 + VIEWDIST_SLACK
    # The root, tested alone; then every node popped has passed and tests its children.
    v, newmask = _verdict(lo, hi, maxvd, ROOT, planes, k, full, use_vd, eye3)
    if has_occ and v <= NODE_PARTIAL and box_hidden6(occ, lo[ROOT, 0], lo[ROOT, 1],
                                                     lo[ROOT, 2], hi[ROOT, 0], hi[ROOT, 1],
                                                     hi[ROOT, 2]):
        v = NODE_REJECT_OCCLUSION
    outcome[ROOT] = v
    visited = 1
    top = 0
    if v in (NODE_PARTIAL, NODE_INSIDE):
        stack[0] = (ROOT << (2 * MASK_BITS)) | (full << MASK_BITS) | newmask
        top = 1
    elif v == NODE_REJECT_OCCLUSION:
        occ_nodes += 1
        occ_objects += _objects_below(child, nchild, count, ROOT, stack, 0)
    elif v == NODE_REJECT_VIEWDIST:
        far += _objects_below(child, nchild, count, ROOT, stack, 0)
    while top > 0:
        top -= 1
        e = stack[top]
        n = e >> (2 * MASK_BITS)
        pmask = (e >> MASK_BITS) & low  # the planes n's parent straddles
        mask = e & low  # the planes n straddles
        if pmask != 0:  # (the mask it was reached with, as _frustum_lazy's)
            noted_objects += _note_reached(noted, pending, npend, dirty, is_split, count, n,
                                           limit)
        if count[n] > 0:
            working += count[n]
            qnode[nq] = n
            qmask[nq] = mask
            nq += 1
        if nchild[n] == 0:
            continue
        if mask == 0 and not use_vd and not has_occ:
            # Inside every plane and no distance or occlusion test: so is every child, whose
            # box is then not read (the lanes' gather and tests cost 10-20 ns a child; the
            # inside nodes are a third of a static query's, 2,400 of ternary/non-leafy's).
            for j in range(kids):
                ch = child[n, j]
                if ch >= 0:
                    outcome[ch] = NODE_INSIDE
                    stack[top] = ch << (2 * MASK_BITS)
                    top += 1
                    visited += 1
            continue
        m = 0
        for j in range(kids):
            ch = child[n, j]
            if ch >= 0:
                ids[m] = ch
                for a in range(3):
                    box[a, m] = lo[ch, a]
                    box[a + 3, m] = hi[ch, a]
                outside[m] = 0
                cut[m] = 0
                m += 1
        visited += m
        for p in range(k):
            bit = (1 << p) if k <= MASKED_PLANES else 1
            if (mask & bit) == 0:
                continue
            pa, pb, pc, pd_ = planes[p, 0], planes[p, 1], planes[p, 2], planes[p, 3]
            fx, fy, fz = far_row[p, 0], far_row[p, 1], far_row[p, 2]
            nx, ny, nz = (fx + 3) % 6, (fy + 3) % 6, (fz + 3) % 6
            for j in range(m):  # the lanes: this loop vectorises
                outside[j] |= bit * (pa * box[fx, j] + pb * box[fy, j] + pc * box[fz, j]
                                     + pd_ < 0.0)
                cut[j] |= bit * (pa * box[nx, j] + pb * box[ny, j] + pc * box[nz, j] + pd_ < 0.0)
        for j in range(m):
            ch = ids[j]
            lx, ly, lz = box[0, j], box[1, j], box[2, j]
            hx, hy, hz = box[3, j], box[4, j], box[5, j]
            cm = cut[j] & mask
            if use_vd and box_point_dist6(lx, ly, lz, hx, hy, hz, ex, ey, ez) > (
                    maxvd[ch] * vd_scale):
                v = NODE_REJECT_VIEWDIST
            elif outside[j] & mask:
                v = NODE_REJECT_FRUSTUM
            else:
                v = NODE_INSIDE if cm == 0 else NODE_PARTIAL
                if has_occ and box_hidden6(occ, lx, ly, lz, hx, hy, hz):
                    v = NODE_REJECT_OCCLUSION
            outcome[ch] = v
            if v in (NODE_PARTIAL, NODE_INSIDE):
                stack[top] = (ch << (2 * MASK_BITS)) | (mask << MASK_BITS) | cm
                top += 1
            elif v == NODE_REJECT_FRUSTUM:
                if (count[ch] > GUARD_OBJECTS and needs_split(is_split, count, ch, limit)
                        and near_view(planes, lx, ly, lz, hx, hy, hz)):
                    note_node(noted, pending, npend, ch)  # (see _frustum_lazy)
            elif v == NODE_REJECT_OCCLUSION:
                occ_nodes += 1
                occ_objects += _objects_below(child, nchild, count, ch, stack, top)
            else:
                far += _objects_below(child, nchild, count, ch, stack, top)
    return _finish(nd, ob, sp, (qnode[:nq], qmask[:nq]), planes, eye, use_vd, occ, codes,
                   (working, visited, occ_nodes, occ_objects, far, noted_objects),
                   (catchup, share))


@njit(cache=True, inline="always")
def _boxes_overlap(lo, hi, qlo, qhi) -> bool:
    return ((lo[0] <= qhi[0]) & (hi[0] >= qlo[0]) & (lo[1] <= qhi[1]) & (hi[1] >= qlo[1])
            & (lo[2] <= qhi[2]) & (hi[2] >= qlo[2]))


@njit(cache=True, inline="always")
def _node_hit(kind: int, lo, hi, qa, qb, reach: float, idx: float, idy: float,
              idz: float) -> bool:
    """The box [lo, hi] may hold an answer of the region query (conservative; the kinds and
    qa, qb as :func:`~app.geom.decide.region_hit`'s)."""
    if kind == REGION_BOX:
        return _boxes_overlap(lo, hi, qa, qb)
    if kind == REGION_SPHERE:
        return box_point_dist(lo, hi, qa[0], qa[1], qa[2]) <= reach
    return ray_box_hits(qa[0], qa[1], qa[2], idx, idy, idz, lo, hi)


@njit(cache=True, inline="always")
def _node_within(kind: int, lo, hi, qa, qb, qr: float, qmag: float) -> bool:
    """Every sphere the box [lo, hi] holds is in the region query's answer: the box lies
    inside the query box (rounding is monotonic: the predicate's c - r and c + r stay inside
    too), or its farthest corner lies within the query sphere, with a slack for the
    roundings of the distance. Never for a ray (its hits need their distances)."""
    if kind == REGION_BOX:
        return ((lo[0] >= qa[0]) & (lo[1] >= qa[1]) & (lo[2] >= qa[2])
                & (hi[0] <= qb[0]) & (hi[1] <= qb[1]) & (hi[2] <= qb[2]))
    if kind == REGION_SPHERE:
        d2 = 0.0
        for a in range(3):
            f = max(abs(lo[a] - qa[a]), abs(hi[a] - qa[a]))
            d2 += f * f
        far = math.sqrt(d2)
        return far + 1e-9 * (1.0 + qmag + far) <= qr
    return False


@njit(cache=True)
def _region_query(nd, ob, sp, rules, kind: int, qa, qb, qr: float, total: int, pd):
    """The traversal of :func:`query_box`, :func:`query_sphere` and :func:`query_ray`:
    (slots, values), the values being the ray's entry distances (zeros for the others).

    A node rejected on its stored (conservative) box is final; a dirty or overfull node that
    passes is noted for the upkeep (our mode), or every node reached is first brought up to
    date (the paper mode's ``GetExtents``).
    """
    out = np.empty(total, np.int64)
    ts = np.empty(total, np.float64)
    stack = np.empty(nd.parent.shape[0] + 1, np.int64)
    stack[0] = ROOT << MASK_BITS
    top = 1
    k = 0
    lazy, limit = reach_rules(rules)
    noted, pending, npend = pd.noted, pd.pending, pd.count
    centers, radii, _ = sp
    slot, rec = ob.slot, ob.rec  # locals: numba counts a tuple's references at each use
    qmag = query_magnitude(qa, qb, qr)
    term = query_term(qmag)  # (the sieve's margin)
    ax, ay, az, bx, by, bz = qa[0], qa[1], qa[2], qb[0], qb[1], qb[2]
    box = np.empty((2, 3))  # a record's widened box, for the ray's slab test
    # A node is pruned when its box is farther than qr; the slack covers rounding in the
    # distance so that a sphere exactly touching the query is never pruned.
    reach = qr + 1e-9 * (1.0 + qr + abs(qa[0]) + abs(qa[1]) + abs(qa[2]))
    idx = 1.0 / qb[0] if qb[0] != 0.0 else math.inf
    idy = 1.0 / qb[1] if qb[1] != 0.0 else math.inf
    idz = 1.0 / qb[2] if qb[2] != 0.0 else math.inf
    while top > 0:
        top -= 1
        n = stack[top] >> MASK_BITS
        reach_node(nd, ob, sp, n, rules, limit)
        if not _node_hit(kind, nd.lo[n], nd.hi[n], qa, qb, reach, idx, idy, idz):
            continue
        if lazy:
            if needs_split(nd.is_split, nd.count, n, limit):  # skipped for lack of nodes
                split_node(nd, ob, sp, n, rules)
        elif nd.dirty[n] or needs_split(nd.is_split, nd.count, n, limit):
            note_node(noted, pending, npend, n)  # the upkeep refits / splits it
        b = nd.start[n]
        e = b + nd.count[n]
        if lazy:  # the listing's objects, each from the store
            for p in range(b, e):
                s = slot[p]
                t = region_hit(kind, centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                               qa, qb, qr)
                if t >= 0.0:
                    out[k] = s
                    ts[k] = t
                    k += 1
        elif _node_within(kind, nd.lo[n], nd.hi[n], qa, qb, qr, qmag):
            # Every sphere the box holds is in the answer: the block's slots, no test.
            for p in range(b, e):
                out[k] = slot[p]
                ts[k] = 0.0
                k += 1
        elif kind != REGION_RAY:
            # The block's float32 records in order settle all but the objects within a few
            # roundings of the region's boundary (app.spatial.sieve); only those read the
            # store (a cache miss each at 10^6 objects). A compaction without branches, then
            # the candidates.
            k0 = k
            if kind == REGION_BOX:
                for p in range(b, e):
                    x, y, z, r = record_sphere(rec, p)
                    miss, sure = sieve_box(x, y, z, r, term, ax, ay, az, bx, by, bz)
                    out[k] = slot[p]
                    ts[k] = sure
                    k += 1 - miss
            else:
                for p in range(b, e):
                    x, y, z, r = record_sphere(rec, p)
                    miss, sure = sieve_sphere(x, y, z, r, term, ax, ay, az, qr)
                    out[k] = slot[p]
                    ts[k] = sure
                    k += 1 - miss
            k = settle_region(kind, k0, k, centers, radii, qa, qb, qr, out, ts)
        else:  # a ray: the sieve's few candidates need their distances from the store
            for p in range(b, e):
                x, y, z, r = record_sphere(rec, p)
                if ray_may_hit(x, y, z, r, term, qa, idx, idy, idz, box):
                    s = slot[p]
                    t = region_hit(kind, centers[s, 0], centers[s, 1], centers[s, 2],
                                   radii[s], qa, qb, qr)
                    if t >= 0.0:
                        out[k] = s
                        ts[k] = t
                        k += 1
        top = _push_children(nd.child, nd.nchild, n, stack, top, 0)
    return out[:k], ts[:k]


@njit(cache=True)
def query_box(nd, ob, sp, qlo, qhi, rules, total: int, pd):
    """Slots whose sphere's bounding box overlaps [qlo, qhi]."""
    return _region_query(nd, ob, sp, rules, REGION_BOX, qlo, qhi, 0.0, total, pd)[0]


@njit(cache=True)
def query_sphere(nd, ob, sp, q, qr: float, rules, total: int, pd):
    """Slots with ``|c - q| <= r + qr``."""
    return _region_query(nd, ob, sp, rules, REGION_SPHERE, q, q, qr, total, pd)[0]


@njit(cache=True)
def query_ray(nd, ob, sp, o, d, rules, total: int, pd):
    """(slots, entry distances) of spheres hit by the ray from o along unit direction d."""
    return _region_query(nd, ob, sp, rules, REGION_RAY, o, d, 0.0, total, pd)
