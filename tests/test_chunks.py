"""The chunked layout beyond the shared contract tests: sizes that are not whole chunks, the
tree's levels, loose boxes after moves, re-sorts, and holes left by removals."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.culling.frustum import camera_planes
from app.spatial import create_index
from app.spatial.chunks.layout import CHUNK
from tests.oracle import Oracle


def _check(idx, oracle: Oracle, eye, target, far=80.0) -> None:
    idx.validate()
    planes = camera_planes(eye, target, far=far)
    for use_vd in (False, True):
        got = np.sort(idx.query_frustum(planes, eye=eye, use_view_distance=use_vd).visible)
        assert np.array_equal(got, oracle.frustum(planes, eye, use_vd))


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 6000), seed=st.integers(0, 2**31))
def test_any_size_and_three_levels(n, seed):
    """Counts that are not whole chunks, trees of one to three levels, ids not 0..n-1."""
    rng = np.random.default_rng(seed)
    idx = create_index("chunks")
    oracle = Oracle()
    ids = rng.choice(10 * n, n, replace=False).astype(np.int64)
    c = rng.uniform(-100, 100, (n, 3))
    r = rng.uniform(0.1, 3, n)
    vd = rng.uniform(5, 150, n)
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    _check(idx, oracle, np.zeros(3), np.array([1.0, 0.2, 0.1]))
    assert idx.stats()["chunks"] == -(-n // CHUNK)


def _scene(n: int, seed: int, side: float):
    """A chunked index and its oracle holding ``n`` uniform spheres in a cube of ``side``:
    (index, oracle, ids, centres, radii, rng)."""
    rng = np.random.default_rng(seed)
    idx = create_index("chunks")
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0, side, (n, 3))
    r = rng.uniform(0.2, 1.0, n)
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    return idx, oracle, ids, c, r, rng


def _spawn(idx, oracle, first: int, k: int, side: float, rng) -> np.ndarray:
    """``k`` new spheres in a cube of ``side``, ids from ``first``, into the index and the
    oracle; returns their ids."""
    new = np.arange(first, first + k, dtype=np.int64)
    c = rng.uniform(0, side, (k, 3))
    r = rng.uniform(0.2, 1.0, k)
    idx.insert(new, c, r)
    oracle.insert(new, c, r)
    return new


def _churn(idx, oracle, ids, c, movers, fresh: int, rng) -> np.ndarray:
    """One batch of a churning mover set: ``fresh`` of ``movers`` replaced by objects that
    were not moving, all of them moved a little in ``c``, the index and the oracle; returns
    the new set."""
    keep = rng.choice(movers, movers.shape[0] - fresh, replace=False)
    new = rng.choice(np.setdiff1d(ids, movers), fresh, replace=False)
    movers = np.sort(np.concatenate([keep, new]))
    c[movers] += rng.normal(scale=0.2, size=(movers.shape[0], 3))
    idx.update(movers, c[movers])
    oracle.update(movers, c[movers])
    return movers


def test_movers_wake_and_the_awake_region_resorts():
    """The first batch after a build wakes its movers into the awake region (a set that
    starts moving keeps moving); an awake mover that jumps away from its chunk wakes again at
    the end; newcomers to a set of awake movers wake at once; the awake chunks re-sort once
    they have spread; no object is lost or hidden."""
    n = 5000
    idx, oracle, ids, c, r, rng = _scene(n, 3, 100.0)
    eye = np.full(3, 50.0)
    movers = np.sort(rng.choice(n, 1000, replace=False))
    vel = rng.normal(size=(n, 3))  # they spread: the awake chunks swell
    for step in range(60):
        if step == 40:  # a tenth of the set replaced: the newcomers wake at once
            rest = np.setdiff1d(ids, movers)
            movers = np.sort(np.concatenate([movers[100:], rng.choice(rest, 100, replace=False)]))
        c[movers] += vel[movers]
        if step == 30:  # a few jump far
            c[movers[:20]] = rng.uniform(0, 100, (20, 3))
        before = idx.stats()["awake"]
        idx.update(movers, c[movers])
        oracle.update(movers, c[movers])
        if step <= 1:  # all woke on their first move
            assert idx.stats()["awake"] == 1000
        if step == 29:  # re-sorted for spreading (before any jump or newcomer)
            assert idx.stats()["awake_resorts"] >= 1
        if step == 30:  # the far jumpers woke again, at the end
            assert idx.stats()["awake"] >= before + 10
        if step == 40:
            assert idx.stats()["awake"] >= before + 100
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=60.0)


def test_fresh_movers_stay_in_place_and_wake_on_their_second_move():
    """Once batches move fresh sets (most of a batch still), a still object that moves a
    little is written in place (its chunk's box grown); moving again the next batch wakes it;
    a set that then keeps moving makes its newcomers wake at once again."""
    n = 20000
    idx, oracle, ids, c, r, rng = _scene(n, 4, 200.0)
    eye = np.full(3, 100.0)

    def move(movers):
        c[movers] += 0.05 * rng.normal(size=(movers.shape[0], 3))
        idx.update(movers, c[movers])
        oracle.update(movers, c[movers])
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=120.0)

    move(np.sort(rng.choice(n, 200, replace=False)))  # the first batch wakes
    assert idx.stats()["awake"] == 200
    for _ in range(3):  # fresh sets: written in place (a few may leave their chunk's limit)
        before = idx.stats()["awake"]
        fresh = np.sort(rng.choice(np.setdiff1d(ids, idx._pos_id[idx._awake0:idx._npos]), 200,
                                   replace=False))
        move(fresh)
        assert idx.stats()["awake"] < before + 20
    move(fresh)  # the same set again: its second move wakes it
    assert idx.stats()["awake"] >= before + 200
    move(fresh)  # it keeps moving: awake, nothing more wakes
    assert idx.stats()["awake"] >= before + 200


def test_movers_stay_known_through_spawns_and_a_removed_mover_is_refused():
    """Inserting and removing other objects leaves last batch's movers where they were, so
    the next batch of them takes the same-movers path; a removed mover's id in a later
    batch is an unknown id (ValueError, nothing changes), not a write into its hole."""
    import pytest

    n = 4000
    idx, oracle, ids, c, r, rng = _scene(n, 6, 100.0)
    eye = np.full(3, 50.0)
    movers = np.sort(rng.choice(n, 300, replace=False))
    others = np.setdiff1d(ids, movers)
    next_id = n
    for step in range(6):
        gone = rng.choice(others, 10, replace=False)
        others = np.setdiff1d(others, gone)
        idx.remove(gone)
        oracle.remove(gone)
        new = np.arange(next_id, next_id + 10, dtype=np.int64)
        next_id += 10
        cn = rng.uniform(0, 100, (10, 3))
        idx.insert(new, cn, np.full(10, 0.5))
        oracle.insert(new, cn, np.full(10, 0.5))
        if step >= 2:  # the movers of the batch before, where it left them, still valid
            assert idx._last_movers is not None
            assert idx._last_movers.epoch == idx._layout_epoch
        c[movers] += 0.2
        idx.update(movers, c[movers])
        oracle.update(movers, c[movers])
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=60.0)
        assert not idx._pos_seen.any()  # the removal's repeat bits are left clear
    idx.remove(movers[:1])
    oracle.remove(movers[:1])
    assert idx._last_movers is None  # one of them is gone: the positions are not trusted
    assert not idx._pos_seen.any()
    before = idx.query_frustum(camera_planes(eye, eye + 1.0, far=60.0), eye).visible
    with pytest.raises(ValueError, match=str(int(movers[0]))):
        idx.update(movers, c[movers] + 1.0)
    after = idx.query_frustum(camera_planes(eye, eye + 1.0, far=60.0), eye).visible
    assert np.array_equal(np.sort(before), np.sort(after))
    idx.validate()


def test_removals_leave_holes_then_resort():
    rng = np.random.default_rng(5)
    n = 3000
    idx = create_index("chunks")
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0, 50, (n, 3))
    r = np.full(n, 0.5)
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    gone = rng.choice(n, 400, replace=False)
    idx.remove(gone)
    oracle.remove(gone)
    assert idx.stats()["holes"] == 400 and idx.stats()["resorts"] == 0
    _check(idx, oracle, np.full(3, 25.0), np.array([30.0, 26, 24]))
    rest = np.setdiff1d(ids, gone)
    more = rng.choice(rest, 800, replace=False)
    idx.remove(more)
    oracle.remove(more)
    assert idx.stats()["holes"] == 0 and idx.stats()["resorts"] == 1
    _check(idx, oracle, np.full(3, 25.0), np.array([30.0, 26, 24]))


def test_a_large_build_and_resort_on_both_cores_stay_exact():
    """Past PARALLEL_MIN objects a build and a re-sort gather and code on both cores
    (``layout.centers_of``, ``layout.frame_codes_parallel``). Ids in the id map's direct
    table and negative ones (hashed): the re-sort must point both kinds at their new
    positions (``validate`` compares the map with the layout; moves and removals use it)."""
    from app.parallelism import PARALLEL_MIN

    rng = np.random.default_rng(11)
    n = PARALLEL_MIN + 15000
    idx = create_index("chunks")
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    ids[::3] = -ids[::3] - 1  # a third negative: hashed (the rest in the direct table)
    c = rng.uniform(0, 120, (n, 3))
    r = rng.uniform(0.2, 1.5, n)
    vd = rng.uniform(10, 200, n)
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    eye, target = np.full(3, 60.0), np.array([70.0, 64, 55])
    _check(idx, oracle, eye, target, far=120.0)
    gone = rng.choice(ids, 9000, replace=False)
    idx.remove(gone)
    oracle.remove(gone)
    sorts = idx.stats()["resorts"]
    assert n - 9000 >= PARALLEL_MIN
    idx._resort()  # the re-sort itself, on what is left (more than PARALLEL_MIN)
    assert idx.stats()["resorts"] == sorts + 1 and idx.stats()["holes"] == 0
    _check(idx, oracle, eye, target, far=120.0)
    # the id -> position map after the re-sort: moves and removals find every object
    live = np.setdiff1d(ids, gone)
    moved = rng.choice(live, 4000, replace=False)
    cm = rng.uniform(0, 120, (4000, 3))
    idx.update(moved, cm)
    oracle.update(moved, cm)
    out = rng.choice(np.setdiff1d(live, moved), 500, replace=False)
    idx.remove(out)
    oracle.remove(out)
    _check(idx, oracle, eye, target, far=120.0)
    new = np.arange(2**50, 2**50 + 300, dtype=np.int64)
    cn = rng.uniform(0, 120, (300, 3))
    idx.insert(new, cn, np.ones(300))
    oracle.insert(new, cn, np.ones(300))
    _check(idx, oracle, eye, target, far=120.0)


def test_per_frame_path_rejects_bad_input_and_changes_nothing():
    """The fast path for awake movers checks the whole batch before writing anything."""
    import pytest

    rng = np.random.default_rng(9)
    n = 2000
    idx = create_index("chunks")
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0, 40, (n, 3))
    idx.insert(ids, c, np.full(n, 0.5))
    movers = np.arange(0, n, 7, dtype=np.int64)
    idx.update(movers, c[movers] + 0.1)  # wakes them
    idx.update(movers, c[movers] + 0.2)  # the per-frame path
    before = idx.get(ids)[0]
    bad = c[movers] + 0.3
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match=str(int(movers[5]))):
        idx.update(movers, bad)
    unknown = movers.copy()
    unknown[-1] = 10 * n
    with pytest.raises(ValueError, match=str(10 * n)):
        idx.update(unknown, c[movers])
    assert np.array_equal(idx.get(ids)[0], before)
    idx.validate()


def test_slot_order_when_everything_moves_and_back():
    """Two batches in a row moving most objects lay the chunks out in slot order; a small batch
    brings the curve back; inserts and removals work in both; answers stay exact."""
    rng = np.random.default_rng(11)
    n = 4000
    idx = create_index("chunks")
    oracle = Oracle()
    c = rng.uniform(0, 100, (n + 10, 3))  # rows by id, the last ten inserted later
    live = np.arange(n, dtype=np.int64)
    idx.insert(live, c[live], np.full(n, 0.5))
    oracle.insert(live, c[live], np.full(n, 0.5))
    eye = np.full(3, 50.0)
    orders = []
    for step in range(8):
        moved = live if step < 5 else np.sort(rng.choice(live, 100, replace=False))
        c[moved] += rng.normal(size=(moved.shape[0], 3))
        idx.update(moved, c[moved])
        oracle.update(moved, c[moved])
        orders.append(idx.stats()["order"])
        if step == 3:  # insert and remove while in slot order
            idx.remove(live[:5])
            oracle.remove(live[:5])
            extra = np.arange(n, n + 10, dtype=np.int64)
            idx.insert(extra, c[extra], np.full(10, 0.5))
            oracle.insert(extra, c[extra], np.full(10, 0.5))
            live = np.concatenate([live[5:], extra])
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=70.0)
    assert orders[1] == "slot" and orders[-1] == "curve", orders


def test_slot_order_spawns_take_their_slots_and_keep_boxes_open():
    """In slot order, inserted objects take their slots' positions (no re-sort, the order
    stays slot), also when the insert grows the capacity (the new tree's boxes open again:
    the moves after it do not refit); removed slots are reused; answers stay exact."""
    rng = np.random.default_rng(5)
    n = 1020  # one short of the store's 1,024: the first spawn grows it
    idx = create_index("chunks")
    oracle = Oracle()
    c = rng.uniform(0, 100, (n + 100, 3))
    live = np.arange(n, dtype=np.int64)
    idx.insert(live, c[live], np.full(n, 0.5))
    oracle.insert(live, c[live], np.full(n, 0.5))
    eye = np.full(3, 50.0)
    next_id = n
    for step in range(8):
        if step >= 2:  # spawn: two removed, five new
            gone = rng.choice(live, 2, replace=False)
            idx.remove(gone)
            oracle.remove(gone)
            new = np.arange(next_id, next_id + 5, dtype=np.int64)
            next_id += 5
            idx.insert(new, c[new], np.full(5, 0.5))
            oracle.insert(new, c[new], np.full(5, 0.5))
            live = np.concatenate([np.setdiff1d(live, gone), new])
        c[live] += rng.normal(size=(live.shape[0], 3))
        idx.update(live, c[live])
        oracle.update(live, c[live])
        if step >= 1:
            assert idx.stats()["order"] == "slot"
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=70.0)


def test_whole_scene_batches_in_slot_order_stay_exact_and_reject_bad_input():
    """Every object moving every frame in slot order: the same movers write through cached
    positions in one pass (a run of consecutive positions, or a scattered set after removals
    and re-inserts); a bad batch is refused with the store, the float32 copy and the answers
    unchanged; huge coordinates are clamped in the float32 copy as everywhere else."""
    import pytest

    rng = np.random.default_rng(12)
    n = 3000
    idx = create_index("chunks")
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0, 100, (n, 3))
    idx.insert(ids, c, np.full(n, 0.5))
    oracle.insert(ids, c, np.full(n, 0.5))
    eye = np.full(3, 50.0)
    for step in range(12):
        if step == 6:  # a scattered layout: the indexed kernel instead of the run
            idx.remove(ids[::3])
            oracle.remove(ids[::3])
            ids = np.setdiff1d(ids, ids[::3])
        c[ids] += rng.normal(size=(ids.shape[0], 3))
        if step == 4:
            c[ids[7]] = (1e300, -1e300, 5.0)  # beyond float32: the copy is clamped
        if step == 5:
            c[ids[7]] = (50.0, 50.0, 50.0)
        idx.update(ids, c[ids])
        oracle.update(ids, c[ids])
        # (a batch of every object switches to slot order at once: no second batch waits)
        assert idx.stats()["order"] == "slot" or step >= 6
        idx.validate()
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=70.0)
        before = idx.get(ids)[0].copy()
        for spoil in ("nan", "inf", "other ids"):
            bad_ids = ids.copy()
            bad = c[ids] + 1.0
            if spoil == "nan":
                bad[len(ids) // 2, 1] = np.nan
            elif spoil == "inf":
                bad[-1, 0] = np.inf
            else:
                bad_ids[-1] = 10 * n  # unknown, same length as the cached batch
            with pytest.raises(ValueError):
                idx.update(bad_ids, bad)
            assert np.array_equal(idx.get(ids)[0], before), spoil
            idx.validate()
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=70.0)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(70, 3000), seed=st.integers(0, 2**31), sizes=st.booleans())
@example(n=70, seed=2505948, sizes=False)  # failed the old bound (n // 10) once
def test_fresh_movers_in_place_grow_their_chunks_and_bad_rows_change_nothing(n, seed, sizes):
    """A fresh random set of still movers every batch (radii and view distances too when
    ``sizes``): those that stay near their chunk are written in place, their boxes grown, and
    every answer stays exact; a batch with one bad row among good ones is refused whole."""
    import pytest

    rng = np.random.default_rng(seed)
    idx = create_index("chunks")
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64) * 3 + 1  # ids not positions
    c = rng.uniform(0, 100, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    vd = rng.uniform(5, 80, n)
    idx.insert(ids, c, r, vd)
    oracle.insert(ids, c, r, vd)
    eye = np.full(3, 50.0)
    moved = np.zeros(n, bool)
    for step in range(8):
        rows = rng.choice(n, max(1, n // 20), replace=False)
        rng.shuffle(rows)  # any order
        moved[rows] = True
        c[rows] += rng.normal(scale=0.5 if step % 3 else 5.0, size=(rows.shape[0], 3))
        args = [ids[rows], c[rows]]
        if sizes:
            r[rows] *= rng.uniform(0.8, 1.3, rows.shape[0])
            vd[rows] *= rng.uniform(0.8, 1.3, rows.shape[0])
            args += [r[rows], vd[rows]]
        if step % 2:  # the same batch with a bad row first: refused, nothing changes
            before = idx.get(ids)
            bad = [a.copy() for a in args]
            bad[1][len(rows) // 2, 0] = np.nan
            with pytest.raises(ValueError):
                idx.update(*bad)
            after = idx.get(ids)
            assert all(np.array_equal(x, y) for x, y in zip(before, after, strict=True))
        idx.update(*args)
        oracle.update(*args)
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=70.0)
    # Most movers stayed where they were (a third of the batches jump 5 units, so not all;
    # against n // 10 a small n failed: 7 awake of 70 objects, 22 of them moved).
    assert idx.stats()["awake"] < moved.sum() // 2


def test_validate_names_each_broken_box_invariant():
    """validate() catches a chunk box that misses a sphere, a node box that misses a child's
    and a node above chunks that misses a chunk's limit (which in-place writes rely on)."""
    import pytest

    from app.spatial.chunks.layout import HI, LO

    rng = np.random.default_rng(8)
    n = 4 * CHUNK * 16
    cases = {
        "does not hold one of its spheres": lambda t: t.box.__setitem__((HI, 0), t.box[LO, 0]),
        "node's box or bounds do not hold": lambda t: t.box.__setitem__(
            (HI, t.loff[1]), t.box[LO, t.loff[1]]),
        "does not hold a chunk's limit": lambda t: t.limit.__setitem__(
            (0, HI), t.box[HI, t.loff[1]] + 1.0),
    }
    for message, spoil in cases.items():
        idx = create_index("chunks")
        idx.insert(np.arange(n, dtype=np.int64), rng.uniform(0, 100, (n, 3)),
                   rng.uniform(0.2, 1.0, n))
        idx.validate()
        spoil(idx._tree)
        with pytest.raises(AssertionError, match=message):
            idx.validate()


