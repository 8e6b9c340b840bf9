"""The chunked layout's Hilbert curve: the table-driven code (``layout.hilbert_code``) gives
Skilling's index (``layout.hilbert_code_skilling``, the reference it was derived from) for
every cell of small grids and for random cells of every grid the layout uses, and the curve
it draws is one: consecutive indices are face-adjacent cells, each cell once."""

from __future__ import annotations

import numpy as np
from numba import njit

from app.spatial.chunks.layout import CURVE_BITS, hilbert_code, hilbert_code_skilling


@njit  # not cached: it inlines layout's code, and a cache keyed on this file would keep it
def _codes(cells, bits, table_driven):
    out = np.empty(cells.shape[0], np.int64)
    for i in range(cells.shape[0]):
        x, y, z = cells[i, 0], cells[i, 1], cells[i, 2]
        out[i] = (hilbert_code(x, y, z, bits) if table_driven
                  else hilbert_code_skilling(x, y, z, bits))
    return out


def _grid(bits: int) -> np.ndarray:
    n = 1 << bits
    axes = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
    return np.stack(axes, -1).reshape(-1, 3).astype(np.int64)


def test_every_cell_of_small_grids_gets_skillings_index():
    for bits in range(1, 7):
        cells = _grid(bits)
        assert np.array_equal(_codes(cells, bits, True), _codes(cells, bits, False)), bits


def test_random_cells_of_every_grid_the_layout_uses_get_skillings_index():
    rng = np.random.default_rng(7)
    for bits in range(7, CURVE_BITS + 1):
        cells = rng.integers(0, 1 << bits, (20_000, 3)).astype(np.int64)
        assert np.array_equal(_codes(cells, bits, True), _codes(cells, bits, False)), bits


def test_the_curve_visits_every_cell_once_through_face_neighbours():
    for bits in (2, 4):
        cells = _grid(bits)
        codes = _codes(cells, bits, True)
        assert np.array_equal(np.sort(codes), np.arange(cells.shape[0]))
        path = cells[np.argsort(codes)]
        steps = np.abs(np.diff(path, axis=0)).sum(axis=1)
        assert (steps == 1).all()
