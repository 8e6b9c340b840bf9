"""Peers the indexes are measured against, behind the index API the benchmarks use
(``insert``, ``update``, ``query_frustum``, ``query_box``, ``stats``):

* ``numpy-brute``: every query is a vectorised numpy test over all objects;
* ``numba-brute`` / ``numba-brute-mt``: the brute force a performance engineer writes, the
  branch-free float32 scan of ``app.spatial.scan`` on one thread / on every core;
* ``rtree``: libspatialindex's R*-tree (PyPI ``rtree``), what a Python user would pick. Moves
  are delete + insert; a frustum query asks for the frustum's bounding box (clipped by the
  largest view distance around the eye) and tests the candidates exactly with numpy.

These are benchmark peers, not indexes of the project: ids must be non-negative ints (they are
dense in the benchmarks) and there is no input validation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from app.geom.zpyramid import NO_OCCLUDER
from app.spatial.base import QueryResult
from app.spatial.moves import looks_sorted
from app.spatial.prefetch import PREFETCH_AHEAD, prefetch, rows_ahead
from app.spatial.scan import grown32, scan_frustum, spheres32, to32


def _sphere_mask(x, y, z, r, vd, planes, eye, use_vd) -> np.ndarray:
    """Spheres not entirely outside any plane (and, with ``use_vd``, within their view
    distance ``vd`` of ``eye``), vectorised over the given arrays."""
    ok = np.ones(x.shape[0], dtype=bool)
    for a, b, c, d in np.asarray(planes, dtype=np.float64):
        ok &= ~(a * x + b * y + c * z + d < -r)
    if use_vd:
        dx = x - eye[0]
        dy = y - eye[1]
        dz = z - eye[2]
        ok &= np.sqrt(dx * dx + dy * dy + dz * dz) <= vd
    return ok


def _swap_plan(rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(holes, sources) of a swap-remove of ``rows`` out of ``0 .. n-1``: the live rows of the
    tail ``n-k .. n-1`` move into the removed rows below it, so the live rows stay dense."""
    k = rows.shape[0]
    n2 = n - k
    holes = rows[rows < n2]
    dead_tail = np.zeros(k, dtype=bool)
    dead_tail[rows[rows >= n2] - n2] = True
    return holes, n2 + np.flatnonzero(~dead_tail)


