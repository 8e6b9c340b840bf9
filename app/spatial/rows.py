"""A slot's centre and a structure's two words about it (where the slot lies in the
structure) in one 32-byte row.

A move reads a mover's centre in the store (the old sphere, the new one written) and where
the structure keeps it (a tree's node and position, a grid's item and cell). Kept apart, the
store's 24-byte centre rows (a quarter of them across two cache lines) and an array of the
structure's own, a fresh mover reads three or four lines before the structure's record; in
one row on a 32-byte boundary it reads one. The memory is the same (24 + 8 bytes a slot).

The store stays the owner: its centres become the rows' first three columns (a strided view,
which every kernel takes as it is) and the structure's words views of the last eight bytes
as two int32. The store replaces its centre array when it grows and while flat
(``flat_form``: whole-scene moves swap in a plain twin), so a structure binds again on each
way back (:func:`is_bound` says whether it must).
"""

from __future__ import annotations

import numpy as np

from app.spatial.pool import aligned


def no_rows() -> np.ndarray:
    """An empty set of rows (nothing bound yet)."""
    return aligned((0, 4), np.float64)


def is_bound(rows: np.ndarray, centers: np.ndarray, word: np.ndarray) -> bool:
    """Whether ``centers`` and ``word`` are views of ``rows`` (numpy's views all name the
    buffer that owns the memory)."""
    owner = rows.base
    return (rows.shape[0] == centers.shape[0] and centers.base is owner
            and word.base is owner)


def bind(centers: np.ndarray, first: np.ndarray,
         second: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """New aligned rows holding ``centers`` and the two per-slot words ``first`` and
    ``second`` (as int32: a node, position, item or cell number stays below 2^31): (rows,
    the centres' view, the first word's, the second's)."""
    rows = aligned((centers.shape[0], 4), np.float64)
    rows[:, :3] = centers
    words = rows.view(np.int32)  # (n, 8): a row's last eight bytes are words 6 and 7
    words[:, 6] = first
    words[:, 7] = second
    return rows, rows[:, :3], words[:, 6], words[:, 7]
