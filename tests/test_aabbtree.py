"""Behaviour specific to the dynamic AABB tree (Shagam): lazy splits, heuristics, GC, update,
lazy refit with defragmentation, wholesale acceptance, view distance, occlusion, validate."""

from __future__ import annotations

import numpy as np
import pytest

from app.culling.frustum import camera_planes, look_at, perspective
from app.geom import predicates as geo
from app.geom.zpyramid import ZPyramid
from app.spatial import create_index
from app.spatial.aabbtree import CHILDREN, DEFAULT_THRESHOLDS, AABBTree
from app.spatial.aabbtree.batches import find_places
from app.spatial.aabbtree.bounds import BOX_SLACK, refit_node
from app.spatial.aabbtree.pool import ROOT
from app.spatial.aabbtree.split import find_place
from tests.oracle import Oracle

HEURISTICS = list(CHILDREN)
EVERYTHING = np.array([[1, 0, 0, 1e6], [-1, 0, 0, 1e6], [0, 1, 0, 1e6], [0, -1, 0, 1e6],
                       [0, 0, 1, 1e6], [0, 0, -1, 1e6]], float)


def uniform(n: int, seed: int = 0, spread: float = 100.0, rmax: float = 1.0):
    rng = np.random.default_rng(seed)
    return (np.arange(n, dtype=np.int64), rng.uniform(-spread, spread, (n, 3)),
            rng.uniform(0.05, rmax, n))


def filled(name: str, n: int = 2000, leafy: bool = False, t: int = 8, seed: int = 0):
    idx = create_index(name, leafy=leafy, split_threshold=t)
    ids, c, r = uniform(n, seed)
    idx.insert(ids, c, r)
    return idx, ids, c, r


def settle(idx: AABBTree, query, rounds: int = 40):
    """Run ``query`` and the whole upkeep until the query leaves it nothing to do (what one
    query did when queries split): the tree the paper's laziness builds for that view."""
    out = query()
    for _ in range(rounds):
        if idx.maintain() == 0:
            break
        out = query()
    return out


def slot_of(idx: AABBTree, i: int) -> int:
    return int(idx._idmap.lookup(np.array([i]))[0])


@pytest.mark.parametrize("name", HEURISTICS)
def test_defaults_and_describe(name):
    for leafy, want in ((True, DEFAULT_THRESHOLDS[name][0]), (False, DEFAULT_THRESHOLDS[name][1])):
        idx = create_index(name, leafy=leafy)
        assert idx.split_threshold == want
        assert idx.describe() == f"{name} {'leafy' if leafy else 'non-leafy'} t={want}"
    assert DEFAULT_THRESHOLDS == {"kd": (35, 30), "ternary": (25, 20), "octree": (40, 30),
                                  "icoseptree": (70, 50)}
    assert create_index(name, split_threshold=7).split_threshold == 7
    for bad in (0, -3, 2.5, True, "10"):
        with pytest.raises(ValueError):
            create_index(name, split_threshold=bad)


@pytest.mark.parametrize("name", HEURISTICS)
def test_splits_follow_queries_not_inserts(name):
    idx, ids, c, r = filled(name)
    assert idx.stats()["nodes"] == 1, "insertion must not split"
    # a view that sees nothing notes nothing and splits nothing
    far_away = camera_planes([1e4, 1e4, 1e4], [2e4, 1e4, 1e4], far=10)
    assert len(idx.query_frustum(far_away).visible) == 0
    assert idx.maintain() == 0 and idx.stats()["nodes"] == 1
    # a query reads the tree: it notes the overfull root and leaves it as it is (no catch-up)
    idx.catchup_share = 1.0
    planes = camera_planes([0, 0, 0], [1, 0, 0], far=150)
    first = idx.query_frustum(planes)
    assert idx.stats()["nodes"] == 1 and idx.stats()["pending_nodes"] == 1
    idx.validate()
    res = settle(idx, lambda: idx.query_frustum(planes))
    assert np.array_equal(np.sort(res.visible), np.sort(first.visible))
    st = idx.stats()
    assert st["nodes"] > 1 and st["split_nodes"] >= 1
    idx.validate()
    # partially seen leaves over the threshold were split; leaves outside may stay big
    lo, hi, depth = idx.node_boxes()
    assert depth.max() >= 2
    assert res.nodes_visited >= 1


