"""``ViewDistanceTree``: Matthews' view distance tree behind the spatial index contract.

The Python class only orchestrates whole batches; each operation is one call into the
compiled kernels of :mod:`.update` and :mod:`.queries` (plus pool growth between calls).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from app.geom.zpyramid import ZPyramid, occluder
from app.spatial.base import QueryResult, SpatialIndex
from app.spatial.flat_form import FlatWhileMoving
from app.spatial.pairs import selection, slot_pairs_to_ids
from app.spatial.pool import slots_end
from app.spatial.scan import (
    SCAN_PARALLEL_MIN,
    grown32,
    kill32,
    mismatch32,
    scan_frustum,
    spheres32,
    store32,
)
from app.spatial.sieve import region_rows
from app.spatial.tree_pairs import SnapshotArena, TreePairSnapshot, snapshot_pairs
from app.spatial.viewdist_tree import check as ck
from app.spatial.viewdist_tree import pairs as pr
from app.spatial.viewdist_tree import queries as qu
from app.spatial.viewdist_tree import update as up
from app.spatial.viewdist_tree.heap import growth_rows, has_room
from app.spatial.viewdist_tree.refit import refit_step
from app.spatial.viewdist_tree.store import (
    IN_INF,
    Spheres,
    grown_nodes,
    grown_objects,
    grown_packed,
    new_nodes,
    new_objects,
    new_packed,
    new_tree,
    pow2_at_least,
)

#: The float32 copy a move batch writes while the infinite list's is not kept: none.
_NO_COPY = spheres32(0)


class ViewDistanceTree(FlatWhileMoving, SpatialIndex):
    """Matthews' variable-radius sphere octree over the objects' view spheres."""

    name = "viewdist"
    _reads_old_values = False  # a move re-places from the store's new values only
    #: After each batch, the nodes whose bounds a move or a removal may have left loose are
    #: refitted, oldest first, for max(refit_min, refit_per_change * batch) rows (``.refit``):
    #: the work a whole refit did every 2 * objects changes, a little each batch. Doing it in
    #: the mutation keeps the cost out of the cull.
    refit_min = 512
    refit_per_change = 0.5
    #: An insert batch of more than this share of the objects (a first load) links its
    #: objects without rows and is followed by a rebuild: fresh blocks in pool order and
    #: exact bounds, in one pass proportionate to the batch.
    rebuild_share = 0.25
    _pairs_structural = True
    #: With ids, one descent per given object while len(ids) * (this + infinite list / 64)
    #: stays below the object count; otherwise the whole-tree descent with the ids as a filter.
    pairs_per_object_ratio = 20
    #: The infinite list (objects without a finite view distance: all of them in a scene
    #: without view distances) is decided from a float32 copy by slot, scanned branch-free as
    #: the brute force scans, once it holds at least this share of the slots; below, its
    #: linked list is walked with a float64 test an object (about 15 ns an object against the
    #: scan's 0.6-0.8 ns a slot). Static workload at 10^6, where the list is every object:
    #: the query 14.6 ms walked. The copy is kept only while it is scanned (it is rebuilt
    #: from the list when a query wants it again, and dropped when the list falls below half
    #: the share): kept always, it cost the view distance workload's frames (10^4 movers
    #: among 10^6, none in the list) a tenth more.
    scan_infinite_share = 1.0 / 16.0
    #: Flat while everything moves (:mod:`app.spatial.flat_form`): with every object moving
    #: each frame, the moves cost 12-15 ns an object at 10^5 (bench index, `moving`: the frame
    #: 0.18-0.35x the brute force's) and 35 ns in the demo (its update 0.85 ms against the
    #: brute force's 0.14). But not while pairs are asked: the tree's pair descent is 1.2-4.7x
    #: faster than the flat copy's sort-and-sweep (bench pairs, every object moving), so a
    #: pairs query builds the tree again and keeps it for this many update batches.
    pairs_keep_batches = 4

    def __init__(self, min_node_size: float = 1.0 / 16.0, tight: bool = True, flat: bool = True,
                 **kwargs: Any) -> None:
        if kwargs.get("leafy") not in (None, False) or kwargs.get("split_threshold") is not None:
            raise ValueError("viewdist has no heuristic: leafy and split_threshold do not apply")
        unknown = set(kwargs) - {"leafy", "split_threshold"}
        if unknown:
            raise ValueError(f"viewdist: unknown arguments {sorted(unknown)}")
        if not (min_node_size > 0 and math.isfinite(min_node_size)):
            raise ValueError(f"viewdist: min_node_size must be > 0, got {min_node_size}")
        super().__init__()
        self._tight = bool(tight)
        self._emin = pow2_at_least(float(min_node_size))
        self._snapshots = SnapshotArena()  # the pairs query's arrays, kept between queries
        self._init_flat(flat)
        self._batches_since_pairs = self.pairs_keep_batches + 1  # (no pairs query yet)
        self._empty_structure()

    def _empty_structure(self) -> None:
        """An empty tree and pools, and no infinite list (also flat_form's hook)."""
        self._tree = new_tree(self._emin)
        self._nodes = grown_nodes(new_nodes(), self._tree, 256)
        self._objs = new_objects(self.capacity)
        self._packed = new_packed(0)
        # The infinite list's float32 copy by slot: an object in a node, or no object, is a
        # dead row. Its bounds only grow (they bound the scan's float32 tolerances).
        self._inf32 = spheres32(self.capacity)
        self._inf_codes = np.empty(self.capacity, np.uint8)
        self._inf_abs = 0.0
        self._inf_r = 0.0
        self._inf_kept = False  # whether the copy follows the batches (see the share)
        self._rows = 0  # slots ever used: the scan's length

    def _structure_wanted(self) -> bool:
        """(flat_form's hook) Pairs were asked within the last ``pairs_keep_batches``
        update batches: the tree answers them faster than a sweep."""
        self._batches_since_pairs += 1
        return self._batches_since_pairs <= self.pairs_keep_batches

    # ------------------------------------------------------------ public extras

    @property
    def min_node_size(self) -> float:
        """Edge length of the finest nodes (a power of two)."""
        return math.ldexp(1.0, self._scalar("emin"))

    def describe(self) -> str:
        """Index name and finest node size."""
        return f"viewdist (finest node {self.min_node_size:g})"

    def stats(self) -> dict[str, Any]:
        """Nodes, depth, objects per level, root size and the infinite list's length."""
        nd = self._nodes
        live = self._live_nodes()
        st = super().stats()
        st["nodes"] = int(live.shape[0])
        root = self._scalar("root")
        if root == -1:
            return st | {"infinite": self._scalar("inf_count"), "root_size": 0.0,
                         "flat": self._flat is not None}
        levels = nd.level[live]
        root_level = int(nd.level[root])
        st["max_depth"] = int(root_level - levels.min())
        per_level = np.bincount(root_level - levels, weights=nd.count[live])
        st["objects_per_depth"] = [int(x) for x in per_level]
        st["infinite"] = self._scalar("inf_count")
        st["root_size"] = float(nd.size[root])
        st["refit_queue"] = self._scalar("qlen")
        st["packed_rows"] = self._scalar("pend") - self._scalar("pfree")
        return st | {"flat": False}

    def node_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node cubes (the structural cells, not the loose bounds) and their depth."""
        nd = self._nodes
        live = self._live_nodes()
        lo = nd.lo[live].copy()
        hi = lo + nd.size[live][:, None]
        root = self._scalar("root")
        depth = (nd.level[root] - nd.level[live]) if root != -1 else \
            np.zeros(0, dtype=np.int64)
        return lo, hi, depth.astype(np.int64)

    def node_outcomes(self) -> np.ndarray:
        """Outcome of each node of :meth:`node_boxes` in the last frustum query."""
        return self._nodes.outcome[self._live_nodes()].copy()

    def rebuild(self) -> None:
        """Refit every node's bounds exactly and lay its objects out in fresh blocks (one
        compiled pass)."""
        rows, largest = up.rebuilt_rows(self._nodes)
        room = self._packed_room(rows, largest)
        ahead = rows + rows // 4
        # Kept only with room for the batches that follow (else the first of them grew it:
        # 291 ms for the remote workload's 2.7 million rows).
        if not ahead + growth_rows(largest) <= self._packed.slot.shape[0] <= 2 * room:
            # The blocks, and a quarter more written now: the first frames after a load hand
            # out blocks from the end, where each fresh page would fault inside a frame.
            self._packed = new_packed(room, ahead)
            for a in self._packed[:4]:
                a[rows:ahead] = 0
        up.rebuild(self._nodes, self._objs, self._packed, self._tree, self._spheres())

    # ------------------------------------------------------------ mutation hooks

    def _insert_in_structure(self, slots: np.ndarray) -> None:
        if self._scalar("root") == -1:
            self._choose_root(slots)
        before = self._scalar("in_nodes")
        bulk = slots.shape[0] > self.rebuild_share * (before + slots.shape[0])
        self._run_batch(up.insert_batch, slots, not bulk)
        self._rows = max(self._rows, int(slots_end(slots)))
        self._copy_infinite(slots)
        if bulk and self._scalar("in_nodes") > before:
            self.rebuild()  # the batch's objects in nodes have no rows yet
        else:
            self._refit(slots.shape[0])

    def _move_in_structure(self, slots: np.ndarray, centers: np.ndarray,
                           radii: np.ndarray | None, vd: np.ndarray | None) -> None:
        """The tree's moves, writing the store as they go (``update.move_batch``), and the
        infinite list's float32 copy too, a centre only unless the batch carried radii or
        view distances."""
        out = np.array([self._inf_abs, self._inf_r])
        self._run_batch(up.move_batch, slots, np.ascontiguousarray(centers), radii, vd,
                        self._inf32 if self._inf_kept else _NO_COPY, out)
        self._inf_abs, self._inf_r = float(out[0]), float(out[1])
        self._refit(slots.shape[0])

    def _remove_from_structure(self, slots: np.ndarray) -> None:
        up.remove_batch(self._nodes, self._objs, self._packed, self._tree, slots)
        if self._inf_kept:
            kill32(self._inf32, slots)
        self._refit(slots.shape[0])

    def _grow_structure(self, new_capacity: int) -> None:
        self._objs = grown_objects(self._objs, new_capacity)
        self._inf32 = grown32(self._inf32, new_capacity)
        self._inf_codes = np.empty(new_capacity, np.uint8)

    def _copy_infinite(self, slots: np.ndarray) -> None:
        """The float32 rows of a batch's slots: their spheres for those in the infinite list,
        dead for the others (a move may take an object in or out of the list)."""
        if not self._inf_kept:
            return
        inf = self._objs.node[slots] == IN_INF
        if inf.all():
            kept = slots
        else:
            kill32(self._inf32, slots[~inf])
            kept = slots[inf]
        if kept.shape[0]:
            big, rad = store32(self._inf32, kept, self._centers, self._radii, self._vdist,
                               kept)
            self._inf_abs = max(self._inf_abs, float(big))
            self._inf_r = max(self._inf_r, float(rad))

    # ------------------------------------------------------------ internals

    def _scalar(self, name: str) -> int:
        """One of the tree's scalars (root, nfree, counts...)."""
        return int(self._tree[name][0])

    def _spheres(self) -> Spheres:
        """The store's arrays as the kernels take them (the base class may reallocate them)."""
        return Spheres(self._centers, self._radii, self._vdist)

    def _live_nodes(self) -> np.ndarray:
        """Indices of the allocated nodes, in pool order."""
        return np.flatnonzero(self._nodes.size > 0.0)

    def _run_batch(self, kernel, slots: np.ndarray, *args: Any) -> None:
        """Run a compiled batch (``args``: the kernel's arguments after the first slot to
        do), growing the packed copy or the node pool whenever it stops for room."""
        done = 0
        sp = self._spheres()
        while done < slots.shape[0]:
            done = kernel(self._nodes, self._objs, self._packed, self._tree, sp, slots, done,
                          *args)
            if done == slots.shape[0]:
                break
            if not has_room(self._packed, self._tree):
                used = self._scalar("pend")
                self._packed = grown_packed(self._packed, used,
                                            self._packed_room(used, self._scalar("pmax")))
            else:
                self._grow_nodes(2 * self._nodes.size.shape[0] + 4096)

    def _packed_room(self, rows: int, largest: int) -> int:
        """Rows to allocate for a packed copy with ``rows`` in blocks, the largest of
        ``largest`` rows: as much again to grow into (pages are mapped as they are written)."""
        return 2 * rows + 2 * growth_rows(largest) + 4096

    def _refit(self, changes: int) -> None:
        """Work through the refit queue for a budget that follows the batch's size."""
        if self._scalar("qlen"):
            budget = max(self.refit_min, int(self.refit_per_change * changes))
            refit_step(self._nodes, self._packed, self._tree, budget)

    def _grow_nodes(self, capacity: int) -> None:
        self._nodes = grown_nodes(self._nodes, self._tree, capacity)

    def _choose_root(self, slots: np.ndarray) -> None:
        """Root cube for an empty tree, sized from the batch so it need not grow at once."""
        count, cmin, cmax, vmax = up.batch_bounds(slots, self._centers, self._vdist)
        if count == 0:
            return
        m = self.min_node_size
        lo = np.floor(cmin / m) * m
        need = max(float((cmax - lo).max()), 2.0 * float(vmax), m)
        level = pow2_at_least(need)
        while (lo + math.ldexp(1.0, level) < cmax).any():
            level += 1
        if self._scalar("nfree") < 1:
            self._grow_nodes(self._nodes.size.shape[0] + 1)
        up.new_root(self._nodes, self._tree, lo[0], lo[1], lo[2], level)

    # ------------------------------------------------------------ queries

    def _query_frustum(self, planes: np.ndarray, eye: np.ndarray, use_vd: bool,
                       occlusion: ZPyramid | None) -> QueryResult:
        if self._still_flat():
            return self._flat.query_frustum(self, planes, eye, use_vd, occlusion)  # (slots)
        occ = occluder(occlusion)
        n_inf = self._scalar("inf_count")
        scan_inf = n_inf > 0 and n_inf >= self.scan_infinite_share * self._rows
        if scan_inf and not self._inf_kept:
            self._inf_kept = True
            live = np.flatnonzero(self._objs.node[: self._rows] == IN_INF)
            self._inf32 = spheres32(self._inf32.r.shape[0])  # every row dead
            self._copy_infinite(live)
        elif self._inf_kept and n_inf < 0.5 * self.scan_infinite_share * self._rows:
            self._inf_kept = False  # (rebuilt when wanted again)
        if use_vd:
            slots, considered, visited, occ_n, occ_o, far = qu.query_eye(
                self._nodes, self._objs, self._packed, self._tree, self._spheres(), planes, eye,
                self._tight, occ, not scan_inf)
        else:
            slots, considered, visited, occ_n, occ_o, far = qu.query_planes(
                self._nodes, self._objs, self._packed, self._tree, self._spheres(), planes, eye,
                occ, not scan_inf)
        if scan_inf:
            n = self._rows
            drawn, occluded, outside = scan_frustum(
                self._inf32, n, planes, eye, use_vd, self._inf_abs, self._inf_r, self._centers,
                self._radii, self._vdist, occ, parallel=n >= SCAN_PARALLEL_MIN,
                codes=self._inf_codes, dead=n - n_inf)
            slots = np.concatenate([drawn, slots])
            considered += n_inf
            occ_o += occluded
            if use_vd:  # the list's view-distance culls: what neither test took
                far += n_inf - drawn.shape[0] - occluded - outside
        return QueryResult(visible=slots, working_set=int(considered),
                           nodes_visited=int(visited), occluded_nodes=int(occ_n),
                           occluded_objects=int(occ_o), culled_distance=int(far))

    def _region(self, kind: int, q: np.ndarray, qr: float) -> tuple[np.ndarray, np.ndarray]:
        if self._still_flat():
            if kind == qu.BOX:
                return self._flat.query_box(self, q[0], q[1]), np.zeros(0)
            if kind == qu.SPHERE:
                return self._flat.query_sphere(self, q[0], qr), np.zeros(0)
            return self._flat.query_ray(self, q[0], q[1])
        slots, ts = qu.query_region(self._nodes, self._objs, self._packed, self._tree,
                                    self._spheres(), kind, q, qr, not self._inf_kept)
        if not self._inf_kept:
            return slots, ts
        # The unbounded list's float32 copy (kept while it is a large share, as the frustum
        # query's scan): sieved row by row instead of its linked list walked object by object.
        qa, qb = (q[0], q[1]) if kind != qu.SPHERE else (q[0], q[0])
        inf_slots, inf_ts = region_rows(self._inf32, self._rows, self._inf_codes,
                                        self._centers, self._radii, kind, qa, qb, qr)
        return np.concatenate([inf_slots, slots]), np.concatenate([inf_ts, ts])

    def _query_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        q = np.zeros((3, 3))
        q[0] = lo
        q[1] = hi
        return self._region(qu.BOX, q, 0.0)[0]

    def _query_sphere(self, center: np.ndarray, radius: float) -> np.ndarray:
        q = np.zeros((3, 3))
        q[0] = center
        return self._region(qu.SPHERE, q, float(radius))[0]

    def _query_ray(self, origin: np.ndarray,
                   direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = np.zeros((3, 3))
        q[0] = origin
        q[1] = direction
        with np.errstate(divide="ignore"):
            q[2] = np.where(direction == 0.0, np.inf, 1.0 / np.where(direction == 0.0, 1.0,
                                                                     direction))
        return self._region(qu.RAY, q, 0.0)

    def _pair_ids(self, slots: np.ndarray | None, margin: float) -> np.ndarray:
        """Node-against-node descent of the tree (all pairs), or one descent per given
        object. Id pairs, the smaller first: the descent on both cores writes ids while it
        joins its threads' outputs."""
        self._batches_since_pairs = 0  # (the tree stays while pairs are asked)
        if self._flat is not None:
            self._go_structure()
        args = (self._nodes, self._objs, self._packed, self._tree, self._spheres())
        if slots is not None:
            slots = np.unique(slots)
            per_object = self.pairs_per_object_ratio + self._scalar("inf_count") / 64
            if slots.shape[0] * per_object < self._count:
                found = pr.pairs_of_slots(*args, slots, selection(self.capacity, slots), margin)
                return slot_pairs_to_ids(found, self._ids)
        sel = selection(self.capacity, slots)
        return snapshot_pairs(self._snapshot(sel), margin, sel, self._snapshots, self._ids)

    def _snapshot(self, sel: np.ndarray) -> TreePairSnapshot:
        """The tree packed for the pair descent (``pr.build_snapshot``), in this index's kept
        arrays."""
        mem = self._snapshots.memory(self._scalar("nlive") + 1,
                                     self._scalar("in_nodes") + self._scalar("inf_count"))
        return pr.build_snapshot(self._nodes, self._objs, self._packed, self._tree,
                                 self._spheres(), sel, mem)

    # ------------------------------------------------------------ validation

    def _validate(self) -> None:
        if self._flat is not None:
            self._validate_flat(self._scalar("root") == -1 and not self._scalar("inf_count"),
                                "its tree holds objects")
            return
        nd, ob, pk, tree, sp = self._nodes, self._objs, self._packed, self._tree, self._spheres()
        checks = (lambda: ck.check_pool(nd, tree), lambda: ck.check_links(nd, tree),
                  lambda: ck.check_blocks(nd, pk, tree),
                  lambda: ck.check_lists(nd, ob, pk, tree, sp, self._alive),
                  lambda: ck.check_bounds(nd, ob, tree, sp))
        for check in checks:  # in order: each trusts what the previous ones checked
            code, where = check()
            self._raise_check(code, ck.MESSAGES, int(where))
        self._check_infinite_copy()

    def _check_infinite_copy(self) -> None:
        """While kept, the infinite list's float32 copy holds the sphere of every object in
        the list (as ``store32`` writes it) and a dead row for every other slot below the
        scanned rows; its tolerances bound what it holds."""
        if not self._inf_kept:
            return
        rows = np.arange(self._rows)
        inf = (self._objs.node[: self._rows] == IN_INF) & self._alive[: self._rows]
        wrong = mismatch32(self._inf32, rows[inf], rows[~inf], self._centers, self._radii,
                           self._vdist)
        if wrong:
            raise AssertionError(f"the infinite list's float32 copy (rows outside the list "
                                 f"dead): {wrong}")
        c, r = self._centers[rows[inf]], self._radii[rows[inf]]
        if inf.any() and (np.abs(c).max() > self._inf_abs or r.max() > self._inf_r):
            raise AssertionError("the infinite copy's tolerances miss what it holds")
