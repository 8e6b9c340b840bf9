"""The dynamic AABB tree's read-only queries and bounded upkeep: queries note, the upkeep
refits and splits within its budget (a big split over several calls), a big backlog gets a
bigger step, answers stay exact with splits pending or under way, and validate checks the
pending list."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.culling.frustum import camera_planes
from app.spatial import create_index
from app.spatial.aabbtree import CHILDREN
from app.spatial.aabbtree.pool import META_NFREE, allocate_node, free_node
from app.spatial.aabbtree.split import split_limit
from app.spatial.aabbtree.upkeep import GUARD_OBJECTS, near_view
from tests.oracle import Oracle

HEURISTICS = list(CHILDREN)


def _scene(name: str, n: int, seed: int, leafy: bool = False, t: int = 6):
    rng = np.random.default_rng(seed)
    idx = create_index(name, leafy=leafy, split_threshold=t)
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-100, 100, (n, 3))
    r = rng.uniform(0.05, 2.0, n)
    vd = rng.uniform(10, 200, n)
    idx.insert(ids, c, r, vd)
    oracle = Oracle()
    oracle.insert(ids, c, r, vd)
    return idx, oracle, rng, ids, c


def _shape(idx) -> tuple:
    """The live nodes' links, counts and boxes, and where each object is (a free node's
    fields other than its free mark are whatever its memory held: not compared)."""
    nd = idx._nodes
    live = np.flatnonzero(nd.depth >= 0)
    return (live, nd.parent[live], nd.child[live], nd.count[live], idx._objs.node.copy(),
            nd.lo[live], nd.hi[live], nd.dirty[live])


@settings(max_examples=12, deadline=None)
@given(name=st.sampled_from(HEURISTICS), leafy=st.booleans(), seed=st.integers(0, 2**31),
       budget=st.integers(1, 400), catchup=st.integers(0, 3000),
       share=st.sampled_from([0.5, 1.0]), per_frame=st.integers(1, 3),
       patience=st.integers(1, 5))
def test_exact_with_splits_pending(name, leafy, seed, budget, catchup, share, per_frame,
                                   patience):
    """Small budgets leave splits and refits pending across frames, refits deferred by the
    patience; several queries a frame (frustum with and without view distance, box,
    sphere) answer exactly every time."""
    idx, oracle, rng, ids, c = _scene(name, 1500, seed, leafy)
    idx.upkeep_objects = budget
    idx.refit_patience = patience
    idx.catchup_objects = catchup
    idx.catchup_share = share
    idx.catchup_budget = 2 * budget  # big splits spread over calls, catch-ups included
    for _frame in range(6):
        movers = rng.choice(ids, 150, replace=False)
        c[movers] += rng.normal(scale=8.0, size=(150, 3))
        idx.update(movers, c[movers])
        oracle.update(movers, c[movers])
        for _ in range(per_frame):
            eye = rng.uniform(-60, 60, 3)
            planes = camera_planes(eye, eye + rng.normal(size=3), far=120)
            for use_vd in (False, True):
                got = idx.query_frustum(planes, eye=eye, use_view_distance=use_vd).visible
                assert np.array_equal(np.sort(got), oracle.frustum(planes, eye, use_vd))
            q = rng.uniform(-80, 80, 3)
            assert np.array_equal(np.sort(idx.query_box(q - 15, q + 15)),
                                  oracle.box(q - 15, q + 15))
            assert np.array_equal(np.sort(idx.query_sphere(q, 12.0)), oracle.sphere(q, 12.0))
        idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
def test_queries_between_updates_leave_the_shape_alone(name):
    """After an update, the frame's first ``frame_queries`` queries change no node or list."""
    idx, oracle, rng, ids, c = _scene(name, 3000, 1)
    idx.catchup_objects = 10**9
    idx.catchup_share = 1.0
    idx.upkeep_objects = 1  # one node an upkeep: work stays pending
    planes = camera_planes([0, 0, 0], [1, 0.3, 0.1], far=150)
    idx.query_frustum(planes)
    idx.update(ids[:10], c[:10] + 0.5)
    before = _shape(idx)
    for _ in range(idx.frame_queries):
        idx.query_frustum(planes)
    after = _shape(idx)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    assert idx.stats()["pending_nodes"] > 0
    idx.validate()
    # the next query counts as a new frame of a scene that stopped moving: it upkeeps
    nodes = idx.stats()["nodes"]
    idx.query_frustum(planes)
    assert idx.stats()["nodes"] > nodes


