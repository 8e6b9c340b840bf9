"""NestedIndex (design.md "Hierarchical scenes") against an oracle that flattens the scene.

The oracle keeps the groups and objects in dicts and computes every world sphere with numpy,
elementwise, in the canonical order of operations (app/spatial/nested/groups.py), then answers
a query by the contract's brute-force test. Random sequences of group additions, transform
changes, re-parenting, inserts, moves, resizes, removals and group removals run against it
with validate() after every step, for several inner index kinds, both with the groups scanned
inside the descent and with every partly visible group asked through its own index.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.culling.frustum import camera_planes
from app.spatial.nested import NestedIndex

# --------------------------------------------------------------------------- the oracle


def compose(P: np.ndarray, L: np.ndarray) -> np.ndarray:
    """P @ L for 4x4 rigid matrices, in the canonical order of operations."""
    W = np.zeros((4, 4))
    W[3, 3] = 1.0
    for i in range(3):
        for j in range(3):
            W[i, j] = (P[i, 0] * L[0, j] + P[i, 1] * L[1, j]) + P[i, 2] * L[2, j]
        W[i, 3] = ((P[i, 0] * L[0, 3] + P[i, 1] * L[1, 3]) + P[i, 2] * L[2, 3]) + P[i, 3]
    return W


def scale_of(M: np.ndarray) -> float:
    return float(np.sqrt((M[0, 0] * M[0, 0] + M[1, 0] * M[1, 0]) + M[2, 0] * M[2, 0]))


class FlatOracle:
    """The scene as dicts; world spheres flattened with numpy in the canonical order."""

    def __init__(self) -> None:
        self.groups: dict = {}  # gid -> [parent, M]
        self.objs: dict = {}  # id -> [gid, c, r, vd]

    def world(self, gid):
        """(W 4x4, ws) of a group: composed root first."""
        parent, M = self.groups[gid]
        if parent is None:
            return M.copy(), scale_of(M)
        P, ps = self.world(parent)
        return compose(P, M), ps * scale_of(M)

    def subtree(self, gid) -> set:
        out = {gid}
        changed = True
        while changed:
            changed = False
            for g, (p, _) in self.groups.items():
                if p in out and g not in out:
                    out.add(g)
                    changed = True
        return out

    def remove_group(self, gid) -> None:
        sub = self.subtree(gid)
        for g in sub:
            del self.groups[g]
        for i in [i for i, o in self.objs.items() if o[0] in sub]:
            del self.objs[i]

    def flat(self):
        """(ids, world centres, world radii, world view distances), ids sorted."""
        ids = np.array(sorted(self.objs), dtype=np.int64)
        c = np.zeros((len(ids), 3))
        r = np.zeros(len(ids))
        v = np.zeros(len(ids))
        cache = {}
        for k, i in enumerate(ids.tolist()):
            g, lc, lr, lv = self.objs[i]
            if g not in cache:
                cache[g] = self.world(g)
            W, s = cache[g]
            x, y, z = lc
            for a in range(3):
                c[k, a] = ((W[a, 0] * x + W[a, 1] * y) + W[a, 2] * z) + W[a, 3]
            r[k] = s * lr
            v[k] = s * lv
        return ids, c, r, v

    def frustum(self, planes, eye=None, use_vd=False) -> np.ndarray:
        ids, c, r, v = self.flat()
        ok = np.ones(len(ids), dtype=bool)
        x, y, z = c[:, 0], c[:, 1], c[:, 2]
        for a, b, cc, d in planes:
            ok &= ~((((a * x + b * y) + cc * z) + d) < -r)
        if use_vd:
            dx, dy, dz = x - eye[0], y - eye[1], z - eye[2]
            ok &= np.sqrt((dx * dx + dy * dy) + dz * dz) <= v
        return ids[ok]


# --------------------------------------------------------------------------- helpers


def rigid(rng: np.random.Generator, spread: float = 20.0, scale: float | None = None,
          f32: bool = False) -> np.ndarray:
    """A random rotation (sometimes a reflection) times a uniform scale, plus a translation."""
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                  [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                  [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    if rng.random() < 0.2:
        R[:, 0] = -R[:, 0]
    s = scale if scale is not None else float(rng.choice([1.0, 0.5, 2.0, 0.01, 30.0,
                                                           rng.uniform(0.2, 5)]))
    M = np.eye(4)
    M[:3, :3] = s * R
    M[:3, 3] = rng.normal(size=3) * spread
    if f32:  # a float32-built rotation: orthogonal to ~1e-7 only
        M = M.astype(np.float32).astype(np.float64)
        M[3] = [0, 0, 0, 1]
    return M


def random_camera(rng: np.random.Generator, spread: float):
    eye = rng.uniform(-spread, spread, 3)
    target = eye + rng.normal(size=3)
    far = rng.uniform(0.3, 2.0) * spread * 2
    return eye, camera_planes(eye, target, fovy_deg=rng.uniform(30, 100),
                              aspect=rng.uniform(0.5, 2), near=0.1, far=far)


def state(h: NestedIndex, oracle: FlatOracle):
    """Everything observable, to compare before and after a rejected call."""
    ids = np.array(sorted(oracle.objs), dtype=np.int64)
    c, r, v = h.world_spheres(ids, with_view_distances=True)
    lc, lr, lv = h.local_spheres(ids)
    trans = {g: h.transform(g).tobytes() for g in h.groups()}
    return (len(h), tuple(h.groups()), tuple(h.object_groups(ids)), c.tobytes(), r.tobytes(),
            v.tobytes(), lc.tobytes(), lr.tobytes(), lv.tobytes(), tuple(trans.items()))


def check(h: NestedIndex, oracle: FlatOracle, rng: np.random.Generator, spread: float,
          cameras: int = 3) -> None:
    h.validate()
    assert len(h) == len(oracle.objs)
    ids, c, r, v = oracle.flat()
    if len(ids):
        gc, gr, gv = h.world_spheres(ids, with_view_distances=True)
        assert np.array_equal(gc, c) and np.array_equal(gr, r) and np.array_equal(gv, v), \
            "world spheres differ from the oracle's canonical ones"
    for _ in range(cameras):
        eye, planes = random_camera(rng, spread)
        for use_vd in (False, True):
            res = h.query_frustum(planes, eye=eye, use_view_distance=use_vd)
            got = np.sort(res.visible)
            want = oracle.frustum(planes, eye, use_vd)
            assert np.array_equal(got, want), (
                f"use_vd={use_vd}: extra {np.setdiff1d(got, want)[:10]}, "
                f"missing {np.setdiff1d(want, got)[:10]}")
            assert len(np.unique(res.visible)) == len(res.visible)


KINDS = [
    ("brute", {}, None),
    ("octree", {"split_threshold": 3}, 0),
    ("chunks", {}, 0),
    ("chunks", {}, None),
    ("icoseptree", {"split_threshold": 3, "leafy": True}, 0),
    ("grid", {}, 0),
    ("viewdist", {}, 0),
]
KIND_IDS = [f"{k}-{'inner' if m == 0 else 'scan'}" for k, _, m in KINDS]


def make(kind: str, kw: dict, inner_min) -> NestedIndex:
    return NestedIndex(kind, inner_min=inner_min, **kw)


OPS = ["group", "group", "transform", "transforms", "parent", "insert", "insert", "move",
       "move_group", "resize", "remove", "remove_group"]
ops = st.lists(st.tuples(st.sampled_from(OPS), st.integers(1, 40)), min_size=1, max_size=12)


def run_ops(h: NestedIndex, oracle: FlatOracle, seq, rng: np.random.Generator,
            spread: float, check_every: bool = True) -> None:
    next_gid = 0
    next_id = 0
    for op, k in seq:
        gids = list(oracle.groups)
        if op == "group" or not gids:
            parent = None if not gids or rng.random() < 0.3 else gids[rng.integers(len(gids))]
            M = rigid(rng, spread / 3, f32=rng.random() < 0.2)
            h.add_group(next_gid, parent, M)
            oracle.groups[next_gid] = [parent, M]
            next_gid += 1
        elif op == "transform":
            g = gids[rng.integers(len(gids))]
            M = rigid(rng, spread / 3)
            h.set_transform(g, M)
            oracle.groups[g][1] = M
        elif op == "transforms":
            pick = rng.choice(len(gids), size=min(len(gids), k % 5 + 1), replace=False)
            Ms = np.stack([rigid(rng, spread / 3) for _ in pick])
            h.set_transforms([gids[i] for i in pick], Ms)
            for i, M in zip(pick, Ms, strict=True):
                oracle.groups[gids[i]][1] = M
        elif op == "parent":
            g = gids[rng.integers(len(gids))]
            sub = oracle.subtree(g)
            choices = [None] + [x for x in gids if x not in sub]
            p = choices[rng.integers(len(choices))]
            h.set_parent(g, p)
            oracle.groups[g][0] = p
        elif op == "insert":
            g = gids[rng.integers(len(gids))]
            ids = np.arange(next_id, next_id + k, dtype=np.int64) * 3 + 7  # not dense from 0
            next_id += k
            c = rng.normal(size=(k, 3)) * rng.choice([0.5, 5.0, 20.0])
            r = rng.uniform(0.0, 3.0, k)
            vd = np.where(rng.random(k) < 0.3, np.inf, rng.uniform(0, spread * 2, k))
            h.insert(g, ids, c, r, vd)
            for i in range(k):
                oracle.objs[int(ids[i])] = [g, c[i].copy(), float(r[i]), float(vd[i])]
        elif op in ("move", "move_group", "resize") and oracle.objs:
            all_ids = np.array(sorted(oracle.objs), dtype=np.int64)
            if op == "move_group":
                g = gids[rng.integers(len(gids))]
                all_ids = np.array([i for i in all_ids.tolist() if oracle.objs[i][0] == g],
                                   dtype=np.int64)
                if not len(all_ids):
                    continue
            sel = rng.choice(all_ids, size=min(k, len(all_ids)), replace=False)
            if rng.random() < 0.5:
                sel = np.sort(sel)
            old = np.array([oracle.objs[int(i)][1] for i in sel])
            step = rng.choice([0.1, 3.0, 40.0])
            c = old + rng.normal(size=old.shape) * step
            r = rng.uniform(0, 4, len(sel)) if op == "resize" else None
            vd = rng.uniform(0, spread * 2, len(sel)) if op == "resize" else None
            h.update(g if op == "move_group" else None, sel, c, r, vd)
            for n, i in enumerate(sel.tolist()):
                o = oracle.objs[i]
                o[1] = c[n].copy()
                if r is not None:
                    o[2] = float(r[n])
                    o[3] = float(vd[n])
        elif op == "remove" and oracle.objs:
            all_ids = np.array(sorted(oracle.objs), dtype=np.int64)
            sel = rng.choice(all_ids, size=min(k, len(all_ids)), replace=False)
            h.remove(sel)
            for i in sel.tolist():
                del oracle.objs[i]
        elif op == "remove_group" and rng.random() < 0.5:
            g = gids[rng.integers(len(gids))]
            h.remove_group(g)
            oracle.remove_group(g)
        if check_every:
            check(h, oracle, rng, spread, cameras=2)


@pytest.mark.parametrize(("kind", "kw", "inner_min"), KINDS, ids=KIND_IDS)
@given(seq=ops, seed=st.integers(0, 2**31 - 1))
def test_random_operations_match_flattened_oracle(kind, kw, inner_min, seq, seed):
    rng = np.random.default_rng(seed)
    h = make(kind, kw, inner_min)
    oracle = FlatOracle()
    run_ops(h, oracle, seq, rng, spread=60.0)
    check(h, oracle, rng, 60.0, cameras=4)


# --------------------------------------------------------------------------- exact ties


def _tangent_d(n: np.ndarray, c: np.ndarray, rho: float) -> float:
    """The smallest plane offset d whose canonical value at c is >= -rho (one ulp less: <)."""
    part = (n[0] * c[0] + n[1] * c[1]) + n[2] * c[2]
    d = -part - rho
    while (part + d) >= -rho:
        d = np.nextafter(d, -np.inf)
    while (part + d) < -rho:
        d = np.nextafter(d, np.inf)
    return float(d)


@pytest.mark.parametrize(("kind", "kw", "inner_min"),
                         [("brute", {}, None), ("chunks", {}, 0), ("octree", {}, 0)],
                         ids=["brute-scan", "chunks-inner", "octree-inner"])
def test_exact_at_the_plane_and_at_the_view_distance(kind, kw, inner_min):
    """Objects exactly touching a world plane (to the last bit) are visible, one ulp beyond
    they are not; the same at the view distance, through rotated, scaled, nested frames."""
    rng = np.random.default_rng(5)
    h = make(kind, kw, inner_min)
    h.add_group("top", None, rigid(rng, 1e4, scale=3.7))
    h.add_group("mid", "top", rigid(rng, 50.0, scale=0.013))
    h.add_group("leaf", "mid", rigid(rng, 300.0, scale=11.0, f32=True))
    n = 60
    for g in ("top", "mid", "leaf"):
        base = {"top": 0, "mid": 1000, "leaf": 2000}[g]
        h.insert(g, np.arange(base, base + n), rng.normal(size=(n, 3)) * 40,
                 rng.uniform(0, 5, n), rng.uniform(10, 1e6, n))
    ids = np.concatenate([np.arange(b, b + n) for b in (0, 1000, 2000)])
    c, r, v = h.world_spheres(ids, with_view_distances=True)
    for k in rng.choice(len(ids), 25, replace=False):
        normal = rng.normal(size=3)
        normal /= np.linalg.norm(normal)
        d = _tangent_d(normal, c[k], r[k])
        loose = np.array([[0, 0, 1.0, 1e12], [0, 0, -1.0, 1e12], [0, 1.0, 0, 1e12],
                          [0, -1.0, 0, 1e12], [1.0, 0, 0, 1e12]])
        for dd, seen in ((d, True), (np.nextafter(d, -np.inf), False)):
            planes = np.vstack([[*normal, dd], loose])
            vis = h.query_frustum(planes).visible
            assert (ids[k] in vis) == seen, (k, dd, seen)
    # view distance: put the eye on the exact boundary along x
    for k in rng.choice(len(ids), 15, replace=False):
        planes = np.array([[0, 0, 1.0, 1e12], [0, 0, -1.0, 1e12], [0, 1.0, 0, 1e12],
                           [0, -1.0, 0, 1e12], [1.0, 0, 0, 1e12], [-1.0, 0, 0, 1e12]])
        ex = c[k, 0] - v[k]

        def dist(ex, k=k):
            dx, dy, dz = c[k, 0] - ex, 0.0, 0.0
            return np.sqrt((dx * dx + dy * dy) + dz * dz)

        while dist(ex) <= v[k]:
            ex = np.nextafter(ex, -np.inf)
        while dist(ex) > v[k]:
            ex = np.nextafter(ex, np.inf)
        for e, seen in ((ex, True), (np.nextafter(ex, -np.inf), False)):
            eye = np.array([e, c[k, 1], c[k, 2]])
            vis = h.query_frustum(planes, eye=eye, use_view_distance=True).visible
            assert (ids[k] in vis) == seen, (k, e, seen)


# --------------------------------------------------------------------------- bad input


def _scene(kind: str = "octree", inner_min=None):
    rng = np.random.default_rng(3)
    h = NestedIndex(kind, inner_min=inner_min)
    o = FlatOracle()
    for g, p in (("a", None), ("b", "a"), (7, "b")):
        M = rigid(rng, 10.0)
        h.add_group(g, p, M)
        o.groups[g] = [p, M]
    for g, base in (("a", 0), ("b", 100), (7, 200)):
        ids = np.arange(base, base + 20)
        c = rng.normal(size=(20, 3)) * 5
        rr = rng.uniform(0.1, 1, 20)
        h.insert(g, ids, c, rr)
        for i in range(20):
            o.objs[int(ids[i])] = [g, c[i], float(rr[i]), np.inf]
    moved = np.array([i for i in range(0, 220, 7) if i in o.objs])
    c = rng.normal(size=(len(moved), 3))
    h.update(None, moved, c)  # some stale rows
    for k, i in enumerate(moved.tolist()):
        o.objs[i][1] = c[k]
    return h, o


SHEAR = np.eye(4)
SHEAR[0, 1] = 0.3
NONUNIFORM = np.diag([1.0, 2.0, 1.0, 1.0])
ZERO = np.diag([0.0, 0.0, 0.0, 1.0])
NAN = np.eye(4)
NAN[1, 3] = np.nan
PROJECTIVE = np.eye(4)
PROJECTIVE[3, 0] = 0.1
ROWVEC = np.eye(4)
ROWVEC[3, :3] = [1.0, 2.0, 3.0]
HUGE = np.diag([1e60, 1e60, 1e60, 1.0])
BAD_CALLS = {
    "add existing group": lambda h: h.add_group("a"),
    "add with unknown parent": lambda h: h.add_group("z", "nope"),
    "add as own parent": lambda h: h.add_group("z", "z"),
    "add with float id": lambda h: h.add_group(1.5),
    "add with None id": lambda h: h.add_group(None),
    "add with bool id": lambda h: h.add_group(True),
    "shear": lambda h: h.add_group("z", "a", SHEAR),
    "non-uniform scale": lambda h: h.set_transform("b", NONUNIFORM),
    "zero scale": lambda h: h.set_transform("b", ZERO),
    "NaN transform": lambda h: h.set_transform(7, NAN),
    "projective row": lambda h: h.set_transform(7, PROJECTIVE),
    "row-vector matrix": lambda h: h.set_transform(7, ROWVEC),
    "wrong shape": lambda h: h.set_transform(7, np.eye(3)),
    "world scale overflow": lambda h: h.set_transform("b", HUGE),
    "world scale overflow on add": lambda h: h.add_group("z", "b", HUGE),
    "world scale overflow by re-parenting": lambda h: h.set_parent("big", "b"),
    "world scale overflow batch": lambda h: h.set_transforms(["a", "b"], np.stack([HUGE, HUGE])),
    "batch with one bad": lambda h: h.set_transforms(["a", 7], np.stack([np.eye(4), SHEAR])),
    "batch repeated group": lambda h: h.set_transforms(["a", "a"], np.stack([np.eye(4)] * 2)),
    "transform unknown group": lambda h: h.set_transform("q", np.eye(4)),
    "parent cycle": lambda h: h.set_parent("a", 7),
    "parent self": lambda h: h.set_parent("b", "b"),
    "parent unknown": lambda h: h.set_parent("b", "q"),
    "remove unknown group": lambda h: h.remove_group("q"),
    "insert unknown group": lambda h: h.insert("q", [1000], [[0, 0, 0]], [1.0]),
    "insert duplicate id in scene": lambda h: h.insert("a", [100], [[0, 0, 0]], [1.0]),
    "insert repeated id": lambda h: h.insert("a", [1000, 1000], np.zeros((2, 3)), [1.0, 1.0]),
    "insert NaN": lambda h: h.insert("a", [1000], [[np.nan, 0, 0]], [1.0]),
    "insert inf": lambda h: h.insert("a", [1000], [[np.inf, 0, 0]], [1.0]),
    "insert negative radius": lambda h: h.insert("a", [1000], [[0, 0, 0]], [-1.0]),
    "insert huge": lambda h: h.insert("a", [1000], [[1e200, 0, 0]], [1.0]),
    "insert NaN view distance": lambda h: h.insert("a", [1000], [[0, 0, 0]], [1.0], [np.nan]),
    "insert length mismatch": lambda h: h.insert("a", [1000, 1001], [[0, 0, 0]], [1.0]),
    "update unknown id": lambda h: h.update(None, np.array([5000]), np.zeros((1, 3))),
    "update repeated id": lambda h: h.update(None, np.array([1, 1]), np.zeros((2, 3))),
    "update wrong group": lambda h: h.update("a", np.array([1, 150]), np.zeros((2, 3))),
    "update NaN": lambda h: h.update(None, np.array([1, 2]), np.array([[0, 0, 0], [np.nan, 0, 0]])),
    "update negative radius": lambda h: h.update(None, np.array([1]), np.zeros((1, 3)),
                                                 np.array([-2.0])),
    "update huge": lambda h: h.update(None, np.array([3]), np.array([[0, 1e101, 0]])),
    "update list input": lambda h: h.update(None, [1, 1], [[0, 0, 0], [0, 0, 0]]),
    "update unknown group": lambda h: h.update("q", np.array([1]), np.zeros((1, 3))),
    "remove unknown id": lambda h: h.remove([1, 5000]),
    "remove repeated id": lambda h: h.remove([1, 1]),
    "remove float ids": lambda h: h.remove([1.5]),
    "world spheres unknown id": lambda h: h.world_spheres([5000]),
    "query NaN planes": lambda h: h.query_frustum(np.full((6, 4), np.nan)),
    "query bad planes shape": lambda h: h.query_frustum(np.zeros((6, 3))),
    "query vd without eye": lambda h: h.query_frustum(np.zeros((6, 4)), use_view_distance=True),
    "query occlusion": lambda h: h.query_frustum(np.zeros((6, 4)), occlusion=object()),
}


@pytest.mark.parametrize("what", list(BAD_CALLS), ids=list(BAD_CALLS))
def test_bad_input_raises_and_changes_nothing(what):
    h, o = _scene()
    if "world scale" in what:  # a legal first step: a group scaled by 1e60
        h.set_transform("a", HUGE)
        h.add_group("big", None, HUGE)
    before = state(h, o)
    with pytest.raises(ValueError):
        BAD_CALLS[what](h)
    assert state(h, o) == before
    h.validate()
    # still answers like a fresh copy of the same scene
    rng = np.random.default_rng(1)
    ref, _ = _scene()
    if "world scale" in what:
        ref.set_transform("a", HUGE)
        ref.add_group("big", None, HUGE)
    for _ in range(3):
        eye, planes = random_camera(rng, 20.0)
        assert np.array_equal(np.sort(h.query_frustum(planes).visible),
                              np.sort(ref.query_frustum(planes).visible))


def test_bad_construction():
    with pytest.raises(ValueError):
        NestedIndex("no-such-index")
    with pytest.raises(ValueError):
        NestedIndex("brute", leafy=True)
    with pytest.raises(ValueError):
        NestedIndex("octree", inner_min=-1)
    with pytest.raises(ValueError):
        NestedIndex("octree", inner_min=2.5)


# --------------------------------------------------------------------------- the structure


def test_moves_reach_the_inner_index_lazily():
    h, o = _scene("octree")
    st = h.stats()
    # _scene moved objects and nothing read the groups since: small groups are marked whole
    assert st["stale"] == 0 and st["dirty_groups"] > 0
    inner = h.group_index("b")  # reading a group flushes it
    ids = inner.all_ids()
    c, r, v = inner.get(ids)
    lc, lr, lv = h.local_spheres(ids)
    assert np.array_equal(c, lc) and np.array_equal(r, lr)
    h.flush()
    assert h.stats()["stale"] == 0 and h.stats()["dirty_groups"] == 0
    h.validate()
    # a group queried through its own index tracks its moved rows one by one
    h2, _ = _scene("octree", inner_min=10)
    assert h2.stats()["stale"] > 0
    h2.flush()
    assert h2.stats()["stale"] == 0
    h2.validate()


def test_turning_a_parent_moves_every_descendant_and_nothing_else_changes():
    rng = np.random.default_rng(11)
    h = NestedIndex("chunks", inner_min=0)
    o = FlatOracle()
    for g, p in (("track", None), ("seg0", "track"), ("seg1", "track"), ("cloud", None)):
        M = rigid(rng, 30.0)
        h.add_group(g, p, M)
        o.groups[g] = [p, M]
    base = 0
    for g in ("seg0", "seg1", "cloud"):
        c = rng.normal(size=(300, 3)) * 3
        rr = rng.uniform(0.1, 0.5, 300)
        h.insert(g, np.arange(base, base + 300), c, rr)
        for i in range(300):
            o.objs[base + i] = [g, c[i], float(rr[i]), np.inf]
        base += 300
    local_before = h.local_spheres(np.arange(900))[0].copy()
    for _ in range(8):
        M = rigid(rng, 30.0)
        h.set_transform("track", M)
        o.groups["track"][1] = M
        check(h, o, rng, 80.0, cameras=3)
    assert np.array_equal(h.local_spheres(np.arange(900))[0], local_before)


def test_node_boxes_are_the_inner_boxes_carried_to_world():
    rng = np.random.default_rng(2)
    h = NestedIndex("octree", split_threshold=4)
    M1 = rigid(rng, 10.0, scale=2.0)
    M2 = rigid(rng, 10.0, scale=0.5)
    h.add_group(1, None, M1)
    h.add_group(2, 1, M2)
    h.insert(1, np.arange(200), rng.normal(size=(200, 3)) * 10, rng.uniform(0.1, 1, 200))
    h.insert(2, np.arange(200, 400), rng.normal(size=(200, 3)) * 10, rng.uniform(0.1, 1, 200))
    eye, planes = random_camera(rng, 10.0)
    h.query_frustum(planes)  # lets the octrees split
    corners, owners, depth, level = h.node_boxes_info()
    assert corners.shape[1:] == (8, 3) and corners.shape[0] == len(owners) == depth.shape[0]
    assert h.node_boxes().shape == corners.shape
    assert set(owners) == {1, 2} and set(level.tolist()) == {0, 1}
    for g in (1, 2):
        lo, hi, d = h.group_index(g).node_boxes()
        W = h.world_transform(g)
        sel = np.array([x == g for x in owners])
        local = np.stack([np.where([k & 1, k & 2, k & 4], hi, lo) for k in range(8)], axis=1)
        want = local @ W[:3, :3].T + W[:3, 3]
        np.testing.assert_allclose(corners[sel], want, rtol=1e-12, atol=1e-9)
    gc, gids, glevel, outcome = h.group_boxes()
    assert gc.shape == (2, 8, 3) and gids == [1, 2] and glevel.tolist() == [0, 1]
    assert outcome.dtype == np.int8
    # every object's world centre lies in its group's turned box
    for k, g in enumerate(gids):
        W = h.world_transform(g)
        ids = np.arange(200) + (0 if g == 1 else 200)
        wc, _ = h.world_spheres(ids)
        loc = np.linalg.solve(W[:3, :3], (wc - W[:3, 3]).T).T
        box_local = np.linalg.solve(W[:3, :3], (gc[k] - W[:3, 3]).T).T
        assert (loc >= box_local.min(axis=0) - 1e-9).all()
        assert (loc <= box_local.max(axis=0) + 1e-9).all()


def test_many_groups_deep_tree_and_repacking():
    """200 groups in a deep tree, inserts that outgrow blocks, removals that leave holes, the
    arena repacked, turning groups: always the oracle's answer."""
    rng = np.random.default_rng(9)
    h = NestedIndex("brute")
    o = FlatOracle()
    gids = []
    for g in range(200):
        p = None if g < 5 else gids[rng.integers(len(gids))]
        M = rigid(rng, 8.0, scale=float(rng.uniform(0.7, 1.4)))
        h.add_group(g, p, M)
        o.groups[g] = [p, M]
        gids.append(g)
    nid = 0
    for _ in range(6):
        for g in rng.choice(200, 60, replace=False).tolist():
            k = int(rng.integers(1, 30))
            c = rng.normal(size=(k, 3)) * 4
            rr = rng.uniform(0, 1, k)
            h.insert(g, np.arange(nid, nid + k), c, rr)
            for i in range(k):
                o.objs[nid + i] = [g, c[i], float(rr[i]), np.inf]
            nid += k
        live = np.array(sorted(o.objs))
        gone = rng.choice(live, len(live) // 3, replace=False)
        h.remove(gone)
        for i in gone.tolist():
            del o.objs[i]
        turn = rng.choice(200, 20, replace=False).tolist()
        Ms = np.stack([rigid(rng, 8.0) for _ in turn])
        h.set_transforms(turn, Ms)
        for g, M in zip(turn, Ms, strict=True):
            o.groups[g][1] = M
        check(h, o, rng, 40.0, cameras=3)
    assert h.stats()["groups"] == 200
    h.remove_group(0)
    o.remove_group(0)
    check(h, o, rng, 40.0)


def test_validate_catches_a_record_left_pointing_at_replaced_arrays():
    """The per-frame calls go through one compiled record of the index's arrays (state.py);
    an array replaced without the record being made again is a broken invariant."""
    h, o = _scene("brute")
    planes = camera_planes(np.array([0.0, 0.0, -60.0]), np.zeros(3), far=200.0)
    h.query_frustum(planes)  # the record exists now
    h.validate()
    h._arena.codes = np.empty_like(h._arena.codes)  # a replaced scratch array, the record kept
    with pytest.raises(AssertionError, match="compiled record"):
        h.validate()
    h._record.drop()  # what every site that replaces an array does
    h.validate()
    want = np.sort(o.frustum(planes))
    assert want.shape[0] and np.array_equal(np.sort(h.query_frustum(planes).visible), want)


def test_rebuild_with_another_kind_answers_the_same():
    h, o = _scene("brute")
    h2 = h.rebuild("icoseptree", inner_min=0, leafy=True)
    h2.validate()
    assert h2.groups() == h.groups() and len(h2) == len(h)
    rng = np.random.default_rng(4)
    check(h2, o, rng, 20.0, cameras=4)


# --------------------------------------------------------------------------- the benchmark


def test_bench_runs_small_and_every_subject_is_exact():
    from app.bench.nested import crossover_lines, goal_lines, run

    rows = run([(6, 200)], [0.5, 0.1], 0.05, 2, ["chunks"], ["brute", "octree-inner"],
               progress=lambda s: None)
    assert {r.subject for r in rows} == {"numba-brute", "numba-brute-mt", "flat/chunks",
                                         "nested/brute", "nested/octree-inner"}
    assert all(r.exact == "yes" and not r.error for r in rows), [(r.subject, r.exact, r.error)
                                                                 for r in rows]
    assert any(r.inner_queries > 0 for r in rows if r.subject == "nested/octree-inner")
    assert len(goal_lines(rows)) == 1 and len(crossover_lines(rows)) == 2


def test_bench_command_line(tmp_path):
    import subprocess
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", "app", "bench", "nested", *args],
                              capture_output=True, text=True, timeout=600)

    md = tmp_path / "n.md"
    csv = tmp_path / "n.csv"
    p = run("--sizes", "5x100", "--sweep", "--fractions", "1,0.2", "--frames", "1", "--quiet",
            "--md", str(md), "--csv", str(csv))
    assert p.returncode == 0, p.stderr
    assert "goal (issue 15)" in p.stdout and "cross-over" in p.stdout
    assert md.read_text().startswith("# `python -m app bench nested` results")
    assert len(csv.read_text().splitlines()) == 1 + 2 * 5
    for bad in (["--sizes", "10"], ["--sizes", "0x10"], ["--turning", "2"], ["--frames", "0"],
                ["--flat", "nosuch"], ["--nested", "brute-outer"], ["--moving", "-1"],
                ["--sweep", "--fractions", "x"]):
        p = run(*bad)
        assert p.returncode == 2, (bad, p.stdout, p.stderr)
        assert p.stderr.startswith("bench nested:") and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("kind", "inner_min"), [("brute", None), ("chunks", 0)])
