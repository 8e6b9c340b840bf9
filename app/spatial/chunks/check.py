"""validate for the chunked layout, in Box2D's shape: a few short checks, each one invariant.

Each compiled check returns (code, where): 0 when its invariant holds, else a key of
:data:`MESSAGES` and the position, slot or node where it first failed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.chunks.layout import CHUNK, FANOUT, HI, LO, MAXVD, MINVD, Tree
from app.spatial.scan import Spheres32, to32

MESSAGES = {
    1: "a live slot's position does not point back at it",
    2: "a position points at a dead slot or at a slot placed elsewhere",
    3: "the float32 copy differs from the store by more than its rounding",
    4: "a hole is not marked dead in the float32 copy (radius -inf, view distance inf)",
    5: "a chunk's box does not hold one of its spheres",
    6: "a chunk's view-distance bounds do not hold one of its objects",
    7: "a node's box or bounds do not hold a child's",
    8: "a node's count differs from the live objects below it",
    9: "a position past the end is in use",
    10: "a node above chunks does not hold a chunk's limit",
}


@njit(cache=True)
def check_positions(alive, slot_pos, pos_slot, npos: int):
    """Slots and positions are each other's inverse; nothing lives past ``npos``."""
    for s in range(alive.shape[0]):
        if alive[s]:
            p = slot_pos[s]
            if p < 0 or p >= npos or pos_slot[p] != s:
                return 1, s
    for p in range(pos_slot.shape[0]):
        s = pos_slot[p]
        if s < 0:
            continue
        if p >= npos:
            return 9, p
        if not alive[s] or slot_pos[s] != p:
            return 2, p
    return 0, 0


@njit(cache=True)
def check_copy(s32: Spheres32, pos_slot, npos: int, centers, radii, vdist):
    """The float32 copy is the store rounded, and every hole is dead."""
    for p in range(npos):
        s = pos_slot[p]
        if s < 0:
            if s32.r[p] != -np.inf or s32.vd[p] != np.inf:
                return 4, p
            continue
        if (s32.x[p] != to32(centers[s, 0])) | (s32.y[p] != to32(centers[s, 1])) | (
                s32.z[p] != to32(centers[s, 2])) | (s32.r[p] != to32(radii[s])) | (
                s32.vd[p] != to32(vdist[s])):
            return 3, p
    return 0, 0


@njit(cache=True)
def check_chunks(tree: Tree, pos_slot, npos: int, centers, radii, vdist):
    """Each chunk's box and view-distance bounds hold its spheres, its count is right."""
    for c in range(tree.loff[1]):
        n = 0
        for p in range(c * CHUNK, min((c + 1) * CHUNK, npos)):
            s = pos_slot[p]
            if s < 0:
                continue
            n += 1
            r = radii[s]
            b = tree.box
            for a in range(3):
                if centers[s, a] - r < b[LO + a, c] or centers[s, a] + r > b[HI + a, c]:
                    return 5, c
            if vdist[s] > b[MAXVD, c] or vdist[s] < b[MINVD, c]:
                return 6, c
        if n != tree.count[c]:
            return 8, c
    return 0, 0


@njit(cache=True)
def check_nodes(tree: Tree, limits: bool):
    """Each node of level >= 1 holds its children's boxes, bounds and counts, and (``limits``:
    in curve order; slot order's open boxes need none) a node above chunks their limits."""
    for lv in range(1, tree.loff.shape[0] - 1):
        below = tree.loff[lv - 1]
        for g in range(tree.loff[lv], tree.loff[lv + 1]):
            k0 = below + (g - tree.loff[lv]) * FANOUT
            n = 0
            for k in range(k0, min(k0 + FANOUT, tree.loff[lv])):
                if tree.count[k] == 0:
                    continue
                n += tree.count[k]
                b = tree.box
                for a in range(3):
                    if b[LO + a, k] < b[LO + a, g] or b[HI + a, k] > b[HI + a, g]:
                        return 7, g
                if b[MAXVD, k] > b[MAXVD, g] or b[MINVD, k] < b[MINVD, g]:
                    return 7, g
                if limits and lv == 1:  # in-place writes grow a chunk up to its limit only
                    lim = tree.limit
                    for a in range(3):
                        if lim[k, LO + a] < b[LO + a, g] or lim[k, HI + a] > b[HI + a, g]:
                            return 10, g
                    if lim[k, MAXVD] > b[MAXVD, g] or lim[k, MINVD] < b[MINVD, g]:
                        return 10, g
            if n != tree.count[g]:
                return 8, g
    return 0, 0