@pytest.mark.parametrize("query", ["box", "sphere", "ray"])
def test_other_queries_note_splits_too(query):
    idx, ids, c, r = filled("octree")
    run = {"box": lambda: idx.query_box([-10, -10, -10], [10, 10, 10]),
           "sphere": lambda: idx.query_sphere([0, 0, 0], 10.0),
           "ray": lambda: idx.query_ray([0, 0, 0], [1, 0.3, 0.2])}[query]
    run()
    assert idx.stats()["nodes"] == 1 and idx.stats()["pending_nodes"] == 1
    settle(idx, run)
    assert idx.stats()["nodes"] > 1
    idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
@pytest.mark.parametrize("leafy", [True, False])
def test_pathological_one_point_keeps_node_split(name, leafy):
    idx = create_index(name, leafy=leafy, split_threshold=5)
    n = 300
    idx.insert(np.arange(n), np.full((n, 3), 5.0), np.full(n, 1.0))
    for _ in range(3):  # must terminate, and must not split again
        assert len(idx.query_box([5, 5, 5], [9, 9, 9])) == n
    st = idx.stats()
    assert st["nodes"] == 1 and st["split_nodes"] == 1 and st["stuck_split_nodes"] == 1
    idx.validate()
    # a new object elsewhere goes into a child of the stuck node; everything stays exact
    idx.insert(np.array([n]), np.array([[50.0, 50.0, 50.0]]), np.array([1.0]))
    assert len(idx.query_frustum(EVERYTHING).visible) == n + 1
    idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
def test_removal_collects_garbage_and_unsplits(name):
    rng = np.random.default_rng(1)
    n = 400
    a = rng.normal(scale=3.0, size=(n, 3)) + [-60, 0, 0]
    b = rng.normal(scale=3.0, size=(n, 3)) + [60, 0, 0]
    idx = create_index(name, split_threshold=10)
    idx.insert(np.arange(2 * n), np.r_[a, b], np.full(2 * n, 0.2))
    settle(idx, lambda: idx.query_box([-100, -100, -100], [100, 100, 100]))
    before = idx.stats()["nodes"]
    idx.remove(np.arange(n, 2 * n))  # the right cluster goes
    idx.validate()
    assert idx.stats()["nodes"] < before
    idx.remove(np.arange(n))
    idx.validate()
    st = idx.stats()
    assert st["nodes"] == 1 and st["split_nodes"] == 0 and len(idx) == 0
    lo, hi, depth = idx.node_boxes()
    assert lo.shape == (0, 3)  # the empty root is not drawn
    # and the tree is usable again
    idx.insert(np.array([1]), np.array([[0.0, 0, 0]]), np.array([1.0]))
    assert list(idx.query_sphere([0, 0, 0], 0.5)) == [1]
    idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
def test_small_move_keeps_node(name):
    idx, ids, c, r = filled(name)
    settle(idx, lambda: idx.query_box([-100, -100, -100], [100, 100, 100]))
    nodes = idx._objs.node.copy()
    # nudge objects a hair towards the centre of their node's box: still inside it
    s = idx._idmap.lookup(ids)
    centre = 0.5 * (idx._nodes.lo[nodes[s]] + idx._nodes.hi[nodes[s]])
    c2 = c + 1e-6 * (centre - c)
    idx.update(ids, c2)
    assert idx.last_moved == 0
    assert np.array_equal(idx._objs.node, nodes)
    idx.validate()
    # a long jump does move objects
    far = c2.copy()
    far[:10] += 500.0
    idx.update(ids, far)
    assert idx.last_moved >= 1  # (a leaf of the far octant may simply grow)
    idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
