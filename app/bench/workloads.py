"""The benchmarks' own workloads: object sets, cameras, per-frame moves, box queries.

Everything is generated from a seed so that every index (and every peer) sees exactly the
same sequence of frames. The paper's four distributions (Shagam chapter 4) come from
``app.scene.distributions`` when that module is present; otherwise the fallbacks below, which
follow the same descriptions, are used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from app.culling.frustum import camera_planes

# ----------------------------------------------------------------- paper distributions

_SEEDS = np.array([[0.25, 0.30, 0.28], [0.72, 0.22, 0.65], [0.50, 0.75, 0.45],
                   [0.20, 0.68, 0.78], [0.80, 0.80, 0.20]])
_LIS_C = np.array([1.0, 1.41421356, 1.73205081])
_LIS_K = np.array([0.0, 0.5, 1.1])


def _uniform(n: int, size: float, rng: np.random.Generator) -> np.ndarray:
    return rng.random((n, 3)) * size


def _clustered(n: int, size: float, rng: np.random.Generator) -> np.ndarray:
    which = rng.integers(0, len(_SEEDS), n)
    bell = rng.random((n, 3, 3)).mean(axis=2) * 2.0 - 1.0  # pseudo-Gaussian, bounded
    return np.clip(_SEEDS[which] + 0.18 * bell, 0.0, 1.0) * size


def _lissajous(n: int, size: float, rng: np.random.Generator) -> np.ndarray:
    t = rng.uniform(0.0, 5000.0, n)
    return (0.5 + 0.5 * np.sin(t[:, None] * _LIS_C + _LIS_K)) * size


def _ball(n: int, rng: np.random.Generator, r_in: float, r_out: float) -> np.ndarray:
    d = rng.normal(size=(n, 3))
    d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    r = np.cbrt(r_in**3 + rng.random(n) * (r_out**3 - r_in**3))
    return d * r[:, None]


def _sphere(n: int, size: float, rng: np.random.Generator) -> np.ndarray:
    shell = _ball(n - n // 2, rng, 0.95 * 0.5, 0.5)
    core = _ball(n // 2, rng, 0.0, 0.5 / 3.0)
    pts = np.concatenate([shell, core]) + 0.5
    return pts[rng.permutation(n)] * size


def paper_distributions() -> dict[str, Callable[[int, float, np.random.Generator], np.ndarray]]:
    """name -> f(n, size, rng) giving (n, 3) centers in [0, size]^3."""
    try:
        from app.scene.distributions import PAPER_DISTRIBUTIONS  # type: ignore

        if set(PAPER_DISTRIBUTIONS) >= {"uniform", "clustered", "lissajous", "sphere"}:
            return {k: PAPER_DISTRIBUTIONS[k] for k in ("uniform", "clustered", "lissajous",
                                                        "sphere")}
    except Exception:  # noqa: BLE001 - the module may be half-written by someone else
        pass
    return {"uniform": _uniform, "clustered": _clustered, "lissajous": _lissajous,
            "sphere": _sphere}


DISTRIBUTIONS = ("uniform", "clustered", "lissajous", "sphere")


def random_directions(n: int, rng: np.random.Generator) -> np.ndarray:
    d = rng.normal(size=(n, 3))
    return d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)


def box_planes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The six inward unit planes of the box [lo, hi] (a sphere passes exactly when its
    bounding box overlaps the box, i.e. the query_box rule)."""
    return np.array([
        [1.0, 0.0, 0.0, -lo[0]], [-1.0, 0.0, 0.0, hi[0]],
        [0.0, 1.0, 0.0, -lo[1]], [0.0, -1.0, 0.0, hi[1]],
        [0.0, 0.0, 1.0, -lo[2]], [0.0, 0.0, -1.0, hi[2]],
    ])


# ----------------------------------------------------------------- reference answers

def frustum_truth(centers: np.ndarray, radii: np.ndarray, planes: np.ndarray,
                  eye: np.ndarray | None = None, vdist: np.ndarray | None = None) -> np.ndarray:
    """Row numbers visible by design.md's definition, evaluated like the compiled predicates
    (``a*cx + b*cy + c*cz + d < -r`` rejects; ``|c - eye| <= vd``)."""
    x = centers[:, 0]
    y = centers[:, 1]
    z = centers[:, 2]
    ok = np.ones(centers.shape[0], dtype=bool)
    for a, b, c, d in planes:
        ok &= ~(a * x + b * y + c * z + d < -radii)
    if vdist is not None and eye is not None:
        dx = x - eye[0]
        dy = y - eye[1]
        dz = z - eye[2]
        ok &= np.sqrt(dx * dx + dy * dy + dz * dz) <= vdist
    return np.flatnonzero(ok)