@pytest.mark.parametrize("name", HEURISTICS)
def test_budget_bounds_each_upkeep(name):
    """maintain(b) spends at most b plus one node's objects, and the backlog shrinks."""
    idx, oracle, rng, ids, c = _scene(name, 4000, 2, t=4)
    idx.catchup_objects = 10**9
    idx.catchup_share = 1.0
    planes = camera_planes([0, 0, 0], [1, 0, 0], far=300)
    biggest = 0
    for _ in range(40):
        idx.query_frustum(planes)
        nd = idx._nodes
        pend = idx._pend.pending[:idx._pend.count[0]]
        biggest = int(nd.count[pend].max(initial=0)) + 1
        spent = idx.maintain(50)
        assert spent <= 50 + biggest
        if spent == 0:
            break
    assert idx.stats()["split_nodes"] > 1
    idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
def test_first_big_query_catches_up(name):
    """A frustum query noting overfull leaves of more than ``catchup_objects`` objects builds
    the visible tree before answering: after it, what it notes is under the bound."""
    idx, oracle, rng, ids, c = _scene(name, 20000, 3, t=8)
    idx.catchup_objects = 500
    idx.catchup_share = 1.0
    planes = camera_planes([0, 0, 0], [1, 0.2, 0.1], far=200)
    res = idx.query_frustum(planes)
    assert np.array_equal(np.sort(res.visible), oracle.frustum(planes))
    assert idx.stats()["nodes"] > 20
    nd = idx._nodes
    pend = idx._pend.pending[:idx._pend.count[0]]
    overfull = pend[(~nd.is_split[pend]) & (nd.count[pend] > idx.split_threshold)]
    assert nd.count[overfull].sum() <= 500
    idx.validate()


def _big_leaves_near(idx, planes) -> list[int]:
    """Unsplit leaves over ``GUARD_OBJECTS`` (and the threshold) in view or beside it."""
    nd = idx._nodes
    big = (nd.depth >= 0) & ~nd.is_split & (nd.count > max(GUARD_OBJECTS, split_limit(idx._rules)))
    return [int(n) for n in np.flatnonzero(big) if near_view(planes, *nd.lo[n], *nd.hi[n])]


@pytest.mark.parametrize("name", HEURISTICS)
def test_big_leaves_beside_the_view_are_split_with_it(name):
    """A fresh tree's first query splits the big leaves beside the view as well as those in
    it (``upkeep.near_view``), so a mover that stretches one into the view adds a small leaf
    to the working set, not 10^5 objects; on a split tree, a query notes them and the upkeep
    splits them. The eye sits where the root's children meet, each with a corner at it."""
    rng = np.random.default_rng(11)
    n = 150_000
    idx = create_index(name, split_threshold=8)
    c = rng.uniform(-100, 100, (n, 3))
    idx.insert(np.arange(n, dtype=np.int64), c, np.full(n, 0.5))
    eye = np.zeros(3)
    planes = camera_planes(eye, [1, 0.2, 0.1], far=40)
    assert _big_leaves_near(idx, planes) != []  # (the root, before the first query)
    idx.query_frustum(planes, eye)
    assert _big_leaves_near(idx, planes) == []
    turned = camera_planes(eye, [-1, 0.3, -0.2], far=40)
    idx._queries_since_update = 0  # (this query is part of the frame: no upkeep first)
    res = idx.query_frustum(turned, eye)  # (notes them; the upkeep splits them)
    idx.maintain()
    assert _big_leaves_near(idx, turned) == []
    assert np.array_equal(np.sort(res.visible), np.sort(idx.query_frustum(turned, eye).visible))
    idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
