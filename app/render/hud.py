"""HUD text that works in a window and headless: a monospace bitmap font atlas rasterized
once with Pillow, and a character grid drawn with one quad per text block.

Each block (lines of text with their translucent background, or a bare panel) is one quad;
its fragment shader finds the character cell under the pixel in a small per-frame texture of
character codes, reads the glyph's coverage from the atlas and composites text over the
background. Every pixel is shaded and blended once: on llvmpipe a glyph quad per character
plus a background quad cost ~1.0 ms a frame for the five-line HUD at 1280x720, this ~0.65 ms.
"""

from __future__ import annotations

from pathlib import Path

import moderngl
import numpy as np

from app.render.context import load_program

_FIRST, _LAST = 32, 126  # printable ASCII
_COLS = 16  # glyph cells per atlas row (the shaders/hud.frag constant)
_FLOATS = 16  # per vertex: pos 2, local 2, grid 4, fg 4, bg 4
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
        self.chars: moderngl.Texture | None = None  # R8UI character codes, one row per line
        self.vbo = ctx.buffer(reserve=6 * _FLOATS * 4 * 16, dynamic=True)
        self._make_vao()
        self._blocks: list[tuple[float, float, float, float, list[str], tuple, tuple]] = []
        self.target_size: tuple[int, int] | None = None

    def _make_vao(self) -> None:
        self.vao = self.ctx.vertex_array(
            self.prog, [(self.vbo, "2f 2f 4f 4f 4f", "in_pos", "in_local", "in_grid", "in_fg",
                         "in_bg")])

    def text_size(self, lines: list[str]) -> tuple[int, int]:
        w = max((len(s) for s in lines), default=0) * self.cw
        return w, len(lines) * self.ch

    def panel(self, x: float, y: float, w: float, h: float, color=(0, 0, 0, 0.55)) -> None:
        """Queue a filled rectangle (pixels of the layout screen, origin top-left)."""
        self._blocks.append((x, y, w, h, [], (0.0, 0.0, 0.0, 0.0), tuple(color)))

    def text(self, x: float, y: float, lines: list[str], color=(1, 1, 1, 1),
             background: bool = True) -> tuple[int, int]:
        """Queue lines of text with the top-left corner at pixel (x, y); returns its size."""
        w, h = self.text_size(lines)
        if lines:
            bg = (0.0, 0.0, 0.0, 0.55) if background else (0.0, 0.0, 0.0, 0.0)
            self._blocks.append((x, y, w, h, list(lines), tuple(color), bg))
        return w, h

    def legend(self, x: float, y: float, title: str,
               items: list[tuple[str, tuple[float, ...]]]) -> tuple[int, int]:
        """Queue one row ``title  [#] label  [#] label ...``: a colour swatch (a filled cell)
        before each label, the label in that colour, over one background; returns its size."""
        text = title + "".join(f"   {label}" for label, _ in items)
        cols = len(text) + 2 * len(items)  # each swatch takes two cells
        w, h = cols * self.cw, self.ch
        self.panel(x - 4, y - 2, w + 8, h + 4, color=(0.0, 0.0, 0.0, 0.75))
        self.text(x, y, [title], color=(0.95, 0.97, 1.0, 1.0), background=False)
        cx = x + len(title) * self.cw
        for label, rgba in items:
            cx += 3 * self.cw
            self.panel(cx, y + self.ch * 0.2, self.cw * 1.2, self.ch * 0.6, color=tuple(rgba))
            cx += 2 * self.cw
            self.text(cx, y, [label], color=tuple(rgba), background=False)
            cx += len(label) * self.cw
        return w, h

    def _pixel_exact(self, size) -> bool:
        return self.target_size is None or tuple(size) == tuple(self.target_size)

    def _upload_chars(self, rows: list[str]) -> None:
        """All blocks' lines, stacked, as an R8UI texture (codes outside ASCII become '?')."""
        cols = max(1, max((len(r) for r in rows), default=1))
        grid = np.full((max(1, len(rows)), cols), 32, np.uint8)
        for i, r in enumerate(rows):
            if r:
                grid[i, :len(r)] = np.frombuffer(r.encode("ascii", "replace"), np.uint8)
        if self.chars is None or self.chars.size != (cols, grid.shape[0]):
            if self.chars is not None:
                self.chars.release()
            self.chars = self.ctx.texture((cols, grid.shape[0]), 1, dtype="u1", alignment=1)
            self.chars.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self.chars.write(grid.tobytes(), alignment=1)

    def draw(self, size: tuple[float, float], target_size: tuple[int, int] | None = None) -> None:
        """Draw the queued blocks; ``size`` is the layout's screen, ``target_size`` the real one."""
        self.target_size = target_size
        if not self._blocks:
            return
        blocks, self._blocks = self._blocks, []
        rows: list[str] = []
        data = np.zeros((len(blocks), 6, _FLOATS), np.float32)
        for k, (x, y, w, h, lines, fg, bg) in enumerate(blocks):
            # A text block's background reaches 4 px left/right and 2 px up/down of the text;
            # ``local`` is the pixel relative to the text's top-left corner.
            pad = (4.0, 2.0) if lines else (0.0, 0.0)
            x0, y0, x1, y1 = x - pad[0], y - pad[1], x + w + pad[0], y + h + pad[1]
            corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y0), (x1, y1), (x0, y1)]
            cols = max((len(s) for s in lines), default=0)
            for i, (px, py) in enumerate(corners):
                data[k, i, 0:2] = (px, py)
                data[k, i, 2:4] = (px - x, py - y)
            data[k, :, 4:8] = (cols, len(lines), len(rows), 0.0)
            data[k, :, 8:12] = fg
            data[k, :, 12:16] = bg
            rows += lines
        data = data.reshape(-1, _FLOATS)
        self._upload_chars(rows)
        if self.vbo.size < data.nbytes:
            self.vbo.orphan(data.nbytes * 2)
            self.vao.release()
            self._make_vao()
        self.vbo.write(data.tobytes())
        self.prog["u_screen"].value = (float(size[0]), float(size[1]))
        self.prog["u_cell"].value = (self.cw, self.ch)
        self.prog["u_atlas_size"].value = (self.atlas_w, self.atlas_h)
        # Pixel-exact glyphs at 1:1; smoothed when the HUD is shrunk into a small window.
        f = moderngl.NEAREST if self._pixel_exact(size) else moderngl.LINEAR
        self.tex.filter = (f, f)
        self.tex.use(0)
        self.chars.use(1)
        self.prog["u_atlas"].value = 0
        self.prog["u_chars"].value = 1
        self.ctx.enable(moderngl.BLEND)
        self.ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        self.ctx.disable(moderngl.DEPTH_TEST)
        self.vao.render(moderngl.TRIANGLES, vertices=data.shape[0])

    def release(self) -> None:
        for obj in (self.vao, self.vbo, self.tex, self.chars):
            if obj is not None:
                obj.release()
