"""Queries of the chunked layout: a walk down the implicit tree, then brute force per chunk.

The frustum walk decides each node once with the shared :func:`app.geom.decide.node_verdict`.
A node that is inside the frustum and entirely within every view distance below it hands its
whole range of positions over (no per-object test); a chunk that is only partly inside runs
the branch-free float32 verdict loop of :mod:`app.spatial.scan` over its 64 lanes. The few
spheres the float32 test cannot decide, and occlusion, are settled in float64 at the end.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from app.geom.decide import VIEWDIST_SLACK, node_verdict6
from app.geom.predicates import (
    NODE_INSIDE,
    NODE_NOT_VISITED,
    NODE_PARTIAL,
    box_point_dist,
    box_point_far6,
    ray_box_hits,
    ray_sphere_entry,
    sphere_overlaps_box,
    spheres_touch,
)
from app.geom.zpyramid import Occluder
from app.spatial.chunks.layout import CHUNK, FANOUT, HI, LO, MAXVD, MINVD, Tree
from app.spatial.scan import IN, NEAR, Spheres32, settle


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
def query_frustum(tree: Tree, s32: Spheres32, pos_slot, npos: int, p32, eye32, tol: float,
                  tol_d: float, planes, eye, use_vd: bool, occ: Occluder, centers, radii, vdist,
                  codes, sure, near):
    """Drawn positions in ``sure[:k]``; returns (k, occluded, working_set, nodes_visited).

    Three phases: the walk decides the nodes and lists the chunks to scan and the ranges to
    take whole; one call scans every listed chunk; one pass compacts and copies. Per-node work
    reads scalars from the box table (no array views, no calls that pass arrays: each costs
    reference counting, which was most of the walk's time).
    """
    box = tree.box
    count = tree.count
    outcome = tree.outcome
    outcome[:] = NODE_NOT_VISITED
    stack = np.empty(tree.loff.shape[0] * FANOUT + 1, np.int64)
    sp = _push_roots(tree, stack)
    scan = np.empty(tree.loff[1], np.int64)  # chunks to scan
    nscan = 0
    whole = np.empty(tree.loff[-1], np.int64)  # nodes taken whole
    nwhole = 0
    working = 0
    visited = 0
    ex = eye[0]
    ey = eye[1]
    ez = eye[2]
    while sp > 0:
        sp -= 1
        g = stack[sp]
        lv = _level_of(tree, g)
        visited += 1
        lx = box[g, LO]
        ly = box[g, LO + 1]
        lz = box[g, LO + 2]
        hx = box[g, HI]
        hy = box[g, HI + 1]
        hz = box[g, HI + 2]
        verdict = node_verdict6(planes, eye, use_vd, occ, lx, ly, lz, hx, hy, hz, box[g, MAXVD])
        outcome[g] = verdict
        if verdict != NODE_INSIDE and verdict != NODE_PARTIAL:
            continue
        if verdict == NODE_INSIDE and (not use_vd or box_point_far6(
                lx, ly, lz, hx, hy, hz, ex, ey, ez) <= box[g, MINVD] * (1.0 - VIEWDIST_SLACK)):
            whole[nwhole] = g  # every sphere below is drawn (occlusion aside)
            nwhole += 1
            working += count[g]
        elif lv > 0:
            sp = _push_children(tree, g, lv, stack, sp)
        else:
            scan[nscan] = g
            nscan += 1
            working += count[g]
    _scan_chunks(s32.x, s32.y, s32.z, s32.r, s32.vd, p32, eye32[0], eye32[1], eye32[2], use_vd,
                 np.float32(tol), np.float32(tol_d), scan, nscan, codes)
    ns = 0
    nn = 0
    words = codes.view(np.uint64)  # a chunk is 8 words of verdict bytes
    for j in range(nscan):
        p0 = scan[j] * CHUNK
        for w in range(p0 // 8, p0 // 8 + CHUNK // 8):
            if words[w] == 0:  # eight culled lanes
                continue
            for p in range(8 * w, 8 * w + 8):
                c = codes[p]
                sure[ns] = p
                ns += c == IN
                near[nn] = p
                nn += c == NEAR
    for j in range(nwhole):
        g = whole[j]
        p0, p1 = _positions(tree, g, _level_of(tree, g), npos)
        for p in range(p0, p1):
            sure[ns] = p
            ns += pos_slot[p] >= 0
    k, occluded = settle(sure, ns, near, nn, centers, radii, vdist, planes, eye, use_vd, occ,
                         pos_slot)
    return k, occluded, working, visited


@njit(cache=True, fastmath=True)
def _scan_chunks(x, y, z, r, vd, p32, ex, ey, ez, use_vd: bool, tol, tol_d, chunks,
                 nchunks: int, codes) -> None:
    """The branch-free verdict bytes (``app.spatial.scan``) of every lane of the listed chunks.

    64 lanes a chunk, a constant count, and unsigned positions (no negative-index checks): the
    lane loop vectorises as the flat scan does. Holes carry radius -inf and come out OUT.
    """
    shrink = np.float32(1.0 - 4e-7)
    stretch = np.float32(1.0 + 4e-7)
    for j in range(nchunks):
        p0 = np.uint64(chunks[j] * CHUNK)
        for lane in range(CHUNK):
            i = p0 + np.uint64(lane)
            xi = x[i]
            yi = y[i]
            zi = z[i]
            m = np.float32(np.inf)
            for p in range(6):
                v = p32[p, 0] * xi + p32[p, 1] * yi + p32[p, 2] * zi + p32[p, 3]
                m = v if v < m else m
            m = m + r[i]
            code = np.uint8(m >= tol) + np.uint8(m >= -tol)
            if use_vd:
                dx = xi - ex
                dy = yi - ey
                dz = zi - ez
                d = math.sqrt(dx * dx + dy * dy + dz * dz)
                c2 = np.uint8(d <= vd[i] * shrink - tol_d) + np.uint8(d <= vd[i] * stretch + tol_d)
                code = c2 if c2 < code else code
            codes[i] = code


@njit(cache=True)
def query_box(tree: Tree, pos_slot, npos: int, centers, radii, lo, hi):
    """Slots whose sphere's bounding box overlaps [lo, hi]."""
    out = np.empty(npos, np.int64)
    k = 0
    stack = np.empty(tree.loff.shape[0] * FANOUT + 1, np.int64)
    sp = _push_roots(tree, stack)
    while sp > 0:
        sp -= 1
        g = stack[sp]
        lv = _level_of(tree, g)
        nlo = tree.box[g, LO:LO + 3]
        nhi = tree.box[g, HI:HI + 3]
        if (nlo[0] > hi[0]) | (nlo[1] > hi[1]) | (nlo[2] > hi[2]) | (nhi[0] < lo[0]) | (
                nhi[1] < lo[1]) | (nhi[2] < lo[2]):
            continue
        if lv > 0:
            sp = _push_children(tree, g, lv, stack, sp)
            continue
        p0, p1 = _positions(tree, g, 0, npos)
        for p in range(p0, p1):
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
    stack = np.empty(tree.loff.shape[0] * FANOUT + 1, np.int64)
    sp = _push_roots(tree, stack)
    while sp > 0:
        sp -= 1
        g = stack[sp]
        lv = _level_of(tree, g)
        # The box holds every sphere below: one within reach makes the box within reach.
        if box_point_dist(tree.box[g, LO:LO + 3], tree.box[g, HI:HI + 3], q[0], q[1],
                          q[2]) > qr * (1.0 + 1e-9) + 1e-300:
            continue
        if lv > 0:
            sp = _push_children(tree, g, lv, stack, sp)
            continue
        p0, p1 = _positions(tree, g, 0, npos)
        for p in range(p0, p1):
            s = pos_slot[p]
            if s >= 0 and spheres_touch(centers[s, 0], centers[s, 1], centers[s, 2], radii[s],
                                        q[0], q[1], q[2], qr):
                out[k] = s
                k += 1
    return out[:k]


@njit(cache=True)
def query_ray(tree: Tree, pos_slot, npos: int, centers, radii, o, d):
    """(slots, entry t) of the spheres a ray (unit direction) hits."""
    out = np.empty(npos, np.int64)
    ts = np.empty(npos, np.float64)
    k = 0
    inv = np.empty(3)
    for a in range(3):
        inv[a] = 1.0 / d[a] if d[a] != 0.0 else np.inf
    stack = np.empty(tree.loff.shape[0] * FANOUT + 1, np.int64)
    sp = _push_roots(tree, stack)
    while sp > 0:
        sp -= 1
        g = stack[sp]
        lv = _level_of(tree, g)
        if not ray_box_hits(o[0], o[1], o[2], inv[0], inv[1], inv[2], tree.box[g, LO:LO + 3],
                            tree.box[g, HI:HI + 3]):
            continue
        if lv > 0:
            sp = _push_children(tree, g, lv, stack, sp)
            continue
        p0, p1 = _positions(tree, g, 0, npos)
        for p in range(p0, p1):
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