def box_truth(centers: np.ndarray, radii: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Row numbers whose sphere's bounding box overlaps [lo, hi] (query_box's rule)."""
    x = centers[:, 0]
    y = centers[:, 1]
    z = centers[:, 2]
    ok = ((x - radii <= hi[0]) & (x + radii >= lo[0]) & (y - radii <= hi[1])
          & (y + radii >= lo[1]) & (z - radii <= hi[2]) & (z + radii >= lo[2]))
    return np.flatnonzero(ok)


@njit(cache=True)
def _truth_mask(c, r, vd, alive, planes, eye, use_vd, out):  # pragma: no cover - compiled
    """``out[i]``: row i is alive and visible by the definition, evaluated exactly like
    :func:`frustum_truth` (same float64 expressions, no fastmath), over every row at once."""
    for i in range(c.shape[0]):
        ok = alive[i]
        if ok:
            x = c[i, 0]
            y = c[i, 1]
            z = c[i, 2]
            for p in range(planes.shape[0]):
                if planes[p, 0] * x + planes[p, 1] * y + planes[p, 2] * z + planes[p, 3] < -r[i]:
                    ok = False
                    break
            if ok and use_vd:
                dx = x - eye[0]
                dy = y - eye[1]
                dz = z - eye[2]
                ok = math.sqrt(dx * dx + dy * dy + dz * dz) <= vd[i]
        out[i] = ok


# ----------------------------------------------------------------- index-bench workloads

#: The motion patterns of ``bench index`` (issue 24), in the order they run on one index.
#: Patterns whose every frame moves a fresh random set: each mover costs a few cache misses
#: that no layout avoids (the id's look-up, its store row, its float32 record), so the ratio
#: any index can reach is bounded by the *floor*: the faster compiled brute force's frame over
#: its own update (what writing that batch costs it). Where a workload sets ``fresh_target``
#: they are judged against that bound instead of the workload's target.
FRESH_PATTERNS = ("churn100",)
#: How far below the measured floor a fresh-movers pattern may stay (issue 24: within 1.5x).
FLOOR_SLACK = 1.5

PATTERNS = ("fixed", "order", "churn10", "churn100", "sizes", "turn", "fly", "teleport", "spawn")
#: Patterns that move the camera (planes and eye change every frame).
CAMERA_PATTERNS = ("turn", "fly")
#: Patterns that do not apply when every object moves every frame, and why.
NOT_FOR_MOVING = {"churn10": "every object already moves every frame",
                  "churn100": "every object already moves every frame"}
TURN_DEG = 3.0  # camera yaw per frame of `turn`
FLY_FRAC = 0.01  # eye advance per frame of `fly`, as a fraction of the far plane
SIZE_JITTER = 0.03  # `sizes`: radii / view distances change by up to this fraction
TELEPORT_FRAC = 0.01  # `teleport`: fraction of the movers that jump anywhere
SPAWN_FRAC = 0.001  # `spawn`: fraction of the live objects removed and inserted anew


@dataclass
class Frame:
    """One frame's calls: ``remove``, ``insert``, ``update`` (centres, maybe radii and view
    distances), then ``query_frustum`` with ``planes``/``eye`` (None: the workload's camera)."""

    ids: np.ndarray
    centers: np.ndarray
    radii: np.ndarray | None = None
    vdist: np.ndarray | None = None
    remove: np.ndarray | None = None
    insert: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None] | None = None
    planes: np.ndarray | None = None
    eye: np.ndarray | None = None
    truth: np.ndarray | None = None  # sorted visible ids after the frame


@dataclass
class Segment:
    """A run of frames of one motion pattern; ``na`` says why the pattern does not apply."""

    pattern: str
    frames: list[Frame] = field(default_factory=list)
    na: str = ""


@dataclass
class Phase:
    """Objects inserted at once (remote inserts a second phase: the far cluster)."""

    ids: np.ndarray
    centers: np.ndarray
    radii: np.ndarray
    vdist: np.ndarray | None
    first_truth: np.ndarray | None = None  # visible ids right after the insert


@dataclass
class Workload:
    """Objects, the base camera, and the frames: ``base_frames`` run between the phases
    (remote: the figures without the cluster), then ``segments`` one pattern after another."""

    name: str
    description: str
    planes: np.ndarray
    eye: np.ndarray
    use_vd: bool
    phases: list[Phase]
    segments: list[Segment] = field(default_factory=list)
    base_frames: list[Frame] = field(default_factory=list)
    target: float | None = None  # speed-up over the faster compiled brute force asked for
    growth_target: float | None = None  # remote: query-time growth allowed
    # The fresh-movers patterns' target (``FRESH_PATTERNS``: every frame's movers a new random
    # set): at least this, and at least the measured floor / ``FLOOR_SLACK`` (issue 24, item 2)
    fresh_target: float | None = None
    far: float = 300.0

    @property
    def n(self) -> int:
        return int(sum(p.ids.shape[0] for p in self.phases))


