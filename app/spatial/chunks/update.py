"""Moving objects in the chunked layout: movers live apart from the still ones.

Keep still objects apart from moving ones (Jolt's layers, Bullet's sleeping bodies): the
first move of an object *wakes* it, which leaves a hole at its old position (the chunk's box
stays: loose is still right) and appends it to the *awake region* at the end of the layout,
in curve order with the others woken in the same batch. Later moves write in place inside the
awake region: a few thousand movers' records stay in the cache instead of costing a miss each
in a layout of millions, and the still chunks' boxes never change. The awake chunks are refit
after every batch (they are few); when they have spread too far, the index re-sorts the awake
region alone (see ``ChunkedIndex``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.base import write_row
from app.spatial.chunks.layout import CHUNK, FANOUT, NO_POS, IdArrays, Tree
from app.spatial.idmap import assign, hash_lookup
from app.spatial.scan import Spheres32, to32


@njit(cache=True)
def wake(tree: Tree, s32: Spheres32, slot_pos, pos_slot, pos_id, id_pos: IdArrays, woken,
         npos: int) -> int:
    """Move the sleeping ``woken`` slots (in curve order) to positions ``npos ..``; new npos.

    Their old positions become holes, and the chunks there (and above) count one fewer.
    """
    for i in range(woken.shape[0]):
        s = woken[i]
        p = slot_pos[s]
        s32.x[npos] = s32.x[p]  # the record moves along; the batch then overwrites what moved
        s32.y[npos] = s32.y[p]
        s32.z[npos] = s32.z[p]
        s32.r[npos] = s32.r[p]
        s32.vd[npos] = s32.vd[p]
        pos_slot[p] = NO_POS
        s32.r[p] = -np.inf
        local = p // CHUNK
        for lv in range(tree.loff.shape[0] - 1):
            tree.count[tree.loff[lv] + local] -= 1
            local //= FANOUT
        slot_pos[s] = npos
        pos_slot[npos] = s
        pos_id[npos] = pos_id[p]
        assign(id_pos.keys, id_pos.vals, id_pos.dense, pos_id[p], npos)
        npos += 1
    return npos


@njit(cache=True)
def write_moved(s32: Spheres32, slot_pos, slots, centers, radii, vdist, awake0: int,
                store_c, store_r, store_v):
    """Write a checked batch into the store (``store_*``, by slot) and into the awake moved
    slots' float32 records (in place), in one pass: each move costs two cache misses (its
    store row and its position), the float32 record is in the cached awake region.

    ``centers`` (and ``radii`` / ``vdist`` unless empty) are the batch's rows, read in order.
    Slots still before ``awake0`` are counted, not written in float32. Returns (still ones,
    largest coordinate magnitude, largest radius written): the bounds of the float32
    tolerances and the box padding. Writing twice is harmless.
    """
    has_r = radii.shape[0] == slots.shape[0]
    has_v = vdist.shape[0] == slots.shape[0]
    asleep = 0
    bx = by = bz = 0.0  # three running maxima: one chain of max() was the loop's bottleneck
    rad = 0.0
    for i in range(slots.shape[0]):
        s = slots[i]
        write_row(i, s, centers, radii, vdist, store_c, store_r, store_v)
        p = slot_pos[s]
        if p < awake0:
            asleep += 1
            continue
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        s32.x[p] = to32(cx)
        s32.y[p] = to32(cy)
        s32.z[p] = to32(cz)
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
        if has_r:
            s32.r[p] = to32(radii[i])
            rad = max(rad, radii[i])
        if has_v:
            s32.vd[p] = to32(vdist[i])
    return asleep, max(bx, by, bz), rad


@njit(cache=True)
def check_awake_moves(ids, centers, id_pos: IdArrays, awake0: int, pos) -> bool:
    """The per-frame fast path's check: True when every id is known and already awake, every
    centre finite and the ids strictly increasing (so distinct); their positions in ``pos``.

    Changes nothing; False sends the batch down the general path, which names what is wrong.
    One table look-up per id (id -> position) instead of two (id -> slot -> position).
    """
    dense = id_pos.dense
    nd = dense.shape[0]
    for i in range(ids.shape[0]):
        k = ids[i]
        p = dense[k] if k >= 0 and k < nd else hash_lookup(id_pos.keys, id_pos.vals, k)
        pos[i] = p
        ok = (p >= awake0) & np.isfinite(centers[i, 0]) & np.isfinite(centers[i, 1]) & (
            np.isfinite(centers[i, 2]))
        if not ok or (i > 0 and k <= ids[i - 1]):
            return False
    return True