def test_extreme_magnitudes_still_exact(kind, inner_min):
    """Scales from 1e-40 to 1e40, translations and coordinates up to 1e30, planes with huge
    offsets or coefficients, a far eye: the float32 filter steps aside, answers stay exact."""
    rng = np.random.default_rng(8)
    h = NestedIndex(kind, inner_min=inner_min)
    o = FlatOracle()
    specs = [("tiny", None, 1e-40, 1e-30), ("huge", None, 1e40, 1e30), ("far", None, 1.0, 1e25),
             ("in_tiny", "tiny", 1e30, 1e10), ("in_huge", "huge", 1e-35, 1.0)]
    nid = 0
    for g, p, s, t in specs:
        M = rigid(rng, 1.0, scale=s)
        M[:3, 3] = rng.normal(size=3) * t
        h.add_group(g, p, M)
        o.groups[g] = [p, M]
        for mag in (1.0, 1e20):
            c = rng.normal(size=(40, 3)) * mag
            r = rng.uniform(0, 2, 40) * mag
            vd = np.where(rng.random(40) < 0.5, np.inf, rng.uniform(0, 5, 40) * mag)
            h.insert(g, np.arange(nid, nid + 40), c, r, vd)
            for i in range(40):
                o.objs[nid + i] = [g, c[i], float(r[i]), float(vd[i])]
            nid += 40
    h.validate()
    ids, wc, wr, wv = o.flat()
    got = h.world_spheres(ids, with_view_distances=True)
    assert all(np.array_equal(a, b) for a, b in zip(got, (wc, wr, wv), strict=True))
    with np.errstate(all="ignore"):
        for k in range(40):
            # planes through some object's neighbourhood, sometimes scaled far beyond unit
            target = wc[rng.integers(len(ids))]
            eye = target + rng.normal(size=3) * float(rng.choice([1.0, 1e10, 1e30]))
            planes = camera_planes(eye, target, far=float(np.linalg.norm(target - eye)) * 2 + 1)
            if k % 4 == 1:
                planes = planes * 1e200
            elif k % 4 == 2:
                planes[:, 3] += float(rng.choice([-1.0, 1.0])) * 1e250
            if not np.isfinite(planes).all():
                continue
            for use_vd in (False, True):
                res = h.query_frustum(planes, eye=eye, use_view_distance=use_vd)
                want = o.frustum(planes, eye, use_vd)
                assert np.array_equal(np.sort(res.visible), want), (k, use_vd)


