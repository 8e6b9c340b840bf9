"""What the frame draws over the scene: node boxes (with the legend of their colours), the frozen
culling camera with its labels, and the HUD text, notices and help panel.

The text itself comes from :mod:`app.viewer.hud_text` (pure functions) and
:mod:`app.viewer.keys` (the help); this module only places and draws it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import moderngl
import numpy as np

from app.render.boxes import (
    MIN_BOX_PX,
    BoxBudget,
    BoxOverlay,
    depth_colors,
    depth_legend,
    outcome_colors,
    outcome_legend,
    pack_boxes_in_view,
    select_boxes,
)
from app.render.context import SceneTarget
from app.render.frustum_lines import FrustumLines, seen_from_outside
from app.render.hud import HudRenderer, wrap_lines
from app.viewer.camera import CameraView, view_depth_range
from app.viewer.keys import help_lines

HUD_TEXT = (0.95, 0.97, 1.0, 1.0)
LABEL_TEXT = (1.0, 0.75, 0.4, 1.0)
NOTICE_TEXT = (1.0, 0.85, 0.3, 1.0)
HELP_TEXT = (0.85, 1.0, 0.85, 1.0)

#: F1's key list (app/viewer/keys.py's table, which --help and docs/viewer.md print too).
HELP_LINES = help_lines()


class Overlays:
    """Boxes, the frozen camera and the HUD, drawn into the scene target."""

    def __init__(self, ctx: moderngl.Context, target: SceneTarget, hud_px: int = 14) -> None:
        self.ctx = ctx
        self.target = target
        self.boxes = BoxOverlay(ctx)
        self.frustum_lines = FrustumLines(ctx)
        self.hud = HudRenderer(ctx, hud_px)
        self.labels: list[tuple[float, float, str]] = []  # world labels, pixels
        self.legend: tuple[str, list] | None = None  # the box colours' legend
        self.box_count = 0  # boxes the filter (N) kept last frame (of box_total)
        self.box_total = 0
        self.box_drawn = 0  # of those, the ones drawn (in view, big enough, in the budget)
        self.box_budget = BoxBudget()
        self.boxes_ms = 0.0  # the last box draw, to its glFinish
        self.frozen_outside = False  # the last frozen camera drawn was seen from outside

    def begin(self) -> None:
        """Blended drawing into the scene target; last frame's boxes and labels forgotten."""
        self.bind_target()
        self.ctx.disable(moderngl.CULL_FACE)
        self.ctx.enable(moderngl.BLEND)
        self.ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self.labels = []
        self.legend = None
        self.box_count = self.box_total = self.box_drawn = 0

    def bind_target(self) -> None:
        """Draw into the scene target, whatever pass (pyramid, id buffer) ran before."""
        self.target.fbo.use()
        self.ctx.viewport = (0, 0, *self.target.size)

    # ------------------------------------------------------------------ node boxes

    def draw_boxes(self, view: CameraView, index, mode: str, box_filter: str,
                   word: str = "depth", scene_ms: float | None = None) -> None:
        """``index``'s node boxes that ``box_filter`` keeps, coloured by depth (``word``
        names the depth in the legend) or by the last query's outcome (``mode``); of those
        only the ones in ``view`` and at least MIN_BOX_PX pixels across, and with
        ``scene_ms`` (the scene's draw) no more of them, largest first, than draw in that
        time (:class:`BoxBudget`)."""
        lo, hi, depth = index.node_boxes()
        self.box_total = int(lo.shape[0])
        if mode == "depth":
            cols = depth_colors(depth)
            title, items = f"box {word}", depth_legend(depth)
        else:
            codes = index.node_outcomes()
            if codes.shape[0] != lo.shape[0]:
                codes = np.zeros(lo.shape[0], np.int8)
            cols = outcome_colors(codes)
            title, items = "box outcome", outcome_legend()
        if box_filter != "all" and lo.shape[0]:
            keep = select_boxes(lo, hi, depth, box_filter)
            lo, hi, cols = lo[keep], hi[keep], cols[keep]
        self.box_count = int(lo.shape[0])
        self.ctx.disable(moderngl.DEPTH_TEST)
        budget = self.box_budget.count if scene_ms is not None else None
        rows = pack_boxes_in_view(lo, hi, cols, view, self.target.size[1], MIN_BOX_PX)
        wanted = rows.shape[0]
        if budget is not None and wanted > budget:
            rows = pack_boxes_in_view(lo, hi, cols, view, self.target.size[1], MIN_BOX_PX,
                                      budget)
        self.ctx.finish()  # the scene's draw is done: time the boxes alone
        t0 = time.perf_counter()
        self.box_drawn = self.boxes.set_rows(rows)
        self.boxes.draw(view.viewproj)
        if scene_ms is not None:
            self.ctx.finish()
            self.boxes_ms = (time.perf_counter() - t0) * 1e3
            self.box_budget.adjust(self.boxes_ms, scene_ms, self.box_drawn, wanted)
        cut = f", largest {self.box_drawn:,} (budget: the scene's draw time)" \
            if self.box_drawn < wanted else ""
        self.legend = (f"{title} ({wanted:,} of {self.box_count:,} in view, >= "
                       f"{MIN_BOX_PX:.0f} px{cut}):", items)

    # ------------------------------------------------------------------ the frozen camera

    def draw_frozen_camera(self, view: CameraView, cull_view: CameraView) -> None:
        """The frozen culling camera: its frustum as lines, a marker at its eye (sized to show
        from the view camera), and seen from outside its near and far planes filled and
        labels naming them. From inside the volume only the lines: filled planes and labels
        would cover the screen and float mid-scene."""
        self.ctx.disable(moderngl.DEPTH_TEST)
        eye = np.asarray(cull_view.eye, np.float64)
        away = float(np.linalg.norm(np.asarray(view.eye) - eye))
        near, far = view_depth_range(cull_view.proj)
        outside = self.frozen_outside = seen_from_outside(cull_view.viewproj, eye, view.eye,
                                                          near)
        size = 0.025 * away if away > 1e-6 else 0.0
        self.frustum_lines.set_frustum(cull_view.viewproj, eye, view=cull_view.view,
                                       marker_size=size, planes=outside)
        self.frustum_lines.draw(view.viewproj)
        if not outside:
            return  # at or inside the frozen camera's volume: nothing to label
        fwd = -np.asarray(cull_view.view[2, :3], np.float64)
        for point, text, dy in ((eye, "culling camera", -1.6),
                                (eye + fwd * near, f"near plane {near:g}", 0.6),
                                (eye + fwd * far * 0.999, f"far plane {far:g}", 0.0)):
            at = self.screen_point(view, point)
            if at is not None:
                self.labels.append((at[0], at[1] + dy * self.hud.ch, text))

    def frozen_line(self, occlusion: str) -> str:
        """The HUD's line while the culling camera is frozen: what culls, with what, and
        whether the last frame saw the frozen camera from outside."""
        occ = "" if occlusion == "off" else \
            "; occlusion uses the frozen camera's own depth pyramid"
        where = "seen from outside" if self.frozen_outside else "X views it from outside"
        return f"culling camera frozen (Z): culling as the frozen camera sees{occ}; {where}"

    def screen_point(self, view: CameraView, p: np.ndarray) -> tuple[float, float] | None:
        """Pixel (x right, y down) of a world point in the view, None behind or off screen."""
        c = view.viewproj @ np.append(np.asarray(p, np.float64), 1.0)
        if c[3] <= 1e-9:
            return None
        x, y = c[0] / c[3], c[1] / c[3]
        if abs(x) > 1.0 or abs(y) > 1.0:
            return None
        w, h = self.target.size
        return (x + 1) / 2 * w, (1 - y) / 2 * h

    # ------------------------------------------------------------------ text

    def draw_text(self, hud_lines: list[str], notices: list[str], help_on: bool,
                  lines: bool = True, help_head: Sequence[str] = ()) -> None:
        """The HUD text (``hud_lines``; empty when the HUD is hidden) with the box legend and
        the frozen camera's labels, the ``notices`` under it and the help panel; ``lines``
        False draws the notices only (a frame saved without them gets them afterwards);
        ``help_head``: the help's first lines (what is active).
        Glyphs are drawn at 1:1 (crisp): lines too long for the window wrap."""
        w, h = self.target.size
        hud = self.hud
        cols = max((w - 16) // hud.cw, 1)
        th = 0
        if hud_lines and lines:
            _, th = hud.text(8, 6, wrap_lines(hud_lines, cols), color=HUD_TEXT)
            if self.legend and self.box_total:
                th += 6 + hud.legend(8, 6 + th + 6, self.legend[0], self.legend[1],
                                     max_w=w - 16)[1]
            for x, y, text in self.labels:
                if y > 6 + th + 4:  # a label under the HUD's text would hide both
                    hud.text(x + 6, y, [text], color=LABEL_TEXT)
        if notices:
            shown = wrap_lines(notices, cols)
            _, th = hud.text_size(shown)
            hud.text(8, h - th - 8, shown, color=NOTICE_TEXT)
        if help_on and lines:
            self.draw_help(6 + th + 10 if th else 8, help_head)
        hud.draw((w, h))

    def draw_help(self, top: int, head: Sequence[str] = ()) -> None:
        """F1's key list from ``top`` down (after ``head``), under the HUD (which stays
        readable, so a key's effect shows while the list is open); in two columns when one
        does not fit."""
        w, h = self.target.size
        hud = self.hud
        cols = max((w - 16) // hud.cw, 1)
        help_lines = [*head, *HELP_LINES]
        shown = wrap_lines(help_lines, cols)
        tw, th = hud.text_size(shown)
        if top + th > h - 8 and len(shown) > 1:  # too tall: halves side by side
            half_cols = max((w - 32) // (2 * hud.cw), 1)
            half = (len(help_lines) + 1) // 2
            left = wrap_lines(help_lines[:half], half_cols)
            right = wrap_lines(help_lines[half:], half_cols)
            lw, _ = hud.text(8, top, left, color=HELP_TEXT)
            hud.text(8 + lw + 16, top, right, color=HELP_TEXT)
        else:
            hud.text(8, top, shown, color=HELP_TEXT)
