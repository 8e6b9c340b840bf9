"""Z-pyramid occlusion through a NestedIndex (issue 15): ``query_frustum(occlusion=...)``.

The oracle: the frustum-exact set of the flattened scene (``tests/test_nested.FlatOracle``,
canonical world spheres), then the flat indexes' occluder predicate (``spheres_occluded``) on
those world spheres. Random scenes (the same operation sequences as test_nested) and random
pyramids (rectangles at the window depths of the scene's own objects, the pyramid's camera the
culling camera or another one as in previous-frame occlusion), with the group gate on and off;
the answer also equals a flat ``brute`` index over the same world spheres with the same
pyramid. Bad pyramids: ValueError, nothing changed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.culling.frustum import look_at, perspective, planes_from_matrix
from app.geom.predicates import NODE_REJECT_OCCLUSION
from app.geom.zpyramid import ZPyramid, spheres_occluded
from app.spatial import create_index
from app.spatial.nested import NestedIndex
from tests.test_nested import KIND_IDS, KINDS, FlatOracle, _scene, make, ops, rigid, run_ops, state


def _camera(rng: np.random.Generator, spread: float):
    """(eye, planes, viewproj) of a random perspective camera."""
    eye = rng.uniform(-spread, spread, 3)
    target = eye + rng.normal(size=3)
    vp = perspective(rng.uniform(30, 100), rng.uniform(0.5, 2), 0.1,
                     rng.uniform(0.3, 2.0) * spread * 2) @ look_at(eye, target)
    return eye, planes_from_matrix(vp), vp


def _pyramid(rng: np.random.Generator, vp: np.ndarray, centers: np.ndarray) -> ZPyramid:
    """A depth image of random rectangles, each at the window depth of one of ``centers`` (or
    a random depth), reduced to a pyramid (sometimes without its finest levels)."""
    w, h = int(rng.integers(4, 90)), int(rng.integers(4, 60))
    depth = np.full((h, w), 1.0 if rng.random() < 0.7 else rng.uniform(0.5, 1.0), np.float32)
    zs = []
    if centers.shape[0]:
        clip = np.c_[centers, np.ones(centers.shape[0])] @ vp.T
        ok = clip[:, 3] > 1e-6
        zs = (0.5 * clip[ok, 2] / clip[ok, 3] + 0.5).tolist()
    if zs and rng.random() < 0.3:  # a wall over the whole screen: whole groups behind it
        depth[:] = zs[int(rng.integers(len(zs)))]
    for _ in range(int(rng.integers(0, 8))):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = int(rng.integers(x0, w + 1)), int(rng.integers(y0, h + 1))
        z = zs[int(rng.integers(len(zs)))] if zs and rng.random() < 0.8 else rng.random()
        depth[y0:y1 + 1, x0:x1 + 1] = min(max(z + rng.normal() * 1e-3, 0.0), 1.0)
    return ZPyramid.from_depth(vp, depth, first_level=int(rng.choice([0, 0, 1, 2])))


def _oracle(o: FlatOracle, planes, eye, use_vd: bool, pyr: ZPyramid) -> tuple[np.ndarray, int]:
    """(ids in the frustum and not hidden, sorted; how many the pyramid hid)."""
    inview = o.frustum(planes, eye, use_vd)
    ids, c, r, _ = o.flat()
    at = np.searchsorted(ids, inview)
    hid = spheres_occluded(c[at], r[at], *pyr.arrays())
    return inview[~hid], int(hid.sum())


def _flat_brute(o: FlatOracle, planes, eye, use_vd: bool, pyr: ZPyramid) -> np.ndarray:
    """The same world spheres in a flat brute index, queried with the same pyramid."""
    ids, c, r, v = o.flat()
    idx = create_index("brute")
    if ids.shape[0]:
        idx.insert(ids, c, r, v)
    return np.sort(idx.query_frustum(planes, eye=eye, use_view_distance=use_vd,
                                     occlusion=pyr).visible)


def check_occlusion(h: NestedIndex, o: FlatOracle, rng: np.random.Generator, spread: float,
                    cameras: int = 3) -> None:
    ids, c, _, _ = o.flat()
    for _ in range(cameras):
        eye, planes, vp = _camera(rng, spread)
        # the pyramid's camera: the culling one (two-pass), or another (previous frame's)
        pvp = vp if rng.random() < 0.5 else _camera(rng, spread)[2]
        pyr = _pyramid(rng, pvp, c)
        for use_vd in (False, True):
            want, hidden = _oracle(o, planes, eye, use_vd, pyr)
            for gate in (True, False):
                h.occlusion_gate = gate
                res = h.query_frustum(planes, eye=eye, use_view_distance=use_vd, occlusion=pyr)
                got = np.sort(res.visible)
                assert np.array_equal(got, want), (
                    f"gate={gate} use_vd={use_vd}: extra {np.setdiff1d(got, want)[:10]}, "
                    f"missing {np.setdiff1d(want, got)[:10]}")
                assert res.occluded_objects == hidden
                if not gate:
                    assert res.occluded_nodes == 0
            assert np.array_equal(_flat_brute(o, planes, eye, use_vd, pyr), want)
    h.occlusion_gate = True


@pytest.mark.parametrize(("kind", "kw", "inner_min"), KINDS, ids=KIND_IDS)
@given(seq=ops, seed=st.integers(0, 2**31 - 1))
def test_occlusion_matches_frustum_oracle_then_occluder(kind, kw, inner_min, seq, seed):
    rng = np.random.default_rng(seed)
    h = make(kind, kw, inner_min)
    o = FlatOracle()
    run_ops(h, o, seq, rng, spread=60.0, check_every=False)
    check_occlusion(h, o, rng, 60.0, cameras=3)
    h.validate()


def _wall_scene(groups: int = 12, per: int = 6, x: tuple = (-3.0, 3.0)):
    """Small turned groups far behind a wall that fills the screen, one group in front of it."""
    rng = np.random.default_rng(5)
    h = NestedIndex("octree", inner_min=0)
    o = FlatOracle()
    for g in range(groups + 1):
        M = rigid(rng, 1.0, scale=rng.uniform(0.5, 2.0))
        M[:3, 3] = [rng.uniform(*x), rng.uniform(-2, 2), -40.0 if g < groups else -5.0]
        h.add_group(g, None, M)
        o.groups[g] = [None, M]
        ids = np.arange(g * 100, g * 100 + per)
        c = rng.normal(size=(per, 3)) * 0.5
        r = rng.uniform(0.05, 0.3, per)
        h.insert(g, ids, c, r)
        for i in range(per):
            o.objs[int(ids[i])] = [g, c[i], float(r[i]), np.inf]
    vp = perspective(60.0, 1.5, 0.5, 100.0) @ look_at(np.zeros(3), np.array([0.0, 0.0, -1.0]))
    clip = vp @ np.array([0.0, 0.0, -20.0, 1.0])
    depth = np.full((48, 72), 0.5 * clip[2] / clip[3] + 0.5, np.float32)  # the wall at z = -20
    return h, o, vp, ZPyramid.from_depth(vp, depth)


def test_group_gate_hides_whole_groups_exactly():
    h, o, vp, pyr = _wall_scene()
    planes = planes_from_matrix(vp)
    res = h.query_frustum(planes, occlusion=pyr)
    want, hidden = _oracle(o, planes, np.zeros(3), False, pyr)
    assert np.array_equal(np.sort(res.visible), want)
    assert set(want.tolist()) == set(range(1200, 1206))  # only the group in front of the wall
    assert res.occluded_objects == hidden == 72
    assert res.occluded_nodes == 12  # each hidden group tested once, its objects not at all
    gc, gids, _, codes = h.group_boxes()
    assert all(c == NODE_REJECT_OCCLUSION for g, c in zip(gids, codes.tolist(), strict=True)
               if g < 12)
    h.occlusion_gate = False
    res2 = h.query_frustum(planes, occlusion=pyr)
    assert np.array_equal(np.sort(res2.visible), want) and res2.occluded_nodes == 0
    # without the pyramid everything in view comes back
    assert np.array_equal(np.sort(h.query_frustum(planes).visible), o.frustum(planes))


def test_gate_leaves_groups_off_the_old_screen_to_their_objects():
    """Previous-frame occlusion: a group whose sphere is partly off the pyramid's screen is not
    gated (its objects off that screen are kept, as the object test keeps them)."""
    h, o, vp, _ = _wall_scene(x=(-34.0, -10.0))
    # the pyramid of a camera turned right by ~19 degrees: its left edge is at ~22 degrees
    # left of the view, x ~ -16 at z = -40: groups on both sides of it and across it
    old = perspective(60.0, 1.5, 0.5, 100.0) @ look_at(np.zeros(3), np.array([0.35, 0.0, -1.0]))
    clip = old @ np.array([0.0, 0.0, -20.0, 1.0])
    pyr = ZPyramid.from_depth(old, np.full((48, 72), 0.5 * clip[2] / clip[3] + 0.5, np.float32))
    planes = planes_from_matrix(vp)
    want, _ = _oracle(o, planes, np.zeros(3), False, pyr)
    for gate in (True, False):
        h.occlusion_gate = gate
        assert np.array_equal(np.sort(h.query_frustum(planes, occlusion=pyr).visible), want)
    assert len(want) > 6  # some objects behind the wall are off the old screen: kept
    h.occlusion_gate = True
    res = h.query_frustum(planes, occlusion=pyr)
    assert 0 < res.occluded_nodes < 12  # the groups wholly on the old screen are gated


def _bad_pyramids() -> dict:
    good = ZPyramid.from_depth(np.eye(4), np.ones((8, 8), np.float32))
    nan_vp = ZPyramid.from_depth(np.eye(4), np.ones((8, 8), np.float32))
    nan_vp.viewproj = nan_vp.viewproj.copy()
    nan_vp.viewproj[1, 2] = np.nan

    def edit(**kw):
        p = ZPyramid(good.viewproj.copy(), good.data.copy(), good.offsets.copy(),
                     good.widths.copy(), good.heights.copy())
        for k, v in kw.items():
            setattr(p, k, v)
        return p

    return {
        "not a pyramid": object(),
        "a tuple": good.arrays(),
        "NaN viewproj": nan_vp,
        "viewproj shape": edit(viewproj=np.eye(3)),
        "float64 data": edit(data=good.data.astype(np.float64)),
        "level arrays of two lengths": edit(widths=good.widths[:-1].copy()),
        "data too short": edit(data=good.data[:10].copy()),
        "coarsest level not stored": edit(offsets=np.r_[good.offsets[:-1], -1]),
        "zero width": edit(widths=np.r_[0, good.widths[1:]]),
    }


@pytest.mark.parametrize("what", list(_bad_pyramids()))
def test_bad_pyramid_raises_and_changes_nothing(what):
    h, o = _scene("octree", inner_min=0)
    rng = np.random.default_rng(2)
    eye, planes, vp = _camera(rng, 20.0)
    h.query_frustum(planes, eye=eye)
    before = state(h, o)
    codes = h.group_boxes()[3].copy()
    with pytest.raises(ValueError, match="occlusion"):
        h.query_frustum(planes, eye=eye, occlusion=_bad_pyramids()[what])
    assert state(h, o) == before
    assert np.array_equal(h.group_boxes()[3], codes)
    h.validate()
    # and the next good query answers as before
    check_occlusion(h, o, rng, 20.0, cameras=2)


@given(seed=st.integers(0, 2**31 - 1), groups=st.integers(1, 30), nested=st.booleans())
def test_small_groups_behind_walls_match_the_oracle(seed, groups, nested):
    """Many small turned groups (some nested) in front of the camera, walls and rectangles at
    their depths: the group gate fires often here; the answer is still the oracle's."""
    rng = np.random.default_rng(seed)
    h = NestedIndex("icoseptree", inner_min=int(rng.choice([0, 1 << 30])))
    o = FlatOracle()
    for g in range(groups):
        parent = None if not nested or g == 0 or rng.random() < 0.5 else int(rng.integers(g))
        M = rigid(rng, 1.0, scale=float(rng.uniform(0.2, 3.0)))
        M[:3, 3] = rng.uniform(-1, 1, 3) * [15, 10, 0] + [0, 0, -rng.uniform(5, 60)]
        if parent is not None:  # near its parent: undo the parent's placement roughly
            M[:3, 3] = rng.normal(size=3)
        h.add_group(g, parent, M)
        o.groups[g] = [parent, M]
        k = int(rng.integers(0, 12))
        ids = np.arange(g * 100, g * 100 + k)
        c = rng.normal(size=(k, 3)) * rng.uniform(0.1, 1.0)
        r = rng.uniform(0.0, 0.4, k)
        vd = rng.uniform(5, 80, k)
        h.insert(g, ids, c, r, vd)
        for i in range(k):
            o.objs[int(ids[i])] = [g, c[i], float(r[i]), float(vd[i])]
    ids, c, _, _ = o.flat()
    eye = rng.normal(size=3)
    vp = perspective(rng.uniform(40, 90), rng.uniform(1, 2), 0.3, 120.0) @ look_at(
        eye, eye + np.array([rng.normal() * 0.2, rng.normal() * 0.2, -1.0]))
    planes = planes_from_matrix(vp)
    for _ in range(3):
        pyr = _pyramid(rng, vp if rng.random() < 0.7 else _camera(rng, 3.0)[2], c)
        for use_vd in (False, True):
            want, hidden = _oracle(o, planes, eye, use_vd, pyr)
            for gate in (True, False):
                h.occlusion_gate = gate
                res = h.query_frustum(planes, eye=eye, use_view_distance=use_vd, occlusion=pyr)
                assert np.array_equal(np.sort(res.visible), want), (gate, use_vd)
                assert res.occluded_objects == hidden


