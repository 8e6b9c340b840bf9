"""Queries of the chunked layout: a walk down the implicit tree, then brute force per chunk.

The frustum walk decides each node once with the shared :func:`app.geom.decide.node_verdict`.
A node that is inside the frustum and entirely within every view distance below it hands its
whole range of positions over (no per-object test); a chunk that is only partly inside runs
the branch-free float32 verdict loop of :mod:`app.spatial.scan` over its 64 lanes. The few
spheres the float32 test cannot decide, and occlusion, are settled in float64 at the end.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from app.geom.decide import VIEWDIST_SLACK, box_plane_bits, node_verdict6
from app.geom.predicates import (
    NODE_INSIDE,
    NODE_NOT_VISITED,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
    box_point_dist6,
    box_point_far6,
    ray_box_hits,
    ray_sphere_entry,
    sphere_overlaps_box,
    spheres_touch,
)
from app.geom.zpyramid import Occluder, box_hidden6
from app.spatial.chunks.layout import CHUNK, FANOUT, HI, LO, MAXVD, MINVD, Tree
from app.spatial.moves import SphereRecords
from app.spatial.scan import (
    FAST,
    OUT,
    Spheres32,
    compact,
    distance_code,
    settle,
    six_plane_code,
    verdict_words,
)


@njit(cache=True, inline="always")
def _positions(tree: Tree, g: int, lv: int, npos: int):
    """The range of positions below global node ``g`` of level ``lv``."""
    span = tree.span[lv] * CHUNK
    p0 = (g - tree.loff[lv]) * span
    return p0, min(p0 + span, npos)


@njit(cache=True, inline="always")
def _level_of(tree: Tree, g: int) -> int:
    lv = 0
    while g >= tree.loff[lv + 1]:
        lv += 1
    return lv


@njit(cache=True, inline="always")
def _push_children(tree: Tree, g: int, lv: int, stack, sp: int) -> int:
    """Push the non-empty children of node ``g`` (of level ``lv`` >= 1)."""
    below = tree.loff[lv - 1]
    k0 = below + (g - tree.loff[lv]) * FANOUT
    k1 = min(k0 + FANOUT, tree.loff[lv])
    for k in range(k1 - 1, k0 - 1, -1):
        if tree.count[k] > 0:
            stack[sp] = k
            sp += 1
    return sp


@njit(cache=True, inline="always")
def _push_roots(tree: Tree, stack) -> int:
    top = tree.loff.shape[0] - 2
    sp = 0
    for g in range(tree.loff[top + 1] - 1, tree.loff[top] - 1, -1):
        if tree.count[g] > 0:
            stack[sp] = g
            sp += 1
    return sp


@njit(cache=True)
def children_verdicts(box, k0: int, k1: int, pl6, eye, use_vd: bool, codes, whole) -> None:
    """``node_verdict6`` (occlusion aside) of nodes ``k0 .. k1-1`` at once, in ``codes``; and in
    ``whole`` whether an inside node is also within every view distance below it.

    The same decision with the same arithmetic as the shared ``node_verdict6``, written as one
    straight loop over consecutive columns of the field-major box table so that it vectorises:
    a node's 16 children are tested for about the price of one (the walk spent most of its time
    testing nodes one by one). ``pl6`` holds exactly six planes (padded with planes nothing is
    outside). Occlusion, when on, is tested by the caller on the nodes that pass.
    """
    ex = eye[0]
    ey = eye[1]
    ez = eye[2]
    grow = 1.0 + VIEWDIST_SLACK
    shrink = 1.0 - VIEWDIST_SLACK
    for j in range(k1 - k0):
        k = k0 + j
        lx = box[LO, k]
        ly = box[LO + 1, k]
        lz = box[LO + 2, k]
        hx = box[HI, k]
        hy = box[HI + 1, k]
        hz = box[HI + 2, k]
        out_bits, cut_bits = box_plane_bits(pl6, 6, lx, ly, lz, hx, hy, hz)
        outside = out_bits != 0
        partial = cut_bits != 0
        dx = max(lx - ex, 0.0, ex - hx)
        dy = max(ly - ey, 0.0, ey - hy)
        dz = max(lz - ez, 0.0, ez - hz)
        too_far = use_vd & (math.sqrt(dx * dx + dy * dy + dz * dz) > box[MAXVD, k] * grow)
        fx = max(abs(lx - ex), abs(hx - ex))
        fy = max(abs(ly - ey), abs(hy - ey))
        fz = max(abs(lz - ez), abs(hz - ez))
        near_all = (not use_vd) | (math.sqrt(fx * fx + fy * fy + fz * fz) <= box[MINVD, k] * shrink)
        code = NODE_PARTIAL if partial else NODE_INSIDE
        code = NODE_REJECT_FRUSTUM if outside else code
        codes[j] = NODE_REJECT_VIEWDIST if too_far else code
        whole[j] = (code == NODE_INSIDE) & near_all


class ChunkLayout(NamedTuple):
    """The chunked layout as a query reads it."""

    tree: Tree
    s32: Spheres32  # the float32 records, by position
    pos_slot: np.ndarray  # position -> store slot (NO_POS: a hole)
    pos_id: np.ndarray  # position -> caller id
    npos: int  # positions in use


class ChunkView(NamedTuple):
    """A frustum query's volume, in float64 (the contract's test) and as the float32 scan
    takes it (``app.spatial.scan.tolerances``)."""

    planes: np.ndarray  # (K, 4) float64
    pl6: np.ndarray  # the planes padded to six rows (nothing is outside a padding plane)
    eye: np.ndarray  # float64
    use_vd: bool
    p32: np.ndarray  # (6, 4) float32 planes
    eye32: np.ndarray
    tol: float  # float32 plane tolerance
    tol_d: float  # float32 distance tolerance


class ChunkAnswer(NamedTuple):
    """A query's reused buffers, one entry a position: verdict bytes, sure and near
    positions, and the drawn ids (``out[:k]``)."""

    codes: np.ndarray
    sure: np.ndarray
    near: np.ndarray
    out: np.ndarray


@njit(cache=True)
def query_frustum_plain(lay, view, occ: Occluder, store, ans):
    """:func:`query_frustum` with its records as plain tuples (the layout's tree and float32
    copy, the store's ``s32``, likewise), built again into the named ones here: numba types a
    named tuple's fields at each call about twice as slowly, and this query's five records
    took 7.2 us a call to type (the index calls it every frame)."""
    tree, s32, pos_slot, pos_id, npos = lay
    return query_frustum(
        ChunkLayout(Tree(*tree), Spheres32(*s32), pos_slot, pos_id, npos), ChunkView(*view),
        occ, SphereRecords(store[0], store[1], store[2], store[3], Spheres32(*store[4])),
        ChunkAnswer(*ans))


@njit(cache=True)
def query_frustum(lay: ChunkLayout, view: ChunkView, occ: Occluder, store: SphereRecords,
                  ans: ChunkAnswer):
    """Drawn ids in ``ans.out[:k]``; returns (k, occluded, culled by view distance,
    working_set, nodes_visited): a rejected node counts every object below it under its test
    (the frustum's are the rest), a scanned lane under the first test it fails.

    Three phases: the walk decides the nodes (a node's children at once, with
    :func:`children_verdicts`) and lists the chunks to scan and the nodes to take whole; one
    call scans every listed chunk; one pass compacts and copies. A volume of more than six
    planes tests nodes one by one (``node_verdict6``). ``store`` holds the float64 spheres
    that decide what float32 cannot.
    """
    tree = lay.tree
    npos = lay.npos
    pos_slot = lay.pos_slot
    planes = view.planes
    pl6 = view.pl6
    eye = view.eye
    use_vd = view.use_vd
    codes = ans.codes
    sure = ans.sure
    near = ans.near
    box = tree.box
    count = tree.count
    outcome = tree.outcome
    outcome[:] = NODE_NOT_VISITED
    occl = occ.widths.shape[0] > 0
    six = planes.shape[0] <= 6
    stack = np.empty(tree.loff.shape[0] * FANOUT + 1, np.int64)
    scan = np.empty(tree.loff[1], np.int64)  # chunks to scan
    nscan = 0
    take = np.empty(tree.loff[-1], np.int64)  # nodes taken whole
    ntake = 0
    kcodes = np.empty(FANOUT, np.int8)
    kwhole = np.empty(FANOUT, np.bool_)
    working = 0
    visited = 0
    occluded = 0
    far = 0
    top = tree.loff.shape[0] - 2
    k0 = tree.loff[top]
    k1 = tree.loff[top + 1]
    lv = top
    sp = 0
    while True:
        # Decide nodes k0 .. k1-1 of level lv (the roots, then a popped node's children).
        if six:
            children_verdicts(box, k0, k1, pl6, eye, use_vd, kcodes, kwhole)
        else:
            for j in range(k1 - k0):
                k = k0 + j
                kcodes[j] = node_verdict6(planes, eye, use_vd, occ, box[LO, k], box[LO + 1, k],
                                          box[LO + 2, k], box[HI, k], box[HI + 1, k],
                                          box[HI + 2, k], box[MAXVD, k])
                kwhole[j] = kcodes[j] == NODE_INSIDE and (not use_vd or box_point_far6(
                    box[LO, k], box[LO + 1, k], box[LO + 2, k], box[HI, k], box[HI + 1, k],
                    box[HI + 2, k], eye[0], eye[1], eye[2])
                    <= box[MINVD, k] * (1.0 - VIEWDIST_SLACK))
        for j in range(k1 - k0):
            k = k0 + j
            if count[k] == 0:
                continue
            visited += 1
            code = kcodes[j]
            if code in (NODE_INSIDE, NODE_PARTIAL) and occl and box_hidden6(
                    occ, box[LO, k], box[LO + 1, k], box[LO + 2, k], box[HI, k],
                    box[HI + 1, k], box[HI + 2, k]):
                code = NODE_REJECT_OCCLUSION
            outcome[k] = code
            if code != NODE_INSIDE and code != NODE_PARTIAL:
                occluded += count[k] if code == NODE_REJECT_OCCLUSION else 0
                far += count[k] if code == NODE_REJECT_VIEWDIST else 0
                continue
            if kwhole[j]:
                take[ntake] = k  # every sphere below is drawn (occlusion aside)
                ntake += 1
                working += count[k]
            elif lv > 0:
                stack[sp] = k
                sp += 1
            else:
                scan[nscan] = k
                nscan += 1
                working += count[k]
        if sp == 0:
            break
        sp -= 1
        g = stack[sp]
        lv = _level_of(tree, g) - 1
        k0 = tree.loff[lv] + (g - tree.loff[lv + 1]) * FANOUT
        k1 = min(k0 + FANOUT, tree.loff[lv + 1])
    far += _scan_chunks(lay.s32, view, scan, nscan, codes)
    ns = 0
    nn = 0
    words = verdict_words(codes)
    for j in range(nscan):
        p0 = scan[j] * CHUNK
        ns, nn, _ = compact(codes, words, p0, p0 + CHUNK, sure, ns, near, nn)
    for j in range(ntake):
        g = take[j]
        p0, p1 = _positions(tree, g, _level_of(tree, g), npos)
        for p in range(p0, p1):
            sure[ns] = p
            ns += pos_slot[p] >= 0
    k, occluded_objects, outside = settle(sure, ns, near, nn, store.store_c, store.store_r,
                                          store.store_v, planes, eye, use_vd, occ, pos_slot)
    out = ans.out
    pos_id = lay.pos_id
    for i in range(k):
        out[i] = pos_id[sure[i]]
    # The NEAR lanes the settle found beyond their view distance: those neither drawn nor
    # occluded (k + occluded_objects - ns of them, the sure ones being one or the other) nor
    # outside.
    far += nn - (k + occluded_objects - ns) - outside
    return k, occluded + occluded_objects, far, working, visited


@njit(cache=True, fastmath=FAST)
def _scan_chunks(s32: Spheres32, view: ChunkView, chunks, nchunks: int, codes) -> int:
    """The branch-free verdict bytes (``app.spatial.scan``) of every lane of the listed chunks;
    returns how many live lanes view distance culls for certain (tested first: a lane
    certainly beyond its view distance counts as such even when also outside a plane; one
    only NEAR it and outside a plane counts as outside, which it certainly is).

    64 lanes a chunk, a constant count, and unsigned positions (no negative-index checks): the
    lane loop vectorises as the flat scan does. Holes carry radius -inf and come out OUT.
    The records' fields are taken out once here: the lane loop reads plain arrays.
    """
    x = s32.x
    y = s32.y
    z = s32.z
    r = s32.r
    vd = s32.vd
    p32 = view.p32
    ex = view.eye32[0]
    ey = view.eye32[1]
    ez = view.eye32[2]
    use_vd = view.use_vd
    tol = np.float32(view.tol)
    tol_d = np.float32(view.tol_d)
    far = 0
    for j in range(nchunks):
        p0 = np.uint64(chunks[j] * CHUNK)
        for lane in range(CHUNK):
            i = p0 + np.uint64(lane)
            xi = x[i]
            yi = y[i]
            zi = z[i]
            code = six_plane_code(p32, xi, yi, zi, r[i], tol)
            if use_vd:
                c2 = distance_code(xi - ex, yi - ey, zi - ez, vd[i], tol_d)
                code = c2 if c2 < code else code
                far += (c2 == OUT) & (r[i] > -np.inf)  # a hole is no object
            codes[i] = code
    return far


# What a query walk tests a node's box against (see _chunks_reached).
BOX = 0  # q = lo x y z, hi x y z: the box overlaps [lo, hi]
SPHERE = 1  # q = centre x y z, radius: the box is within reach of the sphere
RAY = 2  # q = origin x y z, inverse direction x y z: the ray meets the box


@njit(cache=True, inline="always")
def _node_reached(box, g: int, kind: int, q) -> bool:
    """Whether node ``g``'s box (which holds every sphere below it) may hold an answer."""
    if kind == BOX:
        return not ((box[LO, g] > q[3]) | (box[LO + 1, g] > q[4]) | (box[LO + 2, g] > q[5])
                    | (box[HI, g] < q[0]) | (box[HI + 1, g] < q[1]) | (box[HI + 2, g] < q[2]))
    if kind == SPHERE:
        # One sphere within reach makes the box within reach.
        return box_point_dist6(box[LO, g], box[LO + 1, g], box[LO + 2, g], box[HI, g],
                               box[HI + 1, g], box[HI + 2, g], q[0], q[1],
                               q[2]) <= q[3] * (1.0 + 1e-9) + 1e-300
    return ray_box_hits(q[0], q[1], q[2], q[3], q[4], q[5], box[LO:LO + 3, g],
                        box[HI:HI + 3, g])


@njit(cache=True)
def _chunks_reached(tree: Tree, kind: int, q):
    """The chunks whose box, and every box above, may hold an answer (a walk of the tree)."""
    out = np.empty(tree.loff[1], np.int64)
    n = 0
    stack = np.empty(tree.loff.shape[0] * FANOUT + 1, np.int64)
    sp = _push_roots(tree, stack)
    while sp > 0:
        sp -= 1
        g = stack[sp]
        if not _node_reached(tree.box, g, kind, q):
            continue
        lv = _level_of(tree, g)
        if lv > 0:
            sp = _push_children(tree, g, lv, stack, sp)
        else:
            out[n] = g
            n += 1
    return out[:n]


@njit(cache=True)
def query_box(tree: Tree, pos_slot, npos: int, centers, radii, lo, hi):
    """Slots whose sphere's bounding box overlaps [lo, hi]."""
    q = np.array([lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]])
    out = np.empty(npos, np.int64)
    k = 0
    for c in _chunks_reached(tree, BOX, q):
        for p in range(c * CHUNK, min((c + 1) * CHUNK, npos)):
            s = pos_slot[p]
            if s >= 0 and sphere_overlaps_box(centers[s, 0], centers[s, 1], centers[s, 2],
                                              radii[s], lo, hi):
                out[k] = s
                k += 1
    return out[:k]


@njit(cache=True)
def query_sphere(tree: Tree, pos_slot, npos: int, centers, radii, q, qr: float):
    """Slots with ``|c - q| <= r + qr``."""
    out = np.empty(npos, np.int64)
    k = 0
    for c in _chunks_reached(tree, SPHERE, np.array([q[0], q[1], q[2], qr])):
        for p in range(c * CHUNK, min((c + 1) * CHUNK, npos)):
            s = pos_slot[p]
            if s >= 0 and spheres_touch(centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                                        q[0], q[1], q[2], qr):
                out[k] = s
                k += 1
    return out[:k]


@njit(cache=True)
def query_ray(tree: Tree, pos_slot, npos: int, centers, radii, o, d):
    """(slots, entry t) of the spheres a ray (unit direction) hits."""
    q = np.empty(6)
    for a in range(3):
        q[a] = o[a]
        q[3 + a] = 1.0 / d[a] if d[a] != 0.0 else np.inf
    out = np.empty(npos, np.int64)
    ts = np.empty(npos, np.float64)
    k = 0
    for c in _chunks_reached(tree, RAY, q):
        for p in range(c * CHUNK, min((c + 1) * CHUNK, npos)):
            s = pos_slot[p]
            if s < 0:
                continue
            t = ray_sphere_entry(o[0], o[1], o[2], d[0], d[1], d[2], centers[s, 0],
                                 centers[s, 1], centers[s, 2], radii[s])
            if t >= 0.0:
                out[k] = s
                ts[k] = t
                k += 1
    return out[:k], ts[:k]
