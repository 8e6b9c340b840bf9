"""The one-pass path for last frame's movers (``app.spatial.moves``) in ``brute`` and
``chunks``: exact after every step, and a bad batch through it changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.culling.frustum import camera_planes
from app.spatial import create_index
from app.spatial.moves import remember
from tests.oracle import Oracle

STEPS = ("again", "again", "again", "subset", "shuffled", "sized", "insert", "remove", "spoil",
         "big")


def _insert_new(idx, oracle: Oracle, first: int, k: int, radius: float,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """k new objects (ids from ``first``, radius ``radius``) into the index and the oracle:
    (their ids, their centres)."""
    new = np.arange(first, first + k, dtype=np.int64)
    cn = rng.uniform(0, 100, (k, 3))
    idx.insert(new, cn, np.full(k, radius))
    oracle.insert(new, cn, np.full(k, radius))
    return new, cn


def _check(idx, oracle: Oracle, rng: np.random.Generator) -> None:
    idx.validate()
    eye = rng.uniform(20, 80, 3)
    planes = camera_planes(eye, eye + rng.normal(size=3), far=70.0)
    for use_vd in (False, True):
        got = np.sort(idx.query_frustum(planes, eye=eye, use_view_distance=use_vd).visible)
        assert np.array_equal(got, oracle.frustum(planes, eye, use_vd))


@pytest.mark.parametrize("kind", ["brute", "chunks"])
@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 2500), seed=st.integers(0, 2**31),
       steps=st.lists(st.sampled_from(STEPS), min_size=4, max_size=14))
def test_repeated_movers_stay_exact_and_refuse_bad_batches(kind, n, seed, steps):
    """Random sequences of repeated whole-scene batches, subsets, reordered batches (with radii
    and view distances too: the one-pass path of a whole scene in any order), inserts,
    removals (which must end the cached positions' validity), spoiled batches (NaN, inf, an
    unknown or a repeated id, a negative radius or view distance: ValueError, nothing
    changed) and coordinates beyond float32."""
    rng = np.random.default_rng(seed)
    idx = create_index(kind)
    oracle = Oracle()
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0, 100, (n, 3))
    r = rng.uniform(0.1, 2.0, n)
    idx.insert(ids, c, r)
    oracle.insert(ids, c, r)
    movers = ids.copy()
    next_id = n
    for step in steps:
        if step == "sized":
            movers = rng.permutation(ids)
        sized = step == "sized" or (step == "again" and rng.random() < 0.5)  # (last batch's too)
        if step == "subset" and ids.shape[0] > 1:
            movers = np.sort(rng.choice(ids, ids.shape[0] // 2, replace=False))
        elif step == "shuffled":
            movers = rng.permutation(ids)
        elif step == "again":
            movers = movers[np.isin(movers, ids)]
        elif step == "insert":
            new, cn = _insert_new(idx, oracle, next_id, 5, 0.5, rng)
            next_id += 5
            ids = np.concatenate([ids, new])
            c = np.vstack([c, np.zeros((5, 3))])
            c[new] = cn
        elif step == "remove" and ids.shape[0] > 2:
            gone = ids[:: max(2, ids.shape[0] // 3)][:3]
            idx.remove(gone)
            oracle.remove(gone)
            ids = np.setdiff1d(ids, gone)
            movers = movers[np.isin(movers, ids)]
        if movers.shape[0] == 0:
            movers = ids.copy()
        c[movers] += rng.normal(size=(movers.shape[0], 3))
        m = movers.shape[0]
        sized = (rng.uniform(0.1, 2.0, m), rng.uniform(5, 200, m)) if sized else None
        if step == "big":
            c[movers[0]] = (1e300, -1e300, 5.0)  # beyond float32: the copy is clamped
        if sized is None:
            idx.update(movers, c[movers])
            oracle.update(movers, c[movers])
        else:
            idx.update(movers, c[movers], *sized)
            oracle.update(movers, c[movers], *sized)
        _check(idx, oracle, rng)
        if step == "big":  # back into range for the next steps
            c[movers[0]] = (50.0, 50.0, 50.0)
            idx.update(movers, c[movers])
            oracle.update(movers, c[movers])
        if step == "spoil":
            before = [a.copy() for a in idx.get(ids)]
            for spoil in ("nan", "inf", "unknown", "repeated", "radius", "view distance"):
                bad_ids = rng.permutation(movers) if rng.random() < 0.5 else movers.copy()
                bad = c[bad_ids] + 1.0
                rad = rng.uniform(0.1, 2.0, bad_ids.shape[0])
                vd = rng.uniform(5, 200, bad_ids.shape[0])
                if spoil == "nan":
                    bad[bad.shape[0] // 2, 1] = np.nan
                elif spoil == "inf":
                    bad[-1, 0] = np.inf
                elif spoil == "unknown":
                    bad_ids[-1] = 10 * next_id  # same length as the cached batch
                elif spoil == "radius":
                    rad[rad.shape[0] // 3] = -1.0
                elif spoil == "view distance":
                    vd[-1] = np.nan
                elif bad_ids.shape[0] > 1:
                    bad_ids[-1] = bad_ids[0]
                else:
                    continue
                with pytest.raises(ValueError):
                    if spoil in ("radius", "view distance") or rng.random() < 0.3:
                        idx.update(bad_ids, bad, rad, vd)
                    else:
                        idx.update(bad_ids, bad)
                for a, b in zip(idx.get(ids), before, strict=True):
                    assert np.array_equal(a, b), spoil
                _check(idx, oracle, rng)  # (the float32 copy too: the next spoil rewrites it)


def test_remember_finds_runs_only_in_order():
    """A run is consecutive increasing positions (where position = slot); anything else is
    written through the indexed kernel."""
    assert remember(3, np.arange(5, 9), True).run == 5
    assert remember(3, np.arange(5, 9), False).run == -1
    assert remember(3, np.array([5, 7, 6, 8]), True).run == -1
    assert remember(3, np.array([5, 6, 8]), True).run == -1


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_find_batch_refuses_exactly_the_batches_with_an_id_twice(data):
    """Ids in any order (sorted runs, a shuffle, a repeat anywhere, before or after the first
    id out of order): the look-up pass resolves every position and refuses the batch exactly
    when an id is given twice."""
    from app.spatial.idmap import IdMap
    from app.spatial.moves import batch_of, find_batch
    from app.spatial.seen import seen_bits

    n = data.draw(st.integers(1, 60))
    id_of = np.array(data.draw(st.lists(st.integers(-50, 10**6), min_size=n, max_size=n,
                                        unique=True)), dtype=np.int64)
    idmap = IdMap()
    idmap.insert(id_of, np.arange(n, dtype=np.int64))
    rows = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2 * n))
    if data.draw(st.booleans()):
        rows = sorted(set(rows))
    ids = id_of[np.array(rows, dtype=np.int64)]
    batch = batch_of(ids, np.zeros((ids.shape[0], 3)), None, None)
    seen = seen_bits(n)
    pos = np.empty(ids.shape[0], np.int64)
    got = find_batch(batch, idmap.arrays(), seen, n, pos)
    assert not seen.any()  # (clear again for the next batch)
    if len(set(rows)) < len(rows):
        assert got == -1
    else:
        assert got == ids.shape[0]  # every one before the awake region (n)
        assert np.array_equal(pos, np.array(rows))


@settings(max_examples=60, deadline=None)
@given(slots=st.lists(st.integers(0, 700), min_size=0, max_size=200))
def test_seen_bits_find_exactly_the_repeats_and_stay_clear(slots):
    """The repeat check's bitset: a repeat anywhere is found, and every bit is clear after,
    whatever the answer (the next batch starts from a clear set)."""
    from app.spatial.seen import has_repeat, seen_bits

    bits = seen_bits(701)
    got = has_repeat(bits, np.array(slots, dtype=np.int64))
    assert got == (len(set(slots)) < len(slots))
    assert not bits.any()


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(st.integers(0, 700), max_size=60, unique=True), min_size=1,
                        max_size=4),
       removed=st.lists(st.integers(0, 700), max_size=30, unique=True))
def test_the_last_batchs_bits_answer_for_the_batch_they_were_set_for(batches, removed):
    """A store's marks of its last batch's slots (set once, kept across removals): after
    batches in turn, a removal finds exactly the slots of the last one, never a stale mark
    of an earlier batch, and clearing leaves no bit set."""
    from app.spatial.seen import any_marked, forget, mark_all, seen_bits

    bits = seen_bits(701)
    marked = None
    for batch in batches:
        if marked is not None:
            forget(bits, marked, marked.shape[0])
        marked = np.array(batch, dtype=np.int64)
        mark_all(bits, marked)
        for probe in (np.array(removed, dtype=np.int64), marked[:1]):
            assert any_marked(bits, probe) == bool(set(probe.tolist()) & set(batch))
    forget(bits, marked, marked.shape[0])
    assert not bits.any()


def _scene(kind: str, n: int, rng: np.random.Generator):
    """``n`` unit spheres in a 100-unit cube, in a new index of ``kind`` and in the oracle:
    (ids, centres, index, oracle)."""
    ids = np.arange(n, dtype=np.int64)
    c = rng.uniform(0, 100, (n, 3))
    idx = create_index(kind)
    oracle = Oracle()
    idx.insert(ids, c, np.full(n, 1.0))
    oracle.insert(ids, c, np.full(n, 1.0))
    return ids, c, idx, oracle


@pytest.mark.parametrize("kind", ["brute", "chunks"])
@pytest.mark.parametrize("spoil", ["radius", "view distance", "nan", "unknown", "repeated"])
@pytest.mark.parametrize("shuffled", [False, True])
def test_whole_scene_with_radii_refuses_one_bad_row(kind, spoil, shuffled):
    """Every object moves with its radius and view distance, frame after frame (the one-pass
    paths of a whole scene: last batch's movers, or any order); one bad row in the middle of
    such a batch refuses it, and the store and the float32 copy are as before."""
    rng = np.random.default_rng(7)
    n = 3000
    ids, c, idx, oracle = _scene(kind, n, rng)
    order = ids.copy()
    for _ in range(3):
        if shuffled:
            order = rng.permutation(ids)
        c[order] += rng.normal(size=(n, 3))
        rad, vd = rng.uniform(0.1, 2.0, n), rng.uniform(5, 200, n)
        idx.update(order, c[order], rad, vd)
        oracle.update(order, c[order], rad, vd)
        _check(idx, oracle, rng)
    before = [a.copy() for a in idx.get(ids)]
    bad_ids = order.copy() if not shuffled else rng.permutation(ids)
    bad = c[bad_ids] + 5.0
    rad, vd = rng.uniform(0.1, 2.0, n), rng.uniform(5, 200, n)
    row = n // 2
    if spoil == "radius":
        rad[row] = -0.5
    elif spoil == "view distance":
        vd[row] = np.nan
    elif spoil == "nan":
        bad[row, 2] = np.nan
    elif spoil == "unknown":
        bad_ids[row] = 10 * n
    else:
        bad_ids[row] = bad_ids[row - 1]
    with pytest.raises(ValueError):
        idx.update(bad_ids, bad, rad, vd)
    for a, b in zip(idx.get(ids), before, strict=True):
        assert np.array_equal(a, b)
    _check(idx, oracle, rng)


@pytest.mark.parametrize("kind", ["brute", "chunks"])
def test_whole_scene_with_radii_beyond_float32_is_clamped(kind):
    """Every object with its radius, in the same order frame after frame (the run that writes
    plain float32 casts), one centre and one radius beyond float32's range: the copy is
    clamped as everywhere else and every answer stays exact; back in range, exact again."""
    rng = np.random.default_rng(3)
    n = 2000
    ids, c, idx, oracle = _scene(kind, n, rng)
    for step in range(5):
        c += rng.normal(size=(n, 3))
        rad = rng.uniform(0.1, 2.0, n)
        if step == 2:
            c[7] = (1e300, -1e300, 5.0)
            rad[11] = 1e300
        if step == 3:
            c[7] = (50.0, 50.0, 50.0)
        idx.update(ids, c, rad)
        oracle.update(ids, c, rad)
        _check(idx, oracle, rng)


@pytest.mark.parametrize("kind", ["brute", "chunks", "kd"])
def test_whole_scene_after_spawns_is_clamped_and_refuses_a_repeat(kind):
    """Every object in id order right after a removal and an insert (last frame's positions no
    longer hold: the pass that looks each id up, whose float32 casts are plain and clamped
    after), one centre and then one radius beyond float32's range: the copy is clamped and
    every answer exact; the same batch with one id twice (so no longer rising) is refused and
    changes nothing. The kd tree moves its flat copy (every object moving)."""
    rng = np.random.default_rng(5)
    n = 5000
    ids, c, idx, oracle = _scene(kind, n, rng)
    next_id = n
    for step in range(5):
        gone = np.sort(rng.choice(ids, 10, replace=False))
        idx.remove(gone)
        oracle.remove(gone)
        ids = np.setdiff1d(ids, gone)
        new, cn = _insert_new(idx, oracle, next_id, 10, 1.0, rng)
        next_id += 10
        ids = np.concatenate([ids, new])
        c = np.vstack([c, cn])[: next_id] if c.shape[0] < next_id else c
        c[new] = cn
        c[ids] += rng.normal(size=(ids.shape[0], 3))
        if step == 2:
            c[ids[7]] = (1e300, -1e300, 5.0)
        if step == 3:
            c[ids[7]] = (50.0, 50.0, 50.0)
        if step == 4:  # radii in the batch, one beyond float32's range
            rad = np.full(ids.shape[0], 1.0)
            rad[5] = 1e300
            idx.update(ids, c[ids], rad)
            oracle.update(ids, c[ids], rad)
        else:
            idx.update(ids, c[ids])
            oracle.update(ids, c[ids])
        _check(idx, oracle, rng)
        if kind == "kd" and step >= 1:
            assert idx.is_flat
            live = idx._alive
            assert np.all(np.abs(idx._flat.s32.x[live]) <= 1e38)
            assert np.all(np.abs(idx._flat.s32.r[live]) <= 1e38)
        twice = ids.copy()
        twice[-1] = twice[-2]  # a repeat at the end: the ids no longer rise
        before = [a.copy() for a in idx.get(ids)]
        with pytest.raises(ValueError):
            idx.update(twice, c[twice] + 1.0)
        for a, b in zip(idx.get(ids), before, strict=True):
            assert np.array_equal(a, b)
        _check(idx, oracle, rng)
