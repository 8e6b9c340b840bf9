"""The AABB tree's leaf-contiguous storage (``app/spatial/aabbtree/blocks.py``): blocks that
grow, shrink, halve and come back; kernels that stop when the heap is full and go on after a
repack; the float32 records the frustum scan reads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.bench.paper import split_fully
from app.culling.frustum import camera_planes
from app.spatial import create_index
from app.spatial.aabbtree import blocks as bl
from app.spatial.aabbtree.batches import update_objects
from app.spatial.aabbtree.pool import ROOT
from tests.oracle import Oracle


def _live(oracle: Oracle) -> np.ndarray:
    return oracle.arrays()[0]


def _centers(oracle: Oracle, ids: np.ndarray) -> np.ndarray:
    return np.array([oracle.objs[int(i)][0] for i in ids])


def _tight(idx) -> None:
    """Repack the tree's heap with no room to spare, so the next batch runs out of room."""
    idx._objs = bl.repacked(idx._nodes, idx._objs, 0)
    ob = idx._objs
    top = int(ob.meta[bl.META_TOP])
    idx._objs = ob._replace(slot=ob.slot[:top + 1].copy(), ident=ob.ident[:top + 1].copy(),
                            rec=ob.rec[:top + 1].copy(), vd=ob.vd[:top + 1].copy())


def test_block_sizes_and_free_lists():
    ob = bl.new_objects(16, heap=64)
    a = bl.take_block(ob, 3)  # 8 from the top
    b = bl.take_block(ob, 4)  # 16
    assert (a, b) == (0, 8) and ob.meta[bl.META_TOP] == 24
    bl.give_block(ob, b, 16)
    # a block of 4 halves the free 16: it takes the lower quarter, the rest goes on the lists
    c = bl.take_block(ob, 2)
    assert c == 8 and ob.free[2] == 12 and ob.free[3] == 16 and ob.meta[bl.META_TOP] == 24
    assert bl.take_block(ob, 3) == 16 and bl.take_block(ob, 2) == 12
    assert ob.free[2] == -1 and ob.free[3] == -1
    # no room for both: take_blocks gives back the one it had (to its free list) and asks
    # for the room of both
    sizes = np.array([30, 0, 20], np.int64)  # classes 5 and 5: 64 positions
    taken = bl.take_blocks(ob, sizes)
    assert taken[0] == bl.NO_ROOM and ob.meta[bl.META_NEED] == 64
    assert ob.meta[bl.META_TOP] == 56 and ob.free[5] == 24


@pytest.mark.parametrize("name,leafy", [("kd", True), ("octree", False), ("icoseptree", True)])
def test_full_heap_stops_and_resumes_every_batch(name, leafy):
    rng = np.random.default_rng(3)
    n = 3000
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-100, 100, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    idx = create_index(name, leafy=leafy, split_threshold=6)
    oracle = Oracle()
    idx.insert(ids[:1000], c[:1000], r[:1000])
    oracle.insert(ids[:1000], c[:1000], r[:1000])
    planes = camera_planes([0, 0, 0], [1, 0.2, 0.1], far=150)
    for step in range(8):
        _tight(idx)
        heap = idx._objs.slot.shape[0]
        new = ids[1000 + 250 * step: 1250 + 250 * step]
        idx.insert(new, c[new], r[new])
        oracle.insert(new, c[new], r[new])
        assert idx._objs.slot.shape[0] > heap  # the batch ran out of room and went on
        idx.validate()
        _tight(idx)
        moving = rng.choice(_live(oracle), 400, replace=False)
        c[moving] += rng.normal(scale=8.0, size=(400, 3))
        r[moving] *= rng.uniform(0.5, 2.0, 400)
        idx.update(moving, c[moving], r[moving])
        oracle.update(moving, c[moving], r[moving])
        idx.validate()
        gone = rng.choice(_live(oracle), 100, replace=False)
        idx.remove(gone)
        oracle.remove(gone)
        _tight(idx)
        got = idx.query_frustum(planes).visible  # its upkeep splits in a full heap
        assert np.array_equal(np.sort(got), oracle.frustum(planes))
        idx.validate()