def test_big_object_leafy_vs_non_leafy(name):
    for leafy in (True, False):
        idx, ids, c, r = filled(name, n=600, leafy=leafy, t=5)
        big = 10_000
        idx.insert(np.array([big]), np.array([[1.0, 2.0, 3.0]]), np.array([60.0]))
        settle(idx, lambda i=idx: i.query_box([-100, -100, -100], [100, 100, 100]))
        idx.validate()
        node = idx._objs.node[slot_of(idx, big)]
        if leafy:
            if CHILDREN[name] in (2, 8):  # by center: it goes down like any other object
                assert node != ROOT
            assert idx._nodes.nchild[node] == 0 or CHILDREN[name] in (3, 27)
        else:
            # (2r)^3 >= 1/8 of the root's box: kept at the root
            assert node == ROOT and idx._nodes.is_split[ROOT]


@pytest.mark.parametrize("name", HEURISTICS)
def test_working_set_and_wholesale_acceptance(name):
    idx, ids, c, r = filled(name)
    res = idx.query_frustum(EVERYTHING)
    assert len(res.visible) == len(ids) and res.working_set == len(ids)
    assert res.nodes_visited == idx.stats()["nodes"]
    out = idx.node_outcomes()
    assert out.shape == idx.node_boxes()[2].shape
    # nothing was split (root fully inside: no reason to), root accepted wholesale
    assert (out == geo.NODE_INSIDE).all()
    planes = camera_planes([0, 0, 0], [1, 0.2, 0.1], far=120)
    res = settle(idx, lambda: idx.query_frustum(planes))
    assert res.working_set >= len(res.visible)
    out = idx.node_outcomes()
    lo, hi, depth = idx.node_boxes()
    assert lo.shape == hi.shape == (depth.shape[0], 3) and out.shape == depth.shape
    assert set(np.unique(out)) <= {geo.NODE_NOT_VISITED, geo.NODE_INSIDE, geo.NODE_PARTIAL,
                                   geo.NODE_REJECT_FRUSTUM}
    assert (out == geo.NODE_INSIDE).any() and (out == geo.NODE_REJECT_FRUSTUM).any()
    assert (out != geo.NODE_NOT_VISITED).sum() == res.nodes_visited
    oracle = Oracle()
    oracle.insert(ids, c, r)
    assert np.array_equal(np.sort(res.visible), oracle.frustum(planes))


@pytest.mark.parametrize("nplanes", [0, 1, 4, 7, 8, 9, 13])
@pytest.mark.parametrize("name", ["kd", "icoseptree"])
def test_any_number_of_planes_is_exact(name, nplanes):
    """Plane masks hold a bit a plane up to MASKED_PLANES and one bit for all beyond: every
    count answers as the oracle, the view's nodes split or not."""
    idx, ids, c, r = filled(name, leafy=nplanes % 2 == 0)
    oracle = Oracle()
    oracle.insert(ids, c, r)
    rng = np.random.default_rng(nplanes)
    normals = rng.normal(size=(nplanes, 3))
    normals /= np.linalg.norm(normals, axis=1)[:, None]
    planes = np.column_stack([normals, rng.uniform(-20.0, 60.0, nplanes)])
    for _ in range(3):  # the first query splits the view's leaves; the later ones walk them
        res = idx.query_frustum(planes)
        assert np.array_equal(np.sort(res.visible), oracle.frustum(planes))
        idx.maintain()
    idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
