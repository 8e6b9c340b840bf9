"""The same movers as last frame, written in one checking pass: shared by ``brute`` and
``chunks``.

A scene moves the same objects frame after frame, in the same order. The general path of an
update resolves every id (a table look-up), checks the batch, then writes the store and the
float32 copy the scan reads: three passes over the batch. When the ids are last batch's, the
positions found then still hold as long as the layout has not changed (an *epoch* the index
bumps on every insert, removal, growth or re-sort). One pass can then check each id against
the id at its remembered position and each centre for finiteness while it writes.

A batch of every live object as last time writes a *spare* float64 store that then swaps
with the store: a rejected batch leaves the store as it was without a separate check pass (the
float32 copy it wrote over is rewritten from the store with :func:`restore32`). Smaller
batches are checked first (:func:`known_movers`) and written after. A batch of every live
object in any other order is checked in one pass that finds its positions
(:func:`check_every`) and written in place in a second (:func:`write_batch`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from app.spatial.checks import is_f64, is_ids
from app.spatial.checks import values_ok as _values_ok
from app.spatial.idmap import hash_lookup
from app.spatial.object_store import Columns
from app.spatial.prefetch import PREFETCH_AHEAD, batch_rows_ahead, prefetch, rows_ahead
from app.spatial.scan import F32_BIG, Spheres32, to32
from app.spatial.seen import first_sight, forget


@njit(cache=True)
def write_known_movers(ids, centers, pos, pos_id, pos_slot, dst_c, x, y, z):
    """Check each id against its remembered position and each centre for finiteness while
    writing the centre to ``dst_c`` (by slot) and the float32 record (by position). Returns
    (all good, largest coordinate magnitude).

    One pass reads the batch once (a check pass, then a write pass, read it twice). On a bad
    batch the float32 records written are stale copies of nothing: the caller rewrites them
    from the store with :func:`restore32`, and ``dst_c`` must then not be the store.
    """
    ok = True
    bx = by = bz = 0.0  # three running maxima: one chain of max() was the loop's bottleneck
    for i in range(pos.shape[0]):
        p = pos[i]
        s = pos_slot[p]
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        ok &= (pos_id[p] == ids[i]) & np.isfinite(cx) & np.isfinite(cy) & np.isfinite(cz)
        dst_c[s, 0] = cx
        dst_c[s, 1] = cy
        dst_c[s, 2] = cz
        x[p] = to32(cx)
        y[p] = to32(cy)
        z[p] = to32(cz)
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
    return ok, max(bx, by, bz)


@njit(cache=True)
def write_known_run(ids, centers, p0: int, pos_id, dst_c, x, y, z):
    """:func:`write_known_movers` for movers at the consecutive positions ``p0 ..`` where
    position = slot: every access is sequential (a whole-scene batch of consecutive ids, the
    common case), and the batch's rows are asked for ahead (``prefetch.STREAM_AHEAD``: 10^5
    rows 0.56 -> 0.45 ms, though the hints' branch keeps the loop from vectorising).

    Writes plain float32 casts: when the returned magnitude exceeds ``F32_BIG`` the caller
    rewrites the run with :func:`restore32`'s clamps.
    """
    ok = True
    bx = by = bz = 0.0
    n = ids.shape[0]
    for i in range(n):
        if (i & 7) == 0:  # the batch's rows ahead (prefetch.STREAM_AHEAD)
            a = rows_ahead(ids, centers, i, n)
            prefetch(pos_id, p0 + a)
        p = p0 + i
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        ok &= (pos_id[p] == ids[i]) & np.isfinite(cx) & np.isfinite(cy) & np.isfinite(cz)
        dst_c[p, 0] = cx
        dst_c[p, 1] = cy
        dst_c[p, 2] = cz
        x[p] = cx
        y[p] = cy
        z[p] = cz
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
    return ok, max(bx, by, bz)


@njit(cache=True)
def known_movers(ids, centers, pos, pos_id) -> bool:
    """Every id at its remembered position and every centre finite (changes nothing)."""
    ok = True
    for i in range(pos.shape[0]):
        ok &= (pos_id[pos[i]] == ids[i]) & np.isfinite(centers[i, 0]) & np.isfinite(
            centers[i, 1]) & np.isfinite(centers[i, 2])
    return ok


@njit(cache=True)
def write_movers(pos, centers, pos_slot, store_c, s32: Spheres32) -> float:
    """Write checked moves: the store row (by slot) and the float32 record (by position).
    Returns the largest coordinate magnitude.

    :func:`write_batch` with centres only does the same; this copy stays for last frame's
    movers because it measured faster there (chunks' update of 1,000 movers 0.024-0.025 ms
    against 0.029-0.031 through write_batch, ``bench index --scale 0.1`` static ``fixed``,
    alternated twice)."""
    bx = by = bz = 0.0  # three running maxima: one chain of max() was the loop's bottleneck
    for i in range(pos.shape[0]):
        p = pos[i]
        s = pos_slot[p]
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        store_c[s, 0] = cx
        store_c[s, 1] = cy
        store_c[s, 2] = cz
        s32.x[p] = to32(cx)
        s32.y[p] = to32(cy)
        s32.z[p] = to32(cz)
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
    return max(bx, by, bz)


@njit(cache=True)
def restore32(pos, pos_slot, store_c, store_r, store_v, s32: Spheres32, radii: bool,
              vdist: bool) -> None:
    """Rewrite the float32 rows at ``pos`` from the store's columns (after a refused batch,
    or with clamps after plain casts overflowed): centres, and radii and view distances when
    the batch wrote them. ``pos_slot`` empty where positions are the slots; negative
    positions (unknown ids) are skipped."""
    x = s32.x
    y = s32.y
    z = s32.z
    r32 = s32.r
    vd32 = s32.vd
    same = pos_slot.shape[0] == 0
    for i in range(pos.shape[0]):
        p = pos[i]
        if p < 0:
            continue
        s = p if same else pos_slot[p]
        x[p] = to32(store_c[s, 0])
        y[p] = to32(store_c[s, 1])
        z[p] = to32(store_c[s, 2])
        if radii:
            r32[p] = to32(store_r[s])
        if vdist:
            vd32[p] = to32(store_v[s])


def plain_moves(ids: object, centers: object, radii: object, view_distances: object) -> bool:
    """Whether a batch is the per-frame kind the one-pass paths take: centres only, int64 ids
    and float64 (n, 3) centres, both contiguous, at least one row."""
    return (radii is None and view_distances is None and is_ids(ids)
            and is_f64(centers, (ids.shape[0], 3)))


class LastMovers(NamedTuple):
    """The last per-frame batch: the layout epoch it was found in, its positions, and its
    first position when they are consecutive with position = slot (else -1)."""

    epoch: int
    pos: np.ndarray
    run: int


def remember(epoch: int, pos: np.ndarray, positions_are_slots: bool) -> LastMovers:
    """The record of a checked batch found at ``pos`` (increasing positions of a run are
    written by the sequential kernel)."""
    run = -1
    if positions_are_slots and pos.shape[0] and pos[-1] - pos[0] == pos.shape[0] - 1 and (
            np.all(pos[1:] > pos[:-1])):
        run = int(pos[0])
    return LastMovers(epoch, pos, run)


def same_movers(last: LastMovers | None, epoch: int, ids: np.ndarray,
                pos_id: np.ndarray) -> bool:
    """Whether ``ids`` may be last batch's (same size, layout unchanged, the first, middle and
    last ids where they were: a shuffled or changed batch fails here, before a pass is
    spent on it); the pass decides."""
    if last is None or last.epoch != epoch or last.pos.shape[0] != ids.shape[0]:
        return False
    n = ids.shape[0]
    return all(pos_id[last.pos[i]] == ids[i] for i in (0, n // 2, n - 1))


def known_positions(last: LastMovers | None, epoch: int, batch: UpdateBatch,
                    pos_id: np.ndarray) -> np.ndarray | None:
    """Last batch's positions when ``batch`` is its movers again with good values (any
    batch: radii and view distances too), else None (nothing changed)."""
    if same_movers(last, epoch, batch.ids, pos_id) and known_batch(batch, last.pos, pos_id):
        return last.pos
    return None


def write_all_known(last: LastMovers, batch: UpdateBatch, store: Columns, spare: Columns,
                    pos_id: np.ndarray, pos_slot: np.ndarray,
                    s32: Spheres32) -> tuple[bool, float, float]:
    """A batch of every live object, as last time, into ``spare`` in one checking pass:
    (accepted, largest coordinate magnitude, largest radius written). Accepted: ``spare``
    holds the new values of the columns the batch carries (the caller swaps them in).
    Rejected: the float32 copy is back as ``store`` says. Positions that run in order take
    the sequential kernels, whose plain float32 casts are clamped after if they overflowed."""
    radii, vdist = carried_columns(batch)
    has_r, has_v = radii is not None, vdist is not None
    pos = last.pos
    if has_r or has_v:
        if last.run >= 0:
            ok, big, rad = write_known_run_sized(batch.ids, batch.centers, radii, vdist,
                                                 last.run, pos_id, spare, s32)
        else:
            ok, big, rad = write_known_sized(batch, pos, pos_id, pos_slot, spare, s32)
    elif last.run >= 0:
        ok, big = write_known_run(batch.ids, batch.centers, last.run, pos_id, spare.centers,
                                  s32.x, s32.y, s32.z)
        rad = 0.0
    else:
        ok, big = write_known_movers(batch.ids, batch.centers, pos, pos_id, pos_slot,
                                     spare.centers, s32.x, s32.y, s32.z)
        rad = 0.0
    if ok and last.run >= 0 and max(big, rad) > F32_BIG:  # plain casts overflowed: clamp
        restore32(pos, pos_slot, *spare, s32, has_r, has_v)
    if not ok:
        restore32(pos, pos_slot, *store, s32, has_r, has_v)
    return bool(ok), float(big), float(rad)


def move_same(last: LastMovers | None, epoch: int, count: int, batch: UpdateBatch,
              store: Columns, spare: Columns | None, pos_id: np.ndarray, pos_slot: np.ndarray,
              s32: Spheres32) -> tuple[float, float, Columns, Columns | None] | None:
    """Write ``batch`` as last batch's movers, if they are: (largest coordinate magnitude,
    largest radius written, the new store, the new spare) for the caller to keep (a batch of
    all ``count`` live objects goes into the spare, and the columns it carries swap). None:
    not last batch, a bad one, or a part of the scene with radii or view distances (the
    caller's two-pass path takes those); nothing changed, and the contract's general path
    decides (and names what is wrong). The spare is made only for a whole-scene batch
    (:func:`spare_for`): a scene that never moves everything at once keeps one store."""
    n = batch.ids.shape[0]
    if not same_movers(last, epoch, batch.ids, pos_id) or (any(carried(batch)) and n != count):
        return None
    if n == count:
        spare = spare_for(store, spare, batch)
        ok, big, rad = write_all_known(last, batch, store, spare, pos_id, pos_slot, s32)
        return (big, rad, *swapped(batch, store, spare)) if ok else None
    if not known_movers(batch.ids, batch.centers, last.pos, pos_id):
        return None
    return write_movers(last.pos, batch.centers, pos_slot, store.centers, s32), 0.0, store, spare


# ------------------------------------------------------------------ any batch, one pass each


class UpdateBatch(NamedTuple):
    """An update batch as compiled code takes it: ``radii`` / ``vdist`` empty when the batch
    does not carry them (unchanged)."""

    ids: np.ndarray
    centers: np.ndarray
    radii: np.ndarray
    vdist: np.ndarray


class SphereRecords(NamedTuple):
    """Where a moved object's values live: the store by slot (float64, what the contract
    keeps) and the float32 copy the scan reads by position (``pos_slot`` maps the two)."""

    pos_slot: np.ndarray
    store_c: np.ndarray
    store_r: np.ndarray
    store_v: np.ndarray
    s32: Spheres32


_NONE_F = np.zeros(0, dtype=np.float64)


def batch_of(ids: object, centers: object, radii: object,
             view_distances: object) -> UpdateBatch | None:
    """The batch as a :class:`UpdateBatch` when it is well-typed (int64 ids, float64 rows, all
    contiguous, at least one row), else None: the contract's general path converts it."""
    if not is_ids(ids):
        return None
    n = ids.shape[0]
    if not is_f64(centers, (n, 3)):
        return None
    if radii is None:
        radii = _NONE_F
    elif not is_f64(radii, (n,)):
        return None
    if view_distances is None:
        view_distances = _NONE_F
    elif not is_f64(view_distances, (n,)):
        return None
    return UpdateBatch(ids, centers, radii, view_distances)


