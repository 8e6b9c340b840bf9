"""The repeat check of a batch: one bit per slot (or position), set as the batch's ids are
found, so an id given twice finds its bit set.

A bit rather than an int64 stamp per slot: a shuffled batch looks its slots up in random
order, and the stamps of 10^5 slots (800 KB) missed the cache at every id, where their bits
(12.5 KB) stay in the first-level cache. The bits are all clear between batches: the pass that
sets them clears the words it touched before it returns (:func:`forget`). :func:`mark_all` and
:func:`any_marked` keep a set marked across batches instead, in a bitset of its own (the store's
last batch, asked about at each removal).
"""

from __future__ import annotations

import numpy as np
from numba import njit


def seen_bits(capacity: int) -> np.ndarray:
    """A clear bitset for slots ``0 .. capacity - 1``."""
    return np.zeros((int(capacity) + 63) // 64, dtype=np.uint64)


def fit_bits(bits: np.ndarray, capacity: int) -> np.ndarray:
    """``bits``, or a clear bitset if it cannot hold ``capacity`` slots (it is clear anyway)."""
    return bits if bits.shape[0] * 64 >= capacity else seen_bits(capacity)


@njit(cache=True, inline="always")
def first_sight(bits, p: int) -> bool:
    """Set slot p's bit; whether it was clear (p not seen before in this batch)."""
    w = p >> 6
    b = np.uint64(1) << np.uint64(p & 63)
    old = bits[w]
    bits[w] = old | b
    return (old & b) == 0


@njit(cache=True)
def forget(bits, slots, n: int) -> None:
    """Clear the words of ``slots[:n]`` (every bit a batch set lies in one of them)."""
    for i in range(n):
        bits[slots[i] >> 6] = 0


@njit(cache=True)
def has_repeat(bits, slots) -> bool:
    """Whether any slot of ``slots`` appears twice (the bits are left clear)."""
    n = slots.shape[0]
    rep = False
    for i in range(n):
        if not first_sight(bits, slots[i]):
            rep = True
            n = i + 1
            break
    forget(bits, slots, n)
    return rep


@njit(cache=True)
def mark_all(bits, slots) -> None:
    """Set the bits of ``slots`` (a set that stays marked across batches: the caller clears
    it with :func:`forget`)."""
    for i in range(slots.shape[0]):
        first_sight(bits, slots[i])


@njit(cache=True)
def any_marked(bits, slots) -> bool:
    """Whether a bit of ``slots`` is set: one load a slot, no branch."""
    hit = False
    for i in range(slots.shape[0]):
        hit |= (bits[slots[i] >> 6] >> np.uint64(slots[i] & 63)) & np.uint64(1) != 0
    return hit
