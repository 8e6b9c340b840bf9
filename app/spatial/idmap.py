"""Caller-chosen int64 ids -> object slots, as an open-addressing hash table in flat arrays.

Batches of ids are resolved in one compiled call, so ``update`` of 100,000 ids costs one
Python call rather than 100,000 dict look-ups.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_EMPTY = np.int64(-1)  # slot value of a never-used bucket
_TOMB = np.int64(-2)  # slot value of a deleted bucket (keeps probe chains intact)


@njit(cache=True, inline="always")
def _hash(key: np.int64, mask: np.int64) -> np.int64:
    # splitmix64 finaliser: ids are often consecutive, so they must be scattered.
    x = np.uint64(key)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return np.int64(x & np.uint64(mask))


@njit(cache=True)
def _lookup(keys: np.ndarray, vals: np.ndarray, query: np.ndarray, out: np.ndarray) -> None:
    mask = keys.shape[0] - 1
    for i in range(query.shape[0]):
        k = query[i]
        h = _hash(k, mask)
        out[i] = -1
        while True:
            v = vals[h]
            if v == -1:
                break
            if v >= 0 and keys[h] == k:
                out[i] = v
                break
            h = (h + 1) & mask


@njit(cache=True)
def _insert(keys: np.ndarray, vals: np.ndarray, new_keys: np.ndarray, new_vals: np.ndarray) -> None:
    # Callers guarantee the keys are absent, so the first free or deleted bucket is taken.
    mask = keys.shape[0] - 1
    for i in range(new_keys.shape[0]):
        k = new_keys[i]
        h = _hash(k, mask)
        while vals[h] >= 0:
            h = (h + 1) & mask
        keys[h] = k
        vals[h] = new_vals[i]


@njit(cache=True)
def _delete(keys: np.ndarray, vals: np.ndarray, del_keys: np.ndarray) -> int:
    mask = keys.shape[0] - 1
    n = 0
    for i in range(del_keys.shape[0]):
        k = del_keys[i]
        h = _hash(k, mask)
        while True:
            v = vals[h]
            if v == -1:
                break
            if v >= 0 and keys[h] == k:
                vals[h] = -2
                n += 1
                break
            h = (h + 1) & mask
    return n


class IdMap:
    """Map from int64 ids to int64 slots; all operations take whole batches."""

    def __init__(self, capacity: int = 64) -> None:
        cap = 64
        while cap < 2 * capacity:
            cap *= 2
        self._keys = np.zeros(cap, dtype=np.int64)
        self._vals = np.full(cap, _EMPTY, dtype=np.int64)
        self._count = 0
        self._used = 0  # live + tombstones: what probing pays for

    def __len__(self) -> int:
        return self._count

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Slots of ``ids``; -1 where an id is unknown."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        out = np.empty(ids.shape[0], dtype=np.int64)
        _lookup(self._keys, self._vals, ids, out)
        return out

    def insert(self, ids: np.ndarray, slots: np.ndarray) -> None:
        """Add ids known to be absent (the caller checked with ``lookup``)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        if 2 * (self._used + ids.shape[0]) > self._keys.shape[0]:
            self._rehash(self._count + ids.shape[0])
        _insert(self._keys, self._vals, ids, slots)
        self._count += ids.shape[0]
        self._used += ids.shape[0]

    def delete(self, ids: np.ndarray) -> None:
        """Remove ids known to be present."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        self._count -= _delete(self._keys, self._vals, ids)

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, slots) currently stored."""
        live = self._vals >= 0
        return self._keys[live].copy(), self._vals[live].copy()

    def _rehash(self, need: int) -> None:
        ids, slots = self.items()
        cap = 64
        while cap < 4 * max(need, 1):
            cap *= 2
        self._keys = np.zeros(cap, dtype=np.int64)
        self._vals = np.full(cap, _EMPTY, dtype=np.int64)
        _insert(self._keys, self._vals, ids, slots)
        self._used = ids.shape[0]