def _camera(side: float, far: float) -> tuple[np.ndarray, np.ndarray]:
    eye = np.full(3, side / 2.0)
    planes = camera_planes(eye, eye + np.array([1.0, 0.0, 0.0]), fovy_deg=60.0,
                           aspect=16 / 9, near=0.1, far=far)
    return planes, eye


class _State:
    """The objects as the index should hold them (rows == ids), their motion, the truth."""

    def __init__(self, cap: int, side: float, use_vd: bool, rng: np.random.Generator,
                 radii_range: tuple[float, float], moving: bool) -> None:
        self.c = np.zeros((cap, 3))
        self.r = np.zeros(cap)
        self.vd = np.full(cap, np.inf)
        self.alive = np.zeros(cap, dtype=bool)
        self.seen = np.zeros(cap, dtype=bool)
        self.vel = np.zeros((cap, 3)) if moving else None
        self.side = side
        self.use_vd = use_vd
        self.rng = rng
        self.radii_range = radii_range
        self.next_id = 0

    def add(self, ids: np.ndarray, c: np.ndarray, r: np.ndarray, vd: np.ndarray | None) -> None:
        self.c[ids] = c
        self.r[ids] = r
        self.vd[ids] = np.inf if vd is None else vd
        self.alive[ids] = True
        if self.vel is not None:
            self.vel[ids] = random_directions(ids.shape[0], self.rng) * self.rng.uniform(
                0.1, 1.0, ids.shape[0])[:, None]
        self.next_id = max(self.next_id, int(ids.max()) + 1 if ids.size else 0)

    def move(self, ids: np.ndarray) -> np.ndarray:
        """New centres of ``ids`` (a random walk, or velocity + bounce when all move)."""
        if self.vel is None:
            pos = self.c[ids] + self.rng.normal(scale=0.3, size=(ids.shape[0], 3))
        else:
            pos = self.c[ids] + self.vel[ids]
            lo = pos < 0.0
            hi = pos > self.side
            pos = np.where(lo, -pos, np.where(hi, 2 * self.side - pos, pos))
            self.vel[ids] = np.where(lo | hi, -self.vel[ids], self.vel[ids])
        self.c[ids] = pos
        return pos

    def sample_live(self, k: int, exclude: np.ndarray | None = None) -> np.ndarray:
        """``k`` distinct random live ids, none where ``exclude`` (a mask over ids) is set."""
        ok = self.alive if exclude is None else self.alive & ~exclude
        pool = np.flatnonzero(ok[: self.next_id])
        return np.sort(self.rng.choice(pool, min(k, pool.shape[0]), replace=False))

    def full_truth(self, planes: np.ndarray, eye: np.ndarray) -> None:
        _truth_mask(self.c, self.r, self.vd, self.alive, planes, eye, self.use_vd, self.seen)

    def retest(self, ids: np.ndarray, planes: np.ndarray, eye: np.ndarray) -> None:
        sub = frustum_truth(self.c[ids], self.r[ids], planes, eye,
                            self.vd[ids] if self.use_vd else None)
        self.seen[ids] = False
        self.seen[ids[sub]] = self.alive[ids[sub]]

    def truth(self) -> np.ndarray:
        return np.flatnonzero(self.seen)


def _rotate_y(d: np.ndarray, deg: float) -> np.ndarray:
    a = math.radians(deg)
    return np.array([d[0] * math.cos(a) + d[2] * math.sin(a), d[1],
                     -d[0] * math.sin(a) + d[2] * math.cos(a)])


