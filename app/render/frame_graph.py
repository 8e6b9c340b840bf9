"""The live frame-time graph (Unreal's ``stat unit`` graph): the last few hundred frames as
stacked per-stage bars, with 16.7 and 33.3 ms budget lines and the stalls marked.

The bars are one vertex buffer of rectangles built with numpy (:func:`graph_quads`, no loop
over frames), drawn by one small shader; the labels go through the HUD's text renderer. The
caller hands in the stage times; this module knows nothing of the viewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import moderngl
import numpy as np

from app.render.context import load_program
from app.render.hud import HudRenderer

BUDGETS_MS = (1000.0 / 60.0, 1000.0 / 30.0)  # 60 and 30 fps
#: The graph's height in ms is the first of these that holds 9 frames in 10 (stalls stick out
#: through the top, marked).
SCALES_MS = (50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0)
STALL_RGBA = (0.95, 0.2, 0.25, 1.0)
BUDGET_RGBA = ((0.55, 0.9, 0.55, 0.9), (0.95, 0.8, 0.35, 0.9))
PANEL_RGBA = (0.0, 0.0, 0.0, 0.6)
_FLOATS = 6  # x, y, r, g, b, a


@dataclass(frozen=True)
class GraphRect:
    """Where the graph's bars go, in pixels (origin top-left)."""

    x: float
    y: float
    w: float
    h: float


def hex_rgba(color: str, alpha: float = 0.95) -> tuple[float, float, float, float]:
    """``#rrggbb`` as an RGBA tuple of floats."""
    c = color.lstrip("#")
    return (int(c[0:2], 16) / 255, int(c[2:4], 16) / 255, int(c[4:6], 16) / 255, alpha)


def graph_scale(frame_ms: np.ndarray) -> float:
    """The graph's top in ms: the smallest of :data:`SCALES_MS` above 90 % of the frames."""
    if frame_ms.shape[0] == 0:
        return SCALES_MS[0]
    p90 = float(np.percentile(frame_ms, 90))
    return next((s for s in SCALES_MS if p90 <= s), SCALES_MS[-1])


def graph_layout(size: tuple[int, int], legend_w: float = 0.0,
                 title_h: float = 0.0) -> GraphRect:
    """The bars' rectangle: the lower right of the screen, about 40 % wide (at least 300 px
    when the screen has room beside the legend, ``legend_w`` px left of it) and 28 % tall
    (at least 60 px), ``title_h`` px left free above it."""
    w, h = size
    gw = float(max(60, min(w - legend_w - 24, max(300, int(0.4 * w)))))
    gh = float(max(60, int(0.28 * h)))
    return GraphRect(w - gw - 8, max(h - gh - 8, title_h + 4), gw, min(gh, h - title_h - 12))


def legend_columns(count: int, rows_fit: int) -> list[range]:
    """The legend's items split into columns of at most ``rows_fit`` rows (at least one)."""
    per = max(1, rows_fit)
    return [range(i, min(i + per, count)) for i in range(0, count, per)]


def _rects(x0, y0, x1, y1, rgba) -> np.ndarray:
    """Two triangles per rectangle: (m, 6 vertices, 6 floats); ``rgba`` (m, 4) or (4,)."""
    m = x0.shape[0]
    out = np.empty((m, 6, _FLOATS), np.float32)
    xs = np.stack([x0, x1, x1, x0, x1, x0], axis=1)
    ys = np.stack([y0, y0, y1, y0, y1, y1], axis=1)
    out[:, :, 0] = xs
    out[:, :, 1] = ys
    out[:, :, 2:] = np.broadcast_to(np.asarray(rgba, np.float32).reshape(-1, 1, 4), (m, 6, 4))
    return out


def graph_quads(stages: np.ndarray, stalls: np.ndarray, rect: GraphRect, top_ms: float,
                colors: Sequence[tuple[float, float, float, float]],
                capacity: int) -> np.ndarray:
    """The vertices (k, 6 floats) of the graph: its panel, one bar per frame stacked by stage
    (``stages`` (n, stages) ms, oldest first, the newest at the right edge; ``capacity``
    frames fill the width), the budget lines, and a red mark over each stall frame."""
    n, k = stages.shape
    bw = rect.w / max(capacity, 1)
    bottom = rect.y + rect.h
    parts = [_rects(np.array([rect.x - 2]), np.array([rect.y - 2]),
                    np.array([rect.x + rect.w + 2]), np.array([bottom + 2]), PANEL_RGBA)]
    if n:
        px_per_ms = rect.h / top_ms
        cum = np.concatenate([np.zeros((n, 1)), np.cumsum(stages, axis=1)], axis=1)
        cum = np.minimum(cum, top_ms)
        lo = bottom - cum[:, :-1] * px_per_ms  # (n, k) tops and bottoms of each segment
        hi = bottom - cum[:, 1:] * px_per_ms
        left = rect.x + rect.w - (n - np.arange(n)) * bw
        keep = (lo - hi) > 0.01
        fi, si = np.nonzero(keep)
        rgba = np.asarray(colors, np.float32)[si]
        parts.append(_rects(left[fi], hi[fi, si], left[fi] + bw, lo[fi, si], rgba))
        marked = np.nonzero(stalls)[0]
        if marked.shape[0]:
            mw = max(bw, 3.0)
            parts.append(_rects(left[marked] + bw / 2 - mw / 2, np.full(marked.shape, rect.y),
                                left[marked] + bw / 2 + mw / 2,
                                np.full(marked.shape, rect.y + 6.0), STALL_RGBA))
    for ms, rgba in zip(BUDGETS_MS, BUDGET_RGBA, strict=True):
        if ms < top_ms:
            y = bottom - ms / top_ms * rect.h
            parts.append(_rects(np.array([rect.x]), np.array([y - 0.5]),
                                np.array([rect.x + rect.w]), np.array([y + 0.5]), rgba))
    return np.concatenate(parts, axis=0).reshape(-1, _FLOATS)


