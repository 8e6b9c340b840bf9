"""The group tree of a nested index: group ids and slots, parents, transforms, the preorder
and the world matrices, and each group's inner index (``groups.py`` holds their kernels).

A group lives in a *slot*: row ``g`` of every array of the :class:`GroupTable`, which also
holds what the object arena (``arena.py``) and the descent keep per group (its block of rows,
its own and subtree spheres). The tree orchestrates whole batches; a change it makes is
recorded in three flags that the index reads before its next query: ``order_dirty`` (a
group added, removed or moved: the preorder is made again), ``world_dirty`` (the world
matrices are recomposed) and ``bounds_dirty`` (every group's bounds are refreshed; the
per-frame paths list only the groups that changed instead, ``blist[:nbl[0]]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from app.spatial.nested.groups import (
    LIMIT,
    canonical_scale,
    preorder,
    refresh_world,
    rigid_codes,
    subtree_order,
    transform_problems,
    transforms_hot,
)
from app.spatial.nested.state import StateRecord
from app.spatial.pool import grown

_IDENTITY = np.eye(4)
_KEY_TYPES = frozenset((int, str))  # group ids as the fast paths compare them (not bools)
#: the fill of each GroupTable array's new rows when it grows (0 for the others)
_FILL = {"parent": -1, "scale": 1.0, "ws": 1.0, "world_r": -1.0, "world_vd": -1.0, "sub_r": -1.0,
         "sub_vd": -1.0}


def group_key(gid: Any) -> int | str:
    """A group id as the dict key: an int (numpy ints too) or a string."""
    if isinstance(gid, bool | np.bool_):
        raise ValueError(f"group ids are ints or strings, got {gid!r}")
    if isinstance(gid, int | np.integer):
        return int(gid)
    if isinstance(gid, str):
        return gid
    raise ValueError(f"group ids are ints or strings, got {gid!r}")


def as_matrices(transforms: Any, n: int, what: str) -> np.ndarray:
    """``transforms`` as ``n`` float64 (4, 4) matrices (None: identities); ValueError on
    another shape."""
    m = np.asarray(transforms, dtype=np.float64) if transforms is not None else None
    if m is None:
        return np.repeat(_IDENTITY[None], n, axis=0)
    if m.shape == (4, 4) and n == 1:
        m = m[None]
    if m.shape != (n, 4, 4):
        raise ValueError(f"{what}: transforms must be (4, 4) matrices, got shape {m.shape}")
    return np.ascontiguousarray(m)


def checked_transforms(op: str, keys: list, m: np.ndarray) -> np.ndarray:
    """``m`` when every matrix is rigid; else ValueError naming the first bad group."""
    bad = transform_problems(m)
    if bad:
        k, why = bad[0]
        more = f" (and {len(bad) - 1} more bad transforms)" if len(bad) > 1 else ""
        raise ValueError(f"{op}: transform of group {keys[k]!r}: {why}{more}")
    return m


def _scale_error(op: str, key: Any) -> ValueError:
    return ValueError(f"{op}the world scale of group {key!r} would leave "
                      f"[{1 / LIMIT:g}, {LIMIT:g}]")


class GroupTable:
    """Per-group arrays, indexed by group slot (state.GroupArrays lists those the compiled
    record holds)."""

    def __init__(self, cap: int) -> None:
        self.alive = np.zeros(cap, np.bool_)
        self.parent = np.full(cap, -1, np.int64)
        self.L = np.zeros((cap, 3, 4))  # local -> parent
        self.scale = np.ones(cap)
        self.W = np.zeros((cap, 3, 4))  # local -> world (refreshed)
        self.ws = np.ones(cap)
        self.stretch_hi = np.zeros(cap)  # how far W's singular values may exceed ws (relative)
        self.stretch_lo = np.zeros(cap)  # ... and fall below it
        self.own_c = np.zeros((cap, 3))  # own sphere (around the group's objects), local
        self.own_r = np.zeros(cap)
        self.own_tight = np.zeros(cap)  # own_r when last tightened
        self.own_rmax = np.zeros(cap)  # largest radius of the own objects (or more)
        self.own_vd = np.zeros(cap)  # largest view distance of the own objects
        self.loose = np.zeros(cap, np.bool_)
        self.nstale = np.zeros(cap, np.int64)  # rows marked stale (large groups)
        self.gdirty = np.zeros(cap, np.uint8)  # moved since its index was updated (small ones)
        self.dirty32 = np.zeros(cap, np.uint8)  # float32 centres older than the float64 ones
        self.b_start = np.zeros(cap, np.int64)
        self.b_cap = np.zeros(cap, np.int64)
        self.b_count = np.zeros(cap, np.int64)
        self.world_c = np.zeros((cap, 3))  # own sphere, world (refreshed)
        self.world_r = np.full(cap, -1.0)
        self.world_vd = np.full(cap, -1.0)
        self.world_mag = np.zeros(cap)  # bound on the terms of W c over the own sphere
        self.sub_c = np.zeros((cap, 3))  # subtree sphere, world (refreshed)
        self.sub_r = np.full(cap, -1.0)
        self.sub_vd = np.full(cap, -1.0)
        self.code = np.zeros(cap, np.int8)  # last query's outcome (NODE_*)
        self.depth = np.zeros(cap, np.int64)
        self.bmark = np.zeros(cap, np.uint8)  # bounds-dirty: own sphere or world matrix changed
        self.blist = np.zeros(cap, np.int64)  # the bounds-dirty groups (``nbl[0]`` of them)
        self.scanned = np.zeros(cap, np.uint8)  # descend's scratch (zero between queries)

    @property
    def cap(self) -> int:
        return self.alive.shape[0]

    def grow(self, cap: int) -> None:
        """Room for ``cap`` groups (every array replaced: the record must be made again)."""
        for name, a in list(vars(self).items()):
            setattr(self, name, grown(a, cap, _FILL.get(name, 0)))


class GroupTree:
    """The groups of a nested index: ids <-> slots, parents, transforms, preorder, world
    matrices, each group's inner index (made by the index, held here by slot)."""

    def __init__(self, record: StateRecord) -> None:
        self.G = GroupTable(16)
        self.inner: list[Any] = [None] * 16
        self.keys: list[int | str | None] = [None] * 16
        self.slot: dict[int | str, int] = {}
        self._free: list[int] = list(range(15, -1, -1))
        self.order = np.zeros(0, np.int64)
        self.pos = np.zeros(0, np.int64)  # preorder position of each group slot
        self.send = np.zeros(0, np.int64)
        self.order_dirty = False
        self.world_dirty = False
        self.bounds_dirty = False
        self.nbl = np.zeros(1, np.int64)  # bounds-dirty groups listed in G.blist
        self.version = 0  # bumped when group slots change: the set_transforms cache expires
        self._tcache: tuple | None = None  # (version, keys, slots) of the last set_transforms
        self.act = np.zeros(16, np.uint8)  # descend's scratch, a byte / word per group
        self.cuts = np.zeros(16, np.uint64)
        self._record = record

    @property
    def dirty(self) -> bool:
        """Anything to refresh before a query (the preorder, world matrices or all bounds)."""
        return self.bounds_dirty or self.world_dirty or self.order_dirty

    def slot_of(self, gid: Any, op: str) -> int:
        """The slot of group ``gid``; ValueError naming it when there is no such group."""
        key = group_key(gid)
        g = self.slot.get(key)
        if g is None:
            raise ValueError(f"{op}: unknown group {key!r}")
        return g

    def add(self, gid: Any, parent: Any, transform: Any, make_inner: Callable[[], Any]) -> None:
        """A new group under ``parent`` (None: the world), its inner index from
        ``make_inner``; nothing changes on a ValueError."""
        key = group_key(gid)
        if key in self.slot:
            raise ValueError(f"add_group: group {key!r} already exists")
        if parent is not None and group_key(parent) == key:
            raise ValueError(f"add_group: group {key!r} cannot be its own parent (a cycle)")
        p = -1 if parent is None else self.slot_of(parent, "add_group")
        m = checked_transforms("add_group", [key], as_matrices(transform, 1, "add_group"))
        if self.world_dirty:
            self.refresh_world()
        if not self._free:
            self._grow(2 * self.G.cap)
        g = self._free[-1]
        G = self.G
        G.parent[g] = p
        G.L[g] = m[0, :3, :]
        G.scale[g] = canonical_scale(m)[0]
        # Its world matrix from its parent's (current): the same kernel, one group.
        code, _ = refresh_world(np.array([g], np.int64), G.parent, G.L, G.scale, G.W, G.ws,
                                G.stretch_hi, G.stretch_lo)
        if code:
            raise _scale_error("add_group: ", key)
        self._free.pop()
        G.alive[g] = True
        for name in ("own_c", "own_r", "own_tight", "own_vd", "own_rmax", "nstale", "gdirty",
                     "dirty32", "b_start", "b_cap", "b_count"):
            getattr(G, name)[g] = 0
        G.loose[g] = False
        self.keys[g] = key
        self.slot[key] = g
        self.inner[g] = make_inner()
        self.order_dirty = True
        self.version += 1

    def set_transforms(self, gids: Any, transforms: Any) -> None:
        """``NestedIndex.set_transforms``: new transforms of K distinct groups in one batch."""
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
        if (last is not None and last[0] == self.version and last[1] == keys
                and not (self.world_dirty or self.order_dirty)
                and _KEY_TYPES.issuperset(map(type, keys))):
            rec = self._record
            try:
                code, k = transforms_hot(rec.st or rec.get(), last[2], transforms)
            except TypeError:
                code = -1
            if code == 0:
                return
            if code == 3:
                raise _scale_error("set_transforms: ", self.keys[int(k)])
            # a bad matrix or another type: nothing changed; the checks below name it
        self._set_transforms_checked(keys, transforms)

    def _set_transforms_checked(self, keys: list, transforms: Any) -> None:
        if not _KEY_TYPES.issuperset(map(type, keys)):  # not bools, floats
            keys = [group_key(g) for g in keys]
        slot = self.slot
        try:
            sl = [slot[k] for k in keys]
        except KeyError:
            sl = [self.slot_of(k, "set_transforms") for k in keys]
        if len(set(sl)) != len(sl):
            seen: set = set()
            rep = [k for k in keys if k in seen or seen.add(k)]
            raise ValueError(f"set_transforms: groups given more than once: {rep[:8]}")
        slots = np.array(sl, dtype=np.int64)
        self._tcache = (self.version, list(keys), slots)  # a copy: the caller's list may change
        m = as_matrices(transforms, len(keys), "set_transforms")
        scales = np.empty(len(keys))
        if rigid_codes(m, scales).any():
            checked_transforms("set_transforms", keys, m)
        G = self.G
        old_L = G.L[slots].copy()
        old_s = G.scale[slots].copy()
        G.L[slots] = m[:, :3, :]
        G.scale[slots] = scales
        self.ensure_order()
        if self.world_dirty:  # everything is recomputed anyway
            try:
                self.refresh_world(force=True)
            except ValueError:
                G.L[slots] = old_L
                G.scale[slots] = old_s
                self.refresh_world(force=True)
                raise
            return
        # Only the subtrees of these groups change (their parents' matrices are current).
        sub = subtree_order(self.order, self.send, self.pos, slots)
        code, where = refresh_world(sub, G.parent, G.L, G.scale, G.W, G.ws, G.stretch_hi,
                                    G.stretch_lo)
        if code:
            G.L[slots] = old_L
            G.scale[slots] = old_s
            refresh_world(sub, G.parent, G.L, G.scale, G.W, G.ws, G.stretch_hi, G.stretch_lo)
            raise _scale_error("set_transforms: ", self.keys[int(where)])
        self.bounds_dirty = True

    def set_parent(self, gid: Any, parent: Any) -> None:
        """``NestedIndex.set_parent``: group ``gid`` (with its subtree) under ``parent``."""
        g = self.slot_of(gid, "set_parent")
        p = -1 if parent is None else self.slot_of(parent, "set_parent")
        a = p
        while a >= 0:
            if a == g:
                raise ValueError(f"set_parent: {self.keys[p]!r} is {self.keys[g]!r} or below "
                                 "it: a parent cycle")
            a = int(self.G.parent[a])
        old = int(self.G.parent[g])
        self.G.parent[g] = p
        self.order_dirty = True
        try:
            self.refresh_world(force=True)
        except ValueError:
            self.G.parent[g] = old
            self.order_dirty = True
            self.refresh_world(force=True)
            raise

    def subtree(self, g: int) -> np.ndarray:
        """The slots of group ``g`` and every group below it, in preorder."""
        self.ensure_order()
        i = int(self.pos[g])
        return self.order[i:self.send[i]]

    def forget(self, slots: np.ndarray) -> None:
        """Groups ``slots`` gone (their objects already out of the arena): their slots free."""
        for s in slots.tolist():
            self.G.alive[s] = False
            del self.slot[self.keys[s]]
            self.keys[s] = None
            self.inner[s] = None
            self._free.append(s)
        self.order_dirty = True
        self.bounds_dirty = True
        self.version += 1

    def transform(self, g: int) -> np.ndarray:
        """Group ``g``'s transform (4, 4), local -> parent."""
        return np.vstack([self.G.L[g], [0.0, 0.0, 0.0, 1.0]])

    def world_transform(self, g: int) -> np.ndarray:
        """Group ``g``'s composed transform (4, 4), local -> world."""
        self.refresh_world()
        return np.vstack([self.G.W[g], [0.0, 0.0, 0.0, 1.0]])

    def ensure_order(self) -> None:
        """The preorder of the live groups up to date (new arrays: the record is dropped)."""
        if self.order_dirty:
            self.order, self.send, self.G.depth = preorder(self.G.parent, self.G.alive)
            self.pos = np.full(self.G.cap, -1, np.int64)
            self.pos[self.order] = np.arange(self.order.shape[0])
            self._record.drop()
            self.order_dirty = False
            self.bounds_dirty = True

    def refresh_world(self, force: bool = False) -> None:
        """World matrices; ValueError (naming the group) when a world scale leaves range."""
        self.ensure_order()
        if not (force or self.world_dirty):
            return
        G = self.G
        code, where = refresh_world(self.order, G.parent, G.L, G.scale, G.W, G.ws, G.stretch_hi,
                                    G.stretch_lo)
        if code:
            self.world_dirty = True
            raise _scale_error("", self.keys[int(where)])
        self.world_dirty = False
        self.bounds_dirty = True

    def _grow(self, cap: int) -> None:
        old = self.G.cap
        self.G.grow(cap)
        self._record.drop()
        self.inner += [None] * (cap - old)
        self.keys += [None] * (cap - old)
        self._free = list(range(cap - 1, old - 1, -1)) + self._free
        self.act = np.zeros(cap, np.uint8)
        self.cuts = np.zeros(cap, np.uint64)

    def validate(self) -> None:
        """AssertionError on a broken invariant of the tree: the slot map, the transforms and
        scales, the preorder, the world matrices (recomposed and compared)."""
        G = self.G
        live = np.flatnonzero(G.alive)
        if sorted(self.slot.values()) != live.tolist():
            raise AssertionError("the group id map and the live group slots differ")
        for key, g in self.slot.items():
            if self.keys[g] != key or self.inner[g] is None:
                raise AssertionError(f"group {key!r}: slot {g} does not point back")
            p = int(G.parent[g])
            if p >= 0 and not G.alive[p]:
                raise AssertionError(f"group {key!r}: its parent is not a live group")
        m = np.concatenate([G.L[live], np.tile([[[0.0, 0.0, 0.0, 1.0]]], (live.shape[0], 1, 1))],
                           axis=1)
        bad = transform_problems(m)
        if bad:
            raise AssertionError(f"group {self.keys[live[bad[0][0]]]!r}: {bad[0][1]}")
        if not np.array_equal(canonical_scale(m), G.scale[live]):
            raise AssertionError("a group's scale differs from its transform's")
        self.ensure_order()
        if sorted(self.order.tolist()) != live.tolist():
            raise AssertionError("the preorder does not list every live group once")
        pos = {g: i for i, g in enumerate(self.order.tolist())}
        for i, g in enumerate(self.order.tolist()):
            p = int(G.parent[g])
            if p >= 0 and not (pos[p] < i < int(self.send[pos[p]])):
                raise AssertionError(f"group {self.keys[g]!r} is not inside its parent's "
                                     "subtree in the preorder")
        W, ws = G.W.copy(), G.ws.copy()
        self.world_dirty = True
        self.refresh_world()
        if not (np.array_equal(W[live], G.W[live]) and np.array_equal(ws[live], G.ws[live])):
            raise AssertionError("a world matrix differs from its composed transforms")


__all__ = ["GroupTable", "GroupTree", "as_matrices", "checked_transforms", "group_key"]
