"""Matthews' view distance tree: placement band, point-query bound, O(1) removal and cleanup,
in-place moves, the infinite list, the packed copy, and validate() catching corruption."""

from __future__ import annotations

import numpy as np
import pytest

from app.culling.frustum import camera_planes
from app.geom.predicates import NODE_INSIDE, NODE_PARTIAL
from app.spatial import create_index
from app.spatial.viewdist_tree import ViewDistanceTree
from app.spatial.viewdist_tree.store import IN_INF
from tests.oracle import Oracle

ALL_PLANES = np.zeros((0, 4))  # no plane: the frustum query becomes the pure point query


def slots_of(idx: ViewDistanceTree, ids) -> np.ndarray:
    return idx._idmap.lookup(np.asarray(ids, dtype=np.int64))


def node_of(idx: ViewDistanceTree, i: int) -> int:
    return int(idx._objs.node[slots_of(idx, [i])[0]])


def scalar(idx: ViewDistanceTree, name: str) -> int:
    return int(idx._tree[name][0])


def node_ints(idx: ViewDistanceTree) -> np.ndarray:
    """Every integer field of every node, a row per node (and whether it is live)."""
    nd = idx._nodes
    return np.column_stack([nd.size > 0, nd.level, nd.parent, nd.child, nd.nchild, nd.head,
                            nd.count, nd.pstart, nd.plen])


