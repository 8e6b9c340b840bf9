"""The chunked layout's storage: objects in curve order, 64 to a chunk, a tree of boxes on top.

Objects live at *positions*: position ``p`` is lane ``p % CHUNK`` of chunk ``p // CHUNK``. The
float32 copy the scan reads (``Spheres32``) is in position order, so a chunk is 64 consecutive
floats per field: the branch-free verdict loop runs over it as over any brute-force range,
and a chunk (or a whole subtree) inside the view copies a range of positions. Positions are
handed out in Hilbert-curve order of the centres when objects are inserted or the layout is rebuilt,
so consecutive chunks are near each other in space and their boxes are small.

The tree is implicit: level 0 is the chunks, a node of level L+1 covers FANOUT consecutive
nodes of level L, up to one root level of at most FANOUT nodes. All levels lie back to back
in flat arrays (``Tree``), level L at ``loff[L] .. loff[L+1]-1``. No pointers: a node's
children and its range of positions follow from its index (Frostbite's and Unity DOTS'
"brute force done right", with bounds per chunk and per group of chunks).

A box holds every live sphere below its node, padded for the float32 rounding of the copy the
boxes are computed from (:func:`pad_for`); boxes may be loose (removals never shrink them, moves
of a few objects only grow them) and are made tight again by :func:`refit_chunks`.

Each chunk also has a *limit* (``Tree.limit``, Box2D's fat box turned round): its box as last
laid out (:func:`refit_chunks`), widened by :data:`SLACK` of its largest edge. A still object
that moves within its chunk's limit is written where it is and its chunk's box grown to cover
it (``update.write_settle``), or a new object placed in a hole of the chunk around it
(``spawn.place_in_holes``); the limit bounds how far boxes may swell between re-sorts, and
the nodes above a chunk hold its limit (:func:`refit_upper`), so none of that writes above it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from app.spatial.scan import F32_BIG, Spheres32

CHUNK = 64  # objects a chunk: one verdict loop of 64 lanes, four AVX-512 vectors per field
FANOUT = 16  # children of a tree node: a node test saves 16 below it
NO_POS = -1  # position or slot of nothing


class Tree(NamedTuple):
    """The boxes over the chunks, every level back to back (level 0 = the chunks).

    Field-major (a row per field, a column per node): a node's children are consecutive
    columns, so one straight loop tests all 16 of them at once (see ``queries``).
    """

    box: np.ndarray  # (8, K) float64 rows: lo x y z, hi x y z, max view distance, min v. d.
    count: np.ndarray  # (K,) live objects below
    outcome: np.ndarray  # (K,) int8 NODE_* of the last frustum query
    loff: np.ndarray  # (levels + 1,) where each level starts
    span: np.ndarray  # (levels,) chunks under one node of each level (FANOUT ** L)
    limit: np.ndarray  # (chunks, 16) chunk-major: columns 0-7 how far a chunk's box may
    #                    grow (rows as ``box``), 8-15 (COPY + row) a copy of its box


# Rows of Tree.box.
LO = 0
HI = 3
MAXVD = 6
MINVD = 7
#: Where ``Tree.limit`` keeps a chunk's box copy: the test of a move against its chunk then
#: reads one or two cache lines instead of the eight rows of the field-major box.
COPY = 8
EMPTY_BOX = np.array([np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf])


def new_tree(nchunks: int) -> Tree:
    """An empty tree over ``nchunks`` chunks (all boxes empty)."""
    sizes = [max(int(nchunks), 1)]
    while sizes[-1] > FANOUT:
        sizes.append((sizes[-1] + FANOUT - 1) // FANOUT)
    loff = np.zeros(len(sizes) + 1, dtype=np.int64)
    loff[1:] = np.cumsum(sizes)
    k = int(loff[-1])
    return Tree(
        box=np.ascontiguousarray(np.tile(EMPTY_BOX[:, None], (1, k))),
        count=np.zeros(k, dtype=np.int64),
        outcome=np.zeros(k, dtype=np.int8), loff=loff,
        span=FANOUT ** np.arange(len(sizes), dtype=np.int64),
        limit=np.tile(EMPTY_BOX[None, :], (sizes[0], 2)),
    )


#: Padding of a box edge, in units of the largest coordinate plus radius: eight float32
#: roundings, so that a box computed from the float32 copy holds the float64 spheres.
PAD_ULPS = 8.0 * 2.0 ** -24


def pad_for(max_abs: float, max_r: float) -> float:
    """Padding that makes a box computed from the float32 copy hold the float64 spheres."""
    return PAD_ULPS * (max_abs + max_r) + 1e-30


def curve_order(centers: np.ndarray, parallel: bool = False) -> np.ndarray:
    """Indices that sort ``centers`` along a Hilbert curve through their bounding box (the
    codes on both cores when ``parallel``: a build or a re-sort, under ``threads_for``).

    A Hilbert curve, not a Z-order (Morton) one: consecutive cells of a Hilbert curve always
    touch, so any run of consecutive positions (a chunk, a group of chunks) is one compact
    region. Z-order jumps across the box at every major bit, and a group of chunks that
    straddles such a jump has a box spanning both sides (measured on 10^6 uniform spheres,
    camera at the centre, far 30: 1,010 nodes visited with Z-order).
    """
    if centers.shape[0] < 2:
        return np.arange(centers.shape[0], dtype=np.int64)
    bits = curve_bits(centers.shape[0])
    lo, scale = curve_frame(centers, bits)
    codes = (frame_codes_parallel if parallel else frame_codes)(centers, lo, scale, bits)
    # numpy's default sort, not a stable one: objects of one curve cell may go in any order,
    # and the stable sort of int64 took 5.6x as long (10^4 codes: 464 us against 83 us, the
    # largest part of waking 10^4 movers at once)
    return np.argsort(codes)


def curve_bits(n: int) -> int:
    """Bits per axis of the curve's grid for ``n`` points: about 2^12 cells a point, far finer
    than any chunk (a code costs in proportion to its bits; :data:`CURVE_BITS` at most)."""
    return min(CURVE_BITS, max(4, -(-int(n).bit_length() // 3) + 4))


@njit(cache=True)
def curve_frame(centers: np.ndarray, bits: int):
    """The grid of the curve over the centres' bounding box: (its low corner, cells per unit
    along each axis)."""
    n = centers.shape[0]
    lo = np.empty(3)
    scale = np.empty(3)
    top = (1 << bits) - 1
    for a in range(3):
        mn = centers[0, a]
        mx = centers[0, a]
        for i in range(1, n):
            mn = min(mn, centers[i, a])
            mx = max(mx, centers[i, a])
        lo[a] = mn
        scale[a] = top / max(mx - mn, 1e-300)
    return lo, scale


@njit(cache=True, inline="always")
def _cell(v: float, lo: float, scale: float, top: int) -> int:
    """A coordinate's cell on one axis of the grid; outside it, the nearest cell."""
    t = (v - lo) * scale
    return 0 if not t > 0.0 else min(np.int64(min(t, 9e18)), top)


