"""The object store every flat index shares: a structure of arrays indexed by *slot*
(centres, radii, view distances, ids, alive), a free list of slots, the id -> slot map, and the
compiled per-frame paths for well-typed batches: updates (ids resolved, values checked, new
values swapped in), inserts (values checked, ids added to the map only if all are new, rows
written) and removals (ids resolved, slots freed). A batch any of them refuses goes to the
general path, which names what is wrong and changes nothing.

:class:`ObjectStore` is the base :class:`~app.spatial.base.SpatialIndex` stands on: a
structure reads the arrays by slot (``_centers``, ``_radii``, ``_vdist``, ``_ids``) and is told
of changes through two hooks the store calls, ``_on_update`` (after a batch's new values are
in) and ``_grow`` (its per-slot arrays must grow with the store).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from app.parallelism import PARALLEL_MIN, threads_for
from app.spatial.checks import is_f64, is_ids, name_ids, reject_repeats, values_ok
from app.spatial.idmap import IdMap, at_home, hash_lookup
from app.spatial.pool import grown, grown_free_stack
from app.spatial.prefetch import PREFETCH_AHEAD, PREFETCH_FAR, prefetch, spread_out
from app.spatial.seen import any_marked, fit_bits, forget, has_repeat, mark_all, seen_bits


@njit(cache=True, parallel=True)
def _swap_in(slots, centers, radii, vdist, store_c, store_r, store_v, old_c, old_r, old_v):
    """Copy the old values out and the new ones in; slots are distinct, so rows never race."""
    n = slots.shape[0]
    has_r = radii.shape[0] == n
    has_v = vdist.shape[0] == n
    ahead = PREFETCH_AHEAD if spread_out(slots) else n  # (a dense batch streams anyway)
    for i in prange(n):
        if i + ahead < n:  # a later slot's rows
            t = slots[i + ahead]
            prefetch(store_c, t)
            prefetch(store_r, t)
            prefetch(store_v, t)
        s = slots[i]
        for a in range(3):
            old_c[i, a] = store_c[s, a]
            store_c[s, a] = centers[i, a]
        old_r[i] = store_r[s]
        old_v[i] = store_v[s]
        if has_r:
            store_r[s] = radii[i]
        if has_v:
            store_v[s] = vdist[i]


@njit(cache=True, parallel=True)
def _resolve_batch(ids, centers, radii, vdist, keys, vals, dense, home, seen, slots) -> bool:
    """Resolve an update batch's ids into ``slots`` and check its values; changes nothing.

    Look-ups and value checks run on both cores, the repeat check runs serially. False means
    "something is wrong": the caller then takes the slow path, which names the offending ids.
    """
    n = ids.shape[0]
    has_r = radii.shape[0] == n
    has_v = vdist.shape[0] == n
    nd = dense.shape[0]
    bad = np.zeros(n, dtype=np.bool_)
    ahead = PREFETCH_FAR if spread_out(ids) else n  # (a dense batch streams anyway)
    half = ahead // 2 if ahead < n else n
    for i in prange(n):
        if i + ahead < n:  # a later id's home bit (10^7 ids: 1.25 MB, beyond the cache),
            ka = ids[i + ahead]
            if ka >= 0 and ka < nd:
                prefetch(home, ka >> 6)
        if i + half < n:  # then its direct entry, unless the bit answers for it
            ka = ids[i + half]
            if ka >= 0 and ka < nd and not at_home(home, ka):
                prefetch(dense, ka)
        k = ids[i]
        # (a bit in the cache where it answers, not a line of the direct table)
        s = k if at_home(home, k) else dense[k] if 0 <= k < nd else hash_lookup(keys, vals, k)
        slots[i] = s
        bad[i] = not ((s >= 0) & values_ok(centers[i, 0], centers[i, 1], centers[i, 2],
                                           radii[i] if has_r else 0.0,
                                           vdist[i] if has_v else 0.0))
    increasing = True
    for i in range(n):
        if bad[i]:
            return False
        if i > 0 and ids[i] <= ids[i - 1]:
            increasing = False
    if increasing:  # distinct ids (the usual sorted batch): no per-slot marks to touch
        return True
    return not has_repeat(seen, slots)


@njit(cache=True)
def _resolve_serial(ids, centers, radii, vdist, keys, vals, dense, home, seen, slots) -> bool:
    """:func:`_resolve_batch` on the calling thread, for a batch below ``PARALLEL_MIN``: one
    loop that looks up, checks and notes whether the ids increase, with no per-row flags to
    read back. The parallel kernel held to one thread took 224-227 us for 10^4 sorted ids of
    10^6 from a cold cache, this 154 (its look-ups prefetched alike). Kept apart from it: this
    loop run on 2-64 parts of the batch from a ``prange`` resolved 10^5 shuffled ids of 10^6
    in 1.9-3.1 ms on both cores, the parallel kernel as it is in 1.5-2.3 (alternated runs)."""
    n = ids.shape[0]
    has_r = radii.shape[0] == n
    has_v = vdist.shape[0] == n
    nd = dense.shape[0]
    ok = True
    increasing = True
    ahead = PREFETCH_FAR if spread_out(ids) else n  # (a dense batch streams anyway)
    half = ahead // 2 if ahead < n else n
    for i in range(n):
        if i + ahead < n:  # a later id's home bit (10^7 ids: 1.25 MB, beyond the cache),
            ka = ids[i + ahead]
            if ka >= 0 and ka < nd:
                prefetch(home, ka >> 6)
        if i + half < n:  # then its direct entry, unless the bit answers for it
            ka = ids[i + half]
            if ka >= 0 and ka < nd and not at_home(home, ka):
                prefetch(dense, ka)
        k = ids[i]
        # (a bit in the cache where it answers, not a line of the direct table)
        s = k if at_home(home, k) else dense[k] if 0 <= k < nd else hash_lookup(keys, vals, k)
        slots[i] = s
        ok &= (s >= 0) & values_ok(centers[i, 0], centers[i, 1], centers[i, 2],
                                   radii[i] if has_r else 0.0, vdist[i] if has_v else 0.0)
        if i > 0:
            increasing &= k > ids[i - 1]
    if not ok:
        return False
    if increasing:  # distinct ids (the usual sorted batch): no per-slot marks to touch
        return True
    return not has_repeat(seen, slots)


@njit(cache=True, inline="always")
def write_row(i: int, s: int, centers, radii, vdist, store_c, store_r, store_v) -> None:
    """Row ``i`` of a checked batch into store slot ``s``: the centre, and the radius and view
    distance when the batch has them (empty arrays: unchanged)."""
    moved_centre(i, s, centers, store_c)
    if radii.shape[0]:
        store_r[s] = radii[i]
    if vdist.shape[0]:
        store_v[s] = vdist[i]


@njit(cache=True, inline="always")
def moved_centre(i: int, s: int, new_c, centers):
    """Row ``i``'s centre of a checked batch into store slot ``s``; returns it (cx, cy, cz).
    For a move kernel that reads the radius and view distance from elsewhere."""
    cx = new_c[i, 0]
    cy = new_c[i, 1]
    cz = new_c[i, 2]
    centers[s, 0] = cx
    centers[s, 1] = cy
    centers[s, 2] = cz
    return cx, cy, cz


@njit(cache=True, inline="always")
def moved_sphere(i: int, s: int, new_c, new_r, new_v, centers, radii, vdist):
    """Row ``i`` of a checked batch into store slot ``s`` (radius and view distance only where
    the batch has them: ``new_r`` / ``new_v`` None otherwise, each combination compiled
    apart); returns the slot's new sphere (cx, cy, cz, r, vd). For a structure's move kernel
    that writes the store in its own pass; inlined, it costs what the lines written out do
    (10^5 scattered rows: 327-333 against 326-335 us)."""
    cx, cy, cz = moved_centre(i, s, new_c, centers)
    if new_r is None:
        r = radii[s]
    else:
        r = new_r[i]
        radii[s] = r
    if new_v is None:
        vd = vdist[s]
    else:
        vd = new_v[i]
        vdist[s] = vd
    return cx, cy, cz, r, vd


@njit(cache=True, parallel=True)
def _write_in(slots, centers, radii, vdist, store_c, store_r, store_v):
    """Copy the new values in (for subclasses that never read the old ones)."""
    for i in prange(slots.shape[0]):
        write_row(i, slots[i], centers, radii, vdist, store_c, store_r, store_v)


@njit(cache=True)
def _same_batch(ids, last, centers, radii, vdist) -> int:
    """1 when ``ids`` are ``last`` (as long) and every row has a finite centre and, where the
    batch carries them (not empty), a finite radius >= 0 and a view distance >= 0 (inf
    allowed); 0 when the ids differ; -1 when a value is bad. One loop a column, no early
    exit and ``abs(x) < inf`` for finite (false for NaN): each loop vectorises (numpy's
    ``array_equal`` and a loop of ``np.isfinite`` took 24 and 50 us for 10^4 rows). A new
    set of movers mostly differs at its ends or middle already: those are looked at first
    (10^4 fresh ids: 5 us of the full comparison saved)."""
    n = ids.shape[0]
    if n and (ids[0] != last[0] or ids[n // 2] != last[n // 2] or ids[n - 1] != last[n - 1]):
        return 0
    same = True
    for i in range(n):
        same &= ids[i] == last[i]
    if not same:
        return 0
    inf = np.inf
    ok = True
    for i in range(n):
        ok &= (abs(centers[i, 0]) < inf) & (abs(centers[i, 1]) < inf) & (abs(centers[i, 2]) < inf)
    if radii.shape[0] == n:
        for i in range(n):
            ok &= (abs(radii[i]) < inf) & (radii[i] >= 0.0)
    if vdist.shape[0] == n:
        for i in range(n):
            ok &= vdist[i] >= 0.0  # NaN fails too; inf is allowed
    return 1 if ok else -1


@njit(cache=True)
def ids_at(store_ids, slots):
    """``store_ids[slots]``, compiled: a query's answer gathered from slots in any order
    (a tree's come in block order, random over the store). numpy's fancy index took 0.23-0.36
    ms for 30,000 of 10^6 from a cold cache, this loop 0.16-0.17."""
    out = np.empty(slots.shape[0], np.int64)
    for i in range(slots.shape[0]):
        out[i] = store_ids[slots[i]]
    return out


@njit(cache=True)
def _first_bad_row(centers, radii, vdist) -> int:
    """The first row of a new batch with a non-finite centre, a radius not finite or
    negative, or a view distance NaN or negative (``vdist`` empty: none given); -1."""
    has_v = vdist.shape[0] == radii.shape[0]
    for i in range(radii.shape[0]):
        ok = (np.isfinite(centers[i, 0]) and np.isfinite(centers[i, 1])
              and np.isfinite(centers[i, 2]) and np.isfinite(radii[i]) and radii[i] >= 0.0)
        if has_v:
            ok = ok and vdist[i] >= 0.0  # NaN fails too; inf is allowed
        if not ok:
            return i
    return -1


@njit(cache=True)
def _write_new(slots, ids, centers, radii, vdist, store_ids, store_c, store_r, store_v,
               alive) -> None:
    """New objects' rows into their (free) slots in one pass; ``vdist`` empty: endless."""
    has_v = vdist.shape[0] == slots.shape[0]
    n = slots.shape[0]
    for i in range(n):
        if i + PREFETCH_AHEAD < n:  # a later slot's rows (free slots lie anywhere)
            t = slots[i + PREFETCH_AHEAD]
            prefetch(store_ids, t)
            prefetch(store_c, t)
            prefetch(store_r, t)
            prefetch(store_v, t)
            prefetch(alive, t)
        s = slots[i]
        store_ids[s] = ids[i]
        for a in range(3):
            store_c[s, a] = centers[i, a]
        store_r[s] = radii[i]
        store_v[s] = vdist[i] if has_v else np.inf
        alive[s] = True


@njit(cache=True)
def _resolve_ids(ids, keys, vals, dense, seen, slots) -> bool:
    """The slots of ``ids`` into ``slots``; False (nothing changed) when one is unknown or
    given twice (the repeat bits only when the ids do not strictly increase)."""
    nd = dense.shape[0]
    increasing = True
    n = ids.shape[0]
    for i in range(n):
        if i + PREFETCH_AHEAD < n:  # a later id's entry (not its home bit: the removal's
            ka = ids[i + PREFETCH_AHEAD]  # delete reads and writes the entry anyway)
            if ka >= 0 and ka < nd:
                prefetch(dense, ka)
        k = ids[i]
        s = dense[k] if k >= 0 and k < nd else hash_lookup(keys, vals, k)
        if s < 0:
            return False
        slots[i] = s
        if i > 0 and k <= ids[i - 1]:
            increasing = False
    return increasing or not has_repeat(seen, slots)


@njit(cache=True)
def _free_rows(slots, store_ids, alive, free, nfree: int) -> None:
    """Removed objects' slots dead and on the free stack (from ``nfree`` up), in one pass."""
    n = slots.shape[0]
    for i in range(n):
        if i + PREFETCH_AHEAD < n:
            prefetch(store_ids, slots[i + PREFETCH_AHEAD])
            prefetch(alive, slots[i + PREFETCH_AHEAD])
        s = slots[i]
        store_ids[s] = -1
        alive[s] = False
        free[nfree + i] = s


class Columns(NamedTuple):
    """The store's float64 columns by slot: what the contract keeps (or their spare twins,
    which ``app.spatial.moves`` writes a whole scene into and swaps in)."""

    centers: np.ndarray
    radii: np.ndarray
    vdist: np.ndarray


EMPTY_F = np.zeros(0, dtype=np.float64)  # "not given" for a radius or view distance column
_NO_OLD_C = np.zeros((0, 3), dtype=np.float64)


class ObjectStore:
    """Slots of spheres keyed by caller ids: the arrays, the free list, the id map, and the
    batch paths that resolve ids and write values. Subclasses implement the hooks."""

    #: Whether ``_on_update`` reads the old values; an index that does not skips copying them
    #: out (a cache miss fewer per moved object on large stores), and gets empty arrays.
    _reads_old_values: bool = True

    def __init__(self, capacity: int = 1024) -> None:
        capacity = max(int(capacity), 16)
        self._ids = np.full(capacity, -1, dtype=np.int64)
        self._centers = np.zeros((capacity, 3), dtype=np.float64)
        self._radii = np.zeros(capacity, dtype=np.float64)
        self._vdist = np.full(capacity, np.inf, dtype=np.float64)
        self._alive = np.zeros(capacity, dtype=np.bool_)
        # Free slots as a stack; the top is at the end so popping a batch is a slice.
        self._free = np.arange(capacity - 1, -1, -1, dtype=np.int64)
        self._nfree = capacity
        self._idmap = IdMap(capacity, home=True)  # (ids 0..N-1 in order resolve by a bit)
        self._count = 0
        self._repeats = seen_bits(capacity)  # a batch's repeat check (app.spatial.seen)
        self._scratch_n = 0  # size of the reused old-value buffers of _apply_update
        # The last update batch's ids (a copy) and their slots, valid while no object was
        # removed since (a removal frees a slot another id may then take): the same batch
        # again (a scene's moving objects, frame after frame) needs no id look-up.
        self._last_ids: np.ndarray | None = None
        self._last_slots = np.zeros(0, dtype=np.int64)
        # The bits of the last batch's slots, set when a removal first asks after the batch
        # (``_marked``: the slots they hold; :meth:`_last_batch_bits`).
        self._last_bits = seen_bits(0)
        self._marked: np.ndarray | None = None
        # An insert's checked rows, row i for its slots[i] (view distances empty: none given,
        # infinite), while the subclass's insert hook runs; None otherwise.
        self._new_rows: Columns | None = None
        # A removal's ids (int64), row i for its slots[i], while the remove hook runs.
        self._gone_ids: np.ndarray | None = None

    @property
    def capacity(self) -> int:
        """Number of object slots currently allocated."""
        return self._ids.shape[0]

    # ------------------------------------------------------------------ hooks

    def _on_update(self, slots: np.ndarray, old_centers: np.ndarray, old_radii: np.ndarray,
                   old_vdist: np.ndarray) -> None:
        """Objects at ``slots`` changed; the store holds the new values.

        ``old_*`` may be views of reused buffers: copy them to keep them past the call.
        """

    def _grow(self, new_capacity: int) -> None:
        """Per-slot arrays of the subclass must grow to ``new_capacity``."""

    # ------------------------------------------------------------------ batches

    def _store_new(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray,
                   vd: np.ndarray) -> np.ndarray:
        """Checked new objects into free slots (the store grows when short); their slots."""
        slots = self._alloc_slots(ids.shape[0])
        _write_new(slots, ids, centers, radii, vd, self._ids, self._centers, self._radii,
                   self._vdist, self._alive)
        self._idmap.insert(ids, slots)
        self._count += ids.shape[0]
        return slots

    def _store_new_fast(self, ids, centers, radii, vd) -> np.ndarray | None:
        """:meth:`_store_new` for a batch of well-typed arrays, checked by compiled passes:
        the slots, or None when the batch needs the slow path (other types, an empty batch,
        a bad value, an id present or repeated: the slow path names them) and nothing
        changed."""
        if not is_ids(ids):
            return None
        n = ids.shape[0]
        if not (is_f64(centers, (n, 3)) and is_f64(radii, (n,))
                and (vd is None or is_f64(vd, (n,)))):
            return None
        vd = EMPTY_F if vd is None else vd
        if _first_bad_row(centers, radii, vd) >= 0:
            return None
        slots = self._alloc_slots(n)
        if self._idmap.insert_absent(ids, slots) >= 0:
            self._nfree += n  # the slots go back on the free stack, as they were
            return None
        _write_new(slots, ids, centers, radii, vd, self._ids, self._centers, self._radii,
                   self._vdist, self._alive)
        self._count += n
        return slots

    def _known_slots_fast(self, ids) -> np.ndarray | None:
        """The slots of a well-typed batch of known, distinct ids, resolved by one compiled
        pass; None when the batch needs the slow path (other types, empty, an id unknown or
        repeated: the slow path names them)."""
        if not is_ids(ids):
            return None
        slots = np.empty(ids.shape[0], np.int64)
        keys, vals, dense = self._idmap.arrays()
        return slots if _resolve_ids(ids, keys, vals, dense, self._seen_bits(), slots) else None

    def _drop(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Free the slots of removed objects (the structure has forgotten them). The last
        batch's slots stay valid unless one of them is freed (a later insert may take it):
        a game that spawns and despawns while the same objects keep moving keeps its
        batches' look-up-free path."""
        if self._last_ids is not None and any_marked(self._last_batch_bits(), slots):
            self._last_ids = None
        self._idmap.delete(ids)
        _free_rows(slots, self._ids, self._alive, self._free, self._nfree)
        self._nfree += slots.shape[0]
        self._count -= ids.shape[0]

    def _last_batch_bits(self) -> np.ndarray:
        """The bits of the last batch's slots, set once a batch: a game that keeps moving the
        same objects while others spawn and despawn asks at every removal (10^4 movers, 10^3
        removed a frame: the removed slots looked up in 4.8 us a call, dispatch included,
        where setting and clearing the movers' bits each time took 9-10 us)."""
        bits = self._last_bits
        if self._marked is not self._last_slots or bits.shape[0] * 64 < self.capacity:
            if self._marked is not None:
                forget(bits, self._marked, self._marked.shape[0])
            bits = self._last_bits = fit_bits(bits, self.capacity)
            mark_all(bits, self._last_slots)
            self._marked = self._last_slots
        return bits

    def _apply_update(self, slots: np.ndarray, centers: np.ndarray, radii: np.ndarray | None,
                      vd: np.ndarray | None) -> None:
        """Swap a checked batch's values into the store, then tell the subclass.

        The old values go to reused buffers (fresh multi-megabyte arrays every frame cost page
        faults), so hooks get views of them and must copy what they keep; ``slots`` itself is
        the caller's and may be kept (fixed-octree queues it).

        The thread count is set here, around the parallel kernels, and not around every
        update: an index whose structure moves its batches itself (a tree, the grid) runs
        no parallel kernel below ``PARALLEL_MIN`` and skips the three calls into numba's
        threading layer, about 7 us a frame once a frame's kernels have evicted them.
        """
        n = slots.shape[0]
        with threads_for(n):
            if not self._reads_old_values:
                _write_in(slots, centers, EMPTY_F if radii is None else radii,
                          EMPTY_F if vd is None else vd, self._centers, self._radii,
                          self._vdist)
                self._on_update(slots, _NO_OLD_C, EMPTY_F, EMPTY_F)
                return
            if self._scratch_n < n:
                cap = max(n, 1024)
                self._scratch = (np.empty((cap, 3)), np.empty(cap), np.empty(cap))
                self._scratch_n = cap
            old_c, old_r, old_v = (a[:n] for a in self._scratch)
            _swap_in(slots, centers, EMPTY_F if radii is None else radii,
                     EMPTY_F if vd is None else vd,
                     self._centers, self._radii, self._vdist, old_c, old_r, old_v)
            self._on_update(slots, old_c, old_r, old_v)

    def _update_fast(self, ids, centers, radii, vd) -> bool:
        """The per-frame path: well-typed arrays, compiled checks. False -> use the slow path."""
        if not is_ids(ids):
            return False
        n = ids.shape[0]
        if not is_f64(centers, (n, 3)):
            return False
        if (radii is not None and not is_f64(radii, (n,))) or (
                vd is not None and not is_f64(vd, (n,))):
            return False
        r = EMPTY_F if radii is None else radii
        v = EMPTY_F if vd is None else vd
        last = self._last_ids
        if last is not None and last.shape[0] == n:
            same = _same_batch(ids, last, centers, r, v)
            if same < 0:
                return False
            if same:  # the last batch's ids again, no removal since: its slots (distinct)
                self._apply_update(self._last_slots, centers, radii, vd)
                return True
        slots = np.empty(n, dtype=np.int64)
        keys, vals, dense = self._idmap.arrays()
        resolve = _resolve_serial if n < PARALLEL_MIN else _resolve_batch
        if not resolve(ids, centers, r, v, keys, vals, dense, self._idmap.home(), self._seen_bits(),
                       slots):
            return False
        self._last_ids = ids.copy()
        self._last_slots = slots
        self._apply_update(slots, centers, radii, vd)
        return True

    def _slot_columns(self) -> tuple[np.ndarray, ...]:
        """Every per-slot array of the store: centres, radii, view distances, ids, live flags
        (what :mod:`app.spatial.rows` binds into one line a slot)."""
        return self._centers, self._radii, self._vdist, self._ids, self._alive

    def _set_slot_columns(self, columns: tuple[np.ndarray, ...]) -> None:
        """Replace every per-slot array (the order of :meth:`_slot_columns`), same values."""
        self._centers, self._radii, self._vdist, self._ids, self._alive = columns

    def _columns(self) -> Columns:
        """The store's float64 columns as they are now (the arrays, not copies)."""
        return Columns(self._centers, self._radii, self._vdist)

    def _seen_bits(self) -> np.ndarray:
        """The clear repeat-check bitset, as large as the store."""
        self._repeats = fit_bits(self._repeats, self.capacity)
        return self._repeats

    def _resolve_known(self, op: str, ids: np.ndarray) -> np.ndarray:
        """Slots of ``ids``; ValueError naming unknown or repeated ids (nothing changed)."""
        slots = self._idmap.lookup(ids)
        unknown = slots < 0
        if unknown.any():
            raise ValueError(f"{op}: unknown ids: {name_ids(ids[unknown])}")
        if has_repeat(self._seen_bits(), slots):
            reject_repeats(op, ids)
        return slots

    # ------------------------------------------------------------------ slots

    def _alloc_slots(self, n: int) -> np.ndarray:
        if n > self._nfree:
            self._grow_store(max(2 * self.capacity, self._count + n))
        slots = self._free[self._nfree - n : self._nfree][::-1].copy()
        self._nfree -= n
        return slots

    def _grow_store(self, new_cap: int) -> None:
        old = self.capacity
        self._ids = grown(self._ids, new_cap, -1)
        self._centers = grown(self._centers, new_cap, 0.0)
        self._radii = grown(self._radii, new_cap, 0.0)
        self._vdist = grown(self._vdist, new_cap, np.inf)
        self._alive = grown(self._alive, new_cap, False)
        self._free, self._nfree = grown_free_stack(self._free, self._nfree, old, new_cap)
        self._grow(new_cap)

    def _validate_store(self) -> None:
        """AssertionError when the count, the id map, the live slots and the free list
        disagree."""
        alive = np.flatnonzero(self._alive)
        if alive.shape[0] != self._count:
            raise AssertionError(f"{self._count} objects counted but {alive.shape[0]} slots alive")
        if len(self._idmap) != self._count:
            raise AssertionError("id map size differs from object count")
        self._idmap.check_home()
        if self._count:
            found = self._idmap.lookup(self._ids[alive])
            if not np.array_equal(found, alive):
                raise AssertionError("id map does not point back at the live slots")
        free = self._free[: self._nfree]
        if np.intersect1d(free, alive).shape[0]:
            raise AssertionError("a live slot is on the free list")
        if free.shape[0] + alive.shape[0] != self.capacity:
            raise AssertionError("slots leaked: free + alive != capacity")
