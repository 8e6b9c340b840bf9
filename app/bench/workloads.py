"""The benchmarks' own workloads: object sets, cameras, per-frame moves, box queries.

Everything is generated from a seed so that every index (and every peer) sees exactly the
same sequence of frames. The paper's four distributions (Shagam chapter 4) come from
``app.scene.distributions`` when that module is present; otherwise the fallbacks below, which
follow the same descriptions, are used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

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


# ----------------------------------------------------------------- index-bench workloads

@dataclass
class Phase:
    """Objects to insert, then frames of (ids, new centers) moves."""

    ids: np.ndarray
    centers: np.ndarray
    radii: np.ndarray
    vdist: np.ndarray | None
    frames: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    truth: list[np.ndarray] = field(default_factory=list)  # sorted visible ids per frame
    first_truth: np.ndarray | None = None  # visible ids right after the insert


@dataclass
class Workload:
    name: str
    description: str
    planes: np.ndarray
    eye: np.ndarray
    use_vd: bool
    phases: list[Phase]
    target: float | None = None  # speed-up over the faster compiled brute force asked for
    growth_target: float | None = None  # remote: query-time growth allowed

    @property
    def n(self) -> int:
        return int(sum(p.ids.shape[0] for p in self.phases))


def _camera(side: float, far: float) -> tuple[np.ndarray, np.ndarray]:
    eye = np.full(3, side / 2.0)
    planes = camera_planes(eye, eye + np.array([1.0, 0.0, 0.0]), fovy_deg=60.0,
                           aspect=16 / 9, near=0.1, far=far)
    return planes, eye


def _finish(wl: Workload) -> Workload:
    """Compute the reference visible set of every frame (row number == id here).

    The camera never moves, so only moved rows can change their verdict: the full test runs
    once per phase and every frame re-tests its moved rows only (10^7 objects stay cheap).
    """
    centers = np.concatenate([p.centers for p in wl.phases])
    radii = np.concatenate([p.radii for p in wl.phases])
    vd = None
    if wl.use_vd:
        vd = np.concatenate([p.vdist if p.vdist is not None else np.full(p.ids.shape[0], np.inf)
                             for p in wl.phases])
    cur = 0
    for p in wl.phases:
        cur += p.ids.shape[0]
        c, r = centers[:cur], radii[:cur]
        v = vd[:cur] if vd is not None else None
        seen = np.zeros(cur, dtype=bool)
        seen[frustum_truth(c, r, wl.planes, wl.eye, v)] = True
        p.first_truth = np.flatnonzero(seen)
        for ids, newc in p.frames:
            centers[ids] = newc
            seen[ids] = False
            sub = frustum_truth(centers[ids], radii[ids], wl.planes, wl.eye,
                                None if vd is None else vd[ids])
            seen[ids[sub]] = True
            p.truth.append(np.flatnonzero(seen))
    return wl


def _static_phase(n: int, side: float, rng: np.random.Generator, frames: int,
                  with_vd: bool, id0: int = 0, mover_frac: float = 0.01,
                  radii_range: tuple[float, float] = (0.3, 3.0)) -> Phase:
    centers = rng.random((n, 3)) * side
    radii = rng.uniform(*radii_range, n)
    vd = 40.0 * radii if with_vd else None
    ids = np.arange(id0, id0 + n, dtype=np.int64)
    m = max(1, int(n * mover_frac))
    movers = np.sort(rng.choice(n, m, replace=False))
    pos = centers[movers].copy()
    ph = Phase(ids, centers, radii, vd)
    for _ in range(frames):
        pos = pos + rng.normal(scale=0.3, size=pos.shape)  # "a little": ~0.5 unit per frame
        ph.frames.append((ids[movers], pos.copy()))
    return ph


def make_workload(name: str, scale: float = 1.0, frames: int = 20, seed: int = 1) -> Workload:
    """The index-bench workloads (issue 2 and 3). ``scale`` < 1 shrinks the object counts and
    the cube's volume alike, so densities and visible fractions stay comparable."""
    rng = np.random.default_rng(seed)
    lin = scale ** (1.0 / 3.0)
    frames = frames + 1  # frame 0 is the warm-up
    if name in ("static", "viewdist", "remote"):
        n = max(1000, int(1_000_000 * scale))
        side = 1000.0 * lin
        planes, eye = _camera(side, 300.0 * lin)
        with_vd = name != "static"
        ph = _static_phase(n, side, rng, frames, with_vd)
        phases = [ph]
        if name == "remote":
            # Phase 2: a million more in a dense cluster 3,000 units away, far beyond every
            # object's view distance (at most 120) and the far plane.
            m = n
            centre = eye + np.array([3000.0, 0.0, 0.0])
            c2 = centre + rng.normal(scale=30.0 * lin, size=(m, 3))
            r2 = rng.uniform(0.3, 3.0, m)
            ph2 = Phase(np.arange(n, n + m, dtype=np.int64), c2, r2, 40.0 * r2)
            # Same movers as phase 1, continuing from where they stopped.
            last_ids, pos = ph.frames[-1]
            for _ in range(frames):
                pos = pos + rng.normal(scale=0.3, size=pos.shape)
                ph2.frames.append((last_ids, pos.copy()))
            phases.append(ph2)
        desc = {
            "static": f"{n:,} uniform in a {side:.0f}-unit cube, radii 0.3-3, 1% moving, "
                      f"60° camera at the centre, far {300 * lin:.0f}",
            "viewdist": "as static, view distance 40 x radius, use_view_distance=True",
            "remote": f"viewdist scene, then {n:,} more in a cluster 3,000 units away",
        }[name]
        target = {"static": 2.0, "viewdist": 3.0, "remote": None}[name]
        wl = Workload(name, desc, planes, eye, with_vd, phases, target=target,
                      growth_target=1.10 if name == "remote" else None)
        return _finish(wl)
    if name == "moving":
        n = max(1000, int(100_000 * scale))
        side = 215.0 * lin
        planes, eye = _camera(side, 300.0 * lin)
        centers = rng.random((n, 3)) * side
        radii = rng.uniform(0.3, 3.0, n)
        ids = np.arange(n, dtype=np.int64)
        vel = random_directions(n, rng) * rng.uniform(0.1, 1.0, n)[:, None]
        ph = Phase(ids, centers, radii, None)
        pos = centers.copy()
        for _ in range(frames):
            pos = pos + vel
            out_lo = pos < 0.0
            out_hi = pos > side
            pos = np.where(out_lo, -pos, np.where(out_hi, 2 * side - pos, pos))
            vel = np.where(out_lo | out_hi, -vel, vel)
            ph.frames.append((ids, pos.copy()))
        wl = Workload("moving", f"{n:,} in a {side:.0f}-unit cube, radii 0.3-3, all moving "
                      "every frame (0.1-1 unit)", planes, eye, False, [ph], target=1.0)
        return _finish(wl)
    if name == "world":
        # Matthews' vast world: ten times the static scene's objects at the same density,
        # small (radii 0.1-1) with view distance 40 x radius, 0.1 % of them moving.
        n = max(1000, int(10_000_000 * scale))
        side = 1000.0 * (10.0 * scale) ** (1.0 / 3.0)
        planes, eye = _camera(side, 300.0 * lin)
        ph = _static_phase(n, side, rng, frames, True, mover_frac=0.001,
                           radii_range=(0.1, 1.0))
        wl = Workload("world", f"{n:,} uniform in a {side:.0f}-unit cube, radii 0.1-1, view "
                      "distance 40 x radius, 0.1% moving, use_view_distance=True", planes, eye,
                      True, [ph], target=30.0)
        return _finish(wl)
    raise ValueError(f"unknown workload {name!r}")


WORKLOADS = ("static", "moving", "viewdist", "remote", "world")
