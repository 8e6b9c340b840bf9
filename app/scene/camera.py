"""The start camera and its looping keyframe path (Catmull-Rom or linear)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from app.geom.camera import look_at, perspective, planes_from_matrix

#: Aspect ratios a view can have (the viewer's sizes run from 16 to 8192 pixels a side).
ASPECT_RANGE = (16 / 8192, 8192 / 16)


@dataclass
class CameraSpec:
    """Start camera: eye position, look-at target, vertical field of view, clip planes."""

    position: np.ndarray
    target: np.ndarray
    fov_deg: float = 60.0
    near: float = 0.1
    far: float = 1000.0


@dataclass
class CameraPath:
    """Keyframes (times, eyes, targets) looping with period ``duration``."""

    times: np.ndarray  # (K,) strictly increasing, first is 0
    positions: np.ndarray  # (K, 3)
    targets: np.ndarray  # (K, 3)
    duration: float
    interpolation: str = "catmull_rom"  # or "linear"
    _closed: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        # Close the loop with a virtual key equal to the first one at t = duration, unless the
        # author already ended the path on the start key at that time.
        t, p, q = self.times, self.positions, self.targets
        if len(t) and t[-1] < self.duration:
            t = np.append(t, self.duration)
            p = np.vstack([p, p[:1]])
            q = np.vstack([q, q[:1]])
        self.times, self.positions, self.targets = t, p, q
        self._closed = bool(
            len(t) > 1 and np.allclose(p[0], p[-1]) and np.allclose(q[0], q[-1])
        )

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(eye, target) at time t, wrapped into [0, duration)."""
        k = len(self.times)
        if k == 1 or self.duration <= 0:
            return self.positions[0].copy(), self.targets[0].copy()
        t = float(t) % self.duration
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        i = min(max(i, 0), k - 2)
        if self.interpolation == "linear":
            return self._lerp(i, t)
        return self._hermite(i, t)

    def _lerp(self, i: int, t: float) -> tuple[np.ndarray, np.ndarray]:
        t0, t1 = self.times[i], self.times[i + 1]
        u = (t - t0) / (t1 - t0)
        eye = self.positions[i] + u * (self.positions[i + 1] - self.positions[i])
        tgt = self.targets[i] + u * (self.targets[i + 1] - self.targets[i])
        return eye, tgt

    def _neighbour(self, j: int) -> tuple[float, int]:
        """Time and index of key j, extended periodically (closed) or clamped (open)."""
        k = len(self.times)
        if 0 <= j < k:
            return float(self.times[j]), j
        if not self._closed:
            jj = min(max(j, 0), k - 1)
            return float(self.times[jj]), jj
        # Closed loop: key k-1 duplicates key 0, so the period has k-1 distinct keys.
        if j < 0:
            return float(self.times[j + k - 1]) - self.duration, j + k - 1
        return float(self.times[j - k + 1]) + self.duration, j - k + 1

    def _hermite(self, i: int, t: float) -> tuple[np.ndarray, np.ndarray]:
        # Catmull-Rom with tangents divided by the neighbours' time span, so uneven key
        # spacing does not overshoot (a cardinal spline in time).
        (ta, a), (tb, b) = self._neighbour(i - 1), self._neighbour(i + 2)
        t0, t1 = float(self.times[i]), float(self.times[i + 1])
        h = t1 - t0
        u = (t - t0) / h
        h00 = 2 * u**3 - 3 * u**2 + 1
        h10 = u**3 - 2 * u**2 + u
        h01 = -2 * u**3 + 3 * u**2
        h11 = u**3 - u**2
        out = []
        for keys in (self.positions, self.targets):
            p0, p1 = keys[i], keys[i + 1]
            m0 = (p1 - keys[a]) / max(t1 - ta, 1e-12) * h
            m1 = (keys[b] - p0) / max(tb - t0, 1e-12) * h
            out.append(h00 * p0 + h10 * m0 + h01 * p1 + h11 * m1)
        return out[0], out[1]


def _view_matrix(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The viewer's view matrix: world up, or -z when looking straight up or down."""
    d = target - eye
    n = float(np.linalg.norm(d))
    if not np.isfinite(n) or n < 1e-9:
        d, n = np.array([0.0, 0.0, -1.0]), 1.0
        target = eye + d
    up = np.array([0.0, 1.0, 0.0]) if abs(d[1] / n) < 0.999 else np.array([0.0, 0.0, -1.0])
    return look_at(eye, target, up)


def view_planes(eye: np.ndarray, target: np.ndarray, fov_deg: float, aspect: float,
                near: float, far: float) -> np.ndarray:
    """The six planes (left, right, bottom, top, near, far) a camera at this pose culls with,
    built as the viewer builds them."""
    eye = np.asarray(eye, np.float64)
    with np.errstate(all="ignore"):
        return planes_from_matrix(perspective(fov_deg, aspect, near, far)
                                  @ _view_matrix(eye, np.asarray(target, np.float64)))


def view_problem(poses: Iterable[tuple[np.ndarray, np.ndarray]], fov_deg: float, near: float,
                 far: float) -> str | None:
    """Why the view planes are unusable at one of the (eye, target) ``poses`` at any aspect
    the viewer allows (not finite, not unit normals, near/far not where asked), else None."""
    projections = [perspective(fov_deg, aspect, near, far) for aspect in ASPECT_RANGE]
    for eye, target in poses:
        eye = np.asarray(eye, np.float64)
        view = _view_matrix(eye, np.asarray(target, np.float64))
        at = f"at eye {eye.tolist()}, target {np.asarray(target).tolist()}"
        for proj in projections:  # the aspects between the extremes give planes in between
            with np.errstate(all="ignore"):
                p = planes_from_matrix(proj @ view)
            if not np.isfinite(p).all():
                return f"the view planes {at} are not finite"
            if np.any(np.abs(np.linalg.norm(p[:, :3], axis=1) - 1.0) > 1e-6):
                return f"the view planes {at} are degenerate"
            # The eye is `near` behind the near plane and `far` inside the far plane.
            d_near, d_far = -float(p[4, :3] @ eye + p[4, 3]), float(p[5, :3] @ eye + p[5, 3])
            if abs(d_near - near) > 1e-3 * near or abs(d_far - far) > 1e-3 * far:
                return (f"the view planes {at} put near at {d_near:g} and far at {d_far:g} "
                        f"instead of {near:g} and {far:g}")
    return None