def test_move_log_overflow_and_partial_scans():
    """More moves between queries than the move log holds, and queries that scan only some
    groups: the float32 copies catch up (row by row or block by block), answers stay exact."""
    rng = np.random.default_rng(12)
    h = NestedIndex("brute")
    o = FlatOracle()
    for g in range(30):
        M = rigid(rng, 40.0)
        h.add_group(g, None, M)
        o.groups[g] = [None, M]
        c = rng.normal(size=(400, 3)) * 4
        rr = rng.uniform(0.1, 1, 400)
        h.insert(g, np.arange(g * 400, g * 400 + 400), c, rr)
        for i in range(400):
            o.objs[g * 400 + i] = [g, c[i], float(rr[i]), np.inf]
    ids = np.arange(12000, dtype=np.int64)
    for step in range(6):
        moved = ids if step % 3 == 0 else np.sort(rng.choice(ids, 3000, replace=False))
        for _ in range(2):  # twice before a query: 24,000 log entries > the log's 4,096
            c = np.array([o.objs[int(i)][1] for i in moved]) + rng.normal(size=(len(moved), 3))
            h.update(None, moved, c)
            for k, i in enumerate(moved.tolist()):
                o.objs[i][1] = c[k]
        check(h, o, rng, 60.0, cameras=3)


