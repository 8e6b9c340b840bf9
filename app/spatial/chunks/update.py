"""Moving objects in the chunked layout: one pass over the batch, nothing relinked.

An object keeps its position when it moves. Its float32 copy is rewritten in place, and its
chunk's box (and the boxes above it) grow when the new sphere pokes out: Box2D's fat-bound
idea taken to its limit, a move costs a record write and, rarely, a few box writes. Boxes
never shrink here; when a batch moves most of the objects, :func:`app.spatial.chunks.layout.
refit_chunks` recomputes them all instead, and when the chunks have spread too far apart the
index re-sorts the whole layout (see ``ChunkedIndex``).
"""

from __future__ import annotations

from numba import njit

from app.spatial.chunks.layout import CHUNK, PAD_ULPS, Tree, grow_up
from app.spatial.scan import Spheres32, to32


@njit(cache=True)
def move(tree: Tree, s32: Spheres32, slot_pos, slots, centers, radii, vdist, grow: bool):
    """Copy moved slots into their positions; with ``grow``, grow the boxes they leave.

    Returns the largest coordinate magnitude and radius written (they bound the float32
    tolerances and the padding).
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
        v = vdist[s]
        s32.x[p] = to32(cx)
        s32.y[p] = to32(cy)
        s32.z[p] = to32(cz)
        s32.r[p] = to32(r)
        s32.vd[p] = to32(v)
        m = max(abs(cx), abs(cy), abs(cz))
        big = max(big, m)
        rad = max(rad, r)
        if grow:
            pad = PAD_ULPS * (m + r) + 1e-30  # this sphere's own rounding margin
            grow_up(tree, p // CHUNK, cx - r - pad, cy - r - pad, cz - r - pad, cx + r + pad,
                    cy + r + pad, cz + r + pad, v)
    return big, rad
