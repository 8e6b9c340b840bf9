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

from app.spatial.chunks.layout import CHUNK, FANOUT, NO_POS, Tree
from app.spatial.scan import Spheres32, to32


@njit(cache=True)
def wake(tree: Tree, s32: Spheres32, slot_pos, pos_slot, woken, npos: int) -> int:
    """Move the sleeping ``woken`` slots (in curve order) to positions ``npos ..``; new npos.

    Their old positions become holes, and the chunks there (and above) count one fewer.
    """
    for i in range(woken.shape[0]):
        s = woken[i]
        p = slot_pos[s]
        pos_slot[p] = NO_POS
        s32.r[p] = -np.inf
        local = p // CHUNK
        for lv in range(tree.loff.shape[0] - 1):
            tree.count[tree.loff[lv] + local] -= 1
            local //= FANOUT
        slot_pos[s] = npos
        pos_slot[npos] = s
        npos += 1
    return npos


@njit(cache=True)
def write_moved(s32: Spheres32, slot_pos, slots, centers, radii, vdist):
    """Copy moved slots' new values into their float32 records (in place).

    Returns the largest coordinate magnitude and radius written: they bound the float32
    tolerances and the box padding.
    """
    big = 0.0
    rad = 0.0
    for i in range(slots.shape[0]):
        s = slots[i]
        p = slot_pos[s]
        cx = centers[s, 0]
        cy = centers[s, 1]
        cz = centers[s, 2]
        r = radii[s]
        s32.x[p] = to32(cx)
        s32.y[p] = to32(cy)
        s32.z[p] = to32(cz)
        s32.r[p] = to32(r)
        s32.vd[p] = to32(vdist[s])
        big = max(big, abs(cx), abs(cy), abs(cz))
        rad = max(rad, r)
    return big, rad