@pytest.mark.parametrize("radii", [False, True])
def test_update_writes_the_store_up_to_where_it_stops(radii):
    """The update kernel writes each mover's store rows as it moves it: when the heap runs
    out of room it stops before a mover. Every mover before it is done; after it, a mover
    that stayed in its leaf may be done (the first pass moves those), every other one has
    its store rows unwritten (the resumed call reads their old spheres from the store), and
    the index then finishes the batch."""
    rng = np.random.default_rng(5)
    n = 2000
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-100, 100, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    idx = create_index("octree", leafy=True, split_threshold=6)
    idx.insert(ids, c, r)
    planes = camera_planes([0, 0, 0], [1, 0.2, 0.1], far=400)
    idx.query_frustum(planes)
    idx.maintain()
    _tight(idx)
    moving = rng.choice(ids, 400, replace=False)
    slots = idx._idmap.lookup(moving)
    before_c, before_r = idx._centers[slots].copy(), idx._radii[slots].copy()
    # A hundred small moves (no room needed), then moves into one corner, every other one
    # small: a block there fills up and the heap has no room for it.
    small = np.zeros(400, bool)
    small[:100] = True
    small[101::2] = True
    new_c = np.where(small[:, None], before_c + 1e-3, rng.normal(90.0, 1.0, (400, 3)))
    new_r = np.where(small, before_r, rng.uniform(0.1, 2.0, 400)) if radii else None
    did, _ = update_objects(idx._nodes, idx._objs, idx._spheres(), slots, new_c, new_r,
                               None, idx._keep)
    assert 100 <= did < 400
    assert np.array_equal(idx._centers[slots[:did]], new_c[:did])
    after = idx._centers[slots[did:]]
    done = np.all(after == new_c[did:], axis=1)
    assert np.array_equal(after[~done], before_c[did:][~done])
    assert not done[~small[did:]].any()  # no escape moved past the stop
    assert done[small[did:]].any()  # and the first pass did move small ones after it
    if radii:
        assert np.array_equal(idx._radii[slots[:did]], new_r[:did])
        assert np.array_equal(idx._radii[slots[did:]][~done], before_r[did:][~done])
    else:
        assert np.array_equal(idx._radii[slots], before_r)
    idx._make_room()
    rest, _ = update_objects(idx._nodes, idx._objs, idx._spheres(), slots[did:],
                                new_c[did:], None if new_r is None else new_r[did:], None,
                                idx._keep)
    assert rest == 400 - did
    idx.validate()
    c[moving] = new_c
    if radii:
        r[moving] = new_r
    oracle = Oracle()
    oracle.insert(ids, c, r)
    assert np.array_equal(np.sort(idx.query_frustum(planes).visible), oracle.frustum(planes))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), leafy=st.booleans(),
       name=st.sampled_from(["kd", "ternary", "octree", "icoseptree"]),
       frames=st.lists(st.sampled_from(["move", "grow", "spawn", "drop", "tight"]),
                       min_size=3, max_size=10))
