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
    new positions' chunks are counted when the caller refits them. The caller then writes
    every mover's centre (:func:`app.spatial.moves.write_batch`): this leaves it unset.
    """
    # Every field out of the records once: read through a named tuple inside the loop, each
    # access pays a reference count.
    slot_pos = places.slot_pos
    pos_slot = places.pos_slot
    pos_id = places.pos_id
    keys = places.id_keys
    vals = places.id_vals
    dense = places.id_dense
    r = s32.r
    vd = s32.vd
    count = tree.count
    loff = tree.loff
    levels = loff.shape[0] - 1
    hashed = np.empty(rows.shape[0], np.int64)  # new positions of ids outside the direct table
    nh = 0
    for j in range(rows.shape[0]):
        i = rows[j]
        p = pos[i]
        s = pos_slot[p]
        # The radius and view distance move along; the centre is the batch's to write (the
        # caller writes every mover after this), so its old lanes are never read: three cache
        # misses fewer a woken object.
        r[npos] = r[p]
        vd[npos] = vd[p]
        pos_slot[p] = NO_POS
        r[p] = -np.inf  # a hole, as scan.kill32 leaves it
        vd[p] = np.inf
        local = p // CHUNK
        for lv in range(levels):
            count[loff[lv] + local] -= 1
            local //= FANOUT
        slot_pos[s] = npos
        pos_slot[npos] = s
        k = pos_id[p]
        pos_id[npos] = k
        if k >= 0 and k < dense.shape[0]:
            dense[k] = npos
        else:
            hashed[nh] = npos
            nh += 1
        pos[i] = npos
        npos += 1
    _assign_hashed(keys, vals, dense, pos_id, hashed[:nh])
    return npos


@njit(cache=True)
def _assign_hashed(keys, vals, dense, pos_id, positions) -> None:
    """The id -> position map's hashed ids at ``positions``, pointed there. A loop of its
    own: ``assign`` anywhere in a loop made every turn of it cost ~60 ns more, even on turns
    that never call it."""
    for i in range(positions.shape[0]):
        assign(keys, vals, dense, pos_id[positions[i]], positions[i])


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
    keys = places.id_keys
    vals = places.id_vals
    dense = places.id_dense
    c = rec.store_c
    store_r = rec.store_r
    store_v = rec.store_v
    x = rec.s32.x
    y = rec.s32.y
    z = rec.s32.z
    r32 = rec.s32.r
    vd32 = rec.s32.vd
    bx = by = bz = 0.0
    rad = 0.0
    hashed = np.empty(order.shape[0], np.int64)  # positions of ids outside the direct table
    nh = 0
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
        r32[p] = to32(store_r[s])
        vd32[p] = to32(store_v[s])
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
        rad = max(rad, store_r[s])
        k = slot_id[s]
        if reassign and k >= 0 and k < dense.shape[0]:
            dense[k] = p
        elif reassign:
            hashed[nh] = p
            nh += 1
    _assign_hashed(keys, vals, dense, pos_id, hashed[:nh])
    return max(bx, by, bz), rad