class FrameGraph:
    """Draws :func:`graph_quads` and its labels over whatever is bound."""

    def __init__(self, ctx: moderngl.Context, hud_px: int = 12) -> None:
        self.ctx = ctx
        self.prog = load_program(ctx, "frame_graph")
        self.vbo = ctx.buffer(reserve=6 * _FLOATS * 4 * 1024, dynamic=True)
        self._make_vao()
        self.text = HudRenderer(ctx, hud_px)
        self.rect: GraphRect | None = None  # where the last draw put the bars
        self.top_ms = SCALES_MS[0]

    def _make_vao(self) -> None:
        self.vao = self.ctx.vertex_array(self.prog, [(self.vbo, "2f 4f", "in_pos", "in_color")])

    def draw(self, size: tuple[int, int], stages: np.ndarray, stalls: np.ndarray,
             labels: Sequence[str], colors: Sequence[str], capacity: int,
             title: str = "") -> None:
        """The graph of ``stages`` (n, len(labels)) ms in the lower right of a ``size``
        screen, a legend of ``labels`` in ``colors`` (``#rrggbb``) and ``title`` above it."""
        t = self.text
        ch, cw = t.ch, t.cw
        rows_fit = int(graph_layout(size, 0.0, ch + 10).h // (ch + 2))
        columns = legend_columns(len(labels), rows_fit)
        col_w = (max((len(x) for x in labels), default=0) + 3) * cw
        rect = graph_layout(size, len(columns) * col_w, ch + 10)
        rgba = [hex_rgba(c) for c in colors]
        frame_ms = stages.sum(axis=1) if stages.shape[0] else np.zeros(0)
        self.top_ms = top = graph_scale(frame_ms)
        data = graph_quads(stages, stalls, rect, top, rgba, capacity)
        if self.vbo.size < data.nbytes:
            self.vbo.orphan(data.nbytes * 2)
            self.vao.release()
            self._make_vao()
        self.vbo.write(data.tobytes())
        ctx = self.ctx
        ctx.enable(moderngl.BLEND)
        ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        ctx.disable(moderngl.DEPTH_TEST)
        ctx.disable(moderngl.CULL_FACE)
        self.prog["u_screen"].value = (float(size[0]), float(size[1]))
        self.vao.render(moderngl.TRIANGLES, vertices=data.shape[0])
        self.rect = rect
        self._labels(rect, top, title)
        self._legend(rect, labels, rgba, columns, col_w)
        self.text.draw((size[0], size[1]))

    def _labels(self, rect: GraphRect, top: float, title: str) -> None:
        """The budget lines' and the top's values at the left edge, the title above."""
        t, ch, cw = self.text, self.text.ch, self.text.cw
        for k, (ms, col) in enumerate(zip(BUDGETS_MS, BUDGET_RGBA, strict=True)):
            if ms < top:  # side by side: at a large scale the two lines are close
                y = rect.y + rect.h - ms / top * rect.h
                t.text(rect.x + 4 + k * 9 * cw, y - ch - 1, [f"{ms:.1f} ms"], color=col,
                       background=False)
        t.text(rect.x + 4, rect.y + 2, [f"{top:.0f} ms"], color=(0.9, 0.9, 0.9, 1.0),
               background=False)
        if title:
            room = max(8, int((rect.x + rect.w - 8) // cw))
            line = title if len(title) <= room else title[: room - 3] + "..."
            t.text(max(8.0, rect.x + rect.w - len(line) * cw), rect.y - ch - 6, [line],
                   color=(0.95, 0.97, 1.0, 1.0))

    def _legend(self, rect: GraphRect, labels: Sequence[str],
                rgba: Sequence[tuple[float, ...]], columns: list[range], col_w: float) -> None:
        """A swatch and the label of each stage in columns left of the graph, the first
        stage (the bottom of each bar) at the bottom."""
        t, ch, cw = self.text, self.text.ch, self.text.cw
        rows = max((len(c) for c in columns), default=0)
        x0 = rect.x - 6 - len(columns) * col_w
        y_bottom = rect.y + rect.h
        t.panel(x0 - 4, y_bottom - rows * (ch + 2) - 4, len(columns) * col_w + 4,
                rows * (ch + 2) + 6, color=PANEL_RGBA)
        for c, items in enumerate(columns):
            x = x0 + c * col_w
            for r, i in enumerate(items):
                y = y_bottom - (r + 1) * (ch + 2)
                t.panel(x + 2, y + ch * 0.2, cw * 1.2, ch * 0.6, color=tuple(rgba[i]))
                t.text(x + 2.5 * cw, y, [labels[i]], color=tuple(rgba[i]), background=False)

    def release(self) -> None:
        for obj in (self.vao, self.vbo):
            obj.release()
        self.text.release()
