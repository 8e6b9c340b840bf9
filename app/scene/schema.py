"""Parse and validate a scene TOML file into plain specs; every problem is one SceneError.

The error message names the file, the field (``group[2].radius``) and what was expected, so a
scene author can fix the file without reading this code.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.scene.camera import CameraPath, view_problem
from app.scene.motion import AXES, MOTIONS
from app.suggest import with_hint

DISTRIBUTIONS = ("uniform", "clustered", "lissajous", "sphere", "grid", "lanes", "box_list")
ASSETS_DIR = Path(__file__).resolve().parents[2] / "assets"
# Mesh kinds are the OBJ files the renderer can load (assets/<kind>.obj).
MESH_KINDS = tuple(sorted(p.stem for p in ASSETS_DIR.glob("*.obj"))) or ("cube", "icosphere")
VIEW_DISTANCE_RULES = ("none", "constant", "factor")
INTERPOLATIONS = ("catmull_rom", "linear")
TREE_HEURISTICS = ("kd", "ternary", "octree", "icoseptree")
# Every index name the project defines (design.md), available or not yet built.
KNOWN_INDEXES = ("brute", "kd", "ternary", "octree", "icoseptree", "fixed-octree", "grid",
                 "viewdist")

SCENE_KEYS = {"name", "description", "default_index", "leafy", "split_threshold",
              "use_view_distance", "seed"}
CAMERA_KEYS = {"position", "target", "fov", "near", "far", "interpolation", "duration", "path"}
KEY_KEYS = {"t", "position", "target"}
GROUP_KEYS = {"name", "count", "fixed", "distribution", "bounds", "center", "size", "radius",
              "view_distance", "view_distance_value", "view_distance_factor", "motion", "speed",
              "turn", "direction", "moving_fraction", "mesh", "color", "dims", "centers",
              "lane_axis", "lane_count", "lane_jitter", "frame"}
TOP_KEYS = {"scene", "camera", "group", "collision", "frame"}
#: [[frame]]: a group of the scene hierarchy (app/scene/groups.py): a rigid transform to its
#: parent's frame, copies around a ring, a steady turn.
FRAME_KEYS = {"name", "parent", "position", "rotation", "scale", "copies", "ring_radius",
              "turn_axis", "turn_speed"}
MAX_COPIES = 100_000
COLLISION_KEYS = {"bounds", "restitution", "margin", "index", "separate", "scale_box"}
#: Group motions: the per-group models of app/scene/motion.py, and "collide": the balls of
#: every such group move together under app/scene/collide.py (elastic collisions, walls).
GROUP_MOTIONS = (*MOTIONS, "collide")

# Ranges of a scene file's numbers. Beyond them a value is finite but breaks something later:
# float32 copies (GPU instances, the indexes' scan arrays) lose all precision or overflow,
# the view planes stop being finite, a depth buffer cannot order surfaces.
#: Largest |coordinate| of a position, target, center or box corner (float32 keeps 1/16 unit).
COORD_LIMIT = 1e6
#: Largest far / near ratio: a float32 depth buffer then still resolves about 1 % of the
#: distance at the far plane (and float64 planes stay exact; past ~1e16 they are NaN).
MAX_DEPTH_RATIO = 1e5
NEAR_RANGE = (1e-6, COORD_LIMIT)
FAR_LIMIT = 1e7
FOV_RANGE = (0.1, 179.0)  # vertical, degrees
TIME_LIMIT = 1e9  # seconds: keyframe times and the loop period
SPEED_LIMIT = 1e6  # units per second
TURN_LIMIT = 1e3  # random-walk heading noise
VIEW_DISTANCE_LIMIT = 1e9  # a constant view distance (larger is the same as none)
VIEW_FACTOR_LIMIT = 1e6  # view distance = factor x radius
MAX_COUNT = 10**10  # objects in a group (memory is checked when the scene is built)
MAX_SEED = 2**63 - 1
MAX_SPLIT_THRESHOLD = 10**9
MAX_DIM = 10**6  # grid cells per axis, lanes per group


class SceneError(ValueError):
    """A scene file is missing, unreadable or malformed; the message says where and why."""


@dataclass
class GroupSpec:
    """One validated [[group]] table."""

    name: str
    count: int
    fixed: bool
    distribution: str
    lo: np.ndarray
    hi: np.ndarray
    radius: tuple[float, float]
    view_distance: str
    view_distance_value: float
    motion: str
    speed: tuple[float, float]
    turn: float
    direction: int
    moving_fraction: float
    mesh: str
    color: tuple[np.ndarray, np.ndarray]
    dims: np.ndarray | None
    centers: np.ndarray | None
    lane_axis: int
    lane_count: int
    lane_jitter: float
    frame: str | None = None  # the [[frame]] whose local coordinates hold the group


@dataclass
class FrameSpec:
    """One validated [[frame]] table: a group of the scene hierarchy (Shagam 2.2.2)."""

    name: str
    parent: str | None  # None: the world
    position: np.ndarray  # translation in the parent's frame
    rotation: np.ndarray  # degrees about x, then y, then z (R = Rz Ry Rx)
    scale: float
    copies: int  # copies per parent copy, spaced around a ring in the parent's xz plane
    ring_radius: float
    turn_axis: np.ndarray  # unit axis of the steady turn, in the frame's own rest coordinates
    turn_speed: float  # degrees per second


@dataclass
class CollisionSpec:
    """The validated [collision] table (defaults when absent): the walls and the response."""

    lo: np.ndarray | None  # the walls; None: the box around the colliding groups' boxes
    hi: np.ndarray | None
    restitution: float = 1.0
    margin: float = 0.05
    index: str | None = None  # None: the default collision index
    separate: bool = True
    scale_box: bool = True  # another ball count scales the box by the cube root (same packing)


@dataclass
class SceneSpec:
    """A validated scene file."""

    path: Path
    name: str
    description: str
    default_index: str
    leafy: bool
    split_threshold: int | None
    use_view_distance: bool
    seed: int
    position: np.ndarray
    target: np.ndarray
    fov: float
    near: float
    far: float
    interpolation: str
    duration: float
    key_times: np.ndarray
    key_positions: np.ndarray
    key_targets: np.ndarray
    groups: list[GroupSpec]
    collision: CollisionSpec | None = None  # set when a group has motion = "collide"
    frames: list[FrameSpec] = dataclasses.field(default_factory=list)  # the hierarchy


class _Checker:
    """Typed field access on one TOML table, raising SceneError with file and field."""

    def __init__(self, path: Path, where: str, table: Any, allowed: set[str]) -> None:
        self.path, self.where = path, where
        if not isinstance(table, dict):
            self.fail("", f"a table, got {type(table).__name__}")
        unknown = sorted(set(table) - allowed)
        if unknown:
            self.fail(unknown[0], f"one of the known keys ({', '.join(sorted(allowed))})",
                      prefix="unknown key", near=(unknown[0], allowed))
        self.table = table

    def field(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where and key else (self.where or key)

    def fail(self, key: str, expected: str, got: Any = None, prefix: str = "",
             near: tuple[str, Any] | None = None) -> None:
        """Raise the SceneError; ``near`` = (what was written, the names it may be a typo
        of) adds "did you mean"."""
        head = f"{prefix} " if prefix else ""
        tail = f", got {got!r}" if got is not None else ""
        message = f"{self.path}: {head}{self.field(key)}: expected {expected}{tail}"
        raise SceneError(with_hint(message, *near) if near else message)

    def has(self, key: str) -> bool:
        return key in self.table

    def get(self, key: str, default: Any = ...) -> Any:
        if key not in self.table:
            if default is ...:
                raise SceneError(f"{self.path}: {self.field(key)}: required field is missing")
            return default
        return self.table[key]

    def string(self, key: str, default: Any = ..., choices: tuple[str, ...] | None = None) -> str:
        v = self.get(key, default)
        if not isinstance(v, str):
            self.fail(key, "a string", v)
        if choices is not None and v not in choices:
            self.fail(key, f"one of {', '.join(choices)}", v, near=(v, choices))
        return v

    def boolean(self, key: str, default: Any = ...) -> bool:
        v = self.get(key, default)
        if not isinstance(v, bool):
            self.fail(key, "true or false", v)
        return v

    def integer(self, key: str, default: Any = ..., lo: int = 0, hi: int | None = None) -> int:
        v = self.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
            self.fail(key, f"an integer >= {lo}" + (f" and <= {hi:,}" if hi is not None else ""),
                      v)
        return v

    def number(self, key: str, default: Any = ..., lo: float = -math.inf,
               hi: float = math.inf, open_lo: bool = False) -> float:
        v = self.get(key, default)
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if ok:
            ok = (v > lo if open_lo else v >= lo) and v <= hi
        if not ok:
            rng = f" {'>' if open_lo else '>='} {lo:g}" if lo > -math.inf else ""
            rng += f" and <= {hi:g}" if hi < math.inf else ""
            self.fail(key, f"a finite number{rng}", v)
        return float(v)

    def vec3(self, key: str, default: Any = ..., value: Any = ...,
             limit: float = COORD_LIMIT) -> np.ndarray:
        """A list of 3 finite numbers, each within [-limit, limit]."""
        v = self.get(key, default) if value is ... else value
        if (not isinstance(v, list) or len(v) != 3
                or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
                or not all(math.isfinite(x) for x in v)):
            self.fail(key, "a list of 3 finite numbers", v)
        if any(abs(x) > limit for x in v):
            self.fail(key, f"a list of 3 numbers within +-{limit:g}", v)
        return np.array(v, dtype=np.float64)

    def range_(self, key: str, default: Any = ..., lo: float = 0.0,
               hi: float = COORD_LIMIT) -> tuple[float, float]:
        """A number or [min, max] with lo <= min <= max <= hi."""
        v = self.get(key, default)
        pair = v if isinstance(v, list) else [v, v]
        if (len(pair) != 2 or not all(isinstance(x, int | float) and not isinstance(x, bool)
                                      for x in pair)
                or not all(math.isfinite(x) for x in pair)):
            self.fail(key, "a number or [min, max]", v)
        a, b = float(pair[0]), float(pair[1])
        if a < lo or b > hi:
            self.fail(key, f"values >= {lo:g} and <= {hi:g}", v)
        if a > b:
            self.fail(key, "min <= max", v)
        return a, b


def read_toml(path: Path) -> dict:
    """The parsed file, or a SceneError naming it."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise SceneError(f"{path}: no such scene file") from None
    except OSError as exc:
        raise SceneError(f"{path}: cannot read scene file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SceneError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # a picture, a binary: TOML is UTF-8 text
        raise SceneError(f"{path}: not a text file (a scene file is UTF-8 TOML): byte "
                         f"0x{exc.object[exc.start]:02x} at offset {exc.start}") from None


def parse_scene(path: Path, data: dict, known_indexes: tuple[str, ...]) -> SceneSpec:
    """Validate a parsed TOML document."""
    top = _Checker(path, "", data, TOP_KEYS)
    sc = _Checker(path, "scene", top.get("scene", {}), SCENE_KEYS)
    default_index = sc.string("default_index", "icoseptree", choices=known_indexes)
    split = (sc.integer("split_threshold", None, lo=1, hi=MAX_SPLIT_THRESHOLD)
             if sc.has("split_threshold") else None)
    cam = _Checker(path, "camera", top.get("camera"), CAMERA_KEYS)
    near = cam.number("near", 0.1, lo=NEAR_RANGE[0], hi=NEAR_RANGE[1])
    far = cam.number("far", 1000.0, lo=near, hi=FAR_LIMIT, open_lo=True)
    if far > near * MAX_DEPTH_RATIO:
        cam.fail("far", f"at most {MAX_DEPTH_RATIO:g} x camera.near = {near * MAX_DEPTH_RATIO:g} "
                 "(a float32 depth buffer cannot order surfaces over a wider range; raise "
                 "near or lower far)", far)
    fov = cam.number("fov", 60.0, lo=FOV_RANGE[0], hi=FOV_RANGE[1])
    position, target = cam.vec3("position"), cam.vec3("target")
    if np.allclose(position, target):
        cam.fail("target", "a point different from camera.position", target.tolist())
    times, eyes, targets = _keyframes(path, cam, position, target)
    duration = cam.number("duration", float(times[-1]), lo=float(times[-1]), hi=TIME_LIMIT)
    interpolation = cam.string("interpolation", "catmull_rom", choices=INTERPOLATIONS)
    _check_view(cam, fov, near, far, position, target,
                CameraPath(times, eyes, targets, duration, interpolation))
    groups_raw = top.get("group", [])
    if not isinstance(groups_raw, list) or not groups_raw:
        top.fail("group", "at least one [[group]] table", groups_raw if groups_raw else None)
    groups = [_group(path, i, g) for i, g in enumerate(groups_raw)]
    names = [g.name for g in groups]
    for i, n in enumerate(names):
        if names.index(n) != i:
            raise SceneError(f"{path}: group[{i}].name: expected a unique name, got {n!r} twice")
    collision = _collision(path, top, groups, known_indexes)
    frames = _frames(path, top, groups)
    return SceneSpec(
        path=path,
        name=sc.string("name", path.stem),
        description=sc.string("description", ""),
        default_index=default_index,
        leafy=sc.boolean("leafy", False),
        split_threshold=split,
        use_view_distance=sc.boolean("use_view_distance", False),
        seed=sc.integer("seed", 0, hi=MAX_SEED),
        position=position,
        target=target,
        fov=fov,
        near=near,
        far=far,
        interpolation=interpolation,
        duration=duration,
        key_times=times,
        key_positions=eyes,
        key_targets=targets,
        groups=groups,
        collision=collision,
        frames=frames,
    )


def _frames(path: Path, top: _Checker, groups: list[GroupSpec]) -> list[FrameSpec]:
    """The [[frame]] tables, validated: unique names, parents named before their children
    (so no cycle), and every group's ``frame`` naming one of them."""
    raw = top.get("frame", [])
    if not isinstance(raw, list):
        top.fail("frame", "an array of [[frame]] tables", raw)
    out: list[FrameSpec] = []
    names: set[str] = set()
    for i, t in enumerate(raw):
        f = _Checker(path, f"frame[{i}]", t, FRAME_KEYS)
        name = f.string("name")
        if name in names:
            f.fail("name", "a unique frame name", name)
        parent = f.string("parent") if f.has("parent") else None
        if parent is not None and parent not in names:
            f.fail("parent", "the name of a [[frame]] listed before this one", parent)
        axis = f.vec3("turn_axis", [0.0, 1.0, 0.0])
        norm = float(np.linalg.norm(axis))
        if norm < 1e-9:
            f.fail("turn_axis", "a non-zero axis", axis.tolist())
        copies = f.integer("copies", 1, lo=1, hi=MAX_COPIES)
        out.append(FrameSpec(
            name=name, parent=parent, position=f.vec3("position", [0.0, 0.0, 0.0]),
            rotation=f.vec3("rotation", [0.0, 0.0, 0.0], limit=3600.0),
            scale=f.number("scale", 1.0, lo=1e-6, hi=1e6),
            copies=copies, ring_radius=f.number("ring_radius", 0.0, lo=0.0, hi=COORD_LIMIT),
            turn_axis=axis / norm, turn_speed=f.number("turn_speed", 0.0, lo=-1e4, hi=1e4)))
        names.add(name)
    for i, g in enumerate(groups):
        if g.frame is not None and g.frame not in names:
            raise SceneError(f"{path}: group[{i}].frame: expected the name of a [[frame]] "
                             f"({', '.join(sorted(names)) or 'none defined'}), got {g.frame!r}")
        if g.frame is not None and g.motion == "collide":
            raise SceneError(f"{path}: group[{i}].motion: expected a motion other than "
                             "\"collide\" in a [[frame]] (colliding balls live in the world)")
    return out


def _collision(path: Path, top: _Checker, groups: list[GroupSpec],
               known_indexes: tuple[str, ...]) -> CollisionSpec | None:
    """The [collision] table, validated; None when no group collides (the table then is an
    error: it would do nothing)."""
    colliding = [g for g in groups if g.motion == "collide"]
    if not colliding:
        if top.has("collision"):
            top.fail("collision", 'a group with motion = "collide" (the table applies to those)')
        return None
    c = _Checker(path, "collision", top.get("collision", {}), COLLISION_KEYS)
    lo = hi = None
    if c.has("bounds"):
        b = c.get("bounds")
        if not isinstance(b, list) or len(b) != 2:
            c.fail("bounds", "[[xmin, ymin, zmin], [xmax, ymax, zmax]]", b)
        lo, hi = c.vec3("bounds[0]", value=b[0]), c.vec3("bounds[1]", value=b[1])
        if np.any(lo >= hi):
            c.fail("bounds", "min < max on every axis", b)
    index = c.string("index", None, choices=known_indexes) if c.has("index") else None
    return CollisionSpec(lo=lo, hi=hi,
                         restitution=c.number("restitution", 1.0, lo=0.0, hi=1.0),
                         margin=c.number("margin", 0.05, lo=0.0, hi=COORD_LIMIT),
                         index=index, separate=c.boolean("separate", True),
                         scale_box=c.boolean("scale_box", True))


def _check_view(cam: _Checker, fov: float, near: float, far: float, position: np.ndarray,
                target: np.ndarray, path: CameraPath, samples: int = 32) -> None:
    """Refuse a camera whose view planes are unusable at its start pose or on its path."""
    poses = [(position, target)]
    poses += [path.at(t) for t in np.linspace(0.0, path.duration, samples, endpoint=False)]
    problem = view_problem(poses, fov, near, far)
    if problem:
        cam.fail("near", f"near, far and fov that give finite view planes: {problem} "
                 f"(fov {fov:g}, near {near:g}, far {far:g})")


def _keyframes(path: Path, cam: _Checker, position: np.ndarray, target: np.ndarray):
    keys = cam.get("path", [])
    if not isinstance(keys, list):
        cam.fail("path", "an array of [[camera.path]] tables", keys)
    if not keys:
        return np.zeros(1), position[None].copy(), target[None].copy()
    times, eyes, targets = [], [], []
    for i, raw in enumerate(keys):
        k = _Checker(path, f"camera.path[{i}]", raw, KEY_KEYS)
        t = k.number("t", lo=0.0, hi=TIME_LIMIT)
        if i == 0 and t != 0.0:
            k.fail("t", "0 for the first keyframe", t)
        if times and t <= times[-1]:
            k.fail("t", f"a time greater than the previous keyframe's {times[-1]}", t)
        times.append(t)
        eyes.append(k.vec3("position"))
        targets.append(k.vec3("target"))
        if np.allclose(eyes[-1], targets[-1]):
            k.fail("target", "a point different from position", targets[-1].tolist())
    return np.array(times), np.array(eyes), np.array(targets)


def _group(path: Path, i: int, raw: Any) -> GroupSpec:
    g = _Checker(path, f"group[{i}]", raw, GROUP_KEYS)
    dist = g.string("distribution", choices=DISTRIBUTIONS)
    centers = None
    if dist == "box_list":
        c = g.get("centers")
        if not isinstance(c, list) or not c:
            g.fail("centers", "a non-empty list of [x, y, z] points", c)
        centers = np.array([g.vec3(f"centers[{j}]", value=p) for j, p in enumerate(c)])
        count = g.integer("count", len(centers), hi=MAX_COUNT)
        if count != len(centers):
            g.fail("count", f"{len(centers)} (the length of centers)", count)
    else:
        if g.has("centers"):
            g.fail("centers", "no centers list unless distribution = \"box_list\"")
        count = g.integer("count", hi=MAX_COUNT)
    lo, hi = _bounds(g, centers)
    dims = None
    if g.has("dims"):
        if dist != "grid":
            g.fail("dims", "no dims unless distribution = \"grid\"")
        d = g.get("dims")
        if (not isinstance(d, list) or len(d) != 3
                or not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= MAX_DIM
                           for x in d)):
            g.fail("dims", f"a list of 3 integers >= 1 and <= {MAX_DIM:,}", d)
        dims = np.array(d, dtype=np.int64)
        if count > int(np.prod(dims)):
            g.fail("count", f"at most {int(np.prod(dims))} (the grid's dims)", count)
    motion = g.string("motion", "static", choices=GROUP_MOTIONS)
    if motion == "lissajous_drift" and dist != "lissajous":
        g.fail("motion", "lissajous_drift only with distribution = \"lissajous\"", motion)
    lane_axis = AXES[g.string("lane_axis", "x", choices=("x", "z"))]
    default_dir = "xyz"[lane_axis] if dist == "lanes" else "x"
    vd_rule, vd_value = _view_distance(g)
    return GroupSpec(
        name=g.string("name", f"group{i}"),
        count=count,
        # A list of explicit centers or a grid of given dims cannot be rescaled.
        fixed=g.boolean("fixed", False) or dist == "box_list" or dims is not None,
        distribution=dist,
        lo=lo,
        hi=hi,
        radius=g.range_("radius", 0.5),
        view_distance=vd_rule,
        view_distance_value=vd_value,
        motion=motion,
        speed=g.range_("speed", 1.0, hi=SPEED_LIMIT),
        turn=g.number("turn", 1.0, lo=0.0, hi=TURN_LIMIT),
        direction=AXES[g.string("direction", default_dir, choices=("x", "y", "z"))],
        moving_fraction=g.number("moving_fraction", 1.0, lo=0.0, hi=1.0),
        mesh=g.string("mesh", "cube", choices=MESH_KINDS),
        color=_color(g),
        dims=dims,
        centers=centers,
        lane_axis=lane_axis,
        lane_count=g.integer("lane_count", 5, lo=1, hi=MAX_DIM),
        lane_jitter=g.number("lane_jitter", 0.0, lo=0.0, hi=COORD_LIMIT),
        frame=g.string("frame") if g.has("frame") else None,
    )


