"""Hierarchical scenes (Shagam 2.2.2, figure 2.5): [[frame]] tables as a tree of groups.

A scene file's ``[[frame]]`` tables form a tree (``parent``), each with a rigid transform to
its parent's frame (``position``, ``rotation`` in degrees, uniform ``scale``), optionally
``copies`` of it spaced around a ring of ``ring_radius`` in the parent's xz plane (each copy's
local x along the ring), and a steady turn (``turn_axis``, ``turn_speed`` degrees a second)
about its own origin. A ``[[group]]`` of objects with ``frame = "NAME"`` is placed (and moved
by its motion) in that frame's local coordinates, once per copy of the frame.

:func:`expand_frames` turns the spec into one object group per frame instance;
:class:`Hierarchy` keeps the instances' transforms and the objects' local spheres, and every
step writes the objects' *world* spheres into the scene's arrays (what the renderer, the
stage counts and a flat index read) with the canonical formulas of
``app.spatial.nested.groups`` (the same compiled kernels the nested index uses), so the
scene's world centres are bit for bit the ``world_spheres`` of a ``NestedIndex`` built from
it. The viewer (``app/viewer/nested_view.py``) hands the same transforms and local moves to
its nested index.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from app.scene.schema import FrameSpec, GroupSpec, SceneSpec


def rotation(axis: np.ndarray, degrees: float) -> np.ndarray:
    """3 x 3 rotation by ``degrees`` about the unit ``axis`` (right-handed)."""
    x, y, z = (float(v) for v in axis)
    a = math.radians(degrees)
    c, s, t = math.cos(a), math.sin(a), 1.0 - math.cos(a)
    return np.array([[t * x * x + c, t * x * y - s * z, t * x * z + s * y],
                     [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
                     [t * x * z - s * y, t * y * z + s * x, t * z * z + c]])


def euler(degrees: np.ndarray) -> np.ndarray:
    """``Rz Ry Rx`` of the angles (degrees) about x, y and z."""
    ex, ey, ez = np.eye(3)
    return (rotation(ez, degrees[2]) @ rotation(ey, degrees[1])) @ rotation(ex, degrees[0])


def affine(a: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The 4 x 4 matrix ``p -> a p + t`` (column vectors)."""
    m = np.eye(4)
    m[:3, :3] = a
    m[:3, 3] = t
    return m


@dataclasses.dataclass
class Instance:
    """One copy of a [[frame]]: a group of the hierarchy."""

    frame: FrameSpec
    parent: int  # instance index, -1: the world
    rest: np.ndarray  # (4, 4) transform to the parent at time 0
    label: str


def _instances(frames: list[FrameSpec]) -> tuple[list[Instance], dict[str, list[int]]]:
    """Every copy of every frame, parents before children."""
    out: list[Instance] = []
    of_frame: dict[str, list[int]] = {}
    for f in frames:
        parents = [-1] if f.parent is None else of_frame[f.parent]
        own = affine(euler(f.rotation) * f.scale, f.position)
        mine: list[int] = []
        for p in parents:
            for j in range(f.copies):
                place = np.eye(4)
                if f.copies > 1 or f.ring_radius > 0:
                    ang = 2.0 * math.pi * j / f.copies
                    place = affine(rotation(np.array([0.0, 1.0, 0.0]),
                                            -math.degrees(ang + math.pi / 2)),
                                   f.ring_radius * np.array([math.cos(ang), 0.0, math.sin(ang)]))
                label = f.name if f.copies == 1 else f"{f.name}[{j}]"
                if p >= 0 and len(parents) > 1:
                    label = f"{out[p].label}/{label}"
                mine.append(len(out))
                out.append(Instance(f, p, place @ own, label))
        of_frame[f.name] = mine
    return out, of_frame