# --------------------------------------------------------------------------- per-frame fast paths

M1 = np.eye(4)
M1[:3, 3] = [1.0, 2.0, 3.0]
BAD_FAST = {
    # (the good call that makes the next one take the fast path, the bad call)
    "transforms shear": (lambda h: h.set_transforms(["a", 7], np.stack([M1, M1])),
                         lambda h: h.set_transforms(["a", 7], np.stack([M1, SHEAR]))),
    "transforms NaN": (lambda h: h.set_transforms(["a", 7], np.stack([M1, M1])),
                       lambda h: h.set_transforms(["a", 7], np.stack([NAN, M1]))),
    "transforms projective": (lambda h: h.set_transforms(["a", 7], np.stack([M1, M1])),
                              lambda h: h.set_transforms(["a", 7], np.stack([M1, PROJECTIVE]))),
    "transforms world scale": (lambda h: h.set_transforms(["b", 7], np.stack([M1, M1])),
                               lambda h: h.set_transforms(["b", 7], np.stack([HUGE, M1]))),
    "transforms float id": (lambda h: h.set_transforms([7, "a"], np.stack([M1, M1])),
                            lambda h: h.set_transforms([7.0, "a"], np.stack([M1, M1]))),
    "transforms bool id": (lambda h: (1 in h.groups() or h.add_group(1),
                                      h.set_transforms([1, "a"], np.stack([M1, M1]))),
                           lambda h: h.set_transforms([True, "a"], np.stack([M1, M1]))),
    "transforms wrong count": (lambda h: h.set_transforms(["a", 7], np.stack([M1, M1])),
                               lambda h: h.set_transforms(["a", 7], np.stack([M1]))),
    "moves NaN": (lambda h: h.update(None, np.array([1, 2, 101]), np.ones((3, 3))),
                  lambda h: h.update(None, np.array([1, 2, 101]),
                                     np.array([[0, 0, 0], [np.nan, 0, 0], [0, 0, 0]]))),
    "moves huge": (lambda h: h.update(None, np.array([1, 2, 101]), np.ones((3, 3))),
                   lambda h: h.update(None, np.array([1, 2, 101]),
                                      np.array([[0, 0, 0], [0, 0, 0], [0, 1e101, 0]]))),
    "moves negative radius": (
        lambda h: h.update(None, np.array([1, 2, 101]), np.ones((3, 3)), np.ones(3)),
        lambda h: h.update(None, np.array([1, 2, 101]), np.ones((3, 3)),
                           np.array([1.0, -1.0, 1.0]))),
    "moves NaN view distance": (
        lambda h: h.update(None, np.array([1, 2, 101]), np.ones((3, 3)), None, np.ones(3)),
        lambda h: h.update(None, np.array([1, 2, 101]), np.ones((3, 3)), None,
                           np.array([1.0, np.nan, 1.0]))),
    "moves other unknown id": (lambda h: h.update(None, np.array([1, 2, 101]), np.ones((3, 3))),
                               lambda h: h.update(None, np.array([1, 2, 5000]),
                                                  np.ones((3, 3)))),
    "moves other repeated id": (lambda h: h.update(None, np.array([1, 2, 101]),
                                                   np.ones((3, 3))),
                                lambda h: h.update(None, np.array([1, 2, 1]), np.ones((3, 3)))),
    "moves wrong group": (lambda h: h.update("a", np.array([1, 2, 3]), np.ones((3, 3))),
                          lambda h: h.update("a", np.array([1, 2, 101]), np.ones((3, 3)))),
    "moves same ids wrong group": (lambda h: h.update(None, np.array([1, 2, 101]),
                                                      np.ones((3, 3))),
                                   lambda h: h.update("a", np.array([1, 2, 101]),
                                                      np.ones((3, 3)))),
    "query inf planes": (lambda h: h.query_frustum(np.zeros((6, 4))),
                         lambda h: h.query_frustum(np.full((6, 4), np.inf))),
    "query planes of 3 numbers": (lambda h: h.query_frustum(np.zeros((6, 4))),
                                  lambda h: h.query_frustum(np.zeros((6, 3)))),
    "query NaN eye": (lambda h: h.query_frustum(np.zeros((6, 4)), eye=np.zeros(3)),
                      lambda h: h.query_frustum(np.zeros((6, 4)),
                                                eye=np.array([0.0, np.nan, 0.0]),
                                                use_view_distance=True)),
    "query eye of 4 numbers": (lambda h: h.query_frustum(np.zeros((6, 4)), eye=np.zeros(3)),
                               lambda h: h.query_frustum(np.zeros((6, 4)), eye=np.zeros(4))),
}


