"""fixed-octree specifics: lazy queue, placement, min size, root growth, lifespans, validate.

The generic exactness checks live in test_index_contract.py; these pin down the behaviour
that is particular to Nevala's octree (seeds/nevala-octree.txt) and to our changes to it.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.culling.frustum import camera_planes, look_at, perspective
from app.geom.predicates import NODE_INSIDE, NODE_REJECT_VIEWDIST
from app.geom.zpyramid import ZPyramid
from app.spatial import create_index
from app.spatial import fixed_octree as fo
from app.spatial.fixed_octree import store as st
from app.spatial.pairs import radix_argsort


def octree(**kw) -> fo.FixedOctree:
    idx = create_index("fixed-octree", **kw)
    assert isinstance(idx, fo.FixedOctree)
    return idx


def framed(**kw) -> fo.FixedOctree:
    """A tree whose root is exactly [0, 16]^3: one big sphere filling it stays at the root."""
    idx = octree(**kw)
    idx.insert(np.array([0]), np.array([[8.0, 8.0, 8.0]]), np.array([8.0]))
    return idx


def node_at(idx: fo.FixedOctree, lo, size: float) -> int:
    """Pool index of the live node with this cube, or -1."""
    live = np.flatnonzero(idx._nodes.node["alive"] != 0)
    hit = live[(idx._nodes.node["lo"][live] == np.asarray(lo, float)).all(axis=1)
               & (idx._nodes.node["size"][live] == size)]
    return int(hit[0]) if hit.shape[0] else -1


def has_cell(idx: fo.FixedOctree, lo, size: float) -> bool:
    return node_at(idx, lo, size) >= 0


# ---------------------------------------------------------------- construction

def test_rejects_heuristics_and_bad_min_size():
    with pytest.raises(ValueError):
        octree(leafy=True)
    with pytest.raises(ValueError):
        octree(split_threshold=4)
    for bad in (0.0, -1.0, 3.0, 0.3, float("inf")):
        with pytest.raises(ValueError, match="power of two"):
            octree(min_size=bad)
    octree(leafy=False, split_threshold=None, min_size=0.25)


# ---------------------------------------------------------------- pending queue

@pytest.mark.parametrize("kind", ["frustum", "box", "sphere", "ray"])
def test_insert_only_queues_and_any_query_builds(kind):
    idx = octree()
    rng = np.random.default_rng(1)
    c = rng.uniform(-20, 20, (50, 3))
    idx.insert(np.arange(50), c, np.full(50, 0.5))
    st = idx.stats()
    assert st["nodes"] == 0 and st["pending"] == 50 and st["cycles"] == 0
    idx.validate()
    if kind == "frustum":
        got = idx.query_frustum(camera_planes([0, 0, 0], [1, 0, 0], fovy_deg=170, aspect=1,
                                              far=1000)).visible
    elif kind == "box":
        got = idx.query_box([-100] * 3, [100] * 3)
    elif kind == "sphere":
        got = idx.query_sphere([0, 0, 0], 100.0)
    else:
        idx.insert(np.array([99]), np.array([[5.0, 5.0, 5.0]]), np.array([1.0]))
        got, _t = idx.query_ray([-50, 5, 5], [1, 0, 0])
        assert 99 in got
        got = np.arange(50)  # the ray only proves the queued object was found
    assert len(got) >= 1
    st = idx.stats()
    assert st["nodes"] > 0 and st["pending"] == 0 and st["cycles"] == 1
    idx.validate()


def test_moves_are_placed_at_once_and_unchanged_tree_does_not_cycle():
    idx = framed()
    idx.insert(np.array([1]), np.array([[1.5, 1.5, 1.5]]), np.array([0.1]))
    idx.flush()
    lo0, size0 = idx.object_cells(np.array([1]))
    idx.update(np.array([1]), np.array([[12.5, 12.5, 12.5]]))
    assert idx.stats()["pending"] == 0  # a move is placed in its update, not queued
    idx.validate()  # already in its new cell: validate exempts no moved object
    lo1, size1 = idx.object_cells(np.array([1]))
    assert size1[0] == size0[0] == 1.0 and (lo1 == [[12, 12, 12]]).all()
    idx.insert(np.array([2]), np.array([[3.5, 3.5, 3.5]]), np.array([0.1]))
    assert idx.stats()["pending"] == 1  # inserts wait for the next query (Nevala's queue)
    idx.update(np.array([2]), np.array([[5.5, 5.5, 5.5]]))  # pending: its latest values
    assert idx.stats()["pending"] == 1
    idx.validate()
    cycles = idx.stats()["cycles"]
    idx.query_box([5, 5, 5], [6, 6, 6])
    idx.query_box([12, 12, 12], [13, 13, 13])
    idx.query_sphere([0, 0, 0], 1.0)
    assert idx.stats()["cycles"] == cycles + 1  # only the first query after a change flushes
    lo2, _size = idx.object_cells(np.array([2]))
    assert (lo2 == [[5, 5, 5]]).all()
    idx.validate()


# ---------------------------------------------------------------- placement

def test_objects_go_to_the_smallest_containing_octant():
    idx = framed()
    ids = np.array([1, 2, 3, 4])
    centers = np.array([
        [3.5, 3.5, 3.5],   # fits a unit cell
        [8.0, 2.0, 2.0],   # straddles the root's x mid-plane
        [4.0, 1.0, 1.0],   # straddles x=4 inside the [0, 8] octant
        [13.0, 13.0, 13.0],  # r=1 straddles 13? no: fits [12, 14]
    ])
    radii = np.array([0.25, 0.5, 0.5, 0.9])
    idx.insert(ids, centers, radii)
    lo, size = idx.object_cells(ids)
    np.testing.assert_array_equal(size, [1.0, 16.0, 8.0, 2.0])
    np.testing.assert_array_equal(lo, [[3, 3, 3], [0, 0, 0], [0, 0, 0], [12, 12, 12]])
    root_lo, root_size = idx.object_cells(np.array([0]))
    assert root_size[0] == 16.0 and (root_lo == 0).all()
    idx.validate()


@pytest.mark.parametrize("min_size", [0.5, 1.0, 4.0])
def test_min_size_is_respected(min_size):
    idx = octree(min_size=min_size)
    rng = np.random.default_rng(2)
    n = 400
    idx.insert(np.arange(n), rng.uniform(0, 64, (n, 3)), rng.uniform(0, 0.05, n))
    _lo, hi, _d = idx.node_boxes()  # nothing before the first query
    assert hi.shape[0] == 0
    lo, size = idx.object_cells(np.arange(n))
    assert size.min() == min_size  # tiny spheres sink to the smallest cells, no further
    blo, bhi, _depth = idx.node_boxes()
    assert ((bhi - blo) >= min_size).all()
    sides = np.unique(bhi - blo)
    assert np.allclose(np.log2(sides / min_size) % 1, 0)  # min_size times powers of two
    idx.validate()


def test_root_is_smallest_power_of_two_cube():
    idx = octree()
    idx.insert(np.array([0, 1]), np.array([[-499.5, -10, 0], [499.5, 10, 0]]),
               np.array([0.5, 0.5]))
    idx.flush()
    st = idx.stats()
    assert st["root_size"] == 1024.0
    lo = np.array(st["root_lo"])
    assert (lo <= [-500, -10.5, -0.5]).all() and (lo + 1024 >= [500, 10.5, 0.5]).all()


# ---------------------------------------------------------------- moving and root growth

def test_objects_leaving_the_root_grow_it_and_nothing_is_lost():
    idx = octree()
    rng = np.random.default_rng(3)
    n = 300
    ids = np.arange(n) * 3 + 1
    c = rng.uniform(0, 16, (n, 3))
    r = rng.uniform(0, 0.5, n)
    idx.insert(ids, c, r)
    idx.flush()
    small_root = idx.stats()["root_size"]
    far = np.array([[1e4, -3e3, 5.0], [-7e3, 2e4, -1e5], [20.0, 20.0, 20.0]])
    idx.update(ids[:3], far)
    c[:3] = far
    everything = idx.query_box([-1e6] * 3, [1e6] * 3)
    assert np.array_equal(np.sort(everything), np.sort(ids))
    st = idx.stats()
    assert st["root_size"] > small_root and st["objects"] == n
    root_lo = np.array(st["root_lo"])
    assert ((c - r[:, None] >= root_lo) & (c + r[:, None] <= root_lo + st["root_size"])).all()
    lo, size = idx.object_cells(ids[:3])
    assert ((far >= lo) & (far <= lo + size[:, None])).all()
    idx.validate()
    # coming back: the dead branches die off and the root shrinks again
    idx.update(ids[:3], c[3:6])
    for _ in range(70):
        idx.flush()
    assert idx.stats()["root_size"] == small_root
    assert np.array_equal(np.sort(idx.query_sphere([8, 8, 8], 100.0)), np.sort(ids))
    idx.validate()


def test_moving_object_climbs_then_descends():
    idx = framed()
    idx.insert(np.array([1]), np.array([[1.5, 1.5, 1.5]]), np.array([0.2]))
    idx.update(np.array([1]), np.array([[13.5, 4.5, 11.5]]))
    lo, size = idx.object_cells(np.array([1]))
    np.testing.assert_array_equal(lo[0], [13, 4, 11])
    assert size[0] == 1.0
    idx.update(np.array([1]), np.array([[13.5, 4.5, 11.5]]), radii=np.array([2.0]))
    lo, size = idx.object_cells(np.array([1]))  # grown: climbs to the [8, 16] x [0, 8] octant
    np.testing.assert_array_equal(lo[0], [8, 0, 8])
    assert size[0] == 8.0
    idx.validate()


# ---------------------------------------------------------------- dead-branch lifespans

def _empty_leaf_at_1(idx):
    """Move object 1 out of the unit cell [1, 2]^3 (one cycle) and return that cell's node."""
    idx.update(np.array([1]), np.array([[12.5, 12.5, 12.5]]))
    idx.flush()
    return node_at(idx, [1, 1, 1], 1.0)


