"""The spatial index contract (design.md): input checking, the object store, the id map.

Every index derives from :class:`SpatialIndex`. The base class owns everything that is the
same for all of them, so that each index file holds only its structure:

* validation of every batch *before* anything changes (bad input raises ``ValueError`` naming
  the offending ids and leaves the index exactly as it was);
* the object store, a structure of arrays indexed by *slot* (centers, radii, view distances,
  ids), with a free list of slots;
* the id -> slot map (compiled hash table).

Subclasses implement the ``_on_*`` hooks and the ``_query_*`` methods on slots; they never see
caller ids. Hooks are called with the store already holding the new values (insert, update) or
still holding the old ones (remove).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit, prange

from app.geom.zpyramid import ZPyramid
from app.parallelism import threads_for
from app.spatial.idmap import IdMap, hash_lookup
from app.spatial.pairs import check_margin, selection, slot_pairs_to_ids, sweep_pairs
from app.spatial.pool import grown, grown_free_stack

_MAX_NAMED = 8  # how many offending ids an error message lists


@dataclass
class QueryResult:
    """Result of :meth:`SpatialIndex.query_frustum`."""

    visible: np.ndarray
    working_set: int
    nodes_visited: int
    occluded_nodes: int = 0
    occluded_objects: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@njit(cache=True)
def _repeated_slots(slots: np.ndarray, stamp: np.ndarray, epoch: np.int64) -> np.ndarray:
    """Positions in ``slots`` that repeat an earlier entry: O(n) with a per-slot stamp, no sort."""
    out = np.empty(0, dtype=np.int64)
    bad = 0
    for i in range(slots.shape[0]):
        s = slots[i]
        if stamp[s] == epoch:
            bad += 1
        stamp[s] = epoch
    if bad == 0:
        return out
    out = np.empty(bad, dtype=np.int64)
    k = 0
    for i in range(slots.shape[0]):
        stamp[slots[i]] = epoch - 1
    for i in range(slots.shape[0]):
        s = slots[i]
        if stamp[s] == epoch:
            out[k] = i
            k += 1
        stamp[s] = epoch
    return out


@njit(cache=True, parallel=True)
def _swap_in(slots, centers, radii, vdist, store_c, store_r, store_v, old_c, old_r, old_v):
    """Copy the old values out and the new ones in; slots are distinct, so rows never race."""
    has_r = radii.shape[0] == slots.shape[0]
    has_v = vdist.shape[0] == slots.shape[0]
    for i in prange(slots.shape[0]):
        s = slots[i]
        for a in range(3):
            old_c[i, a] = store_c[s, a]
            store_c[s, a] = centers[i, a]
        old_r[i] = store_r[s]
        old_v[i] = store_v[s]
        if has_r:
            store_r[s] = radii[i]
        if has_v:
            store_v[s] = vdist[i]


@njit(cache=True, parallel=True)
def _resolve_batch(ids, centers, radii, vdist, keys, vals, dense, stamp, epoch, slots) -> bool:
    """Resolve an update batch's ids into ``slots`` and check its values; changes nothing.

    Look-ups and value checks run on both cores, the repeat check runs serially. False means
    "something is wrong": the caller then takes the slow path, which names the offending ids.
    """
    n = ids.shape[0]
    has_r = radii.shape[0] == n
    has_v = vdist.shape[0] == n
    nd = dense.shape[0]
    bad = np.zeros(n, dtype=np.bool_)
    for i in prange(n):
        k = ids[i]
        s = dense[k] if k >= 0 and k < nd else hash_lookup(keys, vals, k)
        slots[i] = s
        ok = s >= 0
        for a in range(3):
            ok = ok and np.isfinite(centers[i, a])
        if has_r:
            ok = ok and np.isfinite(radii[i]) and radii[i] >= 0.0
        if has_v:
            ok = ok and vdist[i] >= 0.0  # NaN fails too; inf is allowed
        bad[i] = not ok
    increasing = True
    for i in range(n):
        if bad[i]:
            return False
        if i > 0 and ids[i] <= ids[i - 1]:
            increasing = False
    if increasing:  # distinct ids (the usual sorted batch): no per-slot marks to touch
        return True
    return _repeated_slots(slots, stamp, epoch).shape[0] == 0


@njit(cache=True, inline="always")
def write_row(i: int, s: int, centers, radii, vdist, store_c, store_r, store_v) -> None:
    """Row ``i`` of a checked batch into store slot ``s``: the centre, and the radius and view
    distance when the batch has them (empty arrays: unchanged)."""
    for a in range(3):
        store_c[s, a] = centers[i, a]
    if radii.shape[0]:
        store_r[s] = radii[i]
    if vdist.shape[0]:
        store_v[s] = vdist[i]


@njit(cache=True, parallel=True)
def _write_in(slots, centers, radii, vdist, store_c, store_r, store_v):
    """Copy the new values in (for subclasses that never read the old ones)."""
    for i in prange(slots.shape[0]):
        write_row(i, slots[i], centers, radii, vdist, store_c, store_r, store_v)


_EMPTY_F = np.zeros(0, dtype=np.float64)
_NO_OLD_C = np.zeros((0, 3), dtype=np.float64)


def _is_f64(a: object, shape: tuple[int, ...]) -> bool:
    return (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == shape
            and a.flags.c_contiguous)


def _reject_repeats(op: str, ids: np.ndarray) -> None:
    uniq, counts = np.unique(ids, return_counts=True)
    if uniq.shape[0] != ids.shape[0]:
        repeated = _name_ids(uniq[counts > 1])
        raise ValueError(f"{op}: ids given more than once in the batch: {repeated}")


def _name_ids(ids: np.ndarray) -> str:
    ids = np.unique(np.asarray(ids))
    shown = ", ".join(str(int(i)) for i in ids[:_MAX_NAMED])
    more = f" and {len(ids) - _MAX_NAMED} more" if len(ids) > _MAX_NAMED else ""
    return f"[{shown}{more}]"


class SpatialIndex:
    """Base class: a set of spheres keyed by caller-chosen int ids. See design.md."""

    name: str = "base"
    #: Whether ``_on_update`` reads the old values; an index that does not skips copying them
    #: out (a cache miss fewer per moved object on large stores), and gets empty arrays.
    _reads_old_values: bool = True
    #: Whether ``_query_frustum`` returns ids already (else slots, mapped here).
    _frustum_gives_ids: bool = False

    def __init__(self, capacity: int = 1024) -> None:
        capacity = max(int(capacity), 16)
        self._ids = np.full(capacity, -1, dtype=np.int64)
        self._centers = np.zeros((capacity, 3), dtype=np.float64)
        self._radii = np.zeros(capacity, dtype=np.float64)
        self._vdist = np.full(capacity, np.inf, dtype=np.float64)
        self._alive = np.zeros(capacity, dtype=np.bool_)
        # Free slots as a stack; the top is at the end so popping a batch is a slice.
        self._free = np.arange(capacity - 1, -1, -1, dtype=np.int64)
        self._nfree = capacity
        self._idmap = IdMap(capacity)
        self._count = 0
        self._slot_mark = np.zeros(capacity, dtype=np.int64)  # per-slot marks for repeat checks
        self._mark_epoch = 0
        self._scratch_n = 0  # size of the reused old-value buffers of _apply_update

    # ------------------------------------------------------------------ public API

    def __len__(self) -> int:
        return self._count

    @property
    def capacity(self) -> int:
        """Number of object slots currently allocated."""
        return self._ids.shape[0]

    def describe(self) -> str:
        """One-line human description (index name and parameters) for HUDs and logs."""
        return self.name

    def insert(
        self,
        ids: np.ndarray,
        centers: np.ndarray,
        radii: np.ndarray,
        view_distances: np.ndarray | None = None,
    ) -> None:
        """Add objects. ``ids`` must be new and unique; view distance defaults to infinity."""
        ids, centers, radii, vd = self._check_batch(ids, centers, radii, view_distances)
        if ids.shape[0] == 0:
            return
        _reject_repeats("insert", ids)
        known = self._idmap.lookup(ids) >= 0
        if known.any():
            raise ValueError(f"insert: ids already in the index: {_name_ids(ids[known])}")
        if vd is None:
            vd = np.full(ids.shape[0], np.inf)
        slots = self._alloc_slots(ids.shape[0])
        self._ids[slots] = ids
        self._centers[slots] = centers
        self._radii[slots] = radii
        self._vdist[slots] = vd
        self._alive[slots] = True
        self._idmap.insert(ids, slots)
        self._count += ids.shape[0]
        self._on_insert(slots)

    def update(
        self,
        ids: np.ndarray,
        centers: np.ndarray,
        radii: np.ndarray | None = None,
        view_distances: np.ndarray | None = None,
    ) -> None:
        """Move objects (and optionally change their radius or view distance)."""
        with threads_for(len(ids) if np.ndim(ids) == 1 else 0):
            if self._update_fast(ids, centers, radii, view_distances):
                return
        ids, centers, radii, vd = self._check_batch(ids, centers, radii, view_distances,
                                                    radii_optional=True)
        if ids.shape[0] == 0:
            return
        self._apply_update(self._resolve_known("update", ids), centers, radii, vd)

    def remove(self, ids: np.ndarray) -> None:
        """Remove objects by id."""
        ids = self._check_ids(ids)
        if ids.shape[0] == 0:
            return
        slots = self._resolve_known("remove", ids)
        self._on_remove(slots)
        self._idmap.delete(ids)
        self._alive[slots] = False
        self._ids[slots] = -1
        self._free_slots(slots)
        self._count -= ids.shape[0]

    def contains(self, ids: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``ids`` are in the index."""
        return self._idmap.lookup(self._check_ids(ids)) >= 0

    def get(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(centers, radii, view_distances) of known ids."""
        ids = self._check_ids(ids)
        slots = self._idmap.lookup(ids)
        if (slots < 0).any():
            raise ValueError(f"get: unknown ids: {_name_ids(ids[slots < 0])}")
        return self._centers[slots].copy(), self._radii[slots].copy(), self._vdist[slots].copy()

    def all_ids(self) -> np.ndarray:
        """Every live id (any order)."""
        return self._ids[self._alive].copy()

    def query_frustum(
        self,
        planes: np.ndarray,
        eye: np.ndarray | None = None,
        use_view_distance: bool = False,
        occlusion: ZPyramid | None = None,
    ) -> QueryResult:
        """Ids of objects whose sphere is not outside any plane (and within view distance)."""
        planes = np.ascontiguousarray(planes, dtype=np.float64)
        if planes.ndim != 2 or planes.shape[1] != 4 or not np.isfinite(planes).all():
            raise ValueError(
                f"query_frustum: planes must be a finite (K, 4) array, got {planes.shape}")
        if use_view_distance and eye is None:
            raise ValueError("query_frustum: use_view_distance=True needs an eye position")
        eye_arr = np.zeros(3) if eye is None else self._check_point(eye, "eye")
        res = self._query_frustum(planes, eye_arr, bool(use_view_distance), occlusion)
        if not self._frustum_gives_ids:
            res.visible = self._ids[res.visible]
        return res

    def query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Ids whose sphere's bounding box overlaps the closed box [lo, hi]."""
        lo = self._check_point(lo, "lo")
        hi = self._check_point(hi, "hi")
        if (lo > hi).any():
            raise ValueError(f"query_box: lo {lo} exceeds hi {hi}")
        return self._ids[self._query_box(lo, hi)]

    def query_sphere(self, center: np.ndarray, radius: float) -> np.ndarray:
        """Ids with ``|c - center| <= r + radius``."""
        center = self._check_point(center, "center")
        radius = float(radius)
        if not np.isfinite(radius) or radius < 0:
            raise ValueError(f"query_sphere: radius must be finite and >= 0, got {radius}")
        return self._ids[self._query_sphere(center, radius)]

    def query_ray(self, origin: np.ndarray, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, t) of spheres the ray hits, nearest first; t is the entry distance (0 inside)."""
        origin = self._check_point(origin, "origin")
        direction = self._check_point(direction, "direction")
        scale = float(np.abs(direction).max())
        if scale == 0.0:
            raise ValueError("query_ray: direction must be non-zero")
        direction = direction / scale  # first into [-1, 1]: the norm of 1e300 overflows
        slots, t = self._query_ray(origin, direction / float(np.linalg.norm(direction)))
        ids = self._ids[slots]
        order = np.lexsort((ids, t))
        return ids[order], t[order]

    # ---------------------------------------------------------- collision broad-phase (pairs)

    #: Whether ``_query_pairs`` is the structure's own (False: the default sort-and-sweep).
    _pairs_structural: bool = False

    def query_pairs(self, ids: np.ndarray | None = None, margin: float = 0.0) -> np.ndarray:
        """Pairs (K, 2) of ids, a < b, of live objects with ``|c_a - c_b| <= r_a + r_b + margin``.

        Each pair once, rows in no particular order. With ``ids``, only the pairs with at least
        one member in ``ids``. NaN, infinite or negative margin, or unknown ids: ValueError.
        """
        m = check_margin(margin)
        slots = None
        if ids is not None:
            ids = self._check_ids(ids)
            slots = self._idmap.lookup(ids)
            if (slots < 0).any():
                raise ValueError(f"query_pairs: unknown ids: {_name_ids(ids[slots < 0])}")
            if slots.shape[0] == 0:
                return np.zeros((0, 2), dtype=np.int64)
        if self._count < 2:
            return np.zeros((0, 2), dtype=np.int64)
        return slot_pairs_to_ids(self._query_pairs(slots, m), self._ids)

    def _query_pairs(self, slots: np.ndarray | None, margin: float) -> np.ndarray:
        """Slot pairs (K, 2) touching within ``margin``, each once (either order in a row);
        with ``slots``, only pairs with a member among them. Default: the sort-and-sweep."""
        return sweep_pairs(self._centers, self._radii, np.flatnonzero(self._alive), margin,
                           selection(self.capacity, slots))

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo (K,3), hi (K,3), depth (K,)) of the current nodes; empty for ``brute``."""
        return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0, dtype=np.int64)

    def node_outcomes(self) -> np.ndarray:
        """Outcome of each node of :meth:`node_boxes` in the last frustum query.

        Codes are ``app.geom.predicates.NODE_*`` (not visited, inside, partial, rejected by
        frustum, by view distance, by occlusion).
        """
        return np.zeros(self.node_boxes()[2].shape[0], dtype=np.int8)

    def validate(self) -> None:
        """Raise AssertionError on any broken invariant of the store or the structure."""
        alive = np.flatnonzero(self._alive)
        if alive.shape[0] != self._count:
            raise AssertionError(f"{self._count} objects counted but {alive.shape[0]} slots alive")
        if len(self._idmap) != self._count:
            raise AssertionError("id map size differs from object count")
        if self._count:
            found = self._idmap.lookup(self._ids[alive])
            if not np.array_equal(found, alive):
                raise AssertionError("id map does not point back at the live slots")
        free = self._free[: self._nfree]
        if np.intersect1d(free, alive).shape[0]:
            raise AssertionError("a live slot is on the free list")
        if free.shape[0] + alive.shape[0] != self.capacity:
            raise AssertionError("slots leaked: free + alive != capacity")
        self._validate()

    def stats(self) -> dict[str, Any]:
        """Size and shape figures; indexes add their own (nodes, max_depth, per-level counts)."""
        return {"objects": self._count, "nodes": 0, "max_depth": 0}

    # ------------------------------------------------------------------ hooks

    def _on_insert(self, slots: np.ndarray) -> None:
        """New objects are in the store at ``slots``."""

    def _on_update(self, slots: np.ndarray, old_centers: np.ndarray, old_radii: np.ndarray,
                   old_vdist: np.ndarray) -> None:
        """Objects at ``slots`` changed; the store holds the new values.

        ``old_*`` may be views of reused buffers: copy them to keep them past the call.
        """

    def _on_remove(self, slots: np.ndarray) -> None:
        """Objects at ``slots`` are about to be freed; the store still holds them."""

    def _grow(self, new_capacity: int) -> None:
        """Per-slot arrays of the subclass must grow to ``new_capacity``."""

    def _validate(self) -> None:
        """Structure-specific invariants."""

    def _raise_check(self, code: int, messages: dict[int, str], where: object = None) -> None:
        """Turn a compiled check's result into validate's AssertionError (0 means "all held").

        Compiled checks cannot raise with a message, so each returns an int code naming the
        first broken invariant (a key of ``messages``) and where it found it.
        """
        if int(code):
            at = "" if where is None else f" (at {where})"
            raise AssertionError(f"{self.describe()}: {messages[int(code)]}{at}")

    def _query_frustum(self, planes: np.ndarray, eye: np.ndarray, use_vd: bool,
                       occlusion: ZPyramid | None) -> QueryResult:
        raise NotImplementedError

    def _query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _query_sphere(self, center: np.ndarray, radius: float) -> np.ndarray:
        raise NotImplementedError

    def _query_ray(self, origin: np.ndarray,
                   direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    # ------------------------------------------------------------------ internals

    def _apply_update(self, slots: np.ndarray, centers: np.ndarray, radii: np.ndarray | None,
                      vd: np.ndarray | None) -> None:
        """Swap a checked batch's values into the store, then tell the subclass.

        The old values go to reused buffers (fresh multi-megabyte arrays every frame cost page
        faults), so hooks get views of them and must copy what they keep; ``slots`` itself is
        the caller's and may be kept (fixed-octree queues it).
        """
        n = slots.shape[0]
        if not self._reads_old_values:
            _write_in(slots, centers, _EMPTY_F if radii is None else radii,
                      _EMPTY_F if vd is None else vd, self._centers, self._radii, self._vdist)
            self._on_update(slots, _NO_OLD_C, _EMPTY_F, _EMPTY_F)
            return
        if self._scratch_n < n:
            cap = max(n, 1024)
            self._scratch = (np.empty((cap, 3)), np.empty(cap), np.empty(cap))
            self._scratch_n = cap
        old_c, old_r, old_v = (a[:n] for a in self._scratch)
        _swap_in(slots, centers, _EMPTY_F if radii is None else radii,
                 _EMPTY_F if vd is None else vd,
                 self._centers, self._radii, self._vdist, old_c, old_r, old_v)
        self._on_update(slots, old_c, old_r, old_v)

    def _update_fast(self, ids, centers, radii, vd) -> bool:
        """The per-frame path: well-typed arrays, compiled checks. False -> use the slow path."""
        if not (isinstance(ids, np.ndarray) and ids.dtype == np.int64 and ids.ndim == 1
                and ids.flags.c_contiguous):
            return False
        n = ids.shape[0]
        if n == 0 or not _is_f64(centers, (n, 3)):
            return False
        if (radii is not None and not _is_f64(radii, (n,))) or (
                vd is not None and not _is_f64(vd, (n,))):
            return False
        slots = np.empty(n, dtype=np.int64)
        keys, vals, dense = self._idmap.arrays()
        epoch = self._next_mark_epoch()  # first: it may reallocate the marks
        if not _resolve_batch(ids, centers, _EMPTY_F if radii is None else radii,
                              _EMPTY_F if vd is None else vd, keys, vals, dense,
                              self._slot_mark, epoch, slots):
            return False
        self._apply_update(slots, centers, radii, vd)
        return True

    def _next_mark_epoch(self) -> np.int64:
        """A fresh epoch for the per-slot marks (two values: _repeated_slots uses epoch - 1).

        Call it before reading ``self._slot_mark``: it grows the marks to the store's capacity.
        """
        if self._slot_mark.shape[0] < self.capacity:
            self._slot_mark = np.zeros(self.capacity, dtype=np.int64)
            self._mark_epoch = 0
        self._mark_epoch += 2
        return np.int64(self._mark_epoch)

    def _resolve_known(self, op: str, ids: np.ndarray) -> np.ndarray:
        """Slots of ``ids``; ValueError naming unknown or repeated ids (nothing changed)."""
        slots = self._idmap.lookup(ids)
        unknown = slots < 0
        if unknown.any():
            raise ValueError(f"{op}: unknown ids: {_name_ids(ids[unknown])}")
        epoch = self._next_mark_epoch()  # first: it may reallocate the marks
        rep = _repeated_slots(slots, self._slot_mark, epoch)
        if rep.shape[0]:
            raise ValueError(f"{op}: ids given more than once in the batch: {_name_ids(ids[rep])}")
        return slots

    def _alloc_slots(self, n: int) -> np.ndarray:
        if n > self._nfree:
            self._grow_store(max(2 * self.capacity, self._count + n))
        slots = self._free[self._nfree - n : self._nfree][::-1].copy()
        self._nfree -= n
        return slots

    def _free_slots(self, slots: np.ndarray) -> None:
        n = slots.shape[0]
        self._free[self._nfree : self._nfree + n] = slots
        self._nfree += n

    def _grow_store(self, new_cap: int) -> None:
        old = self.capacity
        self._ids = grown(self._ids, new_cap, -1)
        self._centers = grown(self._centers, new_cap, 0.0)
        self._radii = grown(self._radii, new_cap, 0.0)
        self._vdist = grown(self._vdist, new_cap, np.inf)
        self._alive = grown(self._alive, new_cap, False)
        self._free, self._nfree = grown_free_stack(self._free, self._nfree, old, new_cap)
        self._grow(new_cap)

    @staticmethod
    def _check_ids(ids: np.ndarray) -> np.ndarray:
        arr = np.asarray(ids)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim != 1:
            raise ValueError(f"ids must be a 1-D array, got shape {arr.shape}")
        if arr.shape[0] and not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"ids must be integers, got dtype {arr.dtype}")
        if arr.dtype.kind == "u" and arr.shape[0] and int(arr.max()) > np.iinfo(np.int64).max:
            # Casting would wrap them to negative int64 ids that name other objects.
            big = arr[arr > np.iinfo(np.int64).max]
            raise ValueError(f"ids must fit in int64; too large: {_name_ids(big)}")
        return np.ascontiguousarray(arr, dtype=np.int64)

    @staticmethod
    def _check_point(p: np.ndarray, what: str) -> np.ndarray:
        arr = np.asarray(p, dtype=np.float64).reshape(-1)
        if arr.shape != (3,) or not np.isfinite(arr).all():
            raise ValueError(f"{what} must be 3 finite numbers, got {p!r}")
        return arr

    def _check_batch(self, ids, centers, radii, view_distances, radii_optional=False):
        ids = self._check_ids(ids)
        n = ids.shape[0]
        centers = np.ascontiguousarray(np.asarray(centers, dtype=np.float64))
        if centers.ndim == 1 and centers.shape[0] == 3 and n == 1:
            centers = centers.reshape(1, 3)
        if centers.shape != (n, 3):
            raise ValueError(
                f"centers must have shape ({n}, 3) to match {n} ids, got {centers.shape}")
        bad = ~np.isfinite(centers).all(axis=1)
        if bad.any():
            raise ValueError(f"non-finite (NaN or infinite) centers for ids {_name_ids(ids[bad])}")
        if radii is None:
            if not radii_optional:
                raise ValueError("radii are required")
        else:
            radii = np.ascontiguousarray(np.broadcast_to(np.asarray(radii, dtype=np.float64), (n,))
                                         if np.ndim(radii) == 0 else np.asarray(radii, np.float64))
            if radii.shape != (n,):
                raise ValueError(
                    f"radii must have shape ({n},) to match {n} ids, got {radii.shape}")
            bad = ~np.isfinite(radii) | (radii < 0)
            if bad.any():
                raise ValueError(
                    f"radii must be finite and >= 0; bad for ids {_name_ids(ids[bad])}")
        if view_distances is not None:
            vd = np.asarray(view_distances, dtype=np.float64)
            if vd.ndim == 0:
                vd = np.full(n, float(vd))
            vd = np.ascontiguousarray(vd)
            if vd.shape != (n,):
                raise ValueError(
                    f"view_distances must have shape ({n},) to match {n} ids, got {vd.shape}")
            bad = np.isnan(vd) | (vd < 0)
            if bad.any():
                raise ValueError(
                    f"view distances must be >= 0 (inf allowed); bad for ids {_name_ids(ids[bad])}")
            view_distances = vd
        return ids, centers, radii, view_distances