# --------------------------------------------------------------------------- overlay boxes


def _node_boxes_reference(h: NestedIndex):
    """node_boxes_info as the per-group loop computes it (the pre-cache code)."""
    from app.spatial.nested.query import world_corners

    h._refresh()
    los, his, depths, owners = [], [], [], []
    t = h._tree
    for g in t.order.tolist():
        h._flush(g)
        lo, hi, d = t.inner[g].node_boxes()
        if lo.shape[0]:
            los.append(lo)
            his.append(hi)
            depths.append(np.asarray(d, np.int64))
            owners.append(np.full(lo.shape[0], g, np.int64))
    if not los:
        return np.zeros((0, 8, 3)), [], np.zeros(0, np.int64), np.zeros(0, np.int64)
    own = np.concatenate(owners)
    corners = world_corners(np.concatenate(los), np.concatenate(his), own, t.G.W)
    return corners, [t.keys[g] for g in own.tolist()], np.concatenate(depths), t.G.depth[own]


def _group_boxes_reference(h: NestedIndex):
    """group_boxes with numpy, group by group (the pre-kernel code)."""
    from app.spatial.nested.query import world_corners

    h._refresh()
    G, R, t = h._tree.G, h._arena.R, h._tree
    slots = [g for g in t.order.tolist() if G.b_count[g] > 0]
    lo = np.zeros((len(slots), 3))
    hi = np.zeros((len(slots), 3))
    for k, g in enumerate(slots):
        a = int(G.b_start[g])
        b = a + int(G.b_count[g])
        r = R.rad[a:b, None]
        lo[k] = (R.lc[a:b] - r).min(axis=0)
        hi[k] = (R.lc[a:b] + r).max(axis=0)
    own = np.array(slots, np.int64)
    return world_corners(lo, hi, own, G.W), [t.keys[g] for g in slots], G.depth[own]


