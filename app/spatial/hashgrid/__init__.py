"""``grid``: the Bitsquid hashed grid (grid coordinates -> hash table -> linked list in an
array), made hierarchical so that objects of any size fit.

:mod:`.store` holds the state as named arrays and says how levels, cells and the table fit
together and how the cell size is chosen; :mod:`.update` links and moves objects;
:mod:`.queries` answers frustum, box, sphere and ray queries; :mod:`.check` is validate;
:mod:`.grid` is the :class:`HashedGrid` class that drives them.
"""

from app.spatial.hashgrid.grid import HashedGrid
from app.spatial.hashgrid.store import NLEVELS, TARGET_PER_CELL, choose_cell_size

__all__ = ["NLEVELS", "TARGET_PER_CELL", "HashedGrid", "choose_cell_size"]