def test_spawns_take_holes_of_the_still_chunks_around_them():
    """Removals leave holes in the still region; once they are many, new objects take those
    of the chunk whose curve range holds them (when its limit allows), so the layout stops
    growing and the holes do not pile up to a full re-sort; every answer stays exact."""
    n = 20000
    idx, oracle, ids, c, r, rng = _scene(n, 9, 200.0)
    eye = np.full(3, 100.0)
    gone = rng.choice(ids, 2800, replace=False)  # 14 % holes: past FILL_HOLES
    idx.remove(gone)
    oracle.remove(gone)
    live = np.setdiff1d(ids, gone)
    next_id = n
    for step in range(10):
        gone = rng.choice(live, 200, replace=False)
        idx.remove(gone)
        oracle.remove(gone)
        live = np.setdiff1d(live, gone)
        npos, holes = idx._npos, idx._holes
        new = _spawn(idx, oracle, next_id, 200, 200.0, rng)
        next_id += 200
        live = np.concatenate([live, new])
        grew = idx._npos - npos
        assert grew + (holes - idx._holes) == 200  # each one either took a hole or was appended
        assert grew <= 100, (step, grew)  # most found a hole
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=90.0)
    assert idx.stats()["resorts"] == 0


def test_movers_that_stop_go_back_to_still_holes_under_churn():
    """Movers replaced every frame: each newcomer leaves a hole in the still region. Once
    holes are many, the movers that stopped go back to holes of the still chunks around them,
    and the awake region re-sorts when it is half holes, so the holes stay bounded and the
    layout is never rebuilt whole; every answer stays exact."""
    n = 6400
    idx, oracle, ids, c, r, rng = _scene(n, 10, 100.0)
    eye = np.full(3, 50.0)
    movers = np.sort(rng.choice(n, 320, replace=False))
    most = 0
    for _ in range(80):
        movers = _churn(idx, oracle, ids, c, movers, 160, rng)
        most = max(most, idx._holes)
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=60.0)
    st = idx.stats()
    assert st["resorts"] == 0  # 80 x 160 newcomers: 12,800 holes without putting any back
    assert st["awake_resorts"] >= 1
    assert most < 0.2 * n
    _check(idx, oracle, eye, eye + rng.normal(size=3), far=60.0)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(300, 3000), seed=st.integers(0, 2**31),
       ops=st.lists(st.sampled_from(["spawn", "remove", "churn", "same", "shuffled"]),
                    min_size=4, max_size=12))
