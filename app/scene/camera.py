"""The start camera and its looping keyframe path (Catmull-Rom or linear)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