def test_view_distance_rejects_nodes(name):
    rng = np.random.default_rng(4)
    ids, c, r = uniform(4000, 4)
    vd = 40 * r
    idx = create_index(name, split_threshold=8)
    idx.insert(ids, c, r, vd)
    oracle = Oracle()
    oracle.insert(ids, c, r, vd)
    eye = np.zeros(3)
    planes = camera_planes(eye, [1, 0, 0], far=300)
    res = settle(idx, lambda: idx.query_frustum(planes, eye=eye, use_view_distance=True))
    assert np.array_equal(np.sort(res.visible), oracle.frustum(planes, eye, True))
    assert (idx.node_outcomes() == geo.NODE_REJECT_VIEWDIST).any()
    # shrink some view distances: bounds are invalidated and the answer stays exact
    sel = rng.choice(ids, 500, replace=False)
    idx.update(sel, c[sel], view_distances=np.zeros(500))
    oracle.update(sel, c[sel], vd=np.zeros(500))
    res = idx.query_frustum(planes, eye=eye, use_view_distance=True)
    assert np.array_equal(np.sort(res.visible), oracle.frustum(planes, eye, True))
    idx.validate()


def test_occlusion_counts_and_subset():
    idx, ids, c, r = filled("octree", n=3000)
    eye = np.array([-150.0, 0, 0])
    target = np.zeros(3)
    proj = perspective(60, 1.0, 0.1, 500)
    view = look_at(eye, target)
    planes = camera_planes(eye, target, aspect=1.0, far=500)
    vp = proj @ view
    # a wall at window depth 0.5 everywhere: far objects are hidden, near ones are not
    levels = []
    w = 64
    while True:
        levels.append(np.full((w, w), 0.9, np.float32))
        if w == 1:
            break
        w //= 2
    pyr = ZPyramid.from_levels(vp, levels)
    free = idx.query_frustum(planes)
    occ = idx.query_frustum(planes, occlusion=pyr)
    assert occ.occluded_nodes + occ.occluded_objects > 0
    assert set(occ.visible) <= set(free.visible)
    assert len(occ.visible) < len(free.visible)
    assert (idx.node_outcomes() == geo.NODE_REJECT_OCCLUSION).any() or occ.occluded_nodes == 0
    idx.validate()


def test_refit_recentres_split_point():
    idx, ids, c, r = filled("octree", n=3000, t=8)
    settle(idx, lambda: idx.query_frustum(EVERYTHING[:1] * [[1, 0, 0, 0]]
                                          + [[0, 0, 0, 0]]))  # half space x >= 0
    nd = idx._nodes
    assert nd.is_split[ROOT]
    # remove the objects that touch the root box: the root gets dirty, the next query refits it
    lo, hi = nd.lo[ROOT].copy(), nd.hi[ROOT].copy()
    tol = 2 * BOX_SLACK * max(np.abs(lo).max(), np.abs(hi).max())  # (slack_of)
    flush = ((c - r[:, None] <= lo + tol) | (c + r[:, None] >= hi - tol)).any(axis=1)
    idx.remove(ids[flush])
    assert nd.dirty[ROOT]
    # the weighted mean of 2.1.6, from the state the refit sees
    t = idx.split_threshold
    kids = nd.child[ROOT][nd.child[ROOT] >= 0]
    b = nd.start[ROOT]
    own = list(idx._objs.slot[b:b + nd.count[ROOT]]) if b >= 0 else []
    want = ((idx._centers[own].sum(axis=0) + t * nd.split[kids].sum(axis=0))
            / (len(own) + t * len(kids)))
    refit_node(nd, idx._objs, idx._spheres(), ROOT, t)
    np.testing.assert_allclose(nd.split[ROOT], want, rtol=1e-12, atol=1e-9)
    # full queries and their upkeep refit the children, then the root again
    settle(idx, lambda: idx.query_box([-200, -200, -200], [200, 200, 200]))
    keep_ = ~flush
    got_lo, got_hi = idx._nodes.lo[ROOT], idx._nodes.hi[ROOT]
    want_lo, want_hi = (c - r[:, None])[keep_].min(axis=0), (c + r[:, None])[keep_].max(axis=0)
    # the union, within the records' slack (built from float32 records, see kernels)
    slack = 2 * BOX_SLACK * max(np.abs(got_lo).max(), np.abs(got_hi).max())
    assert (got_lo <= want_lo).all() and (got_lo >= want_lo - slack).all()
    assert (got_hi >= want_hi).all() and (got_hi <= want_hi + slack).all()
    assert (want_lo - got_lo).max() > 0  # (the slack is there: a clean box is not exact)
    # queries refit lazily and stay exact
    res = idx.query_box([-1, -1, -1], [1, 1, 1])
    oracle = Oracle()
    keep = ~flush
    oracle.insert(ids[keep], c[keep], r[keep])
    assert np.array_equal(np.sort(res), oracle.box(np.full(3, -1.0), np.ones(3)))
    idx.validate()


