"""The hierarchical hashed grid (``grid``): levels, cells, cell size, structure upkeep, validate."""

from __future__ import annotations

import numpy as np
import pytest

from app.culling.frustum import camera_planes, look_at, perspective
from app.geom.zpyramid import ZPyramid
from app.spatial import create_index
from app.spatial.hashgrid import TARGET_PER_CELL, HashedGrid, choose_cell_size
from app.spatial.hashgrid.store import ST_IHW, ST_INFREE, ST_NFREE
from tests.oracle import Oracle


def filled(n=500, spread=50.0, rmax=3.0, seed=0, **kw) -> tuple[HashedGrid, Oracle]:
    rng = np.random.default_rng(seed)
    g = create_index("grid", **kw)
    o = Oracle()
    ids = np.arange(n, dtype=np.int64) * 5 + 1
    c = rng.uniform(-spread, spread, (n, 3))
    r = rng.uniform(0, rmax, n)
    vd = rng.uniform(0, 2 * spread, n)
    g.insert(ids, c, r, vd)
    o.insert(ids, c, r, vd)
    return g, o


def object_cells(g: HashedGrid) -> set[tuple[int, int, int, int]]:
    """(level, ix, iy, iz) each live object belongs in, from the definition."""
    ids = g.all_ids()
    c, r, _ = g.get(ids)
    lvl = g.level_of(r)
    size = g.cell_size * 2.0 ** lvl
    ijk = np.floor(c / size[:, None]).astype(np.int64)
    return {(int(a), *map(int, b)) for a, b in zip(lvl, ijk, strict=True)}


def occupied_cells(g: HashedGrid) -> set[tuple[int, int, int, int]]:
    lo, hi, depth = g.node_boxes()
    size = hi[:, 0] - lo[:, 0]
    ijk = np.rint(lo / size[:, None]).astype(np.int64)
    return {(int(a), *map(int, b)) for a, b in zip(depth, ijk, strict=True)}


def test_level_selection_by_diameter():
    g = create_index("grid", cell_size=1.0)
    r = np.array([0.0, 0.25, 0.5, 0.5000001, 1.0, 1.01, 2.0, 100.0])
    # smallest L with 2r <= 2**L
    assert list(g.level_of(r)) == [0, 0, 0, 1, 1, 2, 2, 8]
    g.insert(np.arange(len(r)), np.zeros((len(r), 3)) + 0.5, r)
    g.validate()
    assert g.stats()["levels"] == {0: 3, 1: 2, 2: 2, 8: 1}
    assert sorted(g.node_boxes()[2].tolist()) == [0, 1, 2, 8]


def test_every_object_in_the_cell_of_its_center_and_no_empty_cells():
    g, _ = filled(800, rmax=6.0, cell_size=2.0)
    g.validate()
    assert occupied_cells(g) == object_cells(g)
    lo, hi, depth = g.node_boxes()
    assert np.allclose(hi - lo, (2.0 * 2.0 ** depth)[:, None])


def test_moves_relink_and_empty_cells_leave_table():
    g, o = filled(400, cell_size=4.0)
    rng = np.random.default_rng(1)
    ids = g.all_ids()
    for _ in range(5):
        c = rng.uniform(-500, 500, (len(ids), 3))
        g.update(ids, c)
        o.update(ids, c)
        g.validate()
        assert occupied_cells(g) == object_cells(g)
    st = g.stats()
    assert 2 * st["table_used"] <= st["table_size"]  # tombstones are cleaned by rehashing
    g.remove(ids)
    g.validate()
    assert g.stats()["nodes"] == 0
    assert g.node_boxes()[0].shape == (0, 3)