def test_holes_reused_by_spawns_and_stopped_movers_stay_exact(n, seed, ops):
    """With many holes (a tenth to a third removed first), any sequence of spawns, removals
    and mover sets (replaced, repeated, shuffled) keeps every answer exact and validate()
    clean, whichever objects took holes or went back to them."""
    idx, oracle, ids, c, r, rng = _scene(n, seed % 1000, 60.0)
    gone = rng.choice(ids, int(n * rng.uniform(0.1, 0.33)), replace=False)
    idx.remove(gone)
    oracle.remove(gone)
    live = np.setdiff1d(ids, gone)
    centers = {int(i): c[i] for i in live}
    next_id = n
    movers = np.sort(rng.choice(live, max(1, live.shape[0] // 10), replace=False))
    eye = np.full(3, 30.0)
    for op in ops:
        if op == "spawn":
            new = np.arange(next_id, next_id + 20, dtype=np.int64)
            next_id += 20
            cn = rng.uniform(0, 60, (20, 3))
            idx.insert(new, cn, np.full(20, 0.5))
            oracle.insert(new, cn, np.full(20, 0.5))
            live = np.concatenate([live, new])
            centers.update({int(i): cn[k] for k, i in enumerate(new)})
        elif op == "remove":
            out = rng.choice(np.setdiff1d(live, movers), 15, replace=False)
            idx.remove(out)
            oracle.remove(out)
            live = np.setdiff1d(live, out)
        else:
            if op == "churn":
                keep = rng.choice(movers, movers.shape[0] // 2, replace=False)
                fresh = rng.choice(np.setdiff1d(live, movers), movers.shape[0] - keep.shape[0],
                                   replace=False)
                movers = np.sort(np.concatenate([keep, fresh]))
            batch = rng.permutation(movers) if op == "shuffled" else movers
            cm = np.array([centers[int(i)] for i in batch]) + rng.normal(scale=0.3,
                                                                           size=(batch.shape[0], 3))
            idx.update(batch, cm)
            oracle.update(batch, cm)
            centers.update({int(i): cm[k] for k, i in enumerate(batch)})
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=40.0)


def test_the_layout_grows_into_its_reserve_then_past_it(monkeypatch):
    """Under churn the used positions creep up. Within the reserve a growth writes only the
    new positions (in steps, here of a chunk); past it the arrays and the tree are made
    anew. Through both, with spawns and removals among the moves, every answer stays exact
    and ``validate`` finds every array as long as the others and the tree covering the
    reserve."""
    import app.spatial.chunks.reserve as reserve

    monkeypatch.setattr(reserve, "COMMIT_STEP", CHUNK)
    n = 3000
    idx, oracle, ids, c, r, rng = _scene(n, 11, 100.0)
    eye = np.full(3, 50.0)
    bases, caps = set(), set()
    next_id = n
    for f in range(60):
        live, centres, _, _ = oracle.arrays()
        pick = np.sort(rng.choice(live.shape[0], 200, replace=False))  # a fresh set: wakes
        movers = live[pick]
        moved = centres[pick] + rng.normal(scale=0.3, size=(200, 3))
        idx.update(movers, moved)
        oracle.update(movers, moved)
        if f % 2 == 0:  # 160 new objects for 40 removed: past the reserve in ~50 frames
            gone = rng.choice(oracle.arrays()[0], 40, replace=False)
            idx.remove(gone)
            oracle.remove(gone)
            _spawn(idx, oracle, next_id, 160, 100.0, rng)
            next_id += 160
        bases.add(id(idx._reserved["_pos_slot"][0].base))
        caps.add(idx._pos_slot.shape[0])
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=60.0)
    assert len(bases) >= 2  # a growth past the reserve
    assert len(caps) > len(bases) + 1  # and steps within one


def test_a_mover_that_stops_sleeps_back_into_the_hole_it_woke_from():
    """A still object that starts moving leaves a hole; once it stops (and holes are many)
    it goes back to that very hole when its chunk's limit still holds it: no curve code, no
    search of the chunk. Every answer stays exact."""
    n = 6400
    idx, oracle, ids, c, r, rng = _scene(n, 12, 100.0)
    eye = np.full(3, 50.0)
    first = np.sort(rng.choice(n, 600, replace=False))  # 600 holes > FILL_HOLES of 6,400
    still_at = idx._id_pos.lookup(first)  # (id -> position)
    for _ in range(2):  # moving twice: they wake
        c[first] += rng.normal(scale=0.05, size=(first.shape[0], 3))
        idx.update(first, c[first])
        oracle.update(first, c[first])
    assert (idx._id_pos.lookup(first) >= idx._awake0).all()
    others = np.sort(rng.choice(np.setdiff1d(ids, first), 600, replace=False))
    for _ in range(2):  # another set moves: the first stops and sleeps
        c[others] += rng.normal(scale=0.05, size=(others.shape[0], 3))
        idx.update(others, c[others])
        oracle.update(others, c[others])
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=60.0)
    now = idx._id_pos.lookup(first)
    assert np.mean(now == still_at) > 0.9


def test_the_awake_region_drains_a_few_positions_a_batch(monkeypatch):
    """Once the awake region is half holes, the objects in it that no batch moves go back to
    sleep DRAIN positions a batch (all at once this was a stall of 22-31 ms at 10^6), then
    it drops its holes; every answer stays exact on the way, and no batch puts more than
    DRAIN of them back besides its own movers that stopped."""
    import app.spatial.chunks.index as chunks_index

    monkeypatch.setattr(chunks_index, "DRAIN", 256)
    n = 6400
    idx, oracle, ids, c, r, rng = _scene(n, 13, 100.0)
    eye = np.full(3, 50.0)
    sizes = []
    real_sleep = idx._sleep

    def sleep(positions):
        sizes.append(positions.shape[0])
        real_sleep(positions)

    idx._sleep = sleep
    movers = np.sort(rng.choice(n, 320, replace=False))
    drained = 0
    for _ in range(120):
        movers = _churn(idx, oracle, ids, c, movers, 32, rng)
        drained += idx._drain >= 0
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=60.0)
    assert drained >= 3  # a drain over several batches
    assert idx.stats()["awake_resorts"] >= 1
    assert max(sizes) <= 256 + 32


