"""Random operation sequences applied to an index and the brute-force oracle alike.

The index contract (tests/test_index_contract.py) and the pairs contract (tests/test_pairs.py)
drive every index through the same kinds of steps; each step changes the index and the
oracle identically, so that the test only has to compare their answers after it.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.culling.frustum import camera_planes
from app.spatial import TREE_HEURISTICS, create_index
from tests.oracle import Oracle


def make(name: str, kwargs: dict, small: bool = True):
    """The index ``name`` with ``kwargs``; a tree with ``small`` splits above 3 objects
    (deep structures on small data)."""
    kw = dict(kwargs)
    if small and name in TREE_HEURISTICS:
        kw["split_threshold"] = 3
    return create_index(name, **kw)


def hundred_objects(name: str, kwargs: dict, spread: float):
    """(index, rng): :func:`make`'s index holding ids 0..99, centres within ``spread``, radii
    up to 2 (the bad-input tests' starting point)."""
    rng = np.random.default_rng(3)
    idx = make(name, kwargs)
    idx.insert(np.arange(100, dtype=np.int64), rng.uniform(-spread, spread, (100, 3)),
               rng.uniform(0, 2, 100))
    return idx, rng


class RandomOps:
    """One index and the oracle under the same random inserts, moves and removals.

    ``with_vd``: inserts draw view distances (a fifth unbounded) instead of leaving the
    default. ``sort_ids``: the ids of a move come sorted (the pairs contract's batches).
    """

    def __init__(self, idx, oracle: Oracle, rng: np.random.Generator, spread: float,
                 with_vd: bool, sort_ids: bool) -> None:
        self.idx = idx
        self.oracle = oracle
        self.rng = rng
        self.spread = spread
        self.with_vd = with_vd
        self.sort_ids = sort_ids
        self.next_id = 0
        self.removed: list[int] = []

    def apply(self, op: str, n: int) -> None:
        """One step: ``insert`` (n new sparse ids; also whatever is asked of an empty index
        but ``reinsert``), ``small``/``all``/``jump`` moves, ``resize``, ``vd`` (new view
        distances), ``remove``, ``reinsert`` (n removed ids come back elsewhere)."""
        rng = self.rng
        spread = self.spread
        live = np.array(sorted(self.oracle.objs), dtype=np.int64)
        if op == "insert" or (len(live) == 0 and op != "reinsert"):
            ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64) * 7 + 3  # sparse
            self.next_id += n
            c = rng.uniform(-spread, spread, (n, 3))
            r = rng.uniform(0, 3, n)
            if self.with_vd:
                vd = np.where(rng.random(n) < 0.2, np.inf, rng.uniform(0, 80, n))
                self.both("insert", ids, c, r, vd)
            else:
                self.both("insert", ids, c, r)
        elif op in ("small", "all", "jump", "resize", "vd"):
            size = len(live) if op == "all" else min(n, len(live))
            ids = rng.choice(live, size=size, replace=False)
            if self.sort_ids:
                ids = np.sort(ids)
            c0 = np.array([self.oracle.objs[int(i)][0] for i in ids])
            if op in ("small", "all"):
                self.both("update", ids, c0 + rng.normal(scale=0.5, size=c0.shape))
            elif op == "jump":
                self.both("update", ids, rng.uniform(-3 * spread, 3 * spread, c0.shape))
            elif op == "resize":
                r = rng.uniform(0, 10, len(ids))
                self.idx.update(ids, c0, radii=r)
                self.oracle.update(ids, c0, radii=r)
            else:
                v = rng.uniform(0, 100, len(ids))
                self.idx.update(ids, c0, view_distances=v)
                self.oracle.update(ids, c0, vd=v)
        elif op == "remove":
            ids = rng.choice(live, size=min(n, len(live)), replace=False)
            self.both("remove", ids)
            self.removed.extend(int(i) for i in ids)
        elif op == "reinsert" and self.removed:
            ids = np.array(self.removed[:n], dtype=np.int64)
            del self.removed[:n]
            c = rng.uniform(-spread, spread, (len(ids), 3))
            r = rng.uniform(0, 3, len(ids))
            self.both("insert", ids, c, r)

    def both(self, method: str, *args) -> None:
        """Call ``method`` with the same arguments on the index and on the oracle."""
        getattr(self.idx, method)(*args)
        getattr(self.oracle, method)(*args)


def snapshot(idx):
    """What a caller can see of an index: its ids, their spheres and one frustum's answer."""
    ids = np.sort(idx.all_ids())
    c, r, v = idx.get(ids) if len(ids) else (None, None, None)
    planes = camera_planes([0, 0, 0], [1, 0, 0], far=500)
    vis = np.sort(idx.query_frustum(planes).visible)
    return ids, c, r, v, vis


def assert_same(a, b) -> None:
    """Two snapshots are equal."""
    for x, y in zip(a, b, strict=True):
        if x is None:
            assert y is None
        else:
            assert np.array_equal(x, y)


def assert_rejected(idx, cases, before, what: str) -> None:
    """Each case (label, call, text) raises a ValueError naming ``text`` and leaves the index
    as the snapshot ``before`` and valid; ``what`` names the call in the failure message."""
    for label, fn, named in cases:
        with pytest.raises(ValueError, match=named):
            fn()
        try:
            assert_same(before, snapshot(idx))
        except AssertionError as exc:
            raise AssertionError(f"{label}: a rejected {what} changed the index") from exc
        idx.validate()


def every_query_agrees(idx, oracle, rng, pairs: bool = True) -> None:
    """A random camera's frustum (with and without view distance), box, sphere and ray, and
    with ``pairs`` the pairs query, answer as ``oracle`` does; ``validate()`` holds."""
    eye = rng.uniform(-40, 40, 3)
    planes = camera_planes(eye, eye + rng.normal(size=3), far=70.0)
    for use_vd in (False, True):
        got = np.sort(idx.query_frustum(planes, eye, use_vd).visible)
        assert np.array_equal(got, oracle.frustum(planes, eye, use_vd)), use_vd
    lo = rng.uniform(-50, 20, 3)
    assert np.array_equal(np.sort(idx.query_box(lo, lo + 30)), oracle.box(lo, lo + 30))
    q = rng.uniform(-40, 40, 3)
    assert np.array_equal(np.sort(idx.query_sphere(q, 12.0)), oracle.sphere(q, 12.0))
    d = rng.normal(size=3)
    gi, gt = idx.query_ray(q, d)
    wi, wt = oracle.ray(q, d)
    assert np.array_equal(np.sort(gi), np.sort(wi))
    np.testing.assert_allclose(np.sort(gt), np.sort(wt), rtol=1e-9, atol=1e-9)
    if pairs:
        got = idx.query_pairs(margin=0.5)
        assert {tuple(p) for p in np.sort(got, axis=1)} == {tuple(p) for p in
                                                           oracle.pairs(margin=0.5)}
    idx.validate()
