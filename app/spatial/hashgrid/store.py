"""State of the hashed grid as named arrays, pool growth, cell keys and the hash table.

Structure
---------
* **Levels** (:class:`Levels`). Level ``L`` is a uniform grid of cubes of side
  ``cell_size * 2**L``. An object lives in exactly one cell: the cell of its *center* at the
  smallest level whose cell side is at least its diameter (``2r <= cell_size * 2**L``; the top
  level takes whatever is larger). Queries therefore expand each cell by the largest radius
  stored at its level (``rmax``, kept conservatively), which is at most half a cell except at
  the top level.
* **Cells** (:class:`Cells`) are a pool of records in flat arrays (key = level and integer
  coordinates, head of the item list, item count, view-distance bounds) with a free stack.
  The items of a cell form a doubly linked list threaded through per-item ``next``/``prev``
  arrays (:class:`Items`), so moving an object between cells is O(1).
* **Hash table** (:class:`Table`). Open addressing with linear probing over (level, ix, iy, iz)
  keys, values are cell indices; empty cells are deleted (tombstones) and the table is rebuilt
  when live entries plus tombstones pass half of it.

Cell size
---------
``cell_size=None`` picks the finest side from the first inserted batch (see
:func:`choose_cell_size`): the side of a cube holding about ``TARGET_PER_CELL`` objects at the
batch's mean density, but never less than the median diameter. The Bitsquid note's table says
why: the number of cells a query must look at falls only slowly as cells grow past the search
diameter while the items per cell grow with the cube of the side. A frustum is huge compared
to any object, so here the "search" is dominated by the number of cells visited (a hash probe,
a plane test and a jump to another run of memory each, ~0.5 us) against ~10 ns per object
tested. Measured on the 1M-object benchmark (1000-unit cube, far 300): 12-unit cells 10.7 ms,
20: 3.9 ms, 28: 2.2 ms, 40: 1.4 ms, 56: 1.1 ms, 80: 1.3 ms, 120: 1.8 ms per frustum query. So
the default aims at ~100 objects per cell (46-unit cells there), far coarser than the note's
"cell = search diameter", which is right for small neighbourhood queries only.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from app.geom.hashing import mix64
from app.spatial.pool import grown, grown_free_stack

NLEVELS = 48  # cell sides cell_size * 2**0 .. 2**47: any radius a finite scene needs
LIM = 1 << 40  # grid coordinates are clamped to [-LIM, LIM]; such cells are unbounded
TARGET_PER_CELL = 100.0  # objects per cell aimed at by the default cell size (measured)
REL = 1e-10  # relative margin added to every cell box so rounding never loses an object

# Hash table values.
EMPTY = -1
TOMB = -2

# Scalar state shared with the kernels (Grid.meta), in one int64 array so they can update it.
ST_HW = 0  # cell high-water mark: cells >= HW were never used since the last compaction
ST_NFREE = 1  # entries on the cell free stack
ST_LIVE = 2  # live (non-empty) cells
ST_USED = 3  # hash buckets live or tombstoned (what probing pays for)
ST_NDIRTY = 4  # cells whose view-distance bounds may be loose
ST_IHW = 5  # item high-water mark
ST_INFREE = 6  # entries on the item free stack
ST_RELINKS = 7  # items freed since the last compaction (each costs locality)
ST_SIZE = 8


class Cells(NamedTuple):
    """The cell pool, one row per cell; a cell is live while its item count is > 0."""

    key: np.ndarray  # (C, 4) int64: level, ix, iy, iz
    head: np.ndarray  # first item of the cell's list, -1 when empty
    count: np.ndarray  # items in the list
    vdmax: np.ndarray  # bounds of the items' view distances (loose while dirty)
    vdmin: np.ndarray
    dirty: np.ndarray  # bool: on dirty_list, bounds to be recomputed before a vd query
    pos: np.ndarray  # the cell's bucket in the hash table
    free: np.ndarray  # free stack of cell indices (top at ST_NFREE)
    dirty_list: np.ndarray  # cells whose bounds may be loose (ST_NDIRTY of them)
    outcome: np.ndarray  # int8 NODE_* outcome in the last frustum query
    stamp: np.ndarray  # last ray query that visited the cell (each cell is tested once)


class Table(NamedTuple):
    """Open-addressing hash table: key (level, ix, iy, iz) -> cell, EMPTY or TOMB."""

    key: np.ndarray  # (H, 4) int64
    val: np.ndarray  # (H,) int64, H a power of two


class Levels(NamedTuple):
    """Per-level sizes and bounds (only ever grow between rebuilds of the table)."""

    size: np.ndarray  # cell side of each level
    count: np.ndarray  # objects stored at the level
    cells: np.ndarray  # live cells of the level
    rmax: np.ndarray  # >= every radius stored at the level (what queries grow cells by)
    ext: np.ndarray  # (NLEVELS, 6) int64: range of the live cells' coordinates, lo then hi


class Grid(NamedTuple):
    """Everything about cells: the pool, the table, the levels and the scalar counters."""

    cells: Cells
    table: Table
    levels: Levels
    meta: np.ndarray  # int64 ST_* counters


class Items(NamedTuple):
    """Bitsquid's items array: each object's center, radius, view distance and id copied next
    to its list links, so that walking a cell reads one contiguous run of memory once the
    items are compacted in cell order (the frustum writes ids: no gather through the store)."""

    cen: np.ndarray  # (M, 3)
    rad: np.ndarray
    vd: np.ndarray
    ident: np.ndarray  # the object's id
    slot: np.ndarray  # the object's slot in the store
    next: np.ndarray
    prev: np.ndarray
    free: np.ndarray  # free stack of items (top at ST_INFREE)


class Objects(NamedTuple):
    """Per store slot: its item and its cell (-1 when not linked)."""

    item: np.ndarray
    cell: np.ndarray


class Spheres(NamedTuple):
    """The store's arrays the kernels read (the base class owns them)."""

    centers: np.ndarray
    radii: np.ndarray
    vdist: np.ndarray
    ids: np.ndarray