def test_emptied_leaf_survives_eight_cycles_then_is_pruned():
    idx = framed()
    idx.insert(np.array([1]), np.array([[1.5, 1.5, 1.5]]), np.array([0.1]))
    idx.flush()
    assert has_cell(idx, [1, 1, 1], 1.0)
    n = _empty_leaf_at_1(idx)  # cycle 1 of being empty
    assert n >= 0 and idx.stats()["dead_branches"] >= 1
    assert idx._nodes.node["life"][n] == 8
    for cycle in range(2, 8):  # cycles 2..7: still kept
        idx.flush()
        assert has_cell(idx, [1, 1, 1], 1.0), cycle
        idx.validate()
    idx.flush()  # the 8th cycle that finds it empty prunes it
    assert not has_cell(idx, [1, 1, 1], 1.0)
    # the whole dead branch goes with it: the cells that only led to it are gone too
    for lo, size in (([0, 0, 0], 2.0), ([0, 0, 0], 4.0), ([0, 0, 0], 8.0)):
        assert not has_cell(idx, lo, size)
    assert has_cell(idx, [12, 12, 12], 1.0)
    idx.validate()


def test_reused_leaf_lifespan_doubles_up_to_64():
    idx = framed()
    idx.insert(np.array([1]), np.array([[1.5, 1.5, 1.5]]), np.array([0.1]))
    idx.flush()
    n = node_at(idx, [1, 1, 1], 1.0)
    expected = 8
    for _round in range(5):
        assert _empty_leaf_at_1(idx) == n  # same node, not pruned meanwhile
        assert idx._nodes.node["life"][n] == expected
        assert idx._nodes.node["ttl"][n] == expected - 1
        idx.flush()
        idx.update(np.array([1]), np.array([[1.5, 1.5, 1.5]]))  # reused while dying
        idx.flush()
        expected = min(2 * expected, 64)
        assert idx._nodes.node["life"][n] == expected and idx._nodes.node["ttl"][n] == -1
        idx.validate()
    # with the lifespan at 64, an emptied leaf lives 64 cycles
    _empty_leaf_at_1(idx)
    for _ in range(62):
        idx.flush()
    assert node_at(idx, [1, 1, 1], 1.0) == n
    idx.flush()
    assert node_at(idx, [1, 1, 1], 1.0) == -1


