"""Growing a pool of slots (objects, nodes, cells, items), written once for every structure.

Every pool is a set of flat arrays indexed by slot plus a stack of free slots whose top is at
the end. Growth copies the arrays into larger ones and puts the new slots *below* the old free
ones, so that the low slots, already warm in the cache, are reused first (Box2D's node pool
does the same with its free list).
"""

from __future__ import annotations

from typing import Any

import numpy as np


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