class _Store:
    """Objects as a dense structure of arrays (rows ``0 .. n-1`` live, room to grow), with an
    id -> row table; ``remove`` swap-removes, ``insert`` appends (capacity doubles)."""

    name = "store"
    _FIELDS = ("_ids", "_x", "_y", "_z", "_r", "_vd")

    def __init__(self, **_: Any) -> None:
        self._row = np.full(0, -1, dtype=np.int64)
        self._n = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._x = np.zeros(0)
        self._y = np.zeros(0)
        self._z = np.zeros(0)
        self._r = np.zeros(0)
        self._vd = np.zeros(0)

    def __len__(self) -> int:
        return self._n

    ids = property(lambda self: self._ids[: self._n])
    x = property(lambda self: self._x[: self._n])
    y = property(lambda self: self._y[: self._n])
    z = property(lambda self: self._z[: self._n])
    r = property(lambda self: self._r[: self._n])
    vd = property(lambda self: self._vd[: self._n])

    def _grow_rows(self, ids: np.ndarray) -> None:
        top = int(ids.max()) + 1 if ids.size else 0
        if top > self._row.shape[0]:
            row = np.full(max(top, 2 * self._row.shape[0]), -1, dtype=np.int64)
            row[: self._row.shape[0]] = self._row
            self._row = row

    def _grow(self, need: int) -> None:
        cap = self._ids.shape[0]
        if need <= cap:
            return
        cap = max(need, 2 * cap)
        for f in self._FIELDS:
            old = getattr(self, f)
            new = np.zeros(cap, dtype=old.dtype)
            new[: self._n] = old[: self._n]
            setattr(self, f, new)

    def insert(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray,
               view_distances: np.ndarray | None = None) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        centers = np.asarray(centers, dtype=np.float64)
        k = ids.shape[0]
        self._grow_rows(ids)
        self._grow(self._n + k)
        s = slice(self._n, self._n + k)
        self._row[ids] = np.arange(self._n, self._n + k)
        self._ids[s] = ids
        self._x[s] = centers[:, 0]
        self._y[s] = centers[:, 1]
        self._z[s] = centers[:, 2]
        self._r[s] = radii
        self._vd[s] = np.inf if view_distances is None else view_distances
        self._n += k

    def update(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None = None,
               view_distances: np.ndarray | None = None) -> None:
        rows = self._row[np.asarray(ids, dtype=np.int64)]
        centers = np.asarray(centers, dtype=np.float64)
        self._x[rows] = centers[:, 0]
        self._y[rows] = centers[:, 1]
        self._z[rows] = centers[:, 2]
        if radii is not None:
            self._r[rows] = radii
        if view_distances is not None:
            self._vd[rows] = view_distances

    def remove(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        holes, src = _swap_plan(self._row[ids], self._n)
        for f in self._FIELDS:
            a = getattr(self, f)
            a[holes] = a[src]
        self._row[ids] = -1
        self._row[self._ids[holes]] = holes
        self._n -= ids.shape[0]

    def stats(self) -> dict[str, Any]:
        return {"objects": len(self), "nodes": 0, "max_depth": 0}


class NumpyBrute(_Store):
    """Vectorised numpy brute force (the design's ~50 ms per million objects)."""

    name = "numpy-brute"

    def _mask(self, planes, eye, use_vd):
        return _sphere_mask(self.x, self.y, self.z, self.r, self.vd, planes, eye, use_vd)

    def query_frustum(self, planes: np.ndarray, eye: np.ndarray | None = None,
                      use_view_distance: bool = False, occlusion: Any = None) -> QueryResult:
        ok = self._mask(planes, eye, use_view_distance)
        return QueryResult(visible=self.ids[ok], working_set=len(self), nodes_visited=0)

    def query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        x, y, z, r = self.x, self.y, self.z, self.r
        ok = ((x - r <= hi[0]) & (x + r >= lo[0]) & (y - r <= hi[1]) & (y + r >= lo[1])
              & (z - r <= hi[2]) & (z + r >= lo[2]))
        return self.ids[ok]


@njit(cache=True)
def _nb_box(ids, x, y, z, r, lo, hi):
    out = np.empty(x.shape[0], dtype=np.int64)
    k = 0
    for i in range(x.shape[0]):
        ri = r[i]
        if (x[i] - ri <= hi[0]) & (x[i] + ri >= lo[0]) & (y[i] - ri <= hi[1]) & (
                y[i] + ri >= lo[1]) & (z[i] - ri <= hi[2]) & (z[i] + ri >= lo[2]):
            out[k] = ids[i]
            k += 1
    return out[:k]


@njit(cache=True)
def _write_batch(row, ids, centers, radii, vdist, c64, r64, vd64, s32):
    """Write a batch into the float64 rows and their float32 copy: centres always, radii and
    view distances when given (non-empty). Returns (largest |coord|, largest radius) written.

    With the hints a performance engineer adds on this machine, as the project's own batch
    loops have them (``app.spatial.prefetch``): the batch's rows ahead, in order, and a later
    row's destination once its id's row is known, unless the ids look sorted and dense (their
    rows then come in order, and the stream's hints serve them)."""
    bx = by = bz = 0.0  # three running maxima: one chain of max() was the loop's bottleneck
    br = 0.0
    has_r = radii.shape[0] > 0
    has_vd = vdist.shape[0] > 0
    x, y, z, r32, vd32 = s32.x, s32.y, s32.z, s32.r, s32.vd
    n = ids.shape[0]
    scattered = n > 0 and (not looks_sorted(ids) or ids[n - 1] - ids[0] > 4 * n)
    for i in range(n):
        if (i & 7) == 0:
            a = rows_ahead(ids, centers, i, n)
            if has_r:
                prefetch(radii, a)
            if has_vd:
                prefetch(vdist, a)
        if scattered and i + PREFETCH_AHEAD < n:
            q = row[ids[i + PREFETCH_AHEAD]]
            prefetch(c64, q)
            prefetch(x, q)
            prefetch(y, q)
            prefetch(z, q)
        k = row[ids[i]]
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        c64[k, 0] = cx
        c64[k, 1] = cy
        c64[k, 2] = cz
        x[k] = to32(cx)
        y[k] = to32(cy)
        z[k] = to32(cz)
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
        if has_r:
            ri = radii[i]
            r64[k] = ri
            r32[k] = to32(ri)
            br = max(br, ri)
        if has_vd:
            vd64[k] = vdist[i]
            vd32[k] = to32(vdist[i])
    return max(bx, by, bz), br


@njit(cache=True)
def _append(row, ids, n, centers, radii, vdist, c64, r64, vd64, idarr, s32):
    """Rows ``n .. n+k-1`` get the new objects (float64 and float32, through
    :func:`_write_batch`; no view distance is an infinite one); the id table points to them.
    Returns (largest |coord|, largest radius) written."""
    for i in range(ids.shape[0]):
        row[ids[i]] = n + i
        idarr[n + i] = ids[i]
    if vdist.shape[0] == 0:
        vdist = np.full(ids.shape[0], np.inf)
    return _write_batch(row, ids, centers, radii, vdist, c64, r64, vd64, s32)


@njit(cache=True)
def _swap_remove(row, ids, n, c64, r64, vd64, idarr, s32):
    """Remove ``ids``: each one's row takes the last live row (float64, float32 and id), the
    freed last row is marked dead (radius -inf). Returns the new live count."""
    for i in range(ids.shape[0]):
        k = row[ids[i]]
        last = n - 1
        if k != last:
            c64[k, 0] = c64[last, 0]
            c64[k, 1] = c64[last, 1]
            c64[k, 2] = c64[last, 2]
            r64[k] = r64[last]
            vd64[k] = vd64[last]
            s32.x[k] = s32.x[last]
            s32.y[k] = s32.y[last]
            s32.z[k] = s32.z[last]
            s32.r[k] = s32.r[last]
            s32.vd[k] = s32.vd[last]
            moved = idarr[last]
            idarr[k] = moved
            row[moved] = k
        row[ids[i]] = -1
        s32.r[last] = -np.inf
        n = last
    return n


_EMPTY = np.zeros(0)


class ScanBrute:
    """The brute force a performance engineer writes: ``app.spatial.scan`` on one thread.

    float32 structure of arrays, branch-free plane tests that vectorise, a verdict byte per
    sphere and one compaction; exact (spheres near a plane decided in float64). A batch writes
    the float64 rows and their float32 copy (centres, and radii / view distances when it
    carries them) in one compiled pass; ``remove`` swap-removes rows, ``insert`` appends them
    (capacity doubles), so the live rows stay dense for the scan.
    """

    name = "numba-brute"
    parallel = False

    def __init__(self, **_: Any) -> None:
        self._row = np.full(0, -1, dtype=np.int64)
        self._n = 0
        self._alloc(0)
        self._max_abs = 0.0
        self._max_r = 0.0

    def _alloc(self, cap: int) -> None:
        self._ids = np.zeros(cap, dtype=np.int64)
        self._c64 = np.zeros((cap, 3))
        self._r64 = np.zeros(cap)
        self._vd64 = np.full(cap, np.inf)
        self._s32 = spheres32(cap)
        self._codes = np.empty(cap, np.uint8)

    def __len__(self) -> int:
        return self._n

    @property
    def ids(self) -> np.ndarray:
        return self._ids[: self._n]

    def _grow(self, need: int) -> None:
        cap = self._ids.shape[0]
        if need <= cap:
            return
        n = self._n
        old = (self._ids, self._c64, self._r64, self._vd64, self._s32)
        self._alloc(max(need, 2 * cap))
        self._ids[:n] = old[0][:n]
        self._c64[:n] = old[1][:n]
        self._r64[:n] = old[2][:n]
        self._vd64[:n] = old[3][:n]
        self._s32 = grown32(old[4], self._ids.shape[0])

    def insert(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray,
               view_distances: np.ndarray | None = None) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        top = int(ids.max()) + 1 if ids.size else 0
        if top > self._row.shape[0]:
            row = np.full(max(top, 2 * self._row.shape[0]), -1, dtype=np.int64)
            row[: self._row.shape[0]] = self._row
            self._row = row
        self._grow(self._n + ids.shape[0])
        vd = _EMPTY if view_distances is None else np.asarray(view_distances, np.float64)
        big, br = _append(self._row, ids, self._n, np.asarray(centers, dtype=np.float64),
                          np.asarray(radii, dtype=np.float64), vd, self._c64, self._r64,
                          self._vd64, self._ids, self._s32)
        self._n += ids.shape[0]
        self._max_abs = max(self._max_abs, float(big))
        self._max_r = max(self._max_r, float(br))

    def update(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None = None,
               view_distances: np.ndarray | None = None) -> None:
        big, br = _write_batch(
            self._row, np.asarray(ids, dtype=np.int64), np.asarray(centers, dtype=np.float64),
            _EMPTY if radii is None else np.asarray(radii, dtype=np.float64),
            _EMPTY if view_distances is None else np.asarray(view_distances, dtype=np.float64),
            self._c64, self._r64, self._vd64, self._s32)
        self._max_abs = max(self._max_abs, float(big))
        self._max_r = max(self._max_r, float(br))

    def remove(self, ids: np.ndarray) -> None:
        self._n = int(_swap_remove(self._row, np.asarray(ids, dtype=np.int64), self._n,
                                   self._c64, self._r64, self._vd64, self._ids, self._s32))

    def query_frustum(self, planes: np.ndarray, eye: np.ndarray | None = None,
                      use_view_distance: bool = False, occlusion: Any = None) -> QueryResult:
        eye = np.zeros(3) if eye is None else np.asarray(eye, dtype=np.float64)
        planes = np.ascontiguousarray(planes, dtype=np.float64)
        n = self._n
        rows, _, _ = scan_frustum(self._s32, n, planes, eye, bool(use_view_distance),
                               self._max_abs, self._max_r, self._c64, self._r64, self._vd64,
                               NO_OCCLUDER, parallel=self.parallel, codes=self._codes)
        return QueryResult(visible=self._ids[rows], working_set=n, nodes_visited=0)

    def query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        n = self._n
        return _nb_box(self._ids[:n], self._c64[:n, 0], self._c64[:n, 1], self._c64[:n, 2],
                       self._r64[:n], np.asarray(lo, dtype=np.float64),
                       np.asarray(hi, dtype=np.float64))

    def stats(self) -> dict[str, Any]:
        return {"objects": len(self), "nodes": 0, "max_depth": 0}


class ScanBruteParallel(ScanBrute):
    """:class:`ScanBrute` with the verdict loop on every core."""

    name = "numba-brute-mt"
    parallel = True


def convex_bbox(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounding box of the convex volume {p : n.p + d >= 0 for every plane} (vertices are the
    feasible intersections of plane triples)."""
    planes = np.asarray(planes, dtype=np.float64)
    pts = []
    for i, j, k in itertools.combinations(range(planes.shape[0]), 3):
        a = planes[[i, j, k], :3]
        if abs(np.linalg.det(a)) < 1e-12:
            continue
        p = np.linalg.solve(a, -planes[[i, j, k], 3])
        if (planes[:, :3] @ p + planes[:, 3] >= -1e-6 * (1.0 + np.abs(p).max())).all():
            pts.append(p)
    if not pts:
        return np.full(3, -np.inf), np.full(3, np.inf)
    pts = np.array(pts)
    lo = pts.min(axis=0)
    hi = pts.max(axis=0)
    pad = 1e-9 * (1.0 + np.abs(pts).max())
    return lo - pad, hi + pad


class RtreePeer(NumpyBrute):
    """libspatialindex R*-tree over the spheres' bounding boxes."""

    name = "rtree"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        from rtree import index as rindex

        self._rindex = rindex
        self._tree = None
        self._maxvd = 0.0

    def _props(self):
        p = self._rindex.Property()
        p.dimension = 3
        p.variant = self._rindex.RT_Star
        return p

    def insert(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray,
               view_distances: np.ndarray | None = None) -> None:
        super().insert(ids, centers, radii, view_distances)
        ids = np.asarray(ids, dtype=np.int64)
        c = np.asarray(centers, dtype=np.float64)
        r = np.asarray(radii, dtype=np.float64)[:, None]
        mins = np.ascontiguousarray(c - r)
        maxs = np.ascontiguousarray(c + r)
        if self._tree is None:  # bulk load (STR packing) when the tree is empty
            self._tree = self._rindex.Index((ids, mins, maxs), properties=self._props())
        else:
            for i, lo, hi in zip(ids.tolist(), mins.tolist(), maxs.tolist(), strict=True):
                self._tree.insert(i, lo + hi)
        fin = self.vd[np.isfinite(self.vd)]
        self._maxvd = float(fin.max()) if fin.size else 0.0
        self._allfinite = fin.size == self.vd.size

    def update(self, ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None = None,
               view_distances: np.ndarray | None = None) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        rows = self._row[ids]
        old_lo = np.stack([self.x[rows] - self.r[rows], self.y[rows] - self.r[rows],
                           self.z[rows] - self.r[rows]], axis=1).tolist()
        old_hi = np.stack([self.x[rows] + self.r[rows], self.y[rows] + self.r[rows],
                           self.z[rows] + self.r[rows]], axis=1).tolist()
        super().update(ids, centers, radii, view_distances)
        c = np.asarray(centers, dtype=np.float64)
        r = self.r[rows][:, None]
        new_lo = (c - r).tolist()
        new_hi = (c + r).tolist()
        tree = self._tree
        for k, i in enumerate(ids.tolist()):
            tree.delete(i, old_lo[k] + old_hi[k])
            tree.insert(i, new_lo[k] + new_hi[k])
        if view_distances is not None:
            fin = self.vd[np.isfinite(self.vd)]
            self._maxvd = float(fin.max()) if fin.size else 0.0
            self._allfinite = fin.size == self.vd.size

    def remove(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        rows = self._row[ids]
        x, y, z, r = self._x[rows], self._y[rows], self._z[rows], self._r[rows]
        boxes = np.stack([x - r, y - r, z - r, x + r, y + r, z + r], axis=1).tolist()
        for i, box in zip(ids.tolist(), boxes, strict=True):  # rtree has no batch delete
            self._tree.delete(i, box)
        super().remove(ids)

    def query_frustum(self, planes: np.ndarray, eye: np.ndarray | None = None,
                      use_view_distance: bool = False, occlusion: Any = None) -> QueryResult:
        # The rule rejects a sphere only when it is entirely outside one plane, so near the
        # frustum's edges it accepts spheres that do not touch the frustum itself: the centres
        # that can pass fill the frustum with every plane pushed out by the largest radius.
        pushed = np.array(planes, dtype=np.float64)
        pushed[:, 3] += float(self.r.max()) if self.r.size else 0.0
        lo, hi = convex_bbox(pushed)
        if use_view_distance and self._allfinite:
            e = np.asarray(eye, dtype=np.float64)
            lo = np.maximum(lo, e - self._maxvd)
            hi = np.minimum(hi, e + self._maxvd)
        if (lo > hi).any() or self._tree is None:
            return QueryResult(visible=np.zeros(0, dtype=np.int64), working_set=0,
                               nodes_visited=0)
        lo = np.maximum(lo, -1e300)
        hi = np.minimum(hi, 1e300)
        cand, _ = self._tree.intersection_v(lo[None, :], hi[None, :])
        rows = self._row[cand]
        ok = _sphere_mask(self.x[rows], self.y[rows], self.z[rows], self.r[rows],
                          self.vd[rows] if use_view_distance else None, planes, eye,
                          use_view_distance)
        return QueryResult(visible=cand[ok], working_set=int(cand.shape[0]), nodes_visited=0)

    def query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if self._tree is None:
            return np.zeros(0, dtype=np.int64)
        cand, _ = self._tree.intersection_v(np.asarray(lo, float)[None, :],
                                            np.asarray(hi, float)[None, :])
        return cand


PEERS: dict[str, Callable[[], Any]] = {
    "numpy-brute": NumpyBrute,
    "numba-brute": ScanBrute,
    "numba-brute-mt": ScanBruteParallel,
    "rtree": RtreePeer,
}


def subjects(only: list[str] | None = None, peers: tuple[str, ...] = ("numpy-brute", "numba-brute",
             "numba-brute-mt", "rtree"), variants: list[tuple[str, str, dict]] | None = None
             ) -> list[tuple[str, Callable[[], Any]]]:
    """(label, factory) of the peers and of every index variant that exists right now.

    ``only`` keeps labels equal to or starting with one of the given names (``kd`` keeps
    ``kd/leafy`` and ``kd/non-leafy``); the brute-force peers are always kept, they are the
    yardsticks.
    """
    from app.spatial import create_index, index_variants

    out: list[tuple[str, Callable[[], Any]]] = []
    for p in peers:
        if p == "rtree":
            try:
                import rtree  # noqa: F401
            except ImportError:
                continue
        out.append((p, PEERS[p]))
    for label, name, kw in (index_variants() if variants is None else variants):
        out.append((label, lambda name=name, kw=kw: create_index(name, **kw)))
    if only:
        def keep(label: str) -> bool:
            return label in ("numpy-brute", "numba-brute", "numba-brute-mt") or any(
                label == o or label.startswith(o + "/") for o in only)
        out = [s for s in out if keep(s[0])]
    return out