def _segment(st: _State, pattern: str, nframes: int, movers: np.ndarray | None,
             planes0: np.ndarray, eye0: np.ndarray, far: float) -> Segment:
    """``nframes`` frames of ``pattern``, applied to ``st`` as they are made, each with its
    truth. ``movers`` None: every live object moves every frame."""
    rng = st.rng
    seg = Segment(pattern)
    cur = movers
    direction = np.array([1.0, 0.0, 0.0])
    eye = eye0.copy()
    static_cam = pattern not in CAMERA_PATTERNS
    if static_cam:
        st.full_truth(planes0, eye0)
    for f in range(nframes):
        fr_remove = fr_insert = None
        if pattern == "spawn":
            k = max(1, int(round(SPAWN_FRAC * int(st.alive.sum()))))
            excl = np.zeros(st.alive.shape[0], dtype=bool)
            if movers is not None:
                excl[movers] = True
            fr_remove = st.sample_live(k, excl)
            st.alive[fr_remove] = False
            st.seen[fr_remove] = False
            new = np.arange(st.next_id, st.next_id + fr_remove.shape[0], dtype=np.int64)
            c = rng.random((new.shape[0], 3)) * st.side
            r = rng.uniform(*st.radii_range, new.shape[0])
            vd = 40.0 * r if st.use_vd else None
            st.add(new, c, r, vd)
            fr_insert = (new, c, r, vd)
        if movers is None:
            ids = np.flatnonzero(st.alive[: st.next_id]).astype(np.int64)
        elif pattern in ("churn10", "churn100"):
            m = movers.shape[0]
            if pattern == "churn100":
                cur = st.sample_live(m)
            else:
                k = max(1, int(round(0.1 * m)))
                keep = np.sort(rng.choice(cur, m - k, replace=False))
                excl = np.zeros(st.alive.shape[0], dtype=bool)
                excl[cur] = True
                cur = np.sort(np.concatenate([keep, st.sample_live(k, excl)]))
            ids = cur
        else:
            ids = movers
        if pattern == "order":
            ids = ids[rng.permutation(ids.shape[0])]
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        c = st.move(ids)
        if pattern == "teleport":
            j = rng.choice(ids.shape[0], max(1, int(TELEPORT_FRAC * ids.shape[0])), replace=False)
            c[j] = rng.random((j.shape[0], 3)) * st.side
            st.c[ids[j]] = c[j]
        fr = Frame(ids, c, remove=fr_remove, insert=fr_insert)
        if pattern == "sizes":
            # half the frames carry the unchanged values, the other half change by a little
            jit = 1.0 + (f % 2) * rng.uniform(-SIZE_JITTER, SIZE_JITTER, ids.shape[0])
            fr.radii = st.r[ids] * jit
            st.r[ids] = fr.radii
            if st.use_vd:
                jit = 1.0 + (f % 2) * rng.uniform(-SIZE_JITTER, SIZE_JITTER, ids.shape[0])
                fr.vdist = st.vd[ids] * jit
                st.vd[ids] = fr.vdist
        if static_cam:
            planes, eye = planes0, eye0
            if movers is None:
                st.full_truth(planes, eye)
            else:
                st.retest(ids if fr_insert is None else np.concatenate([ids, fr_insert[0]]),
                          planes, eye)
        else:
            if pattern == "turn":
                direction = _rotate_y(direction, TURN_DEG)
            else:
                eye = eye + direction * (FLY_FRAC * far)
            planes = camera_planes(eye, eye + direction, fovy_deg=60.0, aspect=16 / 9,
                                   near=0.1, far=far)
            fr.planes, fr.eye = planes, eye.copy()
            st.full_truth(planes, eye)
        fr.truth = st.truth()
        seg.frames.append(fr)
    return seg


def _build(name: str, description: str, planes: np.ndarray, eye: np.ndarray, use_vd: bool,
           phases: list[Phase], st: _State, movers: np.ndarray | None, frames: int,
           patterns: tuple[str, ...], far: float, base: bool = False, **kw) -> Workload:
    """Insert the phases into ``st`` and make the (base and) pattern frames with their truth."""
    wl = Workload(name, description, planes, eye, use_vd, [], far=far, **kw)
    for i, ph in enumerate(phases):
        st.add(ph.ids, ph.centers, ph.radii, ph.vdist)
        st.full_truth(planes, eye)
        ph.first_truth = st.truth()
        wl.phases.append(ph)
        if base and i == 0 and len(phases) > 1:
            wl.base_frames = _segment(st, "fixed", frames, movers, planes, eye, far).frames
    for p in patterns:
        if movers is None and p in NOT_FOR_MOVING:
            wl.segments.append(Segment(p, na=NOT_FOR_MOVING[p]))
            continue
        wl.segments.append(_segment(st, p, frames, movers, planes, eye, far))
    return wl


def _spawn_room(n: int, frames: int, patterns: tuple[str, ...]) -> int:
    """Rows to reserve for the objects that `spawn` inserts."""
    return (max(1, int(round(SPAWN_FRAC * n))) + 1) * frames if "spawn" in patterns else 0


