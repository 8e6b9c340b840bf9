"""The dynamic tree's paper mode (appendix A's choices, issue 16).

The contract's own property, awkward-data, bad-input and pairs tests run again for every
paper-mode variant (they are not in ``index_variants()``'s default, so that the benchmarks'
subject lists stay as they were); then one test per choice of the listing, on hand-made
data whose split points and boxes are known exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

import tests.test_index_contract as contract
import tests.test_pairs as pairs_contract
from app.spatial import create_index, index_variants
from app.spatial.aabbtree import AABBTree
from app.spatial.aabbtree.heuristics import (
    PAPER_ALL,
    PAPER_FEATURES,
    keeps_big_object,
    mode_name,
    paper_keeps_object,
    parse_mode,
)
from app.spatial.aabbtree.pool import ROOT

PAPER = index_variants(("paper",))
PAPER_IDS = [label for label, _, _ in PAPER]
ROOT = ROOT


def test_variants_and_create_index():
    want = [f"{h}/paper/{v}" for h in ("kd", "ternary", "octree", "icoseptree")
            for v in ("leafy", "non-leafy")]
    assert want == PAPER_IDS
    assert index_variants() == [v for v in index_variants(("ours", "paper"))
                                if "/paper/" not in v[0]]
    idx = create_index("icoseptree", leafy=False, mode="paper")
    assert idx.mode == "paper" and idx.describe().endswith("mode=paper")
    assert idx.stats()["mode"] == "paper"
    assert create_index("kd").mode == "ours"
    create_index("grid", mode="ours")  # accepted and ignored
    with pytest.raises(ValueError, match="only for the dynamic trees"):
        create_index("grid", mode="paper")
    for bad in ("Paper", "paper+fast", "ours-", 3):
        with pytest.raises(ValueError):
            create_index("kd", mode=bad)


def test_mode_strings_round_trip():
    assert parse_mode("ours") == 0 and parse_mode("paper") == PAPER_ALL
    for name, bit in PAPER_FEATURES.items():
        assert parse_mode(f"ours+{name}") == bit
        assert parse_mode(f"paper-{name}") == PAPER_ALL & ~bit
        assert parse_mode(mode_name(bit)) == bit
        assert parse_mode(mode_name(PAPER_ALL & ~bit)) == PAPER_ALL & ~bit
    assert parse_mode("ours+split+axis-split") == PAPER_FEATURES["axis"]


# ---------------------------------------------------------------- the contract, again

@pytest.mark.parametrize(("label", "name", "kwargs"), PAPER, ids=PAPER_IDS)
def test_contract_random_operations(label, name, kwargs):
    contract.test_random_operations_match_oracle(label, name, kwargs)


@pytest.mark.parametrize("data", list(contract.awkward_sets()))
@pytest.mark.parametrize(("label", "name", "kwargs"), PAPER, ids=PAPER_IDS)
def test_contract_awkward_data(label, name, kwargs, data):
    contract.test_awkward_data(label, name, kwargs, data)


@pytest.mark.parametrize(("label", "name", "kwargs"), PAPER, ids=PAPER_IDS)
def test_contract_bad_input(label, name, kwargs):
    contract.test_bad_input_raises_and_changes_nothing(label, name, kwargs)


@pytest.mark.parametrize(("label", "name", "kwargs"), PAPER[1::2], ids=PAPER_IDS[1::2])
def test_pairs_contract(label, name, kwargs):
    pairs_contract.test_random_operations_match_oracle(label, name, kwargs)
    pairs_contract.test_everything_moving_every_step(label, name, kwargs)


@pytest.mark.parametrize("mode", [f"ours+{f}" for f in PAPER_FEATURES]
                         + [f"paper-{f}" for f in PAPER_FEATURES])
@pytest.mark.parametrize("heuristic", ["kd", "icoseptree"])
def test_single_switches_stay_exact(mode, heuristic):
    """Every one-at-a-time variant the benchmark uses: moves, queries, validate."""
    rng = np.random.default_rng(5)
    n = 3000
    c = rng.uniform(0, 15, (n, 3))
    r = rng.uniform(1, 10, n)
    idx = create_index(heuristic, leafy=False, split_threshold=8, mode=mode)
    ids = np.arange(n)
    idx.insert(ids, c, r)
    for step in range(6):
        lo = rng.uniform(0, 10, 3)
        hi = lo + 5
        got = np.sort(idx.query_box(lo, hi))
        want = np.flatnonzero(np.all((c - r[:, None] <= hi) & (c + r[:, None] >= lo), axis=1))
        assert np.array_equal(got, want), step
        idx.validate()
        m = rng.choice(n, 300, replace=False)
        d = rng.normal(size=(300, 3))
        c[m] += d / np.linalg.norm(d, axis=1)[:, None] * r[m, None]
        idx.update(m, c[m])
    idx.validate()


# ---------------------------------------------------------------- the listing's choices

def _tree(heuristic, mode, t, c, r, leafy=True):
    idx = AABBTree(heuristic, leafy=leafy, split_threshold=t, mode=mode)
    idx.insert(np.arange(len(r)), np.asarray(c, float), np.asarray(r, float))
    return idx


def _query_all(idx):
    """A query over everything and the upkeep it calls for (ours: queries only note nodes;
    paper: the query splits, the upkeep has nothing to do)."""
    out = idx.query_box(np.full(3, -1e6), np.full(3, 1e6))
    idx.maintain()
    return out


@pytest.mark.parametrize("mode", ["ours", "paper", "ours+split"])
def test_split_point_is_mean_of_pos_plus_radius(mode):
    rng = np.random.default_rng(1)
    c = rng.uniform(0, 100, (60, 3))
    r = rng.uniform(1, 5, 60)
    idx = _tree("octree", mode, 10, c, r)
    _query_all(idx)
    if mode != "paper":  # our mode splits from the blocks' float32 records (kernels' docstring)
        c, r = c.astype(np.float32).astype(float), r.astype(np.float32).astype(float)
    want = (c + r[:, None]).mean(axis=0) if "split" in mode or mode == "paper" else c.mean(0)
    np.testing.assert_allclose(idx._nodes.split[ROOT], want, rtol=1e-12)


def test_axis_ties_go_to_z_and_the_safe_rule_takes_everything_back():
    # Box 12 x 12 x 2: X and Y tie. Ours cuts X; the listing takes Z (strictly-longest test),
    # where every centre (z = 0) lies below the split point z = mean(z + r) = 1: all objects
    # would go to child 0, so they are taken back and the node stays split, childless.
    c = [(0, 0, 0), (10, 10, 0), (10, 0, 0), (0, 10, 0)]
    r = [1.0] * 4
    ours = _tree("kd", "ours+threshold", 4, c, r)
    _query_all(ours)
    assert ours._nodes.axis[ROOT] == 0 and ours._nodes.nchild[ROOT] == 2
    paper = _tree("kd", "paper", 4, c, r)
    _query_all(paper)
    nd = paper._nodes
    assert nd.axis[ROOT] == 2 and nd.is_split[ROOT] and nd.nchild[ROOT] == 0
    assert nd.count[ROOT] == 4
    # The take-back removed the objects through RemoveNode: the root's extents are invalid,
    # and the next query re-centres its split point on the centres (DEFRAG, no children).
    assert nd.dirty[ROOT]
    np.testing.assert_array_equal(nd.split[ROOT], [6.0, 6.0, 1.0])  # mean of pos + r
    _query_all(paper)
    nd = paper._nodes
    assert not nd.dirty[ROOT]
    np.testing.assert_array_equal(nd.split[ROOT], [5.0, 5.0, 0.0])
    paper.validate()
    # Still split: a new object goes below it (z = 0 < split z = 0 is false: child 1).
    paper.insert(np.array([9]), np.array([[3.0, 3.0, 0.0]]), np.array([1.0]))
    nd = paper._nodes
    assert nd.nchild[ROOT] == 1 and nd.count[ROOT] == 4
    paper.validate()


def test_strict_comparisons_on_the_split_point():
    # Ternary: split x = mean(x + 1) = 6; the object at x = 5 (r = 1) touches the plane
    # (5 + 1 == 6): it straddles (child 0), not below.
    c = [(0, 0, 0), (0, 0, 0), (10, 0, 0), (10, 0, 0), (5, 0, 0)]
    idx = _tree("ternary", "paper", 5, c, [1.0] * 5)
    _query_all(idx)
    nd = idx._nodes
    assert nd.split[ROOT, 0] == 6.0 and nd.axis[ROOT] == 0
    assert nd.count[nd.child[ROOT, 0]] == 1 and idx._objs.slot[nd.start[nd.child[ROOT, 0]]] == 4
    assert nd.count[nd.child[ROOT, 1]] == 2 and nd.count[nd.child[ROOT, 2]] == 2
    # K-D: split x = mean(x + 1) = 4.5; the centre at exactly 4.5 goes above (child 1).
    c = [(-2, 0, 0), (-2, 0, 0), (8.5, 0, 0), (8.5, 0, 0), (4.5, 0, 0)]
    idx = _tree("kd", "paper", 5, c, [1.0] * 5)
    _query_all(idx)
    nd = idx._nodes
    assert nd.split[ROOT, 0] == 4.5
    assert nd.count[nd.child[ROOT, 0]] == 2 and nd.count[nd.child[ROOT, 1]] == 3


def test_threshold_is_at_least_not_more_than():
    rng = np.random.default_rng(2)
    c = rng.uniform(0, 50, (12, 3))
    r = np.ones(12)
    for mode, split in (("ours", False), ("paper", True), ("ours+threshold", True)):
        idx = _tree("octree", mode, 12, c, r)
        _query_all(idx)
        assert bool(idx._nodes.is_split[ROOT]) == split, mode


def test_nonleafy_rule_uses_the_radius_not_its_cube():
    def box(side):  # the rules take the node box's volume
        return float(side) ** 3

    # r = 10 in a 40^3 box: its cube (20^3) is 1/8 of the box -> ours keeps it; the listing
    # compares 10 * 4 pi / 3 = 41.9 with 8,000 and does not.
    assert keeps_big_object(box(40), 10.0)
    assert not paper_keeps_object(box(40), 10.0)
    # r = 0.5 in a 12 (side 12^(1/3)) box: the listing keeps it (2.09 > 1.5), ours does not.
    assert paper_keeps_object(12.0, 0.5)
    assert not keeps_big_object(12.0, 0.5)
    # Strict: equality does not keep.
    bv = 8 * 4 * np.pi / 3
    assert paper_keeps_object(bv, bv / 8 * 3 / (4 * np.pi) * (1 + 1e-9))
    assert not paper_keeps_object(bv, bv / 8 * 3 / (4 * np.pi) * (1 - 1e-9))


def test_nonleafy_rule_in_the_tree():
    """A small object in a small split node stays there in the paper mode; a big one does
    not (ours: the other way round)."""
    # Five objects (r = 1) at each corner of the cube [0, 2]^3: the root box is 4^3 = 64 and
    # the paper's split point is mean(pos + r) = (2, 2, 2), so that the corners at 2 go above
    # (strict <) and every octant gets five objects.
    corners = np.array([(x, y, z) for x in (0, 2) for y in (0, 2) for z in (0, 2)], float)
    c = np.repeat(corners, 5, axis=0)
    r = np.ones(40)
    paper = _tree("octree", "paper", 10, c, r, leafy=False)
    _query_all(paper)
    nd = paper._nodes
    # 4 pi / 3 = 4.19 > 64 / 8 = 8? no: every object goes to a child of the root.
    np.testing.assert_array_equal(nd.split[ROOT], [2.0, 2.0, 2.0])
    assert nd.count[ROOT] == 0 and nd.nchild[ROOT] == 8
    ours = _tree("octree", "ours", 10, c, r, leafy=False)
    _query_all(ours)
    # ours: (2 r)^3 = 8 >= 64 / 8: every object stays at the root (the node keeps all of
    # them; the split is the pathological kind).
    assert ours._nodes.count[ROOT] == 40
    # A flat node (volume 0) keeps any object of positive radius, none of radius 0.
    flat = _tree("octree", "paper", 4, [(0, 0, 0), (10, 0, 0), (0, 10, 0), (10, 10, 0)],
                 [0.0] * 4, leafy=False)
    _query_all(flat)
    assert flat._nodes.nchild[ROOT] > 0
    assert flat._nodes.count[ROOT] == 0
    flat.insert(np.array([7]), np.array([[5.0, 5.0, 0.0]]), np.array([0.5]))
    assert flat._nodes.count[ROOT] == 1
    flat.validate()


def test_lazy_extents_bookkeeping():
    """Stale boxes while invalid, new children invalid, recursive recompute at a visit."""
    # Octree over a plane of objects at z = 0 (r = 1): the split z is 1, so every object is
    # below in z and only children 4-7 exist.
    g = np.arange(6, dtype=float) * 4
    c = np.array([(x, y, 0.0) for x in g for y in g])
    r = np.ones(len(c))
    idx = _tree("octree", "paper", 8, c, r)
    _query_all(idx)
    nd = idx._nodes
    assert not nd.dirty[ROOT]
    kids = nd.child[ROOT]
    assert (kids[:4] < 0).all() and (kids[4:] >= 0).all()
    np.testing.assert_array_equal(nd.plo[ROOT], nd.lo[ROOT])
    # A new object above the plane goes to a new child, which starts invalid with an empty
    # stored box; the root (clean) grows both boxes.
    idx.insert(np.array([100]), np.array([[2.0, 2.0, 5.0]]), np.array([1.0]))
    nd = idx._nodes
    new = [ch for ch in nd.child[ROOT][:4] if ch >= 0]
    assert len(new) == 1 and nd.dirty[new[0]] and np.isinf(nd.plo[new[0]]).all()
    assert nd.hi[ROOT, 2] == 6.0 and nd.phi[ROOT, 2] == 6.0
    idx.validate()
    # The object defining the root's top face moves down: the root is invalid and its stored
    # box freezes; another object then moves out past it: lo/hi grow, plo/phi do not.
    idx.update(np.array([100]), np.array([[2.0, 2.0, 0.5]]))
    assert nd.dirty[ROOT]
    frozen = nd.phi[ROOT].copy()
    idx.update(np.array([0]), np.array([[-30.0, 0.0, 0.0]]))
    assert nd.lo[ROOT, 0] == -31.0 and nd.plo[ROOT, 0] == -1.0
    np.testing.assert_array_equal(nd.phi[ROOT], frozen)
    idx.validate()
    # A query far from everything reaches only the root: GetExtents recomputes it and every
    # invalid node below it (ours would refit the root alone and leave it dirty).
    before = nd.dirty.copy()
    assert before[nd.depth >= 0].sum() > 1
    idx.query_box(np.full(3, 1e5), np.full(3, 1e5 + 1))
    nd = idx._nodes  # a query may grow (replace) the node pool
    live = nd.depth >= 0
    assert not nd.dirty[live].any()
    assert (nd.plo[live] == nd.lo[live]).all() and (nd.phi[live] == nd.hi[live]).all()
    assert nd.lo[ROOT, 0] == -31.0 and nd.hi[ROOT, 2] == 1.5
    # DEFRAG: the root's split point is its own centres (weight 1) and its children's split
    # points (weight = the split threshold).
    own = c[:0].sum(axis=0)  # the root keeps no objects
    ch = nd.child[ROOT][nd.child[ROOT] >= 0]
    want = (own + 8 * nd.split[ch].sum(axis=0)) / (8 * len(ch))
    np.testing.assert_allclose(nd.split[ROOT], want, rtol=1e-12)
    idx.validate()
    ours = _tree("octree", "ours", 8, c, r)
    _query_all(ours)
    ours.update(np.array([0]), np.array([[-30.0, 0.0, 0.0]]))
    ours.query_box(np.full(3, 1e5), np.full(3, 1e5 + 1))
    assert ours._nodes.dirty[ours._nodes.depth >= 0].any()


def test_paper_box_check_catches_a_stale_clean_box():
    rng = np.random.default_rng(4)
    idx = _tree("icoseptree", "paper", 5, rng.uniform(0, 30, (80, 3)), np.ones(80))
    _query_all(idx)
    idx.validate()
    nd = idx._nodes
    n = int(np.flatnonzero((nd.depth >= 0) & ~nd.dirty)[-1])
    nd.phi[n, 1] += 1.0
    with pytest.raises(AssertionError, match=r"stored \(paper\) box"):
        idx.validate()