# ---------------------------------------------------------------------------- kernel boundary
#
# numba's dispatcher types and unboxes the arrays of a named tuple about twice as slowly as
# those of a plain tuple (a Grid and its Items: ~7 against ~3 us per call, measured). The
# kernels run once per operation (insert, update, remove, queries) therefore take the
# bundles as plain tuples and name them again on entry, which costs nothing inside.


def grid_args(g: Grid) -> tuple:
    """``g`` as plain nested tuples, for a kernel's entry (:func:`as_grid` names it again)."""
    return (tuple(g.cells), tuple(g.table), tuple(g.levels), g.meta)


@njit(cache=True, inline="always")
def as_grid(t):
    """The :class:`Grid` of :func:`grid_args`' tuples (the same arrays)."""
    return Grid(Cells(*t[0]), Table(*t[1]), Levels(*t[2]), t[3])


# ---------------------------------------------------------------------------- pools (numpy)


def level_sizes(cell_size: float) -> np.ndarray:
    """Cell side of every level; powers of two keep every level's side exact in floats."""
    return cell_size * np.ldexp(1.0, np.arange(NLEVELS))


def new_cells(cap: int) -> Cells:
    """An empty pool of ``cap`` cells, all on the free stack (lowest popped first)."""
    return Cells(
        key=np.zeros((cap, 4), dtype=np.int64),
        head=np.full(cap, -1, dtype=np.int64),
        count=np.zeros(cap, dtype=np.int64),
        vdmax=np.full(cap, -np.inf),
        vdmin=np.full(cap, np.inf),
        dirty=np.zeros(cap, dtype=np.bool_),
        pos=np.full(cap, -1, dtype=np.int64),
        free=np.arange(cap - 1, -1, -1, dtype=np.int64),
        dirty_list=np.zeros(cap, dtype=np.int64),
        outcome=np.zeros(cap, dtype=np.int8),
        stamp=np.zeros(cap, dtype=np.int64),
    )


