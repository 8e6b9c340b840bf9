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


def view_depth_range(proj: np.ndarray) -> tuple[float, float]:
    """(near, far) of an OpenGL perspective projection matrix (column-vector convention)."""
    a, b = float(proj[2, 2]), float(proj[2, 3])
    return b / (a - 1.0), b / (a + 1.0)


ORBIT_SPIN = math.radians(8.0)  # radians per second while nobody turns the orbit by hand


class CameraRig:
    """The window's camera: the fly camera, the scene's camera path played in the window (C),
    and the outside orbit around the frozen culling camera (X, Panda3D's ``oobeCull``).

    ``mode`` is ``"fly"``, ``"path"`` (the view follows ``path_at(path_time)``, which advances
    by the frame's dt; flying takes over from the path's pose) or ``"orbit"`` (the view circles
    the frozen frustum, slowly until turned by hand; leaving it restores the fly camera).
    """

    def __init__(self, position, target, fov_deg: float, near: float, far: float,
                 path_at=None, duration: float = 0.0, world_lo=None, world_hi=None) -> None:
        self.fly = FlyCamera(position, target, fov_deg, near, far)
        self.start = (np.asarray(position, np.float64).copy(),
                      np.asarray(target, np.float64).copy())
        self.path_at = path_at
        self.duration = float(duration)
        self.world_lo = None if world_lo is None else np.asarray(world_lo, np.float64)
        self.world_hi = None if world_hi is None else np.asarray(world_hi, np.float64)
        self.mode = "fly"
        self.path_time = 0.0
        self.orbit_center = np.zeros(3)
        self.orbit_radius = 1.0
        self.orbit_yaw = 0.0
        self.orbit_pitch = math.radians(35.0)
        self.orbit_far = far
        self.orbit_spin = ORBIT_SPIN

    @classmethod
    def for_scene(cls, scene) -> CameraRig:
        """The rig of a scene: its start camera, its camera path, its objects' extent."""
        c = scene.camera
        lo = getattr(scene, "world_lo", None)
        hi = getattr(scene, "world_hi", None)
        return cls(c.position, c.target, c.fov_deg, c.near, c.far, scene.camera_at,
                   float(getattr(scene, "duration", 0.0) or 0.0), lo, hi)

    # ------------------------------------------------------------------ modes

    def toggle_path(self) -> bool:
        """Play the camera path from where it stopped, or stop and fly on from its pose;
        returns True when it plays now."""
        if self.path_at is None:
            return False
        if self.mode == "path":
            eye, target = self.path_at(self.path_time)
            self.fly.set(eye, target)
            self.mode = "fly"
            return False
        self.mode = "path"
        return True

    def start_orbit(self, frozen: CameraView) -> None:
        """Circle the frozen culling camera's frustum, seen from behind and above at first."""
        near, far = view_depth_range(frozen.proj)
        eye = np.asarray(frozen.eye, np.float64)
        fwd = -np.asarray(frozen.view[2, :3], np.float64)  # the view matrix's -z row
        fwd /= max(float(np.linalg.norm(fwd)), 1e-12)
        reach = far
        if self.world_lo is not None and self.world_hi is not None:
            mid = (self.world_lo + self.world_hi) / 2
            half = float(np.linalg.norm(self.world_hi - self.world_lo)) / 2
            reach = min(far, float(np.linalg.norm(mid - eye)) + half)
        reach = max(reach, near * 4, 1.0)
        self.orbit_center = eye + fwd * reach * 0.45
        self.orbit_radius = reach * 1.15
        self.orbit_far = self.orbit_radius + reach * 2.5
        heading = math.atan2(fwd[0], -fwd[2])
        self.orbit_yaw = heading + math.radians(215.0)  # behind, to the right
        self.orbit_pitch = math.radians(35.0)
        self.orbit_spin = ORBIT_SPIN
        if self.mode == "path":
            self.toggle_path()
        self.mode = "orbit"

    def stop_orbit(self) -> None:
        if self.mode == "orbit":
            self.mode = "fly"

    def home(self) -> None:
        """Back to the scene's start camera, flying."""
        self.mode = "fly"
        self.fly.set(*self.start)

    # ------------------------------------------------------------------ input

    def take_over(self) -> None:
        """Flying input during the path: stop it and fly on from its pose."""
        if self.mode == "path":
            self.toggle_path()

    def move(self, forward: float, right: float, up: float) -> None:
        """Fly (taking over from the path); in the orbit: forward zooms, right and up turn."""
        if self.mode == "orbit":
            r = max(self.orbit_radius, 1e-9)
            self.zoom(math.exp(-2.0 * forward / r))
            if right or up:
                self.rotate(3.0 * right / r, 3.0 * up / r)
            return
        self.take_over()
        self.fly.move(forward, right, up)

    def rotate(self, dyaw: float, dpitch: float) -> None:
        """Mouse look; in the orbit it turns the orbit (and stops its slow spin)."""
        if self.mode == "orbit":
            self.orbit_spin = 0.0
            self.orbit_yaw += dyaw
            self.orbit_pitch = max(-MAX_PITCH, min(MAX_PITCH, self.orbit_pitch + dpitch))
            return
        self.take_over()
        self.fly.rotate(dyaw, dpitch)

    def zoom(self, factor: float) -> None:
        self.orbit_radius = max(1e-3, self.orbit_radius * factor)

    def advance(self, dt: float) -> None:
        """Time passes: the path plays on, the orbit spins."""
        if self.mode == "path":
            self.path_time += dt
            if self.duration > 0:
                self.path_time %= self.duration
        elif self.mode == "orbit":
            self.orbit_yaw += self.orbit_spin * dt

    # ------------------------------------------------------------------ the view

    def pose(self) -> tuple[np.ndarray, np.ndarray]:
        """(eye, target) of the view camera now."""
        if self.mode == "path" and self.path_at is not None:
            eye, target = self.path_at(self.path_time)
            return np.asarray(eye, np.float64), np.asarray(target, np.float64)
        if self.mode == "orbit":
            cp = math.cos(self.orbit_pitch)
            off = np.array([cp * math.sin(self.orbit_yaw), math.sin(self.orbit_pitch),
                            -cp * math.cos(self.orbit_yaw)])
            return self.orbit_center + off * self.orbit_radius, self.orbit_center.copy()
        return self.fly.position.copy(), self.fly.target()

    def view(self, aspect: float) -> CameraView:
        eye, target = self.pose()
        f = self.fly
        if self.mode == "orbit":
            near = max(f.near, self.orbit_radius * 1e-3)
            return CameraView.make(eye, target, f.fov_deg, aspect, near, self.orbit_far)
        return CameraView.make(eye, target, f.fov_deg, aspect, f.near, f.far)

    def describe(self) -> str:
        """For the HUD: which camera drives the view."""
        if self.mode == "path":
            return f"camera path {self.path_time:5.1f} / {self.duration:.0f} s (C stops)"
        if self.mode == "orbit":
            return "orbit around the frozen culling camera (X returns)"
        return "fly (C plays the camera path)"