def _corruptions():
    def box(idx):
        leaf = int(np.flatnonzero((idx._nodes.depth >= 1) & (idx._nodes.count > 0))[0])
        idx._nodes.hi[leaf] -= 5.0

    def count(idx):
        leaf = int(np.flatnonzero((idx._nodes.depth >= 1) & (idx._nodes.count > 0))[0])
        idx._nodes.count[leaf] += 1

    def pos(idx):
        leaf = int(np.flatnonzero((idx._nodes.depth >= 1) & (idx._nodes.count > 1))[0])
        s = idx._objs.slot[idx._nodes.start[leaf]]
        idx._objs.pos[s] += 1

    def record(idx):
        leaf = int(np.flatnonzero((idx._nodes.depth >= 1) & (idx._nodes.count > 1))[0])
        idx._objs.rec[idx._nodes.start[leaf], 0] += 0.5

    def overlap(idx):
        a, b = np.flatnonzero((idx._nodes.depth >= 1) & (idx._nodes.count > 1))[:2]
        idx._nodes.start[b] = idx._nodes.start[a]

    def free_list(idx):
        n = int(np.flatnonzero((idx._nodes.depth >= 1) & (idx._nodes.count > 1))[0])
        c = int(np.log2(idx._nodes.cap[n]))
        idx._objs.slot[idx._nodes.start[n]] = -(idx._objs.free[c] + 3)
        idx._objs.free[c] = idx._nodes.start[n]

    def parent(idx):
        n = int(np.flatnonzero(idx._nodes.depth >= 2)[0])
        idx._nodes.parent[n] = ROOT

    def free(idx):
        idx._nodes.free[0] = ROOT

    def empty_leaf(idx):
        leaf = int(np.flatnonzero((idx._nodes.depth >= 1) & (idx._nodes.nchild == 0))[0])
        b = idx._nodes.start[leaf]
        idx._objs.node[idx._objs.slot[b:b + idx._nodes.count[leaf]]] = -1
        idx._objs.slot[b:b + idx._nodes.count[leaf]] = -1
        idx._nodes.start[leaf] = -1
        idx._nodes.cap[leaf] = 0
        idx._nodes.count[leaf] = 0

    def clean_but_loose(idx):
        n = int(np.flatnonzero(idx._nodes.depth >= 1)[0])
        idx._nodes.dirty[n] = False
        idx._nodes.lo[n] -= 1.0
        idx._nodes.lo[ROOT] = np.minimum(idx._nodes.lo[ROOT], idx._nodes.lo[n])
        p = idx._nodes.parent[n]
        while p >= 0:
            idx._nodes.lo[p] = np.minimum(idx._nodes.lo[p], idx._nodes.lo[n])
            p = idx._nodes.parent[p]

    def split_flag(idx):
        n = int(np.flatnonzero(idx._nodes.nchild > 0)[0])
        idx._nodes.is_split[n] = False

    return {f.__name__: f for f in (box, count, pos, record, overlap, free_list, parent, free,
                                    empty_leaf, clean_but_loose, split_flag)}


