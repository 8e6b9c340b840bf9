"""HUD text that works in a window and headless: a monospace bitmap font atlas rasterized
once with Pillow, drawn as textured quads in pixel coordinates.
"""

from __future__ import annotations

from pathlib import Path

import moderngl
import numpy as np

from app.render.context import load_program

_FIRST, _LAST = 32, 126  # printable ASCII
_COLS = 16
_FONT_CANDIDATES = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
    "/usr/share/fonts/TTF/DejaVuSansMono.ttf",
    "/usr/share/fonts/dejavu/DejaVuSansMono.ttf",
    "/Library/Fonts/Menlo.ttc",
    "C:/Windows/Fonts/consola.ttf",
]


def _load_font(px: int):
    from PIL import ImageFont

    for cand in _FONT_CANDIDATES:
        if Path(cand).is_file():
            try:
                return ImageFont.truetype(cand, px)
            except OSError:
                pass
    try:
        return ImageFont.load_default(size=px)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def build_atlas(px: int = 14) -> tuple[np.ndarray, int, int]:
    """(atlas (H, W) uint8 coverage, cell_w, cell_h). Cell index = code - 32; the cell after
    the last glyph is solid (for panels)."""
    from PIL import Image, ImageDraw

    font = _load_font(px)
    chars = [chr(c) for c in range(_FIRST, _LAST + 1)]
    widths = []
    for ch in chars:
        l, t, r, b = font.getbbox(ch)
        widths.append(r)
    asc, desc = font.getmetrics() if hasattr(font, "getmetrics") else (px, px // 4)
    cw = max(int(np.median(widths)), 1) if widths else px // 2
    cw = max(cw, max(w for w in widths if w is not None) if widths else cw)
    ch_h = asc + desc + 1
    n = len(chars) + 1
    rows = (n + _COLS - 1) // _COLS
    img = Image.new("L", (_COLS * cw, rows * ch_h), 0)
    draw = ImageDraw.Draw(img)
    for i, ch in enumerate(chars):
        x, y = (i % _COLS) * cw, (i // _COLS) * ch_h
        draw.text((x, y), ch, fill=255, font=font)
    s = len(chars)
    x, y = (s % _COLS) * cw, (s // _COLS) * ch_h
    draw.rectangle([x, y, x + cw - 1, y + ch_h - 1], fill=255)
    return np.asarray(img, np.uint8), cw, ch_h


class HudRenderer:
    """Queue text and panels with :meth:`text` / :meth:`panel`, then :meth:`draw` them."""

    def __init__(self, ctx: moderngl.Context, px: int = 14) -> None:
        self.ctx = ctx
        self.prog = load_program(ctx, "hud")
        atlas, self.cw, self.ch = build_atlas(px)
        self.atlas_h, self.atlas_w = atlas.shape
        self.tex = ctx.texture((self.atlas_w, self.atlas_h), 1, atlas.tobytes(), alignment=1)
        self.tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self.vbo = ctx.buffer(reserve=6 * 8 * 4 * 4096, dynamic=True)
        self._make_vao()
        self._quads: list[np.ndarray] = []
        solid = _LAST - _FIRST + 1
        sx, sy = (solid % _COLS) * self.cw, (solid // _COLS) * self.ch
        # sample the middle of the solid cell
        self._solid_uv = ((sx + self.cw / 2) / self.atlas_w, (sy + self.ch / 2) / self.atlas_h)

    def _make_vao(self) -> None:
        self.vao = self.ctx.vertex_array(self.prog,
                                         [(self.vbo, "2f 2f 4f", "in_pos", "in_uv", "in_color")])

    def text_size(self, lines: list[str]) -> tuple[int, int]:
        w = max((len(s) for s in lines), default=0) * self.cw
        return w, len(lines) * self.ch

    def panel(self, x: float, y: float, w: float, h: float, color=(0, 0, 0, 0.55)) -> None:
        u, v = self._solid_uv
        q = np.array([[x, y], [x + w, y], [x + w, y + h], [x, y], [x + w, y + h], [x, y + h]],
                     np.float32)
        out = np.zeros((6, 8), np.float32)
        out[:, :2] = q
        out[:, 2] = u
        out[:, 3] = v
        out[:, 4:] = color
        self._quads.append(out)

    def text(self, x: float, y: float, lines: list[str], color=(1, 1, 1, 1),
             background: bool = True) -> tuple[int, int]:
        """Queue lines of text with the top-left corner at pixel (x, y); returns its size."""
        w, h = self.text_size(lines)
        if background and lines:
            self.panel(x - 4, y - 2, w + 8, h + 4)
        for row, s in enumerate(lines):
            codes = np.frombuffer(s.encode("ascii", "replace"), np.uint8).astype(np.int64)
            keep = (codes > _FIRST) & (codes <= _LAST)  # skip spaces and non-printables
            cols = np.flatnonzero(keep)
            if not cols.shape[0]:
                continue
            cell = codes[keep] - _FIRST
            x0 = x + cols * self.cw
            y0 = np.full(cols.shape[0], y + row * self.ch, np.float64)
            u0 = (cell % _COLS) * self.cw / self.atlas_w
            v0 = (cell // _COLS) * self.ch / self.atlas_h
            du, dv = self.cw / self.atlas_w, self.ch / self.atlas_h
            x1, y1 = x0 + self.cw, y0 + self.ch
            u1, v1 = u0 + du, v0 + dv
            corners = [(x0, y0, u0, v0), (x1, y0, u1, v0), (x1, y1, u1, v1),
                       (x0, y0, u0, v0), (x1, y1, u1, v1), (x0, y1, u0, v1)]
            out = np.zeros((cols.shape[0], 6, 8), np.float32)
            for k, (px, py, pu, pv) in enumerate(corners):
                out[:, k, 0] = px
                out[:, k, 1] = py
                out[:, k, 2] = pu
                out[:, k, 3] = pv
            out[:, :, 4:] = color
            self._quads.append(out.reshape(-1, 8))
        return w, h

    def _pixel_exact(self, size) -> bool:
        return self.target_size is None or tuple(size) == tuple(self.target_size)

    def draw(self, size: tuple[float, float], target_size: tuple[int, int] | None = None) -> None:
        """Draw the queued quads; ``size`` is the layout's screen, ``target_size`` the real one."""
        self.target_size = target_size
        if not self._quads:
            return
        data = np.concatenate(self._quads).astype(np.float32)
        self._quads = []
        if self.vbo.size < data.nbytes:
            self.vbo.orphan(data.nbytes * 2)
            self.vao.release()
            self._make_vao()
        self.vbo.write(data.tobytes())
        self.prog["u_screen"].value = (float(size[0]), float(size[1]))
        # Pixel-exact glyphs at 1:1; smoothed when the HUD is shrunk into a small window.
        f = moderngl.NEAREST if self._pixel_exact(size) else moderngl.LINEAR
        self.tex.filter = (f, f)
        self.tex.use(0)
        self.prog["u_atlas"].value = 0
        self.ctx.enable(moderngl.BLEND)
        self.ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self.ctx.disable(moderngl.DEPTH_TEST)
        self.vao.render(moderngl.TRIANGLES, vertices=data.shape[0])
