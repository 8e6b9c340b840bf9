"""query_pairs of the fixed octree and the hashed grid: the paths test_pairs.py cannot force.

The octree sweeps crowded nodes (and tests every pair in the others), hands a child its
earlier siblings' objects that reach it (spheres touching across a face between two sibling
subtrees), and answers ``ids`` by descents or by the filtered all-pairs walk; the grid looks
up neighbouring cells by probing or by scanning a level (huge margins and radii), across
levels, at clamped coordinates. Each path against the oracle's all-pairs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.spatial import create_index
from app.spatial.fixed_octree import pairs as octree_pairs
from app.spatial.hashgrid import pairs as grid_pairs
from tests.oracle import Oracle
from tests.test_pairs import assert_pairs


def filled(name: str, c: np.ndarray, r: np.ndarray, **kw):
    idx = create_index(name, **kw)
    o = Oracle()
    ids = np.arange(len(r), dtype=np.int64) * 3 + 1
    idx.insert(ids, c, r)
    o.insert(ids, c, r)
    return idx, o, ids


def straddlers(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Spheres crowding the mid-planes of big cubes (the octree's worst case), plus a few
    big and tiny ones."""
    c = rng.uniform(-40, 40, (n, 3))
    axis = rng.integers(0, 3, n)
    c[np.arange(n), axis] = rng.choice([-32.0, 0.0, 32.0, 16.0], n) + rng.normal(0, 0.3, n)
    r = rng.uniform(0.3, 2.0, n)
    r[:5] = [15.0, 0.0, 1e-6, 30.0, 8.0]
    return c, r


