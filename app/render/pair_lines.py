"""The collision view's lines: a segment between the centres of each pair (contacts or the
broad phase's candidates) with a member on screen, and the walls of the collision box.

Drawn as an overlay (no depth test: the segment between two touching balls runs inside
them). One compiled pass writes the vertices of the kept pairs into a persistent float32
array, one buffer write, one draw.
"""

from __future__ import annotations

import moderngl
import numpy as np
from numba import njit

from app.render.context import load_program

CONTACT_COLOR = (1.0, 0.35, 0.15, 0.95)  # pairs in contact: the tint's orange
CANDIDATE_COLOR = (0.95, 0.95, 0.3, 0.35)  # broad-phase candidates: faint yellow
WALL_COLOR = (0.75, 0.8, 0.9, 0.6)
_BOX_EDGES = [(a, b) for a in range(8) for b in range(a + 1, 8) if bin(a ^ b).count("1") == 1]


@njit(cache=True)
def _fill(pairs, centers, shown, everything, rgba, out):  # pragma: no cover - compiled
    """Two vertices (position, colour) per pair with a member in ``shown`` (or every pair
    when ``everything``) into ``out``; returns the vertices written."""
    v = 0
    for k in range(pairs.shape[0]):
        a = pairs[k, 0]
        b = pairs[k, 1]
        if not (everything or shown[a] or shown[b]):
            continue
        for j in (a, b):
            out[v, 0] = centers[j, 0]
            out[v, 1] = centers[j, 1]
            out[v, 2] = centers[j, 2]
            out[v, 3] = rgba[0]
            out[v, 4] = rgba[1]
            out[v, 5] = rgba[2]
            out[v, 6] = rgba[3]
            v += 1
    return v


@njit(cache=True)
def _mark(ids, mark, value):  # pragma: no cover - compiled
    for i in range(ids.shape[0]):
        mark[ids[i]] = value


def box_edges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(24, 3) end points of the 12 edges of the box [lo, hi]."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    corners = np.array([[(hi if (c >> k) & 1 else lo)[k] for k in range(3)] for c in range(8)])
    return np.array([corners[i] for e in _BOX_EDGES for i in e])


class PairLines:
    """Segments between paired objects and the collision box; :meth:`draw` after
    :meth:`set_lines`."""

    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self.prog = load_program(ctx, "lines")
        self.vbo = ctx.buffer(reserve=64 * 7 * 4, dynamic=True)
        self.vao = ctx.vertex_array(self.prog, [(self.vbo, "3f 4f", "in_position", "in_color")])
        self.staging = np.zeros((0, 7), np.float32)
        self._shown = np.zeros(0, np.bool_)
        self.n = 0  # vertices
        self.pairs_drawn = 0

    def set_lines(self, pairs: np.ndarray, centers: np.ndarray, visible: np.ndarray | None,
                  color=CONTACT_COLOR, box: tuple[np.ndarray, np.ndarray] | None = None) -> int:
        """Segments for ``pairs`` (rows of ``centers``) with a member in ``visible`` (None:
        every pair), then the 12 edges of ``box``; returns the pairs kept."""
        k = int(pairs.shape[0])
        walls = box_edges(*box) if box is not None else np.zeros((0, 3))
        need = 2 * k + walls.shape[0]
        if self.staging.shape[0] < need:
            self.staging = np.zeros((max(need, 2 * self.staging.shape[0]), 7), np.float32)
        n = centers.shape[0]
        if self._shown.shape[0] < n:
            self._shown = np.zeros(n, np.bool_)
        everything = visible is None
        ids = np.zeros(0, np.int64) if everything else np.ascontiguousarray(visible, np.int64)
        if not everything:
            _mark(ids, self._shown, True)
        v = _fill(np.ascontiguousarray(pairs, np.int64), centers, self._shown, everything,
                  np.array(color, np.float32), self.staging)
        if not everything:
            _mark(ids, self._shown, False)
        self.pairs_drawn = v // 2
        if walls.shape[0]:
            self.staging[v:v + walls.shape[0], :3] = walls
            self.staging[v:v + walls.shape[0], 3:] = WALL_COLOR
            v += walls.shape[0]
        self.n = v
        nbytes = v * 7 * 4
        if v:
            if self.vbo.size < nbytes:
                self.vbo.orphan(2 * nbytes)
                self.vao.release()
                self.vao = self.ctx.vertex_array(self.prog, [(self.vbo, "3f 4f", "in_position",
                                                              "in_color")])
            self.vbo.write(memoryview(self.staging[:v]).cast("B"))
        return self.pairs_drawn

    def draw(self, viewproj: np.ndarray) -> None:
        """The lines (the caller sets blending and depth state)."""
        if not self.n:
            return
        self.prog["u_viewproj"].write(np.ascontiguousarray(viewproj.T, np.float32).tobytes())
        self.vao.render(moderngl.LINES, vertices=self.n)