@njit(cache=True)
def find_batch(batch: UpdateBatch, tables, seen, awake0: int, pos) -> int:
    """Resolve ``batch``'s ids to positions (``pos``) through the id tables ``(keys, vals,
    dense)`` of ``app.spatial.idmap`` and check the whole batch; changes nothing.

    Returns how many movers sit before ``awake0`` (still ones the caller wakes), or -1 when
    anything is wrong: an unknown id, a bad centre, radius or view distance, or an id given
    twice. Increasing ids are distinct; from the first id that is not larger than the one
    before, every position is marked in the clear bitset ``seen`` (:mod:`app.spatial.seen`),
    those before it at once, in the same pass, and cleared again before returning: a shuffled
    batch costs one pass, a sorted one no marks. The contract's general path then names what
    is wrong.
    """
    keys, vals, dense = tables
    ids = batch.ids
    centers = batch.centers
    radii = batch.radii
    vdist = batch.vdist
    n = ids.shape[0]
    has_r = radii.shape[0] == n
    has_v = vdist.shape[0] == n
    nd = dense.shape[0]
    asleep = 0
    stamping = False
    prev = np.int64(0)
    found = 0
    ahead = PREFETCH_AHEAD
    for i in range(n):
        if i + ahead < n:  # a later id's entry (a miss each in a table of millions)
            ka = ids[i + ahead]
            if ka >= 0 and ka < nd:
                prefetch(dense, ka)
        k = ids[i]
        p = dense[k] if k >= 0 and k < nd else hash_lookup(keys, vals, k)
        if p < 0 or not _values_ok(centers[i, 0], centers[i, 1], centers[i, 2],
                                   radii[i] if has_r else 0.0, vdist[i] if has_v else 0.0):
            asleep = -1
            break
        pos[i] = p
        found = i + 1
        asleep += p < awake0
        if not stamping and i > 0 and k <= prev:
            stamping = True
            for j in range(i):  # (distinct: they increased)
                first_sight(seen, pos[j])
        if stamping and not first_sight(seen, p):
            asleep = -1
            break
        prev = k
    if stamping:
        forget(seen, pos, found)
    return asleep


