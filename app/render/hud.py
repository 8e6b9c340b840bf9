"""HUD text that works in a window and headless: a monospace bitmap font atlas rasterized
once with Pillow, and a character grid drawn with one quad per text block.

Each block (lines of text with their translucent background, or a bare panel) is one quad;
its fragment shader finds the character cell under the pixel in a small per-frame texture of
character codes, reads the glyph's coverage from the atlas and composites text over the
background. Every pixel is shaded and blended once: on llvmpipe a glyph quad per character
plus a background quad cost ~1.0 ms a frame for the five-line HUD at 1280x720, this ~0.65 ms.

Text is always drawn at 1:1 with nearest sampling (crisp at every window size): the font
size follows the framebuffer's height (:func:`font_px`), lines too long for the width are
wrapped (:func:`wrap_lines`), never scaled down. Each glyph is rasterized into its own cell
and clipped to it, so no glyph reaches into its neighbour's.
"""

from __future__ import annotations

from pathlib import Path

import moderngl
import numpy as np

from app.render.context import load_program

_FIRST, _LAST = 32, 126  # printable ASCII
_COLS = 16  # glyph cells per atlas row (the shaders/hud.frag constant)
_FLOATS = 16  # per vertex: pos 2, local 2, grid 4, fg 4, bg 4
#: The panel behind text: dark enough that box lines and bright objects behind it stay well
#: under the text's brightness (white text over at most 0.22 of the scene's).
TEXT_PANEL = (0.0, 0.0, 0.0, 0.78)
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


def font_px(height: int) -> int:
    """The HUD's font size in pixels for a framebuffer ``height`` pixels tall: 10 px at 360
    (about 106 columns at 640 wide), 15 at 720, 22 at 1080."""
    return max(10, min(22, int(height) // 46))


def build_atlas(px: int = 14) -> tuple[np.ndarray, int, int]:
    """(atlas (H, W) uint8 coverage, cell_w, cell_h). Cell index = code - 32; the cell after
    the last glyph is solid (for panels). The cell is the font's advance wide and its ascent
    plus descent tall; each glyph is drawn into a cell-sized image first, so whatever of it
    overhangs the cell is cut off instead of landing in the next cell of the atlas."""
    from PIL import Image, ImageDraw

    font = _load_font(px)
    chars = [chr(c) for c in range(_FIRST, _LAST + 1)]
    asc, desc = font.getmetrics() if hasattr(font, "getmetrics") else (px, px // 4)
    advance = font.getlength("M") if hasattr(font, "getlength") else font.getbbox("M")[2]
    cw = max(int(round(advance)), 1)
    ch_h = max(int(asc + desc), 1)
    n = len(chars) + 1
    rows = (n + _COLS - 1) // _COLS
    img = Image.new("L", (_COLS * cw, rows * ch_h), 0)
    for i, ch in enumerate(chars):
        cell = Image.new("L", (cw, ch_h), 0)
        ImageDraw.Draw(cell).text((0, 0), ch, fill=255, font=font)
        img.paste(cell, ((i % _COLS) * cw, (i // _COLS) * ch_h))
    s = len(chars)
    x, y = (s % _COLS) * cw, (s // _COLS) * ch_h
    ImageDraw.Draw(img).rectangle([x, y, x + cw - 1, y + ch_h - 1], fill=255)
    return np.asarray(img, np.uint8), cw, ch_h


def wrap_lines(lines: list[str], cols: int) -> list[str]:
    """``lines`` cut to at most ``cols`` characters each: a long line breaks at its last run
    of two or more spaces that fits (the HUD's field separator), else at a space, else
    anywhere; continuations are indented by two spaces."""
    cols = max(int(cols), 8)
    out: list[str] = []
    for line in lines:
        rest, first = line, True
        while True:
            text = rest if first else "  " + rest
            if len(text) <= cols:
                out.append(text)
                break
            cut = _break_at(text, cols)
            out.append(text[:cut].rstrip())
            rest, first = text[cut:].lstrip(), False
            if not rest:
                break
    return out


def _break_at(text: str, cols: int) -> int:
    """Where to break ``text`` (longer than ``cols``): after the last field separator (two
    spaces) within ``cols``, else the last space, else at ``cols``."""
    head = text[:cols + 1]
    sep = head.rfind("  ", 2)
    if sep > cols // 3:
        return sep
    space = head.rfind(" ", 2)
    return space if space > cols // 3 else cols


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

    def _make_vao(self) -> None:
        self.vao = self.ctx.vertex_array(
            self.prog, [(self.vbo, "2f 2f 4f 4f 4f", "in_pos", "in_local", "in_grid", "in_fg",
                         "in_bg")])

    def text_size(self, lines: list[str]) -> tuple[int, int]:
        w = max((len(s) for s in lines), default=0) * self.cw
        return w, len(lines) * self.ch

    def panel(self, x: float, y: float, w: float, h: float, color=(0, 0, 0, 0.55)) -> None:
        """Queue a filled rectangle (pixels, origin top-left)."""
        self._blocks.append((x, y, w, h, [], (0.0, 0.0, 0.0, 0.0), tuple(color)))

    def text(self, x: float, y: float, lines: list[str], color=(1, 1, 1, 1),
             background: bool = True) -> tuple[int, int]:
        """Queue lines of text with the top-left corner at pixel (x, y) (rounded: glyphs land
        on whole pixels); returns its size."""
        w, h = self.text_size(lines)
        x, y = round(x), round(y)
        if lines:
            bg = TEXT_PANEL if background else (0.0, 0.0, 0.0, 0.0)
            self._blocks.append((x, y, w, h, list(lines), tuple(color), bg))
        return w, h

    def legend(self, x: float, y: float, title: str,
               items: list[tuple[str, tuple[float, ...]]], max_w: float | None = None
               ) -> tuple[int, int]:
        """Queue ``title  [#] label  [#] label ...``: a colour swatch (a filled cell) before
        each label, the label in that colour, over one panel, wrapping onto more rows past
        ``max_w`` pixels; returns its size."""
        cw, ch = self.cw, self.ch
        limit = max_w if max_w is not None else float("inf")
        rows: list[list[tuple[int, str, tuple]]] = [[]]  # per row: (column, label, colour)
        col = len(title)
        for label, rgba in items:
            need = 3 + 2 + len(label)  # gap, swatch, label
            if (col + need) * cw > limit and (rows[-1] or len(rows) == 1):
                rows.append([])  # the next row starts at the left edge, under the title
                col = -1
            rows[-1].append((col + 3, label, tuple(rgba)))
            col += need
        cols = max((c + 2 + len(lab) for row in rows for c, lab, _ in row), default=len(title))
        w, h = cols * cw, len(rows) * ch
        self.panel(x - 4, y - 2, w + 8, h + 4, color=TEXT_PANEL)
        self.text(x, y, [title], color=(0.95, 0.97, 1.0, 1.0), background=False)
        for r, row in enumerate(rows):
            for c, label, rgba in row:
                top = y + r * ch
                self.panel(x + c * cw, top + round(ch * 0.2), round(cw * 1.2), round(ch * 0.6),
                           color=rgba)
                self.text(x + (c + 2) * cw, top, [label], color=rgba, background=False)
        return w, h

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

    def draw(self, size: tuple[float, float]) -> None:
        """Draw the queued blocks on a framebuffer of ``size`` pixels, glyphs at 1:1."""
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