def test_moves_grow_no_item_pool_and_compactions_reuse_the_spare():
    """A build leaves the item pool full; a move frees its item before it takes one, so moves
    must not grow it (doubling 10^6 items stalled the first update 0.2 s), and compactions
    (every batch here: each moves every object to another cell) alternate two pools. (The
    grid kept: it would go flat under such batches.)"""
    g, o = filled(5000, spread=200.0, cell_size=4.0, flat=False)
    assert int(g._grid.meta[ST_INFREE]) == 0
    cap = g._items.cen.shape[0]
    rng = np.random.default_rng(3)
    ids = g.all_ids()
    planes = camera_planes(np.zeros(3), np.array([1.0, 0.2, 0.1]), far=150.0)
    pools = set()
    for _ in range(4):
        c = rng.uniform(-200.0, 200.0, (len(ids), 3))
        g.update(ids, c)
        o.update(ids, c)
        g.validate()
        assert g._items.cen.shape[0] == cap
        pools.add(id(g._items.cen))
        got = np.sort(g.query_frustum(planes, np.zeros(3), True).visible)
        assert np.array_equal(got, np.sort(o.frustum(planes, np.zeros(3), True)))
    assert len(pools) == 2


def test_cells_grow_when_a_batch_runs_out_not_by_its_worst_case():
    """A batch reserves a few cells and the pool doubles when the kernels run out (they stop
    and come back), so a batch of many objects in few cells grows nothing, and one that needs
    a cell per object, many times the pool, still links them all."""
    g = create_index("grid", cell_size=1.0)
    o = Oracle()
    rng = np.random.default_rng(5)
    n = 16_000  # leaves about 4,500 cells free: more than 1,024, less than half the live
    ids = np.arange(n, dtype=np.int64)
    c = rng.integers(-400, 400, (n, 3)) + 0.5  # a cell each (almost all distinct)
    g.insert(ids, c, np.full(n, 0.1))
    o.insert(ids, c, np.full(n, 0.1))
    g.validate()
    cap = g._grid.cells.key.shape[0]
    live = g.stats()["nodes"]
    assert cap <= 2 * live + 2048
    assert int(g._grid.meta[ST_NFREE]) >= 1024
    more = np.arange(n, 3 * n, dtype=np.int64)  # 32,000 more in the cells there are
    cm = np.repeat(c, 2, axis=0) + rng.uniform(-0.3, 0.3, (2 * n, 3))
    g.insert(more, cm, np.full(2 * n, 0.1))
    o.insert(more, cm, np.full(2 * n, 0.1))
    g.validate()
    assert g._grid.cells.key.shape[0] == cap
    planes = camera_planes(np.zeros(3), np.array([1.0, 0.2, 0.1]), far=300.0)
    assert np.array_equal(np.sort(g.query_frustum(planes, np.zeros(3)).visible),
                          np.sort(o.frustum(planes, np.zeros(3))))


def test_small_moves_inside_a_cell_change_no_structure():
    g, _ = filled(300, cell_size=10.0)
    before = g.node_boxes()
    ids = g.all_ids()
    c, _, _ = g.get(ids)
    cell = np.floor(c / 10.0)
    nudged = np.clip(c + 1e-3, cell * 10.0, cell * 10.0 + 9.999)  # stays in its cell
    g.update(ids, nudged)
    g.validate()
    after = g.node_boxes()
    for a, b in zip(before, after, strict=True):
        assert np.array_equal(a, b)


def test_huge_radii_reported_once_and_exact():
    rng = np.random.default_rng(2)
    g = create_index("grid", cell_size=0.5)
    o = Oracle()
    n = 200
    ids = np.arange(n)
    c = rng.uniform(-20, 20, (n, 3))
    r = np.where(rng.random(n) < 0.3, rng.uniform(50, 5000, n), rng.uniform(0, 0.2, n))
    g.insert(ids, c, r)
    o.insert(ids, c, r)
    g.validate()
    for k in range(5):
        eye = rng.uniform(-30, 30, 3)
        planes = camera_planes(eye, eye + rng.normal(size=3), far=100)
        vis = g.query_frustum(planes, eye=eye).visible
        assert len(np.unique(vis)) == len(vis)
        assert np.array_equal(np.sort(vis), o.frustum(planes))
        lo = rng.uniform(-30, 30, 3)
        hi = lo + 10
        got = g.query_box(lo, hi)
        assert len(np.unique(got)) == len(got)
        assert np.array_equal(np.sort(got), o.box(lo, hi))
        q = rng.uniform(-30, 30, 3)
        got = g.query_sphere(q, 3.0 * k)
        assert len(np.unique(got)) == len(got)
        assert np.array_equal(np.sort(got), o.sphere(q, 3.0 * k))
        ro = rng.uniform(-30, 30, 3)
        rd = rng.normal(size=3)
        gi, _ = g.query_ray(ro, rd)
        assert len(np.unique(gi)) == len(gi)
        assert np.array_equal(np.sort(gi), np.sort(o.ray(ro, rd)[0]))