@njit(cache=True)
def known_batch(batch: UpdateBatch, pos, pos_id) -> bool:
    """Whether ``batch`` is last batch's movers again (each id at its remembered position
    ``pos``, where ``pos_id`` says) with acceptable values: no look-up, no repeat check
    (remembered positions are distinct). Changes nothing."""
    ids = batch.ids
    centers = batch.centers
    radii = batch.radii
    vdist = batch.vdist
    n = ids.shape[0]
    has_r = radii.shape[0] == n
    has_v = vdist.shape[0] == n
    for i in range(n):
        if pos_id[pos[i]] != ids[i] or not _values_ok(
                centers[i, 0], centers[i, 1], centers[i, 2], radii[i] if has_r else 0.0,
                vdist[i] if has_v else 0.0):
            return False
    return True


def write_batch(batch: UpdateBatch, pos, rec: SphereRecords):
    """Write a checked batch found at ``pos`` (:func:`write_rows` with the columns it
    carries). Returns (largest coordinate magnitude, largest radius written): the float32
    tolerances' bounds."""
    return write_rows(pos, batch.centers, *carried_columns(batch),
                      None if rec.pos_slot.shape[0] == 0 else rec.pos_slot, rec)


# ------------------------------------------------------------------ every object, one pass


#: ``pos_slot`` for an index whose positions are its slots (``brute``; ``chunks`` in slot
#: order): the passes below then read no slot map.
SLOTS_ARE_POSITIONS = np.zeros(0, dtype=np.int64)


