"""The trees' own pair queries (aabbtree/pairs.py, viewdist_tree/pairs.py): what the contract
tests of tests/test_pairs.py do not reach.

* the view distance tree's nodes: test_pairs inserts without view distances, so every object
  sits in its unbounded list; here objects have view distances of several classes (long own
  lists that the snapshot refines), some unbounded, moved in place and across nodes, with
  the packed copy current, stale and rebuilt;
* both ``ids`` paths (one descent per object, and the filtered whole-tree descent) against
  the oracle on the same states;
* the snapshot's layout (ranges, boxes, refined lists) and what the AABB tree's pass leaves
  behind (overfull leaves split, every box exact and clean).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.spatial import TREE_HEURISTICS, create_index
from app.spatial.pairs import selection
from app.spatial.tree_pairs import refine
from app.spatial.tree_pairs.snapshot import REFINE_ABOVE, TreePairSnapshot, snapshot_memory
from tests.oracle import Oracle
from tests.test_pairs import assert_pairs

TREES = [(h, leafy) for h in TREE_HEURISTICS for leafy in (True, False)]


def both_id_paths(idx, oracle: Oracle, ids: np.ndarray, margin: float) -> None:
    """The per-object path and the filtered whole-tree path both equal the oracle."""
    want = oracle.pairs(ids=ids, margin=margin)
    saved = type(idx).pairs_per_object_ratio
    try:
        for ratio in (-10**9, 10**9):  # always per object / always the whole tree
            idx.pairs_per_object_ratio = ratio
            assert_pairs(idx.query_pairs(ids=ids, margin=margin), want,
                         f"ids ({len(ids)}), ratio {ratio}, margin {margin}")
    finally:
        idx.pairs_per_object_ratio = saved


def check(idx, oracle: Oracle, rng: np.random.Generator) -> None:
    idx.validate()
    live = np.array(sorted(oracle.objs), dtype=np.int64)
    for margin in (0.0, float(rng.uniform(0, 3))):
        assert_pairs(idx.query_pairs(margin=margin), oracle.pairs(margin=margin),
                     f"margin {margin}")
        for k in (1, max(1, len(live) // 10), len(live)):
            if len(live):
                both_id_paths(idx, oracle, rng.choice(live, size=k, replace=False), margin)
    idx.validate()


def view_distances(rng: np.random.Generator, r: np.ndarray) -> np.ndarray:
    """Three classes of view distance (several node levels), a few unbounded."""
    vd = r * rng.choice([2.0, 12.0, 60.0], size=r.shape[0])
    vd[rng.random(r.shape[0]) < 0.1] = np.inf
    return vd


@settings(max_examples=20)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(60, 400))
def test_viewdist_nodes_match_oracle(seed, n):
    rng = np.random.default_rng(seed)
    idx = create_index("viewdist")
    idx.refit_min = 16  # a small refit budget: loose, queued and refitted nodes all occur
    idx.refit_per_change = 0
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-15, 15, (n, 3))
    r = rng.uniform(0.05, 1.5, n)
    vd = view_distances(rng, r)
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    check(idx, oracle, rng)
    for _step in range(3):
        c += rng.normal(scale=0.5, size=c.shape)  # small moves: in place, bounds loosen
        some = ids[rng.random(n) < 0.3]
        c[some] = rng.uniform(-15, 15, (len(some), 3))  # jumps: across nodes
        vd2 = view_distances(rng, r)  # class changes: other levels, in and out of the list
        idx.update(ids, c, None, vd2)
        oracle.update(ids, c, None, vd2)
        check(idx, oracle, rng)
    gone = ids[::4]
    idx.remove(gone)
    oracle.remove(gone)
    check(idx, oracle, rng)


@pytest.mark.parametrize("tight", [True, False])
def test_viewdist_long_lists_and_many_pairs(tight):
    """One view-distance class crowded in a few nodes and a long unbounded list: every own
    list is longer than the refinement bound, and 1,200 objects at one point overflow the
    pending-pair buffer several times."""
    rng = np.random.default_rng(3)
    n = 3000
    idx = create_index("viewdist", tight=tight)
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0, 40, (n, 3))
    c[:1200] = 7.0
    r = rng.uniform(0.2, 1.0, n)
    vd = np.full(n, 30.0)
    vd[1200:1800] = np.inf
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    assert idx.stats()["infinite"] == 600
    check(idx, oracle, rng)


@pytest.mark.parametrize(("heuristic", "leafy"), TREES)
def test_aabb_pass_splits_refits_and_answers(heuristic, leafy):
    """A tree only ever asked for pairs (Shagam's separate collision tree) still splits its
    leaves and keeps exact, clean boxes; objects moving every step stay exact."""
    rng = np.random.default_rng(7)
    n = 2000
    idx = create_index(heuristic, leafy=leafy)
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0, 30, (n, 3))
    r = rng.uniform(0.1, 1.0, n)
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    assert idx.stats()["leaves"] == 1  # inserts alone never split (queries do)
    for _step in range(4):
        assert_pairs(idx.query_pairs(), oracle.pairs(), "all pairs")
        st_ = idx.stats()
        assert st_["leaves"] > 1
        assert st_["dirty_nodes"] == 0  # the pass refits every dirty node: all exact now
        idx.validate()
        c += rng.normal(scale=0.3, size=c.shape)
        idx.update(ids, c)
        oracle.update(ids, c)
    both_id_paths(idx, oracle, ids[::7], 0.5)


def check_snapshot(sn: TreePairSnapshot, centers: np.ndarray, radii: np.ndarray,
                   live: np.ndarray) -> None:
    """Depth-first ranges nest, every object is packed once, boxes contain what they bound,
    and no own list is longer than the refinement bound."""
    m = sn.size.shape[0]
    assert np.array_equal(np.sort(sn.slot), np.sort(live))
    assert np.array_equal(sn.pts[:, :3], centers[sn.slot])
    assert np.array_equal(sn.pts[:, 3], radii[sn.slot])
    assert (sn.ocnt <= REFINE_ABOVE).all()
    lo = sn.pts[:, :3] - sn.pts[:, 3:]
    hi = sn.pts[:, :3] + sn.pts[:, 3:]
    for i in range(m):
        end = i + sn.size[i]
        assert end <= m and sn.oend[i] >= sn.ostart[i] + sn.ocnt[i]
        rows = slice(sn.ostart[i], sn.oend[i])
        assert (lo[rows] >= sn.box[i, :3]).all() and (hi[rows] <= sn.box[i, 3:]).all()
        own = slice(sn.ostart[i], sn.ostart[i] + sn.ocnt[i])
        assert (lo[own] >= sn.obox[i, :3]).all() and (hi[own] <= sn.obox[i, 3:]).all()
        c = i + 1
        start = sn.ostart[i] + sn.ocnt[i]
        while c < end:  # children: consecutive subtrees covering the rest of i's rows
            assert sn.ostart[c] == start
            start = sn.oend[c]
            c += sn.size[c]
        assert c == end and start == sn.oend[i]
    assert sn.size[0] == m and sn.oend[0] == sn.pts.shape[0]


@pytest.mark.parametrize("which", ["kd-leafy", "icoseptree", "viewdist"])
def test_snapshot_layout(which):
    rng = np.random.default_rng(13)
    n = 3000
    c = rng.uniform(0, 25, (n, 3))
    c[:500] = 4.0  # an unsplittable crowd: a list the snapshot must refine
    r = rng.uniform(0.1, 1.0, n)
    ids = np.arange(n, dtype=np.int64)
    if which == "viewdist":
        idx = create_index("viewdist")
        vd = r * rng.choice([3.0, 40.0], size=n)
        vd[::9] = np.inf
        idx.insert(ids, c, r, vd)
        sel = selection(idx.capacity, None)
        sn = idx._snapshot(sel)
    else:
        idx = create_index(which.split("-")[0], leafy=which.endswith("leafy"))
        idx.insert(ids, c, r)
        sel = selection(idx.capacity, None)
        sn = idx._snapshot(sel)
    check_snapshot(sn, idx._centers, idx._radii, np.flatnonzero(idx._alive))
    idx.validate()


@pytest.mark.parametrize("n", [1, 2, 31, 5000, refine.SORT_PARALLEL_MIN + 7])
def test_morton_sort_orders_rows_stably_and_keeps_every_row(n):
    """The Morton sort of a range: the same rows (sphere and slot together), codes not
    decreasing, rows of equal codes in their first order; rows outside the range untouched
    (the last size takes the blocks on every thread)."""
    rng = np.random.default_rng(n)
    total = n + 7
    pts = np.empty((total, 4))
    pts[:, :3] = rng.integers(0, 6, (total, 3)) * 1.5  # few distinct points: many equal codes
    pts[:, 3] = rng.random(total)
    slot = rng.permutation(total).astype(np.int64)
    before_pts, before_slot = pts.copy(), slot.copy()
    r0, r1 = 3, 3 + n
    code = refine._morton_sort(pts, slot, r0, r1, snapshot_memory(total, total))[:n].copy()
    assert np.all(np.diff(code) >= 0)
    assert np.array_equal(pts[:r0], before_pts[:r0]) and np.array_equal(pts[r1:], before_pts[r1:])
    assert np.array_equal(slot[r1:], before_slot[r1:])
    where = {int(s): i for i, s in enumerate(before_slot)}
    first = np.array([where[int(s)] for s in slot[r0:r1]])
    assert np.array_equal(pts[r0:r1], before_pts[first])  # each row kept its sphere
    assert sorted(first) == list(range(r0, r1))
    for c in np.unique(code):  # equal codes: the order they came in
        assert np.all(np.diff(first[code == c]) > 0)


@pytest.mark.parametrize("kind", ["viewdist", "octree-leafy"])
def test_kept_snapshot_arrays_grow_and_are_reused(kind):
    """The arrays a pairs query builds its snapshot in are the index's own from one query to
    the next: a smaller scene reuses them, a bigger one grows them, a filtered query between
    leaves nothing behind, and every answer equals the oracle's."""
    rng = np.random.default_rng(11)
    name = kind.split("-")[0]
    # (an AABB tree stays a tree while everything moves: its own pass, not the flat sweep)
    idx = create_index(name, **({"leafy": True, "flat": False} if kind.endswith("leafy") else {}))
    oracle = Oracle()
    n = 3000
    ids = np.arange(n, dtype=np.int64)
    c = rng.random((n, 3)) * 60
    r = rng.uniform(0.3, 2.0, n)
    c[: n // 4] = c[0] + rng.random((n // 4, 3))  # a crowd: long refined lists
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    assert_pairs(idx.query_pairs(margin=0.2), oracle.pairs(margin=0.2), "first")
    kept = idx._snapshots._memory

    def same_or_grown(label: str):
        """The kept arrays again, or (an AABB tree's node pool grew) bigger ones."""
        nonlocal kept
        mem = idx._snapshots._memory
        if mem is not kept:
            assert name != "viewdist", label  # (its node count does not change here)
            assert mem.arrays.size.shape[0] > kept.arrays.size.shape[0], label
            kept = mem

    for step in range(3):  # moves, a filtered query between
        c = c + rng.normal(0, 0.5, c.shape)
        idx.update(ids, c)
        oracle.update(ids, c)
        some = rng.choice(ids, size=50, replace=False)
        assert_pairs(idx.query_pairs(ids=some, margin=0.2), oracle.pairs(ids=some, margin=0.2),
                     f"filtered {step}")
        assert_pairs(idx.query_pairs(margin=0.2), oracle.pairs(margin=0.2), f"step {step}")
        same_or_grown(f"step {step}")
    idx.remove(ids[: n // 2])
    oracle.remove(ids[: n // 2])
    assert_pairs(idx.query_pairs(margin=0.2), oracle.pairs(margin=0.2), "fewer")
    same_or_grown("fewer")
    more = np.arange(n, 4 * n, dtype=np.int64)
    cm = rng.random((more.shape[0], 3)) * 60
    rm = rng.uniform(0.3, 2.0, more.shape[0])
    idx.insert(more, cm, rm)
    oracle.insert(more, cm, rm)
    assert_pairs(idx.query_pairs(margin=0.2), oracle.pairs(margin=0.2), "more")
    assert idx._snapshots._memory is not kept
    assert idx._snapshots._memory.key.shape[0] >= 3 * n + n // 2
