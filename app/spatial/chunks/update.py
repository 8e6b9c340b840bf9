"""Moving objects in the chunked layout: movers live apart from the still ones.

Keep still objects apart from moving ones (Jolt's layers, Bullet's sleeping bodies): the
first move of an object *wakes* it, which leaves a hole at its old position (the chunk's box
stays: loose is still right) and appends it to the *awake region* at the end of the layout,
in curve order with the others woken in the same batch. Later moves write in place inside the
awake region: a few thousand movers' records stay in the cache instead of costing a miss each
in a layout of millions, and the still chunks' boxes never change. After a batch only the
chunks it wrote are refit (:func:`written_chunks`, :func:`refit_listed`), so a batch costs
in proportion to its own size, however large the awake region has grown.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from app.spatial.chunks.layout import CHUNK, FANOUT, NO_POS, Tree, fit_chunk
from app.spatial.idmap import assign
from app.spatial.moves import SphereRecords
from app.spatial.scan import Spheres32, to32


class ChunkPlaces(NamedTuple):
    """Who is where in the layout: the maps a move of a record between positions rewrites."""

    slot_pos: np.ndarray  # store slot -> position
    pos_slot: np.ndarray  # position -> store slot (NO_POS: a hole)
    pos_id: np.ndarray  # position -> caller id
    id_keys: np.ndarray  # id -> position (``app.spatial.idmap``'s three tables)
    id_vals: np.ndarray
    id_dense: np.ndarray


@njit(cache=True)
def wake_movers(tree: Tree, s32: Spheres32, places: ChunkPlaces, pos, rows, npos: int) -> int:
    """Move the still movers ``pos[rows]`` (``rows`` in the order they are to be laid out) to
    positions ``npos ..``, rewriting ``pos[rows]``; returns the new end of the layout.

    Their old positions become holes, and the chunks there (and above) count one fewer; the
    new positions' chunks are counted when the caller refits them.
    """
    slot_pos = places.slot_pos
    pos_slot = places.pos_slot
    pos_id = places.pos_id
    for j in range(rows.shape[0]):
        i = rows[j]
        p = pos[i]
        s = pos_slot[p]
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
        assign(places.id_keys, places.id_vals, places.id_dense, pos_id[p], npos)
        pos[i] = npos
        npos += 1
    return npos


@njit(cache=True)
def written_chunks(pos, mark, epoch: int):
    """The distinct chunks of positions ``pos`` (each once, stamped in ``mark`` with a fresh
    ``epoch``), and the lowest and one past the highest of them."""
    out = np.empty(pos.shape[0], dtype=np.int64)
    k = 0
    lo = np.int64(mark.shape[0])
    hi = np.int64(0)
    for i in range(pos.shape[0]):
        c = pos[i] // CHUNK
        if mark[c] != epoch:
            mark[c] = epoch
            out[k] = c
            k += 1
            lo = min(lo, c)
            hi = max(hi, c + 1)
    return out[:k], lo, hi


@njit(cache=True)
def refit_listed(tree: Tree, s32: Spheres32, chunks, pad: float) -> None:
    """Tight boxes and counts of the listed chunks (the nodes above are the caller's)."""
    for i in range(chunks.shape[0]):
        fit_chunk(tree, s32, chunks[i], pad)


@njit(cache=True)
def place(places: ChunkPlaces, rec: SphereRecords, slot_id, order, first: int, reassign: bool):
    """Lay the store slots ``order`` out at positions ``first ..``: the maps both ways (ids
    from ``slot_id``, the store's), the id -> position map too when ``reassign`` (ids already
    in it; new ids are the caller's to insert), and the float32 records from the store. One
    serial pass: a batch of spawns or an awake region costs no more than its own rows
    (``store32`` is for large batches). Returns (largest coordinate magnitude, largest
    radius) written."""
    slot_pos = places.slot_pos
    pos_slot = places.pos_slot
    pos_id = places.pos_id
    c = rec.store_c
    x = rec.s32.x
    y = rec.s32.y
    z = rec.s32.z
    r32 = rec.s32.r
    vd32 = rec.s32.vd
    bx = by = bz = 0.0
    rad = 0.0
    for i in range(order.shape[0]):
        s = order[i]
        p = first + i
        pos_slot[p] = s
        slot_pos[s] = p
        pos_id[p] = slot_id[s]
        cx = c[s, 0]
        cy = c[s, 1]
        cz = c[s, 2]
        x[p] = to32(cx)
        y[p] = to32(cy)
        z[p] = to32(cz)
        r32[p] = to32(rec.store_r[s])
        vd32[p] = to32(rec.store_v[s])
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
        rad = max(rad, rec.store_r[s])
        if reassign:
            assign(places.id_keys, places.id_vals, places.id_dense, pos_id[p], p)
    return max(bx, by, bz), rad