@njit(cache=True)
def write_every(ids, centers, radii, vdist, tables, seen, pos, pos_slot, rec: SphereRecords,
                spare: Columns):
    """Find, check and write a batch of every live object in one pass: each id's position
    (``pos``) through the id tables, its row's values checked, a repeat found by the clear
    bitset ``seen``; the new values go to the ``spare`` columns (by slot, through
    ``pos_slot``) and to the float32 copy (by position). Returns (all good, largest coordinate
    magnitude, largest radius written); on a bad batch the float32 rows written are back as
    the store says, and the caller keeps its store (nothing changed).

    ``radii``, ``vdist`` and ``pos_slot`` are None when the batch leaves a column alone or
    positions are the slots: numba compiles each combination apart with the dead tests
    removed (as run-time flags they made the loop 1.3x as long: 0.85 against 0.67 ms on a
    shuffled batch of 10^5).

    One pass where a check pass and a write pass read the batch, the id table and the
    positions twice (shuffled batches of 10^5, one process, alternated: 1.0-1.07 against
    1.22-1.37 ms with run-time flags; the brute force that checks nothing 0.6-0.9 ms). Only
    for every live object: then the spare holds every live value after the pass, and the
    caller swaps it with the store.

    Ids that increase cannot repeat, so the loop only notes whether they do; a repeat is
    looked for (``seen``) after it when they do not. Centres take plain float32 casts, and the
    rows are clamped after (:func:`restore32`) when the largest exceeded ``F32_BIG``. The two
    took the pass over 10^5 sorted ids from 0.50 to 0.39 ms (the same movers' run, which
    finds no id, 0.35).
    """
    keys, vals, dense = tables
    n = ids.shape[0]
    spare_c = spare.centers
    spare_r = spare.radii
    spare_v = spare.vdist
    # Every array out of its tuple before the loops: a tuple's field read inside a loop
    # counts the array's references at every turn (see update.write_settle).
    x = rec.s32.x
    y = rec.s32.y
    z = rec.s32.z
    r32 = rec.s32.r
    vd32 = rec.s32.vd
    nd = dense.shape[0]
    ok = True
    rising = True  # every id larger than the one before (then none repeats)
    prev = np.iinfo(np.int64).min
    bx = by = bz = 0.0  # three running maxima: one chain of max() was the loop's bottleneck
    rad = 0.0
    for i in range(n):
        if (i & 7) == 0:  # the batch's rows ahead (prefetch.STREAM_AHEAD)
            rows_ahead(ids, centers, i, n)
        # No early exit: a loop that can break kept fewer rows' cache misses in flight (about
        # 1.3x the time); a bad row is skipped and the batch refused at the end.
        k = ids[i]
        p = dense[k] if k >= 0 and k < nd else hash_lookup(keys, vals, k)
        pos[i] = p
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        good = (p >= 0) & _values_ok(cx, cy, cz, 0.0 if radii is None else radii[i],
                                     0.0 if vdist is None else vdist[i])
        rising &= k > prev
        prev = k
        if not good:
            ok = False
            continue
        if pos_slot is None:  # noqa: SIM108 - a branch numba removes when compiling for None
            s = p
        else:
            s = pos_slot[p]
        # (the row's writes repeat write_batch's on purpose, as update.write_settle says why:
        # a helper given the arrays counts their references at every row)
        spare_c[s, 0] = cx
        spare_c[s, 1] = cy
        spare_c[s, 2] = cz
        x[p] = cx  # plain casts: clamped after the loop if any exceeded F32_BIG
        y[p] = cy
        z[p] = cz
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
        if radii is not None:
            spare_r[s] = radii[i]
            r32[p] = to32(radii[i])
            rad = max(rad, radii[i])
        if vdist is not None:
            spare_v[s] = vdist[i]
            vd32[p] = to32(vdist[i])
    if ok and not rising:  # ids out of order: look for a repeat
        for i in range(n):
            ok &= first_sight(seen, pos[i])
        seen[:] = 0  # (a bit per live object's slot: smaller than a pass over pos)
    big = max(bx, by, bz)
    if not ok:
        restore32(pos, rec.pos_slot, rec.store_c, rec.store_r, rec.store_v, rec.s32,
                  radii is not None, vdist is not None)
    elif big > F32_BIG:  # a plain cast overflowed: the rows again, clamped
        restore32(pos, rec.pos_slot, spare_c, spare_r, spare_v, rec.s32, radii is not None,
                  vdist is not None)
    return ok, big, rad