def test_removal_empties_leaves_that_age_at_flushes():
    idx = framed()
    idx.insert(np.array([1]), np.array([[1.5, 1.5, 1.5]]), np.array([0.1]))
    idx.flush()
    idx.remove(np.array([1]))
    idx.validate()
    for _ in range(7):
        idx.flush()
    assert has_cell(idx, [1, 1, 1], 1.0)
    idx.flush()
    assert not has_cell(idx, [1, 1, 1], 1.0)


# ---------------------------------------------------------------- frustum bookkeeping

def test_frustum_outcomes_working_set_and_view_distance():
    idx = octree()
    rng = np.random.default_rng(5)
    n = 3000
    c = rng.uniform(-100, 100, (n, 3))
    r = rng.uniform(0.1, 2, n)
    vd = rng.uniform(5, 30, n)
    idx.insert(np.arange(n), c, r, vd)
    eye = np.array([0.0, 0.0, 0.0])
    planes = camera_planes(eye, [1, 0, 0], far=300)
    res = idx.query_frustum(planes, eye=eye)
    lo, _hi, _d = idx.node_boxes()
    out = idx.node_outcomes()
    assert out.shape[0] == lo.shape[0]
    assert (out == NODE_INSIDE).any()
    assert len(res.visible) <= res.working_set < n
    assert res.nodes_visited > 0
    res_vd = idx.query_frustum(planes, eye=eye, use_view_distance=True)
    assert (idx.node_outcomes() == NODE_REJECT_VIEWDIST).any()
    assert res_vd.working_set < res.working_set
    dist = np.linalg.norm(c, axis=1)
    assert set(res_vd.visible.tolist()) == set(res.visible.tolist()) & set(
        np.flatnonzero(dist <= vd).tolist())