@pytest.mark.parametrize("what", list(BAD_FAST), ids=list(BAD_FAST))
def test_fast_paths_bad_input_raises_and_changes_nothing(what):
    """The per-frame paths (the same groups / movers as the last call: one compiled call that
    checks and writes) refuse bad input like the checked paths and change nothing."""
    good, bad = BAD_FAST[what]
    h, o = _scene()
    ref, _ = _scene()
    if "world scale" in what:  # a group scaled by 1e60: another 1e60 below leaves range
        for x in (h, ref):
            x.set_transform("a", HUGE)
    rng = np.random.default_rng(2)
    for x in (h, ref):
        for _ in range(2):  # the second call takes the fast path
            good(x)
        x.query_frustum(random_camera(rng, 20.0)[1])
    before = state(h, o)
    with pytest.raises(ValueError):
        bad(h)
    assert state(h, o) == before
    h.validate()
    for _ in range(3):
        eye, planes = random_camera(rng, 20.0)
        assert np.array_equal(np.sort(h.query_frustum(planes).visible),
                              np.sort(ref.query_frustum(planes).visible))
    good(h)  # the fast path still works after the refusal
    good(ref)
    h.validate()
    assert state(h, o) == state(ref, o)


def _bounds(h: NestedIndex) -> list:
    G = h._tree.G
    live = np.flatnonzero(G.alive)
    return [a[live].tobytes() for a in (G.world_c, G.world_r, G.world_vd, G.world_mag, G.sub_c,
                                        G.sub_r, G.sub_vd, G.own_c, G.own_r, G.own_vd)]


