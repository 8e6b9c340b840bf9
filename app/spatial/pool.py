"""Growing a pool of slots (objects, nodes, cells, items), written once for every structure.

Every pool is a set of flat arrays indexed by slot plus a stack of free slots whose top is at
the end. Growth copies the arrays into larger ones and puts the new slots *below* the old free
ones, so that the low slots, already warm in the cache, are reused first (Box2D's node pool
does the same with its free list).
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np
from numba import njit


@njit(cache=True)
def slots_end(slots) -> int:
    """One past the largest of a batch of slots (0 for none): the rows a flat copy must cover
    after an insert (numpy's ``max`` cost 1.8 us a call on a frame's spawns, this 0.4)."""
    top = -1
    for i in range(slots.shape[0]):
        top = max(top, slots[i])
    return top + 1


def grown(a: np.ndarray, capacity: int, fill: Any) -> np.ndarray:
    """``a`` copied into a new array of ``capacity`` rows, the new rows set to ``fill``, or
    left as they come (untouched memory: no page faults until used) when ``fill`` is None."""
    shape = (capacity,) + a.shape[1:]
    out = np.empty(shape, dtype=a.dtype) if fill is None else np.full(shape, fill, a.dtype)
    out[: a.shape[0]] = a
    return out


def grown_free_stack(free: np.ndarray, nfree: int, old: int,
                     capacity: int) -> tuple[np.ndarray, int]:
    """The free stack after growing a pool from ``old`` to ``capacity`` slots: (stack, size).

    The new slots ``old .. capacity-1`` go below the ``nfree`` existing free slots (popped
    last), in descending order so that they are popped lowest first.
    """
    out = np.empty(capacity, dtype=np.int64)
    extra = np.arange(capacity - 1, old - 1, -1, dtype=np.int64)
    out[: extra.shape[0]] = extra
    out[extra.shape[0] : extra.shape[0] + nfree] = free[:nfree]
    return out, nfree + extra.shape[0]


def aligned(shape: tuple[int, ...], dtype: np.dtype | type, to: int = 64) -> np.ndarray:
    """An uninitialised C array whose first byte lies on a ``to``-byte boundary (its
    ``base`` the padded buffer it views). A large array from numpy starts 16 bytes past a
    page (malloc's header): 64-byte rows of it would straddle two cache lines each."""
    count = int(np.prod(shape, dtype=np.int64))
    size = np.dtype(dtype).itemsize
    buf = np.empty(count * size + to, np.uint8)
    skip = -buf.ctypes.data % to
    return buf[skip: skip + count * size].view(dtype).reshape(shape)


def reserved(shape: tuple[int, ...], dtype: np.dtype | type, head: int) -> np.ndarray:
    """An uninitialised array over anonymous memory, mapped only as it is written: its first
    ``head`` rows in huge pages where the system gives them (the part in use at once), the
    rest in small pages (room to grow into). numpy asks for huge pages for any large array,
    and on this machine the first write into a 2 MB huge page stalled 0.2-4.7 ms, where a
    small page faults in a few microseconds."""
    row = int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(dtype).itemsize
    nbytes = max(shape[0] * row, 1)
    # Private: shared anonymous memory is shmem, which takes huge pages only by the shmem
    # setting ("never" here), whatever the advice.
    buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    split = -(-head * row // mmap.PAGESIZE) * mmap.PAGESIZE
    if split > 0:
        buf.madvise(mmap.MADV_HUGEPAGE, 0, min(split, nbytes))
    if split < nbytes:
        buf.madvise(mmap.MADV_NOHUGEPAGE, split, nbytes - split)
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape)
