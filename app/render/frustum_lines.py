"""The frozen culling camera drawn in the world: its view volume as lines, its near and far
planes as translucent quads, and a camera marker at its eye (a small box, a lens pyramid
along the view direction and an up tick), sized by the caller so that it shows from afar.

The quads are for looking at the volume from outside: seen from inside it (the eye at the
frozen camera, or flown a little way in) the near quad sits on the eye and the far quad
spans the view, so they would tint the whole screen; :func:`seen_from_outside` says which.
"""

from __future__ import annotations

import moderngl
import numpy as np

from app.render.context import load_program

# NDC corners, index = 4*ix + 2*iy + iz ; edges of the box plus lines from the near to far plane.
_NDC = np.array([[x, y, z, 1.0] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
_EDGES = [(0, 1), (2, 3), (4, 5), (6, 7),  # near -> far
          (0, 2), (2, 6), (6, 4), (4, 0),  # near rectangle
          (1, 3), (3, 7), (7, 5), (5, 1)]  # far rectangle
_NEAR_QUAD = (0, 4, 6, 0, 6, 2)  # two triangles over the near rectangle
_FAR_QUAD = (1, 5, 7, 1, 7, 3)
_BOX = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64)
_BOX_EDGES = [(a, b) for a in range(8) for b in range(a + 1, 8)
              if bin(a ^ b).count("1") == 1]

FRUSTUM_COLOR = (1.0, 0.55, 0.1, 1.0)
NEAR_COLOR = (0.3, 0.9, 1.0, 0.35)
FAR_COLOR = (1.0, 0.55, 0.1, 0.07)
MARKER_COLOR = (1.0, 1.0, 1.0, 1.0)


def frustum_corners(viewproj: np.ndarray) -> np.ndarray:
    """(8, 3) world corners of the volume of ``viewproj`` (column-vector convention)."""
    inv = np.linalg.inv(np.asarray(viewproj, np.float64))
    w = _NDC @ inv.T
    return w[:, :3] / w[:, 3:4]


def seen_from_outside(cull_viewproj: np.ndarray, cull_eye: np.ndarray, eye: np.ndarray,
                      near: float) -> bool:
    """Whether ``eye`` looks at the volume of ``cull_viewproj`` from outside it and more
    than a few near distances from its apex ``cull_eye``: only then are its planes drawn
    filled (from inside or at the apex they would cover the screen)."""
    eye = np.asarray(eye, np.float64)
    if np.linalg.norm(eye - np.asarray(cull_eye, np.float64)) <= 4.0 * near:
        return False
    c = np.asarray(cull_viewproj, np.float64) @ np.append(eye, 1.0)
    inside = c[3] > 0 and bool(np.all(np.abs(c[:3]) <= c[3]))
    return not inside


def camera_axes(view: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(right, up, forward) unit vectors of a view matrix (column-vector convention)."""
    m = np.asarray(view, np.float64)
    return m[0, :3].copy(), m[1, :3].copy(), -m[2, :3]


def marker_lines(eye: np.ndarray, view: np.ndarray, size: float) -> list[np.ndarray]:
    """Line end points of the camera marker: a box of half-size ``size`` at the eye, a lens
    pyramid 3 x ``size`` long along the view direction, an up tick."""
    right, up, fwd = camera_axes(view)
    eye = np.asarray(eye, np.float64)
    axes = np.stack([right, up, fwd * 1.4])
    corners = eye + size * (_BOX @ axes)
    pts: list[np.ndarray] = []
    for a, b in _BOX_EDGES:
        pts += [corners[a], corners[b]]
    tip = eye + fwd * size * 1.4
    lens = [tip + fwd * size * 2.2 + size * 1.2 * (sx * right + sy * up)
            for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
    for k in range(4):
        pts += [tip, lens[k], lens[k], lens[(k + 1) % 4]]
    top = eye + up * size
    pts += [top, top + up * size * 1.5]
    return pts


class FrustumLines:
    """Lines and translucent quads in one buffer; :meth:`draw` after :meth:`set_frustum`."""

    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self.prog = load_program(ctx, "lines")
        self.vbo = ctx.buffer(reserve=256 * 7 * 4, dynamic=True)
        self.vao = ctx.vertex_array(self.prog, [(self.vbo, "3f 4f", "in_position", "in_color")])
        self.n = 0  # line vertices
        self.tri = 0  # triangle vertices after them

    def set_frustum(self, cull_viewproj: np.ndarray, eye: np.ndarray,
                    color=FRUSTUM_COLOR, view: np.ndarray | None = None,
                    marker_size: float = 0.0, planes: bool = True) -> None:
        """The volume of ``cull_viewproj``, lines from ``eye`` to its near corners, with
        ``planes`` its near and far planes filled, and with ``view`` and ``marker_size`` > 0
        the camera marker."""
        c = frustum_corners(cull_viewproj)
        eye = np.asarray(eye, float)
        lines, cols = [], []
        for a, b in _EDGES:
            lines += [c[a], c[b]]
        for k in (0, 2, 4, 6):  # eye to the near corners
            lines += [eye, c[k]]
        cols += [color] * len(lines)
        if view is not None and marker_size > 0:
            mk = marker_lines(eye, view, marker_size)
            lines += mk
            cols += [MARKER_COLOR] * len(mk)
        tris = [c[k] for k in _NEAR_QUAD] + [c[k] for k in _FAR_QUAD] if planes else []
        tcols = [NEAR_COLOR] * 6 + [FAR_COLOR] * 6 if planes else []
        data = np.zeros((len(lines) + len(tris), 7), np.float32)
        data[:, :3] = lines + tris
        data[:, 3:] = cols + tcols
        if self.vbo.size < data.nbytes:
            self.vbo.orphan(data.nbytes * 2)
            self.vao.release()
            self.vao = self.ctx.vertex_array(self.prog, [(self.vbo, "3f 4f", "in_position",
                                                          "in_color")])
        self.vbo.write(data.tobytes())
        self.n = len(lines)
        self.tri = len(tris)

    def draw(self, viewproj: np.ndarray) -> None:
        if not self.n:
            return
        self.prog["u_viewproj"].write(np.ascontiguousarray(viewproj.T, np.float32).tobytes())
        if self.tri:
            self.vao.render(moderngl.TRIANGLES, vertices=self.tri, first=self.n)
        self.vao.render(moderngl.LINES, vertices=self.n)
