"""Scenes: objects built from a validated scene file, their motion, and the camera path."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.scene import distributions as dist
from app.scene import motion as mo
from app.scene.camera import CameraPath, CameraSpec
from app.scene.collide import (
    DEFAULT_COLLISION_INDEX,
    MAX_PACKING,
    CollisionWorld,
    packing,
    random_velocities,
)
from app.scene.groups import Hierarchy, expand_frames
from app.scene.schema import (
    KNOWN_INDEXES,
    MAX_SEED,
    TREE_HEURISTICS,
    GroupSpec,
    SceneError,
    SceneSpec,
    parse_scene,
    read_toml,
)
from app.suggest import with_hint

SCENES_DIR = Path(__file__).resolve().parents[2] / "scenes"
#: Peak bytes an object costs while a scene is built (the store's 64 plus placement and motion
#: temporaries; measured 145-200 at 2,000,000 objects of city, meadow, uniform, lissajous).
SCENE_BYTES_PER_OBJECT = 224
#: The largest object count anything asks for is a typo, not a count (memory is checked too).
MAX_OBJECTS = 10**15


def available_memory() -> int | None:
    """Bytes the kernel says a new allocation can get without swapping (MemAvailable of
    /proc/meminfo), or None where that is unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def format_bytes(n: float) -> str:
    """A byte count for people: ``1.5 GB``, ``800 TB``."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"  # pragma: no cover - the loop returns


@dataclass
class ObjectSet:
    """Structure of arrays; row i is the object with id ids[i], and ids are 0..N-1."""

    ids: np.ndarray  # (N,) int64
    centers: np.ndarray  # (N, 3) float64
    radii: np.ndarray  # (N,) float64
    view_distances: np.ndarray  # (N,) float64, inf when none
    colors: np.ndarray  # (N, 3) float32 in [0, 1]
    mesh: np.ndarray  # (N,) int8 index into Scene.meshes
    static: np.ndarray  # (N,) bool
    group: np.ndarray  # (N,) int16 index into Scene.groups

    def __len__(self) -> int:
        return int(self.ids.shape[0])


class Scene:
    """A loaded scene: objects, motion, start camera and its looping path."""

    def __init__(self, spec: SceneSpec, counts: list[int], seed: int,
                 collision_index: str | None = None) -> None:
        spec = _scaled_for_collision(spec, counts)
        # [[frame]] tables: one object group per frame copy, and the hierarchy (groups.py)
        spec, counts, hierarchy = expand_frames(spec, counts)
        self.hierarchy: Hierarchy | None = hierarchy
        self.name: str = spec.name
        self.path: Path = spec.path
        self.description: str = spec.description
        self.seed: int = seed
        self.groups: list[GroupSpec] = spec.groups
        self.default_index: str = spec.default_index
        # Only the trees take a heuristic; other indexes reject leafy/split_threshold.
        self.default_index_options: dict = (
            {"leafy": spec.leafy, "split_threshold": spec.split_threshold}
            if spec.default_index in TREE_HEURISTICS else {}
        )
        self.use_view_distance: bool = spec.use_view_distance
        self.meshes: list[str] = list(dict.fromkeys(g.mesh for g in spec.groups))
        self.camera = CameraSpec(spec.position, spec.target, spec.fov, spec.near, spec.far)
        self.duration: float = spec.duration
        self._path = CameraPath(spec.key_times, spec.key_positions, spec.key_targets,
                                spec.duration, spec.interpolation)
        self.time: float = 0.0
        self._rng = np.random.default_rng(seed)
        self._colliding: list[tuple[np.ndarray, np.ndarray]] = []  # (rows, velocities)
        self.objects, self._motions = self._build(spec, counts)
        if hierarchy is not None:  # framed objects were built in local coordinates
            hierarchy.attach(self.objects, self._motions)
        #: The balls of the groups with motion "collide" (app/scene/collide.py), or None.
        self.collision: CollisionWorld | None = self._collision_world(spec, collision_index)
        r = self.objects.radii[:, None]
        c = self.objects.centers
        if len(self.objects):
            self.world_lo = (c - r).min(axis=0)
            self.world_hi = (c + r).max(axis=0)
        else:
            self.world_lo = self.world_hi = np.zeros(3)
        self.extent_lo, self.extent_hi = self._extent()
        moving = [m.rows for m in self._motions]
        if self.collision is not None:
            moving.append(self.collision.rows)
        self._moving = np.concatenate(moving) if moving else np.zeros(0, np.int64)
        # The moved ids are the same every frame: build them once, hand out a read-only array.
        self._moved_ids = self.objects.ids[self._moving]
        self._moved_ids.flags.writeable = False
        if hierarchy is not None:  # turning groups move every object below them
            self._moving, self._moved_ids = hierarchy.moving_rows, hierarchy.moved_ids
            self.extent_lo, self.extent_hi = hierarchy.extent(self.objects)

    def __repr__(self) -> str:
        return f"Scene({self.name!r}, objects={len(self.objects)}, path={str(self.path)!r})"

    # ------------------------------------------------------------------ building

    def _build(self, spec: SceneSpec, counts: list[int]):
        rng = self._rng
        parts: list[tuple] = []
        motions: list[mo.Motion] = []
        start = 0
        for gi, (g, n) in enumerate(zip(spec.groups, counts, strict=True)):
            centers, params = self._place(g, n, rng)
            radii = rng.uniform(g.radius[0], g.radius[1], n)
            if g.view_distance == "constant":
                vd = np.full(n, g.view_distance_value)
            elif g.view_distance == "factor":
                vd = radii * g.view_distance_value
            else:
                vd = np.full(n, math.inf)
            t = rng.random(n)[:, None]
            colors = ((1 - t) * g.color[0] + t * g.color[1]).astype(np.float32)
            static = np.ones(n, dtype=bool)
            if g.motion == "collide" and n:
                # Every ball collides; those outside moving_fraction start at rest.
                static = np.zeros(n, dtype=bool)
                vel = random_velocities(n, g.speed[0], g.speed[1], g.lo, g.hi, rng)
                if g.moving_fraction < 1.0:
                    vel[rng.random(n) >= g.moving_fraction] = 0.0
                self._colliding.append((start + np.arange(n, dtype=np.int64), vel))
            elif g.motion != "static" and n:
                moving = (rng.random(n) < g.moving_fraction if g.moving_fraction < 1.0
                          else np.ones(n, dtype=bool))
                static = ~moving
                local = np.flatnonzero(moving)
                motions.append(self._motion(g, start + local, rng,
                                            None if params is None else params[local]))
            mesh = np.full(n, self.meshes.index(g.mesh), dtype=np.int8)
            parts.append((centers, radii, vd, colors, mesh, static, np.full(n, gi, np.int16)))
            start += n
        cols = list(zip(*parts, strict=True))
        objs = ObjectSet(
            ids=np.arange(start, dtype=np.int64),
            centers=np.ascontiguousarray(np.concatenate(cols[0]).reshape(-1, 3), np.float64),
            radii=np.concatenate(cols[1]).astype(np.float64),
            view_distances=np.concatenate(cols[2]).astype(np.float64),
            colors=np.concatenate(cols[3]).reshape(-1, 3).astype(np.float32),
            mesh=np.concatenate(cols[4]).astype(np.int8),
            static=np.concatenate(cols[5]).astype(bool),
            group=np.concatenate(cols[6]).astype(np.int16),
        )
        return objs, motions

    @staticmethod
    def _place(g: GroupSpec, n: int, rng: np.random.Generator):
        """Centers of a group's objects, plus Lissajous curve parameters when relevant."""
        if g.distribution == "uniform":
            return dist.in_box(dist.unit_uniform(n, rng), g.lo, g.hi), None
        if g.distribution == "clustered":
            return dist.in_box(dist.unit_clustered(n, rng), g.lo, g.hi), None
        if g.distribution == "lissajous":
            params = dist.unit_lissajous_params(n, rng)
            return dist.in_box(dist.lissajous_curve(params), g.lo, g.hi), params
        if g.distribution == "sphere":
            return dist.in_box(dist.unit_sphere(n, rng), g.lo, g.hi), None
        if g.distribution == "grid":
            return dist.grid(n, g.lo, g.hi, g.dims), None
        if g.distribution == "lanes":
            across = 2 if g.lane_axis == 0 else 0
            return dist.lanes(n, g.lo, g.hi, g.lane_axis, across, g.lane_count, g.lane_jitter,
                              rng), None
        return g.centers.copy(), None  # box_list

    @staticmethod
    def _motion(g: GroupSpec, rows: np.ndarray, rng: np.random.Generator, params):
        rows = rows.astype(np.int64)
        speeds = rng.uniform(g.speed[0], g.speed[1], len(rows))
        if g.motion == "random_walk":
            return mo.RandomWalk(rows, speeds, g.lo, g.hi, rng, g.turn)
        if g.motion == "linear_bounce":
            return mo.LinearBounce(rows, speeds, g.lo, g.hi, rng)
        if g.motion == "linear_wrap":
            return mo.LinearWrap(rows, speeds, g.lo, g.hi, rng, g.direction)
        if g.motion == "orbit":
            # Rigid spin: speed is the tangential speed at the box's half-width.
            half = max(0.5 * float(max(g.hi[0] - g.lo[0], g.hi[2] - g.lo[2])), 1e-9)
            return mo.Orbit(rows, 0.5 * (g.speed[0] + g.speed[1]) / half, 0.5 * (g.lo + g.hi))
        # lissajous_drift: speed in world units per second, roughly, along the loop.
        half = max(0.5 * float(np.max(g.hi - g.lo)), 1e-9)
        return mo.LissajousDrift(rows, params, speeds / half, g.lo, g.hi)

    def _collision_world(self, spec: SceneSpec,
                         collision_index: str | None) -> CollisionWorld | None:
        """The colliding balls of every group with motion "collide", in one world with the
        [collision] table's walls (default: the box around those groups' boxes)."""
        cs = spec.collision
        if cs is None or not self._colliding:
            return None
        rows = np.concatenate([r for r, _ in self._colliding])
        vel = np.concatenate([v for _, v in self._colliding]).reshape(-1, 3)
        self._colliding = []
        if cs.lo is not None:
            lo, hi = cs.lo, cs.hi
        else:
            boxes = [g for g in spec.groups if g.motion == "collide"]
            lo = np.min([g.lo for g in boxes], axis=0)
            hi = np.max([g.hi for g in boxes], axis=0)
            if np.any(lo >= hi):
                raise SceneError(f"{spec.path}: the colliding groups' boxes have no volume "
                                 f"({lo.tolist()} to {hi.tolist()}); give [collision] bounds")
        radii = self.objects.radii[rows]
        fill = packing(radii, lo, hi)
        if fill > MAX_PACKING:
            raise SceneError(
                f"{spec.path}: the colliding balls fill {fill:.0%} of their box (at most "
                f"{MAX_PACKING:.0%} can be separated): fewer or smaller balls, or a larger "
                "[collision] bounds")
        name = collision_index or cs.index or DEFAULT_COLLISION_INDEX
        try:
            return CollisionWorld(self.objects.centers, rows, radii, vel, lo, hi, index=name,
                                  margin=cs.margin, restitution=cs.restitution,
                                  separate=cs.separate)
        except ValueError as exc:
            raise SceneError(f"{spec.path}: {exc}") from None

    def _extent(self) -> tuple[np.ndarray, np.ndarray]:
        """A box every object stays inside forever (motion bounds plus radii)."""
        lo, hi = self.world_lo.copy(), self.world_hi.copy()
        if self.collision is not None:
            lo = np.minimum(lo, self.collision.lo)
            hi = np.maximum(hi, self.collision.hi)
        for gi, g in enumerate(self.groups):
            rows = self.objects.group == gi
            if g.motion in ("static", "collide") or not rows.any():
                continue
            rmax = float(self.objects.radii[rows].max())
            glo, ghi = g.lo.copy(), g.hi.copy()
            if g.motion == "orbit":
                mid = 0.5 * (glo + ghi)
                c = self.objects.centers[rows]
                reach = float(np.hypot(c[:, 0] - mid[0], c[:, 2] - mid[2]).max())
                glo[[0, 2]], ghi[[0, 2]] = mid[[0, 2]] - reach, mid[[0, 2]] + reach
            lo = np.minimum(lo, glo - rmax)
            hi = np.maximum(hi, ghi + rmax)
        return lo, hi

    # ------------------------------------------------------------------ per frame

    def step(self, dt: float) -> np.ndarray:
        """Advance motion by dt seconds, in place; return the ids that moved (int64)."""
        dt = float(dt)
        if not math.isfinite(dt) or dt < 0:
            raise ValueError(f"step: dt must be a finite number >= 0, got {dt!r}")
        self.time += dt
        if dt == 0 or not len(self._moving):
            return np.zeros(0, dtype=np.int64)
        if self.hierarchy is not None:  # motions in local frames, groups turning
            return self.hierarchy.step(self.objects, self._motions, self.time, dt, self._rng)
        for m in self._motions:
            m.step(self.objects.centers, dt, self._rng)
        if self.collision is not None:
            self.collision.step(dt)
        return self._moved_ids

    def camera_at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(eye, target) on the looping camera path at time t seconds."""
        return self._path.at(t)


def _scaled_counts(path: Path, spec: SceneSpec, objects: int | None) -> list[int]:
    counts = [g.count for g in spec.groups]
    if objects is None:
        return counts
    if (isinstance(objects, bool) or not isinstance(objects, int | np.integer)
            or not 0 <= objects <= MAX_OBJECTS):
        raise SceneError(f"{path}: objects override: expected an integer >= 0 and <= "
                         f"{MAX_OBJECTS:,}, got {objects!r}")
    fixed = sum(c for g, c in zip(spec.groups, counts, strict=True) if g.fixed)
    free = [i for i, g in enumerate(spec.groups) if not g.fixed]
    free_total = sum(counts[i] for i in free)
    want = int(objects) - fixed
    if want < 0 or (not free and want):
        raise SceneError(
            f"{path}: objects override: expected at least {fixed} objects (the fixed groups), "
            f"got {objects}" if want < 0 else
            f"{path}: objects override: every group is fixed, so the count must be {fixed}, "
            f"got {objects}")
    if free:
        # Largest-remainder rounding keeps the proportions and hits the total exactly.
        weights = (np.array([counts[i] for i in free], float) / free_total if free_total
                   else np.full(len(free), 1.0 / len(free)))
        exact = weights * want
        base = np.floor(exact).astype(int)
        order = np.argsort(-(exact - base), kind="stable")
        base[order[: want - base.sum()]] += 1
        for i, c in zip(free, base, strict=True):
            counts[i] = int(c)
    return counts


def _scaled_for_collision(spec: SceneSpec, counts: list[int]) -> SceneSpec:
    """With [collision] ``scale_box`` (the default) and another ball count than the file's,
    the walls, the colliding groups' boxes and the camera (start pose and path) scaled about
    the walls' centre by the cube root of the count ratio: the balls fill the same share of
    their box at any count, and the view frames the box as at the file's count."""
    cs = spec.collision
    if cs is None or not cs.scale_box:
        return spec
    pairs = [(g, c) for g, c in zip(spec.groups, counts, strict=True) if g.motion == "collide"]
    file_n = sum(g.count for g, _ in pairs)
    new_n = sum(c for _, c in pairs)
    if file_n == 0 or new_n == 0 or new_n == file_n:
        return spec
    f = (new_n / file_n) ** (1.0 / 3.0)
    if cs.lo is not None:
        mid = 0.5 * (cs.lo + cs.hi)
    else:
        mid = 0.5 * (np.min([g.lo for g, _ in pairs], axis=0)
                     + np.max([g.hi for g, _ in pairs], axis=0))

    def grow(p: np.ndarray) -> np.ndarray:
        return mid + (p - mid) * f

    groups = [dataclasses.replace(g, lo=grow(g.lo), hi=grow(g.hi)) if g.motion == "collide"
              else g for g in spec.groups]
    walls = (dataclasses.replace(cs, lo=grow(cs.lo), hi=grow(cs.hi)) if cs.lo is not None
             else cs)
    # The camera and its path scale with the box, so that the view frames it the same way.
    return dataclasses.replace(
        spec, groups=groups, collision=walls, position=grow(spec.position),
        target=grow(spec.target), key_positions=grow(spec.key_positions),
        key_targets=grow(spec.key_targets), far=spec.far * max(f, 1.0))


