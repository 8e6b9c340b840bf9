"""``NestedIndex``: a tree of groups with rigid transforms, each group an index of its own.

Shagam 2.2.2 and figure 2.5, as design.md's contract "Hierarchical scenes": a group that
turns changes one transform, never its objects. The class orchestrates whole batches; the
work is compiled (``groups.py`` the transforms and bounds, ``store.py`` the object arena,
``query.py`` the descent, ``check.py`` validate).

How a query runs (docs/nested.md has the numbers):

1. *refresh* (only what changed since the last query): the preorder of the groups, the world
   matrices top-down, the own spheres that grew loose tightened again, every group's world
   sphere and every subtree's merged bottom-up (Shagam's R(N), O(groups));
2. *descent*, one compiled call: subtree spheres outside the frustum (or beyond the largest
   view distance below) skip their subtree, own spheres inside hand the whole block over,
   partly visible groups test their objects in their own frame (float32 verdict loop,
   float64 world test near a plane);
3. groups that are partly visible and hold at least ``inner_min`` objects are asked through
   their own index (any ``INDEX_NAMES`` kind) with the local planes widened by the
   tolerance, and the candidates are settled like the scan's NEAR ones. Below that size a
   Python call per group costs more than scanning the group (docs/nested.md measures it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.spatial.base import QueryResult
from app.spatial.checks import check_batch, check_ids, check_point, name_ids, reject_repeats
from app.spatial.idmap import IdMap
from app.spatial.nested.boxes import NodeBoxCache, group_box_corners
from app.spatial.nested.check import (
    MESSAGES,
    check_blocks,
    check_copy,
    check_idmap,
    check_own,
    check_world,
)
from app.spatial.nested.groups import (
    LIMIT,
    canonical_scale,
    preorder,
    refresh_bounds,
    refresh_bounds_some,
    refresh_world,
    rigid_codes,
    subtree_order,
    transform_problems,
    transforms_hot,
)
from app.spatial.nested.occlude import check_occlusion, occlude_visible
from app.spatial.nested.query import (
    INNER_ACT,
    local_frame,
    query_hot,
    settle_candidates,
    world_spheres_of,
)
from app.spatial.nested.state import make_state, state_arrays, state_pointers, state_records
from app.spatial.nested.store import (
    apply_moves,
    clear_stale,
    good_values,
    grown_rows,
    move_block,
    movers_first,
    moves_hot,
    new_rows,
    remove_rows,
    repack,
    resolve_moves,
    take_stale,
    tighten,
    write_new,
)
from app.spatial.pool import grown

#: Default ``inner_min``: a partly visible group with at least this many objects is asked
#: through its own index, a smaller one is scanned inside the descent. Measured (docs/nested.md):
#: a group cut by the frustum, 0.3-4 % of it visible: the scan wins below ~64k objects against
#: ``chunks``, below ~256k against the trees.
INNER_MIN = 65536
_NEVER = np.iinfo(np.int64).max

_EMPTY_F = np.zeros(0)
_IDENTITY = np.eye(4)
_ZERO3 = np.zeros(3)  # the default eye (read only)
_F64 = np.dtype(np.float64)
_KEY_TYPES = frozenset((int, str))  # group ids as the fast paths compare them (not bools)
_I64 = np.dtype(np.int64)


def _key(gid: Any) -> int | str:
    """A group id as the dict key: an int (numpy ints too) or a string."""
    if isinstance(gid, bool | np.bool_):
        raise ValueError(f"group ids are ints or strings, got {gid!r}")
    if isinstance(gid, int | np.integer):
        return int(gid)
    if isinstance(gid, str):
        return gid
    raise ValueError(f"group ids are ints or strings, got {gid!r}")


class _Groups:
    """Per-group arrays, indexed by group slot."""

    def __init__(self, cap: int) -> None:
        self.alive = np.zeros(cap, np.bool_)
        self.parent = np.full(cap, -1, np.int64)
        self.L = np.zeros((cap, 3, 4))  # local -> parent
        self.scale = np.ones(cap)
        self.W = np.zeros((cap, 3, 4))  # local -> world (refreshed)
        self.ws = np.ones(cap)
        self.dhi = np.zeros(cap)
        self.dlo = np.zeros(cap)
        self.o_c = np.zeros((cap, 3))  # own sphere, local
        self.o_r = np.zeros(cap)
        self.o_tight = np.zeros(cap)
        self.o_rmax = np.zeros(cap)  # largest radius of the own objects (or more)
        self.o_vd = np.zeros(cap)
        self.loose = np.zeros(cap, np.bool_)
        self.nstale = np.zeros(cap, np.int64)  # rows marked stale (large groups)
        self.gdirty = np.zeros(cap, np.uint8)  # moved since its index was updated (small ones)
        self.dirty32 = np.zeros(cap, np.uint8)  # float32 centres older than the float64 ones
        self.b_start = np.zeros(cap, np.int64)
        self.b_cap = np.zeros(cap, np.int64)
        self.b_count = np.zeros(cap, np.int64)
        self.wbc = np.zeros((cap, 3))  # own sphere, world (refreshed)
        self.wbr = np.full(cap, -1.0)
        self.wvd = np.full(cap, -1.0)
        self.gmag = np.zeros(cap)
        self.sbc = np.zeros((cap, 3))  # subtree sphere, world (refreshed)
        self.sbr = np.full(cap, -1.0)
        self.svd = np.full(cap, -1.0)
        self.code = np.zeros(cap, np.int8)  # last query's outcome (NODE_*)
        self.depth = np.zeros(cap, np.int64)
        self.bmark = np.zeros(cap, np.uint8)  # bounds-dirty: own sphere or world matrix changed
        self.blist = np.zeros(cap, np.int64)  # the bounds-dirty groups (``_nbl[0]`` of them)
        self.scanned = np.zeros(cap, np.uint8)  # descend's scratch (zero between queries)

    @property
    def cap(self) -> int:
        return self.alive.shape[0]

    def grow(self, cap: int) -> None:
        for name, a in list(vars(self).items()):
            fill = {"parent": -1, "scale": 1.0, "ws": 1.0, "wbr": -1.0, "wvd": -1.0,
                    "sbr": -1.0, "svd": -1.0}.get(name, 0)
            setattr(self, name, grown(a, cap, fill))


def _spatial_order(c: np.ndarray) -> np.ndarray:
    """An order of the centres ``c`` (n, 3) along a Morton curve of their box (10 bits an
    axis): a partly visible group's visible rows then come in runs (its scan's compaction
    skips whole words of culled rows)."""
    lo = c.min(axis=0)
    span = c.max(axis=0) - lo
    span[~(span > 0)] = 1.0
    q = np.clip((c - lo) / span * 1023.0, 0, 1023).astype(np.int64)
    key = np.zeros(c.shape[0], np.int64)
    for b in range(10):
        for a in range(3):
            key |= ((q[:, a] >> b) & 1) << (3 * b + a)
    return np.argsort(key, kind="stable")


def _as_matrices(transforms: Any, n: int, what: str) -> np.ndarray:
    m = np.asarray(transforms, dtype=np.float64) if transforms is not None else None
    if m is None:
        return np.repeat(_IDENTITY[None], n, axis=0)
    if m.shape == (4, 4) and n == 1:
        m = m[None]
    if m.shape != (n, 4, 4):
        raise ValueError(f"{what}: transforms must be (4, 4) matrices, got shape {m.shape}")
    return np.ascontiguousarray(m)


class NestedIndex:
    """Groups with rigid transforms in a tree, each an index of kind ``kind`` over its objects
    in local coordinates; queries in world space (design.md, "Hierarchical scenes")."""

    name = "nested"

    def __init__(self, kind: str = "icoseptree", inner_min: int | None = None,
                 **index_kwargs: Any) -> None:
        from app.spatial import create_index

        probe = create_index(kind, **index_kwargs)  # bad kind or arguments: ValueError here
        self._make = lambda: create_index(kind, **index_kwargs)
        self.kind = kind
        self._inner_desc = probe.describe()
        if inner_min is None:
            inner_min = _NEVER if kind == "brute" else INNER_MIN
        if isinstance(inner_min, bool) or not isinstance(inner_min, int | np.integer) or (
                inner_min < 0):
            raise ValueError(f"inner_min must be an int >= 0, got {inner_min!r}")
        self.inner_min = int(inner_min)
        self._G = _Groups(16)
        self._inner: list[Any] = [None] * 16
        self._keys: list[int | str | None] = [None] * 16
        self._slot: dict[int | str, int] = {}
        self._free_g: list[int] = list(range(15, -1, -1))
        self._R = new_rows(1024)
        self._top = 0
        self._garbage = 0
        self._count = 0
        self._idmap = IdMap(1024)
        self._stamp = np.zeros(1024, np.int64)
        self._epoch = 0
        self._codes = np.empty(1024 + 8, np.uint8)
        self._order = np.zeros(0, np.int64)
        self._pos = np.zeros(0, np.int64)  # preorder position of each group slot
        self._send = np.zeros(0, np.int64)
        self._order_dirty = False
        self._world_dirty = False
        self._bounds_dirty = False
        self._version = 0  # bumped whenever rows move or die: the movers cache below expires
        self._log_rows = np.zeros(4096, np.int64)  # moved rows since the last query
        self._log_grp = np.zeros(4096, np.int64)
        self._nlog = np.zeros(1, np.int64)
        self._movers: tuple | None = None  # (version, want, ids copy, rows, groups)
        self._moves_seen = 0  # batches through the movers cache since it was made
        self._packed = -1  # the version whose movers were packed to their blocks' fronts
        self._nbl = np.zeros(1, np.int64)  # bounds-dirty groups listed in G.blist
        self._gversion = 0  # bumped when group slots change: the set_transforms cache expires
        self._tcache: tuple | None = None  # (gversion, keys, slots) of the last set_transforms
        self._act = np.zeros(16, np.uint8)  # descend's scratch, a byte / word per group
        self._cuts = np.zeros(16, np.uint64)
        self._sure = np.empty(1024 + 8, np.int64)  # descend's scratch, a row per arena row
        self._near = np.empty(1024 + 8, np.int64)
        self._st: Any = None  # the arrays above as one compiled record (state.py), made lazily

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the compiled record, which points at this index's arrays: a copy
        (``copy.deepcopy``) makes its own at its first per-frame call."""
        state = self.__dict__.copy()
        state["_st"] = None
        return state

    # ------------------------------------------------------------------ groups

    def __len__(self) -> int:
        return self._count

    def describe(self) -> str:
        """One line for HUDs and logs: the inner kind and the group count."""
        return f"nested[{self._inner_desc}] ({len(self._slot)} groups)"

    def groups(self) -> list[int | str]:
        """The group ids, each before its subgroups."""
        self._ensure_order()
        return [self._keys[g] for g in self._order.tolist()]

    def add_group(self, gid: Any, parent: Any = None, transform: Any = None) -> None:
        """A new group under ``parent`` (None: the world) with transform ``M`` (4, 4), local ->
        parent (None: the identity)."""
        key = _key(gid)
        if key in self._slot:
            raise ValueError(f"add_group: group {key!r} already exists")
        if parent is not None and _key(parent) == key:
            raise ValueError(f"add_group: group {key!r} cannot be its own parent (a cycle)")
        p = -1 if parent is None else self._group(parent, "add_group")
        m = self._checked("add_group", [key], _as_matrices(transform, 1, "add_group"))
        if self._world_dirty:
            self._refresh_world()
        if not self._free_g:
            self._grow_groups(2 * self._G.cap)
        g = self._free_g[-1]
        G = self._G
        G.parent[g] = p
        G.L[g] = m[0, :3, :]
        G.scale[g] = canonical_scale(m)[0]
        # Its world matrix from its parent's (current): the same kernel, one group.
        code, _ = refresh_world(np.array([g], np.int64), G.parent, G.L, G.scale, G.W, G.ws,
                                G.dhi, G.dlo)
        if code:
            raise ValueError(f"add_group: the world scale of group {key!r} would leave "
                             f"[{1 / LIMIT:g}, {LIMIT:g}]")
        self._free_g.pop()
        G.alive[g] = True
        for name in ("o_c", "o_r", "o_tight", "o_vd", "o_rmax", "nstale", "gdirty", "dirty32",
                     "b_start", "b_cap", "b_count"):
            getattr(G, name)[g] = 0
        G.loose[g] = False
        self._keys[g] = key
        self._slot[key] = g
        self._inner[g] = self._make()
        self._order_dirty = True
        self._gversion += 1

    def set_transform(self, gid: Any, transform: Any) -> None:
        """New transform (4, 4), local -> parent, of one group."""
        self.set_transforms([gid], _as_matrices(transform, 1, "set_transform"))

    def set_transforms(self, gids: Any, transforms: Any) -> None:
        """New transforms (K, 4, 4) of K distinct groups in one batch (one check, one refresh
        of the world matrices): what a frame with many turning groups calls."""
        if type(gids) is list:
            keys = gids
        elif isinstance(gids, np.ndarray) and gids.dtype.kind in "iu":
            keys = gids.tolist()
        else:
            keys = list(gids)
        # The per-frame path: the same groups as last time (slots known), float64 matrices,
        # one compiled call that checks, writes and recomposes (nothing changed on failure;
        # other array types raise TypeError before it runs: the checked path below).
        last = self._tcache
        code = -1
        if (last is not None and last[0] == self._gversion and last[1] == keys
                and not (self._world_dirty or self._order_dirty)
                and _KEY_TYPES.issuperset(map(type, keys))):
            try:
                code, k = transforms_hot(self._st or self._state(), last[2], transforms)
            except TypeError:
                code = -1
            if code == 0:
                return
            if code == 3:
                raise ValueError(f"set_transforms: the world scale of group "
                                 f"{self._keys[int(k)]!r} would leave [{1 / LIMIT:g}, "
                                 f"{LIMIT:g}]")
            # a bad matrix or another type: nothing changed; the checks below name it
        if not _KEY_TYPES.issuperset(map(type, keys)):  # not bools, floats
            keys = [_key(g) for g in keys]
        slot = self._slot
        try:
            sl = [slot[k] for k in keys]
        except KeyError:
            sl = [self._group(k, "set_transforms") for k in keys]
        if len(set(sl)) != len(sl):
            seen: set = set()
            rep = [k for k in keys if k in seen or seen.add(k)]
            raise ValueError(f"set_transforms: groups given more than once: {rep[:8]}")
        slots = np.array(sl, dtype=np.int64)
        self._tcache = (self._gversion, list(keys), slots)  # a copy: the caller's list may change
        m = _as_matrices(transforms, len(keys), "set_transforms")
        scales = np.empty(len(keys))
        if rigid_codes(m, scales).any():
            self._checked("set_transforms", keys, m)
        G = self._G
        old_L = G.L[slots].copy()
        old_s = G.scale[slots].copy()
        G.L[slots] = m[:, :3, :]
        G.scale[slots] = scales
        self._ensure_order()
        if self._world_dirty:  # everything is recomputed anyway
            try:
                self._refresh_world(force=True)
            except ValueError:
                G.L[slots] = old_L
                G.scale[slots] = old_s
                self._refresh_world(force=True)
                raise
            return
        # Only the subtrees of these groups change (their parents' matrices are current).
        sub = subtree_order(self._order, self._send, self._pos, slots)
        code, where = refresh_world(sub, G.parent, G.L, G.scale, G.W, G.ws, G.dhi, G.dlo)
        if code:
            G.L[slots] = old_L
            G.scale[slots] = old_s
            refresh_world(sub, G.parent, G.L, G.scale, G.W, G.ws, G.dhi, G.dlo)
            raise ValueError(f"set_transforms: the world scale of group "
                             f"{self._keys[int(where)]!r} would leave [{1 / LIMIT:g}, {LIMIT:g}]")
        self._bounds_dirty = True

    def set_parent(self, gid: Any, parent: Any) -> None:
        """Move a group (with its subtree and objects) under ``parent`` (None: the world); its
        transform is now relative to the new parent."""
        g = self._group(gid, "set_parent")
        p = -1 if parent is None else self._group(parent, "set_parent")
        a = p
        while a >= 0:
            if a == g:
                raise ValueError(f"set_parent: {self._keys[p]!r} is {self._keys[g]!r} or below "
                                 "it: a parent cycle")
            a = int(self._G.parent[a])
        old = int(self._G.parent[g])
        self._G.parent[g] = p
        self._order_dirty = True
        try:
            self._refresh_world(force=True)
        except ValueError:
            self._G.parent[g] = old
            self._order_dirty = True
            self._refresh_world(force=True)
            raise

    def remove_group(self, gid: Any) -> None:
        """Remove a group, its subgroups and all their objects."""
        g = self._group(gid, "remove_group")
        self._ensure_order()
        i = int(np.flatnonzero(self._order == g)[0])
        sub = self._order[i:self._send[i]]
        G = self._G
        R = self._R
        for s in sub.tolist():
            lo = int(G.b_start[s])
            hi = lo + int(G.b_count[s])
            if hi > lo:
                self._idmap.delete(R.ids[lo:hi])
                self._count -= hi - lo
                R.ids[lo:hi] = -1
                R.stale[lo:hi] = 0
                R.r32[lo:hi] = -np.inf
            self._garbage += int(G.b_cap[s])
            G.alive[s] = False
            G.b_cap[s] = G.b_count[s] = G.nstale[s] = G.gdirty[s] = G.dirty32[s] = 0
            self._bump()
            del self._slot[self._keys[s]]
            self._keys[s] = None
            self._inner[s] = None
            self._free_g.append(s)
        self._order_dirty = True
        self._bounds_dirty = True
        self._gversion += 1

    def transform(self, gid: Any) -> np.ndarray:
        """The group's transform (4, 4), local -> parent."""
        g = self._group(gid, "transform")
        return np.vstack([self._G.L[g], [0.0, 0.0, 0.0, 1.0]])

    def world_transform(self, gid: Any) -> np.ndarray:
        """The group's composed transform (4, 4), local -> world."""
        g = self._group(gid, "world_transform")
        self._refresh_world()
        return np.vstack([self._G.W[g], [0.0, 0.0, 0.0, 1.0]])

    def group_index(self, gid: Any) -> Any:
        """The inner index of a group (read it, do not change it: the nested index owns it)."""
        g = self._group(gid, "group_index")
        self._flush(g)
        return self._inner[g]

    def rebuild(self, kind: str, inner_min: int | None = None, **index_kwargs: Any
                ) -> NestedIndex:
        """A new nested index of the same groups, transforms and objects with another inner
        kind (what the viewer's index hotkey does)."""
        out = NestedIndex(kind, inner_min=inner_min, **index_kwargs)
        self._ensure_order()
        G = self._G
        R = self._R
        for g in self._order.tolist():
            p = int(G.parent[g])
            out.add_group(self._keys[g], None if p < 0 else self._keys[p], self.transform(
                self._keys[g]))
            lo = int(G.b_start[g])
            hi = lo + int(G.b_count[g])
            if hi > lo:
                out.insert(self._keys[g], R.ids[lo:hi].copy(), R.lc[lo:hi].copy(),
                           R.rad[lo:hi].copy(), R.vd[lo:hi].copy())
        return out

    # ------------------------------------------------------------------ objects

    def insert(self, gid: Any, ids: Any, local_centers: Any, radii: Any,
               view_distances: Any = None) -> None:
        """Add objects to group ``gid``, in its local coordinates; ids unique in the scene."""
        g = self._group(gid, "insert")
        ids, c, r, vd = check_batch(ids, local_centers, radii, view_distances)
        n = ids.shape[0]
        if n == 0:
            return
        self._check_limits("insert", ids, c, r, vd)
        reject_repeats("insert", ids)
        known = self._idmap.lookup(ids) >= 0
        if known.any():
            raise ValueError(f"insert: ids already in the scene: {name_ids(ids[known])}")
        if vd is None:
            vd = np.full(n, np.inf)
        self._inner[g].insert(ids, c, r, vd)  # checked above: cannot fail
        if n > 64:  # the block's rows in a spatial order: what a query takes comes in runs
            o = _spatial_order(c)
            ids, c, r, vd = ids[o], c[o], r[o], vd[o]
        G = self._G
        need = int(G.b_count[g]) + n
        if need > G.b_cap[g]:
            self._relocate(g, need if G.b_cap[g] == 0 else max(16, 2 * need))
        lo = int(G.b_start[g] + G.b_count[g])
        write_new(self._R, lo, g, ids, c, r, vd)
        self._idmap.insert(ids, np.arange(lo, lo + n, dtype=np.int64))
        G.b_count[g] += n
        self._count += n
        tighten(self._R.lc, self._R.rad, self._R.vd, np.array([g], np.int64), G.b_start,
                G.b_count, G.o_c, G.o_r, G.o_tight, G.o_vd, G.o_rmax, G.loose)
        self._bump()
        self._bounds_dirty = True

    def update(self, gid: Any, ids: Any, local_centers: Any, radii: Any = None,
               view_distances: Any = None) -> None:
        """Move objects within their group (new local centres; optionally radii and view
        distances). ``gid`` None: each object in its own group (one call for a whole frame);
        else every id must be in ``gid``."""
        last = self._movers
        tried = (gid is None and radii is None and view_distances is None and last is not None
                 and last[0] == self._version and last[1] == -1)
        # The per-frame path: the same movers as the last batch, new centres only, with no
        # check in Python (the compiled call makes them); otherwise the paths below decide.
        if tried and self._move_cached(last, ids, local_centers, _EMPTY_F, _EMPTY_F) == 0:
            return
        want = -1 if gid is None else self._group(gid, "update")
        if self._update_fast(want, ids, local_centers, radii, view_distances, tried):
            return
        ids, c, r, vd = check_batch(ids, local_centers, radii, view_distances,
                                    radii_optional=True)
        if ids.shape[0] == 0:
            return
        self._check_limits("update", ids, c, r, vd)
        rows = self._rows_of("update", ids)
        if want >= 0:
            other = self._R.grp[rows] != want
            if other.any():
                raise ValueError(f"update: ids not in group {self._keys[want]!r}: "
                                 f"{name_ids(ids[other])}")
        self._apply(rows, self._R.grp[rows], c, r, vd)

    def remove(self, ids: Any) -> None:
        """Remove objects by id, from whichever groups hold them."""
        ids = check_ids(ids)
        if ids.shape[0] == 0:
            return
        rows = self._rows_of("remove", ids)
        grp = self._R.grp[rows]
        order = np.argsort(grp, kind="stable")
        groups, starts = np.unique(grp[order], return_index=True)
        for g, part in zip(groups.tolist(), np.split(ids[order], starts[1:]), strict=True):
            self._inner[g].remove(part)
        self._idmap.delete(ids)
        keys, vals, dense = self._idmap.arrays()
        G = self._G
        remove_rows(self._R, rows, groups.astype(np.int64), G.b_start, G.b_count, G.nstale,
                    keys, vals, dense)
        G.loose[groups] = True
        self._count -= ids.shape[0]
        self._bounds_dirty = True
        self._bump()

    def contains(self, ids: Any) -> np.ndarray:
        """Boolean mask: which of ``ids`` are in the scene."""
        return self._idmap.lookup(check_ids(ids)) >= 0

    def object_groups(self, ids: Any) -> list[int | str]:
        """The group id of each of ``ids``."""
        rows = self._rows_of("object_groups", check_ids(ids))
        return [self._keys[g] for g in self._R.grp[rows].tolist()]

    def local_spheres(self, ids: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(local centres, radii, view distances) of ``ids``, as inserted or last updated."""
        rows = self._rows_of("local_spheres", check_ids(ids))
        R = self._R
        return R.lc[rows].copy(), R.rad[rows].copy(), R.vd[rows].copy()

    def world_spheres(self, ids: Any, with_view_distances: bool = False) -> tuple[np.ndarray, ...]:
        """(world centres (n, 3), radii (n,)) of ``ids``, the canonical ones queries answer
        for (groups.py); with ``with_view_distances`` also the world view distances."""
        rows = self._rows_of("world_spheres", check_ids(ids))
        self._refresh_world()
        c, r, v = world_spheres_of(rows, self._R.lc, self._R.rad, self._R.vd, self._R.grp,
                                   self._G.W, self._G.ws)
        return (c, r, v) if with_view_distances else (c, r)

    # ------------------------------------------------------------------ queries

    def query_frustum(self, planes: Any, eye: Any = None, use_view_distance: bool = False,
                      occlusion: Any = None) -> QueryResult:
        """Ids whose world sphere meets every plane (and, with ``use_view_distance``, whose
        world centre is within its world view distance of ``eye``): exactly brute force.
        With ``occlusion`` (a ``ZPyramid``), those whose world sphere the pyramid hides are
        left out, as the flat indexes do (``occlude.py``)."""
        res = None
        if occlusion is None and not (self._bounds_dirty or self._world_dirty
                                      or self._order_dirty):
            # The per-frame path: one compiled call that checks the planes and the eye; other
            # array forms raise TypeError before it runs (the checked path below copies them).
            use_vd = bool(use_view_distance)
            if eye is None and not use_vd:
                eye = _ZERO3
            if eye is not None:
                try:
                    res = query_hot(self._st or self._state(), planes, eye, use_vd,
                                    self.inner_min)
                except TypeError:
                    res = None
        if res is None:
            check_occlusion(occlusion)
            planes = np.array(planes, dtype=np.float64, order="C")  # a writable copy
            if planes.ndim != 2 or planes.shape[1] != 4:
                raise ValueError(
                    f"query_frustum: planes must be a finite (K, 4) array, got {planes.shape}")
            if use_view_distance and eye is None:
                raise ValueError("query_frustum: use_view_distance=True needs an eye position")
            eye = _ZERO3 if eye is None else np.array(check_point(eye, "eye"),
                                                      dtype=np.float64)
            use_vd = bool(use_view_distance)
            if self._bounds_dirty or self._world_dirty or self._order_dirty:
                self._refresh()  # else the listed groups' bounds are refreshed in the call
            res = query_hot(self._st or self._state(), planes, eye, use_vd, self.inner_min)
        vis, working, visited, n_inner, bad = res
        if bad == 2:
            check_point(eye, "eye")  # raises, naming the eye
        if bad:
            raise ValueError(
                f"query_frustum: planes must be a finite (K, 4) array, got {planes.shape}")
        if occlusion is None and not n_inner:
            return QueryResult(vis, working, visited, 0, 0,
                               {"groups_visited": visited, "inner_queries": 0})
        extra = {"groups_visited": visited, "inner_queries": n_inner}
        if n_inner:  # the partly visible groups of inner_min objects or more, in preorder
            inner = self._order[self._act[:self._order.shape[0]] == INNER_ACT]
            parts = [vis]
            for g in inner.tolist():
                got, w, nv = self._ask_inner(g, planes, eye, use_vd)
                parts.append(got)
                working += w
                visited += nv
            vis = np.concatenate(parts)
        occ_objects = occ_groups = 0
        if occlusion is not None and occlusion.widths.shape[0] and vis.shape[0]:
            vis, occ_objects, occ_groups = occlude_visible(
                np.ascontiguousarray(vis, np.int64), self._idmap.arrays(), self._R,
                self._st or self._state(), np.zeros(self._G.cap, np.uint8),
                bool(getattr(self, "occlusion_gate", True)), occlusion.occluder())
        return QueryResult(visible=vis, working_set=int(working), nodes_visited=int(visited),
                           occluded_nodes=int(occ_groups), occluded_objects=int(occ_objects),
                           extra=extra)

    def _ask_inner(self, g: int, planes: np.ndarray, eye: np.ndarray,
                   use_vd: bool) -> tuple[np.ndarray, int, int]:
        """Group ``g`` through its own index: the widened local planes, then the world test."""
        G = self._G
        st = self._st or self._state()
        view = local_frame(st, planes, eye, use_vd, g)
        if view.ok:
            self._flush(g)
            wide = view.planes.copy()
            wide[:, 3] += 2.0 * view.tol
            res = self._inner[g].query_frustum(wide)
            cand, work, nodes = res.visible, res.working_set, res.nodes_visited
        else:  # numbers too large for the local filter: every object to the world test
            lo = int(G.b_start[g])
            cand = self._R.ids[lo:lo + int(G.b_count[g])].copy()
            work, nodes = cand.shape[0], 0
            view = view._replace(tol=np.inf)
        got = settle_candidates(np.ascontiguousarray(cand, dtype=np.int64), self._idmap.arrays(),
                                st, planes, eye, use_vd, g, view)
        return got, int(work), int(nodes)

    # ------------------------------------------------------------------ drawing

    def node_boxes(self) -> np.ndarray:
        """Every group's index nodes as world-space boxes: corners (K, 8, 3), corner k taking
        the high side on axis a when bit a of k is set (the boxes turn with their group)."""
        return self.node_boxes_info()[0]

    def node_boxes_info(self) -> tuple[np.ndarray, list[int | str], np.ndarray, np.ndarray]:
        """(corners (K, 8, 3), group id of each box, node depth in its group's index (K,),
        depth of its group in the scene tree (K,)). Each group's local boxes are kept while its
        index cannot have changed (``boxes.NodeBoxCache``): a frame asks only the groups that
        changed, and makes the world corners in one compiled call."""
        self._refresh()
        cache = getattr(self, "_node_box_cache", None)
        if cache is None:
            cache = self._node_box_cache = NodeBoxCache()
        return cache.boxes(self)

    def group_boxes(self) -> tuple[np.ndarray, list[int | str], np.ndarray, np.ndarray]:
        """Each non-empty group's local box of its objects, in world space (it turns with the
        group, as in Shagam's figure 2.5): (corners (K, 8, 3), group ids, scene-tree depth,
        last query's outcome per group (``NODE_*`` codes)). One compiled pass."""
        self._refresh()
        G = self._G
        R = self._R
        corners, own = group_box_corners(self._order, G.b_start, G.b_count, R.lc, R.rad, G.W)
        keys = self._keys
        return corners, [keys[g] for g in own.tolist()], G.depth[own], G.code[own].copy()

    def flush(self) -> None:
        """Bring every group's index up to date with the moves so far (queries and node boxes
        do it for the groups they read)."""
        G = self._G
        for g in np.flatnonzero(G.alive & ((G.nstale > 0) | (G.gdirty > 0))).tolist():
            self._flush(g)

    # ------------------------------------------------------------------ checks

    def validate(self) -> None:
        """Raise AssertionError on any broken invariant: transforms, tree, bounds, store, id
        map, and each group's own index (its objects and its validate())."""
        G = self._G
        live = np.flatnonzero(G.alive)
        if sorted(self._slot.values()) != live.tolist():
            raise AssertionError("the group id map and the live group slots differ")
        for key, g in self._slot.items():
            if self._keys[g] != key or self._inner[g] is None:
                raise AssertionError(f"group {key!r}: slot {g} does not point back")
            p = int(G.parent[g])
            if p >= 0 and not G.alive[p]:
                raise AssertionError(f"group {key!r}: its parent is not a live group")
        m = np.concatenate([G.L[live], np.tile([[[0.0, 0.0, 0.0, 1.0]]], (live.shape[0], 1, 1))],
                           axis=1)
        bad = transform_problems(m)
        if bad:
            raise AssertionError(f"group {self._keys[live[bad[0][0]]]!r}: {bad[0][1]}")
        if not np.array_equal(canonical_scale(m), G.scale[live]):
            raise AssertionError("a group's scale differs from its transform's")
        self._refresh()
        if sorted(self._order.tolist()) != live.tolist():
            raise AssertionError("the preorder does not list every live group once")
        pos = {g: i for i, g in enumerate(self._order.tolist())}
        for i, g in enumerate(self._order.tolist()):
            p = int(G.parent[g])
            if p >= 0 and not (pos[p] < i < int(self._send[pos[p]])):
                raise AssertionError(f"group {self._keys[g]!r} is not inside its parent's "
                                     "subtree in the preorder")
        W, ws = G.W.copy(), G.ws.copy()
        self._world_dirty = True
        self._refresh_world()
        if not (np.array_equal(W[live], G.W[live]) and np.array_equal(ws[live], G.ws[live])):
            raise AssertionError("a world matrix differs from its composed transforms")
        R = self._R
        if (self._top > R.ids.shape[0] or self._codes.shape[0] < R.ids.shape[0]
                or self._stamp.shape[0] < R.ids.shape[0]):
            raise AssertionError("the arena outgrew its scratch arrays")
        for code, where in (check_blocks(R, live, G.b_start, G.b_cap, G.b_count, self._top),
                            check_copy(R, G.dirty32, self._log_rows, int(self._nlog[0])),
                            check_own(R, G.o_c, G.o_r, G.o_vd, G.o_rmax, G.nstale, live),
                            check_world(R, G.parent, G.W, G.ws, G.wbc, G.wbr, G.wvd, G.sbc,
                                        G.sbr, G.svd)):
            if code:
                raise AssertionError(f"{self.describe()}: {MESSAGES[int(code)]} (at {where})")
        if self._st is not None and state_pointers(self._st).tolist() != [
                a.ctypes.data for a in state_arrays(*self._state_records())]:
            raise AssertionError(f"{self.describe()}: the compiled record points at arrays the "
                                 "index no longer uses")
        code, where, nlive = check_idmap(R, *self._idmap.arrays())
        if code:
            raise AssertionError(f"{self.describe()}: {MESSAGES[int(code)]} (at {where})")
        if not (nlive == self._count == len(self._idmap) == int(G.b_count[live].sum())):
            raise AssertionError(f"{self.describe()}: {MESSAGES[11]}")
        for g in live.tolist():
            self._validate_inner(g)

    def _validate_inner(self, g: int) -> None:
        inner = self._inner[g]
        G = self._G
        R = self._R
        lo = int(G.b_start[g])
        hi = lo + int(G.b_count[g])
        ids = R.ids[lo:hi]
        if len(inner) != ids.shape[0] or not np.array_equal(np.sort(inner.all_ids()),
                                                            np.sort(ids)):
            raise AssertionError(f"group {self._keys[g]!r}: its index holds other objects "
                                 "than its block")
        fresh = R.stale[lo:hi] == 0
        if not G.gdirty[g] and fresh.any():
            c, r, v = inner.get(ids[fresh])
            if not (np.array_equal(c, R.lc[lo:hi][fresh]) and np.array_equal(r, R.rad[lo:hi][fresh])
                    and np.array_equal(v, R.vd[lo:hi][fresh])):
                raise AssertionError(f"group {self._keys[g]!r}: its index disagrees with the "
                                     "store on an object not marked stale")
        inner.validate()

    def stats(self) -> dict[str, Any]:
        """Sizes: objects, groups, deepest group, inner index nodes, arena rows, stale rows."""
        self._refresh()
        G = self._G
        live = np.flatnonzero(G.alive)
        nodes = sum(int(self._inner[g].stats().get("nodes", 0)) for g in live.tolist())
        return {"objects": self._count, "groups": int(live.shape[0]),
                "max_depth": int(G.depth[live].max()) if live.shape[0] else 0,
                "nodes": nodes, "kind": self.kind, "inner_min": self.inner_min,
                "arena_rows": self._top, "garbage_rows": self._garbage,
                "stale": int(G.nstale[live].sum()), "dirty_groups": int(G.gdirty[live].sum())}

    # ------------------------------------------------------------------ internals

    def _group(self, gid: Any, op: str) -> int:
        key = _key(gid)
        g = self._slot.get(key)
        if g is None:
            raise ValueError(f"{op}: unknown group {key!r}")
        return g

    @staticmethod
    def _checked(op: str, keys: list, m: np.ndarray) -> np.ndarray:
        bad = transform_problems(m)
        if bad:
            k, why = bad[0]
            more = f" (and {len(bad) - 1} more bad transforms)" if len(bad) > 1 else ""
            raise ValueError(f"{op}: transform of group {keys[k]!r}: {why}{more}")
        return m

    @staticmethod
    def _check_limits(op: str, ids: np.ndarray, c: np.ndarray, r: np.ndarray | None,
                      vd: np.ndarray | None) -> None:
        bad = (np.abs(c) > LIMIT).any(axis=1)
        if r is not None:
            bad |= r > LIMIT
        if vd is not None:
            bad |= (vd > LIMIT) & (vd != np.inf)
        if bad.any():
            raise ValueError(f"{op}: local coordinates, radii and finite view distances must be "
                             f"at most {LIMIT:g}; too large for ids {name_ids(ids[bad])}")

    def _rows_of(self, op: str, ids: np.ndarray) -> np.ndarray:
        rows = self._idmap.lookup(ids)
        if (rows < 0).any():
            raise ValueError(f"{op}: unknown ids: {name_ids(ids[rows < 0])}")
        reject_repeats(op, ids)
        return rows

    def _update_fast(self, want: int, ids: Any, c: Any, r: Any, vd: Any, tried: bool) -> bool:
        """The per-frame path: well-typed arrays, one compiled call that checks and writes;
        the same movers as last time (a scene's moving objects) skip the id look-ups. False
        (nothing changed): the checked path decides and names what is wrong. ``tried``: the
        cached movers' call already refused this batch (``update``), so it is not made again."""
        if not (type(ids) is np.ndarray and ids.dtype is _I64 and ids.ndim == 1
                and ids.flags.c_contiguous):
            return False
        n = ids.shape[0]
        if n == 0 or not (type(c) is np.ndarray and c.dtype is _F64 and c.shape == (n, 3)
                          and c.flags.c_contiguous):
            return False
        for a in (r, vd):
            if a is not None and not (type(a) is np.ndarray and a.dtype is _F64
                                      and a.shape == (n,) and a.flags.c_contiguous):
                return False
        rr = _EMPTY_F if r is None else r
        vv = _EMPTY_F if vd is None else vd
        last = self._movers
        R = self._R
        if not tried and last is not None and last[0] == self._version and last[1] == want:
            code = self._move_cached(last, ids, c, rr, vv)
            if code == 0:
                return True
            if code == 1:
                return False
        elif not good_values(c, rr, vv):
            return False
        rows = np.empty(n, np.int64)
        grps = np.empty(n, np.int64)
        self._epoch += 1
        keys, vals, dense = self._idmap.arrays()
        if not resolve_moves(ids, keys, vals, dense, R.grp, want, self._stamp, self._epoch, rows,
                             grps):
            return False
        self._movers = (self._version, want, ids.copy(), rows, grps)
        self._moves_seen = 0
        self._apply(rows, grps, c, r, vd)
        return True

    def _move_cached(self, last: tuple, ids: Any, c: Any, r: np.ndarray, vd: np.ndarray) -> int:
        """The cached movers ``last`` moved once more, in one compiled call that checks
        (store.moves_fast): 0 done (the third batch running packs their rows), 1 a bad
        type, shape or value, 2 other ids; nothing changed unless 0. Another array type
        (read-only, strided, float32, a list) is refused as 1: the checked path takes it."""
        try:
            code = moves_hot(self._st or self._state(), ids, last[2], last[3], last[4], c, r,
                             vd, self.inner_min)
        except TypeError:
            return 1
        if code == 0:
            self._moves_seen += 1
            if self._moves_seen == 2 and self._packed != self._version:
                self._pack_movers(last[3], last[4])
        return code

    def _pack_movers(self, rows: np.ndarray, grps: np.ndarray) -> None:
        """The same objects moved in three batches running: pack their rows to the front of
        their blocks (one pass; the movers cache's rows follow). Rows moved inside blocks
        only: the inner indexes (by id) and the node box cache do not see it, the move log's
        rows are void (its groups get their whole block refreshed)."""
        self._epoch += 2
        keys, vals, dense = self._idmap.arrays()
        movers_first(self._R, rows, grps, self._G.b_start, self._stamp, self._epoch, keys, vals,
                     dense)
        self._epoch += 1
        d = self._G.dirty32
        d[d == 1] = 2
        self._nlog[0] = 0
        self._packed = self._version

    def _apply(self, rows: np.ndarray, grps: np.ndarray, c: np.ndarray, r: np.ndarray | None,
               vd: np.ndarray | None) -> None:
        apply_moves(self._st or self._state(), rows, grps, c, _EMPTY_F if r is None else r,
                    _EMPTY_F if vd is None else vd, self.inner_min)

    def _flush(self, g: int) -> None:
        """Group ``g``'s own index up to date: its stale rows, or its whole block when the
        group was only marked."""
        G = self._G
        R = self._R
        lo = int(G.b_start[g])
        hi = lo + int(G.b_count[g])
        if G.gdirty[g]:
            if hi > lo:
                self._inner[g].update(R.ids[lo:hi].copy(), R.lc[lo:hi].copy(),
                                      R.rad[lo:hi].copy(), R.vd[lo:hi].copy())
            if G.nstale[g]:
                clear_stale(R, lo, hi)
            G.gdirty[g] = 0
            G.nstale[g] = 0
        elif G.nstale[g]:
            ids, c, r, v = take_stale(R, lo, hi, int(G.nstale[g]))
            self._inner[g].update(ids, c, r, v)
            G.nstale[g] = 0

    def _ensure_order(self) -> None:
        if self._order_dirty:
            self._order, self._send, self._G.depth = preorder(self._G.parent, self._G.alive)
            self._pos = np.full(self._G.cap, -1, np.int64)
            self._pos[self._order] = np.arange(self._order.shape[0])
            self._st = None
            self._order_dirty = False
            self._bounds_dirty = True

    def _refresh_world(self, force: bool = False) -> None:
        """World matrices; ValueError (naming the group) when a world scale leaves range."""
        self._ensure_order()
        if not (force or self._world_dirty):
            return
        G = self._G
        code, where = refresh_world(self._order, G.parent, G.L, G.scale, G.W, G.ws, G.dhi,
                                    G.dlo)
        if code:
            self._world_dirty = True
            raise ValueError(f"the world scale of group {self._keys[int(where)]!r} would leave "
                             f"[{1 / LIMIT:g}, {LIMIT:g}]")
        self._world_dirty = False
        self._bounds_dirty = True

    def _refresh(self) -> None:
        """The world matrices and bounds up to date: everything after a change of the tree
        (``_bounds_dirty``), else only the groups listed bounds-dirty since the last time."""
        if self._world_dirty or self._order_dirty:
            self._refresh_world()
        G = self._G
        if not self._bounds_dirty:
            if self._nbl[0]:
                refresh_bounds_some(self._st or self._state())
            return
        loose = np.flatnonzero(G.loose & G.alive)
        if loose.shape[0]:
            tighten(self._R.lc, self._R.rad, self._R.vd, loose, G.b_start, G.b_count, G.o_c,
                    G.o_r, G.o_tight, G.o_vd, G.o_rmax, G.loose)
        refresh_bounds(self._st or self._state())
        G.bmark[G.blist[:self._nbl[0]]] = 0
        self._nbl[0] = 0
        self._bounds_dirty = False

    def _grow_groups(self, cap: int) -> None:
        old = self._G.cap
        self._G.grow(cap)
        self._st = None
        self._inner += [None] * (cap - old)
        self._keys += [None] * (cap - old)
        self._free_g = list(range(cap - 1, old - 1, -1)) + self._free_g

    def _relocate(self, g: int, cap: int) -> None:
        """Give group ``g`` a block of ``cap`` rows at the arena's end."""
        self._room(cap)
        G = self._G
        keys, vals, dense = self._idmap.arrays()
        move_block(self._R, int(G.b_start[g]), int(G.b_count[g]), self._top, keys, vals, dense)
        self._garbage += int(G.b_cap[g])
        G.b_start[g] = self._top
        G.b_cap[g] = cap
        self._top += cap

    def _room(self, n: int) -> None:
        """At least ``n`` free rows at the arena's end: repack when half of it is holes, grow
        otherwise."""
        cap = self._R.ids.shape[0]
        if self._top + n <= cap:
            return
        if self._garbage >= n and self._garbage >= self._top // 2:
            self._repack(max(cap, 2 * (self._top - self._garbage + n)))
        if self._top + n > self._R.ids.shape[0]:
            self._set_arena(grown_rows(self._R, max(2 * self._R.ids.shape[0], self._top + n)))

    def _repack(self, cap: int) -> None:
        G = self._G
        live = np.flatnonzero(G.alive)
        caps = np.where(G.b_count[live] > 0, np.maximum(16, G.b_count[live] * 5 // 4), 0)
        start = np.zeros(G.cap, np.int64)
        start[live] = np.cumsum(caps) - caps
        top = int(caps.sum())
        out = new_rows(max(cap, top))
        keys, vals, dense = self._idmap.arrays()
        repack(self._R, out, live, G.b_start, G.b_count, start, keys, vals, dense)
        G.b_start[live] = start[live]
        G.b_cap[live] = caps
        self._top = top
        self._garbage = 0
        self._set_arena(out)

    def _bump(self) -> None:
        """Rows moved or died: the movers cache expires, the move log's rows mean nothing
        any more (its groups get their whole block refreshed instead)."""
        self._version += 1
        d = self._G.dirty32
        d[d == 1] = 2
        self._nlog[0] = 0

    def _state(self) -> Any:
        """The compiled record of the arrays (made again after any of them was replaced)."""
        if self._st is None:
            if self._act.shape[0] < self._G.cap:  # the descent's per-group scratch
                self._act = np.zeros(self._G.cap, np.uint8)
                self._cuts = np.zeros(self._G.cap, np.uint64)
            self._st = make_state(*self._state_records())
        return self._st

    def _state_records(self) -> tuple:
        return state_records(self._G, self._R, self._order, self._send, self._pos,
                             self._log_rows, self._log_grp, self._nlog, self._nbl, self._codes,
                             self._act, self._cuts, self._sure, self._near)

    def _set_arena(self, rows: Any) -> None:
        self._st = None
        self._R = rows
        n = rows.ids.shape[0]
        if self._log_rows.shape[0] < n // 8:
            self._bump()
            self._log_rows = np.zeros(n // 8, np.int64)
            self._log_grp = np.zeros(n // 8, np.int64)
        if self._stamp.shape[0] < n:
            self._stamp = grown(self._stamp, n, 0)
        if self._sure.shape[0] < n + 8:
            self._sure = np.empty(n + 8, np.int64)
            self._near = np.empty(n + 8, np.int64)
        if self._codes.shape[0] < n + 8:
            self._codes = np.empty(n + 8, np.uint8)


__all__ = ["INNER_MIN", "NestedIndex"]