def _static_phase(n: int, side: float, rng: np.random.Generator, with_vd: bool, id0: int = 0,
                  radii_range: tuple[float, float] = (0.3, 3.0)) -> Phase:
    centers = rng.random((n, 3)) * side
    radii = rng.uniform(*radii_range, n)
    vd = 40.0 * radii if with_vd else None
    return Phase(np.arange(id0, id0 + n, dtype=np.int64), centers, radii, vd)


def make_workload(name: str, scale: float = 1.0, frames: int = 20, seed: int = 1,
                  patterns: tuple[str, ...] | list[str] | None = None) -> Workload:
    """The index-bench workloads (issues 2, 3 and 24), each followed by its motion patterns.

    ``scale`` < 1 shrinks the object counts and the cube's volume alike, so densities and
    visible fractions stay comparable; every segment has ``frames`` measured frames after a
    warm-up frame; ``patterns`` (default all, run in :data:`PATTERNS` order) selects segments.
    """
    rng = np.random.default_rng(seed)
    lin = scale ** (1.0 / 3.0)
    pats = tuple(p for p in PATTERNS if patterns is None or p in patterns)
    if patterns is not None:
        bad = [p for p in patterns if p not in PATTERNS]
        if bad:
            raise ValueError(f"unknown pattern {bad[0]!r}")
    frames = frames + 1  # frame 0 of every segment is its warm-up
    if name in ("static", "viewdist", "remote"):
        n = max(1000, int(1_000_000 * scale))
        side = 1000.0 * lin
        far = 300.0 * lin
        planes, eye = _camera(side, far)
        with_vd = name != "static"
        ph = _static_phase(n, side, rng, with_vd)
        phases = [ph]
        if name == "remote":
            # Phase 2: as many more in a dense cluster 3,000 units away, far beyond every
            # object's view distance (at most 120) and the far plane.
            centre = eye + np.array([3000.0, 0.0, 0.0])
            c2 = centre + rng.normal(scale=30.0 * lin, size=(n, 3))
            r2 = rng.uniform(0.3, 3.0, n)
            phases.append(Phase(np.arange(n, 2 * n, dtype=np.int64), c2, r2, 40.0 * r2))
        movers = np.sort(rng.choice(n, max(1, n // 100), replace=False)).astype(np.int64)
        total = sum(p.ids.shape[0] for p in phases)
        st = _State(total + _spawn_room(total, frames, pats), side, with_vd, rng, (0.3, 3.0),
                    moving=False)
        desc = {
            "static": f"{n:,} uniform in a {side:.0f}-unit cube, radii 0.3-3, 1% moving, "
                      f"60° camera at the centre, far {far:.0f}",
            "viewdist": "as static, view distance 40 x radius, use_view_distance=True",
            "remote": f"viewdist scene, then {n:,} more in a cluster 3,000 units away",
        }[name]
        target = {"static": 2.0, "viewdist": 3.0, "remote": None}[name]
        return _build(name, desc, planes, eye, with_vd, phases, st, movers, frames, pats, far,
                      base=True, target=target,
                      growth_target=1.10 if name == "remote" else None)
    if name == "moving":
        n = max(1000, int(100_000 * scale))
        side = 215.0 * lin
        far = 300.0 * lin
        planes, eye = _camera(side, far)
        ph = _static_phase(n, side, rng, False)
        st = _State(n + _spawn_room(n, frames, pats), side, False, rng, (0.3, 3.0), moving=True)
        return _build("moving", f"{n:,} in a {side:.0f}-unit cube, radii 0.3-3, all moving "
                      "every frame (0.1-1 unit)", planes, eye, False, [ph], st, None, frames,
                      pats, far, target=0.9)
    if name == "world":
        # Matthews' vast world: ten times the static scene's objects at the same density,
        # small (radii 0.1-1) with view distance 40 x radius, 0.1 % of them moving.
        n = max(1000, int(10_000_000 * scale))
        side = 1000.0 * (10.0 * scale) ** (1.0 / 3.0)
        far = 300.0 * lin
        planes, eye = _camera(side, far)
        ph = _static_phase(n, side, rng, True, radii_range=(0.1, 1.0))
        movers = np.sort(rng.choice(n, max(1, n // 1000), replace=False)).astype(np.int64)
        st = _State(n + _spawn_room(n, frames, pats), side, True, rng, (0.1, 1.0),
                    moving=False)
        return _build("world", f"{n:,} uniform in a {side:.0f}-unit cube, radii 0.1-1, view "
                      "distance 40 x radius, 0.1% moving, use_view_distance=True", planes, eye,
                      True, [ph], st, movers, frames, pats, far, target=30.0,
                      fresh_target=8.0)
    raise ValueError(f"unknown workload {name!r}")


WORKLOADS = ("static", "moving", "viewdist", "remote", "world")