def test_clamped_far_coordinates_stay_exact():
    g = create_index("grid", cell_size=1.0)
    o = Oracle()
    c = np.array([[1e300, 0, 0], [-1e300, 5, 5], [0, 1e200, 0], [1, 2, 3]])
    r = np.array([1.0, 2.0, 1e199, 0.5])
    g.insert(np.arange(4), c, r)
    o.insert(np.arange(4), c, r)
    g.validate()
    for lo, hi in (([9e299, -1, -1], [2e300, 1, 1]), ([-1, -1, -1], [5, 5, 5]),
                   ([-2e300, 0, 0], [-1e299, 9, 9])):
        lo, hi = np.array(lo, float), np.array(hi, float)
        assert np.array_equal(np.sort(g.query_box(lo, hi)), o.box(lo, hi))
    planes = camera_planes([0, 0, 0], [1, 0.01, 0], far=10)
    assert np.array_equal(np.sort(g.query_frustum(planes).visible), o.frustum(planes))


def test_cell_size_override_and_validation():
    assert create_index("grid", cell_size=3.0).cell_size == 3.0
    g = create_index("grid")
    assert g.cell_size is None
    for bad in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError):
            create_index("grid", cell_size=bad)
    with pytest.raises(ValueError):
        create_index("grid", leafy=True)
    with pytest.raises(ValueError):
        create_index("grid", split_threshold=3)
    create_index("grid", leafy=False, split_threshold=None)  # the "not applicable" values


def test_default_cell_size_from_density_and_diameter():
    rng = np.random.default_rng(3)
    n = 20000
    c = rng.uniform(0, 100, (n, 3))
    r = rng.uniform(0.1, 0.3, n)
    g = create_index("grid")
    g.insert(np.arange(n), c, r)
    want = (0.98**3 * 100**3 * TARGET_PER_CELL / (0.98 * n)) ** (1 / 3)
    assert g.cell_size == pytest.approx(want, rel=0.05)
    assert g.stats()["mean_per_cell"] == pytest.approx(TARGET_PER_CELL, rel=0.3)
    # Sparse big objects: the median diameter wins over the density.
    c = rng.uniform(0, 10, (5000, 3))
    assert choose_cell_size(c, np.full(5000, 40.0)) == pytest.approx(80.0)
    # Degenerate data still gets a usable size.
    assert choose_cell_size(np.zeros((5, 3)), np.zeros(5)) > 0
    assert choose_cell_size(np.zeros((0, 3)), np.zeros(0)) == 1.0


def test_frustum_counts_outcomes_and_view_distance():
    g, o = filled(2000, spread=100.0, cell_size=8.0)
    eye = np.zeros(3)
    planes = camera_planes(eye, [1, 0.3, 0.2], far=80)
    res = g.query_frustum(planes, eye=eye)
    assert np.array_equal(np.sort(res.visible), o.frustum(planes))
    assert res.working_set >= len(res.visible)
    assert 0 < res.nodes_visited <= g.stats()["nodes"]
    out = g.node_outcomes()
    assert out.shape[0] == g.node_boxes()[0].shape[0]
    assert (out != 0).sum() == res.nodes_visited
    vd = g.query_frustum(planes, eye=eye, use_view_distance=True)
    assert np.array_equal(np.sort(vd.visible), o.frustum(planes, eye, True))
    # Shrink every view distance: the loose per-cell bounds are refreshed lazily.
    ids = g.all_ids()
    c, _, _ = g.get(ids)
    g.update(ids, c, view_distances=np.full(len(ids), 5.0))
    o.update(ids, c, vd=np.full(len(ids), 5.0))
    vd2 = g.query_frustum(planes, eye=eye, use_view_distance=True)
    assert np.array_equal(np.sort(vd2.visible), o.frustum(planes, eye, True))
    assert vd2.working_set < vd.working_set
    g.validate()


