"""Per-frame motion models, vectorized over one group's moving rows.

Each model owns the state of its rows (velocities, curve parameters) and moves the rows of the
shared ``centers`` array in place. Every model keeps its objects inside its box: bounce and
wrap fold positions back, orbit preserves the distance to its axis, and Lissajous drift stays
on its curve.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.scene.distributions import in_box, lissajous_curve

MOTIONS = ("static", "random_walk", "linear_bounce", "linear_wrap", "orbit", "lissajous_drift")
AXES = {"x": 0, "y": 1, "z": 2}


def fold(x: np.ndarray, v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
    """Reflect positions into [lo, hi] in place, flipping velocity where reflected.

    Works for any step length (a triangle wave), so a long frame cannot tunnel out.
    """
    span = hi - lo
    flat = span <= 0
    period = np.where(flat, 1.0, 2.0 * span)
    y = np.mod(x - lo, period)
    back = y > span
    y = np.where(back, period - y, y)
    x[...] = np.where(flat, lo, lo + y)
    v[...] = np.where(back, -v, v)


def _unit_vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    d = rng.normal(size=(n, 3))
    return d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)


def _planar(d: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Zero the components along flat axes of the box (a plane of grass stays a plane)."""
    d = d * (hi > lo)
    norm = np.linalg.norm(d, axis=1, keepdims=True)
    return np.where(norm > 1e-12, d / np.maximum(norm, 1e-12), 0.0)


class Motion:
    """Base: moves nothing."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    def step(self, centers: np.ndarray, dt: float, rng: np.random.Generator) -> None:
        """Advance the group's rows of ``centers`` by ``dt`` seconds."""


@njit(cache=True)
def _walk(centers, rows, vel, speeds, noise, lo, hi, dt):  # pragma: no cover - compiled
    """One random-walk step over the rows: jitter heading, keep speed, move, bounce."""
    for i in range(rows.shape[0]):
        r = rows[i]
        s = speeds[i]
        inv = 1.0 / s if s > 1e-12 else 0.0
        h = np.empty(3)
        norm = 0.0
        for a in range(3):
            # A flat axis of the box (a plane of grass) gets no heading at all.
            h[a] = (vel[i, a] * inv + noise[i, a]) if hi[a] > lo[a] else 0.0
            norm += h[a] * h[a]
        norm = np.sqrt(norm)
        for a in range(3):
            v = h[a] / norm * s if norm > 1e-12 else 0.0
            x = centers[r, a] + v * dt
            span = hi[a] - lo[a]
            if span <= 0.0:
                x = lo[a]
            else:
                # Triangle-wave fold: any step length lands back inside [lo, hi].
                y = (x - lo[a]) % (2.0 * span)
                if y > span:
                    y = 2.0 * span - y
                    v = -v
                x = lo[a] + y
            centers[r, a] = x
            vel[i, a] = v


class RandomWalk(Motion):
    """Constant speed, direction jittered every frame (Brownian heading), bouncing off walls."""

    def __init__(self, rows, speeds, lo, hi, rng, turn: float = 1.0) -> None:
        super().__init__(rows)
        self.lo, self.hi, self.turn = lo, hi, turn
        self.speeds = np.ascontiguousarray(speeds, dtype=np.float64)
        self.vel = _planar(_unit_vectors(len(rows), rng), lo, hi) * self.speeds[:, None]

    def step(self, centers, dt, rng):
        n = len(self.rows)
        if n == 0:
            return
        # Heading noise scales with sqrt(dt) so the walk's statistics do not depend on frame rate.
        noise = rng.normal(size=(n, 3)) * (self.turn * np.sqrt(dt))
        _walk(centers, self.rows, self.vel, self.speeds, noise, self.lo, self.hi, dt)


class LinearBounce(Motion):
    """Straight lines at constant velocity, reflecting off the box walls."""

    def __init__(self, rows, speeds, lo, hi, rng) -> None:
        super().__init__(rows)
        self.lo, self.hi = lo, hi
        self.vel = _planar(_unit_vectors(len(rows), rng), lo, hi) * speeds[:, None]

    def step(self, centers, dt, rng):
        x = centers[self.rows] + self.vel * dt
        fold(x, self.vel, self.lo, self.hi)
        centers[self.rows] = x


class LinearWrap(Motion):
    """Constant velocity along one axis (either sign), wrapping around the box: traffic."""

    def __init__(self, rows, speeds, lo, hi, rng, axis: int) -> None:
        super().__init__(rows)
        self.lo, self.hi, self.axis = lo[axis], hi[axis], axis
        sign = np.where(rng.random(len(rows)) < 0.5, -1.0, 1.0)
        self.vel = sign * speeds

    def step(self, centers, dt, rng):
        span = self.hi - self.lo
        x = centers[self.rows, self.axis] + self.vel * dt
        centers[self.rows, self.axis] = self.lo + np.mod(x - self.lo, span) if span > 0 else x


class Orbit(Motion):
    """Rigid rotation about the vertical axis through ``pivot`` (distance to the axis kept)."""

    def __init__(self, rows, omega: float, pivot: np.ndarray) -> None:
        super().__init__(rows)
        self.omega, self.pivot = omega, pivot

    def step(self, centers, dt, rng):
        a = self.omega * dt
        c, s = np.cos(a), np.sin(a)
        dx = centers[self.rows, 0] - self.pivot[0]
        dz = centers[self.rows, 2] - self.pivot[2]
        centers[self.rows, 0] = self.pivot[0] + c * dx - s * dz
        centers[self.rows, 2] = self.pivot[2] + s * dx + c * dz


class LissajousDrift(Motion):
    """Objects slide along the group's Lissajous loop (their curve parameter advances)."""

    def __init__(self, rows, params, rate: np.ndarray, lo, hi) -> None:
        super().__init__(rows)
        self.params, self.rate, self.lo, self.hi = params, rate, lo, hi

    def step(self, centers, dt, rng):
        self.params = self.params + self.rate * dt
        centers[self.rows] = in_box(lissajous_curve(self.params), self.lo, self.hi)