def _known_indexes() -> tuple[str, ...]:
    try:
        from app.spatial import INDEX_NAMES
    except Exception:  # noqa: BLE001 - the scene loader must not depend on index builds
        return KNOWN_INDEXES
    return tuple(dict.fromkeys((*KNOWN_INDEXES, *INDEX_NAMES)))


def _exists(p: Path) -> bool:
    try:
        return p.exists()
    except OSError as exc:  # a name too long, a loop of links...
        raise SceneError(f"{p}: cannot read scene file: {exc.strerror or exc}") from None
    except ValueError as exc:  # an embedded NUL
        raise SceneError(f"{str(p)!r}: not a usable file name: {exc}") from None


def resolve(name_or_path: str | Path) -> Path:
    """The scene file for a name in scenes/ or a path; SceneError when there is none."""
    text = str(name_or_path)
    if not text:
        raise SceneError(f"no scene given; available: {', '.join(list_scenes()) or '(none)'}")
    p = Path(text)
    if p.suffix == ".toml" or "/" in text or "\\" in text or _exists(p):
        return p
    candidate = SCENES_DIR / f"{text}.toml"
    if _exists(candidate):
        return candidate
    names = list_scenes()
    raise SceneError(with_hint(f"{candidate}: no scene named {text!r}", text, names)
                     + f" (available: {', '.join(names) or 'none'})")