def scattered(n: int, seed: int = 0, spread: float = 200.0, vd_max: float = 60.0):
    rng = np.random.default_rng(seed)
    c = rng.uniform(-spread, spread, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    vd = 10 ** rng.uniform(-3, np.log10(vd_max), n)
    return np.arange(n, dtype=np.int64), c, r, vd


def test_registered_and_rejects_tree_heuristics():
    assert isinstance(create_index("viewdist"), ViewDistanceTree)
    create_index("viewdist", leafy=False, split_threshold=None)
    with pytest.raises(ValueError):
        create_index("viewdist", leafy=True)
    with pytest.raises(ValueError):
        create_index("viewdist", split_threshold=8)


def test_band_placement():
    idx = ViewDistanceTree(min_node_size=0.25)
    ids, c, r, vd = scattered(3000)
    vd[:20] = 0.0  # below the finest band
    idx.insert(ids, c, r, vd)
    idx.validate()
    slots = slots_of(idx, ids)
    nodes = idx._objs.node[slots]
    size = idx._nodes.size[nodes]
    lo = idx._nodes.lo[nodes]
    finest = idx._nodes.level[nodes] == scalar(idx, "emin")
    assert np.all(vd <= size / 2)
    assert np.all((vd >= size / 4) | finest)
    assert np.all(finest[vd < 0.25 / 4])  # too small for any band: the finest level
    assert np.all((c >= lo) & (c <= lo + size[:, None]))
    # The band is tight: a sphere with vd exactly S/2 or S/4 sits in a node of that S.
    idx2 = ViewDistanceTree()
    idx2.insert(np.array([1, 2]), np.zeros((2, 3)), np.ones(2), np.array([8.0, 4.0]))
    assert {idx2._nodes.size[node_of(idx2, 1)], idx2._nodes.size[node_of(idx2, 2)]} <= {16.0}


def test_point_query_visits_at_most_eight_nodes_per_level():
    idx = ViewDistanceTree(tight=False)  # the structural test alone, as in the article
    ids, c, r, vd = scattered(5000, seed=1)
    idx.insert(ids, c, r, vd)
    oracle = Oracle()
    oracle.insert(ids, c, r, vd)
    rng = np.random.default_rng(2)
    for _ in range(40):
        eye = rng.uniform(-220, 220, 3)
        res = idx.query_frustum(ALL_PLANES, eye=eye, use_view_distance=True)
        assert np.array_equal(np.sort(res.visible), oracle.frustum(ALL_PLANES, eye, True))
        depth = idx.node_boxes()[2]
        out = idx.node_outcomes()
        visited = depth[(out == NODE_INSIDE) | (out == NODE_PARTIAL)]
        assert visited.shape[0] == res.nodes_visited
        assert np.bincount(visited).max(initial=0) <= 8


def test_removal_touches_only_the_objects_list():
    idx = ViewDistanceTree()
    ids, c, r, vd = scattered(2000, seed=3)
    idx.insert(ids, c, r, vd)
    # pick an object sharing its node with others: its removal must not change any other node
    nodes = idx._objs.node[slots_of(idx, ids)]
    shared = ids[np.flatnonzero(np.bincount(nodes)[nodes] >= 3)][0]
    node = node_of(idx, int(shared))
    count = int(idx._nodes.count[node])
    before = node_ints(idx)
    idx.remove(np.array([shared]))
    idx.validate()
    changed = np.flatnonzero((node_ints(idx) != before).any(axis=1))
    assert changed.tolist() == [node]
    assert idx._nodes.count[node] == count - 1


def test_empty_nodes_are_cleaned_up():
    idx = ViewDistanceTree()
    ids, c, r, vd = scattered(500, seed=4)
    idx.insert(ids, c, r, vd)
    n_before = idx.stats()["nodes"]
    # a lone tiny sphere far inside the root's range needs a chain of new nodes
    idx.insert(np.array([10_000]), np.array([[150.3, -170.7, 120.1]]), np.array([1.0]),
               np.array([0.001]))
    assert idx.stats()["nodes"] > n_before
    idx.remove(np.array([10_000]))
    idx.validate()
    assert idx.stats()["nodes"] == n_before
    idx.remove(ids)
    idx.validate()
    assert idx.stats()["nodes"] == 0 and scalar(idx, "root") == -1 and len(idx) == 0


def test_root_grows_toward_far_objects_and_shrinks_back():
    idx = ViewDistanceTree()
    ids, c, r, vd = scattered(300, seed=5, spread=50.0, vd_max=10.0)
    idx.insert(ids, c, r, vd)
    size0 = idx.stats()["root_size"]
    idx.insert(np.array([999]), np.array([[-5000.0, 3000.0, 10.0]]), np.array([1.0]),
               np.array([5.0]))
    idx.validate()
    assert idx.stats()["root_size"] >= 8192
    idx.remove(np.array([999]))
    idx.validate()
    assert idx.stats()["root_size"] <= size0


def test_small_moves_stay_in_place_and_big_moves_relocate():
    idx = ViewDistanceTree()
    ids, c, r, vd = scattered(2000, seed=6)
    idx.insert(ids, c, r, vd)
    slots = slots_of(idx, ids)
    nodes = idx._objs.node[slots]
    lo = idx._nodes.lo[nodes]
    size = idx._nodes.size[nodes][:, None]
    # moves that keep the centre in the node's cube: nothing but the bounds changes
    c2 = np.clip(c + np.random.default_rng(7).normal(scale=0.2, size=c.shape), lo, lo + size)
    n_nodes = idx.stats()["nodes"]
    heads = idx._nodes.head.copy()
    idx.update(ids, c2)
    idx.validate()
    assert np.array_equal(idx._objs.node[slots], nodes)
    assert np.array_equal(idx._nodes.head, heads)  # no list was touched
    assert idx.stats()["nodes"] == n_nodes
    # a jump across the world relocates, and the old node is cleaned up if it emptied
    idx.update(ids[:1], np.array([[-190.0, 190.0, -190.0]]))
    idx.validate()
    assert node_of(idx, 0) != nodes[0]
    # a changed view distance out of the band relocates too
    idx.update(ids[1:2], c2[1:2], view_distances=np.array([vd[1] * 16]))
    idx.validate()
    assert idx._nodes.size[node_of(idx, 1)] >= 4 * idx._nodes.size[nodes[1]]


def test_infinite_view_distance_objects_are_always_considered():
    idx = ViewDistanceTree()
    ids, c, r, vd = scattered(1000, seed=8)
    vd[:50] = np.inf
    idx.insert(ids, c, r, vd)
    idx.validate()
    assert idx.stats()["infinite"] == 50
    assert np.all(idx._objs.node[slots_of(idx, ids[:50])] == IN_INF)
    eye = np.array([1e5, 0.0, 0.0])  # far from everything: only infinite ones can show
    planes = camera_planes(eye, [0.0, 0.0, 0.0], far=3e5)
    res = idx.query_frustum(planes, eye=eye, use_view_distance=True)
    oracle = Oracle()
    oracle.insert(ids, c, r, vd)
    assert np.array_equal(np.sort(res.visible), oracle.frustum(planes, eye, True))
    assert set(res.visible.tolist()) <= set(range(50))
    assert res.working_set >= 50 and res.nodes_visited == 0
    # finite <-> infinite through update
    idx.update(ids[:10], c[:10], view_distances=np.full(10, 5.0))
    idx.update(ids[100:110], c[100:110], view_distances=np.full(10, np.inf))
    idx.validate()
    assert idx.stats()["infinite"] == 50


def test_remote_cluster_is_never_visited():
    rng = np.random.default_rng(9)
    n = 20_000
    idx = ViewDistanceTree()
    c = rng.uniform(0, 1000, (n, 3))
    r = rng.uniform(0.3, 3, n)
    idx.insert(np.arange(n), c, r, 40 * r)
    eye = np.array([500.0, 500.0, 500.0])
    planes = camera_planes(eye, eye + [1.0, 0.2, 0.1], far=5000)
    first = idx.query_frustum(planes, eye=eye, use_view_distance=True)
    c2 = np.array([3500.0, 500.0, 500.0]) + rng.normal(scale=30, size=(n, 3))
    r2 = rng.uniform(0.3, 3, n)
    idx.insert(np.arange(n, 2 * n), c2, r2, 40 * r2)
    idx.validate()
    second = idx.query_frustum(planes, eye=eye, use_view_distance=True)
    assert np.array_equal(np.sort(first.visible), np.sort(second.visible))
    assert second.working_set == first.working_set
    lo, hi, _ = idx.node_boxes()
    out = idx.node_outcomes()
    remote = lo[:, 0] > 1500.0  # cubes wholly within the cluster's side
    assert remote.any()
    assert not np.isin(out[remote], [NODE_INSIDE, NODE_PARTIAL]).any()


@pytest.mark.parametrize("mode", ["often", "never", "once"])
def test_packed_blocks_and_refits_give_the_exact_answer(mode, monkeypatch):
    """Every queued node refitted after each batch, none (bounds only grow), or a rebuild
    once, then blocks and bounds patched by the changes."""
    monkeypatch.setattr(ViewDistanceTree, "refit_min", 10**9 if mode == "often" else 0)
    monkeypatch.setattr(ViewDistanceTree, "refit_per_change", 0)
    rng = np.random.default_rng(10)
    idx = ViewDistanceTree()
    oracle = Oracle()
    ids, c, r, vd = scattered(3000, seed=11)
    vd[::17] = np.inf
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    if mode == "once":
        idx.rebuild()
    for step in range(6):
        eye = rng.uniform(-200, 200, 3)
        planes = camera_planes(eye, eye + rng.normal(size=3), far=400)
        for use_vd in (True, False):
            got = np.sort(idx.query_frustum(planes, eye=eye, use_view_distance=use_vd).visible)
            assert np.array_equal(got, oracle.frustum(planes, eye, use_vd))
        lo = rng.uniform(-200, 100, 3)
        hi = lo + 100
        assert np.array_equal(np.sort(idx.query_box(lo, hi)), oracle.box(lo, hi))
        q = rng.uniform(-200, 200, 3)
        assert np.array_equal(np.sort(idx.query_sphere(q, 30.0)), oracle.sphere(q, 30.0))
        gi, gt = idx.query_ray(eye, rng.normal(size=3))
        assert np.all(np.diff(gt) >= 0)
        idx.validate()
        live = np.array(sorted(oracle.objs))
        moved = rng.choice(live, 300, replace=False)
        c_new = np.array([oracle.objs[int(i)][0] for i in moved])
        c_new += rng.normal(scale=3.0 if step % 2 else 80.0, size=c_new.shape)
        idx.update(moved, c_new)
        oracle.update(moved, c_new)
        gone = rng.choice(live, 100, replace=False)
        idx.remove(gone)
        oracle.remove(gone)
        back = gone[:50]  # re-inserted: appended to their nodes' blocks
        c_back = rng.uniform(-200, 200, (50, 3))
        idx.insert(back, c_back, np.ones(50), np.full(50, 20.0))
        oracle.insert(back, c_back, np.ones(50), np.full(50, 20.0))
    assert scalar(idx, "pfree") > 0  # blocks that filled up moved
    assert (scalar(idx, "qlen") == 0) == (mode == "often")


def bounds_of(idx: ViewDistanceTree) -> list[np.ndarray]:
    nd = idx._nodes
    live = nd.size > 0
    return [nd.clo[live], nd.chi[live], nd.slo[live], nd.shi[live], nd.vmax[live]]


def test_refits_leave_the_bounds_a_rebuild_gives(monkeypatch):
    """Once the refit queue is empty every node's bounds are exact: what a rebuild computes
    from the store. With no refit at all they stay loose."""
    rng = np.random.default_rng(21)
    for budget, exact in ((10**9, True), (0, False)):
        monkeypatch.setattr(ViewDistanceTree, "refit_min", budget)
        monkeypatch.setattr(ViewDistanceTree, "refit_per_change", 0)
        idx = ViewDistanceTree()
        ids, c, r, vd = scattered(3000, seed=22)
        idx.insert(ids, c, r, vd)
        for step in range(4):
            moved = rng.choice(ids, 400, replace=False)
            c[moved] += rng.normal(scale=2.0 if step % 2 else 40.0, size=(400, 3))
            idx.update(moved, c[moved])
            gone = rng.choice(ids[ids % 5 == step], 50, replace=False)
            idx.remove(gone)
            idx.insert(gone, c[gone], r[gone], vd[gone])
        idx.validate()
        assert (scalar(idx, "qlen") == 0) == exact
        before = bounds_of(idx)
        idx.rebuild()
        after = bounds_of(idx)
        same = all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
        assert same == exact


def test_a_stream_of_spawns_moves_blocks_and_never_rebuilds(monkeypatch):
    """Objects removed and inserted every batch go into their nodes' blocks at once (a full
    block moves to one twice its size, its rows reused by the next block of that size): no
    whole rebuild after the first load, and the rows handed out stop growing."""
    idx = ViewDistanceTree()
    ids, c, r, vd = scattered(4000, seed=23)
    idx.insert(ids, c, r, vd)

    def no_rebuild(self):
        raise AssertionError("a batch rebuilt the whole tree")

    monkeypatch.setattr(ViewDistanceTree, "rebuild", no_rebuild)
    rng = np.random.default_rng(24)
    live = ids.copy()
    nxt = 4000
    ends = []
    for frame in range(120):
        gone = rng.choice(live, 60, replace=False)
        idx.remove(gone)
        live = np.setdiff1d(live, gone)
        new = np.arange(nxt, nxt + 60)
        nxt += 60
        i2, c2, r2, vd2 = scattered(60, seed=100 + frame)
        idx.insert(new, c2, r2, vd2)
        live = np.concatenate([live, new])
        ends.append(scalar(idx, "pend"))
        if frame % 40 == 39:
            idx.validate()
    assert scalar(idx, "pfree") > 0  # blocks moved and left their rows to be reused
    assert ends[-1] <= 1.25 * ends[59]  # 7,200 objects came and went: the rows level off
    assert len(idx) == 4000


def corruptions():
    def band(idx):
        s = slots_of(idx, [5])[0]
        idx._vdist[s] = idx._nodes.size[idx._objs.node[s]]  # radius S: above the band

    def centre(idx):
        s = slots_of(idx, [5])[0]
        idx._centers[s] += 1e4  # the store moved without telling the tree

    def link(idx):
        s = slots_of(idx, [5])[0]
        idx._objs.prev[s] = s

    def count(idx):
        idx._nodes.count[node_of(idx, 5)] += 1

    def parent(idx):
        node = node_of(idx, 5)
        idx._nodes.parent[node] = node

    def free_list(idx):
        idx._nodes.free[scalar(idx, "nfree") - 1] = scalar(idx, "root")

    def bounds(idx):
        idx._nodes.vmax[scalar(idx, "root")] = -1.0

    def infinite(idx):
        s = slots_of(idx, [0])[0]
        idx._vdist[s] = 3.0

    def packed(idx):
        idx.rebuild()
        idx._packed.center[0, 0] += 1.0

    def dead_slot(idx):
        idx._objs.node[idx.capacity - 1] = scalar(idx, "root")  # slot 1023 was never used

    def orphan(idx):
        root = scalar(idx, "root")
        child = int(idx._nodes.child[root][idx._nodes.child[root] >= 0][0])
        idx._nodes.child[root][idx._nodes.child[root] == child] = -1
        idx._nodes.nchild[root] -= 1
        idx._nodes.parent[child] = -1  # a second root: unreachable from the real one

    def block(idx):
        nd = idx._nodes
        held = np.flatnonzero((nd.size > 0) & (nd.pcap > 0))
        nd.pstart[held[1]] = nd.pstart[held[0]]  # two nodes' blocks overlap

    def queue(idx):
        idx._nodes.queued[scalar(idx, "root")] = 1  # flagged, yet not in the queue

    return {f.__name__: f for f in (band, centre, link, count, parent, free_list, bounds,
                                     infinite, packed, dead_slot, orphan, block, queue)}


@pytest.mark.parametrize("what", list(corruptions()))
def test_validate_catches_corruption(what):
    idx = ViewDistanceTree()
    ids, c, r, vd = scattered(400, seed=12)
    vd[0] = np.inf
    idx.insert(ids, c, r, vd)
    idx.validate()
    corruptions()[what](idx)
    with pytest.raises(AssertionError):
        idx.validate()


def test_absurd_view_distances_and_coordinates_go_to_the_unbounded_list():
    idx = ViewDistanceTree()
    oracle = Oracle()
    c = np.array([[0.0, 0, 0], [1e300, 0, 0], [5, 5, 5], [1e19, 1, 1], [3, 4, 5]])
    r = np.ones(5)
    vd = np.array([1e308, 5.0, 1e30, 3.0, 20.0])
    idx.insert(np.arange(5), c, r, vd)
    oracle.insert(np.arange(5), c, r, vd)
    idx.validate()
    assert idx.stats()["infinite"] == 4 and idx.stats()["nodes"] == 1
    for use_vd in (True, False):
        got = idx.query_frustum(ALL_PLANES, eye=np.zeros(3), use_view_distance=use_vd).visible
        with np.errstate(over="ignore"):
            assert np.array_equal(np.sort(got), oracle.frustum(ALL_PLANES, np.zeros(3), use_vd))
    idx.update(np.array([1, 4]), np.array([[1.0, 1, 1], [1e200, 0, 0]]),
               view_distances=np.array([2.0, 1.0]))
    idx.validate()
    assert idx.stats()["infinite"] == 4 and idx.stats()["root_size"] == 8.0


@pytest.mark.parametrize("use_vd", [True, False])
def test_occlusion_only_removes_objects_and_counts_them(use_vd):
    from app.culling.frustum import look_at, perspective
    from app.geom.zpyramid import ZPyramid

    idx = ViewDistanceTree()
    ids, c, r, _ = scattered(3000, seed=13)
    idx.insert(ids, c, r, np.full(3000, 120.0))
    eye = np.array([0.0, 0.0, -150.0])
    target = np.array([0.0, 0.0, 100.0])
    vp = perspective(60, 1.0, 0.1, 600) @ look_at(eye, target)
    planes = camera_planes(eye, target, aspect=1.0, far=600)
    free = idx.query_frustum(planes, eye=eye, use_view_distance=use_vd)
    levels = [np.full((64 >> k, 64 >> k), 1.0, np.float32) for k in range(7)]
    far_wall = idx.query_frustum(planes, eye=eye, use_view_distance=use_vd,
                                 occlusion=ZPyramid.from_levels(vp, levels))
    assert np.array_equal(np.sort(far_wall.visible), np.sort(free.visible))
    near = [lv * 0.0 for lv in levels]  # everything lies behind a wall at the near plane
    walled = idx.query_frustum(planes, eye=eye, use_view_distance=use_vd,
                               occlusion=ZPyramid.from_levels(vp, near))
    assert len(free.visible) > 0
    assert set(walled.visible.tolist()) <= set(free.visible.tolist())
    assert len(walled.visible) < len(free.visible)
    assert walled.occluded_nodes + walled.occluded_objects > 0


def test_infinite_list_walked_or_scanned_gives_the_exact_answer():
    """The infinite list decided from its float32 copy (``scan_infinite_share`` 0: always),
    walked (2: never) or either by its size: the oracle's answer, and the same counts every
    way, while objects enter and leave the list (a view distance turned endless or finite),
    move, arrive and go."""
    rng = np.random.default_rng(7)
    trees = []
    for share in (0.0, 1.0 / 16.0, 2.0):
        t = create_index("viewdist")
        t.scan_infinite_share = share
        trees.append(t)
    oracle = Oracle()

    def each(op, *args, **kw):
        for t in trees:
            getattr(t, op)(*args, **kw)

    n = 3000
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-150, 150, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    vd = np.where(rng.random(n) < 0.5, np.inf, rng.uniform(5, 80, n))
    # a few beyond the tree's range (UNBOUNDED) with a finite view distance: in the infinite
    # list, and culled there by view distance (its only such culls)
    c[:20] = rng.uniform(1e19, 2e19, (20, 3))
    vd[:20] = 50.0
    each("insert", ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    next_id = n
    for _frame in range(8):
        live, lc, _, _ = oracle.arrays()
        pick = rng.choice(live.shape[0], 400, replace=False)
        movers = live[pick]
        mc = lc[pick] + rng.normal(scale=4.0, size=(400, 3))
        mvd = np.where(rng.random(400) < 0.5, np.inf, rng.uniform(5, 80, 400))
        each("update", movers, mc, view_distances=mvd)
        oracle.update(movers, mc, vd=mvd)
        gone = rng.choice(oracle.arrays()[0], 50, replace=False)
        each("remove", gone)
        oracle.remove(gone)
        new = np.arange(next_id, next_id + 50, dtype=np.int64)
        next_id += 50
        nc = rng.uniform(-150, 150, (50, 3))
        nr = rng.uniform(0.1, 2.0, 50)
        nvd = np.where(rng.random(50) < 0.5, np.inf, rng.uniform(5, 80, 50))
        each("insert", new, nc, nr, nvd)
        oracle.insert(new, nc, nr, nvd)
        eye = rng.uniform(-60, 60, 3)
        planes = camera_planes(eye, eye + rng.normal(size=3), far=200)
        for use_vd in (True, False):
            res = [t.query_frustum(planes, eye=eye, use_view_distance=use_vd) for t in trees]
            want = oracle.frustum(planes, eye, use_vd)
            for got in res:
                assert np.array_equal(np.sort(got.visible), want)
                assert (got.working_set, got.culled_distance, got.occluded_objects) == (
                    res[-1].working_set, res[-1].culled_distance, res[-1].occluded_objects)
        for t in trees:
            t.validate()
    # the list shrinks to the absurd few (the copy is dropped), then grows back (rebuilt)
    live, lc, _, _ = oracle.arrays()
    for endless in (False, True):
        vds = np.full(live.shape[0], np.inf) if endless else rng.uniform(5, 80, live.shape[0])
        each("update", live, lc, view_distances=vds)
        oracle.update(live, lc, vd=vds)
        eye = rng.uniform(-60, 60, 3)
        planes = camera_planes(eye, eye + rng.normal(size=3), far=200)
        for use_vd in (True, False):
            want = oracle.frustum(planes, eye, use_vd)
            for t in trees:
                got = t.query_frustum(planes, eye=eye, use_view_distance=use_vd).visible
                assert np.array_equal(np.sort(got), want)


def test_centres_only_moves_in_and_out_of_the_unbounded_list():
    """A move that carries centres only takes the radius and view distance from the store:
    an object at absurd coordinates (in the unbounded list) brought back gets its own radius
    in its node, and one sent out keeps it in the list's float32 row (the move reads an
    unbounded object's radius only when it leaves the list)."""
    idx = ViewDistanceTree()
    oracle = Oracle()
    ids, c, r, vd = scattered(400, seed=21)
    far = np.arange(0, 400, 7)
    c[far, 0] = 1e19 + far  # beyond UNBOUNDED's reach: kept in the list
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    assert idx.stats()["infinite"] == far.shape[0]
    rng = np.random.default_rng(22)
    for step in range(4):
        back = far if step % 2 == 0 else np.arange(3, 400, 11)
        c2 = c[back].copy()
        c2[:, 0] = rng.uniform(-200.0, 200.0, back.shape[0]) if step % 2 == 0 else 1e19 + back
        idx.update(ids[back], c2)
        oracle.update(ids[back], c2)
        c[back] = c2
        idx.validate()
        for use_vd in (True, False):
            got = idx.query_frustum(ALL_PLANES, eye=np.zeros(3), use_view_distance=use_vd)
            with np.errstate(over="ignore"):
                want = oracle.frustum(ALL_PLANES, np.zeros(3), use_vd)
            assert np.array_equal(np.sort(got.visible), want), (step, use_vd)
        box = idx.query_box(np.full(3, -300.0), np.full(3, 300.0))
        inside = (np.abs(c) <= 300.0 + r[:, None]).all(axis=1)
        assert set(box.tolist()) == set(ids[inside].tolist()), step


def test_batch_bounds_is_numpys_over_the_bounded_objects():
    """A new root is sized by one compiled pass (``update.batch_bounds``): the same count,
    corners and largest view distance as numpy's over the objects whose centre and view
    distance are bounded; none when no object is."""
    from app.spatial.viewdist_tree.store import UNBOUNDED
    from app.spatial.viewdist_tree.update import batch_bounds

    rng = np.random.default_rng(31)
    c = rng.uniform(-1e3, 1e3, (500, 3))
    vd = rng.uniform(0, 50, 500)
    vd[::7] = np.inf
    c[3::11, 1] = 2 * UNBOUNDED
    c[5::13, 2] = -2 * UNBOUNDED
    slots = rng.permutation(500)[:400].astype(np.int64)
    count, lo, hi, vmax = batch_bounds(slots, c, vd)
    ok = (vd[slots] <= UNBOUNDED) & (np.abs(c[slots]) <= UNBOUNDED).all(axis=1)
    assert count == ok.sum() > 0
    assert np.array_equal(lo, c[slots[ok]].min(axis=0))
    assert np.array_equal(hi, c[slots[ok]].max(axis=0))
    assert vmax == vd[slots[ok]].max()
    assert batch_bounds(slots[~ok], c, vd)[0] == 0
