"""The CPU side of Z-pyramid occlusion: a read-back max-depth mip chain and the compiled test.

The pyramid is a max-depth mip chain of a depth buffer (window depth in [0, 1], GL's
default depth range, rows bottom-up as glReadPixels returns them). Level L+1 has size
``max(1, w_L // 2)`` by ``max(1, h_L // 2)``; at odd sizes the last texel of a row or column
also covers the leftover texel, so a level-L texel ``i`` covers level-0 pixels
``[i * 2**L, (i + 1) * 2**L)`` except the last one, which reaches the edge. That keeps the
max conservative.

Indexes call :func:`box_occluded` / :func:`sphere_occluded` inside their compiled traversal
with the arrays of :meth:`ZPyramid.arrays`; an empty ``widths`` array means "no occlusion".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit


@dataclass
class ZPyramid:
    """A max-depth pyramid plus the view-projection it was drawn with.

    ``viewproj`` maps world points to clip space as column vectors: ``clip = viewproj @ [p, 1]``.
    ``data`` holds all levels back to back (float32, row-major, bottom row first).
    """

    viewproj: np.ndarray
    data: np.ndarray
    offsets: np.ndarray
    widths: np.ndarray
    heights: np.ndarray

    @classmethod
    def from_levels(cls, viewproj: np.ndarray, levels: list[np.ndarray]) -> ZPyramid:
        """Pack a list of (h, w) float arrays, finest first."""
        offsets = np.zeros(len(levels), dtype=np.int64)
        total = 0
        for i, lv in enumerate(levels):
            offsets[i] = total
            total += lv.size
        data = np.concatenate([np.ascontiguousarray(lv, np.float32).ravel() for lv in levels])
        return cls(
            viewproj=np.ascontiguousarray(viewproj, dtype=np.float64),
            data=data,
            offsets=offsets,
            widths=np.array([lv.shape[1] for lv in levels], dtype=np.int64),
            heights=np.array([lv.shape[0] for lv in levels], dtype=np.int64),
        )

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The tuple the compiled tests take: (viewproj, data, offsets, widths, heights)."""
        return self.viewproj, self.data, self.offsets, self.widths, self.heights


def no_occlusion_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Arrays meaning 'occlusion off' for kernels that always take the occlusion arguments."""
    return _NO_OCC


_NO_OCC = (
    np.eye(4, dtype=np.float64),
    np.zeros(1, dtype=np.float32),
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64),
)


def occlusion_arrays(occlusion: ZPyramid | None):
    """Arrays for a pyramid, or the 'off' arrays for None."""
    return _NO_OCC if occlusion is None else occlusion.arrays()


@njit(cache=True)
def rect_occluded(
    x0: float, y0: float, x1: float, y1: float, znear: float,
    data: np.ndarray, offsets: np.ndarray, widths: np.ndarray, heights: np.ndarray,
) -> bool:
    """True when window depth ``znear`` is behind every pyramid texel over the NDC rectangle.

    Picks the finest level at which the rectangle spans at most 2x2 texels.
    """
    w0 = widths[0]
    h0 = heights[0]
    # NDC -> level-0 pixel coordinates, clamped to the screen.
    px0 = min(max((x0 * 0.5 + 0.5) * w0, 0.0), w0 - 1.0)
    px1 = min(max((x1 * 0.5 + 0.5) * w0, 0.0), w0 - 1.0)
    py0 = min(max((y0 * 0.5 + 0.5) * h0, 0.0), h0 - 1.0)
    py1 = min(max((y1 * 0.5 + 0.5) * h0, 0.0), h0 - 1.0)
    nlev = widths.shape[0]
    level = 0
    scale = 1.0
    while level < nlev - 1:
        if math.floor(px1 / scale) - math.floor(px0 / scale) <= 1 and (
            math.floor(py1 / scale) - math.floor(py0 / scale) <= 1
        ):
            break
        level += 1
        scale *= 2.0
    w = widths[level]
    h = heights[level]
    ix0 = min(int(math.floor(px0 / scale)), w - 1)
    ix1 = min(int(math.floor(px1 / scale)), w - 1)
    iy0 = min(int(math.floor(py0 / scale)), h - 1)
    iy1 = min(int(math.floor(py1 / scale)), h - 1)
    base = offsets[level]
    for iy in range(iy0, iy1 + 1):
        row = base + iy * w
        for ix in range(ix0, ix1 + 1):
            if data[row + ix] >= znear:
                return False
    return True


@njit(cache=True)
def box_occluded(
    lo: np.ndarray, hi: np.ndarray,
    viewproj: np.ndarray, data: np.ndarray, offsets: np.ndarray,
    widths: np.ndarray, heights: np.ndarray,
) -> bool:
    """True when the AABB is certainly hidden behind the pyramid's depths.

    A box crossing the near plane or behind the eye is never occluded (kept).
    """
    if widths.shape[0] == 0:
        return False
    xmin = np.inf
    xmax = -np.inf
    ymin = np.inf
    ymax = -np.inf
    zmin = np.inf
    for k in range(8):
        x = hi[0] if (k & 1) else lo[0]
        y = hi[1] if (k & 2) else lo[1]
        z = hi[2] if (k & 4) else lo[2]
        cx = viewproj[0, 0] * x + viewproj[0, 1] * y + viewproj[0, 2] * z + viewproj[0, 3]
        cy = viewproj[1, 0] * x + viewproj[1, 1] * y + viewproj[1, 2] * z + viewproj[1, 3]
        cz = viewproj[2, 0] * x + viewproj[2, 1] * y + viewproj[2, 2] * z + viewproj[2, 3]
        cw = viewproj[3, 0] * x + viewproj[3, 1] * y + viewproj[3, 2] * z + viewproj[3, 3]
        if cw <= 1e-9 or cz < -cw:
            return False
        inv = 1.0 / cw
        nx = cx * inv
        ny = cy * inv
        nz = cz * inv
        xmin = min(xmin, nx)
        xmax = max(xmax, nx)
        ymin = min(ymin, ny)
        ymax = max(ymax, ny)
        zmin = min(zmin, nz)
    if xmax < -1.0 or xmin > 1.0 or ymax < -1.0 or ymin > 1.0:
        return False  # off screen: frustum culling's business, not occlusion's
    return rect_occluded(xmin, ymin, xmax, ymax, zmin * 0.5 + 0.5, data, offsets, widths, heights)


@njit(cache=True)
def sphere_occluded(
    cx: float, cy: float, cz: float, r: float,
    viewproj: np.ndarray, data: np.ndarray, offsets: np.ndarray,
    widths: np.ndarray, heights: np.ndarray,
) -> bool:
    """True when the sphere is certainly hidden (tested through its bounding box)."""
    if widths.shape[0] == 0:
        return False
    lo = np.empty(3)
    hi = np.empty(3)
    lo[0] = cx - r
    lo[1] = cy - r
    lo[2] = cz - r
    hi[0] = cx + r
    hi[1] = cy + r
    hi[2] = cz + r
    return box_occluded(lo, hi, viewproj, data, offsets, widths, heights)
