"""Moving objects in the chunked layout: movers live apart from the still ones.

Keep still objects apart from moving ones (Jolt's layers, Bullet's sleeping bodies). A still
object that moves once in a while is written where it is, and its chunk's box grows to cover
it (:func:`write_settle`: a few compares, Box2D's fat boxes and Jolt's grow-only bounds), as
long as it stays within its chunk's limit (``Tree.limit``), which the nodes above hold. One that
moves out of that limit, or moves again the next batch (a mover that keeps moving), *wakes*:
that leaves a hole at its old position (the chunk's box stays: loose is still right) and
appends it to the *awake region* at the end of the layout, in curve order with the others
woken in the same batch. Later moves write in place inside the awake region: a few thousand
movers' records stay in the cache instead of costing a miss each in a layout of millions.
After a batch only the awake chunks it wrote are refit (:func:`written_chunks`,
:func:`refit_listed`), so a batch costs in proportion to its own size, however large the
awake region has grown. An awake mover that jumps out of its chunk's limit wakes again
(found by :func:`refit_listed`): its chunk keeps its box.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from app.spatial.chunks.layout import (
    CHUNK,
    COPY,
    FANOUT,
    HI,
    LO,
    NO_POS,
    Tree,
    chunk_holds,
    fit_chunk,
    grow_chunk,
    set_limit,
    sphere_bounds,
)
from app.spatial.idmap import assign
from app.spatial.moves import SphereRecords, UpdateBatch
from app.spatial.prefetch import PREFETCH_AHEAD, prefetch, prefetch_at
from app.spatial.scan import F32_BIG, Spheres32, to32
from app.spatial.seen import first_sight, forget


class ChunkPlaces(NamedTuple):
    """Who is where in the layout: the maps a move of a record between positions rewrites."""

    slot_pos: np.ndarray  # store slot -> position
    pos_slot: np.ndarray  # position -> store slot (NO_POS: a hole)
    pos_id: np.ndarray  # position -> caller id
    id_keys: np.ndarray  # id -> position (``app.spatial.idmap``'s three tables)
    id_vals: np.ndarray
    id_dense: np.ndarray
    home: np.ndarray  # position -> the one its object woke from (NO_POS: none; a hole to
    #                   try first when it sleeps again, checked as any other)


@njit(cache=True, _nrt=False)
def leave_hole(pos_slot, r, vd, count, loff, p: int) -> None:
    """Position p becomes a hole: no slot, a dead float32 record (as ``scan.kill32`` leaves
    it), one object fewer in its chunk and above (boxes stay: loose is still right).
    Compiled without reference counts: called per object, its arrays would pay them."""
    pos_slot[p] = NO_POS
    r[p] = -np.inf
    vd[p] = np.inf
    local = p // CHUNK
    for lv in range(loff.shape[0] - 1):
        count[loff[lv] + local] -= 1
        local //= FANOUT


@njit(cache=True)
def leave_holes(tree: Tree, s32: Spheres32, pos_slot, positions) -> None:
    """:func:`leave_hole` at each of ``positions`` (movers that stopped and went back to
    still holes), a later position's lines asked for ahead (scattered at 10^7)."""
    r = s32.r
    vd = s32.vd
    count = tree.count
    loff = tree.loff
    n = positions.shape[0]
    for i in range(n):
        if i + PREFETCH_AHEAD < n:
            q = positions[i + PREFETCH_AHEAD]
            prefetch(pos_slot, q)
            prefetch(r, q)
            prefetch(vd, q)
            prefetch(count, q // CHUNK)
        leave_hole(pos_slot, r, vd, count, loff, positions[i])


@njit(cache=True)
def wake_movers(tree: Tree, s32: Spheres32, places: ChunkPlaces, pos, rows, npos: int,
                written: bool = False) -> int:
    """Move the movers ``pos[rows]`` (``rows`` in the order they are to be laid out) to
    positions ``npos ..``, rewriting ``pos[rows]``; returns the new end of the layout.

    Their old positions become holes, and the chunks there (and above) count one fewer; the
    new positions' chunks are counted when the caller refits them. Unless ``written`` (the
    batch's centres are in the records already: movers that left their awake chunk), the
    caller then writes every mover's centre (:func:`app.spatial.moves.write_batch`): this
    leaves it unset.
    """
    # Every field out of the records once: read through a named tuple inside the loop, each
    # access pays a reference count.
    slot_pos = places.slot_pos
    pos_slot = places.pos_slot
    pos_id = places.pos_id
    keys = places.id_keys
    vals = places.id_vals
    dense = places.id_dense
    x = s32.x
    y = s32.y
    z = s32.z
    r = s32.r
    vd = s32.vd
    count = tree.count
    loff = tree.loff
    home = places.home
    hashed = np.empty(rows.shape[0], np.int64)  # new positions of ids outside the direct table
    nh = 0
    m = rows.shape[0]
    ahead = PREFETCH_AHEAD
    nd = dense.shape[0]
    for j in range(m):
        # A later mover's old position's lines (scattered over the still region), then its
        # slot's and its id's entries once the position's are in.
        if j + ahead < m:
            q = pos[rows[j + ahead]]
            prefetch(pos_slot, q)
            prefetch(pos_id, q)
            prefetch(r, q)
            prefetch(vd, q)
            prefetch(count, q // CHUNK)
            if written:
                prefetch(x, q)
                prefetch(y, q)
                prefetch(z, q)
        if j + ahead // 2 < m:
            q = pos[rows[j + ahead // 2]]
            prefetch(slot_pos, pos_slot[q])
            ka = pos_id[q]
            if ka >= 0 and ka < nd:
                prefetch(dense, ka)
        i = rows[j]
        p = pos[i]
        s = pos_slot[p]
        # The radius and view distance move along; the centre is the batch's to write (the
        # caller writes every mover after this), so its old lanes are never read: three cache
        # misses fewer a woken object.
        r[npos] = r[p]
        vd[npos] = vd[p]
        if written:
            x[npos] = x[p]
            y[npos] = y[p]
            z[npos] = z[p]
        leave_hole(pos_slot, r, vd, count, loff, p)
        home[npos] = p  # the hole it may sleep back into (spawn.place_in_holes)
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
def take_out_slots(tree: Tree, s32: Spheres32, places: ChunkPlaces, slots, seen,
                   last_pos) -> bool:
    """Leave holes where the store slots ``slots`` (distinct, live: removed objects) lie:
    both maps cleared, the float32 records dead (``scan.kill32``), one fewer counted at each
    chunk and above (boxes stay: loose is still right). One pass over the batch, a later
    slot's lines asked for ahead: six numpy passes over scattered rows cost 1.0-1.5 ms for
    10^4 removals at 10^7. The id -> position map is the caller's. Returns whether one of
    ``last_pos`` (the last batch's positions) was among them, found through the clear
    per-position bitset ``seen`` (left clear)."""
    slot_pos = places.slot_pos
    pos_slot = places.pos_slot
    r = s32.r
    vd = s32.vd
    count = tree.count
    loff = tree.loff
    n = slots.shape[0]
    pos = np.empty(n, np.int64)
    ahead = PREFETCH_AHEAD
    for i in range(n):
        if i + ahead < n:
            prefetch(slot_pos, slots[i + ahead])
        if i + ahead // 2 < n:  # and its position's lines, once its position is in
            q = slot_pos[slots[i + ahead // 2]]
            prefetch(pos_slot, q)
            prefetch(r, q)
            prefetch(vd, q)
            prefetch(count, q // CHUNK)
        s = slots[i]
        p = slot_pos[s]
        pos[i] = p
        slot_pos[s] = NO_POS
        leave_hole(pos_slot, r, vd, count, loff, p)
        first_sight(seen, p)
    hit = False
    for i in range(last_pos.shape[0]):
        p = last_pos[i]
        if seen[p >> 6] & (np.uint64(1) << np.uint64(p & 63)):
            hit = True
            break
    forget(seen, pos, n)
    return hit


@njit(cache=True)
def _assign_hashed(keys, vals, dense, pos_id, positions) -> None:
    """The id -> position map's hashed ids at ``positions``, pointed there. A loop of its
    own: ``assign`` anywhere in a loop made every turn of it cost ~60 ns more, even on turns
    that never call it."""
    for i in range(positions.shape[0]):
        assign(keys, vals, dense, pos_id[positions[i]], positions[i])


class StillMoves(NamedTuple):
    """What :func:`write_settle` needs besides the batch and the records: the tree (boxes and
    limits), where the awake region starts, and each position's last in-place batch."""

    tree: Tree
    awake0: int
    moved_at: np.ndarray  # uint8 by position: the last batch (1 .. 255) that wrote it in place


@njit(cache=True)
def write_settle(batch: UpdateBatch, pos, rec: SphereRecords, still: StillMoves, stamp: int,
                 pad: float, wake):
    """Write a checked batch (as :func:`app.spatial.moves.write_batch` does) and settle its
    still movers (``pos[i] < awake0``) in the same pass, while their records are in the
    cache: one that stays within its chunk's limit and was not written in place by the
    previous batch (the stamp before ``stamp``, cycling through 1 .. 255) stays, and its
    chunk's box grows to cover its new sphere (and view distance, when the batch carries it;
    the nodes above hold the chunk's limit already: ``layout.refit_upper``); the others are
    marked in ``wake`` for the caller to move (their records written already). Returns
    (largest coordinate magnitude, largest radius written, how many are marked).

    The boxes cover the float64 spheres: the radius is the batch's, or the float32 copy's
    rounded up (one ulp), and each bound moves out by ``pad`` and a rounding margin.
    """
    tree = still.tree
    box = tree.box
    lim = tree.limit
    awake0 = still.awake0
    moved_at = still.moved_at
    pos_slot = rec.pos_slot
    store_c = rec.store_c
    store_r = rec.store_r
    store_v = rec.store_v
    x = rec.s32.x
    y = rec.s32.y
    z = rec.s32.z
    r32 = rec.s32.r
    vd32 = rec.s32.vd
    centers = batch.centers
    radii = batch.radii
    vdist = batch.vdist
    n = pos.shape[0]
    has_r = radii.shape[0] == n
    has_v = vdist.shape[0] == n
    up = 1.0 + 2.0 ** -23
    big = np.float32(F32_BIG)
    bx = by = bz = 0.0
    rad = 0.0
    nwake = 0
    ahead = PREFETCH_AHEAD
    for i in range(n):
        # A later mover's lines asked for now (its position's, then its slot's once the
        # position's slot is in): the loop body is too long for the processor to overlap more
        # than a mover or two's misses by itself.
        if i + ahead < n:
            q = pos[i + ahead]
            prefetch(pos_slot, q)
            prefetch(x, q)
            prefetch(y, q)
            prefetch(z, q)
            prefetch(r32, q)
            prefetch(moved_at, q)
            prefetch(lim, q // CHUNK)
            prefetch_at(lim, q // CHUNK, COPY)  # (the box's copy: the row's second line)
            if has_v:
                prefetch(vd32, q)
        if i + ahead // 2 < n:
            q = pos_slot[pos[i + ahead // 2]]
            prefetch(store_c, q)
            if has_r:
                prefetch(store_r, q)
            if has_v:
                prefetch(store_v, q)
        # The row's writes repeat moves.write_batch's on purpose: a shared inline helper that
        # took the records (rec.s32.x ...) inside the loop made a fresh mover cost ~130 ns
        # instead of ~17 (each field access of a record in the loop refcounts its array;
        # measured with bench index --scale 0.3, order / sizes / churn100, 2026-11-26).
        p = pos[i]
        s = pos_slot[p]
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        store_c[s, 0] = cx
        store_c[s, 1] = cy
        store_c[s, 2] = cz
        x[p] = to32(cx)
        y[p] = to32(cy)
        z[p] = to32(cz)
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
        v = 0.0
        if has_r:
            store_r[s] = radii[i]
            r32[p] = to32(radii[i])
            rad = max(rad, radii[i])
        if has_v:
            v = vdist[i]
            store_v[s] = v
            vd32[p] = to32(v)
        wake[i] = False
        if p >= awake0:
            continue
        # (a clamped float32 radius stands for any larger one: it fits no limit)
        r_copy = np.float64(r32[p]) * up if r32[p] < big else np.inf
        rr = radii[i] if has_r else r_copy
        c = p // CHUNK
        lx, ly, lz, hx, hy, hz = sphere_bounds(cx, cy, cz, rr, pad)
        if (not chunk_holds(lim, c, 0, lx, ly, lz, hx, hy, hz, v, has_v)
                or moved_at[p] == (stamp - 2) % 255 + 1):  # (the stamp before)
            wake[i] = True
            nwake += 1
            continue
        moved_at[p] = np.uint8(stamp)
        # The chunk against its box's copy (one or two lines): most writes grow nothing.
        if not chunk_holds(lim, c, COPY, lx, ly, lz, hx, hy, hz, v, has_v):
            grow_chunk(box, lim, c, lx, ly, lz, hx, hy, hz, v, has_v)
    return max(bx, by, bz), rad, nwake


@njit(cache=True)
def written_chunks(pos, mark, epoch: int, p0: int = 0):
    """The distinct chunks of positions ``pos`` from ``p0`` on (each once, stamped in ``mark``
    with a fresh ``epoch``), and the lowest and one past the highest of them."""
    out = np.empty(pos.shape[0], dtype=np.int64)
    k = 0
    lo = np.int64(mark.shape[0])
    hi = np.int64(0)
    for i in range(pos.shape[0]):
        if pos[i] < p0:
            continue
        c = pos[i] // CHUNK
        if mark[c] != epoch:
            mark[c] = epoch
            out[k] = c
            k += 1
            lo = min(lo, c)
            hi = max(hi, c + 1)
    return out[:k], lo, hi


@njit(cache=True)
def refit_listed(tree: Tree, s32: Spheres32, chunks, pad: float, p0: int, p1: int,
                 left) -> int:
    """Tight boxes, counts and limits of the listed (awake) chunks (the nodes above are the
    caller's); returns k, with in ``left[:k]`` the live positions in ``p0 .. p1`` that now
    lie outside their chunk's previous limit: movers that jumped away from their chunk-mates
    (a teleport). An awake chunk's limit follows its movers, so only a jump is caught; the
    test costs a chunk six compares, and its lanes are read again only when one jumped."""
    lim = tree.limit
    b = tree.box
    k = 0
    for i in range(chunks.shape[0]):
        c = chunks[i]
        fit_chunk(tree, s32, c, pad)
        q0 = max(c * CHUNK, p0)
        q1 = min((c + 1) * CHUNK, p1)
        if q0 < q1 and ((b[LO, c] < lim[c, LO]) | (b[LO + 1, c] < lim[c, LO + 1])
                        | (b[LO + 2, c] < lim[c, LO + 2]) | (b[HI, c] > lim[c, HI])
                        | (b[HI + 1, c] > lim[c, HI + 1]) | (b[HI + 2, c] > lim[c, HI + 2])):
            k = _outside_limit(s32, lim, c, q0, q1, left, k)
        set_limit(tree, c)
    return k


@njit(cache=True)
def _outside_limit(s32: Spheres32, lim, c: int, q0: int, q1: int, left, k: int) -> int:
    """Append to ``left[k:]`` the live positions ``q0 .. q1`` of chunk ``c`` outside its
    limit; returns the new k."""
    for p in range(q0, q1):
        rr = s32.r[p]
        if rr == -np.inf:
            continue
        if ((s32.x[p] - rr < lim[c, LO]) | (s32.y[p] - rr < lim[c, LO + 1])
                | (s32.z[p] - rr < lim[c, LO + 2]) | (s32.x[p] + rr > lim[c, HI])
                | (s32.y[p] + rr > lim[c, HI + 1]) | (s32.z[p] + rr > lim[c, HI + 2])):
            left[k] = p
            k += 1
    return k


@njit(cache=True)
def rows_at(pos, positions, mark, stamp: int):
    """The rows of ``pos`` that hold one of ``positions`` (stamped in ``mark`` with a fresh
    ``stamp``)."""
    for i in range(positions.shape[0]):
        mark[positions[i]] = stamp
    out = np.empty(positions.shape[0], np.int64)
    k = 0
    for i in range(pos.shape[0]):
        if mark[pos[i]] == stamp and k < out.shape[0]:
            out[k] = i
            k += 1
    return out[:k]


@njit(cache=True)
def place(places: ChunkPlaces, rec: SphereRecords, slot_id, order, src_row, first: int,
          reassign: bool):
    """Lay the store slots ``order`` out at positions ``first ..``: the maps both ways (ids
    from ``slot_id``, the store's), the id -> position map too when ``reassign`` (ids already
    in it; new ids are the caller's to insert), and the float32 records from ``rec``'s
    columns, row ``src_row[i]`` for ``order[i]``: the store's (``src_row`` is ``order``) or
    an insert's own rows (contiguous: no cache miss a column; view distances empty when the
    batch gave none, infinite). One serial pass for any size: a batch of spawns costs no
    more than its own rows, and a full re-sort at 10^6 objects took 172-180 ms with numpy's
    scattered passes and a parallel copy of the records, 92-107 ms so. Returns (largest
    coordinate magnitude, largest radius) written."""
    slot_pos = places.slot_pos
    pos_slot = places.pos_slot
    pos_id = places.pos_id
    home = places.home
    keys = places.id_keys
    vals = places.id_vals
    dense = places.id_dense
    c = rec.store_c
    store_r = rec.store_r
    store_v = rec.store_v
    has_v = store_v.shape[0] > 0
    x = rec.s32.x
    y = rec.s32.y
    z = rec.s32.z
    r32 = rec.s32.r
    vd32 = rec.s32.vd
    bx = by = bz = 0.0
    rad = 0.0
    hashed = np.empty(order.shape[0], np.int64)  # positions of ids outside the direct table
    nh = 0
    n = order.shape[0]
    ahead = PREFETCH_AHEAD
    nd = dense.shape[0]
    for i in range(n):
        if i + ahead < n:  # a later slot's rows (a spawn's slots lie anywhere in the store)
            t = order[i + ahead]
            prefetch(slot_pos, t)
            prefetch(slot_id, t)
            u = src_row[i + ahead]
            prefetch(c, u)
            prefetch(store_r, u)
            if has_v:
                prefetch(store_v, u)
        if reassign and i + ahead // 2 < n:  # and its id's entry, once its id is in
            k = slot_id[order[i + ahead // 2]]
            if k >= 0 and k < nd:
                prefetch(dense, k)
        s = order[i]
        q = src_row[i]
        p = first + i
        pos_slot[p] = s
        home[p] = NO_POS  # (laid out anew: woken from nowhere)
        slot_pos[s] = p
        pos_id[p] = slot_id[s]
        cx = c[q, 0]
        cy = c[q, 1]
        cz = c[q, 2]
        x[p] = to32(cx)
        y[p] = to32(cy)
        z[p] = to32(cz)
        r32[p] = to32(store_r[q])
        vd32[p] = to32(store_v[q]) if has_v else np.float32(np.inf)
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
        rad = max(rad, store_r[q])
        k = slot_id[s]
        if reassign and k >= 0 and k < dense.shape[0]:
            dense[k] = p
        elif reassign:
            hashed[nh] = p
            nh += 1
    _assign_hashed(keys, vals, dense, pos_id, hashed[:nh])
    return max(bx, by, bz), rad


@njit(cache=True)
def leavers(last_pos, pos, mark, stamp: int, awake0: int, pos_slot):
    """The awake positions of the last batch (``last_pos``) that this batch (``pos``) does
    not move: movers that stopped. Stamps ``pos`` in ``mark`` with ``stamp`` (fresh)."""
    for i in range(pos.shape[0]):
        mark[pos[i]] = stamp
    out = np.empty(last_pos.shape[0], np.int64)
    k = 0
    for i in range(last_pos.shape[0]):
        p = last_pos[i]
        if p >= awake0 and mark[p] != stamp and pos_slot[p] >= 0:
            out[k] = p
            k += 1
    return out[:k]


@njit(cache=True)
def unmarked(p0: int, p1: int, mark, stamp: int, pos_slot):
    """The live positions in ``p0 .. p1`` not stamped ``stamp`` in ``mark``."""
    out = np.empty(max(p1 - p0, 0), np.int64)
    k = 0
    for p in range(p0, p1):
        if pos_slot[p] >= 0 and mark[p] != stamp:
            out[k] = p
            k += 1
    return out[:k]
