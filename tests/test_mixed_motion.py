"""Every index, at its default settings and at scale, under the motion a game mixes frame
after frame (issue 24): the same movers, shuffled, partly or wholly replaced, every object at
once (sorted and shuffled: the trees go flat and come back), radii and view distances in the
batch, teleports, spawns (new ids past the direct table too), a camera that turns and flies;
between them, batches with one bad row that must be refused and change nothing.

After every step the frustum answer (with and without view distance) equals the oracle's;
every few steps the box, sphere, ray and pair queries too, the frustum answer under a random
Z-pyramid (the oracle's less the spheres the pyramid hides), and ``validate()`` passes. The
contract tests (``test_index_contract.py``) drive the same calls on a hundred objects with
split thresholds of 3; these run the default thresholds on 5,000 objects (past the trees'
``flat_min_objects``) and, for one variant of each kind, past ``PARALLEL_MIN`` (whole-scene
batches on both cores)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from app.culling.frustum import camera_planes, look_at, perspective, planes_from_matrix
from app.geom.zpyramid import spheres_occluded
from app.parallelism import PARALLEL_MIN
from app.spatial import create_index, index_variants
from tests.oracle import ArrayOracle
from tests.test_nested_occlusion import _pyramid

SIDE = 500.0
MOVES = ("fixed", "order", "churn", "fresh", "sizes", "teleport")
STEPS = MOVES + ("all", "shuffled", "spawn", "bad", "turn", "fly")
WEIGHTS = np.array([12, 8, 10, 8, 10, 8, 8, 5, 12, 9, 5, 5], float)
SPOILS = ("nan", "radius", "unknown", "repeated", "insert-present", "remove-unknown")


class _Game:
    """An index and the oracle fed the same steps; the movers and the camera of a game."""

    def __init__(self, name: str, kwargs: dict, n: int, seed: int) -> None:
        self.rng = rng = np.random.default_rng(seed)
        self.idx = create_index(name, **kwargs)
        self.oracle = ArrayOracle()
        self.use_vd = bool(rng.random() < 0.5)
        ids = rng.permutation(np.arange(n, dtype=np.int64) * int(rng.choice([1, 13])))
        self._both("insert", ids, rng.random((n, 3)) * SIDE, rng.uniform(0.1, 3.0, n),
                   rng.uniform(20, 400, n) if self.use_vd else None)
        self.next_id = int(ids.max()) + 1
        self.movers = rng.choice(ids, n // 100, replace=False)
        self.eye = np.array([SIDE / 2, SIDE / 2, -50.0])
        self.heading = 0.0

    def _both(self, method: str, *args) -> None:
        getattr(self.idx, method)(*args)
        getattr(self.oracle, method)(*args)

    # ------------------------------------------------------------------ steps

    def step(self, what: str) -> None:
        if what in MOVES:
            self._move(what)
        elif what in ("all", "shuffled"):
            self._move_all(what == "shuffled")
        elif what == "spawn":
            self._spawn()
        elif what == "bad":
            self._refused(str(self.rng.choice(SPOILS)))
        elif what == "turn":
            self.heading += np.radians(self.rng.uniform(-20, 20))
        else:
            self.eye = self.eye + self._direction() * self.rng.uniform(5, 80)

    def _move(self, pattern: str) -> None:
        rng, orc = self.rng, self.oracle
        live = np.isin(self.movers, orc.ids)
        self.movers = self.movers[live]
        if pattern == "churn" and self.movers.shape[0]:
            k = max(1, self.movers.shape[0] // 3)
            self.movers = np.unique(np.concatenate([self.movers[k:],
                                                    rng.choice(orc.ids, k, replace=False)]))
        if pattern == "fresh" or self.movers.shape[0] == 0:
            share = int(rng.choice([100, 20, 5]))
            self.movers = np.sort(rng.choice(orc.ids, max(1, len(orc.ids) // share),
                                             replace=False))
        ids = self.movers if pattern != "order" else rng.permutation(self.movers)
        rows = orc.rows(ids)
        c = orc.c[rows] + rng.normal(0, 1.0, (ids.shape[0], 3))
        if pattern == "teleport":
            jump = rng.random(ids.shape[0]) < 0.1
            c[jump] = rng.random((int(jump.sum()), 3)) * SIDE * rng.choice([1.0, 3.0])
        if pattern == "sizes":
            r = orc.r[rows] * rng.uniform(0.9, 1.1, ids.shape[0])
            vd = (orc.v[rows] * rng.uniform(0.9, 1.1, ids.shape[0])
                  if self.use_vd and rng.random() < 0.5 else None)
            self._both("update", ids, c, r, vd)
        else:
            self._both("update", ids, c)

    def _move_all(self, shuffled: bool) -> None:
        rng, orc = self.rng, self.oracle
        ids = rng.permutation(orc.ids) if shuffled else np.sort(orc.ids)
        rows = orc.rows(ids)
        c = orc.c[rows] + rng.normal(0, 0.5, (ids.shape[0], 3))
        if rng.random() < 0.3:
            self._both("update", ids, c, orc.r[rows] * rng.uniform(0.95, 1.05, ids.shape[0]))
        else:
            self._both("update", ids, c)

    def _spawn(self) -> None:
        rng, orc = self.rng, self.oracle
        k = max(1, len(orc.ids) // int(rng.choice([1000, 100, 10])))
        gone = rng.choice(orc.ids, k, replace=False)
        self._both("remove", np.sort(gone) if rng.random() < 0.5 else gone)
        new = np.arange(self.next_id, self.next_id + k, dtype=np.int64)
        self.next_id += k
        if rng.random() < 0.3:
            new += 1 << 40  # past any direct table: the hashed side of the id map
        self._both("insert", new, rng.random((k, 3)) * SIDE, rng.uniform(0.1, 3.0, k),
                   rng.uniform(20, 400, k) if self.use_vd else None)

    def _refused(self, spoil: str) -> None:
        """A batch of known objects with one bad row: ValueError, and nothing changed."""
        rng, orc, idx = self.rng, self.oracle, self.idx
        ids = np.sort(rng.choice(orc.ids, max(2, len(orc.ids) // 50), replace=False))
        c = orc.c[orc.rows(ids)] + 0.5
        r = orc.r[orc.rows(ids)].copy()
        row = int(rng.integers(ids.shape[0]))
        bad = ids.copy()
        before = idx.get(np.sort(orc.ids))
        with pytest.raises(ValueError):
            if spoil == "nan":
                c[row, 1] = np.nan
                idx.update(ids, c)
            elif spoil == "radius":
                r[row] = -1.0
                idx.update(ids, c, r)
            elif spoil == "unknown":
                bad[row] = self.next_id + 10**9
                idx.update(bad, c)
            elif spoil == "repeated":
                bad[row] = bad[(row + 1) % bad.shape[0]]
                idx.update(bad, c)
            elif spoil == "insert-present":
                new = np.arange(self.next_id, self.next_id + ids.shape[0], dtype=np.int64)
                new[row] = ids[0]
                idx.insert(new, c, r)
            else:
                bad[row] = self.next_id + 10**9
                idx.remove(bad)
        after = idx.get(np.sort(orc.ids))
        assert len(idx) == len(orc.ids), spoil
        for a, b in zip(before, after, strict=True):
            assert np.array_equal(a, b), f"a refused batch ({spoil}) changed the index"

    # ------------------------------------------------------------------ checks

    def _direction(self) -> np.ndarray:
        return np.array([np.sin(self.heading), 0.0, np.cos(self.heading)])

    def check_frustum(self, what: str) -> None:
        far = float(self.rng.uniform(100, 900))
        planes = camera_planes(self.eye, self.eye + self._direction(), fovy_deg=60.0,
                               aspect=16 / 9, near=0.1, far=far)
        for use_vd in (False, True) if self.use_vd else (False,):
            got = np.sort(self.idx.query_frustum(planes, self.eye, use_vd).visible)
            want = self.oracle.frustum(planes, self.eye, use_vd)
            assert np.array_equal(got, want), (
                f"after {what} (view distance {use_vd}): extra {np.setdiff1d(got, want)[:5]}, "
                f"missing {np.setdiff1d(want, got)[:5]}")

    def check_occlusion(self) -> None:
        """The frustum answer under a random Z-pyramid of the game's camera (rectangles at
        the depths of its own objects): the frustum's objects less those the pyramid hides
        (the flat occluder predicate on each sphere)."""
        rng, orc = self.rng, self.oracle
        vp = perspective(60.0, 16 / 9, 0.1, float(rng.uniform(100, 900))) @ look_at(
            self.eye, self.eye + self._direction())
        planes = planes_from_matrix(vp)
        pyr = _pyramid(rng, vp, orc.c)
        use_vd = self.use_vd and bool(rng.random() < 0.5)
        inview = orc.frustum(planes, self.eye, use_vd)
        rows = orc.rows(inview)
        want = inview[~spheres_occluded(orc.c[rows], orc.r[rows], *pyr.arrays())]
        got = np.sort(self.idx.query_frustum(planes, self.eye, use_vd, occlusion=pyr).visible)
        assert np.array_equal(got, want), (
            f"occlusion (view distance {use_vd}): extra {np.setdiff1d(got, want)[:5]}, "
            f"missing {np.setdiff1d(want, got)[:5]}")

    def check_other_queries(self) -> None:
        rng, orc, idx = self.rng, self.oracle, self.idx
        lo = rng.random(3) * SIDE
        hi = lo + rng.random(3) * 100
        assert np.array_equal(np.sort(idx.query_box(lo, hi)), orc.box(lo, hi))
        q, qr = rng.random(3) * SIDE, float(rng.uniform(0, 40))
        assert np.array_equal(np.sort(idx.query_sphere(q, qr)), orc.sphere(q, qr))
        o, d = rng.random(3) * SIDE, rng.normal(size=3)
        hit, t = idx.query_ray(o, d)
        assert np.array_equal(np.sort(hit), orc.ray_ids(o, d))
        assert np.all(np.diff(t) >= 0), "ray hits must come nearest first"
        some = rng.choice(orc.ids, min(40, len(orc.ids)), replace=False)
        margin = float(rng.choice([0.0, 0.5]))
        pairs = idx.query_pairs(some, margin)
        assert {tuple(p) for p in np.sort(pairs, axis=1).tolist()} == orc.pairs_of(some, margin)


def _play(label: str, name: str, kwargs: dict, n: int, steps: int) -> None:
    game = _Game(name, kwargs, n, zlib.crc32(f"{label}/{n}".encode()))
    order = game.rng.choice(STEPS, steps, p=WEIGHTS / WEIGHTS.sum())
    for k, what in enumerate(order):
        game.step(str(what))
        game.check_frustum(f"step {k} ({what})")
        if k % 5 == 2:
            game.check_other_queries()
        if k % 4 == 1:
            game.check_occlusion()
        if k % 10 == 9:
            game.idx.validate()
    game.idx.validate()


VARIANTS = index_variants(("ours", "paper"))
#: One variant of each kind (and of each tree storage) for the run past PARALLEL_MIN.
BIG = ("brute", "chunks", "grid", "viewdist", "fixed-octree", "octree/leafy",
       "kd/non-leafy", "icoseptree/paper/leafy")


@pytest.mark.parametrize(("label", "name", "kwargs"), VARIANTS,
                         ids=[label for label, _, _ in VARIANTS])
def test_mixed_motion_stays_exact(label, name, kwargs):
    _play(label, name, kwargs, 5000, 40)


@pytest.mark.parametrize(("label", "name", "kwargs"), [v for v in VARIANTS if v[0] in BIG],
                         ids=[label for label, _, _ in VARIANTS if label in BIG])
def test_mixed_motion_past_the_parallel_size(label, name, kwargs):
    _play(label, name, kwargs, PARALLEL_MIN + 1500, 20)