def test_occlusion_rejects_cells_behind_a_near_wall():
    g, o = filled(1000, spread=100.0, cell_size=8.0)
    eye = np.zeros(3)
    target = np.array([1.0, 0.2, 0.1])
    vp = perspective(60, 16 / 9, 0.1, 300) @ look_at(eye, target)
    planes = camera_planes(eye, target)
    far_wall = ZPyramid.from_levels(vp, [np.ones((8, 8), np.float32)])
    res = g.query_frustum(planes, eye=eye, occlusion=far_wall)
    assert np.array_equal(np.sort(res.visible), o.frustum(planes))
    near_wall = ZPyramid.from_levels(vp, [np.zeros((8, 8), np.float32)])
    res = g.query_frustum(planes, eye=eye, occlusion=near_wall)
    assert res.occluded_nodes > 0
    assert len(res.visible) < len(o.frustum(planes))


@pytest.mark.parametrize("use_vd", [False, True])
def test_partial_occlusion_equals_brute_force(use_vd):
    """A ragged depth pyramid (cells partly hidden): the same answer as the brute index, which
    makes accept_sphere's decision per object, before and after moves."""
    g, _ = filled(3000, spread=100.0, cell_size=6.0, seed=4)
    b = create_index("brute")
    ids = g.all_ids()
    c, r, vd = g.get(ids)
    b.insert(ids, c, r, vd)
    eye = np.zeros(3)
    target = np.array([1.0, 0.2, 0.1])
    vp = perspective(60, 16 / 9, 0.1, 300) @ look_at(eye, target)
    planes = camera_planes(eye, target)
    rng = np.random.default_rng(5)
    depth = rng.choice([0.95, 0.999, 1.0], size=(64, 64)).astype(np.float32)
    depth[16:48, 8:40] = 0.0  # a near block hides whole cells
    pyr = ZPyramid.from_depth(vp, depth)
    for _ in range(3):
        got = g.query_frustum(planes, eye=eye, use_view_distance=use_vd, occlusion=pyr)
        want = b.query_frustum(planes, eye=eye, use_view_distance=use_vd, occlusion=pyr)
        assert np.array_equal(np.sort(got.visible), np.sort(want.visible))
        assert got.occluded_objects > 0 and got.occluded_nodes > 0
        moved = ids[::7]
        nc = g.get(moved)[0] + rng.normal(scale=8.0, size=(len(moved), 3))
        g.update(moved, nc)
        b.update(moved, nc)
    g.validate()


def corruptions():
    def item_copy(g):
        g._items.cen[g._objs.item[g._alive.argmax()], 0] += 1.0

    def item_id(g):
        g._items.ident[g._objs.item[g._alive.argmax()]] += 1

    def wrong_cell(g):
        s = np.flatnonzero(g._alive)
        cell = g._objs.cell
        cell[s[0]] = cell[s[-1]] if cell[s[0]] != cell[s[-1]] else -1

    def broken_link(g):
        inext = g._items.next
        it = np.flatnonzero(inext[: g._grid.meta[ST_IHW]] >= 0)[0]
        inext[it] = -1

    def count(g):
        g._grid.cells.count[g._objs.cell[g._alive.argmax()]] += 1

    def table(g):
        g._grid.table.val[g._grid.cells.pos[g._objs.cell[g._alive.argmax()]]] = -2

    def level_radius(g):
        g._grid.levels.rmax[:] = 0.0

    def extent(g):
        g._grid.levels.ext[:, 3:] = -(1 << 41)

    def vd_bound(g):
        g._grid.cells.vdmax[g._objs.cell[g._alive.argmax()]] = -1.0

    def cell_free_stack(g):
        meta = g._grid.meta
        g._grid.cells.free[meta[ST_NFREE] - 1] = g._objs.cell[g._alive.argmax()]

    def item_free_stack(g):
        meta = g._grid.meta
        g._items.free[meta[ST_INFREE] - 1] = g._objs.item[g._alive.argmax()]

    def dirty_flag(g):
        g._grid.cells.dirty[g._objs.cell[g._alive.argmax()]] = True

    return [item_copy, item_id, wrong_cell, broken_link, count, table, level_radius, extent,
            vd_bound, cell_free_stack, item_free_stack, dirty_flag]


