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
from app.spatial.scan import scan_frustum, spheres32, store32


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


class _Store:
    """Objects as structure of arrays, with an id -> row table."""

    name = "store"

    def __init__(self, **_: Any) -> None:
        self._row = np.full(0, -1, dtype=np.int64)
        self.ids = np.zeros(0, dtype=np.int64)
        self.x = np.zeros(0)
        self.y = np.zeros(0)
        self.z = np.zeros(0)
        self.r = np.zeros(0)
        self.vd = np.zeros(0)

    def __len__(self) -> int:
        return self.ids.shape[0]

    def insert(self, ids, centers, radii, view_distances=None) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        centers = np.asarray(centers, dtype=np.float64)
        top = int(ids.max()) + 1 if ids.size else 0
        if top > self._row.shape[0]:
            row = np.full(max(top, 2 * self._row.shape[0]), -1, dtype=np.int64)
            row[: self._row.shape[0]] = self._row
            self._row = row
        base = self.ids.shape[0]
        self._row[ids] = np.arange(base, base + ids.shape[0])
        self.ids = np.concatenate([self.ids, ids])
        self.x = np.concatenate([self.x, centers[:, 0]])
        self.y = np.concatenate([self.y, centers[:, 1]])
        self.z = np.concatenate([self.z, centers[:, 2]])
        self.r = np.concatenate([self.r, np.asarray(radii, dtype=np.float64)])
        vd = (np.full(ids.shape[0], np.inf) if view_distances is None
              else np.asarray(view_distances, dtype=np.float64))
        self.vd = np.concatenate([self.vd, vd])

    def update(self, ids, centers, radii=None, view_distances=None) -> None:
        rows = self._row[np.asarray(ids, dtype=np.int64)]
        centers = np.asarray(centers, dtype=np.float64)
        self.x[rows] = centers[:, 0]
        self.y[rows] = centers[:, 1]
        self.z[rows] = centers[:, 2]
        if radii is not None:
            self.r[rows] = radii
        if view_distances is not None:
            self.vd[rows] = view_distances

    def stats(self) -> dict[str, Any]:
        return {"objects": len(self), "nodes": 0, "max_depth": 0}


class NumpyBrute(_Store):
    """Vectorised numpy brute force (the design's ~50 ms per million objects)."""

    name = "numpy-brute"

    def _mask(self, planes, eye, use_vd):
        return _sphere_mask(self.x, self.y, self.z, self.r, self.vd, planes, eye, use_vd)

    def query_frustum(self, planes, eye=None, use_view_distance=False, occlusion=None):
        ok = self._mask(planes, eye, use_view_distance)
        return QueryResult(visible=self.ids[ok], working_set=len(self), nodes_visited=0)

    def query_box(self, lo, hi):
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
def _write_moves(row, ids, centers, c64, s32):
    """Write moved centres into the float64 rows and their float32 copy; largest |coord|."""
    bx = by = bz = 0.0  # three running maxima: one chain of max() was the loop's bottleneck
    for i in range(ids.shape[0]):
        k = row[ids[i]]
        cx = centers[i, 0]
        cy = centers[i, 1]
        cz = centers[i, 2]
        c64[k, 0] = cx
        c64[k, 1] = cy
        c64[k, 2] = cz
        s32.x[k] = cx
        s32.y[k] = cy
        s32.z[k] = cz
        bx = max(bx, abs(cx))
        by = max(by, abs(cy))
        bz = max(bz, abs(cz))
    return max(bx, by, bz)


class ScanBrute(_Store):
    """The brute force a performance engineer writes: ``app.spatial.scan`` on one thread.

    float32 structure of arrays, branch-free plane tests that vectorise, a verdict byte per
    sphere and one compaction; exact (spheres near a plane decided in float64). A move writes
    the float64 row and its float32 copy.
    """

    name = "numba-brute"
    parallel = False

    def insert(self, ids, centers, radii, view_distances=None) -> None:
        super().insert(ids, centers, radii, view_distances)
        n = self.ids.shape[0]
        self._c64 = np.ascontiguousarray(np.stack([self.x, self.y, self.z], axis=1))
        self._s32 = spheres32(n)
        store32(self._s32, np.arange(n), self._c64, self.r, self.vd, np.zeros(0, np.int64))
        self._codes = np.empty(n, np.uint8)
        self._max_abs = float(np.abs(self._c64).max()) if n else 0.0
        self._max_r = float(self.r.max()) if n else 0.0

    def update(self, ids, centers, radii=None, view_distances=None) -> None:
        if radii is not None or view_distances is not None:
            raise ValueError(f"{self.name}: the benchmarks move objects only")
        big = _write_moves(self._row, np.asarray(ids, dtype=np.int64),
                           np.asarray(centers, dtype=np.float64), self._c64, self._s32)
        self._max_abs = max(self._max_abs, float(big))

    def query_frustum(self, planes, eye=None, use_view_distance=False, occlusion=None):
        eye = np.zeros(3) if eye is None else np.asarray(eye, dtype=np.float64)
        planes = np.ascontiguousarray(planes, dtype=np.float64)
        n = self.ids.shape[0]
        rows, _ = scan_frustum(self._s32, n, planes, eye, bool(use_view_distance),
                               self._max_abs, self._max_r, self._c64, self.r, self.vd,
                               NO_OCCLUDER, parallel=self.parallel, codes=self._codes)
        return QueryResult(visible=self.ids[rows], working_set=n, nodes_visited=0)

    def query_box(self, lo, hi):
        return _nb_box(self.ids, self._c64[:, 0], self._c64[:, 1], self._c64[:, 2], self.r,
                       np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64))


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

    def insert(self, ids, centers, radii, view_distances=None) -> None:
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

    def update(self, ids, centers, radii=None, view_distances=None) -> None:
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

    def query_frustum(self, planes, eye=None, use_view_distance=False, occlusion=None):
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

    def query_box(self, lo, hi):
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