@pytest.mark.parametrize(("catchup", "share"), [(10**9, 0.5), (1, 1.0)], ids=["share", "count"])
def test_catch_ups_only_build_a_fresh_tree(name, catchup, share):
    """Either rule (noted overfull leaves over ``catchup_share`` of the working set, or
    over ``catchup_objects`` objects) catches a first query up; once the tree is split, a
    turn onto big leaves does not: the query answers from their blocks, changes nothing
    (read-only: no stall inside it), and the upkeep splits them later."""
    idx, oracle, rng, ids, c = _scene(name, 6000, 5, t=8)
    idx.catchup_objects = catchup
    idx.catchup_share = share
    first = camera_planes([0, 0, 0], [1, 0, 0], far=150)
    res = idx.query_frustum(first)
    assert np.array_equal(np.sort(res.visible), oracle.frustum(first))
    assert idx.stats()["nodes"] > 1  # caught up: the root was split within the query
    turned = camera_planes([0, 0, 0], [-1, 0.1, 0], far=150)
    before = _shape(idx)
    idx._queries_since_update = 0  # (this query is part of the frame: no upkeep first)
    res = idx.query_frustum(turned)
    assert np.array_equal(np.sort(res.visible), oracle.frustum(turned))
    after = _shape(idx)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    assert idx._pend.count[0] > 0  # the big leaves it reached wait for the upkeep
    idx.maintain()
    res = idx.query_frustum(turned)
    assert np.array_equal(np.sort(res.visible), oracle.frustum(turned))
    idx.validate()


def test_removed_nodes_leave_the_pending_list_quietly():
    """A node noted and then freed by garbage collection is dropped by the upkeep."""
    idx, oracle, rng, ids, c = _scene("octree", 2000, 4)
    idx.catchup_objects = 0
    idx.query_frustum(camera_planes([0, 0, 0], [1, 0, 0], far=150))
    idx.query_box(np.full(3, -100.0), np.full(3, 100.0))  # notes leaves everywhere
    assert idx.stats()["pending_nodes"] > 0
    idx.remove(ids[:1900])
    oracle.remove(ids[:1900])
    idx.validate()
    idx.maintain()
    assert idx.stats()["pending_nodes"] == 0
    idx.validate()
    assert np.array_equal(np.sort(idx.query_box(np.full(3, -100.0), np.full(3, 100.0))),
                          oracle.box(np.full(3, -100.0), np.full(3, 100.0)))


@pytest.mark.parametrize("corrupt", ["repeated", "unflagged", "unlisted"])
def test_validate_checks_the_pending_list(corrupt):
    idx, oracle, rng, ids, c = _scene("kd", 2000, 5)
    idx.catchup_objects = 10**9
    idx.catchup_share = 1.0
    idx.query_frustum(camera_planes([0, 0, 0], [1, 0, 0], far=150))
    idx.validate()
    pd = idx._pend
    npend = int(pd.count[0])
    assert npend >= 1
    if corrupt == "repeated":
        pd.pending[npend] = pd.pending[0]
        pd.count[0] += 1
    elif corrupt == "unflagged":
        pd.noted[pd.pending[0]] = False
    else:
        pd.noted[np.flatnonzero(~pd.noted)[0]] = True
    with pytest.raises(AssertionError):
        idx.validate()


@pytest.mark.parametrize("name,leafy", [("kd", True), ("octree", False), ("icoseptree", True)])
def test_a_big_split_goes_on_over_calls(name, leafy):
    """A node of more objects than the budget is split a budget at a time: every call stays
    within it, queries in between answer exactly from a node half handed down, and the
    split finishes."""
    idx, oracle, rng, ids, c = _scene(name, 6000, 5, leafy, t=8)
    idx.upkeep_objects = 400
    idx.catchup_objects = 10**9  # no catch-up: a fresh tree's would build it all at once
    idx.catchup_share = 1.0
    planes = camera_planes([0, 0, 0], [1, 0.2, 0.1], far=300)
    seen_under_way = False
    for _ in range(200):
        got = idx.query_frustum(planes).visible
        assert np.array_equal(np.sort(got), oracle.frustum(planes))
        nd = idx._nodes
        seen_under_way |= bool(((nd.depth >= 0) & (nd.kept >= 0)).any())
        idx.validate()
        spent = idx.maintain(400)
        assert spent <= 400 + 256 + 1  # (a split under way gets at least 256 objects a call)
        if spent == 0:
            break
    assert seen_under_way
    nd = idx._nodes
    assert not ((nd.depth >= 0) & (nd.kept >= 0)).any()
    assert idx.stats()["split_nodes"] > 5
    idx.validate()