def _same_boxes(h: NestedIndex) -> None:
    got = h.node_boxes_info()
    # the reference flushes every group and asks its index afresh: the cache must agree
    want = _node_boxes_reference(h)
    assert np.array_equal(got[0], want[0])
    assert got[1] == want[1]
    assert np.array_equal(got[2], want[2]) and np.array_equal(got[3], want[3])
    assert np.array_equal(h.node_boxes(), want[0])
    gc, gk, gd, codes = h.group_boxes()
    wc, wk, wd = _group_boxes_reference(h)
    assert np.array_equal(gc, wc) and gk == wk and np.array_equal(gd, wd)
    assert codes.shape[0] == len(gk)


@pytest.mark.parametrize(("kind", "kw", "inner_min"), KINDS, ids=KIND_IDS)
@given(seq=ops, seed=st.integers(0, 2**31 - 1))
def test_cached_node_boxes_and_compiled_group_boxes_equal_the_loops(kind, kw, inner_min, seq,
                                                                    seed):
    """After every step of a random sequence (and queries, flush(), group_index() between),
    the cached node boxes and the compiled group boxes equal the per-group loops bit for bit."""
    import tests.test_nested as tn

    rng = np.random.default_rng(seed)
    h = make(kind, kw, inner_min)
    o = FlatOracle()

    def after_step(h, o, rng, spread, cameras=2):  # run_ops calls it after every step
        _same_boxes(h)
        what = rng.integers(4)
        if what == 0:
            eye, planes, _ = _camera(rng, spread)
            h.query_frustum(planes, eye=eye)
        elif what == 1:
            h.flush()  # the moves of the next step may reach the indexes outside the cache
        elif what == 2 and o.groups:
            h.group_index(list(o.groups)[0])

    check = tn.check
    tn.check = after_step
    try:
        run_ops(h, o, seq, rng, 60.0, check_every=True)
    finally:
        tn.check = check
    _same_boxes(h)