def test_slot_order_goes_back_to_the_curve_once_the_scene_stops():
    """Everything moving puts the layout in slot order (no boxes: one flat scan). When the
    batches stop (the viewer paused) and queries go on, it goes back to curve order, so the
    boxes cull and the overlay draws them again; moving everything again goes back to slot
    order. Exact throughout."""
    n = 5000
    idx, oracle, ids, c, r, rng = _scene(n, 14, 100.0)
    eye = np.full(3, 50.0)
    for _ in range(2):
        c += rng.normal(scale=0.3, size=c.shape)
        idx.update(ids, c)
        oracle.update(ids, c)
        _check(idx, oracle, eye, eye + rng.normal(size=3))  # (two queries a batch)
    assert idx.stats()["order"] == "slot"
    for _ in range(3):  # paused: two frames' worth of queries stay flat ...
        _check(idx, oracle, eye, eye + rng.normal(size=3))
    assert idx.stats()["order"] == "curve"  # ... and then the curve comes back
    planes = camera_planes(eye, eye + np.array([1.0, 0.2, 0.1]), far=40.0)
    assert idx.query_frustum(planes, eye=eye).nodes_visited > 0
    for _ in range(2):
        c += rng.normal(scale=0.3, size=c.shape)
        idx.update(ids, c)
        oracle.update(ids, c)
    assert idx.stats()["order"] == "slot"
    _check(idx, oracle, eye, eye + rng.normal(size=3))


