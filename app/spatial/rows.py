"""A slot's whole store row and a structure's two words about it (where the slot lies in the
structure) in one 64-byte line.

A move reads a mover's centre in the store (the old sphere, the new one written) and where
the structure keeps it (a tree's node and position, a grid's item and cell); a removal frees
the slot's id and live flag; an insert writes the slot's centre, radius, view distance, id
and flag, and the structure reads them back. Kept in arrays of their own (24-byte centre
rows, float64 radii and view distances, int64 ids, a byte of liveness, and the structure's
words), a slot is six lines; in one row on a 64-byte boundary it is one. The memory is about
the same (64 bytes a slot against 24 + 8 + 8 + 8 + 1 + 8).

The store stays the owner: its columns become views of the rows (a strided view, which every
kernel takes as it is): the centres columns 0-2, the radius 3, the view distance 4, the id
(int64) 5, the two words (int32) the two halves of 6 and the live flag the first byte of 7
(its other seven bytes spare). The store replaces its arrays when it grows and while flat
(``flat_form``: the flat copy streams plain columns), so a structure binds again on each
way back (:func:`is_bound` says whether it must).
"""

from __future__ import annotations

import numpy as np

from app.spatial.pool import aligned

#: float64 words a row: 64 bytes, one cache line.
ROW = 8


def no_rows() -> np.ndarray:
    """An empty set of rows (nothing bound yet)."""
    return aligned((0, ROW), np.float64)


def is_bound(rows: np.ndarray, columns: tuple[np.ndarray, ...], word: np.ndarray) -> bool:
    """Whether the store's ``columns`` (centres, radii, view distances, ids, live flags) and
    ``word`` are views of ``rows`` (numpy's views all name the buffer that owns the
    memory)."""
    owner = rows.base
    return (rows.shape[0] == columns[0].shape[0] and word.base is owner
            and all(a.base is owner for a in columns))


def bind(columns: tuple[np.ndarray, ...], first: np.ndarray, second: np.ndarray
         ) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    """New aligned rows holding the store's ``columns`` (centres, radii, view distances, ids,
    live flags) and the two per-slot words ``first`` and ``second`` (as int32: a node,
    position, item or cell number stays below 2^31): (rows, the columns' views, the first
    word's, the second's)."""
    centers, radii, vdist, ids, alive = columns
    rows = aligned((centers.shape[0], ROW), np.float64)
    rows[:, :3] = centers
    rows[:, 3] = radii
    rows[:, 4] = vdist
    longs = rows.view(np.int64)  # (n, 8)
    longs[:, 5] = ids
    longs[:, 6] = 0
    longs[:, 7] = 0
    words = rows.view(np.int32)  # (n, 16): word 6's halves are 12 and 13
    words[:, 12] = first
    words[:, 13] = second
    flags = rows.view(np.bool_)  # (n, 64): byte 56 starts word 7
    flags[:, 56] = alive
    return (rows, (rows[:, :3], rows[:, 3], rows[:, 4], longs[:, 5], flags[:, 56]),
            words[:, 12], words[:, 13])