def expand_frames(spec: SceneSpec, counts: list[int]
                  ) -> tuple[SceneSpec, list[int], Hierarchy | None]:
    """The spec with one object group per instance of each framed group (named
    ``NAME#k``), the counts to match, and the hierarchy (None when the file has no frames)."""
    if not spec.frames:
        return spec, counts, None
    inst, of_frame = _instances(spec.frames)
    groups: list[GroupSpec] = []
    new_counts: list[int] = []
    where: list[int] = []
    for g, n in zip(spec.groups, counts, strict=True):
        if g.frame is None:
            groups.append(g)
            new_counts.append(n)
            where.append(-1)
            continue
        many = of_frame[g.frame]
        for k, i in enumerate(many):
            groups.append(g if len(many) == 1 else dataclasses.replace(g, name=f"{g.name}#{k}"))
            new_counts.append(n)
            where.append(i)
    return (dataclasses.replace(spec, groups=groups), new_counts,
            Hierarchy(inst, np.array(where, np.int64)))


class Hierarchy:
    """The groups of a hierarchical scene (frame instances), their transforms as they turn,
    and the objects' local spheres; world spheres written into the scene's arrays."""

    def __init__(self, instances: list[Instance], group_instance: np.ndarray) -> None:
        self.instances = instances
        n = len(instances)
        self.labels = [i.label for i in instances]
        self.parent = np.array([i.parent for i in instances], np.int64)
        self.rest = np.array([i.rest for i in instances]).reshape(n, 4, 4)
        self.axis = np.array([i.frame.turn_axis for i in instances]).reshape(n, 3)
        self.speed = np.array([i.frame.turn_speed for i in instances], np.float64)
        #: Groups that turn every step (their own transform changes).
        self.turning = np.flatnonzero(self.speed != 0.0).astype(np.int64)
        self.matrices = self.rest.copy()  # (n, 4, 4) current transforms, local -> parent
        self.order = np.arange(n, dtype=np.int64)  # parents come first by construction
        self.W = np.zeros((n, 3, 4))
        self.ws = np.zeros(n)
        self._dhi = np.zeros(n)
        self._dlo = np.zeros(n)
        self.group_instance = group_instance  # scene group -> instance (-1: the world)
        self.local = np.zeros((0, 3))
        self.local_radii = np.zeros(0)
        self.local_vd = np.zeros(0)
        self.instance_of = np.zeros(0, np.int64)  # object row -> instance (-1: the world)
        self.framed = np.zeros(0, np.int64)  # rows of objects that live in a frame
        self.moving_rows = np.zeros(0, np.int64)  # rows whose world sphere changes each step
        self.local_movers = np.zeros(0, np.int64)  # framed rows moved by their own motion
        self.moved_ids = np.zeros(0, np.int64)
        self._world_rows = np.zeros(0, np.int64)
        self._free_movers = np.zeros(0, np.int64)
        self._refresh()

    def __len__(self) -> int:
        return len(self.instances)

    # ------------------------------------------------------------------ build

    def attach(self, objects, motions) -> None:
        """Take over the objects just built (their centres are local ones for framed
        groups): keep the local spheres, write the world ones into ``objects``."""
        self.instance_of = self.group_instance[objects.group.astype(np.int64)]
        self.framed = np.flatnonzero(self.instance_of >= 0).astype(np.int64)
        self.local = objects.centers.copy()
        self.local_radii = objects.radii.copy()
        self.local_vd = objects.view_distances.copy()
        moved_by_motion = (np.concatenate([m.rows for m in motions]) if motions
                           else np.zeros(0, np.int64))
        under = np.zeros(len(self), bool)  # in the subtree of a turning group
        for i in range(len(self)):  # parents first: one pass
            p = self.parent[i]
            under[i] = self.speed[i] != 0.0 or (p >= 0 and under[p])
        row_turns = np.zeros(len(objects), bool)
        row_turns[self.framed] = under[self.instance_of[self.framed]]
        row_moves = np.zeros(len(objects), bool)
        row_moves[moved_by_motion] = True
        self.moving_rows = np.flatnonzero(row_turns | row_moves).astype(np.int64)
        self.local_movers = np.flatnonzero(row_moves & (self.instance_of >= 0)).astype(np.int64)
        self._world_rows = np.flatnonzero((row_turns | row_moves) & (self.instance_of >= 0)
                                          ).astype(np.int64)
        self._free_movers = np.flatnonzero(row_moves & (self.instance_of < 0)).astype(np.int64)
        objects.static[self.moving_rows] = False  # carried by a turning group, or moving
        self.moved_ids = objects.ids[self.moving_rows]
        self.moved_ids.flags.writeable = False
        self._write_world(objects, self.framed)

    # ------------------------------------------------------------------ per step

    def step(self, objects, motions, time: float, dt: float, rng: np.random.Generator
             ) -> np.ndarray:
        """Objects move in their frames (``motions`` on the local centres), turning groups
        turn to their pose at ``time``; the moved objects' world spheres are written into
        ``objects``. Returns the ids whose world sphere moved."""
        for m in motions:
            m.step(self.local, dt, rng)
        if self._free_movers.shape[0]:  # objects of no frame move in the world
            objects.centers[self._free_movers] = self.local[self._free_movers]
        if self.turning.shape[0]:
            self.matrices[self.turning] = self.poses(time)
            self._refresh()
        self._write_world(objects, self._world_rows)
        return self.moved_ids

    def poses(self, time: float) -> np.ndarray:
        """(K, 4, 4) transforms of the turning groups (:attr:`turning`) at ``time``."""
        out = np.empty((self.turning.shape[0], 4, 4))
        for k, i in enumerate(self.turning.tolist()):  # a few groups, not objects
            turn = affine(rotation(self.axis[i], self.speed[i] * time), np.zeros(3))
            out[k] = self.rest[i] @ turn
        return out

    def _refresh(self) -> None:
        # Imported here, not at the top: the nested index's per-frame entry points carry
        # explicit signatures, so importing them compiles them (about 12 s on an empty kernel
        # cache), and every scene, hierarchical or not, imports this module.
        from app.spatial.nested.groups import canonical_scale, refresh_world

        scale = canonical_scale(self.matrices)
        refresh_world(self.order, self.parent, np.ascontiguousarray(self.matrices[:, :3, :]),
                      scale, self.W, self.ws, self._dhi, self._dlo)

    def _write_world(self, objects, rows: np.ndarray) -> None:
        if not rows.shape[0]:
            return
        from app.spatial.nested.query import world_spheres_of  # see _refresh

        c, r, v = world_spheres_of(rows, self.local, self.local_radii, self.local_vd,
                                   self.instance_of, self.W, self.ws)
        objects.centers[rows] = c
        objects.radii[rows] = r
        objects.view_distances[rows] = v

    def extent(self, objects) -> tuple[np.ndarray, np.ndarray]:
        """A box the objects stay inside for ever as groups turn: rigid turns keep every
        distance from an object to its group's origin, and from a group's origin to its
        parent's, so the sum of those distances up to the scene's middle bounds its reach."""
        c, r = objects.centers, objects.radii
        if not len(c):
            return np.zeros(3), np.zeros(3)
        mid = 0.5 * ((c - r[:, None]).min(axis=0) + (c + r[:, None]).max(axis=0))
        origin = self.W[:, :, 3]
        chain = np.zeros(len(self))
        for g in range(len(self)):  # parents first
            p = int(self.parent[g])
            up = mid if p < 0 else origin[p]
            chain[g] = float(np.linalg.norm(origin[g] - up)) + (0.0 if p < 0 else chain[p])
        inst = self.instance_of
        reach = np.linalg.norm(c - mid, axis=1) + r
        framed = self.framed
        reach[framed] = (np.linalg.norm(c[framed] - origin[inst[framed]], axis=1)
                         + chain[inst[framed]] + r[framed])
        big = float(reach.max())
        return mid - big, mid + big
