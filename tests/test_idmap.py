"""The id -> slot map against a dict: inserts that check for present and repeated ids in
the same pass (``IdMap.insert_absent``, the store's insert path), deletions that leave
tombstones, ids in the direct table and far outside it (hashed); the home bitset (bit k:
id k maps to k) after every change, and behind the store, where a stale bit would move or
remove another object."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.parallelism import PARALLEL_MIN
from app.spatial import create_index
from app.spatial.idmap import IdMap

# Small ids land in the direct table, the rest (negative, huge) in the hash table; a narrow
# range makes present and repeated ids, and probe chains through tombstones, common.
IDS = st.one_of(st.integers(0, 40), st.integers(-30, -1), st.integers(2**40, 2**40 + 40),
                st.integers(-(2**62), 2**62))


def _items(m: IdMap) -> dict[int, int]:
    keys, vals = m.items()
    return dict(zip(keys.tolist(), vals.tolist(), strict=True))


@pytest.mark.parametrize("home", [False, True])
@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 2), st.lists(IDS, min_size=1, max_size=12)),
                      min_size=1, max_size=25))
def test_insert_absent_adds_all_or_nothing(home, steps):
    m = IdMap(16, home=home)
    model: dict[int, int] = {}
    slot = 0
    for op, ids in steps:
        arr = np.array(ids, dtype=np.int64)
        if op == 2:  # present ids get new values, some of them their own number (home)
            known = sorted({k for k in ids if k in model})
            values = [k if k % 2 and k >= 0 else slot + k % 7 for k in known]
            m.assign(np.array(known, np.int64), np.array(values, np.int64))
            model.update(zip(known, values, strict=True))
        elif op == 1:  # slots counted up from 0: ids 0..40 meet their own number at times
            slots = np.arange(slot, slot + arr.shape[0], dtype=np.int64)
            slot += arr.shape[0]
            got = m.insert_absent(arr, slots)
            bad = [i for i, k in enumerate(ids) if k in model or k in ids[:i]]
            assert got == (bad[0] if bad else -1)
            if not bad:
                model.update(zip(ids, slots.tolist(), strict=True))
        else:
            gone = np.array(sorted({k for k in ids if k in model}), dtype=np.int64)
            m.delete(gone)
            for k in gone.tolist():
                del model[k]
        assert _items(m) == model
        assert len(m) == len(model)
        m.check_home()
        probe = np.array(ids, dtype=np.int64)
        assert m.lookup(probe).tolist() == [model.get(k, -1) for k in ids]


def test_the_hash_table_is_sized_for_the_ids_it_holds():
    """Ids that the direct table takes need no hash buckets: a million ids 0..N-1 once made
    two hash arrays sized for all of them (4 x 8 bytes an id, written through: 1 GB and
    2.5 s of a 10^7-object build, per map)."""
    m = IdMap(16)
    n = 100_000
    m.insert(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64))
    assert m.insert_absent(np.arange(n, 2 * n, dtype=np.int64),
                           np.arange(n, dtype=np.int64)) == -1
    assert m._keys.shape[0] <= 1024
    far = np.arange(2**40, 2**40 + 5000, dtype=np.int64)
    m.insert(far, np.arange(far.shape[0], dtype=np.int64))
    assert 2 * 5000 <= m._keys.shape[0] <= 64 * 5000
    assert np.array_equal(m.lookup(far), np.arange(far.shape[0]))
    assert np.array_equal(m.lookup(np.arange(2 * n, dtype=np.int64))[:n], np.arange(n))


def test_a_growing_direct_table_takes_in_the_hashed_ids_below_its_new_end():
    """The direct table grows by copying itself (a spawn pattern's new ids cross its end
    every ~1,000 frames; re-inserting every id made that frame 24-69 ms at 10^6): the ids
    the hash table held that now fall inside it must move, the others stay hashed."""
    m = IdMap(16, home=True)
    model: dict[int, int] = {}
    sizes = set()

    def add(ids: list[int]) -> None:
        slots = list(range(len(model), len(model) + len(ids)))
        assert m.insert_absent(np.array(ids, np.int64), np.array(slots, np.int64)) == -1
        model.update(zip(ids, slots, strict=True))
        check()

    def check() -> None:
        size = m._dense.shape[0]
        sizes.add(size)
        assert _items(m) == model
        assert sorted(m._hashed()[0].tolist()) == sorted(k for k in model if not 0 <= k < size)
        m.check_home()
        probe = np.array([*model, 1499, 4999, 7001, -6], dtype=np.int64)
        assert m.lookup(probe).tolist() == [model.get(k, -1) for k in probe.tolist()]

    add(list(range(100)))
    add([1500, 3000, 5000, 2**40, -5])  # past the direct table (1024): hashed
    add(list(range(100, 1400)))  # grows to 3072: 1500 and 3000 move in, 5000 not
    m.delete(np.array([1500, 3000], np.int64))
    del model[1500], model[3000]
    check()
    add([3000, 1501])  # taken back into the direct table
    add(list(range(1502, 2000)))
    add([8000])  # to 12288: 5000 moves in; 2**40 and -5 stay hashed
    assert sizes == {1024, 3072, 12288}


def test_home_bits_follow_the_direct_table():
    """Bit k is set exactly while id k maps to k: through inserts, deletes, new values and
    the direct table's growth (a hashed id that moves in at home gets its bit); the check
    itself fails on a wrong bit."""
    m = IdMap(16, home=True)
    m.insert(np.arange(100, dtype=np.int64), np.arange(100, dtype=np.int64))
    m.insert_absent(np.array([2000, 2001], np.int64), np.array([2000, 7], np.int64))  # hashed
    m.check_home()
    assert m.home().shape[0] == m._dense.shape[0] // 64
    assert np.unpackbits(m.home().view(np.uint8), bitorder="little")[:100].all()
    m.insert_absent(np.arange(100, 1500, dtype=np.int64), np.arange(100, 1500, dtype=np.int64))
    assert m._dense.shape[0] > 2001  # grown: 2000 and 2001 moved into the direct table
    m.check_home()
    bits = np.unpackbits(m.home().view(np.uint8), bitorder="little")
    assert bits[2000] and not bits[2001]
    m.delete(np.array([5, 2000], np.int64))
    m.insert_absent(np.array([5], np.int64), np.array([9], np.int64))  # back, not at home
    m.check_home()
    m.assign(np.array([5, 2001], np.int64), np.array([5, 2001], np.int64))  # home again
    m.check_home()
    bits = np.unpackbits(m.home().view(np.uint8), bitorder="little")
    assert bits[5] and bits[2001] and not bits[2000]
    m.home()[0] ^= np.uint64(1 << 3)
    with pytest.raises(AssertionError, match="home bits wrong"):
        m.check_home()


@pytest.mark.parametrize("name", ["brute", "octree", "kd", "grid", "viewdist", "fixed-octree"])
def test_a_home_slot_taken_by_another_id_moves_and_removes_the_right_objects(name):
    """The store resolves ids 0..N-1 built in order by their home bits. Id 5 removed and a
    new id in its slot: a bit left set would take a move or removal of the gone id 5 for the
    other object's. Id 5 back elsewhere: its moves and removal reach it, not the other
    (positions, membership, ``validate``)."""
    rng = np.random.default_rng(5)
    n = 300
    idx = create_index(name)
    centers = rng.uniform(-50, 50, (n, 3))
    idx.insert(np.arange(n, dtype=np.int64), centers, np.ones(n))
    idx.remove(np.array([5], np.int64))
    far = np.array([[900.0, 0.0, 0.0]])
    idx.insert(np.array([10_000], np.int64), far, np.ones(1))  # takes slot 5
    gone = np.array([200, 5], np.int64)
    with pytest.raises(ValueError, match="unknown ids"):
        idx.update(gone, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="unknown ids"):
        idx.remove(gone)
    assert np.array_equal(idx.get(np.array([10_000, 200], np.int64))[0],
                          np.vstack([far, centers[200]]))
    idx.insert(np.array([5], np.int64), np.array([[0.0, 0.0, 0.0]]), np.ones(1))
    movers = np.array([200, 5, 17], np.int64)  # scattered: the serial look-up, not the stream
    to = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    idx.update(movers, to)
    got, _, _ = idx.get(np.array([200, 5, 17, 10_000], np.int64))
    assert np.array_equal(got, np.vstack([to, far]))
    idx.validate()
    idx.remove(np.array([5, 17], np.int64))
    assert idx.contains(np.array([5, 17, 10_000, 200], np.int64)).tolist() == [
        False, False, True, True]
    idx.validate()


@pytest.mark.parametrize("name", ["brute", "grid"])
def test_a_batch_past_parallel_min_resolves_by_the_same_bits(name):
    """The parallel resolve (batches of ``PARALLEL_MIN`` ids or more) takes the home bits as
    the serial one does: the gone id 5 refused while another id holds its slot; back
    elsewhere, a shuffled batch of every id moves each object to its own row."""
    rng = np.random.default_rng(6)
    n = PARALLEL_MIN + 500
    idx = create_index(name)
    idx.insert(np.arange(n, dtype=np.int64), rng.uniform(-50, 50, (n, 3)), np.ones(n))
    idx.remove(np.array([5], np.int64))
    idx.insert(np.array([10 * n], np.int64), np.zeros((1, 3)), np.ones(1))  # takes slot 5
    with pytest.raises(ValueError, match="unknown ids"):
        idx.update(np.arange(n, dtype=np.int64), np.zeros((n, 3)))
    idx.insert(np.array([5], np.int64), np.zeros((1, 3)), np.ones(1))
    ids = rng.permutation(np.append(np.arange(n), 10 * n)).astype(np.int64)
    to = rng.uniform(-50, 50, (ids.shape[0], 3))
    idx.update(ids, to)
    got, _, _ = idx.get(ids)
    assert np.array_equal(got, to)
    idx.validate()