_CELL_FILL = {"key": 0, "head": -1, "count": 0, "vdmax": -np.inf, "vdmin": np.inf,
              "dirty": False, "pos": -1, "dirty_list": 0, "outcome": 0, "stamp": 0}


def grow_cells(g: Grid, cap: int) -> Grid:
    """``g`` with a cell pool of ``cap`` cells; the new ones go below the old free ones."""
    c = g.cells
    old = c.key.shape[0]
    free, nfree = grown_free_stack(c.free, int(g.meta[ST_NFREE]), old, cap)
    g.meta[ST_NFREE] = nfree
    fresh = {name: grown(getattr(c, name), cap, fill) for name, fill in _CELL_FILL.items()}
    return g._replace(cells=Cells(free=free, **fresh))


def new_table(cap: int) -> Table:
    """An empty hash table of ``cap`` buckets (a power of two)."""
    return Table(key=np.zeros((cap, 4), dtype=np.int64),
                 val=np.full(cap, EMPTY, dtype=np.int64))


def new_levels(cell_size: float) -> Levels:
    """Empty levels under a finest cell side."""
    ext = np.empty((NLEVELS, 6), dtype=np.int64)
    ext[:, :3] = LIM + 1
    ext[:, 3:] = -LIM - 1
    return Levels(size=level_sizes(cell_size), count=np.zeros(NLEVELS, dtype=np.int64),
                  cells=np.zeros(NLEVELS, dtype=np.int64), rmax=np.zeros(NLEVELS), ext=ext)


def new_grid(cell_size: float, cells: int, buckets: int) -> Grid:
    """No cells yet: pools and table of the given sizes."""
    meta = np.zeros(ST_SIZE, dtype=np.int64)
    meta[ST_NFREE] = cells
    return Grid(cells=new_cells(cells), table=new_table(buckets), levels=new_levels(cell_size),
                meta=meta)


def new_items(cap: int) -> Items:
    """An empty item pool of ``cap`` items, all on the free stack (lowest popped first)."""
    return Items(cen=np.zeros((cap, 3)), rad=np.zeros(cap), vd=np.zeros(cap),
                 ident=np.full(cap, -1, dtype=np.int64),
                 slot=np.full(cap, -1, dtype=np.int64), next=np.full(cap, -1, dtype=np.int64),
                 prev=np.full(cap, -1, dtype=np.int64),
                 free=np.arange(cap - 1, -1, -1, dtype=np.int64))


def grow_items(items: Items, meta: np.ndarray, cap: int) -> Items:
    """``items`` with room for ``cap``; the new ones go below the old free ones."""
    old = items.cen.shape[0]
    free, nfree = grown_free_stack(items.free, int(meta[ST_INFREE]), old, cap)
    meta[ST_INFREE] = nfree
    return Items(cen=grown(items.cen, cap, 0.0), rad=grown(items.rad, cap, 0.0),
                 vd=grown(items.vd, cap, 0.0), ident=grown(items.ident, cap, -1),
                 slot=grown(items.slot, cap, -1),
                 next=grown(items.next, cap, -1), prev=grown(items.prev, cap, -1), free=free)


def new_objects(cap: int) -> Objects:
    """Per-slot links of ``cap`` slots, none linked."""
    return Objects(item=np.full(cap, -1, dtype=np.int64), cell=np.full(cap, -1, dtype=np.int64))


def grow_objects(objs: Objects, cap: int) -> Objects:
    """``objs`` with room for ``cap`` slots."""
    return Objects(item=grown(objs.item, cap, -1), cell=grown(objs.cell, cap, -1))