def test_spawns_read_their_own_rows_with_and_without_view_distances():
    """Spawns into the awake region take their float32 records from the insert's own rows
    (not the store): view distances given, none given (infinite), a list batch (the checked
    general path) and a scalar radius all give the oracle's answer, and the index keeps no
    reference to a batch after its insert, also one refused."""
    import pytest

    n = 4000
    idx, oracle, ids, c, r, rng = _scene(n, 11, 100.0)
    eye = np.full(3, 50.0)
    movers = np.sort(rng.choice(n, 300, replace=False))
    next_id = n
    for step in range(4):
        c[movers] += 0.2
        idx.update(movers, c[movers])
        oracle.update(movers, c[movers])
        new = np.arange(next_id, next_id + 12, dtype=np.int64)
        next_id += 12
        cn = rng.uniform(0, 100, (12, 3))
        rn = rng.uniform(0.2, 1.0, 12)
        vn = rng.uniform(0.0, 30.0, 12)
        if step == 0:
            idx.insert(new, cn, rn, vn)
            oracle.insert(new, cn, rn, vn)
        elif step == 1:
            idx.insert(new, cn, rn)
            oracle.insert(new, cn, rn)
        elif step == 2:
            idx.insert(new.tolist(), cn.tolist(), rn.tolist(), vn.tolist())
            oracle.insert(new, cn, rn, vn)
        else:
            idx.insert(new, cn, 0.5)
            oracle.insert(new, cn, np.full(12, 0.5))
        assert idx._new_rows is None
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=60.0)
    bad = rng.uniform(0, 100, (3, 3))
    bad[1, 0] = np.nan
    with pytest.raises(ValueError):
        idx.insert(np.arange(next_id, next_id + 3, dtype=np.int64), bad, np.ones(3))
    assert idx._new_rows is None
    _check(idx, oracle, eye, eye + 1.0, far=60.0)


def test_removals_take_the_callers_ids_and_keep_none():
    """A removal's hook reads the caller's ids (not the store's again): removals as arrays
    and as lists (the checked general path) stay exact, a refused one changes nothing, and
    no batch is kept after the call."""
    import pytest

    n = 3000
    idx, oracle, ids, c, r, rng = _scene(n, 12, 80.0)
    eye = np.full(3, 40.0)
    left = ids.copy()
    for step in range(3):
        gone = rng.choice(left, 25, replace=False)
        left = np.setdiff1d(left, gone)
        idx.remove(gone if step != 1 else gone.tolist())
        oracle.remove(gone)
        assert idx._gone_ids is None
        _check(idx, oracle, eye, eye + rng.normal(size=3), far=50.0)
    with pytest.raises(ValueError):
        idx.remove(np.array([int(left[0]), 10**9], dtype=np.int64))
    assert idx._gone_ids is None
    _check(idx, oracle, eye, eye + 1.0, far=50.0)