def carried(batch: UpdateBatch) -> tuple[bool, bool]:
    """Whether ``batch`` carries radii, and view distances (an empty column: unchanged)."""
    n = batch.ids.shape[0]
    return batch.radii.shape[0] == n, batch.vdist.shape[0] == n


def carried_columns(batch: UpdateBatch) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The batch's radii and view distances, each None where the batch leaves the column
    alone: the compiled passes take None to compile that column's work out."""
    has_r, has_v = carried(batch)
    return batch.radii if has_r else None, batch.vdist if has_v else None


def swapped(batch: UpdateBatch, store: Columns, spare: Columns) -> tuple[Columns, Columns]:
    """(new store, new spare) after ``batch`` of every live object was written into
    ``spare``: the columns the batch carries swap, the others stay. (Written out: a
    generator over the columns cost 2.5 us a frame.)"""
    has_r, has_v = carried(batch)
    r, spare_r = (spare.radii, store.radii) if has_r else (store.radii, spare.radii)
    v, spare_v = (spare.vdist, store.vdist) if has_v else (store.vdist, spare.vdist)
    return Columns(spare.centers, r, v), Columns(store.centers, spare_r, spare_v)


@njit(cache=True)
def write_known_sized(batch: UpdateBatch, pos, pos_id, pos_slot, spare: Columns, s32):
    """Last batch's movers again, every live object, with radii or view distances: each id
    checked against its remembered position and its values while they are written (the
    spare columns by slot, the float32 copy by position; ``pos_slot`` empty where positions
    are slots). Returns (all good, largest coordinate magnitude, largest radius); on a bad
    batch the caller puts the float32 rows back (:func:`restore32`). Positions that run in
    order take :func:`write_known_run_sized` instead."""
    ids = batch.ids
    centers = batch.centers
    radii = batch.radii
    vdist = batch.vdist
    n = ids.shape[0]
    has_r = radii.shape[0] == n
    has_v = vdist.shape[0] == n
    same = pos_slot.shape[0] == 0
    spare_c = spare.centers
    spare_r = spare.radii
    spare_v = spare.vdist
    x = s32.x
    y = s32.y
    z = s32.z
    r32 = s32.r
    vd32 = s32.vd
    ok = True
    bx = by = bz = 0.0  # three running maxima: one chain of max() was the loop's bottleneck
    rad = 0.0
    for i in range(n):
        p = pos[i]
        s = p if same else pos_slot[p]
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        ri = radii[i] if has_r else 0.0
        vi = vdist[i] if has_v else 0.0
        ok &= (pos_id[p] == ids[i]) & _values_ok(cx, cy, cz, ri, vi)
        spare_c[s, 0] = cx  # (written out, as in write_batch)
        spare_c[s, 1] = cy
        spare_c[s, 2] = cz
        x[p] = to32(cx)
        y[p] = to32(cy)
        z[p] = to32(cz)
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
        if has_r:
            spare_r[s] = ri
            r32[p] = to32(ri)
            rad = max(rad, ri)
        if has_v:
            spare_v[s] = vi
            vd32[p] = to32(vi)
    return ok, max(bx, by, bz), rad


