"""Brute-force numpy oracle: the contract's definitions, written as plainly as possible.

The definitions are functions of columns (centres c, radii r, view distances v); the two
oracles below hold their objects differently and ask them the same questions."""

from __future__ import annotations

import numpy as np


def frustum_mask(c, r, v, planes, eye, use_vd):
    """Visible: no plane has the sphere wholly outside, and within view distance if asked."""
    d = c @ planes[:, :3].T + planes[:, 3]
    ok = (d >= -r[:, None]).all(axis=1)
    if use_vd:
        ok &= np.sqrt(((c - np.asarray(eye)) ** 2).sum(axis=1)) <= v
    return ok


def box_mask(c, r, lo, hi):
    """The sphere's bounding box overlaps [lo, hi]."""
    return ((c - r[:, None]) <= hi).all(axis=1) & ((c + r[:, None]) >= lo).all(axis=1)


def sphere_mask(c, r, q, qr):
    """The sphere touches the query sphere (q, qr)."""
    return np.sqrt(((c - q) ** 2).sum(axis=1)) <= r + qr


def ray_hits(c, r, o, d):
    """(hit, t): which spheres the ray from o along d (not necessarily unit) hits, and its
    entry distance (0 for a sphere that holds o)."""
    d = np.asarray(d, float) / np.linalg.norm(d)
    m = c - o
    m2 = (m**2).sum(axis=1)
    tca = m @ d
    d2 = m2 - tca**2
    inside = m2 <= r**2
    hit = inside | ((tca >= 0) & (d2 <= r**2))
    t = np.where(inside, 0.0, np.maximum(tca - np.sqrt(np.maximum(r**2 - d2, 0)), 0.0))
    return hit, t


class Oracle:
    """A dict-of-objects model of an index; every query is a numpy scan."""

    def __init__(self) -> None:
        self.objs: dict[int, tuple[np.ndarray, float, float]] = {}

    def insert(self, ids, centers, radii, vd=None):
        for k, i in enumerate(ids):
            v = np.inf if vd is None else float(vd[k])
            self.objs[int(i)] = (np.array(centers[k], float), float(radii[k]), v)

    def update(self, ids, centers, radii=None, vd=None):
        for k, i in enumerate(ids):
            c, r, v = self.objs[int(i)]
            self.objs[int(i)] = (
                np.array(centers[k], float),
                r if radii is None else float(radii[k]),
                v if vd is None else float(vd[k]),
            )

    def remove(self, ids):
        for i in ids:
            del self.objs[int(i)]

    def arrays(self):
        ids = np.array(sorted(self.objs), dtype=np.int64)
        if len(ids) == 0:
            return ids, np.zeros((0, 3)), np.zeros(0), np.zeros(0)
        c = np.array([self.objs[i][0] for i in ids])
        r = np.array([self.objs[i][1] for i in ids])
        v = np.array([self.objs[i][2] for i in ids])
        return ids, c, r, v

    def frustum(self, planes, eye=None, use_vd=False):
        ids, c, r, v = self.arrays()
        return ids[frustum_mask(c, r, v, planes, eye, use_vd)]

    def box(self, lo, hi):
        ids, c, r, _ = self.arrays()
        return ids[box_mask(c, r, lo, hi)]

    def sphere(self, q, qr):
        ids, c, r, _ = self.arrays()
        return ids[sphere_mask(c, r, q, qr)]

    def ray(self, o, d):
        """(ids, t) sorted by (t, id); d need not be unit."""
        ids, c, r, _ = self.arrays()
        hit, t = ray_hits(c, r, o, d)
        ids, t = ids[hit], t[hit]
        order = np.lexsort((ids, t))
        return ids[order], t[order]

    def pairs(self, ids=None, margin=0.0):
        """(K, 2) id pairs (a < b) with |c_a - c_b| <= r_a + r_b + margin, rows sorted;
        with ``ids``, only the pairs with a member in ``ids``."""
        all_ids, c, r, _ = self.arrays()
        n = len(all_ids)
        rows = [np.zeros((0, 2), np.int64)]
        for i0 in range(0, n, 256):  # blocks of rows against every later object
            i1 = min(i0 + 256, n)
            d = np.sqrt(((c[i0:i1, None, :] - c[None, :, :]) ** 2).sum(axis=2))
            i, j = np.nonzero(d <= r[i0:i1, None] + r[None, :] + margin)
            i += i0
            later = j > i
            rows.append(np.c_[all_ids[i[later]], all_ids[j[later]]])
        out = np.concatenate(rows).astype(np.int64)
        if ids is not None:
            sel = np.isin(out, np.asarray(ids, dtype=np.int64)).any(axis=1)
            out = out[sel]
        return out[np.lexsort((out[:, 1], out[:, 0]))]


class ArrayOracle:
    """The same definitions over numpy columns (rows in insertion order, an id -> row dict),
    for scenes of tens of thousands of objects, where :class:`Oracle` rebuilds its arrays
    at every query."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, np.int64)
        self.c = np.zeros((0, 3))
        self.r = np.zeros(0)
        self.v = np.zeros(0)
        self.row: dict[int, int] = {}

    def rows(self, ids) -> np.ndarray:
        return np.array([self.row[int(i)] for i in ids], dtype=np.int64)

    def insert(self, ids, centers, radii, vd=None):
        first = len(self.ids)
        self.ids = np.concatenate([self.ids, np.asarray(ids, np.int64)])
        self.c = np.concatenate([self.c, centers])
        self.r = np.concatenate([self.r, radii])
        self.v = np.concatenate([self.v, np.full(len(ids), np.inf) if vd is None else vd])
        self.row.update((int(i), first + k) for k, i in enumerate(ids))

    def update(self, ids, centers, radii=None, vd=None):
        k = self.rows(ids)
        self.c[k] = centers
        if radii is not None:
            self.r[k] = radii
        if vd is not None:
            self.v[k] = vd

    def remove(self, ids):
        keep = np.ones(len(self.ids), bool)
        keep[self.rows(ids)] = False
        self.ids, self.c, self.r, self.v = (a[keep] for a in (self.ids, self.c, self.r, self.v))
        self.row = {int(i): k for k, i in enumerate(self.ids)}

    def frustum(self, planes, eye=None, use_vd=False):
        return np.sort(self.ids[frustum_mask(self.c, self.r, self.v, planes, eye, use_vd)])

    def box(self, lo, hi):
        return np.sort(self.ids[box_mask(self.c, self.r, lo, hi)])

    def sphere(self, q, qr):
        return np.sort(self.ids[sphere_mask(self.c, self.r, q, qr)])

    def ray_ids(self, o, d):
        """The ids a ray hits, sorted (their order and entry distances: :meth:`Oracle.ray`)."""
        return np.sort(self.ids[ray_hits(self.c, self.r, o, d)[0]])

    def pairs_of(self, ids, margin=0.0):
        """The set of (a, b), a < b, in contact within ``margin`` with a member in ``ids``."""
        k = self.rows(ids)
        d = np.sqrt(((self.c[k][:, None, :] - self.c[None, :, :]) ** 2).sum(axis=2))
        i, j = np.nonzero(d <= self.r[k][:, None] + self.r[None, :] + margin)
        a, b = self.ids[k][i], self.ids[j]
        return {(min(x, y), max(x, y))
                for x, y in zip(a.tolist(), b.tolist(), strict=True) if x != y}
