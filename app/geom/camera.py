"""Camera math: the view and projection matrices of a perspective camera and the six planes of
the volume it sees (numpy/pyrr, no OpenGL, nothing compiled). The scene's camera path, the
viewer's camera, the culling pipeline and the benchmarks all build their frustums here."""

from __future__ import annotations

import numpy as np
import pyrr


def planes_from_matrix(viewproj: np.ndarray) -> np.ndarray:
    """The six inward-facing unit planes (a, b, c, d) of a view-projection matrix.

    ``viewproj`` maps world points to clip space as column vectors (``clip = M @ [p, 1]``);
    a point is inside when ``a*x + b*y + c*z + d >= 0`` for every row (Gribb & Hartmann).
    Order: left, right, bottom, top, near, far.
    """
    m = np.asarray(viewproj, dtype=np.float64)
    rows = np.array([
        m[3] + m[0], m[3] - m[0],
        m[3] + m[1], m[3] - m[1],
        m[3] + m[2], m[3] - m[2],
    ])
    norms = np.linalg.norm(rows[:, :3], axis=1, keepdims=True)
    return np.ascontiguousarray(rows / norms)


def perspective(fovy_deg: float, aspect: float, near: float, far: float) -> np.ndarray:
    """OpenGL perspective projection (column-vector convention)."""
    return np.asarray(pyrr.matrix44.create_perspective_projection(fovy_deg, aspect, near, far),
                      dtype=np.float64).T


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray = (0.0, 1.0, 0.0)) -> np.ndarray:
    """View matrix (column-vector convention) of a camera at ``eye`` looking at ``target``."""
    m = pyrr.matrix44.create_look_at(
        np.asarray(eye, float), np.asarray(target, float), np.asarray(up, float))
    return np.asarray(m, dtype=np.float64).T


def camera_planes(eye: np.ndarray, target: np.ndarray, fovy_deg: float = 60.0,
                  aspect: float = 16 / 9, near: float = 0.1, far: float = 300.0) -> np.ndarray:
    """Frustum planes of a perspective camera; handy for tests and benchmarks."""
    return planes_from_matrix(perspective(fovy_deg, aspect, near, far) @ look_at(eye, target))