@njit(cache=True)
def write_known_run_sized(ids, centers, radii, vdist, p0: int, pos_id, spare: Columns, s32):
    """:func:`write_known_sized` for positions ``p0 ..`` that are the slots (a run): every
    access sequential and the float32 writes plain casts, so that the loop vectorises as
    :func:`write_known_run` does; the caller rewrites the rows with clamps when the returned
    magnitudes exceed ``F32_BIG``. ``radii`` / ``vdist`` None: not in the batch (compiled
    apart, as :func:`write_every`; with run-time flags the update of 10^5 with radii took
    0.57-0.58 ms against 0.54-0.56)."""
    n = ids.shape[0]
    spare_c = spare.centers
    spare_r = spare.radii
    spare_v = spare.vdist
    x = s32.x
    y = s32.y
    z = s32.z
    r32 = s32.r
    vd32 = s32.vd
    ok = True
    bx = by = bz = 0.0
    rad = 0.0
    for i in range(n):
        if (i & 7) == 0:  # the batch's rows ahead (prefetch.STREAM_AHEAD)
            a = rows_ahead(ids, centers, i, n)
            prefetch(pos_id, p0 + a)
            if radii is not None:
                prefetch(radii, a)
            if vdist is not None:
                prefetch(vdist, a)
        p = p0 + i
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        ri = 0.0 if radii is None else radii[i]
        vi = 0.0 if vdist is None else vdist[i]
        ok &= (pos_id[p] == ids[i]) & _values_ok(cx, cy, cz, ri, vi)
        spare_c[p, 0] = cx  # (written out, as in write_batch)
        spare_c[p, 1] = cy
        spare_c[p, 2] = cz
        x[p] = cx
        y[p] = cy
        z[p] = cz
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
        if radii is not None:
            spare_r[p] = ri
            r32[p] = ri
            rad = max(rad, ri)
        if vdist is not None:
            spare_v[p] = vi
            vd32[p] = vi
    return ok, max(bx, by, bz), rad


