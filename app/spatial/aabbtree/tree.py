"""``AABBTree``: Shagam's dynamic AABB tree behind the spatial index contract.

The Python class only orchestrates whole batches; each operation is one call into the
compiled kernels: the node pool (:mod:`.pool`), the object blocks (:mod:`.blocks`), boxes
and refits (:mod:`.bounds`), splits (:mod:`.split`), a frame's batches (:mod:`.batches`),
the upkeep (:mod:`.upkeep`) and the queries (:mod:`.queries`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.geom.zpyramid import ZPyramid
from app.spatial import rows
from app.spatial.aabbtree import blocks as bl
from app.spatial.aabbtree import check as ck
from app.spatial.aabbtree import entry as en
from app.spatial.aabbtree import pairs as pr
from app.spatial.aabbtree import paper as pp
from app.spatial.aabbtree import pool as po
from app.spatial.aabbtree import queries as qu
from app.spatial.aabbtree.bounds import box_slack
from app.spatial.aabbtree.heuristics import (
    CHILDREN,
    DEFAULT_THRESHOLDS,
    PAPER_LAZY,
    mode_name,
    parse_mode,
)
from app.spatial.base import QueryResult, SpatialIndex
from app.spatial.flat_form import FlatWhileMoving
from app.spatial.object_store import ObjectStore, ids_at
from app.spatial.pairs import selection, slot_pairs_to_ids
from app.spatial.tree_pairs import SnapshotArena, TreePairSnapshot, snapshot_pairs

#: A catch-up bound no query reaches.
NEVER = np.iinfo(np.int64).max


class AABBTree(FlatWhileMoving, SpatialIndex):
    """Dynamic AABB tree with a nesting heuristic (kd, ternary, octree, icoseptree).

    ``leafy=True`` stores objects only in leaves (except where a heuristic keeps straddlers);
    ``leafy=False`` also keeps an object at an internal node when its bounding cube is at
    least 1/8 of the node's box volume. ``split_threshold`` defaults to the paper's optimum.

    ``mode="ours"`` (default) is this project's tree; ``mode="paper"`` makes the choices of
    the paper's own code (Shagam, appendix A) instead: the split point is the mean of
    ``pos + (r, r, r)``, the K-D / ternary axis goes to Z on ties, the non-leafy rule is the
    listing's ``r * 4 * pi / 3 > volume / 8``, a leaf splits at ``>= split_threshold``
    objects, and boxes follow the listing's extents bookkeeping (see :mod:`.paper`). Single
    choices can be switched for experiments: ``ours+split``, ``paper-lazy`` (parse_mode).
    Either way every query answers exactly.

    Upkeep (our mode): queries do not change the tree's shape. They note the dirty nodes and
    overfull leaves they reach, and :meth:`maintain` refits and splits those, at most
    ``upkeep_objects`` objects' worth per call; a node larger than that is split over several
    calls (``split.split_step``), so no call stalls a frame. It runs at the end of
    every ``update``, and at the start of a query once ``frame_queries`` queries have followed
    the last update: a moving scene's frames of up to that many queries (two-pass occlusion,
    a shadow view) run it once, in the update, and a scene that stopped moving still gets its
    tree, one budget per query. A big leaf beside the view (``upkeep.near_view``) counts as
    seen, so that no mover stretches one into the view unsplit. On a tree never split yet
    (just built or switched to), a frustum query whose noted overfull leaves hold more than
    ``catchup_objects`` objects (a big scene's first view) or more than ``catchup_share`` of
    its working set (a small scene's first query) runs the upkeep with ``first_budget``
    (none by default) and asks again (once): its first query builds the visible tree at
    once. Once the tree is split, a query never splits: a turn onto big leaves scans their
    blocks (a contiguous float32 scan, 0.3-0.8 ns an object) while the upkeep splits them
    over the next frames.
    The paper mode's extents bookkeeping (``PAPER_LAZY``) keeps splitting inside queries, as
    appendix A does.
    """

    name = "aabbtree"
    #: The blocks hold each object's id beside its record: the answer is read in block
    #: order (a random gather of 22,527 ids by slot took 0.055 ms of a 0.29 ms query).
    _frustum_gives_ids = True
    _pairs_structural = True
    #: With ids, one descent per given object while they are fewer than objects / this;
    #: otherwise the whole-tree descent with the ids as a filter.
    pairs_per_object_ratio = 12
    #: The upkeep's budget per call: objects of the nodes it refits or splits. A turn onto
    #: unsplit leaves keeps the upkeep at its budget every frame (a split costs 30-75 ns an
    #: object, the scan of an unsplit leaf 0.3-0.8), so the budget sets what a turning frame
    #: costs: 16,384 gave the static million's `turn` 1.6-1.9 ms frames against 1.3-1.6 at
    #: 8,192, with every other pattern and workload within noise (docs/bench-index-log.md).
    #: 4,096 since the update stopped reading the store's untouched columns: `turn` was then
    #: the worst static pattern at 8,192 and is no longer at 4,096, viewdist within noise
    #: (docs/trees-storage.md, 2026-11-28).
    upkeep_objects = 1 << 12
    #: The frame's upkeep refits a dirty node once queries have noted it this many times
    #: (in as many frames at most); until then its box, conservative, serves as it is.
    refit_patience = 4
    #: A first query (of a tree never split) noting overfull leaves of more objects than
    #: this catches up. A split tree's queries no longer do: a catch-up of 65,536 objects
    #: inside a query took 2-3 ms against a 0.7 ms query, the stalls that put the frames'
    #: p99 at up to 3x their median (bench index static 10^6, the eight trees, one run each
    #: way: largest p99 / median 1.75-3.02 -> 1.38-2.52, worst-pattern ratios within
    #: 0.04x either way).
    catchup_objects = 1 << 16
    #: ... or, while the tree was never split (a small scene's first query), more than this
    #: share of its working set (1.0: never on that account). Once it is split, only the
    #: count above asks: with the share rule a turn onto big leaves caught up at nearly every
    #: frame, where the block scan of those leaves now costs 0.3-0.8 ns an object against a
    #: split's 12-20 ns a level (bench index at 10^6, alternated twice, static worst pattern
    #: with the rule at every query / only for a fresh tree: kd/leafy 0.38-0.41 / 0.73-0.89,
    #: kd/non-leafy 0.36-0.37 / 0.81-0.86, octree/non-leafy 0.54-0.60 / 0.62-0.66,
    #: icoseptree 0.63-0.69 / 0.62-0.75, ternary 0.50-0.62 / 0.46-0.60).
    catchup_share = 0.5
    #: The budget of a catch-up (objects), where one is asked of a split tree (the paper
    #: mode's queries; ``first_budget`` for a fresh tree's).
    catchup_budget = 1 << 16
    #: ... and of a tree never split yet (a first query after a build or a switch); None: no
    #: budget, the visible tree is built at once. A budget (say 1 << 22, about 0.2 s at 10^6
    #: objects) shortens that query, but the rest then takes hundreds of frames of bounded
    #: steps, each frame scanning the big leaves left: kd/leafy's static frames went from
    #: 0.98x to 0.18x the brute force's (bench index, 10^6).
    first_budget: int | None = None
    #: Flat while everything moves (``flat=True``, our mode; :mod:`app.spatial.flat_form`,
    #: its ``flat_fraction``, ``tree_fraction`` and ``flat_min_objects``): with every object
    #: moving, every move walked the tree (20-30 ns an object at 10^5, plus the store's swap
    #: and the upkeep: 3.5 ms a frame for kd against the brute force's 0.6), for a query that
    #: then saves nothing. As ``chunks`` goes to slot order.

    def __init__(self, heuristic: str = "octree", leafy: bool = False,
                 split_threshold: int | None = None, capacity: int = 1024,
                 mode: str = "ours", flat: bool = True) -> None:
        if heuristic not in CHILDREN:
            raise ValueError(f"unknown heuristic {heuristic!r}; choose one of "
                             f"{', '.join(CHILDREN)}")
        if split_threshold is None:
            split_threshold = DEFAULT_THRESHOLDS[heuristic][0 if leafy else 1]
        if (isinstance(split_threshold, bool) or not isinstance(split_threshold, int | np.integer)
                or split_threshold < 1):
            raise ValueError(f"split_threshold must be an int >= 1, got {split_threshold!r}")
        flags = parse_mode(mode)
        super().__init__(capacity)
        self._rows = rows.no_rows()  # (see _bind_rows)
        self.heuristic = heuristic
        self.name = heuristic
        self.leafy = bool(leafy)
        self.split_threshold = int(split_threshold)
        self.flags = flags
        self.mode = mode_name(flags)
        self._lazy = bool(flags & PAPER_LAZY)
        self._rules = po.make_rules(self.leafy, self.split_threshold, flags)
        self._keep = int(self._rules.keep)
        # Flat while everything moves: our mode only (the paper's keeps appendix A's tree).
        self._init_flat(bool(flat) and not self._lazy)
        self._snapshots = SnapshotArena()  # the pairs query's arrays, kept between queries
        self._empty_structure()
        self._bind_rows()

    def _empty_structure(self) -> None:
        """A tree of one empty root, and an empty heap for the store's slots (also
        flat_form's hook: the objects go to the flat copy)."""
        self._nodes = po.new_nodes(64, CHILDREN[self.heuristic])
        root = po.allocate_node(self._nodes, np.int64(-1))
        assert root == po.ROOT
        self._pend = po.new_pending(self._nodes.parent.shape[0])
        self._objs = bl.new_objects(self.capacity)
        self._codes = np.zeros(0, np.uint8)  # the frustum scan's verdict bytes, by position
        self.last_moved = 0  # objects that changed node in the last update
        self._queries_since_update = self.frame_queries  # none yet: the first query upkeeps
        self._seen = np.zeros((0, 4))  # the last frustum query's planes (the upkeep's descent)

    # ------------------------------------------------------------------ description

    def describe(self) -> str:
        """E.g. ``icoseptree non-leafy t=50`` (``... mode=paper`` in the paper mode)."""
        out = f"{self.heuristic} {'leafy' if self.leafy else 'non-leafy'} t={self.split_threshold}"
        return out if self.mode == "ours" else f"{out} mode={self.mode}"

    # ------------------------------------------------------------------ node pool

    def _reserve_nodes(self, n: int) -> None:
        """Make sure at least ``n`` nodes are free (amortised doubling)."""
        nd = self._nodes
        if int(nd.meta[po.META_NFREE]) >= n:
            return
        cap = nd.parent.shape[0]
        need = cap - int(nd.meta[po.META_NFREE]) + n
        self._nodes = po.grow_nodes(nd, max(2 * cap, need))
        self._pend = po.grow_pending(self._pend, self._nodes.parent.shape[0])

    def _make_room(self) -> None:
        """Repack the heap with room for what a stopped kernel asked for (and its size again)."""
        ob = self._objs
        need = int(ob.meta[bl.META_NEED])
        self._objs = bl.repacked(self._nodes, ob, need)

    def _until_done(self, run, n: int) -> int:
        """Call ``run(done)`` (a batch kernel from object ``done`` on, returning how many it did
        and a count to add up) until all ``n`` are done, making the room it stopped for (free
        nodes or heap) between calls; returns the counts' sum."""
        done = 0
        total = 0
        while True:
            did, counted = run(done)
            done += did
            total += counted
            if done >= n:
                return total
            if not self._room_for(0):
                self._make_room()

    def _room_for(self, want: int) -> bool:
        """At least ``want`` free nodes, and the room a stopped kernel asked for: the heap
        repacked if it lacked positions (``bl.META_NEED``), else the node pool doubled if it
        lacked nodes (``po.META_WANT_GROW``). Returns whether a kernel had asked."""
        nd = self._nodes
        asked = bool(nd.meta[po.META_WANT_GROW] or self._objs.meta[bl.META_NEED])
        nd.meta[po.META_WANT_GROW] = 0
        if self._objs.meta[bl.META_NEED]:
            self._make_room()
        elif asked:
            want = max(want, nd.parent.shape[0])  # double
        self._reserve_nodes(want)
        return asked

    def _reserve_for_queries(self) -> None:
        """Room for the splits a query may make (a query that runs out asks for more)."""
        self._room_for(64 * self._nodes.child.shape[1])

    def _spheres(self) -> po.Spheres:
        """The store's arrays as the kernels take them (rebuilt per call: growth replaces them)."""
        return po.Spheres(self._centers, self._radii, self._vdist)

    def _plain(self) -> tuple[tuple, tuple, tuple]:
        """The pool, the objects and the store's arrays as plain tuples, as the entries of
        :mod:`.entry` take them (rebuilt per call: growth and repacks replace them)."""
        return tuple(self._nodes), tuple(self._objs), (self._centers, self._radii, self._vdist)

    def _verdict_bytes(self) -> np.ndarray:
        """The frustum scan's verdict buffer, a byte for every heap position (reused)."""
        size = self._objs.slot.shape[0]
        if self._codes.shape[0] != size:
            self._codes = np.zeros(size, np.uint8)
        return self._codes

    def _run_query(self, kernel, *args, notes: bool = False, scan: bool = False,
                   plain: bool = False):
        """Run a query kernel after the frame's upkeep if it is due; run it again after a
        catch-up, or (paper mode) after growing the pool when it skipped splits for lack of
        nodes. Every run is exact: this only shapes the tree. ``plain``: the kernel is an
        entry of :mod:`.entry`, which takes the pools as plain tuples."""
        if self._queries_since_update >= self.frame_queries:
            self.maintain(self.upkeep_objects, self.refit_patience)
        self._queries_since_update += 1
        while True:
            self._reserve_for_queries()
            pend = tuple(self._pend) if plain else self._pend
            extra = (pend,) if notes else ()  # (the pairs kernels still split themselves)
            if scan:  # after the upkeep and any repack: the heap is final now
                extra += (self._verdict_bytes(),)
            pools = self._plain() if plain else (self._nodes, self._objs, self._spheres())
            out = kernel(*pools, *args, *extra)
            meta = self._nodes.meta
            if meta[po.META_CATCHUP] == po.CATCHUP_ASKED:
                # One bigger upkeep step, then the query again, which asks no more this time;
                # a tree never split yet (just built or switched to) is built at once.
                fresh = not self._nodes.is_split[po.ROOT]
                self.maintain(self.first_budget if fresh else self.catchup_budget)
                self._nodes.meta[po.META_CATCHUP] = po.CATCHUP_DONE
                continue
            if not meta[po.META_WANT_GROW]:
                meta[po.META_CATCHUP] = 0
                return out

    def maintain(self, budget: int | None = None, patience: int = 1) -> int:
        """Refit and split the nodes queries noted, up to ``budget`` objects (all if None);
        returns the objects spent. Never changes an answer, only the tree's shape.
        ``patience``: a dirty node is refitted once queries have noted it that many times
        (1: at once; the frame's upkeep passes :attr:`refit_patience`)."""
        if self._flat is not None:
            return 0  # (the tree is empty while flat)
        limit = np.iinfo(np.int64).max if budget is None else int(budget)
        spent = 0
        while int(self._pend.count[0]) > 0 and spent < limit:
            # Room for one split (k nodes); the kernel stops with META_WANT_GROW when a split
            # finds fewer free, and this loop doubles the pool. Reserving a split's worth for
            # every pending node doubled pools that were a third used (an icoseptree of 10^6
            # after a turn: 469 pending x 27 nodes against 15,000 live of 27,664), a 4 ms
            # stall of page faults in a frame.
            self._room_for(self._nodes.child.shape[1] + 1)
            spent += int(en.maintain(*self._plain(), self._rules, limit - spent, self._seen,
                                     tuple(self._pend), min(max(int(patience), 1), 255)))
            if not self._nodes.meta[po.META_WANT_GROW]:
                break
        return spent

    # ------------------------------------------------------------------ hooks

    def _bind_rows(self) -> None:
        """The store's row of a slot and the slot's node and position in one line
        (:mod:`app.spatial.rows`), unless they are already. 10^4 fresh movers of 10^6
        (`churn100`): the update 0.56-0.64 -> 0.33-0.39 ms with the centres alone in the row,
        static and viewdist, octree/leafy and kd/leafy; 10^3 spawns and removals a frame
        with the whole store row: 0.55 -> 0.51-0.52 (docs/trees-storage.md)."""
        if rows.is_bound(self._rows, self._slot_columns(), self._objs.node):
            return
        self._rows, columns, node, pos = rows.bind(self._slot_columns(), self._objs.node,
                                                   self._objs.pos)
        self._set_slot_columns(columns)
        self._objs = self._objs._replace(node=node, pos=pos)

    def _grow_structure(self, new_capacity: int) -> None:
        self._objs = bl.grow_slots(self._objs, new_capacity)
        if self._flat is None:
            self._bind_rows()

    def _insert_in_structure(self, slots: np.ndarray) -> None:
        nd = self._nodes
        if not nd.is_split[po.ROOT] and slots.shape[0] > 1:
            # Every object lands at the root (a build): its block takes them all at once.
            total = int(nd.count[po.ROOT]) + slots.shape[0]
            while not bl.reserve_block(nd, self._objs, po.ROOT, total):
                self._make_room()
        if self._lazy:
            def insert(done: int) -> tuple[int, int]:
                return int(pp.paper_insert_objects(self._nodes, self._objs, self._spheres(),
                                                   slots[done:], self._ids, self._keep)), 0
        else:
            def insert(done: int) -> tuple[int, int]:
                return int(en.insert_objects(*self._plain(), slots[done:], self._ids,
                                             self._keep)), 0
        self._until_done(insert, slots.shape[0])

    def _move_in_structure(self, slots: np.ndarray, centers: np.ndarray,
                           radii: np.ndarray | None, vd: np.ndarray | None) -> None:
        """Our mode's tree moves a checked batch and writes the store in one pass
        (``batches.update_objects``); the paper mode swaps the store's rows first and then
        moves from the old spheres (:meth:`_on_update`), as appendix A's ``UpdateNode``."""
        if self._lazy:
            ObjectStore._apply_update(self, slots, centers, radii, vd)
            return
        centers = np.ascontiguousarray(centers)

        def run(done: int) -> tuple[int, int]:
            did, moved = en.update_objects(*self._plain(), slots[done:], centers[done:],
                                           None if radii is None else radii[done:],
                                           None if vd is None else vd[done:], self._keep)
            return int(did), int(moved)

        self._moved(self._until_done(run, slots.shape[0]))

    def _on_update(self, slots: np.ndarray, old_centers: np.ndarray, old_radii: np.ndarray,
                   old_vdist: np.ndarray) -> None:
        """After the store's swap (see :meth:`_apply_update`): the flat copy's rows, or the
        paper mode's ``UpdateNode`` with the old spheres."""
        if self._flat is not None:
            self._flat.copied(self, slots)
            return
        old_centers = np.ascontiguousarray(old_centers)

        def run(done: int) -> tuple[int, int]:
            old = po.Spheres(old_centers[done:], old_radii[done:], old_vdist[done:])
            did, moved = pp.paper_update_objects(self._nodes, self._objs, self._spheres(),
                                                 slots[done:], old, self._keep)
            return int(did), int(moved)

        self._moved(self._until_done(run, slots.shape[0]))

    def _moved(self, changed_node: int) -> None:
        """After a batch's moves: the count of objects that changed node, the frame's upkeep."""
        self.last_moved = changed_node
        # After the moves, not before: the store already holds the new spheres, and a refit
        # on them before the tree has placed them could leave a parent's box short of them.
        self.maintain(self.upkeep_objects, self.refit_patience)
        self._queries_since_update = 0

    def _remove_from_structure(self, slots: np.ndarray) -> None:
        en.remove_objects(*self._plain(), slots, self._rules)

    # ------------------------------------------------------------------ queries

    def _query_frustum(self, planes: np.ndarray, eye: np.ndarray, use_vd: bool,
                       occlusion: ZPyramid | None) -> QueryResult:
        if self._still_flat():
            res = self._flat.query_frustum(self, planes, eye, use_vd, occlusion)
            res.visible = ids_at(self._ids, res.visible)  # (the flat copy answers in slots)
            return res
        if self._count == 0:
            self._nodes.outcome[:] = 0
            return QueryResult(visible=np.zeros(0, np.int64), working_set=0, nodes_visited=0)
        self._seen = planes.copy()
        # Only a tree never split catches up inside a query (see catchup_objects).
        fresh = not self._nodes.is_split[po.ROOT]
        share = self.catchup_share if fresh else 1.0
        catch = self.catchup_objects if fresh else NEVER
        if occlusion is None:
            out = self._run_query(en.query_frustum, planes, eye, use_vd, self._rules,
                                  catch, share, notes=True, scan=True, plain=True)
        else:
            out = self._run_query(en.query_frustum_occluded, planes, eye, use_vd,
                                  occlusion.occluder(), self._rules, catch, share,
                                  notes=True, scan=True, plain=True)
        ids, working, visited, occ_nodes, occ_objects, far = out
        return QueryResult(visible=ids, working_set=int(working), nodes_visited=int(visited),
                           occluded_nodes=int(occ_nodes), occluded_objects=int(occ_objects),
                           culled_distance=int(far))

    def _query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if self._still_flat():
            return self._flat.query_box(self, lo, hi)
        if self._count == 0:
            return np.zeros(0, np.int64)
        return self._run_query(qu.query_box, lo, hi, self._rules, self._count, notes=True)

    def _query_sphere(self, center: np.ndarray, radius: float) -> np.ndarray:
        if self._still_flat():
            return self._flat.query_sphere(self, center, radius)
        if self._count == 0:
            return np.zeros(0, np.int64)
        return self._run_query(qu.query_sphere, center, radius, self._rules, self._count,
                               notes=True)

    def _query_ray(self, origin: np.ndarray, direction: np.ndarray) -> tuple[np.ndarray,
                                                                            np.ndarray]:
        if self._still_flat():
            return self._flat.query_ray(self, origin, direction)
        if self._count == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        return self._run_query(qu.query_ray, origin, direction, self._rules, self._count,
                               notes=True)

    def _pair_ids(self, slots: np.ndarray | None, margin: float) -> np.ndarray:
        """Self-collision descent of the tree (all pairs), or one descent per given object;
        while flat, the sort-and-sweep. Id pairs, the smaller first: the descent on both
        cores writes ids while it joins its threads' outputs."""
        if self._still_flat():
            return slot_pairs_to_ids(self._flat.pairs(self, slots, margin), self._ids)
        if slots is not None:
            slots = np.unique(slots)
            if slots.shape[0] * self.pairs_per_object_ratio < self._count:
                found = self._run_query(pr.pairs_of_slots, self._rules, slots,
                                        selection(self.capacity, slots), margin)
                return slot_pairs_to_ids(found, self._ids)
        sel = selection(self.capacity, slots)
        return snapshot_pairs(self._snapshot(sel), margin, sel, self._snapshots, self._ids)

    def _snapshot(self, sel: np.ndarray) -> TreePairSnapshot:
        """The tree packed for the pair descent (``pr.build_snapshot``, as a query: the frame's
        upkeep first), in this index's kept arrays sized for the node pool each run is given
        (a run that grows the pool runs again)."""
        def build(nd, ob, sp, rules, sel, total):
            mem = self._snapshots.memory(nd.parent.shape[0], total)
            return pr.build_snapshot(nd, ob, sp, rules, sel, total, mem)

        return self._run_query(build, self._rules, sel, self._count)

    # ------------------------------------------------------------------ inspection

    def _live_nodes(self) -> np.ndarray:
        return np.flatnonzero(self._nodes.depth >= 0)

    def _shown_nodes(self) -> np.ndarray:
        """The live nodes that node_boxes and node_outcomes report (empty root excluded)."""
        live = self._live_nodes()
        if self._count == 0 or self._flat is not None:
            live = live[live != po.ROOT]
        return live

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, depth) of the live nodes, in node-pool order (empty root excluded)."""
        live = self._shown_nodes()
        nd = self._nodes
        return nd.lo[live].copy(), nd.hi[live].copy(), nd.depth[live].astype(np.int64)

    def node_outcomes(self) -> np.ndarray:
        """Outcome codes (geometry.NODE_*) of the last frustum query, aligned with node_boxes."""
        return self._nodes.outcome[self._shown_nodes()].copy()

    def stats(self) -> dict[str, Any]:
        """Nodes, depth, objects per level, leaves, split and dirty nodes, pool use."""
        nd = self._nodes
        live = self._live_nodes()
        depth = nd.depth[live]
        max_depth = int(depth.max()) if live.shape[0] else 0
        per_level = np.bincount(depth, weights=nd.count[live], minlength=max_depth + 1)
        leaves = int((nd.nchild[live] == 0).sum())
        split = int(nd.is_split[live].sum())
        return {
            "objects": self._count,
            "nodes": int(live.shape[0]),
            "max_depth": max_depth,
            "objects_per_level": [int(x) for x in per_level],
            "leaves": leaves,
            "split_nodes": split,
            "stuck_split_nodes": int((nd.is_split[live] & (nd.nchild[live] == 0)).sum()),
            "dirty_nodes": int(nd.dirty[live].sum()),
            "pending_nodes": int(self._pend.count[0]),
            "objects_per_leaf": float(nd.count[live][nd.nchild[live] == 0].mean())
            if leaves else 0.0,
            "node_capacity": int(nd.parent.shape[0]),
            "heap_used": int(self._objs.meta[bl.META_TOP]),
            "heap_size": int(self._objs.slot.shape[0]),
            "heuristic": self.heuristic,
            "leafy": self.leafy,
            "split_threshold": self.split_threshold,
            "mode": self.mode,
            "flat": self._flat is not None,
        }

    def _validate(self) -> None:
        if self._flat is not None:
            nd = self._nodes
            self._validate_flat(not (int(nd.count[po.ROOT]) or nd.is_split[po.ROOT]
                                     or int(self._objs.meta[bl.META_TOP])),
                                "its tree holds objects")
            return
        if not rows.is_bound(self._rows, self._slot_columns(), self._objs.node):
            raise AssertionError(f"{self.describe()}: the store's columns and the slots' "
                                 "places are not one row")
        nd, ob, sp = self._nodes, self._objs, self._spheres()
        checks = (  # in order: each relies on the links and lists the previous ones vouched for
            lambda: ck.check_pool(nd),
            lambda: ck.check_pending(nd, self._pend),
            lambda: ck.check_root(nd),
            lambda: ck.check_links(nd),
            lambda: ck.check_blocks(nd, ob, sp, self._alive, self._ids),
            lambda: ck.check_boxes(nd, ob, sp, box_slack(self.flags)),
            lambda: ck.check_view_distances(nd, ob, sp),
        )
        if self._lazy:
            checks += (lambda: pp.check_paper_boxes(nd),)
        for run in checks:
            code, where = run()
            self._raise_check(code, ck.MESSAGES, int(where))
