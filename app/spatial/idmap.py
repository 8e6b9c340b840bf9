"""Caller-chosen int64 ids -> object slots, resolved a whole batch per compiled call.

Two layers: ids in ``[0, len(dense))`` live in a direct-address table (one load per id, which
is what scenes with ids 0..N-1 use every frame), every other id lives in an open-addressing
hash table in flat arrays. ``update`` of 100,000 ids therefore costs one Python call and about
a nanosecond per id, not 100,000 dict look-ups.

A map may also keep a *home* bitset (``IdMap(home=True)``, the object store's): bit k is set
when id k maps to k, which is where a store built from ids 0..N-1 in order puts every object.
A batch of scattered ids then resolves from a bit each (the bitset of 10^6 ids is 128 KB and
stays in the core's cache) instead of a line of the 8 MB direct table each, a cache miss.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.geom.hashing import mix64
from app.spatial.prefetch import PREFETCH_AHEAD, prefetch

_EMPTY = np.int64(-1)  # slot value of a never-used bucket
_TOMB = np.int64(-2)  # slot value of a deleted bucket (keeps probe chains intact)
_DENSE_SLACK = 4  # the direct table may be this many times the number of ids (plus 1024)


@njit(cache=True, inline="always")
def _hash(key: np.int64, mask: np.int64) -> np.int64:
    # Ids are often consecutive, so they must be scattered.
    return np.int64(mix64(key) & np.uint64(mask))


@njit(cache=True)
def hash_lookup(keys: np.ndarray, vals: np.ndarray, k: np.int64) -> np.int64:
    """Slot of an id outside the direct table, -1 when absent.

    Compiled callers check the direct table themselves (``0 <= k < len(dense)``) and call
    this only for the rest: passing the direct table into a shared helper made every
    look-up about 30x slower.
    """
    mask = keys.shape[0] - 1
    h = _hash(k, mask)
    r = np.int64(-1)
    while True:
        v = vals[h]
        if v == -1:
            break
        if v >= 0 and keys[h] == k:
            r = v
            break
        h = (h + 1) & mask
    return r


@njit(cache=True, inline="always")
def at_home(home: np.ndarray, k: np.int64) -> bool:
    """Whether id ``k`` maps to the slot of its own number (its bit in ``home``; False for a
    negative id or one past the bitset's end)."""
    w = k >> 6
    return (k >= 0) and (w < home.shape[0]) and (
        (home[w] >> np.uint64(k & 63)) & np.uint64(1)) != np.uint64(0)


@njit(cache=True, inline="always")
def _mark(home: np.ndarray, k: np.int64, v: np.int64) -> None:
    """Direct entry ``k`` was just set to ``v`` (-1: deleted): its home bit follows (a map
    without the bitset has an empty one)."""
    if home.shape[0]:
        b = np.uint64(1) << np.uint64(k & 63)
        w = home[k >> 6]
        to = (w | b) if v == k else (w & ~b)
        if to != w:  # (a line written only when its bit changes: most new ids are not home)
            home[k >> 6] = to


@njit(cache=True, inline="always")
def assign(keys: np.ndarray, vals: np.ndarray, dense: np.ndarray, k: np.int64,
           v: np.int64) -> None:
    """Give a present id a new value (compiled callers that move what ids point at)."""
    if 0 <= k < dense.shape[0]:
        dense[k] = v
        return
    mask = keys.shape[0] - 1
    h = _hash(k, mask)
    while True:
        if vals[h] >= 0 and keys[h] == k:
            vals[h] = v
            return
        h = (h + 1) & mask


@njit(cache=True)
def _assign_all(keys, vals, dense, home, ids, values) -> None:
    n = ids.shape[0]
    nd = dense.shape[0]
    for i in range(n):
        # A later id's entry: the stores of scattered ids waited on their lines one by one
        # (a look-up's loads overlap without a hint: 10^4 random of 10^7, 124 us either way).
        if i + PREFETCH_AHEAD < n:
            k = ids[i + PREFETCH_AHEAD]
            if k >= 0 and k < nd:
                prefetch(dense, k)
        assign(keys, vals, dense, ids[i], values[i])
        if 0 <= ids[i] < nd:
            _mark(home, ids[i], values[i])


@njit(cache=True)
def _lookup(keys, vals, dense, query, out) -> None:
    nd = dense.shape[0]
    for i in range(query.shape[0]):
        k = query[i]
        s = dense[k] if k >= 0 and k < nd else hash_lookup(keys, vals, k)
        out[i] = s


@njit(cache=True)
def _insert(keys, vals, dense, home, new_keys, new_vals) -> int:
    # Callers guarantee the keys are absent, so the first free or deleted bucket is taken.
    mask = keys.shape[0] - 1
    hashed = 0
    for i in range(new_keys.shape[0]):
        k = new_keys[i]
        if 0 <= k < dense.shape[0]:
            dense[k] = new_vals[i]
            _mark(home, k, new_vals[i])
            continue
        h = _hash(k, mask)
        while vals[h] >= 0:
            h = (h + 1) & mask
        keys[h] = k
        vals[h] = new_vals[i]
        hashed += 1
    return hashed


@njit(cache=True)
def _insert_absent(keys, vals, dense, home, new_keys, new_vals):
    """Add ``new_keys`` -> ``new_vals`` if no key is present and none is given twice:
    (-1, empty buckets taken). Else (i, buckets taken) where key i was present or repeated,
    and the keys before it are taken back out (their buckets left as tombstones)."""
    mask = keys.shape[0] - 1
    nd = dense.shape[0]
    taken = 0
    for i in range(new_keys.shape[0]):
        k = new_keys[i]
        if 0 <= k < nd:
            if dense[k] >= 0:
                _delete(keys, vals, dense, home, new_keys[:i])
                return i, taken
            dense[k] = new_vals[i]
            _mark(home, k, new_vals[i])
            continue
        h = _hash(k, mask)
        free = np.int64(-1)  # the first tombstone on the way: where the key goes
        while True:
            v = vals[h]
            if v == _EMPTY:
                break
            if v >= 0 and keys[h] == k:
                _delete(keys, vals, dense, home, new_keys[:i])
                return i, taken
            if v == _TOMB and free < 0:
                free = h
            h = (h + 1) & mask
        if free < 0:
            free = h
            taken += 1
        keys[free] = k
        vals[free] = new_vals[i]
    return -1, taken


@njit(cache=True)
def _top_and_outside(ids, nd: int) -> tuple[int, int]:
    """(the largest of ``ids``, how many lie outside a direct table of ``nd`` entries): one
    compiled pass where ``ids.max()`` and a count made two calls (a frame's spawns: 1.5 us
    of numpy's reduction). ``ids`` is not empty."""
    top = ids[0]
    n = 0
    for i in range(ids.shape[0]):
        top = max(top, ids[i])
        n += (ids[i] < 0) | (ids[i] >= nd)
    return top, n


@njit(cache=True)
def _delete(keys, vals, dense, home, del_keys) -> int:
    mask = keys.shape[0] - 1
    n = 0
    m = del_keys.shape[0]
    for i in range(m):
        if i + PREFETCH_AHEAD < m:  # a later id's direct entry and home bit
            ka = del_keys[i + PREFETCH_AHEAD]
            if 0 <= ka < dense.shape[0]:
                prefetch(dense, ka)
                prefetch(home, ka >> 6)  # (its clearing costs ~6 ns an id even so)
        k = del_keys[i]
        if 0 <= k < dense.shape[0]:
            if dense[k] >= 0:
                dense[k] = -1
                _mark(home, k, _EMPTY)
                n += 1
            continue
        h = _hash(k, mask)
        while True:
            v = vals[h]
            if v == -1:
                break
            if v >= 0 and keys[h] == k:
                vals[h] = _TOMB
                n += 1
                break
            h = (h + 1) & mask
    return n


class IdMap:
    """Map from int64 ids to int64 slots; all operations take whole batches. ``home``: keep
    the home bitset (the object store's map; see the module's docstring)."""

    def __init__(self, capacity: int = 64, home: bool = False) -> None:
        self._dense = np.full(0, _EMPTY, dtype=np.int64)
        # The home bitset (see the module's docstring): a word per 64 direct entries when
        # kept, empty otherwise (the kernels then skip it). Only a map whose direct table
        # changes through this class may keep it: ``assign`` (chunks', nested's moves of
        # their rows) writes the table alone.
        self._keeps_home = home
        self._home = np.zeros(0, dtype=np.uint64)
        self._new_hash(max(capacity, 16))
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(keys, vals, dense) for compiled callers (see :func:`hash_lookup`)."""
        return self._keys, self._vals, self._dense

    def home(self) -> np.ndarray:
        """The home bitset for compiled callers (:func:`at_home`); empty unless kept."""
        return self._home

    def check_home(self) -> None:
        """AssertionError unless bit k of the home bitset is set exactly where id k maps to
        k (a map that keeps none: unless it is empty)."""
        d = self._dense
        if not self._keeps_home:
            if self._home.shape[0]:
                raise AssertionError("a map without a home bitset has one")
            return
        if self._home.shape[0] != (d.shape[0] + 63) // 64:
            raise AssertionError("home bitset sized wrong")
        bits = np.unpackbits(self._home.view(np.uint8), bitorder="little")[:d.shape[0]]
        bad = np.flatnonzero(bits.astype(bool) != (d == np.arange(d.shape[0])))
        if bad.shape[0]:
            raise AssertionError(f"home bits wrong for ids {bad[:8].tolist()}")

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Slots of ``ids``; -1 where an id is unknown."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        out = np.empty(ids.shape[0], dtype=np.int64)
        _lookup(self._keys, self._vals, self._dense, ids, out)
        return out

    def insert(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Add ids known to be absent (the caller checked with ``lookup``)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        if ids.shape[0] == 0:
            return
        self._room_for(ids)
        self._used += _insert(self._keys, self._vals, self._dense, self._home, ids, slots)
        self._count += ids.shape[0]

    def insert_absent(self, ids: np.ndarray, slots: np.ndarray) -> int:
        """Add int64 ``ids`` -> ``slots`` if none is present and none repeated (-1); else
        the index of the first that is, and the map is as it was. One pass: a batch of new
        objects needs no look-up and no repeat check before it."""
        if ids.shape[0] == 0:
            return -1
        self._room_for(ids)
        at, taken = _insert_absent(self._keys, self._vals, self._dense, self._home, ids,
                                   slots)
        self._used += taken
        if at < 0:
            self._count += ids.shape[0]
        return int(at)

    def _room_for(self, ids: np.ndarray) -> None:
        """Widen the direct table or rehash ahead of inserting ``ids`` (the hash table is
        sized for the ids it will hold, not for those the direct table takes)."""
        top, hashed = _top_and_outside(ids, self._dense.shape[0])
        if self._maybe_grow_dense(top, self._count + ids.shape[0]):
            hashed = _top_and_outside(ids, self._dense.shape[0])[1]  # (fewer hashed now)
        if 2 * (self._used + hashed) > self._keys.shape[0]:
            self._rehash(hashed)

    def assign(self, ids: np.ndarray, values: np.ndarray) -> None:
        """New values for ids known to be present."""
        _assign_all(self._keys, self._vals, self._dense, self._home,
                    np.ascontiguousarray(ids, np.int64), np.ascontiguousarray(values, np.int64))

    def delete(self, ids: np.ndarray) -> None:
        """Remove ids known to be present."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        self._count -= _delete(self._keys, self._vals, self._dense, self._home, ids)

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, slots) currently stored."""
        dk = np.flatnonzero(self._dense >= 0).astype(np.int64)
        live = self._vals >= 0
        return (np.concatenate([dk, self._keys[live]]),
                np.concatenate([self._dense[dk], self._vals[live]]))

    def _maybe_grow_dense(self, max_id: int, count: int) -> bool:
        """Widen the direct table when the ids are small enough for it to stay compact. The
        old table is copied, not re-inserted id by id, and only hashed ids that now fall
        inside it move: a spawn pattern (new ids past the table, 10^3 a frame at 10^6
        objects) crossed the table's end after 48 frames and that frame's insert took 24-69
        ms; with the copy, 2-3 ms (the new table's first touch), and 500 frames later."""
        old = self._dense
        if max_id < old.shape[0] or max_id >= _DENSE_SLACK * count + 1024:
            return False
        # Half as much again as the largest id: a build of ids 0..N-1 then leaves room for
        # N/2 new ids before the first copy (a power of two above N left 5 % at 10^6)
        size = -(-(max_id + 1 + (max_id + 1) // 2) // 1024) * 1024
        dense = np.empty(size, dtype=np.int64)
        dense[:old.shape[0]] = old
        dense[old.shape[0]:] = _EMPTY
        keys, vals = self._hashed()
        inside = (keys >= 0) & (keys < size)
        self._dense = dense
        if self._keeps_home:  # (the old words as they were; the new ones clear)
            home = np.zeros((size + 63) // 64, dtype=np.uint64)
            home[:self._home.shape[0]] = self._home
            self._home = home
        if inside.any():
            # Moved in by _insert, which marks their home bits (an id past the old table's
            # end may map to its own number).
            moved_k, moved_v = keys[inside], vals[inside]
            self._rebuild_hash(keys[~inside], vals[~inside], 0)
            _insert(self._keys, self._vals, dense, self._home, moved_k, moved_v)
        return True

    def _hashed(self) -> tuple[np.ndarray, np.ndarray]:
        """The (ids, slots) the hash table holds (not those of the direct table)."""
        live = self._vals >= 0
        return self._keys[live], self._vals[live]

    def _rebuild_hash(self, keys: np.ndarray, vals: np.ndarray, more: int) -> None:
        """A fresh hash table (no tombstones) holding ``keys`` -> ``vals``, sized for
        ``more`` besides."""
        self._new_hash(keys.shape[0] + more)
        self._used = _insert(self._keys, self._vals, self._dense, self._home, keys, vals)

    def _new_hash(self, need: int) -> None:
        cap = 64
        while cap < 4 * max(need, 1):
            cap *= 2
        self._keys = np.zeros(cap, dtype=np.int64)
        self._vals = np.full(cap, _EMPTY, dtype=np.int64)
        self._used = 0  # live + tombstones: what probing pays for

    def _rehash(self, more: int) -> None:
        """A fresh hash table (no tombstones) for its live ids and ``more``: the hashed ids
        only (reading the direct table too cost 4 ms a rehash at 4 x 10^6 entries)."""
        self._rebuild_hash(*self._hashed(), more)