@pytest.mark.parametrize("corrupt", list(_corruptions()))
def test_validate_catches_corruption(corrupt):
    idx, ids, c, r = filled("icoseptree", n=1500, t=6)
    settle(idx, lambda: idx.query_frustum(EVERYTHING[:1] * [[1, 0, 0, 0]]))
    settle(idx, lambda: idx.query_box([-100, -100, -100], [100, 100, 100]))
    idx.validate()
    _corruptions()[corrupt](idx)
    with pytest.raises(AssertionError):
        idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
def test_moving_crowd_stays_exact(name):
    rng = np.random.default_rng(9)
    ids, c, r = uniform(3000, 9, spread=60)
    idx = create_index(name)  # paper defaults
    idx.insert(ids, c, r)
    oracle = Oracle()
    oracle.insert(ids, c, r)
    eye = np.zeros(3)
    for f in range(8):
        c = c + rng.normal(scale=1.0, size=c.shape)
        idx.update(ids, c)
        oracle.update(ids, c)
        planes = camera_planes(eye, [np.cos(f), 0.2, np.sin(f)], far=80)
        res = idx.query_frustum(planes)
        assert np.array_equal(np.sort(res.visible), oracle.frustum(planes))
    idx.validate()
    st = idx.stats()
    assert sum(st["objects_per_level"]) == len(ids)
    assert st["max_depth"] == len(st["objects_per_level"]) - 1


@pytest.mark.parametrize("name", HEURISTICS)
@pytest.mark.parametrize("leafy", [True, False])
def test_batch_insert_places_as_one_descent_each(name, leafy):
    """find_places (the batch's descents level by level) answers what find_place answers for
    each object alone; a batch whose objects share a child nobody has made yet makes that
    leaf once and puts them all in it."""
    idx, ids, c, r = filled(name, n=3000, leafy=leafy, t=8, seed=3)
    settle(idx, lambda: idx.query_box([-100, -100, -100], [100, 100, 100]))
    # An emptied corner: its leaves are collected, and children there are to be made again.
    gone = ids[(c >= 40).all(axis=1)]
    idx.remove(gone)
    ids = np.setdiff1d(ids, gone)
    rng = np.random.default_rng(4)
    # Across the tree and in the corner, big and small.
    c_new = np.concatenate([rng.uniform(-100, 100, (300, 3)), rng.uniform(45, 95, (60, 3))])
    r_new = np.concatenate([rng.uniform(0.05, 1.0, 330), rng.uniform(20.0, 60.0, 30)])
    new = np.arange(10_000, 10_000 + c_new.shape[0], dtype=np.int64)
    nd, sp = idx._nodes, idx._spheres()
    # The store's rows for the batch, as insert writes them before the tree's kernel runs.
    slots = np.arange(c_new.shape[0], dtype=np.int64)
    fake = sp._replace(centers=c_new, radii=r_new, vdist=np.full(c_new.shape[0], np.inf))
    keep = idx._rules.keep
    at, c_of = find_places(nd.child, nd.is_split, nd.axis, nd.split, nd.lo, nd.hi, keep,
                              fake, slots)
    for i in range(c_new.shape[0]):
        one = find_place(nd.child, nd.is_split, nd.axis, nd.split, nd.lo, nd.hi, keep,
                            ROOT, *c_new[i], r_new[i])
        assert (at[i], c_of[i]) == one, i
    fresh = {(int(a), int(b)) for a, b in zip(at, c_of, strict=True) if b >= 0}
    assert fresh, "the batch should reach children not made yet"
    live = int((nd.depth >= 0).sum())
    idx.insert(new, c_new, r_new)
    idx.validate()
    assert int((idx._nodes.depth >= 0).sum()) == live + len(fresh)
    for i in np.flatnonzero(c_of >= 0):
        placed = idx._objs.node[slot_of(idx, int(new[i]))]
        assert idx._nodes.parent[placed] == at[i] and idx._nodes.child[at[i], c_of[i]] == placed
    got = idx.query_box([-200, -200, -200], [200, 200, 200])
    assert set(got.tolist()) == set(ids.tolist()) | set(new.tolist())