def _bounds(g: _Checker, centers: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if g.has("bounds"):
        if g.has("center") or g.has("size"):
            g.fail("bounds", "either bounds or center and size, not both")
        b = g.get("bounds")
        if not isinstance(b, list) or len(b) != 2:
            g.fail("bounds", "[[xmin, ymin, zmin], [xmax, ymax, zmax]]", b)
        lo, hi = g.vec3("bounds[0]", value=b[0]), g.vec3("bounds[1]", value=b[1])
        if np.any(lo > hi):
            g.fail("bounds", "min <= max on every axis", b)
        return lo, hi
    if not g.has("size"):
        if centers is not None:  # an explicit list spans its own box
            return centers.min(axis=0), centers.max(axis=0)
        g.fail("bounds", "the group's box: bounds = [[lo], [hi]], or center and size")
    center = g.vec3("center", [0.0, 0.0, 0.0])
    size = g.get("size")
    if isinstance(size, int | float) and not isinstance(size, bool):
        size = [size, size, size]
    s = g.vec3("size", value=size, limit=2 * COORD_LIMIT)
    if np.any(s < 0):
        g.fail("size", "sizes >= 0", g.get("size"))
    lo, hi = center - s / 2, center + s / 2
    if np.any(np.abs(lo) > COORD_LIMIT) or np.any(np.abs(hi) > COORD_LIMIT):
        g.fail("size", f"a box around center that stays within +-{COORD_LIMIT:g}", g.get("size"))
    return lo, hi


def _view_distance(g: _Checker) -> tuple[str, float]:
    rule = g.get("view_distance", None)
    if isinstance(rule, int | float) and not isinstance(rule, bool):
        return "constant", g.number("view_distance", lo=0.0, hi=VIEW_DISTANCE_LIMIT,
                                    open_lo=True)
    if rule is None:
        rule = "factor" if g.has("view_distance_factor") else (
            "constant" if g.has("view_distance_value") else "none")
    else:
        rule = g.string("view_distance", choices=VIEW_DISTANCE_RULES)
    if rule == "constant":
        if g.has("view_distance_factor"):
            g.fail("view_distance_factor", "no factor with view_distance = \"constant\"")
        return rule, g.number("view_distance_value", lo=0.0, hi=VIEW_DISTANCE_LIMIT,
                              open_lo=True)
    if rule == "factor":
        if g.has("view_distance_value"):
            g.fail("view_distance_value", "no value with view_distance = \"factor\"")
        return rule, g.number("view_distance_factor", lo=0.0, hi=VIEW_FACTOR_LIMIT,
                              open_lo=True)
    for k in ("view_distance_value", "view_distance_factor"):
        if g.has(k):
            g.fail(k, "nothing here when view_distance = \"none\"")
    return "none", math.inf


def _color(g: _Checker) -> tuple[np.ndarray, np.ndarray]:
    v = g.get("color", [0.8, 0.8, 0.8])
    pair = v if isinstance(v, list) and v and isinstance(v[0], list) else [v, v]
    if len(pair) != 2:
        g.fail("color", "[r, g, b] or [[r, g, b], [r, g, b]] with values in [0, 1]", v)
    a, b = g.vec3("color", value=pair[0]), g.vec3("color", value=pair[1])
    if np.any(a < 0) or np.any(a > 1) or np.any(b < 0) or np.any(b > 1):
        g.fail("color", "values in [0, 1]", v)
    return a, b