def test_blocks_track_every_change(seed, leafy, name, frames):
    """Blocks stay sound and the scan exact under any mix of moves (radii too), spawns,
    removals and repacks; validate checks every record against the store."""
    rng = np.random.default_rng(seed)
    n = 600
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-50, 50, (n, 3))
    r = rng.uniform(0.1, 3.0, n)
    vd = rng.uniform(5, 80, n)
    idx = create_index(name, leafy=leafy, split_threshold=5)
    oracle = Oracle()
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    next_id = n
    for what in frames:
        live = _live(oracle)
        if what == "move":
            m = rng.choice(live, min(len(live), 200), replace=False)
            cm = _centers(oracle, m) + rng.normal(scale=3.0, size=(len(m), 3))
            idx.update(m, cm)
            oracle.update(m, cm)
        elif what == "grow":
            m = rng.choice(live, min(len(live), 100), replace=False)
            rm = rng.uniform(0.1, 6.0, len(m))
            vm = rng.uniform(5, 80, len(m))
            idx.update(m, _centers(oracle, m), rm, vm)
            oracle.update(m, _centers(oracle, m), rm, vm)
        elif what == "spawn":
            new = np.arange(next_id, next_id + 150, dtype=np.int64)
            next_id += 150
            cn = rng.uniform(-60, 60, (150, 3))
            rn = rng.uniform(0.1, 3.0, 150)
            vn = rng.uniform(5, 80, 150)
            idx.insert(new, cn, rn, vn)
            oracle.insert(new, cn, rn, vn)
        elif what == "drop":
            m = rng.choice(live, len(live) // 3, replace=False)
            idx.remove(m)
            oracle.remove(m)
        else:
            _tight(idx)
        eye = rng.uniform(-40, 40, 3)
        planes = camera_planes(eye, eye + rng.normal(size=3), far=90)
        for use_vd in (False, True):
            got = idx.query_frustum(planes, eye=eye, use_view_distance=use_vd).visible
            assert np.array_equal(np.sort(got), oracle.frustum(planes, eye, use_vd))
        idx.validate()


def test_a_move_in_place_rewrites_its_record():
    idx = create_index("octree", leafy=True, split_threshold=4)
    rng = np.random.default_rng(0)
    c = rng.uniform(-10, 10, (200, 3))
    idx.insert(np.arange(200), c, np.full(200, 0.5))
    idx.query_frustum(camera_planes([0, 0, 0], [1, 0, 0], far=100))
    s = int(idx._idmap.lookup(np.array([7]))[0])
    p = idx._objs.pos[s]
    idx.update(np.array([7]), c[7:8] + 1e-3)  # stays in its leaf: written where it is
    assert idx._objs.pos[s] == p and idx.last_moved == 0
    assert np.array_equal(idx._objs.rec[p, :3], (c[7] + 1e-3).astype(np.float32))
    idx.update(np.array([7]), c[7:8] + 1e-3, np.array([0.75]))  # the radius too
    assert idx._objs.rec[p, 3] == np.float32(0.75)
    idx.validate()
    assert ROOT == 0


@pytest.mark.parametrize("offset,scale", [(1e6, 1e-4), (-3e7, 1e-3), (1e12, 1.0), (0.0, 1e-9)])
@pytest.mark.parametrize("name,leafy", [("kd", True), ("ternary", False), ("octree", True)])
def test_boxes_from_float32_records_hold_the_exact_spheres(name, leafy, offset, scale):
    """Our mode builds boxes from the float32 records, widened (bounds.record_bounds): far
    from the origin, with radii far below a float32 step there, every box still holds its
    objects' exact spheres (validate: codes 18 and 21), after splits, moves, radius changes
    and removals, and queries stay exact."""
    rng = np.random.default_rng(3)
    n = 800
    ids = np.arange(n, dtype=np.int64)
    c = offset + rng.uniform(-1, 1, (n, 3)) * max(abs(offset) * 1e-5, 10.0)
    r = rng.uniform(0.1, 1.0, n) * scale
    idx = create_index(name, leafy=leafy, split_threshold=6)
    oracle = Oracle()
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    for step in range(4):
        now = _centers(oracle, _live(oracle))
        lo, hi = now.min(axis=0) - 1, now.max(axis=0) + 1  # (all: split_fully splits them all)
        got = split_fully(idx, lo, hi)
        assert np.array_equal(np.sort(got), oracle.box(lo, hi))
        idx.validate()
        m = rng.choice(_live(oracle), 200, replace=False)
        cm = _centers(oracle, m) + rng.normal(scale=(hi - lo) * 0.01, size=(200, 3))
        rm = rng.uniform(0.1, 1.0, 200) * scale
        idx.update(m, cm, rm if step % 2 else None)
        oracle.update(m, cm, rm if step % 2 else None)
        idx.remove(m[:20])
        oracle.remove(m[:20])
        idx.validate()
        q_lo = lo + (hi - lo) * rng.uniform(0, 0.5, 3)
        q_hi = q_lo + (hi - lo) * 0.4
        assert np.array_equal(np.sort(idx.query_box(q_lo, q_hi)), oracle.box(q_lo, q_hi))


def test_a_move_rounds_the_record_radius_up():
    """A centres-only move tests its node's box with the record's radius rounded up: a
    radius whose float32 copy rounds down (1 + 2^-30 -> 1.0) must not let the exact sphere
    stick out of a box grown exactly around it (an insert's box is the exact bounds)."""
    r = np.array([1.0 + 2.0 ** -30])
    idx = create_index("octree", leafy=True)
    idx.insert(np.array([7]), np.zeros((1, 3)), r)
    idx.update(np.array([7]), np.array([[5e-10, 0.0, 0.0]]))  # inside by the float32 radius
    idx.validate()
    assert idx._nodes.hi[ROOT, 0] >= 5e-10 + r[0]


@pytest.mark.parametrize("with_vd", [False, True])
def test_moves_of_radii_beyond_float32_read_the_store(with_vd):
    """A move that leaves the radius alone takes it from the record, rounded up
    (bounds.record_radius_up); a radius past float32's range is clamped there, so such a
    mover takes the slow path, which reads the store: boxes hold the exact spheres and
    queries stay exact, with and without view distances in the batch."""
    rng = np.random.default_rng(11)
    n = 400
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(-100, 100, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    r[:30] = rng.uniform(1e38, 1e300, 30)  # clamped in the records
    r[30:60] = 3.4e38 * (1 - rng.uniform(0, 1e-6, 30))  # just below float32's largest
    vd = rng.uniform(5.0, 300.0, n)
    idx = create_index("octree", leafy=True, split_threshold=5)
    oracle = Oracle()
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    planes = camera_planes([0, 0, 0], [1, 0.2, 0.1], far=150)
    eye = np.zeros(3)
    for step in range(4):
        idx.query_frustum(planes, eye, use_view_distance=True)
        idx.maintain()
        m = rng.choice(n, 120, replace=False)
        c[m] += rng.normal(scale=3.0, size=(120, 3))
        if with_vd and step % 2:
            vd[m] = rng.uniform(5.0, 300.0, 120)
            idx.update(m, c[m], None, vd[m])
            oracle.update(m, c[m], None, vd[m])
        else:
            idx.update(m, c[m])
            oracle.update(m, c[m])
        idx.validate()
        for use_vd in (False, True):
            got = idx.query_frustum(planes, eye, use_view_distance=use_vd).visible
            assert np.array_equal(np.sort(got), oracle.frustum(planes, eye, use_vd))


def test_records_beyond_float32_read_the_store():
    """Coordinates past float32's range are clamped in the records; boxes of such objects come
    from the store's exact spheres (bounds.record_bounds), so they still hold them."""
    rng = np.random.default_rng(5)
    c = rng.uniform(-10, 10, (300, 3))
    c[:40] *= 1e300
    c[40:60] = 1e38 + rng.uniform(0, 1e37, (20, 3))
    vd = np.full(300, np.inf)
    vd[:100] = rng.uniform(1e37, 1e300, 100)
    idx = create_index("octree", leafy=True, split_threshold=4)
    idx.insert(np.arange(300), c, np.full(300, 0.5), vd)
    oracle = Oracle()
    oracle.insert(np.arange(300), c, np.full(300, 0.5), vd)
    big = np.full(3, 1e301)
    assert np.array_equal(np.sort(split_fully(idx, -big, big)), oracle.box(-big, big))
    idx.validate()
    assert idx.stats()["nodes"] > 1
    # Moves read the old sphere from the record: a clamped one counts as flush everywhere
    # (every box it was in may shrink), and the radius comes from the store.
    m = np.arange(0, 300, 3)
    for step in range(3):
        cm = c[m] * (1 + 1e-3 * (step + 1)) + rng.normal(size=(len(m), 3))
        rm = None if step != 1 else rng.uniform(0.1, 2.0, len(m))
        idx.update(m, cm, rm)
        oracle.update(m, cm, rm)
        idx.validate()
        assert np.array_equal(np.sort(split_fully(idx, -big, big)), oracle.box(-big, big))
        idx.validate()


def _escapes(rng, c: np.ndarray, kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A batch where many movers leave their leaf's box: (ids in a shuffled order, centres)."""
    if kind == "teleport":  # anywhere
        ids = rng.choice(n, int(rng.integers(n // 3, n)), replace=False)
        return ids, rng.uniform(0.0, 100.0, (ids.size, 3))
    if kind == "swarm":  # half the way to one point
        ids = rng.choice(n, n // 2, replace=False)
        return ids, c[ids] + 0.5 * (rng.uniform(0.0, 100.0, 3) - c[ids])
    if kind == "swap":  # two halves of the scene change places: leaves emptied and refilled
        ids = rng.permutation(n)
        new = c[ids].copy()
        new[:, 0] = np.where(new[:, 0] < 50.0, new[:, 0] + 50.0, new[:, 0] - 50.0)
        return ids, new
    if kind == "clear":  # a half of the scene emptied into the other: whole subtrees
        ids = rng.permutation(np.flatnonzero(c[:, 0] < 50.0))
        new = c[ids].copy()
        new[:, 0] += 50.0
        return ids, new
    ids = rng.permutation(n)  # "mixed": small moves and jumps in any order
    jump = rng.random(n) < 0.3
    return ids, np.where(jump[:, None], rng.uniform(0.0, 100.0, (n, 3)),
                         c[ids] + rng.normal(0.0, 0.05, (n, 3)))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), leafy=st.booleans(),
       name=st.sampled_from(["kd", "ternary", "octree", "icoseptree"]),
       kinds=st.lists(st.sampled_from(["teleport", "swarm", "swap", "clear", "mixed"]),
                      min_size=2, max_size=5),
       radii=st.booleans())
def test_a_batch_of_escapes_is_exact_and_valid(seed, leafy, name, kinds, radii):
    """Batches whose movers mostly leave their node (moved after the update's first pass,
    their places found ahead, emptied nodes collected at the end): every node they empty,
    refill or create, in every heuristic, leaves a valid tree and the oracle's answers."""
    rng = np.random.default_rng(seed)
    n = 600
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0.0, 100.0, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    idx = create_index(name, leafy=leafy, split_threshold=4, flat=False)
    idx.insert(ids, c, r)
    oracle = Oracle()
    oracle.insert(ids, c, r)
    lo, hi = np.full(3, -10.0), np.full(3, 110.0)
    split_fully(idx, lo, hi)
    planes = camera_planes([50, 50, -60], [50, 50, 50], far=300)
    for kind in kinds:
        moved, new_c = _escapes(rng, c, kind, n)
        new_r = rng.uniform(0.1, 2.0, moved.size) if radii else None
        idx.update(moved, new_c, new_r)
        oracle.update(moved, new_c, new_r)
        c[moved] = new_c
        idx.validate()
        assert np.array_equal(np.sort(idx.query_frustum(planes).visible),
                              oracle.frustum(planes))
        assert np.array_equal(np.sort(idx.query_box(lo + 40.0, hi - 40.0)),
                              oracle.box(lo + 40.0, hi - 40.0))
        split_fully(idx, lo, hi)  # (splits the leaves the batch filled)
        idx.validate()