@pytest.mark.parametrize("corrupt", corruptions(), ids=lambda f: f.__name__)
def test_validate_catches_corruption(corrupt):
    g, _ = filled(300, cell_size=5.0)
    g.validate()
    corrupt(g)
    with pytest.raises(AssertionError):
        g.validate()


def test_automatic_cell_size_is_rechosen_as_data_grows():
    rng = np.random.default_rng(4)
    g = create_index("grid")
    o = Oracle()
    c = rng.uniform(0, 100, (20000, 3))
    r = rng.uniform(0.1, 0.3, 20000)
    ids = np.arange(20000)
    for a, b in ((0, 100), (100, 20000)):  # a small first chunk, then the rest
        g.insert(ids[a:b], c[a:b], r[a:b])
        o.insert(ids[a:b], c[a:b], r[a:b])
    g.validate()
    assert g.cell_size == pytest.approx(choose_cell_size(c, r), rel=0.5)
    planes = camera_planes([50, 50, 50], [0, 0, 0], far=60)
    assert np.array_equal(np.sort(g.query_frustum(planes).visible), o.frustum(planes))
    fixed = create_index("grid", cell_size=2.0)
    fixed.insert(ids[:100], c[:100], r[:100])
    fixed.insert(ids[100:], c[100:], r[100:])
    assert fixed.cell_size == 2.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cells_whole_in_view_are_emitted_side_by_side_exactly(seed):
    """Cells inside the frustum whose every object passes are emitted after the walk, four
    lists at a time (``queries.emit_lists``): with their items scattered by spawns and moves,
    with one to many such cells (lanes that refill and lanes left idle), beside partly
    visible cells, the answer and its working set are the oracle's."""
    rng = np.random.default_rng(seed)
    g, o = filled(3000, spread=60.0, seed=seed, cell_size=4.0, flat=False)
    ids = g.all_ids()
    gone = rng.choice(ids, 900, replace=False)
    g.remove(gone)
    o.remove(gone)
    new = np.arange(900, dtype=np.int64) * 5 + 100_000
    c = rng.uniform(-60.0, 60.0, (900, 3))
    r = rng.uniform(0.0, 3.0, 900)
    g.insert(new, c, r)
    o.insert(new, c, r)
    movers = rng.choice(g.all_ids(), 800, replace=False)
    mc = rng.uniform(-60.0, 60.0, (800, 3))
    g.update(movers, mc)
    o.update(movers, mc)
    g.validate()
    for eye, at, far in (([-300.0, 0, 0], [0.0, 0, 0], 2000.0),   # every cell inside
                         ([0.0, 0, 0], [1.0, 0.2, 0.1], 2000.0),  # half the world
                         ([-90.0, 0, 0], [0.0, 0, 0], 70.0),      # a few cells whole
                         ([-61.0, 30, 30], [0.0, 30, 30], 10.0)):  # one cell or none
        planes = camera_planes(eye, at, far=far)
        got = g.query_frustum(planes, np.array(eye))
        want = o.frustum(planes)
        assert np.array_equal(np.sort(got.visible), want)
        assert got.visible.size == np.unique(got.visible).size