def spare_for(store: Columns, spare: Columns | None, batch: UpdateBatch) -> Columns:
    """Twins of the store's columns that ``batch`` (every live object) carries: ``spare``'s
    where they have the store's size, else copies; a column the batch leaves alone may stay
    an empty stand-in (it is never written, nor swapped in)."""
    has_r, has_v = carried(batch)
    if spare is not None and spare.centers.shape == store.centers.shape and (
            not has_r or spare.radii.shape == store.radii.shape) and (
            not has_v or spare.vdist.shape == store.vdist.shape):
        return spare  # (every frame of a whole-scene motion)
    old = (None, None, None) if spare is None else spare
    return Columns(*(b if b is not None and b.shape == a.shape else (a.copy() if w else _NONE_F)
                     for a, b, w in zip(store, old, (True, has_r, has_v), strict=True)))


# ------------------------------------------------------------------ every object, check then write


@njit(cache=True)
def check_every(ids, centers, radii, vdist, tables, seen, pos) -> bool:
    """The check pass of a batch of every live object: each id's position (``pos``), its
    row's values, a repeat by the clear bitset ``seen``; changes nothing. No early exit (a
    loop that can break keeps fewer rows' misses in flight). ``radii`` / ``vdist`` None:
    not in the batch (compiled apart)."""
    keys, vals, dense = tables
    nd = dense.shape[0]
    ok = True
    n = ids.shape[0]
    for i in range(n):
        if (i & 7) == 0:  # the batch's rows ahead (prefetch.STREAM_AHEAD)
            batch_rows_ahead(ids, centers, radii, vdist, i, n)
        if i + PREFETCH_AHEAD < n:  # a later id's entry
            ka = ids[i + PREFETCH_AHEAD]
            if ka >= 0 and ka < nd:
                prefetch(dense, ka)
        k = ids[i]
        p = dense[k] if k >= 0 and k < nd else hash_lookup(keys, vals, k)
        pos[i] = p
        good = (p >= 0) & _values_ok(centers[i, 0], centers[i, 1], centers[i, 2],
                                     0.0 if radii is None else radii[i],
                                     0.0 if vdist is None else vdist[i])
        if not good:
            ok = False
            continue
        ok &= first_sight(seen, p)
    seen[:] = 0
    return ok