def test_a_split_that_separates_nothing_is_undone():
    """Objects that all go to one child (here: all at one point) are handed back at the end
    of a split under way; the node stays marked split, so it is not split again."""
    idx = create_index("octree", leafy=True, split_threshold=8)
    n = 3000
    idx.insert(np.arange(n), np.zeros((n, 3)) + 5.0, np.full(n, 0.5))
    idx.upkeep_objects = 500
    idx.catchup_objects = 10**9
    idx.catchup_share = 1.0
    planes = camera_planes([0, 0, -10], [0, 0, 1], far=100)
    for _ in range(20):
        assert len(idx.query_frustum(planes).visible) == n
        idx.validate()
        if idx.maintain(500) == 0:
            break
    st_ = idx.stats()
    assert st_["nodes"] == 1 and st_["stuck_split_nodes"] == 1
    assert idx._nodes.count[0] == n


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(HEURISTICS), leafy=st.booleans(), seed=st.integers(0, 2**31),
       budget=st.integers(1, 300), spots=st.integers(1, 4))
def test_splits_under_way_of_piled_up_objects(name, leafy, seed, budget, spots):
    """Objects piled on a few points (splits that separate nothing, children split while
    their parent is still handing objects down) stay exact and sound, whatever the budget."""
    rng = np.random.default_rng(seed)
    n = 600
    points = rng.uniform(-50, 50, (spots, 3))
    c = points[rng.integers(0, spots, n)]
    c[: n // 10] = rng.uniform(-50, 50, (n // 10, 3))  # a few elsewhere
    r = rng.uniform(0.1, 1.0, n)
    ids = np.arange(n, dtype=np.int64)
    idx = create_index(name, leafy=leafy, split_threshold=6)
    idx.upkeep_objects = budget
    idx.catchup_objects = 10**9
    idx.catchup_share = 1.0
    idx.insert(ids, c, r)
    oracle = Oracle()
    oracle.insert(ids, c, r)
    for _frame in range(6):
        movers = rng.choice(ids, 60, replace=False)
        c[movers] = points[rng.integers(0, spots, 60)] + rng.normal(scale=0.01, size=(60, 3))
        idx.update(movers, c[movers])
        oracle.update(movers, c[movers])
        eye = rng.uniform(-60, 60, 3)
        planes = camera_planes(eye, points[0] - eye + 1e-3, far=200)
        got = idx.query_frustum(planes).visible
        assert np.array_equal(np.sort(got), oracle.frustum(planes))
        idx.maintain(budget)
        idx.validate()


@pytest.mark.parametrize("name", ["ternary", "octree", "icoseptree"])  # (kd's splits make
def test_a_batch_that_runs_out_of_nodes_grows_the_pool_and_goes_on(name):  # both children)
    """Inserts and moves take a node for each new leaf and grow the pool only when it runs
    out, not ahead of every batch by its worst case (a leaf per object: an icoseptree of
    10^6 doubled a pool a third used, a stall of 4 ms): small moves of everything leave the
    pool alone, and with no node free, a batch that needs a new leaf stops, the pool
    doubles, the batch goes on, and nothing is lost."""
    idx, oracle, rng, ids, c = _scene(name, 3000, 9)
    planes = camera_planes([0, 0, 0], [1, 0.3, 0.1], far=400)
    idx.query_frustum(planes)
    nd = idx._nodes
    cap = nd.parent.shape[0]
    assert int(nd.meta[META_NFREE]) < 3000
    idx.update(ids, c + 0.01)
    oracle.update(ids, c + 0.01)
    assert idx._nodes.parent.shape[0] == cap
    nd = idx._nodes
    held = [allocate_node(nd, -1) for _ in range(int(nd.meta[META_NFREE]))]  # none free
    new = np.arange(3000, 4000, dtype=np.int64)
    cn = rng.uniform(-300, 300, (1000, 3))  # far out too: new leaves under the split nodes
    idx.insert(new, cn, np.full(1000, 0.5))
    oracle.insert(new, cn, np.full(1000, 0.5))
    moved = rng.uniform(-300, 300, (3000, 3))
    idx.update(ids, moved)
    oracle.update(ids, moved)
    assert idx._nodes.parent.shape[0] > cap
    for n in held:  # (given back: they were never linked into the tree)
        free_node(idx._nodes, n)
    idx.validate()
    got = np.sort(idx.query_frustum(planes).visible)
    assert np.array_equal(got, oracle.frustum(planes))
    idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
def test_the_upkeep_drops_the_splits_of_leaves_the_view_has_left(name):
    """Overfull leaves a query noted and the view has left since are not split by the
    upkeep (the paper splits what a query reaches): the backlog a turn leaves is dropped, and
    a query that reaches them again notes them again. Answers stay exact."""
    idx, oracle, rng, ids, c = _scene(name, 4000, 12)
    eye = np.zeros(3)
    ahead = camera_planes(eye, np.array([1.0, 0.1, 0.05]), far=80)
    behind = camera_planes(eye, np.array([-1.0, -0.1, -0.05]), far=80)
    idx.query_frustum(ahead, eye)  # a fresh tree builds what this view sees at once
    idx.upkeep_objects = 1
    idx.query_frustum(behind, eye)  # notes the overfull leaves behind
    pend = idx._pend
    noted = pend.pending[: int(pend.count[0])].copy()
    assert noted.shape[0] > 0
    for planes in (ahead, behind, ahead):
        got = idx.query_frustum(planes, eye).visible
        assert np.array_equal(np.sort(got), oracle.frustum(planes, eye))
    idx.maintain()  # all of it, the last view ahead
    assert idx.stats()["pending_nodes"] == 0
    nd = idx._nodes
    limit = split_limit(idx._rules)
    gone = [n for n in noted if nd.depth[n] >= 0 and nd.count[n] > limit
            and not near_view(ahead, *nd.lo[n], *nd.hi[n])]
    assert gone  # noted behind, out of the view ahead now...
    assert not any(nd.is_split[n] for n in gone)  # ... and dropped, not split
    idx.validate()
    for planes in (behind, ahead):
        got = idx.query_frustum(planes, eye).visible
        assert np.array_equal(np.sort(got), oracle.frustum(planes, eye))
    idx.validate()


@pytest.mark.parametrize("name", HEURISTICS)
@pytest.mark.parametrize("patience", [1, 3])
def test_a_dirty_box_is_refitted_after_patience_notings(name, patience):
    """The upkeep passes a noted dirty node over until queries have noted it ``patience``
    times, then refits it; the answers are exact all along (a dirty box is conservative)."""
    idx, oracle, rng, ids, c = _scene(name, 3000, 3, leafy=True)
    idx.frame_queries = 10**9  # the test runs every upkeep itself
    planes = camera_planes([0, 0, 0], [1, 0.3, 0.1], far=150)
    idx.query_frustum(planes)
    idx.maintain()
    nd = idx._nodes
    live = np.flatnonzero(nd.depth >= 0)
    # Every box loosened by one unit and marked dirty: still conservative, so still exact.
    nd.lo[live] -= 1.0
    nd.hi[live] += 1.0
    nd.dirty[live] = True
    idx.validate()
    # (Overfull leaves the looser boxes bring into reach are split at once: not these.)
    leaves = live[~nd.is_split[live] & (nd.count[live] <= split_limit(idx._rules))]
    noted_leaves = None
    loose = None
    for round_ in range(1, patience + 1):
        res = idx.query_frustum(planes)
        assert np.array_equal(np.sort(res.visible), oracle.frustum(planes))
        pend = idx._pend.pending[: int(idx._pend.count[0])]
        noted = np.intersect1d(pend, leaves)
        if noted_leaves is None:
            noted_leaves = noted
            assert noted_leaves.size > 0
            loose = nd.hi[noted_leaves] - nd.lo[noted_leaves]
        assert np.array_equal(noted, noted_leaves)  # the same leaves, noted again
        idx.maintain(None, patience=patience)
        nd = idx._nodes  # (a pool that grew for a split is a new one)
        refitted = ~nd.dirty[noted_leaves]
        assert refitted.all() if round_ == patience else not refitted.any()
        idx.validate()
    # Refitted: each leaf's box is its objects' box again, the loosening gone.
    assert np.allclose(nd.hi[noted_leaves] - nd.lo[noted_leaves], loose - 2.0)
    res = idx.query_frustum(planes)
    assert np.array_equal(np.sort(res.visible), oracle.frustum(planes))