def list_scenes() -> list[str]:
    """Names of the scene files in the repository's scenes/ folder."""
    return sorted(p.stem for p in SCENES_DIR.glob("*.toml"))


def scene_descriptions() -> dict[str, str]:
    """Name -> the ``[scene] description`` of every scene in scenes/ ("" when it has none or
    does not parse as TOML; the description is read, not validated)."""
    out: dict[str, str] = {}
    for name in list_scenes():
        try:
            desc = read_toml(SCENES_DIR / f"{name}.toml").get("scene", {}).get("description", "")
        except (SceneError, AttributeError):
            desc = ""
        out[name] = desc if isinstance(desc, str) else ""
    return out


def plan_scene(name_or_path: str | Path, objects: int | None = None) -> tuple[Path, list[int]]:
    """The validated file's path and its groups' object counts (``objects`` applied), without
    building anything: what a caller checks before committing memory to it."""
    path = resolve(name_or_path)
    spec = parse_scene(path, read_toml(path), _known_indexes())
    return path, _scaled_counts(path, spec, objects)


def check_memory(path: Path, total: int, bytes_per_object: float, what: str,
                 base: float = 0.0) -> None:
    """SceneError when ``base + total * bytes_per_object`` exceeds the available memory."""
    need = base + float(total) * bytes_per_object
    avail = available_memory()
    if avail is not None and need > avail:
        raise SceneError(
            f"{path}: {total:,} objects need about {format_bytes(need)} of memory for {what} "
            f"(~{bytes_per_object:.0f} bytes an object), only {format_bytes(avail)} is "
            "available; ask for fewer with --objects")


def load_scene(name_or_path: str | Path, objects: int | None = None,
               seed: int | None = None, collision_index: str | None = None) -> Scene:
    """Load, validate and build a scene; ``objects`` rescales the non-fixed groups;
    ``collision_index`` names the collision index of a scene with colliding balls (default:
    the scene's [collision] index, else app.scene.collide.DEFAULT_COLLISION_INDEX).

    Refuses (SceneError) before allocating when the objects would not fit in the available
    memory."""
    path = resolve(name_or_path)
    spec = parse_scene(path, read_toml(path), _known_indexes())
    counts = _scaled_counts(path, spec, objects)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)
                             or not 0 <= seed <= MAX_SEED):
        raise SceneError(f"{path}: seed override: expected an integer >= 0 and <= {MAX_SEED}, "
                         f"got {seed!r}")
    check_memory(path, sum(counts), SCENE_BYTES_PER_OBJECT, "the scene")
    if collision_index is not None and collision_index not in _known_indexes():
        raise SceneError(f"unknown collision index {collision_index!r}; available: "
                         f"{', '.join(_known_indexes())}")
    return Scene(spec, counts, spec.seed if seed is None else int(seed), collision_index)
