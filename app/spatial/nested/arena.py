"""The object arena of a nested index: every object's row, the id map, each group's block,
the move log and the per-frame movers cache (``store.py`` and ``update.py`` hold their
kernels).

A group's objects are the rows ``[b_start, b_start + b_count)`` of one arena (room up to
``b_cap``; the block fields live in the tree's ``GroupTable``, indexed by group slot). A
group that outgrows its block moves to the arena's end with twice the room; the holes are
given back when half the arena is holes (:meth:`ObjectArena._room`). ``version`` is bumped
whenever rows move or die: the movers cache (the last move batch's rows) and the node box
cache (``boxes.py``) expire with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.spatial.checks import name_ids, reject_repeats
from app.spatial.idmap import IdMap
from app.spatial.nested.bounds import tighten
from app.spatial.nested.check import MESSAGES, check_blocks, check_copy, check_idmap, check_own
from app.spatial.nested.groups import LIMIT
from app.spatial.nested.state import StateRecord
from app.spatial.nested.store import (
    clear_stale,
    grown_rows,
    move_block,
    new_rows,
    repack,
    take_stale,
)
from app.spatial.nested.tree import GroupTable
from app.spatial.nested.update import (
    apply_moves,
    good_values,
    movers_first,
    moves_hot,
    remove_rows,
    resolve_moves,
    write_new,
)
from app.spatial.pool import grown

_EMPTY_F = np.zeros(0)
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)


def spatial_order(c: np.ndarray) -> np.ndarray:
    """An order of the centres ``c`` (n, 3) along a Morton curve of their box (10 bits an
    axis): a partly visible group's visible rows then come in runs (its scan's compaction
    skips whole words of culled rows)."""
    lo = c.min(axis=0)
    span = c.max(axis=0) - lo
    span[~(span > 0)] = 1.0
    q = np.clip((c - lo) / span * 1023.0, 0, 1023).astype(np.int64)
    key = np.zeros(c.shape[0], np.int64)
    for b in range(10):
        for a in range(3):
            key |= ((q[:, a] >> b) & 1) << (3 * b + a)
    return np.argsort(key, kind="stable")


def check_limits(op: str, ids: np.ndarray, c: np.ndarray, r: np.ndarray | None,
                 vd: np.ndarray | None) -> None:
    """ValueError naming the ids whose local values exceed ``LIMIT``."""
    bad = (np.abs(c) > LIMIT).any(axis=1)
    if r is not None:
        bad |= r > LIMIT
    if vd is not None:
        bad |= (vd > LIMIT) & (vd != np.inf)
    if bad.any():
        raise ValueError(f"{op}: local coordinates, radii and finite view distances must be "
                         f"at most {LIMIT:g}; too large for ids {name_ids(ids[bad])}")


def _fast_form(ids: Any, c: Any, r: Any, vd: Any) -> bool:
    """The move batch's arrays are what the compiled fast path takes (int64 ids, float64
    (n, 3) centres, float64 (n,) radii / view distances or None, all C-contiguous)."""
    if not (type(ids) is np.ndarray and ids.dtype is _I64 and ids.ndim == 1
            and ids.flags.c_contiguous):
        return False
    n = ids.shape[0]
    if n == 0 or not (type(c) is np.ndarray and c.dtype is _F64 and c.shape == (n, 3)
                      and c.flags.c_contiguous):
        return False
    for a in (r, vd):
        if a is not None and not (type(a) is np.ndarray and a.dtype is _F64
                                  and a.shape == (n,) and a.flags.c_contiguous):
            return False
    return True


class ObjectArena:
    """The rows of a nested index's objects and everything kept per row; ``G`` is the tree's
    group table (its block fields), ``record`` the index's compiled record."""

    def __init__(self, G: GroupTable, record: StateRecord) -> None:
        self.G = G
        self.R = new_rows(1024)
        self.top = 0  # rows in use (blocks and their holes) from the arena's start
        self.garbage = 0  # rows of abandoned blocks below top
        self.count = 0
        self.idmap = IdMap(1024)
        self.stamp = np.zeros(1024, np.int64)  # repeat marks of a move batch (``epoch``)
        self.epoch = 0
        self.version = 0  # bumped whenever rows move or die: the movers cache expires
        self.log_rows = np.zeros(4096, np.int64)  # moved rows since the last query
        self.log_grp = np.zeros(4096, np.int64)
        self.nlog = np.zeros(1, np.int64)
        self.movers: tuple | None = None  # (version, want, ids copy, rows, groups)
        self._moves_seen = 0  # batches through the movers cache since it was made
        self.packed = -1  # the version whose movers were packed to their blocks' fronts
        self.codes = np.empty(1024 + 8, np.uint8)  # descend's scratch, a row per arena row
        self.sure = np.empty(1024 + 8, np.int64)
        self.near = np.empty(1024 + 8, np.int64)
        self._record = record

    # ------------------------------------------------------------------ look-ups

    def rows_of(self, op: str, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids``; ValueError naming unknown or repeated ids."""
        rows = self.idmap.lookup(ids)
        if (rows < 0).any():
            raise ValueError(f"{op}: unknown ids: {name_ids(ids[rows < 0])}")
        reject_repeats(op, ids)
        return rows

    def check_new(self, ids: np.ndarray, c: np.ndarray, r: np.ndarray,
                  vd: np.ndarray | None) -> None:
        """ValueError unless ``insert`` may add these checked objects: values in range, ids
        given once and not in the scene."""
        check_limits("insert", ids, c, r, vd)
        reject_repeats("insert", ids)
        known = self.idmap.lookup(ids) >= 0
        if known.any():
            raise ValueError(f"insert: ids already in the scene: {name_ids(ids[known])}")

    # ------------------------------------------------------------------ inserts, removals

    def add(self, g: int, ids: np.ndarray, c: np.ndarray, r: np.ndarray,
            vd: np.ndarray) -> None:
        """Checked new objects (:meth:`check_new`) at the end of group ``g``'s block, in a
        spatial order; the group's own sphere tightened around them."""
        n = ids.shape[0]
        if n > 64:  # the block's rows in a spatial order: what a query takes comes in runs
            o = spatial_order(c)
            ids, c, r, vd = ids[o], c[o], r[o], vd[o]
        G = self.G
        need = int(G.b_count[g]) + n
        if need > G.b_cap[g]:
            self._relocate(g, need if G.b_cap[g] == 0 else max(16, 2 * need))
        lo = int(G.b_start[g] + G.b_count[g])
        write_new(self.R, lo, g, ids, c, r, vd)
        self.idmap.insert(ids, np.arange(lo, lo + n, dtype=np.int64))
        G.b_count[g] += n
        self.count += n
        tighten(self.R.lc, self.R.rad, self.R.vd, np.array([g], np.int64), G.b_start,
                G.b_count, G.own_c, G.own_r, G.own_tight, G.own_vd, G.own_rmax, G.loose)
        self.bump()

    def by_group(self, rows: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, list]:
        """(the groups of ``rows`` ascending, the ids of each group's rows)."""
        grp = self.R.grp[rows]
        order = np.argsort(grp, kind="stable")
        groups, starts = np.unique(grp[order], return_index=True)
        return groups.astype(np.int64), np.split(ids[order], starts[1:])

    def remove(self, ids: np.ndarray, rows: np.ndarray, groups: np.ndarray) -> None:
        """Objects ``ids`` (at ``rows``, in ``groups``) out: each block packed again, its
        group's own sphere marked loose."""
        self.idmap.delete(ids)
        keys, vals, dense = self.idmap.arrays()
        G = self.G
        remove_rows(self.R, rows, groups, G.b_start, G.b_count, G.nstale, keys, vals, dense)
        G.loose[groups] = True
        self.count -= ids.shape[0]
        self.bump()

    def drop_blocks(self, slots: np.ndarray) -> None:
        """Every object of groups ``slots`` out, their blocks given back (groups removed)."""
        G = self.G
        R = self.R
        for s in slots.tolist():
            lo = int(G.b_start[s])
            hi = lo + int(G.b_count[s])
            if hi > lo:
                self.idmap.delete(R.ids[lo:hi])
                self.count -= hi - lo
                R.ids[lo:hi] = -1
                R.stale[lo:hi] = 0
                R.r32[lo:hi] = -np.inf
            self.garbage += int(G.b_cap[s])
            G.b_cap[s] = G.b_count[s] = G.nstale[s] = G.gdirty[s] = G.dirty32[s] = 0
        self.bump()

    # ------------------------------------------------------------------ moves

    def move_fast(self, want: int, ids: Any, c: Any, r: Any, vd: Any, tried: bool,
                  inner_min: int) -> bool:
        """The per-frame path: well-typed arrays, one compiled call that checks and writes;
        the same movers as last time (a scene's moving objects) skip the id look-ups. False
        (nothing changed): the checked path decides and names what is wrong. ``tried``: the
        cached movers' call already refused this batch, so it is not made again. ``want``:
        the group every id must be in, or -1."""
        if not _fast_form(ids, c, r, vd):
            return False
        rr = _EMPTY_F if r is None else r
        vv = _EMPTY_F if vd is None else vd
        last = self.movers
        if not tried and last is not None and last[0] == self.version and last[1] == want:
            code = self.move_cached(last, ids, c, rr, vv, inner_min)
            if code == 0:
                return True
            if code == 1:
                return False
        elif not good_values(c, rr, vv):
            return False
        n = ids.shape[0]
        rows = np.empty(n, np.int64)
        grps = np.empty(n, np.int64)
        self.epoch += 1
        keys, vals, dense = self.idmap.arrays()
        if not resolve_moves(ids, keys, vals, dense, self.R.grp, want, self.stamp, self.epoch,
                             rows, grps):
            return False
        self.movers = (self.version, want, ids.copy(), rows, grps)
        self._moves_seen = 0
        self.apply(rows, grps, c, r, vd, inner_min)
        return True

    def move_cached(self, last: tuple, ids: Any, c: Any, r: np.ndarray, vd: np.ndarray,
                    inner_min: int) -> int:
        """The cached movers ``last`` moved once more, in one compiled call that checks
        (update.moves_fast): 0 done (the third batch running packs their rows), 1 a bad
        type, shape or value, 2 other ids; nothing changed unless 0. Another array type
        (read-only, strided, float32, a list) is refused as 1: the checked path takes it."""
        rec = self._record
        try:
            code = moves_hot(rec.st or rec.get(), ids, last[2], last[3], last[4], c, r, vd,
                             inner_min)
        except TypeError:
            return 1
        if code == 0:
            self._moves_seen += 1
            if self._moves_seen == 2 and self.packed != self.version:
                self._pack_movers(last[3], last[4])
        return code

    def _pack_movers(self, rows: np.ndarray, grps: np.ndarray) -> None:
        """The same objects moved in three batches running: pack their rows to the front of
        their blocks (one pass; the movers cache's rows follow). Rows moved inside blocks
        only: the inner indexes (by id) and the node box cache do not see it, the move log's
        rows are void (its groups get their whole block refreshed)."""
        self.epoch += 2
        keys, vals, dense = self.idmap.arrays()
        movers_first(self.R, rows, grps, self.G.b_start, self.stamp, self.epoch, keys, vals,
                     dense)
        self.epoch += 1
        self._void_log()
        self.packed = self.version

    def apply(self, rows: np.ndarray, grps: np.ndarray, c: np.ndarray, r: np.ndarray | None,
              vd: np.ndarray | None, inner_min: int) -> None:
        """A checked move batch written (update.apply_moves)."""
        rec = self._record
        apply_moves(rec.st or rec.get(), rows, grps, c, _EMPTY_F if r is None else r,
                    _EMPTY_F if vd is None else vd, inner_min)

    def flush(self, g: int, inner: Any) -> None:
        """Group ``g``'s own index ``inner`` up to date: its stale rows, or its whole block
        when the group was only marked."""
        G = self.G
        R = self.R
        lo = int(G.b_start[g])
        hi = lo + int(G.b_count[g])
        if G.gdirty[g]:
            if hi > lo:
                inner.update(R.ids[lo:hi].copy(), R.lc[lo:hi].copy(), R.rad[lo:hi].copy(),
                             R.vd[lo:hi].copy())
            if G.nstale[g]:
                clear_stale(R, lo, hi)
            G.gdirty[g] = 0
            G.nstale[g] = 0
        elif G.nstale[g]:
            ids, c, r, v = take_stale(R, lo, hi, int(G.nstale[g]))
            inner.update(ids, c, r, v)
            G.nstale[g] = 0

    def bump(self) -> None:
        """Rows moved or died: the movers cache expires, the move log's rows mean nothing
        any more (its groups get their whole block refreshed instead)."""
        self.version += 1
        self._void_log()

    def _void_log(self) -> None:
        d = self.G.dirty32
        d[d == 1] = 2
        self.nlog[0] = 0

    # ------------------------------------------------------------------ room

    def _relocate(self, g: int, cap: int) -> None:
        """Give group ``g`` a block of ``cap`` rows at the arena's end."""
        self._room(cap)
        G = self.G
        keys, vals, dense = self.idmap.arrays()
        move_block(self.R, int(G.b_start[g]), int(G.b_count[g]), self.top, keys, vals, dense)
        self.garbage += int(G.b_cap[g])
        G.b_start[g] = self.top
        G.b_cap[g] = cap
        self.top += cap

    def _room(self, n: int) -> None:
        """At least ``n`` free rows at the arena's end: repack when half of it is holes, grow
        otherwise."""
        cap = self.R.ids.shape[0]
        if self.top + n <= cap:
            return
        if self.garbage >= n and self.garbage >= self.top // 2:
            self._repack(max(cap, 2 * (self.top - self.garbage + n)))
        if self.top + n > self.R.ids.shape[0]:
            self._set_rows(grown_rows(self.R, max(2 * self.R.ids.shape[0], self.top + n)))

    def _repack(self, cap: int) -> None:
        G = self.G
        live = np.flatnonzero(G.alive)
        caps = np.where(G.b_count[live] > 0, np.maximum(16, G.b_count[live] * 5 // 4), 0)
        start = np.zeros(G.cap, np.int64)
        start[live] = np.cumsum(caps) - caps
        top = int(caps.sum())
        out = new_rows(max(cap, top))
        keys, vals, dense = self.idmap.arrays()
        repack(self.R, out, live, G.b_start, G.b_count, start, keys, vals, dense)
        G.b_start[live] = start[live]
        G.b_cap[live] = caps
        self.top = top
        self.garbage = 0
        self._set_rows(out)

    def _set_rows(self, rows: Any) -> None:
        """A new arena ``rows``; the per-row scratch grown to match (the record dropped)."""
        self._record.drop()
        self.R = rows
        n = rows.ids.shape[0]
        if self.log_rows.shape[0] < n // 8:
            self.bump()
            self.log_rows = np.zeros(n // 8, np.int64)
            self.log_grp = np.zeros(n // 8, np.int64)
        if self.stamp.shape[0] < n:
            self.stamp = grown(self.stamp, n, 0)
        if self.sure.shape[0] < n + 8:
            self.sure = np.empty(n + 8, np.int64)
            self.near = np.empty(n + 8, np.int64)
        if self.codes.shape[0] < n + 8:
            self.codes = np.empty(n + 8, np.uint8)

    # ------------------------------------------------------------------ checks

    def validate(self, live: np.ndarray, describe: str) -> None:
        """AssertionError on a broken invariant of the arena (``live``: the live group
        slots): blocks, float32 copies, own spheres, stale counts, id map, object count."""
        R = self.R
        G = self.G
        if (self.top > R.ids.shape[0] or self.codes.shape[0] < R.ids.shape[0]
                or self.stamp.shape[0] < R.ids.shape[0]):
            raise AssertionError("the arena outgrew its scratch arrays")
        for code, where in (check_blocks(R, live, G.b_start, G.b_cap, G.b_count, self.top),
                            check_copy(R, G.dirty32, self.log_rows, int(self.nlog[0])),
                            check_own(R, G.own_c, G.own_r, G.own_vd, G.own_rmax, G.nstale, live)):
            if code:
                raise AssertionError(f"{describe}: {MESSAGES[int(code)]} (at {where})")
        code, where, nlive = check_idmap(R, *self.idmap.arrays())
        if code:
            raise AssertionError(f"{describe}: {MESSAGES[int(code)]} (at {where})")
        if not (nlive == self.count == len(self.idmap) == int(G.b_count[live].sum())):
            raise AssertionError(f"{describe}: {MESSAGES[11]}")

    def validate_inner(self, g: int, inner: Any, key: Any) -> None:
        """AssertionError unless group ``g``'s own index ``inner`` holds exactly its block's
        objects (with the store's values where no row is stale) and validates."""
        G = self.G
        R = self.R
        lo = int(G.b_start[g])
        hi = lo + int(G.b_count[g])
        ids = R.ids[lo:hi]
        if len(inner) != ids.shape[0] or not np.array_equal(np.sort(inner.all_ids()),
                                                            np.sort(ids)):
            raise AssertionError(f"group {key!r}: its index holds other objects than its block")
        fresh = R.stale[lo:hi] == 0
        if not G.gdirty[g] and fresh.any():
            c, r, v = inner.get(ids[fresh])
            if not (np.array_equal(c, R.lc[lo:hi][fresh]) and np.array_equal(r, R.rad[lo:hi][fresh])
                    and np.array_equal(v, R.vd[lo:hi][fresh])):
                raise AssertionError(f"group {key!r}: its index disagrees with the store on an "
                                     "object not marked stale")
        inner.validate()


__all__ = ["ObjectArena", "check_limits", "spatial_order"]
