"""The object store of a nested index: one arena of rows, each group's objects packed in a
block of it (``[start, start + count)``, room up to ``start + cap``), in local coordinates.

A query scans a group's objects as one contiguous range (float32 structure of arrays, the
branch-free verdict loop of ``app.spatial.scan``, refreshed from the float64 centres a block at
a time when the group moved since); a group that outgrows its block moves to
the arena's end with twice the room, removals keep a block packed (its order kept), and the
holes are given back when the arena is repacked. Every kernel here takes the rows as a
:class:`NestedRows` and takes the arrays its loop reads into locals first (a named tuple
used in an inner loop is slow). Inserts, removals and moves are ``update.py``'s.

The group's own index (any ``INDEX_NAMES`` kind) holds the same objects by id; moves reach
it lazily: in a group queried through its index a moved row is marked *stale* and only those
rows are sent (:func:`take_stale`), a smaller group is marked as a whole and sent as a whole;
either way only before something reads the index (a query through it, its node boxes,
``flush``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from app.spatial.idmap import assign
from app.spatial.scan import F32_BIG


class NestedRows(NamedTuple):
    """The arena, one entry per row; dead rows have id -1 and float32 radius -inf."""

    ids: np.ndarray  # int64 caller id, -1 dead
    lc: np.ndarray  # (cap, 3) float64 local centre
    rad: np.ndarray  # float64 local radius
    vd: np.ndarray  # float64 local view distance (inf: none)
    grp: np.ndarray  # int64 group slot
    stale: np.ndarray  # uint8: moved since the group's index last heard of it
    x: np.ndarray  # float32 copies the scan reads
    y: np.ndarray
    z: np.ndarray
    r32: np.ndarray
    vd32: np.ndarray


def new_rows(cap: int) -> NestedRows:
    """An arena of ``cap`` dead rows."""
    return NestedRows(np.full(cap, -1, np.int64), np.zeros((cap, 3)), np.zeros(cap),
                      np.full(cap, np.inf), np.full(cap, -1, np.int64), np.zeros(cap, np.uint8),
                      np.zeros(cap, np.float32), np.zeros(cap, np.float32),
                      np.zeros(cap, np.float32), np.full(cap, -np.inf, np.float32),
                      np.full(cap, np.inf, np.float32))


def grown_rows(rows: NestedRows, cap: int) -> NestedRows:
    """``rows`` with room for ``cap`` rows (the new ones dead)."""
    out = new_rows(cap)
    for a, b in zip(out, rows, strict=True):
        a[: b.shape[0]] = b
    return out


@njit(cache=True, inline="always")
def copy_row(src: NestedRows, s: int, dst: NestedRows, d: int) -> None:
    """Row ``s`` of ``src`` to row ``d`` of ``dst`` (the same arena or a fresh one), every
    field. Taking the two records costs nothing over taking their 22 arrays (the loops
    calling it, alternated three times: move_block of 1M rows 118-127 ms with the arrays,
    122-134 ms with the records; remove_rows of 10 % of 2M 224-235 / 227-239 ms; repack of
    2M 232-260 / 227-246 ms)."""
    ids, lc, rad, vd, grp, stale, x, y, z, r32, vd32 = src
    oids, olc, orad, ovd, ogrp, ostale, ox, oy, oz, or32, ovd32 = dst
    oids[d] = ids[s]
    for a in range(3):
        olc[d, a] = lc[s, a]
    orad[d] = rad[s]
    ovd[d] = vd[s]
    ogrp[d] = grp[s]
    ostale[d] = stale[s]
    ox[d] = x[s]
    oy[d] = y[s]
    oz[d] = z[s]
    or32[d] = r32[s]
    ovd32[d] = vd32[s]


@njit(cache=True, inline="always")
def kill_row(ids, stale, r32, s: int) -> None:
    ids[s] = -1
    stale[s] = 0
    r32[s] = -np.inf


@njit(cache=True)
def move_block(R: NestedRows, lo: int, n: int, dst: int, keys, vals, dense) -> None:
    """Rows ``lo .. lo+n-1`` to ``dst ..`` (a free range), ids re-pointed, old rows dead."""
    ids, stale, r32 = R.ids, R.stale, R.r32
    for i in range(n):
        copy_row(R, lo + i, R, dst + i)
        assign(keys, vals, dense, ids[dst + i], dst + i)
    for i in range(n):
        kill_row(ids, stale, r32, lo + i)


@njit(cache=True)
def repack(R: NestedRows, out: NestedRows, groups, b_start, b_count, new_start, keys,
           vals, dense) -> None:
    """Copy each group's block to ``new_start[g]`` of the fresh arena ``out``; re-point ids."""
    ids = R.ids
    for q in range(groups.shape[0]):
        g = groups[q]
        lo = b_start[g]
        d = new_start[g]
        for i in range(b_count[g]):
            copy_row(R, lo + i, out, d + i)
            assign(keys, vals, dense, ids[lo + i], d + i)


@njit(cache=True, inline="always")
def row32(lc, x, y, z, s: int) -> None:
    """The float32 copy of row ``s``'s centre (``to32`` of finite values: a clamp)."""
    x[s] = np.float32(min(max(lc[s, 0], -F32_BIG), F32_BIG))
    y[s] = np.float32(min(max(lc[s, 1], -F32_BIG), F32_BIG))
    z[s] = np.float32(min(max(lc[s, 2], -F32_BIG), F32_BIG))


@njit(cache=True)
def sync32(lc, x, y, z, lo: int, hi: int) -> None:
    """The float32 copy of the centres of rows ``lo .. hi-1``: ``to32`` of finite values, a
    clamp, written without a branch so that the pass vectorises."""
    c = lc[lo:hi]
    xs = x[lo:hi]
    ys = y[lo:hi]
    zs = z[lo:hi]
    for i in range(c.shape[0]):
        xs[i] = np.float32(min(max(c[i, 0], -F32_BIG), F32_BIG))
        ys[i] = np.float32(min(max(c[i, 1], -F32_BIG), F32_BIG))
        zs[i] = np.float32(min(max(c[i, 2], -F32_BIG), F32_BIG))


@njit(cache=True)
def clear_stale(R: NestedRows, lo: int, hi: int) -> None:
    """Rows ``lo .. hi-1`` no longer stale."""
    st = R.stale
    for s in range(lo, hi):
        st[s] = 0


@njit(cache=True)
def take_stale(R: NestedRows, lo: int, hi: int, n: int):
    """(ids, centres, radii, view distances) of the ``n`` stale rows in ``lo .. hi-1``, which
    are no longer stale afterwards."""
    ids, lc, rad, vd, grp, stale, x, y, z, r32, vd32 = R
    out_i = np.empty(n, np.int64)
    out_c = np.empty((n, 3))
    out_r = np.empty(n)
    out_v = np.empty(n)
    k = 0
    for s in range(lo, hi):
        if stale[s] and k < n:
            out_i[k] = ids[s]
            for a in range(3):
                out_c[k, a] = lc[s, a]
            out_r[k] = rad[s]
            out_v[k] = vd[s]
            stale[s] = 0
            k += 1
    return out_i[:k], out_c[:k], out_r[:k], out_v[:k]