def test_node_boxes_ask_only_the_groups_that_changed():
    rng = np.random.default_rng(4)
    h = NestedIndex("octree", inner_min=50, split_threshold=2)
    for g in range(30):
        h.add_group(g, None if g < 3 else g % 3, rigid(rng, 10.0))
        n = 80 if g == 7 else 6
        h.insert(g, np.arange(g * 100, g * 100 + n), rng.normal(size=(n, 3)), np.full(n, 0.2))

    def asked() -> int:
        h.node_boxes_info()
        n = h._node_box_cache.asked
        _same_boxes(h)
        return n

    assert asked() == 30
    assert asked() == 1  # only the group large enough for inner queries
    h.set_transforms([0, 5], np.stack([rigid(rng, 10.0), rigid(rng, 10.0)]))  # indexes unchanged
    assert asked() == 1
    h.update(None, np.array([1200, 1500, 1501]), rng.normal(size=(3, 3)))  # groups 12 and 15
    assert asked() == 3
    h.update(None, np.array([1201]), rng.normal(size=(1, 3)))
    h.flush()  # the move reached the index before the boxes were asked: the checksum sees it
    assert asked() == 2
    h.remove([1300])  # a removal: every group again
    assert asked() == 30
    h.add_group("new", 4)
    assert asked() == 31