def test_occlusion_culls_nodes_and_objects():
    idx = octree()
    rng = np.random.default_rng(6)
    n = 2000
    c = rng.uniform(-50, 50, (n, 3)) + [100, 0, 0]
    idx.insert(np.arange(n), c, rng.uniform(0.1, 1, n))
    eye, target = np.zeros(3), np.array([1.0, 0, 0])
    vp = perspective(60, 1.0, 1.0, 500) @ look_at(eye, target)
    planes = camera_planes(eye, target, fovy_deg=60, aspect=1.0, near=1.0, far=500)
    plain = idx.query_frustum(planes)
    far_wall = ZPyramid.from_levels(vp, [np.ones((64, 64)), np.ones((32, 32))])
    res = idx.query_frustum(planes, occlusion=far_wall)
    assert np.array_equal(np.sort(res.visible), np.sort(plain.visible))
    near_wall = ZPyramid.from_levels(vp, [np.zeros((64, 64)), np.zeros((32, 32))])
    res = idx.query_frustum(planes, occlusion=near_wall)
    assert len(res.visible) == 0 and res.occluded_nodes > 0


# ---------------------------------------------------------------- validate catches corruption

def _built() -> fo.FixedOctree:
    idx = octree()
    rng = np.random.default_rng(4)
    n = 200
    idx.insert(np.arange(n), rng.uniform(0, 32, (n, 3)), rng.uniform(0, 0.4, n))
    idx.flush()
    idx.validate()
    return idx


def _deep_node(idx) -> int:
    live = np.flatnonzero(idx._nodes.node["alive"] != 0)
    return int(live[np.argmin(idx._nodes.node["level"][live])])


def _an_entry(idx) -> int:
    return int(np.flatnonzero(idx._ents.node >= 0)[0])


def _sink(t) -> None:
    """A sphere that shrank in both copies without an update could now sit deeper."""
    node = t._ents.node
    e = int(np.flatnonzero((node >= 0) & (t._nodes.node["level"][np.maximum(node, 0)] > 0))[0])
    t._ents.sphere["radius"][e] = 0.0
    t._radii[t._ents.slot[e]] = 0.0


def _displace(t) -> None:
    e = _an_entry(t)
    t._ents.sphere["cx"][e] = 1e4
    t._centers[t._ents.slot[e], 0] = 1e4


CORRUPTIONS = {
    "object outside its cell": _displace,
    "store changed behind the tree's back": lambda t: t._centers.__setitem__(
        t._ents.slot[_an_entry(t)], 7.25),
    "parent link": lambda t: t._nodes.node["parent"].__setitem__(_deep_node(t), t._root),
    "child count": lambda t: t._nodes.node["nchild"].__setitem__(t._root, 9),
    "lifespan not doubled": lambda t: t._nodes.node["life"].__setitem__(_deep_node(t), 12),
    "lifespan above 64": lambda t: t._nodes.node["life"].__setitem__(_deep_node(t), 128),
    "countdown on a busy node": lambda t: t._nodes.node["ttl"].__setitem__(t._root, 3),
    "object count": lambda t: t._nodes.node["count"].__setitem__(_deep_node(t), 99),
    "list link": lambda t: t._ents.prev.__setitem__(_an_entry(t), 12345),
    "entry slot link": lambda t: t._ents.slot.__setitem__(_an_entry(t), 3),
    "free list": lambda t: t._nodes.node["alive"].__setitem__(int(t._nodes.free[0]), 1),
    "cell corner": lambda t: t._nodes.node["lo"].__setitem__((_deep_node(t), 0), 0.5),
    "root not power of two": lambda t: t._nodes.node["size"].__setitem__(t._root, 48.0),
    "subtree count": lambda t: t._nodes.node["subcount"].__setitem__(t._root, 1),
    "tight box": lambda t: t._nodes.node["thi"].__setitem__((t._root, 0), -1e9),
    "not smallest octant": _sink,
}


