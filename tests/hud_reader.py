"""Read the HUD's text back from a screenshot, for tests that check what a user sees.

The HUD draws a monospace bitmap atlas at 1:1 on whole pixels (app/render/hud.py), so each
character cell of a screenshot is one of the atlas's glyphs over a dark panel: the cell's
brightness is matched to the nearest glyph's coverage (least squares). Exact for the HUD's
light text on its 78 % black panel whatever the scene behind it; past the end of a line's
panel the scene shows, so compare a line's start (``got.startswith(want)``).
"""

from __future__ import annotations

import numpy as np

from app.render.hud import _COLS, _FIRST, _LAST, build_atlas

#: A cell whose mean squared difference from its best glyph is above this reads as ``?``.
MISMATCH = 0.03
#: What the panel lets through of the scene behind (1 - its alpha): brightness up to this is
#: no text, whatever the scene (box lines behind the panel must not read as glyphs).
SCENE = 0.22
TEXT = 0.95  # the HUD's text brightness


def _text_level(v: np.ndarray) -> np.ndarray:
    """Brightness in [0, 1] -> how much of it is text: 0 up to what the scene shows through."""
    return np.clip((v - SCENE) / (TEXT - SCENE), 0.0, 1.0)


def glyph_masks(px: int) -> tuple[np.ndarray, int, int]:
    """(coverage (glyphs, cell_h * cell_w) in [0, 1], cell_w, cell_h) of the atlas at
    ``px``."""
    atlas, cw, ch = build_atlas(px)
    masks = []
    for g in range(_LAST - _FIRST + 1):
        y, x = (g // _COLS) * ch, (g % _COLS) * cw
        masks.append(_text_level(atlas[y:y + ch, x:x + cw].reshape(-1) / 255.0 * TEXT))
    return np.asarray(masks, np.float32), cw, ch


def read_hud(img: np.ndarray, px: int, x0: int = 8, y0: int = 6,
             max_lines: int = 40) -> list[str]:
    """The text lines at the HUD's place in ``img`` ((h, w, 3), top row first) drawn with a
    ``px`` font; a cell matching no glyph well reads as ``?``. Trailing spaces dropped."""
    masks, cw, ch = glyph_masks(px)
    bright = _text_level(np.asarray(img).max(axis=2).astype(np.float32) / 255.0)
    h, w = bright.shape
    cols = (w - x0) // cw
    lines = []
    for k in range(max_lines):
        y = y0 + k * ch
        if y + ch > h:
            break
        row = bright[y:y + ch, x0:x0 + cols * cw].reshape(ch, cols, cw).transpose(1, 0, 2)
        cells = row.reshape(cols, ch * cw)
        diff = ((cells[:, None, :] - masks[None, :, :]) ** 2).mean(axis=2)
        best = diff.argmin(axis=1)
        ok = diff[np.arange(cols), best] <= MISMATCH
        text = "".join(chr(_FIRST + g) if good else "?" for g, good in zip(best, ok,
                                                                         strict=True))
        lines.append(text.rstrip(" ?"))
    return lines
