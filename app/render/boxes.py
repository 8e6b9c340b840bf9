"""Node-box overlay: every node box of the index as lines, one instanced draw.

Two colourings: by depth (a palette cycling with the node's depth) and by the outcome of the
last frustum query (``app.geom.predicates.NODE_*``).
"""

from __future__ import annotations

import moderngl
import numpy as np

from app.render.context import load_program

# The 12 edges of the unit cube as 24 corner vertices.
_EDGES = []
for _a in range(3):
    _b, _c = (_a + 1) % 3, (_a + 2) % 3
    for _u in (0, 1):
        for _v in (0, 1):
            p0 = [0, 0, 0]
            p1 = [0, 0, 0]
            p0[_b] = p1[_b] = _u
            p0[_c] = p1[_c] = _v
            p1[_a] = 1
            _EDGES += [p0, p1]
CUBE_EDGES = np.asarray(_EDGES, np.float32)

DEPTH_PALETTE = np.array([
    [1.00, 1.00, 1.00], [1.00, 0.85, 0.20], [0.30, 0.90, 0.30], [0.25, 0.75, 1.00],
    [0.85, 0.40, 1.00], [1.00, 0.45, 0.35], [0.50, 1.00, 0.85], [1.00, 0.65, 0.85],
], np.float32)

# Outcome colours (RGBA) indexed by geometry.NODE_* code.
OUTCOME_COLORS = np.array([
    [0.45, 0.45, 0.45, 0.25],  # 0 not visited
    [0.20, 1.00, 0.30, 0.90],  # 1 fully inside
    [1.00, 0.90, 0.15, 0.90],  # 2 partially inside
    [1.00, 0.20, 0.20, 0.55],  # 3 rejected by frustum
    [0.30, 0.55, 1.00, 0.70],  # 4 rejected by view distance
    [1.00, 0.30, 1.00, 0.80],  # 5 rejected by occlusion
], np.float32)
OUTCOME_NAMES = ["not visited", "inside", "partial", "frustum-rejected", "view-distance-rejected",
                 "occluded"]

MAX_BOXES = 400_000


def depth_colors(depth: np.ndarray, alpha: float = 0.6) -> np.ndarray:
    out = np.empty((depth.shape[0], 4), np.float32)
    out[:, :3] = DEPTH_PALETTE[np.asarray(depth, np.int64) % len(DEPTH_PALETTE)]
    out[:, 3] = alpha
    return out


def outcome_colors(codes: np.ndarray) -> np.ndarray:
    c = np.clip(np.asarray(codes, np.int64), 0, len(OUTCOME_COLORS) - 1)
    return OUTCOME_COLORS[c]


class BoxOverlay:
    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self.prog = load_program(ctx, "boxes")
        self.vbo = ctx.buffer(CUBE_EDGES.tobytes())
        self.inst = ctx.buffer(reserve=10 * 4 * 64, dynamic=True)
        self._make_vao()
        self.count = 0

    def _make_vao(self) -> None:
        self.vao = self.ctx.vertex_array(
            self.prog,
            [(self.vbo, "3f", "in_corner"),
             (self.inst, "3f 3f 4f/i", "in_lo", "in_hi", "in_color")],
        )

    def set_boxes(self, lo: np.ndarray, hi: np.ndarray, colors: np.ndarray) -> int:
        n = min(lo.shape[0], MAX_BOXES)
        data = np.empty((n, 10), np.float32)
        data[:, 0:3] = lo[:n]
        data[:, 3:6] = hi[:n]
        data[:, 6:10] = colors[:n]
        need = max(n, 1) * 40
        if self.inst.size < need:
            self.inst.orphan(need * 2)
            self.vao.release()
            self._make_vao()
        if n:
            self.inst.write(data.tobytes())
        self.count = n
        return n

    def draw(self, viewproj: np.ndarray) -> None:
        if not self.count:
            return
        self.prog["u_viewproj"].write(np.ascontiguousarray(viewproj.T, np.float32).tobytes())
        self.vao.render(moderngl.LINES, vertices=24, instances=self.count)
