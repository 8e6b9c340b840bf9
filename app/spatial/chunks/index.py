"""``ChunkedIndex``: the chunked linear layout behind the spatial index contract.

What engines cull with today instead of pointer trees (Frostbite's and Unity DOTS' chunked
culling): spheres stored 64 to a chunk along a Hilbert curve, a box per chunk and per group of
16 chunks, the branch-free float32 scan inside chunks the view only partly covers. Movers live
in an awake region at the end of the layout (:mod:`.update`), so a move writes one cached
record and nothing is relinked; a still object that moves a little is written where it is,
its chunk's box grown (within the chunk's limit). The Python class orchestrates whole
batches; every loop is compiled (:mod:`.layout`, :mod:`.update`, :mod:`.queries`).

Layout: ``[still objects 0 .. awake0) [awake objects awake0 .. npos) [free capacity]``. The tree
covers the whole capacity (empty chunks count 0 and are never visited), so it is rebuilt only
when the capacity grows.

Every update batch, whatever its shape (ids in any order, radii and view distances or not,
movers seen last frame or not), costs in proportion to itself: one checking pass (id ->
position, values, repeats by a per-position stamp), a compiled pass that leaves its still
movers in place (their chunks' boxes grown) or marks them to wake, a compiled wake of those,
one writing pass, and a refit of the awake chunks it wrote (``app.spatial.moves``,
:mod:`.update`). An awake mover that jumps out of its chunk's limit wakes again, at the end.
A small insert (spawns) joins the awake region; a large one goes still, before it. When a
batch moves most objects, everything wakes in place (the awake region becomes the whole
layout, as sorted). Awake objects stay awake until the whole layout is re-sorted.

When most objects move every frame, curve order costs more to keep than it saves: every move
writes somewhere else in memory and the chunks spread apart within frames. After two such
batches in a row the layout goes to *slot order* (position = the store's slot, i.e. insertion
order): moves then write memory in order, as a brute force's do, and the walk degenerates into
the branch-free scan of every chunk (every box is open, so moves need no refit either), so the
index costs what brute force costs and no more. A batch that moves less than
:data:`CURVE_FRACTION` of the objects re-sorts along the curve.

When to re-sort: awake objects drift away from their chunk-mates and the awake chunks swell.
After a batch, when the awake chunks' mean extent has grown past :data:`RESORT_GROWTH` times its
value when the region was last sorted, the awake region is re-sorted; when holes (left by
woken or removed objects) pass :data:`MAX_HOLES` of the positions, the whole layout is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.geom.zpyramid import ZPyramid, occluder
from app.parallelism import PARALLEL_MIN, threads_for
from app.spatial import moves
from app.spatial.base import _EMPTY_F, QueryResult, SpatialIndex
from app.spatial.checks import lossless_batch
from app.spatial.chunks import check, layout, pairs, queries, reserve, spawn, update
from app.spatial.chunks.layout import CHUNK, NO_POS
from app.spatial.idmap import IdMap
from app.spatial.object_store import Columns
from app.spatial.pool import grown, slots_end
from app.spatial.scan import (
    DEAD32,
    Spheres32,
    kill32,
    scan_frustum,
    six_planes,
    store32,
    tolerances,
)

#: Re-sort the awake region when its chunks' mean extent has grown this much since its sort.
RESORT_GROWTH = 1.6
#: Re-sort everything when this fraction of the used positions are holes.
MAX_HOLES = 0.25
#: From this fraction of holes on, new objects and movers that stopped take holes of the
#: still chunks around them (``spawn``): a placement costs more than an append (about 30 cache
#: lines against 20), but the holes then stop growing before they force a re-sort (a stall:
#: 23-26 ms at 10^5 objects). Lower starts sooner and leaves less for the awake region's
#: re-sort to put back (1/32: its stall 12 ms at 10^5 under churn10; 1/8: 15 ms), but the
#: bench's nine patterns in a row then cross it and pay placements mid-segment.
FILL_HOLES = 1 / 16
#: Positions of the awake region a batch drains (puts its idle objects back to sleep, most of
#: them into the holes they woke from: about 0.2 us each) once the region is half holes.
DRAIN = 2048
#: When a batch wakes at least this fraction of the objects, all of them wake where they are.
WAKE_ALL = 0.5
#: After two batches in a row that move at least this fraction of the objects, the layout goes
#: to slot order; in slot order, a batch below :data:`CURVE_FRACTION` brings the curve back.
SLOT_FRACTION = 0.5
CURVE_FRACTION = 0.25
#: A batch's still movers are written in place (:mod:`.update`) when they are at least this
#: fraction of it; when most of it is awake already (a set of movers that keeps moving, a few
#: joining it), its still movers wake at once: they will likely move again.
IN_PLACE = 0.5
#: An insert of at most 1/SPAWN_FRACTION of the objects (or of the awake region's size) joins
#: the awake region; a larger one goes still, before it (which moves the awake records up).
SPAWN_FRACTION = 32
_NO_POSITIONS = np.zeros(0, dtype=np.int64)

#: A growth of the layout leaves room for 1/HEADROOM more positions (the awake region's).
HEADROOM = 8
#: The arrays over positions (name, type, value where unused, positions an entry); besides
#: them the float32 copy (dead where unused: ``scan.DEAD32``).
_BY_POSITION = (
    ("_pos_slot", np.int64, NO_POS, 1),
    ("_pos_id", np.int64, 0, 1),
    ("_codes", np.uint8, 0, 1),
    ("_sure", np.int64, 0, 1),
    ("_near", np.int64, 0, 1),
    ("_out", np.int64, 0, 1),  # reused answer buffer: a fresh one faults pages
    ("_pos_mark", np.int64, 0, 1),  # a batch's stamps (stopped, leavers ...)
    # the last batch that wrote a still object there in place, modulo 256 (a byte: a miss
    # fewer than a wider stamp; a stale stamp that matches only makes a mover wake one batch
    # early or stay in place once more)
    ("_moved_at", np.uint8, 0, 1),
    ("_home", np.int64, NO_POS, 1),  # see update.ChunkPlaces.home
    ("_chunk_mark", np.int64, 0, CHUNK),  # a batch's stamps: chunks
    ("_pos_seen", np.uint64, 0, 64),  # a batch's repeat check (app.spatial.seen): a bit each
)

class ChunkedIndex(SpatialIndex):
    """Spheres in curve-ordered chunks of 64 under an implicit 16-ary tree of boxes."""

    name = "chunks"
    _reads_old_values = False
    _frustum_gives_ids = True  # ids kept per position: one gather fewer per query

    def __init__(self, leafy: bool | None = None, split_threshold: int | None = None,
                 capacity: int = 1024) -> None:
        if leafy not in (None, False) or split_threshold is not None:
            raise ValueError("chunks has no heuristic: leafy and split_threshold do not apply")
        super().__init__(capacity)
        self._slot_pos = np.full(self.capacity, NO_POS, dtype=np.int64)
        self._id_pos = IdMap(self.capacity)  # id -> position: the per-frame path's one look-up
        self._npos = 0
        self._awake0 = 0
        self._holes = 0
        self._max_abs = 0.0
        self._max_r = 0.0
        self._awake_extent = 0.0  # mean awake chunk extent when the region was last sorted
        self.resorts = 0
        self.awake_resorts = 0
        self._slot_order = False  # positions are the store's slots (most objects move a frame)
        # bumped whenever an object already laid out changes position (not when objects are
        # added at new positions or removed: last frame's movers keep their positions then)
        self._layout_epoch = 0
        self._set_epoch = 0  # bumped whenever objects are inserted or removed
        # the last per-frame batch (its ids are pos_id[positions] while the epoch holds)
        self._last_movers: moves.LastMovers | None = None
        self._spare: Columns | None = None  # the store's twins for all-object batches
        self._big_batches = 0  # consecutive batches moving at least SLOT_FRACTION
        self._queries_since_update = 0  # frustum queries since the last batch of moves
        self._frame_queries = 1  # the most seen between two batches (in slot order)
        self._mark = 0  # the last stamp given to _pos_mark / _chunk_mark
        self._stamp = 1  # batches that may write still objects in place (see update.py)
        self._in_place_last = False  # the last batch wrote still objects in place
        # Whether the last batch's movers mostly moved before (were awake): the still movers of
        # the next batch then wake at once (a set of movers that keeps moving, as a scene's
        # moving objects); else they are written in place (each frame moves a fresh set). The
        # first batch after a build counts as such, so a set that starts moving and keeps
        # moving wakes on its first move, not on its second.
        self._keeps_moving = True
        self._slept = 0  # awake objects put back in still holes since the awake region's sort
        self._drain = -1  # where the awake region's drain goes on (-1: none), up to _drain_end
        self._drain_end = 0
        self._still_curve: spawn.StillCurve | None = None  # how the still region was laid out
        self._set_capacity(CHUNK * 16)

    def describe(self) -> str:
        return f"chunks of {CHUNK}"

    # ------------------------------------------------------------------ storage

    def _set_capacity(self, cap: int) -> None:
        """Position arrays and tree for ``cap`` positions (whole chunks), keeping the used ones,
        reserved for twice as many (``reserve``): later growths up to that cost only the new
        positions' writes (:meth:`_commit`)."""
        cap = -(-cap // CHUNK) * CHUNK
        size = 2 * cap
        res = {name: (reserve.Reserved(-(-size // per), dtype, fill, -(-cap // per)), per)
               for name, dtype, fill, per in _BY_POSITION}
        s32 = [reserve.Reserved(size, np.float32, fill, cap) for fill in DEAD32]
        if self._npos:
            # A stamp lost with a growth only makes a mover wake one batch early or stay in
            # place once more: the marks start fresh; the layout and its copy are kept.
            res["_pos_slot"][0].adopt(self._pos_slot, self._npos)
            res["_pos_id"][0].adopt(self._pos_id, self._npos)
            for new, old in zip(s32, self._s32, strict=True):
                new.adopt(old, self._npos)
        self._reserved = res
        self._reserved32 = s32
        self._commit(cap)
        self._tree = layout.new_tree(size // CHUNK)
        self._refit(0)
        if self._slot_order:  # in slot order every box stays open (moves never refit)
            layout.open_boxes(self._tree)

    def _commit(self, cap: int) -> None:
        """The position arrays for ``cap`` positions, within the reserve: every page written
        now (a lazily mapped page would fault in the frame that first touches it: the first
        removal after a build paid 16 ms at 10^6 for the stamps alone)."""
        cap = -(-cap // CHUNK) * CHUNK
        for name, (r, per) in self._reserved.items():
            setattr(self, name, r.commit(-(-cap // per)))
        self._s32 = Spheres32(*(r.commit(cap) for r in self._reserved32))

    def _reserve(self, m: int) -> None:
        """Room for ``m`` more positions, and then some: within the reserve a step of
        ``COMMIT_STEP`` at least; past it a growth that copies the used records and refits
        every box (36 ms at 10^6), leaving room for an awake region of an eighth of the
        objects."""
        cap = self._pos_slot.shape[0]
        need = self._npos + m
        if need <= cap:
            return
        room = self._reserved["_pos_slot"][0].base.shape[0]
        if need <= room:
            self._commit(min(room, max(need, cap + reserve.COMMIT_STEP)))
        else:
            self._set_capacity(max(need + need // HEADROOM, cap + cap // 2))

    def _grow(self, new_capacity: int) -> None:
        self._slot_pos = grown(self._slot_pos, new_capacity, NO_POS)

    def _append(self, slots: np.ndarray, new: bool = False, still: bool = False,
                rows: Columns | None = None) -> int:
        """Put ``slots`` at positions ``npos ..`` in curve order; returns the first position.
        ``new``: their ids are not in the id -> position map yet (an insert), else they are
        (a re-sort). ``still``: they are the whole still region, from position 0: keep the
        curve, so that new objects can find the chunk around them (``spawn``). ``rows``: an
        insert's own rows, row i for slots[i] (read there, contiguous, not from the store)."""
        m = slots.shape[0]
        self._reserve(m)
        if not new:
            self._layout_epoch += 1
        # A build's or a re-sort's gather and curve codes run on both cores; below
        # PARALLEL_MIN every kernel here is serial, so no thread count is set (threads_for)
        # for a batch of spawns or wakes.
        many = m >= PARALLEL_MIN
        if rows is not None:
            centers = rows.centers
        else:
            centers = layout.centers_of(self._centers, slots) if many else self._centers[slots]
        if still and m >= CHUNK:
            bits = layout.curve_bits(m)
            lo, scale = layout.curve_frame(centers, bits)
            codes = (layout.frame_codes_parallel if many else layout.frame_codes)(
                centers, lo, scale, bits)
            by_code = np.argsort(codes)
            self._still_curve = spawn.still_curve(lo, scale, bits, codes[by_code])
        else:
            by_code = layout.curve_order(centers, many)
        order = slots[by_code]
        first = self._npos
        # the maps both ways, the id -> position map, the float32 records: one pass
        if rows is None:
            rec, src = self._records(), order
        else:
            rec, src = moves.SphereRecords(self._pos_slot, *rows, self._s32), by_code
        big, rad = update.place(self._places(), rec, self._ids, order, src, first, not new)
        if new:
            self._id_pos.insert(self._pos_id[first:first + m],
                                np.arange(first, first + m, dtype=np.int64))
        self._note_bounds(big, rad)
        self._npos += m
        return first

    def _take_out(self, p0: int) -> np.ndarray:
        """Empty positions ``p0 .. npos``; returns the live slots that were there."""
        self._layout_epoch += 1
        self._drain = -1  # (positions change: a drain under way starts again when due)
        live = self._pos_slot[p0: self._npos]
        live = live[live >= 0].copy()
        self._holes -= (self._npos - p0) - live.shape[0]
        self._pos_slot[p0: self._npos] = NO_POS
        kill32(self._s32, np.arange(p0, self._npos, dtype=np.int64))
        self._npos = p0
        return live

    def _note_bounds(self, big: float, rad: float) -> None:
        # Bounds only grow: a stale larger bound widens the float64 band, it is never wrong.
        self._max_abs = max(self._max_abs, float(big))
        self._max_r = max(self._max_r, float(rad))

    def _refit(self, p0: int, p1: int | None = None) -> None:
        """Tight boxes for the chunks of positions ``p0 .. p1`` (default: to the end of the
        used ones and of what was used before), and the nodes above them."""
        c0 = p0 // CHUNK
        c1 = max(-(-(self._npos if p1 is None else p1) // CHUNK), c0 + 1)
        c1 = min(c1, int(self._tree.loff[1]))
        pad = layout.pad_for(self._max_abs, self._max_r)
        used = min(max(-(-self._npos // CHUNK), c0), c1)  # (past the end every lane is dead)
        with threads_for((used - c0) * CHUNK):
            layout.refit_chunks(self._tree, self._s32, c0, used, pad)
        layout.empty_chunks(self._tree, used, c1)
        layout.refit_upper(self._tree, c0, c1)

    def _awake_chunks(self) -> tuple[int, int]:
        return self._awake0 // CHUNK, -(-self._npos // CHUNK)

    def _sort_awake(self) -> None:
        """Re-sort the awake region along the curve, dropping its holes."""
        self._slept = 0
        end = self._npos
        live = self._take_out(self._awake0)
        if live.shape[0]:
            self._append(live)
        self._refit(self._awake0, end)
        self._awake_extent = layout.mean_extent(self._tree, *self._awake_chunks())
        self.awake_resorts += 1

    def _resort(self) -> None:
        """Rebuild the layout: every live object still, in curve order, no holes."""
        end = self._npos
        live = self._take_out(0)
        self._still_curve = None
        if live.shape[0]:
            self._append(live, still=True)
        self._awake0 = self._npos
        self._holes = 0
        self._slot_order = False
        self._refit(0, end)
        self.resorts += 1

    def _to_slot_order(self) -> None:
        """Lay every object out at its store slot (see the module docstring): all awake."""
        self._layout_epoch += 1
        end = self._npos
        self._reserve(max(0, self.capacity - self._npos))
        self._take_out(0)
        live = np.flatnonzero(self._alive).astype(np.int64)
        ids = self._ids[live]
        self._pos_slot[live] = live
        self._slot_pos[live] = live
        self._pos_id[live] = ids
        self._id_pos.assign(ids, live)
        store32(self._s32, live, self._centers, self._radii, self._vdist, live)
        self._npos = int(live[-1]) + 1 if live.shape[0] else 0
        self._holes = self._npos - live.shape[0]
        self._awake0 = 0
        self._slot_order = True
        self._still_curve = None
        self._refit(0, max(end, self._npos))  # the counts
        layout.open_boxes(self._tree)

    def _choose_order(self, moved: int) -> None:
        """Switch between curve order and slot order by how much of the layout moves."""
        if self._slot_order:
            if moved < CURVE_FRACTION * self._count:
                self._resort()
            return
        self._big_batches = self._big_batches + 1 if moved >= SLOT_FRACTION * self._count else 0
        # Two big batches in a row, so that one that moves most objects once (an explosion)
        # does not switch the layout there and back; a batch of every object switches at once
        # (a scene where everything moves: waiting a batch made its second frame the one that
        # paid for the switch, 9 ms at 10^5 objects, a stall).
        if self._big_batches >= 2 or (moved >= self._count and self._count >= CHUNK):
            self._to_slot_order()

    # ------------------------------------------------------------------ hooks

    def _on_insert(self, slots: np.ndarray) -> None:
        self._set_epoch += 1
        if self._slot_order:  # each new object takes its slot's position, as everything does
            self._place_at_slots(slots)
            return
        first = self._npos
        awake = self._npos - self._awake0
        if slots.shape[0] <= max(awake, self._count // SPAWN_FRACTION):
            # A few new objects (spawns) take holes of the still chunks around them; the rest
            # join the awake region: no record moves, the cost is the batch's own. Their
            # chunks widen the awake region's reference extent.
            given = slots.shape[0]
            slots = self._into_holes(slots)
            if slots.shape[0] == 0:
                return
            # (the batch's own rows when no hole took any of it)
            self._append(slots, new=True,
                         rows=self._new_rows if slots.shape[0] == given else None)
            self._refit(first)
            self._awake_extent = max(self._awake_extent,
                                     layout.mean_extent(self._tree, *self._awake_chunks()))
            return
        # Many (a build, a level streamed in): they go still, before the awake region, which
        # moves up behind them (it is no larger than the batch).
        first = self._awake0
        moved_up = self._take_out(self._awake0)
        self._still_curve = None  # (a second run of the curve: until the next re-sort)
        self._append(slots, new=True, still=first == 0, rows=self._new_rows)
        self._awake0 = self._npos
        if moved_up.shape[0]:
            self._append(moved_up)
        self._refit(first, max(first + awake, self._npos))

    def _into_holes(self, slots: np.ndarray) -> np.ndarray:
        """Put new objects in holes of the still chunks around them where their limits allow
        (``spawn.place_in_holes``); returns the slots left for the awake region."""
        if (self._still_curve is None or self._awake0 == 0
                or self._holes < FILL_HOLES * self._npos):
            return slots
        pad = layout.pad_for(max(self._max_abs, float(np.abs(self._centers[slots]).max())),
                             max(self._max_r, float(self._radii[slots].max())))
        placed = self._place_in_holes(slots, pad, False)
        done = placed >= 0
        if not done.any():
            return slots
        self._id_pos.insert(self._ids[slots[done]], placed[done])
        self._holes -= int(np.count_nonzero(done))
        return slots[~done]

    def _place_in_holes(self, slots: np.ndarray, pad: float, woke: bool) -> np.ndarray:
        """Where ``spawn.place_in_holes`` put each of ``slots`` (-1: nowhere), their bounds
        noted; the id -> position map is the caller's. Objects that ``woke`` (not new ones)
        try the holes they woke from first (no curve code, no search: a mover that stopped
        is most often still within its old chunk's limit), then the chunks around."""
        still = update.StillMoves(self._tree, self._awake0, self._moved_at)
        placed = np.full(slots.shape[0], -1, np.int64)
        n = 0
        if woke:
            n, big, rad = spawn.place_in_holes(still, self._places(), self._records(),
                                               self._ids, slots, _NO_POSITIONS, pad, placed)
            self._note_bounds(big, rad)
        if n < slots.shape[0]:
            rest = np.flatnonzero(placed < 0)
            more = np.empty(rest.shape[0], np.int64)
            _, big, rad = spawn.place_in_holes(
                still, self._places(), self._records(), self._ids, slots[rest],
                spawn.guess_chunks(self._still_curve, self._centers[slots[rest]]), pad, more)
            self._note_bounds(big, rad)
            placed[rest] = more
        return placed

    def _place_at_slots(self, slots: np.ndarray) -> None:
        """Slot order: new objects at the positions of their slots (holes, or past the end)."""
        top = int(slots_end(slots))
        if top > self._npos:
            self._reserve(top - self._npos)
        ids = self._ids[slots]
        self._pos_slot[slots] = slots
        self._slot_pos[slots] = slots
        self._pos_id[slots] = ids
        self._id_pos.insert(ids, slots)
        big, rad = store32(self._s32, slots, self._centers, self._radii, self._vdist, slots)
        self._note_bounds(big, rad)
        end = max(self._npos, top)
        self._holes += (end - self._npos) - slots.shape[0]
        self._npos = end
        layout.count_up_open(self._tree, slots)

    def update(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None = None,
               view_distances: np.ndarray | None = None) -> None:
        """Move objects. Any well-typed batch (ids in any order, with or without radii and
        view distances, its movers awake or still) takes one checking pass and one writing
        pass, plus a compiled wake of its still movers; last batch's movers again, centres
        only, skip the id look-up. A batch with anything wrong goes the contract's general
        way, which names what is wrong and changes nothing."""
        ids, centers, radii, view_distances = lossless_batch(ids, centers, radii,
                                                             view_distances)
        self._frame_queries = max(self._frame_queries, self._queries_since_update)
        self._queries_since_update = 0
        batch = moves.batch_of(ids, centers, radii, view_distances)
        if batch is not None:
            # (last batch's movers written in place are still: they go the checked way)
            if not self._in_place_last and self._move_known(batch):
                return
            pos = moves.known_positions(self._last_movers, self._layout_epoch, batch,
                                        self._pos_id)
            if pos is not None:  # last batch's movers, with radii or view distances
                asleep = int(np.count_nonzero(pos < self._awake0)) if self._in_place_last else 0
                self._move(batch, pos, asleep)
                return
            if batch.ids.shape[0] == self._count and self._awake0 == 0 and (
                    self._move_every(batch)):
                return
            pos = np.empty(batch.ids.shape[0], dtype=np.int64)
            asleep = moves.find_batch(batch, self._id_pos.arrays(), self._pos_seen,
                                      self._awake0, pos)
            if asleep >= 0:
                self._move(batch, pos, asleep)
                return
        self._update_lossless(ids, centers, radii, view_distances)

    def _fresh_mark(self) -> int:
        """A new stamp for the per-position and per-chunk marks (one per pass that uses them)."""
        self._mark = self._mark + 1
        return self._mark

    def _move_every(self, batch: moves.UpdateBatch) -> bool:
        """A batch of every object while all are awake, in any order (``moves.move_every``),
        then what :meth:`_move` does after its writes."""
        pos = np.empty(batch.ids.shape[0], dtype=np.int64)
        done = moves.move_every(batch, self._id_pos.arrays(), self._pos_seen, pos,
                                moves.SLOTS_ARE_POSITIONS if self._slot_order else self._pos_slot,
                                self._columns(), self._spare, self._s32)
        if done is None:
            return False
        big, rad, (self._centers, self._radii, self._vdist), self._spare = done
        self._note_bounds(big, rad)
        self._in_place_last = False
        self._keeps_moving = True
        self._last_movers = moves.remember(self._layout_epoch, pos, self._slot_order)
        self._after_moves(pos, False, self._npos)
        return True

    def _move_known(self, batch: moves.UpdateBatch) -> bool:
        """The same movers as last time (a scene's moving objects, frame after frame): write
        them through last time's positions in one checking pass (``app.spatial.moves``);
        False -> another path."""
        done = moves.move_same(self._last_movers, self._layout_epoch, self._count, batch,
                               self._columns(), self._spare,
                               self._pos_id, self._pos_slot, self._s32)
        if done is None:
            return False
        big, rad, (self._centers, self._radii, self._vdist), self._spare = done
        self._note_bounds(big, rad)
        self._keeps_moving = True
        self._after_moves(self._last_movers.pos, False, self._npos)
        return True

    def _apply_update(self, slots, centers, radii, vd) -> None:
        """The general path's checked batch: the same moves as :meth:`update` makes."""
        pos = self._slot_pos[slots]
        batch = moves.UpdateBatch(slots, centers, _EMPTY_F if radii is None else radii,
                            _EMPTY_F if vd is None else vd)
        self._move(batch, pos, int(np.count_nonzero(pos < self._awake0)))

    def _move(self, batch: moves.UpdateBatch, pos: np.ndarray, asleep: int) -> None:
        """Write a checked batch found at ``pos`` (``asleep`` of them before the awake
        region): leave those in place or wake them, write every record, refit the awake
        chunks written."""
        stamp = self._fresh_mark()
        stopped = self._stopped(pos, stamp)
        self._in_place_last = False
        end = self._npos
        woke = False
        n = pos.shape[0]
        in_place = asleep >= IN_PLACE * n and not self._keeps_moving
        # Whether this batch's movers mostly moved before: next batch's newcomers wake at once
        # if so (they join a set that keeps moving), and are written in place if not.
        self._keeps_moving = n - asleep >= IN_PLACE * n
        if 0 < asleep < WAKE_ALL * self._count and in_place:
            woke = self._write_settle(batch, pos, asleep)
        else:
            if asleep >= WAKE_ALL * self._count:
                # Most objects move: the layout as sorted is the best awake region there is.
                self._awake0 = 0
                self._awake_extent = layout.mean_extent(self._tree, *self._awake_chunks())
            elif asleep:  # newcomers to a set of movers that keeps moving: they wake now
                woke = self._wake(pos, batch.centers, np.flatnonzero(pos < self._awake0),
                                  False)
            big, rad = moves.write_batch(batch, pos, self._records())
            self._note_bounds(big, rad)
        if stopped is not None:
            self._sleep(stopped)
            if self._drain < 0 and self._slept > (end - self._awake0) // 2:
                # The awake region is half holes: whatever in it the batches do not move
                # sleeps too (movers that stopped before holes were many), DRAIN positions a
                # batch, and then it re-sorts.
                self._drain, self._drain_end = self._awake0, end
        if self._drain >= 0:
            pos, end = self._drain_step(pos, end)
        self._last_movers = moves.remember(self._layout_epoch, pos, self._slot_order)
        self._after_moves(pos, woke, end)

    def _drain_step(self, pos: np.ndarray, end: int) -> tuple[np.ndarray, int]:
        """Put the awake objects of the next DRAIN positions that this batch (at ``pos``)
        does not move back to still holes; past the last, re-sort the awake region (which
        drops its holes). Returns where this batch's movers are then, and the layout's
        end. All at once this was a stall: 22-31 ms at 10^6 under churn, some 50,000 idle
        objects that stopped moving before holes were many (``FILL_HOLES``)."""
        hi = min(self._drain_end, self._drain + DRAIN)
        stamp = self._fresh_mark()
        self._pos_mark[pos] = stamp
        self._sleep(update.unmarked(self._drain, hi, self._pos_mark, stamp, self._pos_slot))
        self._drain = hi
        if hi < self._drain_end:
            return pos, end
        slots = self._pos_slot[pos]
        self._sort_awake()
        return self._slot_pos[slots], self._npos  # (all laid out before the next refit)

    def _stopped(self, pos: np.ndarray, stamp: int) -> np.ndarray | None:
        """Once holes are many (``FILL_HOLES``): the awake movers of the last batch that this
        one (at ``pos``, stamped ``stamp``) leaves out, for :meth:`_sleep`; else None."""
        last = self._last_movers
        if (last is None or last.epoch != self._layout_epoch or self._still_curve is None
                or self._slot_order or self._holes < FILL_HOLES * self._npos):
            return None
        out = update.leavers(last.pos, pos, self._pos_mark, stamp, self._awake0,
                             self._pos_slot)
        return out if out.shape[0] else None

    def _sleep(self, positions: np.ndarray) -> None:
        """Awake objects that stopped moving go back to holes of the still chunks around them
        where their limits allow (``spawn.place_in_holes``), as new objects do: else under
        churn (movers replaced every frame) the holes the newcomers leave pile up until the
        whole layout is re-sorted (26 ms at 10^5 objects after ~400 frames of churn10), and
        the awake region grows. The awake region drops the holes they leave when it re-sorts,
        which it does once they are half of it."""
        slots = self._pos_slot[positions]
        placed = self._place_in_holes(slots, layout.pad_for(self._max_abs, self._max_r), True)
        done = placed >= 0
        n = int(np.count_nonzero(done))
        if n == 0:
            return
        old = positions[done]
        self._layout_epoch += 1
        update.leave_holes(self._tree, self._s32, self._pos_slot, old)
        self._id_pos.assign(self._ids[slots[done]], placed[done])
        self._slept += n

    def _after_moves(self, pos: np.ndarray, woke: bool, end: int) -> None:
        """Tight boxes for the awake chunks just written (awake movers that jumped away from
        their chunk wake again, at the end); re-sort the awake ones once they have spread (or
        everything, once holes abound); slot or curve order for what comes next. Positions
        from ``end`` on woke in this batch."""
        if not self._slot_order:  # (in slot order every box is open: nothing to refit)
            if self._holes > MAX_HOLES * self._npos:
                self._resort()
            else:
                woke = self._refit_written(pos, end) or woke
                extent = layout.mean_extent(self._tree, *self._awake_chunks())
                if woke:  # new awake chunks: the reference widens with them
                    self._awake_extent = max(self._awake_extent, extent)
                elif extent > RESORT_GROWTH * self._awake_extent:
                    self._sort_awake()
        self._choose_order(pos.shape[0])

    def _refit_written(self, pos: np.ndarray, end: int) -> bool:
        """Tight boxes and counts for the awake chunks of ``pos`` and the nodes above them
        (still ones written in place have had their boxes grown). Awake movers (below
        ``end``) that jumped out of their chunk's limit (teleports) wake again, at the end of
        the layout, so that the chunk they left keeps its box: else every jump would swell a
        chunk and soon force a re-sort of the whole awake region. True when any did."""
        pad = layout.pad_for(self._max_abs, self._max_r)
        chunks, c0, c1 = update.written_chunks(pos, self._chunk_mark, self._fresh_mark(),
                                               self._awake0)
        left = np.empty(chunks.shape[0] * CHUNK, np.int64)
        k = update.refit_listed(self._tree, self._s32, chunks, pad, self._awake0, end, left)
        rows = update.rows_at(pos, left[:k], self._pos_mark, self._fresh_mark()) if k else None
        if rows is not None and rows.shape[0]:
            self._layout_epoch += 1
            self._reserve(rows.shape[0])
            self._npos = update.wake_movers(self._tree, self._s32, self._places(), pos, rows,
                                            self._npos, True)
            self._holes += rows.shape[0]
            # the chunks they left and the ones they joined, tight again
            again, a0, a1 = update.written_chunks(np.concatenate([left[:k], pos[rows]]),
                                                  self._chunk_mark, self._fresh_mark())
            update.refit_listed(self._tree, self._s32, again, pad, 0, 0, left)
            c0, c1 = min(c0, a0), max(c1, a1)
            if self._last_movers is not None and self._last_movers.pos is pos:  # still valid
                self._last_movers = moves.remember(self._layout_epoch, pos, self._slot_order)
        if c1 > c0:
            layout.refit_upper(self._tree, c0, c1)
        return rows is not None and rows.shape[0] > 0

    def _records(self) -> moves.SphereRecords:
        return moves.SphereRecords(self._pos_slot, self._centers, self._radii, self._vdist,
                                   self._s32)

    def _places(self) -> update.ChunkPlaces:
        return update.ChunkPlaces(self._slot_pos, self._pos_slot, self._pos_id,
                                  *self._id_pos.arrays(), self._home)

    def _write_settle(self, batch: moves.UpdateBatch, pos: np.ndarray, asleep: int) -> bool:
        """Write a batch with still movers: each stays in place within its chunk's limit (its
        boxes grown) or wakes (``update.write_settle``). True when records moved."""
        # Room for all of them first: a growth refits every box from the float32 lanes, which
        # would drop the boxes grown here.
        self._reserve(asleep)
        self._stamp = self._stamp % 255 + 1  # 1 .. 255: a fresh array's zeros are no stamp
        wake = np.empty(pos.shape[0], np.bool_)
        big, rad, nwake = update.write_settle(
            batch, pos, self._records(),
            update.StillMoves(self._tree, self._awake0, self._moved_at), self._stamp,
            layout.pad_for(self._max_abs, self._max_r), wake)
        self._note_bounds(big, rad)
        self._in_place_last = nwake < asleep
        return nwake > 0 and self._wake(pos, batch.centers, np.flatnonzero(wake), True)

    def _wake(self, pos: np.ndarray, centers: np.ndarray, rows: np.ndarray,
              written: bool) -> bool:
        """Wake the still movers ``pos[rows]`` of a batch, rewriting their ``pos`` (in curve
        order of their new centres, behind the awake region); ``written``: their records
        hold the batch's values already (else the caller writes them after). True (records
        moved)."""
        rows = rows[layout.curve_order(centers[rows])]
        if self._npos == self._awake0:
            self._awake_extent = 0.0  # a new awake region: its first extent is the reference
        self._layout_epoch += 1
        self._reserve(rows.shape[0])
        self._npos = update.wake_movers(self._tree, self._s32, self._places(), pos, rows,
                                        self._npos, written)
        self._holes += rows.shape[0]
        return True

    def _on_remove(self, slots: np.ndarray) -> None:
        self._set_epoch += 1
        # (the caller's ids: gathered from the store they cost 0.14 ms for 10^4 at 10^7)
        self._id_pos.delete(self._gone_ids)
        # Last batch's movers stay known through a removal unless one of them is removed
        # (its hole keeps its id in ``pos_id``: a later batch must not write there).
        last = self._last_movers
        if update.take_out_slots(self._tree, self._s32, self._places(), slots, self._pos_seen,
                                 _NO_POSITIONS if last is None else last.pos):
            self._last_movers = None
        self._holes += slots.shape[0]
        if self._holes > MAX_HOLES * self._npos and not self._slot_order:  # (slots are reused)
            self._resort()

    # ------------------------------------------------------------------ queries

    def _settled(self) -> bool:
        """Whether the scene stopped moving while in slot order (the viewer paused: no batch
        comes to say so): twice as many frustum queries without a batch as a frame has made.
        Then the layout goes back to curve order, as a tree stops being flat: the boxes cull
        again and the overlay has them to draw."""
        self._queries_since_update += 1
        return self._slot_order and self._queries_since_update > 2 * max(self._frame_queries, 2)

    def _query_frustum(self, planes, eye, use_vd, occlusion: ZPyramid | None) -> QueryResult:
        if self._settled():
            self._resort()
        if self._slot_order:  # every box is open: the walk would only add its nodes to the scan
            rows, occluded, outside = scan_frustum(
                self._s32, self._npos, planes, eye, use_vd, self._max_abs, self._max_r,
                self._centers, self._radii, self._vdist, occluder(occlusion), self._pos_slot,
                codes=self._codes, dead=self._npos - self._count)
            self._tree.outcome[:] = 0
            return QueryResult(visible=self._pos_id[rows], working_set=self._count,
                               nodes_visited=0, occluded_objects=int(occluded),
                               culled_frustum=outside)
        p32, tol, tol_d = tolerances(planes, eye, self._max_abs, self._max_r)
        s32 = tuple(self._s32)
        k, occluded, far, working, visited = queries.query_frustum_plain(
            (tuple(self._tree), s32, self._pos_slot, self._pos_id, self._npos),
            (planes, six_planes(planes), eye, bool(use_vd), p32, eye.astype(np.float32),
             float(tol), float(tol_d)),
            occluder(occlusion), (self._pos_slot, self._centers, self._radii, self._vdist, s32),
            (self._codes, self._sure, self._near, self._out))
        return QueryResult(visible=self._out[:k].copy(), working_set=int(working),
                           nodes_visited=int(visited), occluded_objects=int(occluded),
                           culled_distance=int(far))

    def _query_box(self, lo, hi):
        return queries.query_box(self._tree, self._pos_slot, self._npos, self._centers,
                                 self._radii, lo, hi)

    def _query_sphere(self, center, radius):
        return queries.query_sphere(self._tree, self._pos_slot, self._npos, self._centers,
                                    self._radii, center, radius)

    def _query_ray(self, origin, direction):
        return queries.query_ray(self._tree, self._pos_slot, self._npos, self._centers,
                                 self._radii, origin, direction)

    _pairs_structural = True  # chunk boxes against chunk boxes (app.spatial.chunks.pairs)
    _pairs_view = None  # slot order's stand-in layout for pairs (chunks.pairs.SlotOrderView)

    def _query_pairs(self, slots, margin):
        return pairs.index_pairs(self, slots, margin)

    # ------------------------------------------------------------------ overlay, stats, checks

    def _shown(self) -> np.ndarray:
        """Nodes the overlay draws: the non-empty ones (none in slot order: open boxes)."""
        if self._slot_order:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self._tree.count > 0)

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Boxes of the non-empty chunks and groups; depth 0 is the top level (none in slot
        order, where every box is open)."""
        g = self._shown()
        t = self._tree
        levels = np.searchsorted(t.loff, g, side="right") - 1
        depth = (t.loff.shape[0] - 2) - levels
        return (t.box[layout.LO:layout.LO + 3, g].T.copy(),
                t.box[layout.HI:layout.HI + 3, g].T.copy(), depth.astype(np.int64))

    def node_outcomes(self) -> np.ndarray:
        return self._tree.outcome[self._shown()].copy()

    def stats(self) -> dict[str, Any]:
        t = self._tree
        return {
            "objects": self._count,
            "nodes": int((t.count > 0).sum()),
            "max_depth": int(t.loff.shape[0] - 2),
            "chunks": -(-self._npos // CHUNK),
            "awake": self._npos - self._awake0,
            "positions": self._npos,
            "holes": self._holes,
            "mean_chunk_extent": float(layout.mean_extent(t, 0, -(-self._npos // CHUNK))),
            "resorts": self.resorts,
            "awake_resorts": self.awake_resorts,
            "order": "slot" if self._slot_order else "curve",
        }

    def _validate(self) -> None:
        t = self._tree
        cap = self._pos_slot.shape[0]
        room = self._reserved["_pos_slot"][0].base.shape[0]
        views = [getattr(self, name).shape[0] * per for name, (_, per) in self._reserved.items()]
        views += [a.shape[0] for a in self._s32]
        if t.loff[1] * CHUNK != room or not (
                0 <= self._awake0 <= self._npos <= cap <= room) or not all(
                cap <= v < cap + 64 for v in views):
            raise AssertionError(f"{self.describe()}: tree of {int(t.loff[1])} chunks for "
                                 f"{room} positions reserved, arrays of {views} for {cap}, "
                                 f"awake from {self._awake0}, {self._npos} used")
        for code, where in (
            check.check_positions(self._alive, self._slot_pos, self._pos_slot, self._npos),
            check.check_copy(self._s32, self._pos_slot, self._npos, self._centers, self._radii,
                             self._vdist),
            check.check_chunks(t, self._pos_slot, self._npos, self._centers, self._radii,
                               self._vdist),
            check.check_nodes(t, not self._slot_order),
        ):
            self._raise_check(code, check.MESSAGES, where)
        alive = np.flatnonzero(self._alive)
        if self._slot_order and not np.array_equal(self._slot_pos[alive], alive):
            raise AssertionError(f"{self.describe()}: slot order, but a position is not its slot")
        if not np.array_equal(self._id_pos.lookup(self._ids[alive]), self._slot_pos[alive]) or (
                len(self._id_pos) != self._count):
            raise AssertionError(f"{self.describe()}: the id -> position map is stale")
        holes = int((self._pos_slot[: self._npos] < 0).sum())
        if holes != self._holes:
            raise AssertionError(f"{self.describe()}: {holes} holes, {self._holes} counted")


__all__ = ["ChunkedIndex"]