@njit(cache=True)
def write_rows(pos, centers, radii, vdist, pos_slot, rec: SphereRecords):
    """Write a checked batch in place, row i at position ``pos[i]``: the store's row (by slot,
    through ``pos_slot``; None: the position is the slot) and the float32 record (by
    position), centres and, unless None, radii and view distances (numba compiles each
    combination apart). Returns (largest coordinate magnitude, largest radius written)."""
    store_c = rec.store_c
    store_r = rec.store_r
    store_v = rec.store_v
    x = rec.s32.x
    y = rec.s32.y
    z = rec.s32.z
    r32 = rec.s32.r
    vd32 = rec.s32.vd
    bx = by = bz = 0.0
    rad = 0.0
    n = pos.shape[0]
    ahead = PREFETCH_AHEAD
    for i in range(n):
        if (i & 7) == 0:  # the batch's rows ahead (prefetch.STREAM_AHEAD)
            batch_rows_ahead(pos, centers, radii, vdist, i, n)
        # A later row's lines: its position's lanes (and slot), then, once the slot is in,
        # the store's rows.
        if i + ahead < n:
            q = pos[i + ahead]
            prefetch(x, q)
            prefetch(y, q)
            prefetch(z, q)
            if radii is not None:
                prefetch(r32, q)
            if vdist is not None:
                prefetch(vd32, q)
            if pos_slot is not None:
                prefetch(pos_slot, q)
        if i + ahead // 2 < n:
            q = pos[i + ahead // 2]
            if pos_slot is not None:
                q = pos_slot[q]
            prefetch(store_c, q)
            if radii is not None:
                prefetch(store_r, q)
            if vdist is not None:
                prefetch(store_v, q)
        p = pos[i]
        if pos_slot is None:  # noqa: SIM108 - a branch numba removes when compiling for None
            s = p
        else:
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
        if radii is not None:
            store_r[s] = radii[i]
            r32[p] = to32(radii[i])
            rad = max(rad, radii[i])
        if vdist is not None:
            store_v[s] = vdist[i]
            vd32[p] = to32(vdist[i])
    return max(bx, by, bz), rad


@njit(cache=True)
def looks_sorted(ids) -> bool:
    """Whether ``ids`` look like they increase: their first 32 do, and so do 17 spread evenly
    over the batch. A guess for choosing a path, not a check (a pass over the whole batch
    cost 0.03-0.05 ms at 10^5, most of what choosing saved): both paths take any order."""
    n = ids.shape[0]
    for i in range(1, min(n, 32)):
        if ids[i] <= ids[i - 1]:
            return False
    step = max(n // 16, 1)
    for i in range(step, n, step):  # noqa: SIM110 - a compiled loop, not a generator
        if ids[i] <= ids[i - step]:
            return False
    return True


def move_every(batch: UpdateBatch, tables: tuple, seen: np.ndarray, pos: np.ndarray,
               pos_slot: np.ndarray, store: Columns, spare: Columns | None,
               s32: Spheres32) -> tuple[float, float, Columns, Columns] | None:
    """A batch of every live object: (largest coordinate, largest radius, the new store, the
    new spare) for the caller to keep, or None when the batch is bad and nothing changed (the
    contract's general path names what is wrong). ``pos_slot`` empty
    (:data:`SLOTS_ARE_POSITIONS`) where positions are the slots.

    Ids that look sorted (:func:`looks_sorted`; their rows most likely are too): one pass
    into the spare columns (:func:`write_every`), which then swap with the store, every access
    a stream. Ids in any other order: :func:`check_every`, then :func:`write_rows` in
    place; spares there doubled the columns the scattered writes touch. In one process, two
    ``brute`` instances on the same shuffled frames of 10^5, alternated six times: 0.62-0.66
    ms in place against 0.84-0.98 with spares; on moving `spawn` (ids in order) the two
    passes lost 0.05-0.07 ms (a second read of the batch), hence the choice."""
    radii, vdist = carried_columns(batch)
    slot_map = None if pos_slot.shape[0] == 0 else pos_slot
    rec = SphereRecords(pos_slot, *store, s32)
    if looks_sorted(batch.ids):
        spare = spare_for(store, spare, batch)
        ok, big, rad = write_every(batch.ids, batch.centers, radii, vdist, tables, seen, pos,
                                   slot_map, rec, spare)
        return (float(big), float(rad), *swapped(batch, store, spare)) if ok else None
    if not check_every(batch.ids, batch.centers, radii, vdist, tables, seen, pos):
        return None
    big, rad = write_rows(pos, batch.centers, radii, vdist, slot_map, rec)
    return float(big), float(rad), store, spare
