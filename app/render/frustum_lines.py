"""The frozen culling camera's view volume drawn as lines."""

from __future__ import annotations

import moderngl
import numpy as np

from app.render.context import load_program

# NDC corners, index = 4*ix + 2*iy + iz ; edges of the box plus lines from the near to far plane.
_NDC = np.array([[x, y, z, 1.0] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
_EDGES = [(0, 1), (2, 3), (4, 5), (6, 7),  # near -> far
          (0, 2), (2, 6), (6, 4), (4, 0),  # near rectangle
          (1, 3), (3, 7), (7, 5), (5, 1)]  # far rectangle


def frustum_corners(viewproj: np.ndarray) -> np.ndarray:
    """(8, 3) world corners of the volume of ``viewproj`` (column-vector convention)."""
    inv = np.linalg.inv(np.asarray(viewproj, np.float64))
    w = _NDC @ inv.T
    return w[:, :3] / w[:, 3:4]


class FrustumLines:
    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self.prog = load_program(ctx, "lines")
        self.vbo = ctx.buffer(reserve=(len(_EDGES) * 2 + 8) * 7 * 4, dynamic=True)
        self.vao = ctx.vertex_array(self.prog, [(self.vbo, "3f 4f", "in_position", "in_color")])
        self.n = 0

    def set_frustum(self, cull_viewproj: np.ndarray, eye: np.ndarray,
                    color=(1.0, 0.55, 0.1, 1.0)) -> None:
        c = frustum_corners(cull_viewproj)
        pts = []
        for a, b in _EDGES:
            pts += [c[a], c[b]]
        for k in (0, 2, 4, 6):  # eye to the near corners
            pts += [np.asarray(eye, float), c[k]]
        data = np.zeros((len(pts), 7), np.float32)
        data[:, :3] = pts
        data[:, 3:] = color
        self.vbo.write(data.tobytes())
        self.n = len(pts)

    def draw(self, viewproj: np.ndarray) -> None:
        if not self.n:
            return
        self.prog["u_viewproj"].write(np.ascontiguousarray(viewproj.T, np.float32).tobytes())
        self.vao.render(moderngl.LINES, vertices=self.n)
