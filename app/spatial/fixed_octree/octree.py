"""``FixedOctree``: Nevala's octree over a power-of-two cube (seeds/nevala-octree.txt).

The Python class only orchestrates whole batches: the state is the named arrays of
:mod:`.store`, the update cycle is :mod:`.update`, the queries are :mod:`.queries` and
validate runs the checks of :mod:`.check`; each step is one call into compiled kernels.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from app.geom.zpyramid import ZPyramid, occluder
from app.spatial.base import QueryResult, SpatialIndex
from app.spatial.fixed_octree import check as ck
from app.spatial.fixed_octree import pairs as pq
from app.spatial.fixed_octree import queries as qu
from app.spatial.fixed_octree import store as st
from app.spatial.fixed_octree import update as up
from app.spatial.flat_form import FlatWhileMoving
from app.spatial.pairs import new_pairs, radix_argsort, selection
from app.spatial.pool import grown, grown_free_stack

#: Free nodes made ready before a batch is placed, per entry: a flush creates 0.63 nodes an
#: object (static workload, 10^6) to 1.48 (the world, 10^7); past the reservation the pool
#: doubles, a copy of all its nodes (the world's first query: 17.2 s doubling, 10.5 s with
#: one node an entry and one copy, 8.9 s with two and none; static 10^6: 0.61-1.31 s ->
#: 0.46-0.82 s, `/tmp` foreserve.py, in one process).
NODES_PER_ENTRY = 2


class FixedOctree(FlatWhileMoving, SpatialIndex):
    """Nevala's octree: power-of-two root cube, smallest-octant placement, queued inserts.

    Flat while everything moves (:mod:`app.spatial.flat_form`): with every object moving,
    the next query's flush placed every one again (bench index `moving` at 10^5: a 16-21 ms
    query, the frame 0.03-0.07x the brute force's), and its pairs took 2x the
    sort-and-sweep's step (bench pairs at 10^5)."""

    name = "fixed-octree"
    _reads_old_values = False  # (the flat copy's moves read the new spheres only)
    _pairs_structural = True  # Nevala's list of ancestors' objects, top down (pairs.py)

    def __init__(self, min_size: float = 1.0, leafy: bool | None = None,
                 split_threshold: int | None = None, capacity: int = 1024,
                 flat: bool = True) -> None:
        if leafy not in (None, False) or split_threshold is not None:
            raise ValueError("fixed-octree has no split heuristic: leafy and split_threshold "
                             "do not apply (objects go to the smallest containing octant)")
        m = float(min_size)
        if not (math.isfinite(m) and m > 0.0 and math.frexp(m)[0] == 0.5):
            raise ValueError("min_size must be a positive power of two (e.g. 0.5, 1, 2), "
                             f"got {min_size!r}")
        super().__init__(capacity)
        self.min_size = m
        self.cycles = 0  # update cycles (flushes) so far
        self.pruned = 0  # dead leaves pruned so far
        self.sweep_from = pq.SWEEP_FROM  # query_pairs sweeps nodes with more work than this
        self._plists: tuple[np.ndarray, ...] | None = None  # query_pairs' list buffer (kept)
        self._init_flat(flat)
        self._empty_structure()

    def _empty_structure(self) -> None:
        """No nodes, no entries, nothing queued (also flat_form's hook)."""
        self._s2e = np.full(self.capacity, st.NO_NODE, dtype=np.int64)  # slot -> entry
        self._seen = np.zeros(self.capacity, dtype=np.bool_)  # per-slot scratch of _queued
        self._slow = np.zeros(0, dtype=np.int64)  # move_now's scratch: entries to place
        self._relinked = np.zeros(1, dtype=np.int64)  # entries displaced since the renumber
        self._spare: st.Entries | None = None  # the second set of entries (renumber)
        # Entries are the tree's packed copies of placed objects. They are numbered apart from
        # the caller's slots so that a batch can take them in spatial (Morton) order: objects
        # of a node and of neighbouring nodes then sit close in memory, which is what makes
        # walking the per-node linked lists fast.
        self._ents = st.new_entries(self.capacity)
        self._displaced = np.zeros(self.capacity, dtype=np.bool_)  # linked since the renumber
        self._ent_free = np.arange(self.capacity - 1, -1, -1, dtype=np.int64)  # top = lowest
        self._ent_nfree = self.capacity
        self._nodes = st.new_nodes(1024)
        self._root = -1
        self._pending: list[np.ndarray] = []  # inserted slots waiting for the next flush
        self._changed = False
        self._fill_pending = False  # node_outcomes() still has to mark bulk-copied subtrees
        self._outcome_cycle = -1

    # ------------------------------------------------------------ pools

    def _alloc_entries(self, n: int) -> np.ndarray:
        """Pop ``n`` entries, in ascending order when the pool is fresh (grows it if needed)."""
        if n > self._ent_nfree:
            old = self._ents.node.shape[0]
            new = max(2 * old, old - self._ent_nfree + n)
            self._spare = None
            self._ents = st.grow_entries(self._ents, new)
            self._displaced = grown(self._displaced, new, False)
            self._ent_free, self._ent_nfree = grown_free_stack(self._ent_free, self._ent_nfree,
                                                               old, new)
        out = self._ent_free[self._ent_nfree - n: self._ent_nfree][::-1].copy()
        self._ent_nfree -= n
        return out

    def _ensure_nodes(self, k: int) -> None:
        """Make sure at least ``k`` nodes are free (the pool doubles when it must grow)."""
        if self._nodes.nfree[0] >= k:
            return
        old = self._nodes.node.shape[0]
        self._nodes = st.grow_nodes(self._nodes, max(2 * old, old + k))

    # ------------------------------------------------------------ hooks of the base class

    def _grow_structure(self, new_capacity: int) -> None:
        self._s2e = grown(self._s2e, new_capacity, st.NO_NODE)

    def _insert_in_structure(self, slots: np.ndarray) -> None:
        self._s2e[slots] = st.PENDING
        self._pending.append(slots.copy())
        self._changed = True

    def _move_in_structure(self, slots: np.ndarray, centers: np.ndarray,
                           radii: np.ndarray | None, vd: np.ndarray | None) -> None:
        """A checked batch, placed now: ``update.move_now`` writes the store and the packed
        copies and settles the small moves in one pass, the others climb and descend at once
        (Nevala's Update moves objects each frame too; only inserts wait for the next
        query)."""
        if self._slow.shape[0] < slots.shape[0]:
            self._slow = np.empty(max(slots.shape[0], 1024), dtype=np.int64)
        bounds = np.empty((2, 3))
        nodes = self._nodes.node
        ns = up.move_now(slots, np.ascontiguousarray(centers), radii, vd, self._s2e,
                         (self._ents.sphere, self._ents.node),
                         (self._centers, self._radii, self._vdist),
                         (nodes, st.node_lines(nodes)), self.min_size, self._slow, bounds)
        if ns:
            self._place(self._slow[:ns].copy(), bounds)
        self._changed = True  # the next query ends the update cycle

    def _remove_from_structure(self, slots: np.ndarray) -> None:
        ents = self._s2e[slots]
        ents = np.ascontiguousarray(ents[ents >= 0])
        up.unlink_batch(ents, self._ents, self._nodes, self._root)
        self._ents.slot[ents] = -1
        self._displaced[ents] = False
        n = ents.shape[0]
        self._ent_free[self._ent_nfree: self._ent_nfree + n] = ents
        self._ent_nfree += n
        self._s2e[slots] = st.NO_NODE
        self._changed = True

    # ------------------------------------------------------------ the update cycle

    def flush(self) -> None:
        """Place queued inserts now and end the update cycle (empty leaves age)."""
        new = self._queued()
        self._pending.clear()
        if new.shape[0]:
            fresh = self._take_entries(new)
            bounds = np.empty((2, 3))
            up.copy_in(fresh, self._ents, self._centers, self._radii, self._vdist, bounds)
            self._place(fresh, bounds)
        if self._root >= 0:
            pruned, root = up.end_cycle(self._nodes, self._root)
            self.pruned += pruned
            self._root = int(root)
        placed = self._ents.node.shape[0] - self._ent_nfree
        if placed and self._relinked[0] >= up.RENUMBER_AT * placed:
            self._renumber()
        self.cycles += 1
        self._changed = False

    def _place(self, ents: np.ndarray, bounds: np.ndarray) -> None:
        """Grow the root around ``bounds``, then place ``ents``, growing the pool as needed."""
        self._fit_root(bounds[0], bounds[1])
        start = 0
        while start < ents.shape[0]:
            need = int(self._nodes.node["level"][self._root]) + 2
            # Room for the whole batch at once: a first flush of 10^6 objects (627,590 nodes)
            # doubled the pool five times, each a copy into fresh memory whose pages fault on
            # first touch (470 of its 1,100 ms). Unused room is never touched.
            self._ensure_nodes(max(need, NODES_PER_ENTRY * (ents.shape[0] - start)))
            start = up.place(ents, start, need, self._ents, self._nodes, self._root,
                             self._displaced, self._relinked)

    def _renumber(self) -> None:
        """Lay the entries out again in query order, each node's list contiguous (O(n))."""
        cap = self._ents.node.shape[0]
        spare = self._spare
        if spare is None or spare.node.shape[0] != cap:
            spare = st.new_entries(cap)
        k = int(up.renumber(self._root, self._nodes, self._ents, spare, self._s2e,
                            self._stack()))
        self._spare, self._ents = self._ents, spare
        self._ent_free[: cap - k] = np.arange(cap - 1, k - 1, -1, dtype=np.int64)
        self._ent_nfree = cap - k
        self._relinked[0] = 0
        self._displaced.fill(False)

    def _queued(self) -> np.ndarray:
        """The distinct slots still pending, in queue order (removed ones dropped)."""
        if not self._pending:
            return np.zeros(0, dtype=np.int64)
        if self._seen.shape[0] != self.capacity:
            self._seen = np.zeros(self.capacity, dtype=np.bool_)
        return up.pending(np.concatenate(self._pending), self._s2e, self._seen)

    def _take_entries(self, new: np.ndarray) -> np.ndarray:
        """Entries for newly inserted slots, allocated in Morton order of their centres."""
        new = new[radix_argsort(st.morton(self._centers, new), 6)]  # (63-bit codes)
        fresh = self._alloc_entries(new.shape[0])
        self._s2e[new] = fresh
        self._ents.slot[fresh] = new
        self._ents.node[fresh] = st.NO_NODE
        return fresh

    def _fit_root(self, bmin: np.ndarray, bmax: np.ndarray) -> None:
        """Create the root around [bmin, bmax], or grow it until it contains that box."""
        m = self.min_size
        if self._root < 0:
            lo = np.floor(bmin / m) * m
            ext = float((bmax - lo).max())
            level = 0
            size = m
            while size < ext:
                size *= 2.0
                level += 1
            self._ensure_nodes(1)
            self._root = int(st.alloc_node(self._nodes, -1, level, lo[0], lo[1], lo[2], size))
            return
        while True:
            lo = self._nodes.node["lo"][self._root]
            size = self._nodes.node["size"][self._root]
            if (bmin >= lo).all() and (bmax <= lo + size).all():
                return
            self._ensure_nodes(1)
            self._root = int(st.grow_root_once(self._nodes, self._root, bmin, bmax))

    def _sync(self) -> None:
        if self._changed:
            self.flush()

    # ------------------------------------------------------------ queries

    def _stack(self) -> np.ndarray:
        depth = int(self._nodes.node["level"][self._root]) + 2 if self._root >= 0 else 2
        return np.empty(8 * depth + 8, dtype=np.int64)

    def _query_frustum(self, planes: np.ndarray, eye: np.ndarray, use_vd: bool,
                       occlusion: ZPyramid | None) -> QueryResult:
        if self._still_flat():
            return self._flat.query_frustum(self, planes, eye, use_vd, occlusion)  # (slots)
        self._sync()
        out = np.empty(self._count, dtype=np.int64)
        self._nodes.outcome.fill(0)
        stack = self._stack()
        self._fill_pending = True
        self._outcome_cycle = self.cycles
        k, ws, visited, occ_n, occ_o, far = qu.frustum(
            self._root, self._nodes, self._ents, planes, eye, use_vd, occluder(occlusion),
            out, stack, np.empty_like(stack), self._stack())
        return QueryResult(visible=out[:k], working_set=int(ws), nodes_visited=int(visited),
                           occluded_nodes=int(occ_n), occluded_objects=int(occ_o),
                           culled_distance=int(far))

    def _query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if self._still_flat():
            return self._flat.query_box(self, lo, hi)
        self._sync()
        out = np.empty(self._count, dtype=np.int64)
        scratch = np.zeros(self._nodes.outcome.shape[0], dtype=np.int8)
        k = qu.box(self._root, self._nodes, self._ents, lo, hi, out, self._stack(),
                   self._stack(), scratch)
        return out[:k]

    def _query_sphere(self, center: np.ndarray, radius: float) -> np.ndarray:
        if self._still_flat():
            return self._flat.query_sphere(self, center, radius)
        self._sync()
        out = np.empty(self._count, dtype=np.int64)
        k = qu.sphere(self._root, self._nodes, self._ents, center, radius, out, self._stack())
        return out[:k]

    def _query_ray(self, origin: np.ndarray,
                   direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._still_flat():
            return self._flat.query_ray(self, origin, direction)
        self._sync()
        out = np.empty(self._count, dtype=np.int64)
        ts = np.empty(self._count, dtype=np.float64)
        k = qu.ray(self._root, self._nodes, self._ents, origin, direction, out, ts,
                   self._stack())
        return out[:k], ts[:k]

    def _query_pairs(self, slots: np.ndarray | None, margin: float) -> np.ndarray:
        if self._still_flat():
            return self._flat.pairs(self, slots, margin)
        self._sync()
        out = new_pairs(2 * self._count)
        if slots is not None:
            slots = np.unique(slots)  # ids may repeat
            sel = selection(self.capacity, slots)
            if slots.shape[0] < pq.ALL_PAIRS_FROM * self._count:
                return pq.pairs_of(slots, self._s2e, self._root, self._nodes, self._ents,
                                   margin, sel, out, self._stack())
        else:
            sel = selection(self.capacity, None)
        if self._plists is None:
            self._plists = pq.new_lists(2 * self._count)
        pairs, self._plists = pq.all_pairs(self._root, self._nodes, self._ents, margin, sel,
                                           out, self._plists, self._stack(), self._stack(),
                                           self._stack(), self._stack(), self.sweep_from)
        return pairs

    def object_cells(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(corner (n,3), side (n,)) of the node cube each object lives in (flushes first)."""
        ids = self._check_ids(ids)
        slots = self._idmap.lookup(ids)
        if (slots < 0).any():
            raise ValueError(f"object_cells: unknown ids: {ids[slots < 0][:8].tolist()}")
        if self._flat is not None:  # (cells exist in the tree only)
            self._go_structure()
        self._sync()
        nodes = self._ents.node[self._s2e[slots]]
        return self._nodes.node["lo"][nodes].copy(), self._nodes.node["size"][nodes].copy()

    # ------------------------------------------------------------ overlays, stats, checks

    def _live_nodes(self) -> np.ndarray:
        return np.flatnonzero(self._nodes.node["alive"] != 0)

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, depth) of every node cube (pool order; aligned with node_outcomes)."""
        live = self._live_nodes()
        lo = self._nodes.node["lo"][live].copy()
        hi = lo + self._nodes.node["size"][live][:, None]
        depth = self._root_level() - self._nodes.node["level"][live].astype(np.int64)
        return lo, hi, depth

    def node_outcomes(self) -> np.ndarray:
        """NODE_* outcome of each node of node_boxes() in the last frustum query."""
        if self._fill_pending and self._outcome_cycle == self.cycles:
            qu.fill_inside(self._root, self._nodes, self._stack())
        self._fill_pending = False
        return self._nodes.outcome[self._live_nodes()].copy()

    def _root_level(self) -> int:
        return int(self._nodes.node["level"][self._root]) if self._root >= 0 else 0

    def stats(self) -> dict[str, Any]:
        """Nodes, depth, objects per depth, queued work, dying leaves, root cube."""
        nd = self._nodes
        live = self._live_nodes()
        placed = self._ents.node[self._ents.node >= 0]
        depth_of = self._root_level() - nd.node["level"][placed].astype(np.int64)
        node_depth = self._root_level() - nd.node["level"][live].astype(np.int64)
        out = super().stats()
        out.update({
            "nodes": int(live.shape[0]),
            "max_depth": int(node_depth.max()) if live.shape[0] else 0,
            "objects_per_level": np.bincount(depth_of).tolist() if placed.shape[0] else [],
            "pending": int(self._queued().shape[0]),
            "dead_branches": int((nd.node["ttl"][live] >= 0).sum()),
            "root_lo": nd.node["lo"][self._root].tolist() if self._root >= 0 else None,
            "root_size": float(nd.node["size"][self._root]) if self._root >= 0 else 0.0,
            "min_size": self.min_size,
            "cycles": self.cycles,
            "pruned": self.pruned,
            "node_capacity": int(nd.node.shape[0]),
            "flat": self._flat is not None,
        })
        return out

    def describe(self) -> str:
        """Name and parameters for HUDs and logs."""
        size = self._nodes.node["size"][self._root] if self._root >= 0 else 0.0
        return (f"fixed-octree (min node {self.min_size:g}, root {size:g}, "
                f"dead leaves kept {st.LIFE_START}..{st.LIFE_MAX} cycles)")

    def _validate(self) -> None:
        if self._flat is not None:
            self._validate_flat(self._root < 0 and not self._pending
                                and self._ent_nfree == self._ents.node.shape[0],
                                "its octree holds objects")
            return
        self._check_queue()
        self._check_entry_pool()
        nd, en, root = self._nodes, self._ents, self._root
        checks = (  # in order: each relies on the links the previous ones vouched for
            lambda: ck.check_pool(nd, root, self.min_size),
            lambda: ck.check_links(nd, root),
            lambda: ck.check_lists(nd, en),
            lambda: ck.check_placement(nd, en, self._s2e, self._alive, self._centers,
                                       self._radii, self._vdist),
            lambda: ck.check_ages(nd, root),
            lambda: ck.check_ranges(nd, en),
            lambda: ck.check_bounds(nd, en),
        )
        for run in checks:
            code, where = run()
            self._raise_check(code, ck.MESSAGES, int(where))

    def _check_queue(self) -> None:
        """Every live slot is placed or pending, pending ones are queued, dead ones neither."""
        alive = self._alive
        if (self._s2e[alive] == st.NO_NODE).any():
            raise AssertionError("a live object is neither placed nor pending")
        if (self._s2e[~alive] != st.NO_NODE).any():
            raise AssertionError("a dead slot is still placed or pending")
        queued = np.zeros(self.capacity, dtype=np.bool_)
        if self._pending:
            queued[np.concatenate(self._pending)] = True
        if ((self._s2e == st.PENDING) & ~queued).any():
            raise AssertionError("an object is pending but not in the insert queue")
        if not self._changed and (self._s2e == st.PENDING).any():
            raise AssertionError("objects pending although nothing is queued")

    def _check_entry_pool(self) -> None:
        """Placed and free entries partition the entry pool."""
        used = self._ents.node >= 0
        if used.sum() + self._ent_nfree != used.shape[0]:
            raise AssertionError("entries leaked: placed + free != entry capacity")
        if used[self._ent_free[: self._ent_nfree]].any():
            raise AssertionError("a placed entry is on the entry free list")