def choose_cell_size(centers: np.ndarray, radii: np.ndarray) -> float:
    """Default finest cell side for a batch: ~TARGET_PER_CELL objects per cell, >= median diameter.

    The density is taken inside the 1st-99th percentile box of the centers (outliers do not
    dilute it), each side at least one median diameter (flat or linear data keep a thickness).
    """
    n = centers.shape[0]
    if n == 0:
        return 1.0
    step = max(1, n // 100_000)  # a sample is plenty for percentiles and a median
    c = centers[::step]
    diam = float(np.median(radii[::step])) * 2.0
    lo = np.percentile(c, 1.0, axis=0)
    hi = np.percentile(c, 99.0, axis=0)
    side = np.maximum(hi - lo, diam)
    inside = n * 0.98 if n >= 100 else n
    if float(side.min()) > 0.0:
        dense = float(np.cbrt(np.prod(side) * TARGET_PER_CELL / inside))
    else:
        dense = float(side.max())  # all centers on a point (and zero radii): one cell
    size = max(dense, diam)
    if not np.isfinite(size) or size <= 0.0:
        size = 1.0
    return size


# ---------------------------------------------------------------------------- keys


@njit(cache=True, inline="always")
def cell_hash(lvl, ix, iy, iz, mask):
    """Bucket of a cell key; neighbouring cells must land far apart (hence mix64)."""
    x = np.uint64(ix) * np.uint64(0x9E3779B97F4A7C15)
    x ^= np.uint64(iy) * np.uint64(0xC2B2AE3D27D4EB4F)
    x ^= np.uint64(iz) * np.uint64(0x165667B19E3779F9)
    x ^= np.uint64(lvl) * np.uint64(0x27D4EB2F165667C5)
    return np.int64(mix64(x) & np.uint64(mask))


@njit(cache=True, inline="always")
def level_of(r, sizes):
    """Smallest level whose cell side is at least the diameter (the top level otherwise)."""
    d = 2.0 * r
    lvl = 0
    top = sizes.shape[0] - 1
    while lvl < top and d > sizes[lvl]:
        lvl += 1
    return lvl


@njit(cache=True, inline="always")
def coord(x, size):
    """Grid coordinate of ``x``, clamped so that it fits an int64 (LIM cells are unbounded).

    Clamped before the conversion: past 2**63 cells math.floor's int64 wraps to the most
    negative value (1e300 / 1 landed in cell -LIM)."""
    q = x / size
    if q >= LIM:
        return np.int64(LIM)
    if q <= -LIM:
        return np.int64(-LIM)
    return np.int64(math.floor(q))


@njit(cache=True, inline="always")
def margin(ix, iy, iz, size, rmax):
    """Slack of a cell box: rounding of a dot product is ~1e-16 of the coordinates involved;
    REL = 1e-10 of them is ample."""
    m = max(abs(ix), abs(iy), abs(iz)) + 2
    return REL * (m * size + rmax)


@njit(cache=True, inline="always")
def bounded(ix, iy, iz):
    """False for cells at the clamped coordinates (their boxes are unbounded)."""
    return abs(ix) < LIM and abs(iy) < LIM and abs(iz) < LIM


@njit(cache=True, inline="always")
def block_box(i0, j0, k0, i1, j1, k1, size, grow, lo, hi):
    """Box of the centers of cells [i0..i1]x[j0..j1]x[k0..k1], grown by ``grow`` + margin."""
    m = margin(max(abs(i0), abs(i1)), max(abs(j0), abs(j1)), max(abs(k0), abs(k1)),
               size, grow)
    lo[0] = i0 * size - grow - m
    lo[1] = j0 * size - grow - m
    lo[2] = k0 * size - grow - m
    hi[0] = (i1 + 1) * size + grow + m
    hi[1] = (j1 + 1) * size + grow + m
    hi[2] = (k1 + 1) * size + grow + m


# ---------------------------------------------------------------------------- pools, table


@njit(cache=True, inline="always")
def allocate(meta, free, nfree, hw):
    """Pop a pool index off its free stack (``meta[nfree]`` entries) and raise the high-water
    mark ``meta[hw]`` past it; the caller made sure the stack is not empty. Cells and items
    share this rule."""
    n = meta[nfree] - 1
    meta[nfree] = n
    i = free[n]
    if i >= meta[hw]:
        meta[hw] = i + 1
    return i


# The per-probe and per-link helpers below take the named bundles; they allocate nothing, so
# they are compiled without reference counting (``_nrt=False``): a compiled call otherwise
# increfs and decrefs every array of every bundle it is given (19 for a Grid), which made
# relinking a moved object 0.3 us slower and every probe of a frustum walk dearer.


@njit(cache=True, _nrt=False)
def probe(table, lvl, ix, iy, iz):
    """Cell index of a key, or -1."""
    hkey = table.key
    hval = table.val
    mask = hval.shape[0] - 1
    h = cell_hash(lvl, ix, iy, iz, mask)
    while True:
        v = hval[h]
        if v == EMPTY:
            return -1
        if v >= 0 and hkey[h, 1] == ix and hkey[h, 2] == iy and hkey[h, 3] == iz \
                and hkey[h, 0] == lvl:
            return v
        h = (h + 1) & mask


@njit(cache=True, _nrt=False)
def find_or_add(g, lvl, ix, iy, iz):
    """Cell of a key, creating an empty one (pool + table) when absent."""
    hkey = g.table.key
    hval = g.table.val
    meta = g.meta
    mask = hval.shape[0] - 1
    h = cell_hash(lvl, ix, iy, iz, mask)
    tomb = -1
    while True:
        v = hval[h]
        if v == EMPTY:
            break
        if v == TOMB:
            if tomb < 0:
                tomb = h
        elif hkey[h, 1] == ix and hkey[h, 2] == iy and hkey[h, 3] == iz and hkey[h, 0] == lvl:
            return v
        h = (h + 1) & mask
    if tomb >= 0:
        h = tomb
    else:
        meta[ST_USED] += 1
    cells = g.cells
    c = allocate(meta, cells.free, ST_NFREE, ST_HW)
    hkey[h, 0] = lvl
    hkey[h, 1] = ix
    hkey[h, 2] = iy
    hkey[h, 3] = iz
    hval[h] = c
    cells.pos[c] = h
    cells.key[c, 0] = lvl
    cells.key[c, 1] = ix
    cells.key[c, 2] = iy
    cells.key[c, 3] = iz
    cells.head[c] = -1
    cells.count[c] = 0
    cells.vdmax[c] = -np.inf
    cells.vdmin[c] = np.inf
    cells.outcome[c] = 0
    meta[ST_LIVE] += 1
    lv = g.levels
    lv.cells[lvl] += 1
    ext = lv.ext
    ext[lvl, 0] = min(ext[lvl, 0], ix)
    ext[lvl, 1] = min(ext[lvl, 1], iy)
    ext[lvl, 2] = min(ext[lvl, 2], iz)
    ext[lvl, 3] = max(ext[lvl, 3], ix)
    ext[lvl, 4] = max(ext[lvl, 4], iy)
    ext[lvl, 5] = max(ext[lvl, 5], iz)
    return c


@njit(cache=True)
def fill_table(cells, hw, table):
    """Insert every live cell below ``hw`` into a fresh (empty) table; returns buckets used."""
    ckey = cells.key
    hkey = table.key
    hval = table.val
    mask = hval.shape[0] - 1
    n = 0
    for c in range(hw):
        if cells.count[c] <= 0:
            continue
        h = cell_hash(ckey[c, 0], ckey[c, 1], ckey[c, 2], ckey[c, 3], mask)
        while hval[h] != EMPTY:
            h = (h + 1) & mask
        hkey[h, 0] = ckey[c, 0]
        hkey[h, 1] = ckey[c, 1]
        hkey[h, 2] = ckey[c, 2]
        hkey[h, 3] = ckey[c, 3]
        hval[h] = c
        cells.pos[c] = h
        n += 1
    return n
