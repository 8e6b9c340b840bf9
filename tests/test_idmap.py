"""The id -> slot map against a dict: inserts that check for present and repeated ids in
the same pass (``IdMap.insert_absent``, the store's insert path), deletions that leave
tombstones, ids in the direct table and far outside it (hashed)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.spatial.idmap import IdMap

# Small ids land in the direct table, the rest (negative, huge) in the hash table; a narrow
# range makes present and repeated ids, and probe chains through tombstones, common.
IDS = st.one_of(st.integers(0, 40), st.integers(-30, -1), st.integers(2**40, 2**40 + 40),
                st.integers(-(2**62), 2**62))


def _items(m: IdMap) -> dict[int, int]:
    keys, vals = m.items()
    return dict(zip(keys.tolist(), vals.tolist(), strict=True))


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.lists(IDS, min_size=1, max_size=12)),
                      min_size=1, max_size=25))
def test_insert_absent_adds_all_or_nothing(steps):
    m = IdMap(16)
    model: dict[int, int] = {}
    slot = 0
    for add, ids in steps:
        arr = np.array(ids, dtype=np.int64)
        if add:
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
    m = IdMap(16)
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