def test_fast_frames_match_the_oracle_and_a_full_refresh():
    """Frames through the fast paths (the same turning groups and movers every frame) in a
    tree with subtrees: answers equal the flattened oracle's, the bounds refreshed for the
    changed groups only equal the full pass's, bit for bit, and the movers' rows packed to
    the front of their blocks (sorted movers, then the same in no order) keep every
    invariant."""
    rng = np.random.default_rng(21)
    h = NestedIndex("brute")
    o = FlatOracle()
    parents = [None, None, 0, 0, 2, None, 5, 6, 6, 1]
    for g, p in enumerate(parents):
        M = rigid(rng, 30.0, scale=float(rng.uniform(0.5, 2)))
        h.add_group(g, p, M)
        o.groups[g] = [p, M]
        n = int(rng.integers(0, 300))
        c = rng.normal(size=(n, 3)) * 6
        rr = rng.uniform(0.1, 1, n)
        h.insert(g, np.arange(g * 1000, g * 1000 + n), c, rr)
        for i in range(n):
            o.objs[g * 1000 + i] = [g, c[i], float(rr[i]), np.inf]
    ids = np.array(sorted(o.objs), dtype=np.int64)
    movers = np.sort(rng.choice(ids, len(ids) // 5, replace=False))
    turning = [0, 2, 6, 9]
    for frame in range(16):
        if frame == 8:  # the same movers in no order (each group's in several runs), after
            movers = rng.permutation(movers)  # an insert: they are packed again
            h.insert(0, [99999], [[0.5, 0.5, 0.5]], [0.7])
            o.objs[99999] = [0, np.array([0.5, 0.5, 0.5]), 0.7, np.inf]
            packed = h._arena.packed
        mats = np.stack([rigid(rng, 30.0, scale=float(rng.uniform(0.5, 2))) for _ in turning])
        h.set_transforms(turning, mats)
        for g, M in zip(turning, mats, strict=True):
            o.groups[g][1] = M
        c = np.array([o.objs[int(i)][1] for i in movers]) + rng.normal(
            size=(len(movers), 3)) * (3.0 if frame % 4 == 3 else 0.3)  # sometimes far: loose
        h.update(None, movers, c)
        for k, i in enumerate(movers.tolist()):
            o.objs[i][1] = c[k]
        eye, planes = random_camera(rng, 40.0)
        got = np.sort(h.query_frustum(planes).visible)
        assert np.array_equal(got, o.frustum(planes))
        fast = _bounds(h)
        h._tree.bounds_dirty = True
        h._refresh()
        assert fast == _bounds(h), f"frame {frame}: the listed groups' refresh differs"
        h.validate()  # the movers' rows packed to their blocks' fronts after three frames
    assert h._arena.packed > packed >= 0
    check(h, o, rng, 40.0)


@pytest.mark.parametrize("form", ["read-only", "strided", "float32", "lists"])
def test_per_frame_calls_take_any_array_form(form):
    """The per-frame calls are compiled for float64 C-contiguous writable arrays; any other
    form of the same numbers (read-only, strided, float32, lists) gives the same answer,
    frame after frame, with every invariant kept: copied into the compiled form first where
    that is lossless (an update's strided or float32 rows, a list), else the checked path."""
    rng = np.random.default_rng(33)
    h = NestedIndex("brute")
    o = FlatOracle()
    for g in range(6):
        M = rigid(rng, 30.0)
        h.add_group(g, None if g < 3 else g - 3, M)
        o.groups[g] = [None if g < 3 else g - 3, M]
        c = rng.normal(size=(80, 3)) * 6
        rr = rng.uniform(0.1, 1, 80)
        h.insert(g, np.arange(g * 100, g * 100 + 80), c, rr)
        for i in range(80):
            o.objs[g * 100 + i] = [g, c[i], float(rr[i]), np.inf]
    movers = np.array(sorted(o.objs), dtype=np.int64)[::4]
    turning = [1, 4]

    def shaped(a: np.ndarray, frame: int):
        if frame < 4:  # the compiled path first, then the other form
            return a
        if form == "read-only":
            a = a.copy()
            a.setflags(write=False)
            return a
        if form == "strided":
            wide = np.zeros((a.shape[0], 2) + a.shape[1:], a.dtype)
            wide[:, 0] = a
            return wide[:, 0]
        if form == "float32":
            return a.astype(np.float32) if a.dtype == np.float64 else a
        return a.tolist()

    for frame in range(8):
        mats = np.stack([rigid(rng, 30.0) for _ in turning])
        h.set_transforms(turning, shaped(mats, frame))
        for g, M in zip(turning, mats, strict=True):
            o.groups[g][1] = M
        c = np.array([o.objs[int(i)][1] for i in movers]) + rng.normal(size=(len(movers), 3))
        if form == "float32":
            c = c.astype(np.float32).astype(np.float64)  # the numbers float32 can hold
        h.update(None, shaped(movers, frame), shaped(c, frame))
        for k, i in enumerate(movers.tolist()):
            o.objs[i][1] = c[k]
        eye, planes = random_camera(rng, 40.0)
        if form == "float32":
            planes = planes.astype(np.float32).astype(np.float64)
        got = np.sort(h.query_frustum(shaped(planes, frame)).visible)
        assert np.array_equal(got, o.frustum(planes)), f"frame {frame}"
        h.validate()


def test_a_deep_copy_is_its_own_index():
    """``copy.deepcopy`` copies everything but the compiled record (which points at the
    original's arrays): the copy answers the same, then moves on its own."""
    import copy

    h, o = _scene("brute")
    rng = np.random.default_rng(5)
    eye, planes = random_camera(rng, 20.0)
    h.query_frustum(planes)  # the original's record exists
    dup = copy.deepcopy(h)
    dup.validate()
    assert np.array_equal(np.sort(dup.query_frustum(planes).visible),
                          np.sort(h.query_frustum(planes).visible))
    ids = np.array(sorted(o.objs)[:10], dtype=np.int64)
    for _ in range(3):  # the per-frame path on the copy writes the copy's arrays only
        dup.update(None, ids, rng.normal(size=(10, 3)) * 40)
    before = np.sort(h.query_frustum(planes).visible)
    assert np.array_equal(before, np.sort(o.frustum(planes)))
    dup.validate()
    h.validate()