@pytest.mark.parametrize("sweep_from", [0, 512, 10**12], ids=["sweep-all", "default", "never"])
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), margin=st.sampled_from([0.0, 0.7, 12.0]))
def test_octree_sweep_and_pair_paths_match_oracle(sweep_from, seed, margin):
    rng = np.random.default_rng(seed)
    c, r = straddlers(rng, 400)
    idx, o, ids = filled("fixed-octree", c, r)
    idx.sweep_from = sweep_from
    assert_pairs(idx.query_pairs(margin=margin), o.pairs(margin=margin), "all")
    moved = np.sort(rng.choice(ids, 150, replace=False))
    c2 = c[(moved - 1) // 3] + rng.normal(0, 3.0, (150, 3))
    idx.update(moved, c2)  # queued: the query flushes first
    o.update(moved, c2)
    assert_pairs(idx.query_pairs(margin=margin), o.pairs(margin=margin), "after moves")
    idx.validate()


def test_octree_spheres_touching_across_sibling_faces():
    # Two cubes of side 1 meet at x = 0 (and at y = 1): each sphere fits its own octant
    # exactly, so no node holds both: Nevala's parent-to-child lists alone never test them.
    c = np.array([[-0.5, 0.5, 0.5], [0.5, 0.5, 0.5], [0.5, 1.5, 0.5], [-0.5, 1.5, 1.5]])
    r = np.full(4, 0.5)
    idx, o, _ = filled("fixed-octree", c, r)
    corner, side = idx.object_cells(np.array([1, 4, 7, 10]))
    assert len({tuple(x) for x in corner.tolist()}) == 4 and (side == 1.0).all()
    want = o.pairs()
    assert len(want) == 2  # the face-to-face neighbours; the diagonal ones are apart
    assert_pairs(idx.query_pairs(), want, "touching across faces")
    assert_pairs(idx.query_pairs(margin=0.5), o.pairs(margin=0.5), "within the margin")


@pytest.mark.parametrize("name", ["fixed-octree", "grid"])
@pytest.mark.parametrize("share", [0.005, 0.1, 0.3, 1.0])
def test_ids_by_descent_and_by_filtered_walk(name, share):
    # few ids: one look-up per object; many: the all-pairs walk with the per-slot filter
    rng = np.random.default_rng(11)
    c, r = straddlers(rng, 600)
    idx, o, ids = filled(name, c, r)
    for margin in (0.0, 1.5):
        some = rng.choice(ids, max(1, int(share * len(ids))), replace=False)
        some = np.r_[some, some[:3]]  # repeats are allowed
        assert_pairs(idx.query_pairs(ids=some, margin=margin), o.pairs(ids=some, margin=margin),
                     f"share {share}, margin {margin}")


@pytest.mark.parametrize("cell_size", [None, 0.25, 4.0])
def test_grid_levels_huge_margins_and_clamped_cells(cell_size):
    rng = np.random.default_rng(5)
    n = 300
    c = rng.uniform(-30, 30, (n, 3))
    r = 10 ** rng.uniform(-3, 1.3, n)  # many levels
    c[:4] = [[3e14, 0, 0], [3e14 + 1.0, 0, 0], [-3e14, 5, 5], [0, 0, 9e13]]  # clamped cells
    r[:4] = [0.6, 0.6, 1.0, 1e14]
    kw = {} if cell_size is None else {"cell_size": cell_size}
    idx, o, _ = filled("grid", c, r, **kw)
    assert len(idx.stats()["levels"]) >= (2 if cell_size is None else 3)
    for margin in (0.0, 2.0, 500.0, 1e15):  # the last reaches every cell: level scans
        assert_pairs(idx.query_pairs(margin=margin), o.pairs(margin=margin), f"margin {margin}")
    idx.validate()


@pytest.mark.parametrize("name", ["fixed-octree", "grid"])
def test_output_buffer_grows_past_its_first_size(name):
    # every pair touches: n^2/2 rows from a buffer sized for 2n, grown cell by cell / node
    # by node without losing or repeating a row (a node is done again from its start)
    rng = np.random.default_rng(2)
    c = rng.uniform(-3, 3, (400, 3))
    r = rng.uniform(0.5, 1.0, 400)
    idx, o, _ = filled(name, c, r)
    if name == "fixed-octree":  # the list buffer too: 64 entries, grown node by node
        idx._plists = octree_pairs.new_lists(0)
    got = idx.query_pairs(margin=20.0)
    assert got.shape[0] == 400 * 399 // 2
    assert_pairs(got, o.pairs(margin=20.0), "everything")
    few = np.array([1, 4])
    assert_pairs(idx.query_pairs(ids=few, margin=20.0), o.pairs(ids=few, margin=20.0), "few")


def test_thresholds_are_what_the_classes_use():
    assert create_index("fixed-octree").sweep_from == octree_pairs.SWEEP_FROM
    assert 0.0 < octree_pairs.ALL_PAIRS_FROM < 1.0
    assert 0.0 < grid_pairs.ALL_PAIRS_FROM < 1.0
    assert create_index("grid")._pairs_structural and create_index(
        "fixed-octree")._pairs_structural


def test_grid_coordinates_past_int64_clamp_to_the_right_side():
    # 3e19 cells from the origin: math.floor's int64 used to wrap to the far negative cell
    c = np.array([[3e19, 0.0, 0.0], [3e19, 1.5, 0.0], [-3e19, 0.0, 0.0], [0.0, 0.0, 0.0]])
    r = np.array([1.0, 1.0, 1.0, 1.0])
    idx, o, ids = filled("grid", c, r, cell_size=1.0)
    assert_pairs(idx.query_pairs(), o.pairs(), "far pairs")
    for margin in (1e20, 1e300):  # ranges from the near cells to past int64's reach
        assert_pairs(idx.query_pairs(margin=margin), o.pairs(margin=margin), f"margin {margin}")
        assert_pairs(idx.query_pairs(ids=ids[3:], margin=margin),
                     o.pairs(ids=ids[3:], margin=margin), f"ids, margin {margin}")
    assert sorted(idx.query_sphere(c[0], 0.6).tolist()) == [ids[0], ids[1]]
    assert idx.query_box(c[0] - 0.4, c[0] + 0.4).tolist() == [ids[0]]
    idx.validate()
