"""Cameras: a fly camera (yaw/pitch) and the matrices the frame needs (no OpenGL)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.culling.frustum import look_at, perspective, planes_from_matrix

MAX_PITCH = math.radians(89.0)


@dataclass
class CameraView:
    """One camera's matrices for a frame (column-vector convention)."""

    eye: np.ndarray
    view: np.ndarray
    proj: np.ndarray
    viewproj: np.ndarray
    planes: np.ndarray

    @classmethod
    def make(cls, eye: np.ndarray, target: np.ndarray, fov_deg: float, aspect: float,
             near: float, far: float) -> CameraView:
        eye = np.asarray(eye, np.float64)
        target = np.asarray(target, np.float64)
        d = target - eye
        if not np.isfinite(d).all() or np.linalg.norm(d) < 1e-9:
            target = eye + np.array([0.0, 0.0, -1.0])
            d = target - eye
        d = d / np.linalg.norm(d)
        up = np.array([0.0, 1.0, 0.0]) if abs(d[1]) < 0.999 else np.array([0.0, 0.0, -1.0])
        view = look_at(eye, target, up)
        proj = perspective(fov_deg, aspect, near, far)
        vp = proj @ view
        return cls(eye=eye, view=view, proj=proj, viewproj=vp, planes=planes_from_matrix(vp))


class FlyCamera:
    """Position plus yaw/pitch; ``forward`` at yaw 0, pitch 0 is -z."""

    def __init__(self, position, target, fov_deg: float = 60.0, near: float = 0.1,
                 far: float = 1000.0) -> None:
        self.position = np.asarray(position, np.float64).copy()
        self.fov_deg = float(fov_deg)
        self.near = float(near)
        self.far = float(far)
        self.yaw = 0.0
        self.pitch = 0.0
        self.look_at(target)

    def look_at(self, target) -> None:
        d = np.asarray(target, np.float64) - self.position
        n = float(np.linalg.norm(d))
        if n < 1e-12:
            return
        d /= n
        self.pitch = max(-MAX_PITCH, min(MAX_PITCH, math.asin(max(-1.0, min(1.0, d[1])))))
        self.yaw = math.atan2(d[0], -d[2])

    def set(self, eye, target) -> None:
        self.position = np.asarray(eye, np.float64).copy()
        self.look_at(target)

    def forward(self) -> np.ndarray:
        cp = math.cos(self.pitch)
        return np.array([cp * math.sin(self.yaw), math.sin(self.pitch), -cp * math.cos(self.yaw)])

    def right(self) -> np.ndarray:
        return np.array([math.cos(self.yaw), 0.0, math.sin(self.yaw)])

    def target(self) -> np.ndarray:
        return self.position + self.forward()

    def rotate(self, dyaw: float, dpitch: float) -> None:
        self.yaw = (self.yaw + dyaw) % (2 * math.pi)
        self.pitch = max(-MAX_PITCH, min(MAX_PITCH, self.pitch + dpitch))

    def move(self, forward: float, right: float, up: float) -> None:
        """Move in the camera's frame: forward along the view direction, up along world y."""
        self.position = (self.position + forward * self.forward() + right * self.right()
                         + up * np.array([0.0, 1.0, 0.0]))

    def view(self, aspect: float) -> CameraView:
        return CameraView.make(self.position, self.target(), self.fov_deg, aspect, self.near,
                               self.far)