@njit(cache=True, inline="always")
def _code_of(centers: np.ndarray, i: int, lo, scale, bits: int) -> int:
    """Hilbert index of centre ``i`` on the grid (outside it: the nearest cell)."""
    top = (1 << bits) - 1
    return hilbert_code(_cell(centers[i, 0], lo[0], scale[0], top),
                        _cell(centers[i, 1], lo[1], scale[1], top),
                        _cell(centers[i, 2], lo[2], scale[2], top), bits)


@njit(cache=True)
def frame_codes(centers: np.ndarray, lo, scale, bits: int) -> np.ndarray:
    """Hilbert index of each centre on a given grid (:func:`curve_frame`)."""
    out = np.empty(centers.shape[0], dtype=np.int64)
    for i in range(centers.shape[0]):
        out[i] = _code_of(centers, i, lo, scale, bits)
    return out


@njit(cache=True, parallel=True)
def frame_codes_parallel(centers: np.ndarray, lo, scale, bits: int) -> np.ndarray:
    """:func:`frame_codes` on every core (a build's or a re-sort's million codes)."""
    out = np.empty(centers.shape[0], dtype=np.int64)
    for i in prange(centers.shape[0]):
        out[i] = _code_of(centers, i, lo, scale, bits)
    return out


@njit(cache=True, parallel=True)
def centers_of(centers: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``centers[rows]`` on every core: a re-sort gathers a million rows scattered over the
    store (numpy's fancy index, one core: 20-40 ms at 10^6)."""
    out = np.empty((rows.shape[0], 3))
    for i in prange(rows.shape[0]):
        r = rows[i]
        out[i, 0] = centers[r, 0]
        out[i, 1] = centers[r, 1]
        out[i, 2] = centers[r, 2]
    return out


#: Bits per axis of the curve's grid (2^36 cells: far finer than any chunk).
CURVE_BITS = 12


#: The curve :func:`hilbert_code_skilling` draws, as a state machine: a cube of the curve is
#: in one of 24 orientations (a state, a row here), and its octant o (bit 2: x0, bit 1: x1,
#: bit 0: x2 of the level's coordinate bits) is the digit ``HILBERT_STEPS[8 * state + o] & 7``
#: of the index, the octant's own orientation ``HILBERT_STEPS[8 * state + o] >> 3``; the
#: whole cube is in state 0 whatever the bits. Derived from Skilling's transform by reading
#: each sub-cube's ordering of its 64 grandchildren (``tests/test_hilbert.py`` derives it
#: again and compares every code): one table look-up a level in place of Skilling's three
#: data-dependent branches, whose mispredictions made a code 37 ns (10^4 codes at 9 bits:
#: 0.37 -> 0.14 ms).
HILBERT_STEPS = np.array([
    8, 17, 27, 2, 39, 46, 52, 5,
    56, 71, 73, 86, 123, 20, 10, 13,
    48, 1, 95, 102, 131, 18, 12, 21,
    110, 113, 29, 26, 79, 80, 140, 3,
    148, 43, 37, 34, 111, 112, 78, 81,
    156, 45, 35, 42, 31, 6, 160, 97,
    72, 87, 139, 4, 57, 70, 50, 53,
    0, 171, 103, 76, 49, 58, 94, 61,
    180, 143, 83, 184, 69, 54, 66, 89,
    16, 107, 9, 74, 47, 60, 38, 77,
    116, 127, 85, 14, 67, 144, 82, 33,
    188, 99, 175, 176, 93, 90, 62, 65,
    164, 101, 135, 22, 91, 98, 152, 41,
    30, 109, 161, 106, 7, 172, 96, 75,
    114, 25, 117, 166, 179, 136, 84, 191,
    142, 55, 185, 88, 125, 132, 122, 11,
    174, 177, 63, 64, 133, 130, 124, 19,
    126, 15, 141, 28, 145, 32, 138, 51,
    146, 155, 149, 36, 137, 24, 190, 167,
    154, 157, 147, 44, 169, 182, 104, 119,
    162, 165, 105, 118, 187, 100, 168, 183,
    134, 173, 23, 108, 153, 170, 40, 59,
    178, 129, 115, 120, 181, 158, 68, 151,
    186, 163, 121, 128, 189, 92, 150, 159,
], dtype=np.int64)


@njit(cache=True, inline="always")
def hilbert_code(x0: int, x1: int, x2: int, bits: int) -> int:
    """Hilbert index of the non-negative ``bits``-bit integer coordinates (x0, x1, x2): the
    index :func:`hilbert_code_skilling` gives, a level at a time from the top through
    :data:`HILBERT_STEPS`."""
    state = np.int64(0)
    code = np.int64(0)
    for bit in range(bits - 1, -1, -1):
        octant = (((x0 >> bit) & 1) << 2) | (((x1 >> bit) & 1) << 1) | ((x2 >> bit) & 1)
        step = HILBERT_STEPS[8 * state + octant]
        code = (code << 3) | (step & 7)
        state = step >> 3
    return code


@njit(cache=True)
def hilbert_code_skilling(x0: int, x1: int, x2: int, bits: int) -> int:
    """Hilbert index of the non-negative ``bits``-bit integer coordinates (x0, x1, x2), by
    Skilling's transform: the reference :data:`HILBERT_STEPS` was derived from and is tested
    against (``tests/test_hilbert.py``).

    Skilling's method ("Programming the Hilbert curve", 2004): undo the excess work of the
    Gray code axis by axis, Gray-encode, then read the transposed bits as one index. The three
    axes are held in scalars (an array of three made every code cost 4x as much), and the
    tests stay branches (branch-free masks made a code 2.4x as long: 0.78 against 0.32 ms for
    10^4 codes).
    """
    top = np.int64(1) << (bits - 1)
    b = top
    while b > 1:
        low = b - 1
        if x0 & b:  # (axis 0 against itself: no swap)
            x0 ^= low
        if x1 & b:
            x0 ^= low
        else:
            t = (x0 ^ x1) & low
            x0 ^= t
            x1 ^= t
        if x2 & b:
            x0 ^= low
        else:
            t = (x0 ^ x2) & low
            x0 ^= t
            x2 ^= t
        b >>= 1
    x1 ^= x0
    x2 ^= x1
    t = np.int64(0)
    b = top
    while b > 1:
        if x2 & b:
            t ^= b - 1
        b >>= 1
    x0 ^= t
    x1 ^= t
    x2 ^= t
    code = np.int64(0)
    for bit in range(bits - 1, -1, -1):
        code = (code << 3) | (((x0 >> bit) & 1) << 2) | (((x1 >> bit) & 1) << 1) | (
            (x2 >> bit) & 1)
    return code


#: Chunks from which a refit runs on every core (below, waking the workers costs more).
PARALLEL_CHUNKS = 512


#: A chunk's limit: its laid-out box widened on every side by this fraction of its largest
#: edge, view-distance bounds by this fraction. 1/8: a 40-unit chunk of the static scene lets
#: an object wander 5 units out (a random walk of 0.3 a move takes hundreds of moves), and a
#: box never grows past 1.25x its edge.
SLACK = 0.125


def refit_chunks(tree: Tree, s32: Spheres32, c0: int, c1: int, pad: float) -> None:
    """Tight boxes, view-distance bounds, counts and limits of chunks ``c0 .. c1-1`` from their
    lanes (as laid out: the limits are set from these boxes)."""
    if c1 - c0 >= PARALLEL_CHUNKS:
        _fit_chunks_parallel(tree, s32, c0, c1, pad)
    else:
        _fit_chunks(tree, s32, c0, c1, pad)


@njit(cache=True, parallel=True)
def _fit_chunks_parallel(tree: Tree, s32: Spheres32, c0: int, c1: int, pad: float) -> None:
    for c in prange(c0, c1):
        fit_chunk(tree, s32, c, pad)
        set_limit(tree, c)


@njit(cache=True)
def _fit_chunks(tree: Tree, s32: Spheres32, c0: int, c1: int, pad: float) -> None:
    for c in range(c0, c1):
        fit_chunk(tree, s32, c, pad)
        set_limit(tree, c)


@njit(cache=True)
def empty_chunks(tree: Tree, c0: int, c1: int) -> None:
    """Chunks ``c0 .. c1-1`` empty (every lane past the layout's end is dead): boxes, counts
    and limits set without reading the lanes (an awake region that drops its holes leaves
    thousands of such chunks behind it: 0.7 ms at 10^6 read lane by lane)."""
    for c in range(c0, c1):
        for k in range(EMPTY_BOX.shape[0]):
            tree.box[k, c] = EMPTY_BOX[k]
            tree.limit[c, k] = EMPTY_BOX[k]
            tree.limit[c, COPY + k] = EMPTY_BOX[k]
        tree.count[c] = 0


@njit(cache=True)
def set_limit(tree: Tree, c: int) -> None:
    """Chunk ``c``'s limit from its box (see the module docstring); an empty chunk's holds
    nothing."""
    b = tree.box
    lim = tree.limit
    if tree.count[c] == 0:
        lim[c, :COPY] = EMPTY_BOX
        return
    edge = max(b[HI, c] - b[LO, c], b[HI + 1, c] - b[LO + 1, c], b[HI + 2, c] - b[LO + 2, c])
    m = SLACK * edge
    for a in range(3):
        lim[c, LO + a] = b[LO + a, c] - m
        lim[c, HI + a] = b[HI + a, c] + m
    lim[c, MAXVD] = b[MAXVD, c] * (1.0 + SLACK)
    lim[c, MINVD] = b[MINVD, c] * (1.0 - SLACK)


@njit(cache=True)
def fit_chunk(tree: Tree, s32: Spheres32, c: int, pad: float) -> None:
    """One chunk's box (padded), view-distance bounds and count from its float32 lanes (its
    limit stays: see :func:`set_limit`).

    Branch-free: a hole's radius is -inf, so ``x - r`` is +inf and ``x + r`` is -inf and the
    hole drops out of the min and max by itself; its view distance is masked the same way.
    """
    lx = np.float32(np.inf)
    ly = np.float32(np.inf)
    lz = np.float32(np.inf)
    hx = np.float32(-np.inf)
    hy = np.float32(-np.inf)
    hz = np.float32(-np.inf)
    mx = np.float32(-np.inf)
    mn = np.float32(np.inf)
    n = 0
    inf = np.float32(np.inf)
    big32 = np.float32(F32_BIG)  # the clamp's value as stored (just below 1e38)
    for p in range(c * CHUNK, (c + 1) * CHUNK):
        r = s32.r[p]
        live = r != -inf
        n += live
        x = s32.x[p]
        y = s32.y[p]
        z = s32.z[p]
        lx = min(lx, x - r)
        ly = min(ly, y - r)
        lz = min(lz, z - r)
        hx = max(hx, x + r)
        hy = max(hy, y + r)
        hz = max(hz, z + r)
        v = s32.vd[p]
        mx = max(mx, v if live else -inf)
        mn = min(mn, v if live else inf)
    lo = (lx, ly, lz)
    hi = (hx, hy, hz)
    tree.count[c] = n
    b = tree.box
    lim = tree.limit
    if n == 0:
        for k in range(8):
            b[k, c] = EMPTY_BOX[k]
            lim[c, COPY + k] = EMPTY_BOX[k]
        return
    for a in range(3):
        # A lane clamped to F32_BIG stands for any larger value: its side is open.
        b[LO + a, c] = -np.inf if lo[a] <= -big32 else np.float64(lo[a]) - pad
        b[HI + a, c] = np.inf if hi[a] >= big32 else np.float64(hi[a]) + pad
    # float32 view distances are rounded to nearest: widen by a relative ulp each way; a
    # clamped one (F32_BIG) stands for anything larger.
    b[MAXVD, c] = np.inf if mx >= big32 else np.float64(mx) * (1.0 + 2.0 ** -22)
    b[MINVD, c] = np.float64(mn) * (1.0 - 2.0 ** -22)
    for k in range(8):
        lim[c, COPY + k] = b[k, c]


@njit(cache=True, inline="always")
def sphere_bounds(cx: float, cy: float, cz: float, r: float, pad: float):
    """The box a chunk needs to hold a float64 sphere: each side out by ``pad`` (what boxes
    from the float32 copy get, :func:`pad_for`) and a rounding margin of the sums. Scalars
    only: an inlined helper that takes arrays pays their reference counts at every call."""
    e = (abs(cx) + abs(cy) + abs(cz) + r) * 2.0 ** -50 + pad
    return cx - r - e, cy - r - e, cz - r - e, cx + r + e, cy + r + e, cz + r + e


@njit(cache=True, _nrt=False)
def chunk_holds(lim, c: int, k: int, lx: float, ly: float, lz: float, hx: float, hy: float,
                hz: float, v: float, with_v: bool) -> bool:
    """Whether chunk ``c``'s limit (``k`` = 0) or its box's copy (``k`` = :data:`COPY`) holds
    the bounds (and, ``with_v``, the view distance ``v``). Compiled without reference counts:
    called per object, an array argument would pay them at every call."""
    inside = ((lx >= lim[c, k + LO]) & (ly >= lim[c, k + LO + 1]) & (lz >= lim[c, k + LO + 2])
              & (hx <= lim[c, k + HI]) & (hy <= lim[c, k + HI + 1]) & (hz <= lim[c, k + HI + 2]))
    if with_v:
        inside &= (v <= lim[c, k + MAXVD]) & (v >= lim[c, k + MINVD])
    return inside


@njit(cache=True, _nrt=False)
def grow_chunk(box, lim, c: int, lx: float, ly: float, lz: float, hx: float, hy: float,
               hz: float, v: float, with_v: bool) -> None:
    """Grow chunk ``c``'s box (its chunk-major copy, then the field-major rows the query reads)
    to hold the bounds (and, ``with_v``, the view distance ``v``); the nodes above hold the
    chunk's limit already (:func:`refit_upper`) and need no write."""
    k = COPY
    lim[c, k + LO] = min(lim[c, k + LO], lx)
    lim[c, k + LO + 1] = min(lim[c, k + LO + 1], ly)
    lim[c, k + LO + 2] = min(lim[c, k + LO + 2], lz)
    lim[c, k + HI] = max(lim[c, k + HI], hx)
    lim[c, k + HI + 1] = max(lim[c, k + HI + 1], hy)
    lim[c, k + HI + 2] = max(lim[c, k + HI + 2], hz)
    if with_v:
        lim[c, k + MAXVD] = max(lim[c, k + MAXVD], v)
        lim[c, k + MINVD] = min(lim[c, k + MINVD], v)
    for f in range(COPY):
        box[f, c] = lim[c, k + f]


@njit(cache=True)
def refit_upper(tree: Tree, c0: int, c1: int) -> None:
    """The nodes of level >= 1 above chunks ``c0 .. c1-1``, from their children."""
    first = c0
    last = max(c1 - 1, c0)
    for lv in range(1, tree.loff.shape[0] - 1):
        first //= FANOUT
        last //= FANOUT
        below = tree.loff[lv - 1]
        nbelow = tree.loff[lv] - below
        for i in range(first, last + 1):
            _merge_children(tree, tree.loff[lv] + i, below + i * FANOUT,
                            below + min((i + 1) * FANOUT, nbelow))


@njit(cache=True, inline="always")
def _merge_children(tree: Tree, g: int, k0: int, k1: int) -> None:
    """Node ``g``'s box, bounds and count from its children ``k0 .. k1-1``. Above chunks it
    holds their limits too: a still object written in place stays within its chunk's limit
    (``update.write_settle``), so only the chunk's own box grows and the nodes above never
    need a write (each would cost a cache miss per field and level)."""
    b = tree.box
    lim = tree.limit
    chunks = k0 < tree.loff[1]
    b[:, g] = EMPTY_BOX
    n = 0
    for k in range(k0, k1):
        if tree.count[k] == 0:
            continue
        n += tree.count[k]
        for a in range(3):
            b[LO + a, g] = min(b[LO + a, g], b[LO + a, k])
            b[HI + a, g] = max(b[HI + a, g], b[HI + a, k])
        b[MAXVD, g] = max(b[MAXVD, g], b[MAXVD, k])
        b[MINVD, g] = min(b[MINVD, g], b[MINVD, k])
        if chunks:
            for a in range(3):
                b[LO + a, g] = min(b[LO + a, g], lim[k, LO + a])
                b[HI + a, g] = max(b[HI + a, g], lim[k, HI + a])
            b[MAXVD, g] = max(b[MAXVD, g], lim[k, MAXVD])
            b[MINVD, g] = min(b[MINVD, g], lim[k, MINVD])
    tree.count[g] = n


#: Half-width of an open box: it holds any sphere the store can hold and stays finite, so box
#: tests never meet inf * 0.
OPEN = 1e300


@njit(cache=True)
def open_boxes(tree: Tree) -> None:
    """Make every non-empty node's box hold everything (no view-distance bound either): the
    walk then visits and scans every chunk, and moves never need a refit (slot order)."""
    b = tree.box
    for g in range(tree.count.shape[0]):
        if tree.count[g] > 0:
            for a in range(3):
                b[LO + a, g] = -OPEN
                b[HI + a, g] = OPEN
            b[MAXVD, g] = np.inf
            b[MINVD, g] = 0.0


@njit(cache=True)
def count_up_open(tree: Tree, positions: np.ndarray) -> None:
    """One object more at each position's chunk and its ancestors, their boxes open (slot
    order: every non-empty box holds everything, see :func:`open_boxes`)."""
    b = tree.box
    for i in range(positions.shape[0]):
        local = positions[i] // CHUNK
        for lv in range(tree.loff.shape[0] - 1):
            g = tree.loff[lv] + local
            tree.count[g] += 1
            for a in range(3):
                b[LO + a, g] = -OPEN
                b[HI + a, g] = OPEN
            b[MAXVD, g] = np.inf
            b[MINVD, g] = 0.0
            local //= FANOUT


@njit(cache=True)
def mean_extent(tree: Tree, c0: int, c1: int) -> float:
    """Mean edge sum of the non-empty boxes of chunks ``c0 .. c1-1``: how spread out they are."""
    total = 0.0
    n = 0
    for c in range(c0, min(c1, tree.loff[1])):
        if tree.count[c] > 0:
            b = tree.box
            total += (b[HI, c] - b[LO, c]) + (b[HI + 1, c] - b[LO + 1, c]) + (
                b[HI + 2, c] - b[LO + 2, c])
            n += 1
    return total / n if n else 0.0
