"""``NestedIndex``: a tree of groups with rigid transforms, each group an index of its own.

Shagam 2.2.2 and figure 2.5, as design.md's contract "Hierarchical scenes": a group that
turns changes one transform, never its objects. This class is the facade: the contract's
calls, the query's orchestration and validate, over two parts that keep the state, the group
tree (``tree.py``: ids, parents, transforms, world matrices, each group's inner index) and the
object arena (``arena.py``: rows, id map, blocks, moves), which share one compiled record of
their arrays (``state.py``). The work is compiled (``groups.py`` the transforms,
``bounds.py`` the bounds, ``store.py`` the rows, ``update.py`` inserts, removals and moves,
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
from app.spatial.checks import check_batch, check_ids, check_point, lossless_batch, name_ids
from app.spatial.nested.arena import ObjectArena, check_limits
from app.spatial.nested.bounds import refresh_bounds, refresh_bounds_some, tighten
from app.spatial.nested.boxes import NodeBoxCache, group_box_corners
from app.spatial.nested.check import MESSAGES, check_world
from app.spatial.nested.local import local_frame, settle_candidates
from app.spatial.nested.occlude import check_occlusion, occlude_visible
from app.spatial.nested.query import INNER_ACT, query_hot, world_spheres_of
from app.spatial.nested.state import StateRecord
from app.spatial.nested.tree import GroupTree, as_matrices

#: Default ``inner_min``: a partly visible group with at least this many objects is asked
#: through its own index, a smaller one is scanned inside the descent. Measured (docs/nested.md):
#: a group cut by the frustum, 0.3-4 % of it visible: the scan wins below ~64k objects against
#: ``chunks``, below ~256k against the trees.
INNER_MIN = 65536
_NEVER = np.iinfo(np.int64).max

_EMPTY_F = np.zeros(0)
_ZERO3 = np.zeros(3)  # the default eye (read only)


class NestedIndex:
    """Groups with rigid transforms in a tree, each an index of kind ``kind`` over its objects
    in local coordinates; queries in world space (design.md, "Hierarchical scenes").

    A facade over two parts that share one compiled record (state.py): the group tree
    (``tree.GroupTree``: ids, parents, transforms, world matrices, inner indexes) and the
    object arena (``arena.ObjectArena``: rows, id map, blocks, moves)."""

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
        self._record = StateRecord()
        self._tree = GroupTree(self._record)
        self._arena = ObjectArena(self._tree.G, self._record)
        self._record.tree = self._tree
        self._record.arena = self._arena
        self._node_box_cache: NodeBoxCache | None = None

    @property
    def _G(self) -> Any:  # noqa: N802 (the name the viewer reads)
        """The group table (``app/viewer/nested_view.py`` reads its block sizes)."""
        return self._tree.G

    @property
    def _slot(self) -> dict[int | str, int]:
        """Group id -> slot (``app/viewer/nested_view.py`` reads it)."""
        return self._tree.slot

    # ------------------------------------------------------------------ groups

    def __len__(self) -> int:
        return self._arena.count

    def describe(self) -> str:
        """One line for HUDs and logs: the inner kind and the group count."""
        return f"nested[{self._inner_desc}] ({len(self._tree.slot)} groups)"

    def groups(self) -> list[int | str]:
        """The group ids, each before its subgroups."""
        t = self._tree
        t.ensure_order()
        return [t.keys[g] for g in t.order.tolist()]

    def add_group(self, gid: Any, parent: Any = None, transform: Any = None) -> None:
        """A new group under ``parent`` (None: the world) with transform ``M`` (4, 4), local ->
        parent (None: the identity)."""
        self._tree.add(gid, parent, transform, self._make)

    def set_transform(self, gid: Any, transform: Any) -> None:
        """New transform (4, 4), local -> parent, of one group."""
        self._tree.set_transforms([gid], as_matrices(transform, 1, "set_transform"))

    def set_transforms(self, gids: Any, transforms: Any) -> None:
        """New transforms (K, 4, 4) of K distinct groups in one batch (one check, one refresh
        of the world matrices): what a frame with many turning groups calls."""
        self._tree.set_transforms(gids, transforms)

    def set_parent(self, gid: Any, parent: Any) -> None:
        """Move a group (with its subtree and objects) under ``parent`` (None: the world); its
        transform is now relative to the new parent."""
        self._tree.set_parent(gid, parent)

    def remove_group(self, gid: Any) -> None:
        """Remove a group, its subgroups and all their objects."""
        t = self._tree
        sub = t.subtree(t.slot_of(gid, "remove_group"))
        self._arena.drop_blocks(sub)
        t.forget(sub)

    def transform(self, gid: Any) -> np.ndarray:
        """The group's transform (4, 4), local -> parent."""
        return self._tree.transform(self._tree.slot_of(gid, "transform"))

    def world_transform(self, gid: Any) -> np.ndarray:
        """The group's composed transform (4, 4), local -> world."""
        return self._tree.world_transform(self._tree.slot_of(gid, "world_transform"))

    def group_index(self, gid: Any) -> Any:
        """The inner index of a group (read it, do not change it: the nested index owns it)."""
        g = self._tree.slot_of(gid, "group_index")
        self._flush(g)
        return self._tree.inner[g]

    def rebuild(self, kind: str, inner_min: int | None = None, **index_kwargs: Any
                ) -> NestedIndex:
        """A new nested index of the same groups, transforms and objects with another inner
        kind (what the viewer's index hotkey does)."""
        out = NestedIndex(kind, inner_min=inner_min, **index_kwargs)
        t = self._tree
        t.ensure_order()
        G = t.G
        R = self._arena.R
        for g in t.order.tolist():
            p = int(G.parent[g])
            out.add_group(t.keys[g], None if p < 0 else t.keys[p], t.transform(g))
            lo = int(G.b_start[g])
            hi = lo + int(G.b_count[g])
            if hi > lo:
                out.insert(t.keys[g], R.ids[lo:hi].copy(), R.lc[lo:hi].copy(),
                           R.rad[lo:hi].copy(), R.vd[lo:hi].copy())
        return out

    # ------------------------------------------------------------------ objects

    def insert(self, gid: Any, ids: Any, local_centers: Any, radii: Any,
               view_distances: Any = None) -> None:
        """Add objects to group ``gid``, in its local coordinates; ids unique in the scene."""
        g = self._tree.slot_of(gid, "insert")
        ids, c, r, vd = check_batch(ids, local_centers, radii, view_distances)
        if ids.shape[0] == 0:
            return
        self._arena.check_new(ids, c, r, vd)
        if vd is None:
            vd = np.full(ids.shape[0], np.inf)
        self._tree.inner[g].insert(ids, c, r, vd)  # checked above: cannot fail
        self._arena.add(g, ids, c, r, vd)
        self._tree.bounds_dirty = True

    def update(self, gid: Any, ids: Any, local_centers: Any, radii: Any = None,
               view_distances: Any = None) -> None:
        """Move objects within their group (new local centres; optionally radii and view
        distances). ``gid`` None: each object in its own group (one call for a whole frame);
        else every id must be in ``gid``. A batch in other types (int32 ids, float32 rows, a
        strided view, a list) is copied losslessly into the compiled paths' form first
        (``checks.lossless_batch``)."""
        ids, local_centers, radii, view_distances = lossless_batch(ids, local_centers, radii,
                                                                   view_distances)
        arena = self._arena
        last = arena.movers
        tried = (gid is None and radii is None and view_distances is None and last is not None
                 and last[0] == arena.version and last[1] == -1)
        # The per-frame path: the same movers as the last batch, new centres only, with no
        # check in Python (the compiled call makes them); otherwise the paths below decide.
        if tried and arena.move_cached(last, ids, local_centers, _EMPTY_F, _EMPTY_F,
                                       self.inner_min) == 0:
            return
        want = -1 if gid is None else self._tree.slot_of(gid, "update")
        if arena.move_fast(want, ids, local_centers, radii, view_distances, tried,
                           self.inner_min):
            return
        ids, c, r, vd = check_batch(ids, local_centers, radii, view_distances,
                                    radii_optional=True)
        if ids.shape[0] == 0:
            return
        check_limits("update", ids, c, r, vd)
        rows = arena.rows_of("update", ids)
        if want >= 0:
            other = arena.R.grp[rows] != want
            if other.any():
                raise ValueError(f"update: ids not in group {self._tree.keys[want]!r}: "
                                 f"{name_ids(ids[other])}")
        arena.apply(rows, arena.R.grp[rows], c, r, vd, self.inner_min)

    def remove(self, ids: Any) -> None:
        """Remove objects by id, from whichever groups hold them."""
        ids = check_ids(ids)
        if ids.shape[0] == 0:
            return
        arena = self._arena
        rows = arena.rows_of("remove", ids)
        groups, parts = arena.by_group(rows, ids)
        for g, part in zip(groups.tolist(), parts, strict=True):
            self._tree.inner[g].remove(part)
        arena.remove(ids, rows, groups)
        self._tree.bounds_dirty = True

    def contains(self, ids: Any) -> np.ndarray:
        """Boolean mask: which of ``ids`` are in the scene."""
        return self._arena.idmap.lookup(check_ids(ids)) >= 0

    def object_groups(self, ids: Any) -> list[int | str]:
        """The group id of each of ``ids``."""
        rows = self._arena.rows_of("object_groups", check_ids(ids))
        keys = self._tree.keys
        return [keys[g] for g in self._arena.R.grp[rows].tolist()]

    def local_spheres(self, ids: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(local centres, radii, view distances) of ``ids``, as inserted or last updated."""
        rows = self._arena.rows_of("local_spheres", check_ids(ids))
        R = self._arena.R
        return R.lc[rows].copy(), R.rad[rows].copy(), R.vd[rows].copy()

    def world_spheres(self, ids: Any, with_view_distances: bool = False) -> tuple[np.ndarray, ...]:
        """(world centres (n, 3), radii (n,)) of ``ids``, the canonical ones queries answer
        for (groups.py); with ``with_view_distances`` also the world view distances."""
        rows = self._arena.rows_of("world_spheres", check_ids(ids))
        self._tree.refresh_world()
        R = self._arena.R
        G = self._tree.G
        c, r, v = world_spheres_of(rows, R.lc, R.rad, R.vd, R.grp, G.W, G.ws)
        return (c, r, v) if with_view_distances else (c, r)

    # ------------------------------------------------------------------ queries

    def query_frustum(self, planes: Any, eye: Any = None, use_view_distance: bool = False,
                      occlusion: Any = None) -> QueryResult:
        """Ids whose world sphere meets every plane (and, with ``use_view_distance``, whose
        world centre is within its world view distance of ``eye``): exactly brute force.
        With ``occlusion`` (a ``ZPyramid``), those whose world sphere the pyramid hides are
        left out, as the flat indexes do (``occlude.py``)."""
        res = None
        rec = self._record
        tree = self._tree
        if occlusion is None and not tree.dirty:
            # The per-frame path: one compiled call that checks the planes and the eye; other
            # array forms raise TypeError before it runs (the checked path below copies them).
            use_vd = bool(use_view_distance)
            if eye is None and not use_vd:
                eye = _ZERO3
            if eye is not None:
                try:
                    res = query_hot(rec.st or rec.get(), planes, eye, use_vd, self.inner_min)
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
            if tree.dirty:
                self._refresh()  # else the listed groups' bounds are refreshed in the call
            res = query_hot(rec.st or rec.get(), planes, eye, use_vd, self.inner_min)
        vis, working, visited, n_inner, far, bad = res
        if bad == 2:
            check_point(eye, "eye")  # raises, naming the eye
        if bad:
            raise ValueError(
                f"query_frustum: planes must be a finite (K, 4) array, got {planes.shape}")
        if occlusion is None and not n_inner:
            return QueryResult(vis, working, visited, 0, 0,
                               {"groups_visited": visited, "inner_queries": 0},
                               culled_distance=int(far) if use_vd else None).fill_counts(
                                   self._arena.count)
        extra = {"groups_visited": visited, "inner_queries": n_inner}
        if n_inner:  # the partly visible groups of inner_min objects or more, in preorder
            inner = tree.order[tree.act[:tree.order.shape[0]] == INNER_ACT]
            parts = [vis]
            for g in inner.tolist():
                got, w, nv, f = self._ask_inner(g, planes, eye, use_vd)
                parts.append(got)
                working += w
                visited += nv
                far += f
            vis = np.concatenate(parts)
        occ_objects = occ_groups = 0
        if occlusion is not None and occlusion.widths.shape[0] and vis.shape[0]:
            vis, occ_objects, occ_groups = occlude_visible(
                np.ascontiguousarray(vis, np.int64), self._arena.idmap.arrays(), self._arena.R,
                rec.st or rec.get(), np.zeros(tree.G.cap, np.uint8),
                bool(getattr(self, "occlusion_gate", True)), occlusion.occluder())
        return QueryResult(visible=vis, working_set=int(working), nodes_visited=int(visited),
                           occluded_nodes=int(occ_groups), occluded_objects=int(occ_objects),
                           extra=extra, culled_distance=int(far) if use_vd else None,
                           ).fill_counts(self._arena.count)

    def _ask_inner(self, g: int, planes: np.ndarray, eye: np.ndarray,
                   use_vd: bool) -> tuple[np.ndarray, int, int, int]:
        """Group ``g`` through its own index: the widened local planes, then the world test;
        (ids, working set, nodes visited, objects rejected by view distance)."""
        rec = self._record
        st = rec.st or rec.get()
        view = local_frame(st, planes, eye, use_vd, g)
        if view.ok:
            self._flush(g)
            wide = view.planes.copy()
            wide[:, 3] += 2.0 * view.tol
            res = self._tree.inner[g].query_frustum(wide)
            cand, work, nodes = res.visible, res.working_set, res.nodes_visited
        else:  # numbers too large for the local filter: every object to the world test
            lo = int(self._tree.G.b_start[g])
            cand = self._arena.R.ids[lo:lo + int(self._tree.G.b_count[g])].copy()
            work, nodes = cand.shape[0], 0
            view = view._replace(tol=np.inf)
        got, far = settle_candidates(np.ascontiguousarray(cand, dtype=np.int64),
                                     self._arena.idmap.arrays(), st, planes, eye, use_vd, g,
                                     view)
        return got, int(work), int(nodes), int(far)

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
        if self._node_box_cache is None:
            self._node_box_cache = NodeBoxCache()
        return self._node_box_cache.boxes(self)

    def group_boxes(self) -> tuple[np.ndarray, list[int | str], np.ndarray, np.ndarray]:
        """Each non-empty group's local box of its objects, in world space (it turns with the
        group, as in Shagam's figure 2.5): (corners (K, 8, 3), group ids, scene-tree depth,
        last query's outcome per group (``NODE_*`` codes)). One compiled pass."""
        self._refresh()
        t = self._tree
        G = t.G
        R = self._arena.R
        corners, own = group_box_corners(t.order, G.b_start, G.b_count, R.lc, R.rad, G.W)
        keys = t.keys
        return corners, [keys[g] for g in own.tolist()], G.depth[own], G.code[own].copy()

    def flush(self) -> None:
        """Bring every group's index up to date with the moves so far (queries and node boxes
        do it for the groups they read)."""
        G = self._tree.G
        for g in np.flatnonzero(G.alive & ((G.nstale > 0) | (G.gdirty > 0))).tolist():
            self._flush(g)

    # ------------------------------------------------------------------ checks

    def validate(self) -> None:
        """Raise AssertionError on any broken invariant: transforms, tree, bounds, store, id
        map, and each group's own index (its objects and its validate())."""
        t = self._tree
        self._refresh()
        t.validate()
        G = t.G
        live = np.flatnonzero(G.alive)
        self._arena.validate(live, self.describe())
        code, where = check_world(self._arena.R, G.parent, G.W, G.ws, G.world_c, G.world_r,
                                  G.world_vd, G.sub_c, G.sub_r, G.sub_vd)
        if code:
            raise AssertionError(f"{self.describe()}: {MESSAGES[int(code)]} (at {where})")
        if not self._record.points_at_current():
            raise AssertionError(f"{self.describe()}: the compiled record points at arrays the "
                                 "index no longer uses")
        for g in live.tolist():
            self._arena.validate_inner(g, t.inner[g], t.keys[g])

    def stats(self) -> dict[str, Any]:
        """Sizes: objects, groups, deepest group, inner index nodes, arena rows, stale rows."""
        self._refresh()
        t = self._tree
        G = t.G
        a = self._arena
        live = np.flatnonzero(G.alive)
        nodes = sum(int(t.inner[g].stats().get("nodes", 0)) for g in live.tolist())
        return {"objects": a.count, "groups": int(live.shape[0]),
                "max_depth": int(G.depth[live].max()) if live.shape[0] else 0,
                "nodes": nodes, "kind": self.kind, "inner_min": self.inner_min,
                "arena_rows": a.top, "garbage_rows": a.garbage,
                "stale": int(G.nstale[live].sum()), "dirty_groups": int(G.gdirty[live].sum())}

    # ------------------------------------------------------------------ internals

    def _flush(self, g: int) -> None:
        """Group ``g``'s own index up to date with the arena (arena.ObjectArena.flush)."""
        self._arena.flush(g, self._tree.inner[g])

    def _refresh(self) -> None:
        """The world matrices and bounds up to date: everything after a change of the tree
        (``bounds_dirty``), else only the groups listed bounds-dirty since the last time."""
        t = self._tree
        if t.world_dirty or t.order_dirty:
            t.refresh_world()
        G = t.G
        rec = self._record
        if not t.bounds_dirty:
            if t.nbl[0]:
                refresh_bounds_some(rec.st or rec.get())
            return
        loose = np.flatnonzero(G.loose & G.alive)
        if loose.shape[0]:
            R = self._arena.R
            tighten(R.lc, R.rad, R.vd, loose, G.b_start, G.b_count, G.own_c, G.own_r, G.own_tight,
                    G.own_vd, G.own_rmax, G.loose)
        refresh_bounds(rec.st or rec.get())
        G.bmark[G.blist[:t.nbl[0]]] = 0
        t.nbl[0] = 0
        t.bounds_dirty = False


__all__ = ["INNER_MIN", "NestedIndex"]
