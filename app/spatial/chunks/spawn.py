"""New objects into the holes of the still chunk around them.

Every removal and every wake leaves a hole in the still region, and until now every new
object went to the awake region at the end of the layout. Under steady spawning (a game
removing and adding a few objects a frame) the holes piled up until a quarter of the layout
was holes and the whole layout was re-sorted: a stall (23 ms at 10^5 objects, every ~250
frames at 0.1 % a frame), and meanwhile the awake region filled with spawns scattered over
the world. Here a new object takes a hole of the still chunk whose curve range holds it, as
long as its sphere (and view distance) lie within that chunk's limit: the chunk's box grows
to cover it, as for an object written in place (``update.write_settle``), and the nodes
above hold the limit already. The chunked index does so once holes are many (``FILL_HOLES``):
a placement reads and writes more cache lines than an append, but the holes then stop
growing before they force a re-sort.

Which chunk: the still region was laid out along a Hilbert curve on a known grid
(:class:`StillCurve`: the grid and the first code of every still chunk), so a new centre's
code on that grid, searched among the chunks' first codes, names the chunk whose range of
the curve holds it; that chunk and its two neighbours are tried. An awake object that
stopped moving tries the hole it woke from first (``ChunkPlaces.home``): most often its old
chunk's limit still holds it, and the placement needs no curve code and no search (a sleep
of 54,000 such objects at 10^6: 25 ms by the curve, 12 ms home first).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from app.spatial.chunks.layout import (
    CHUNK,
    COPY,
    FANOUT,
    NO_POS,
    Tree,
    chunk_holds,
    frame_codes,
    grow_chunk,
    sphere_bounds,
)
from app.spatial.chunks.update import ChunkPlaces, StillMoves
from app.spatial.moves import SphereRecords
from app.spatial.prefetch import PREFETCH_AHEAD, prefetch
from app.spatial.scan import to32


class StillCurve(NamedTuple):
    """The curve the still region was laid out along: its grid (``layout.curve_frame``) and
    the code of each still chunk's first object (increasing)."""

    lo: np.ndarray
    scale: np.ndarray
    bits: int
    first: np.ndarray


def still_curve(lo: np.ndarray, scale: np.ndarray, bits: int,
                sorted_codes: np.ndarray) -> StillCurve:
    """The record of a still region laid out from position 0 in the order of
    ``sorted_codes``."""
    return StillCurve(lo, scale, bits, np.ascontiguousarray(sorted_codes[::CHUNK]))


def guess_chunks(curve: StillCurve, centers: np.ndarray) -> np.ndarray:
    """For each centre, the still chunk whose range of the curve holds its code."""
    codes = frame_codes(centers, curve.lo, curve.scale, curve.bits)
    guess = np.searchsorted(curve.first, codes, side="right") - 1
    return np.clip(guess, 0, curve.first.shape[0] - 1)


@njit(cache=True)
def place_in_holes(still: StillMoves, places: ChunkPlaces, rec: SphereRecords, slot_id,
                   slots, guess, pad: float, placed) -> tuple[int, float, float]:
    """Place the objects ``slots`` (their values in the store) in holes of still chunks,
    chunks with objects (their limits are held above: see ``layout.refit_upper``) whose
    limit holds the sphere and view distance. ``guess`` empty: only in the hole each woke
    from (``ChunkPlaces.home``), if it is a still hole yet; else in a hole of chunk
    ``guess[i]`` or a neighbour. ``placed[i]`` gets the position, or -1 (the caller tries
    again or appends those). The id -> position map is the caller's. Returns (how many
    placed, largest coordinate magnitude, largest radius)."""
    tree: Tree = still.tree
    box = tree.box
    lim = tree.limit
    count = tree.count
    loff = tree.loff
    levels = loff.shape[0] - 1
    awake0 = still.awake0
    moved_at = still.moved_at
    slot_pos = places.slot_pos
    pos_slot = places.pos_slot
    pos_id = places.pos_id
    home = places.home
    store_c = rec.store_c
    store_r = rec.store_r
    store_v = rec.store_v
    x = rec.s32.x
    y = rec.s32.y
    z = rec.s32.z
    r32 = rec.s32.r
    vd32 = rec.s32.vd
    nstill = (awake0 + CHUNK - 1) // CHUNK
    at_home = guess.shape[0] == 0
    n = 0
    big = 0.0
    rad = 0.0
    m = slots.shape[0]
    npos = pos_slot.shape[0]
    for i in range(m):
        # A later object's lines, in three steps down its chain of look-ups (its slot's rows;
        # the position it woke from; that hole's lanes and its chunk's limit): every one lies
        # anywhere in the layout, and one stopped mover took about 450 ns one miss after
        # another (10^6, churn10, 1,000 a frame).
        if i + PREFETCH_AHEAD < m:
            t = slots[i + PREFETCH_AHEAD]
            prefetch(store_c, t)
            prefetch(store_r, t)
            prefetch(store_v, t)
            prefetch(slot_pos, t)
        if at_home and i + PREFETCH_AHEAD // 2 < m:
            prefetch(home, slot_pos[slots[i + PREFETCH_AHEAD // 2]])
        if i + PREFETCH_AHEAD // 4 < m:
            t = slots[i + PREFETCH_AHEAD // 4]
            q = home[slot_pos[t]] if at_home else guess[i + PREFETCH_AHEAD // 4] * CHUNK
            if 0 <= q < npos:
                prefetch(pos_slot, q)
                prefetch(r32, q)
                prefetch(x, q)
                prefetch(y, q)
                prefetch(z, q)
                prefetch(vd32, q)
                prefetch(pos_id, q)
                prefetch(lim, q // CHUNK)
        placed[i] = -1
        s = slots[i]
        cx = store_c[s, 0]
        cy = store_c[s, 1]
        cz = store_c[s, 2]
        rr = store_r[s]
        v = store_v[s]
        lx, ly, lz, hx, hy, hz = sphere_bounds(cx, cy, cz, rr, pad)
        for d in range(1 if at_home else 3):
            p = -1
            if at_home:
                q = home[slot_pos[s]]
                if q < 0 or q >= awake0 or pos_slot[q] != NO_POS:
                    break
                c = q // CHUNK
            else:
                c = guess[i] + (0, -1, 1)[d]
            if c < 0 or c >= nstill or count[c] == 0 or count[c] >= CHUNK:
                continue
            if not chunk_holds(lim, c, 0, lx, ly, lz, hx, hy, hz, v, True):
                continue
            if at_home:
                p = q
            else:
                for q in range(c * CHUNK, min((c + 1) * CHUNK, awake0)):
                    if r32[q] == -np.inf:  # a hole (its radius lane: half the lines of
                        p = q              # pos_slot)
                        break
            if p < 0:  # (its holes lie past the still region's end)
                continue
            pos_slot[p] = s
            slot_pos[s] = p
            pos_id[p] = slot_id[s]
            x[p] = to32(cx)
            y[p] = to32(cy)
            z[p] = to32(cz)
            r32[p] = to32(rr)
            vd32[p] = to32(v)
            moved_at[p] = 0  # (no batch's stamp: not "written in place by the last batch")
            local = c
            for lv in range(levels):
                count[loff[lv] + local] += 1
                local //= FANOUT
            if not chunk_holds(lim, c, COPY, lx, ly, lz, hx, hy, hz, v, True):
                grow_chunk(box, lim, c, lx, ly, lz, hx, hy, hz, v, True)
            big = max(big, abs(cx), abs(cy), abs(cz))
            rad = max(rad, rr)
            placed[i] = p
            n += 1
            break
    return n, big, rad