@pytest.mark.parametrize("what", list(CORRUPTIONS))
def test_validate_catches_corruption(what):
    idx = _built()
    CORRUPTIONS[what](idx)
    with pytest.raises(AssertionError):
        idx.validate()


# ---------------------------------------------------------------- entry layout (renumber)

def test_clean_subtrees_are_copied_in_bulk_with_the_same_answer_and_outcomes():
    """After a relayout, inside subtrees are contiguous entry runs copied without walking
    their nodes; moves dirty only their paths. Visible set, working set and the overlay's
    outcomes must equal those of a plain walk (every node forced dirty)."""
    idx = octree()
    rng = np.random.default_rng(7)
    n = 4000
    c = rng.uniform(0, 128, (n, 3))
    r = rng.uniform(0.05, 1.5, n)
    idx.insert(np.arange(n), c, r)
    eye = np.array([64.0, 64.0, 64.0])
    planes = camera_planes(eye, eye + [1.0, 0.3, 0.1], fovy_deg=70, aspect=1.5, far=60)
    saved = 0
    for frame in range(12):
        movers = rng.choice(n, 300, replace=False)
        c[movers] += rng.normal(scale=0.6, size=(300, 3))
        idx.update(movers, c[movers])
        if frame % 4 == 3:
            gone = movers[:20]
            idx.remove(gone)
            idx.insert(gone, c[gone], r[gone])
        res = idx.query_frustum(planes)
        idx.validate()
        outcomes = idx.node_outcomes()
        clean = idx._nodes.node["clean"].copy()
        assert clean[idx._nodes.node["alive"] != 0].any()  # some subtrees stay clean
        idx._nodes.node["clean"][:] = 0
        walk = idx.query_frustum(planes)
        assert np.array_equal(np.sort(res.visible), np.sort(walk.visible))
        assert res.working_set == walk.working_set
        assert res.nodes_visited <= walk.nodes_visited
        saved += walk.nodes_visited - res.nodes_visited
        np.testing.assert_array_equal(outcomes, idx.node_outcomes())
        idx._nodes.node["clean"][:] = clean
        idx.validate()
    assert saved > 0  # bulk copies happened
    idx._nodes.node["clean"][:] = 1  # a node said clean although its entries moved
    with pytest.raises(AssertionError):
        idx.validate()


@pytest.mark.parametrize("n", [0, 1, 9, 2000])
def test_the_flush_orders_new_entries_as_a_stable_sort_by_morton_code(n):
    """The flush's order, ``pairs.radix_argsort`` of the codes in six passes, against numpy's
    stable argsort, with runs of equal codes (their given order kept) and codes that use all
    63 bits; ``store.morton`` against the formula written with numpy."""
    rng = np.random.default_rng(n)
    pts = rng.uniform(-1e4, 1e4, (n, 3))
    if n:
        pts[: n // 2] = pts[0]  # a run of equal codes
    rows = rng.permutation(n).astype(np.int64)
    code = st.morton(pts, rows)
    if n:
        lo = pts[rows].min(axis=0)
        ext = max(float((pts[rows].max(axis=0) - lo).max()), 1e-300)
        q = np.clip((pts[rows] - lo) * ((2**21 - 1) / ext), 0, 2**21 - 1).astype(np.uint64)
        want = np.zeros(n, np.uint64)
        for a in range(3):
            for b in range(21):
                want |= ((q[:, a] >> np.uint64(b)) & np.uint64(1)) << np.uint64(3 * b + a)
        assert np.array_equal(code, want)
    assert np.array_equal(rows[radix_argsort(code, 6)], rows[np.argsort(code, kind="stable")])
    big = rng.integers(0, 2**63, n, dtype=np.uint64)
    assert np.array_equal(radix_argsort(big, 6), np.argsort(big, kind="stable"))
