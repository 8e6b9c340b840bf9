"""The CPU side of Z-pyramid occlusion: a read-back max-depth mip chain and the compiled test.

The pyramid is a max-depth mip chain of a depth buffer (window depth in [0, 1], GL's
default depth range, rows bottom-up as glReadPixels returns them). Level L+1 has size
``max(1, w_L // 2)`` by ``max(1, h_L // 2)``; at odd sizes the last texel of a row or column
also covers the leftover texel, so a level-L texel ``i`` covers level-0 pixels
``[i * 2**L, (i + 1) * 2**L)`` except the last one, which reaches the edge. That keeps the
max conservative. :func:`reduce_levels` is the numpy reference of that rule; the GPU passes
of ``app/render/depth_pyramid.py`` implement the same rule and are tested against it.

Not every level has to be on the CPU: ``offsets[L] < 0`` marks level L as *not stored*
(a reader that copies back only the coarse levels saves most of the read-back). ``widths`` and
``heights`` still list every level from the full-resolution level 0, so that NDC maps to
texels exactly; the test then uses the finest stored level at or above the one it chose.

Indexes call :func:`box_hidden` / :func:`sphere_hidden` inside their compiled traversal with
the :class:`Occluder` of :func:`occluder` (one named tuple instead of five loose arrays); an
occluder with an empty ``widths`` array means "no occlusion" (:data:`NO_OCCLUDER`).

Conservativeness (what makes zero false negatives possible in the two-pass mode):

* the screen rectangle of a box is the bounding rectangle of its 8 projected corners, that of
  a sphere is the exact bounding rectangle of its projected ellipse (the tangent planes of the
  pencil through the eye, the clip-space form of Mara & McGuire 2013);
* the depth compared is the nearest window depth of the volume (nearest corner, nearest
  point of the sphere), minus :data:`DEPTH_EPS` for rasterization and float32 rounding;
* anything crossing the near plane or reaching behind the eye is never occluded;
* a volume is rejected only when its nearest depth is behind *every* texel it covers at the
  finest stored level (starting where the rectangle spans at most ``MAX_TEXELS`` texels per
  axis and descending only into texels that are in front).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit
from numba.core import types
from numba.extending import overload

#: Slack in window depth: a volume counts as occluded only when it is farther than the
#: pyramid by more than this (24-bit depth quanta are 6e-8; float32 rounding near 1 is 6e-8).
DEPTH_EPS = 1e-6

#: The test starts at the finest stored level at which the rectangle spans at most this many
#: texels per axis (Greene's rule is 2), and descends from every texel found in front into its
#: children that overlap the rectangle (:data:`REFINE`), so the answer is exactly "behind every
#: texel of the finest stored level the rectangle touches". Without the descent a coarse
#: footprint pokes far past the rectangle: on one fig26 frame (cubes of radius 2.5-2.8, 915 in
#: the frustum, 43 truly visible) a flat test kept 139 spheres with 2x2 texels, 101 with 4x4,
#: 85 with 8x8 and 76 with an exact rectangle; over 80 frames of the fig26 path the descent
#: renders 94.3 instead of 98.1 (flat 16x16).
MAX_TEXELS = 4

#: When a texel at the chosen level is in front, look at its children that overlap the
#: rectangle at the finer stored levels before giving up (Greene's hierarchical descent).
REFINE = True


class Occluder(NamedTuple):
    """The Z-pyramid as the compiled tests take it: one argument instead of five arrays.

    Empty ``widths`` means "no occlusion" (every test answers "not hidden").
    """

    viewproj: np.ndarray  # (4, 4) float64, world -> clip, column vectors
    data: np.ndarray  # float32, every stored level back to back
    offsets: np.ndarray  # int64 per level, -1 when the level is not stored
    widths: np.ndarray  # int64 per level
    heights: np.ndarray  # int64 per level


@dataclass
class ZPyramid:
    """A max-depth pyramid plus the view-projection it was drawn with.

    ``viewproj`` maps world points to clip space as column vectors: ``clip = viewproj @ [p, 1]``.
    ``data`` holds all stored levels back to back (float32, row-major, bottom row first);
    ``offsets[L]`` is where level L starts in ``data``, or -1 when level L is not stored.
    """

    viewproj: np.ndarray
    data: np.ndarray
    offsets: np.ndarray
    widths: np.ndarray
    heights: np.ndarray

    @classmethod
    def from_levels(cls, viewproj: np.ndarray, levels: list[np.ndarray | None],
                    sizes: list[tuple[int, int]] | None = None) -> ZPyramid:
        """Pack a list of (h, w) float arrays, finest first.

        A level may be ``None`` (not stored); then ``sizes`` must give every level's (w, h).
        """
        n = len(levels)
        offsets = np.full(n, -1, dtype=np.int64)
        widths = np.zeros(n, dtype=np.int64)
        heights = np.zeros(n, dtype=np.int64)
        total = 0
        parts = []
        for i, lv in enumerate(levels):
            if lv is None:
                if sizes is None:
                    raise ValueError("ZPyramid.from_levels: a missing level needs sizes")
                widths[i], heights[i] = sizes[i]
                continue
            heights[i], widths[i] = lv.shape
            if sizes is not None and tuple(sizes[i]) != (lv.shape[1], lv.shape[0]):
                raise ValueError(f"level {i} has shape {lv.shape}, sizes say {sizes[i]}")
            offsets[i] = total
            total += lv.size
            parts.append(np.ascontiguousarray(lv, np.float32).ravel())
        if not parts:
            raise ValueError("ZPyramid.from_levels: no stored level")
        if offsets[n - 1] < 0:
            raise ValueError("ZPyramid.from_levels: the coarsest level must be stored")
        return cls(
            viewproj=np.ascontiguousarray(viewproj, dtype=np.float64),
            data=np.concatenate(parts),
            offsets=offsets,
            widths=widths,
            heights=heights,
        )

    @classmethod
    def from_depth(cls, viewproj: np.ndarray, depth: np.ndarray, first_level: int = 0) -> ZPyramid:
        """Reduce a (h, w) depth image on the CPU (numpy) and keep levels >= ``first_level``."""
        levels = reduce_levels(depth)
        first_level = min(max(int(first_level), 0), len(levels) - 1)
        sizes = [(lv.shape[1], lv.shape[0]) for lv in levels]
        kept: list[np.ndarray | None] = [None] * first_level + levels[first_level:]
        return cls.from_levels(viewproj, kept, sizes)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The tuple the compiled tests take: (viewproj, data, offsets, widths, heights)."""
        return self.viewproj, self.data, self.offsets, self.widths, self.heights

    def occluder(self) -> Occluder:
        """This pyramid as the one named tuple the compiled traversals take."""
        return Occluder(self.viewproj, self.data, self.offsets, self.widths, self.heights)

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of level 0, the depth buffer the pyramid was built from."""
        return int(self.widths[0]), int(self.heights[0])

    def level(self, i: int) -> np.ndarray | None:
        """Level ``i`` as an (h, w) array view, or None when not stored."""
        o = int(self.offsets[i])
        if o < 0:
            return None
        w, h = int(self.widths[i]), int(self.heights[i])
        return self.data[o:o + w * h].reshape(h, w)


def level_sizes(width: int, height: int) -> list[tuple[int, int]]:
    """(w, h) of every pyramid level: next is ``max(1, w // 2)``, down to 1x1."""
    sizes = [(int(width), int(height))]
    w, h = int(width), int(height)
    while w > 1 or h > 1:
        w, h = max(1, w // 2), max(1, h // 2)
        sizes.append((w, h))
    return sizes


def reduce_once(src: np.ndarray) -> np.ndarray:
    """One max-reduction step of the documented rule (numpy reference)."""
    h, w = src.shape
    nw, nh = max(1, w // 2), max(1, h // 2)
    out = np.empty((nh, nw), dtype=np.float32)
    # Columns: texel i takes 2i and 2i+1 (when present); the last also takes any leftover.
    cols = src[:, : 2 * nw].reshape(h, nw, 2).max(axis=2) if w >= 2 else src[:, :1].copy()
    if w >= 2 and w % 2 == 1:
        cols[:, -1] = np.maximum(cols[:, -1], src[:, -1])
    rows = cols[: 2 * nh].reshape(nh, 2, nw).max(axis=1) if h >= 2 else cols[:1].copy()
    if h >= 2 and h % 2 == 1:
        rows[-1] = np.maximum(rows[-1], cols[-1])
    out[:] = rows
    return out


def reduce_levels(depth: np.ndarray) -> list[np.ndarray]:
    """Every level of the max pyramid of a (h, w) depth image, finest (the image) first."""
    lv = np.ascontiguousarray(depth, dtype=np.float32)
    out = [lv]
    while lv.shape[0] > 1 or lv.shape[1] > 1:
        lv = reduce_once(lv)
        out.append(lv)
    return out


@njit(cache=True)
def reduce_stored_levels(data: np.ndarray, offsets: np.ndarray, widths: np.ndarray,
                         heights: np.ndarray, first: int) -> None:  # pragma: no cover - compiled
    """Fill levels ``first + 1 ..`` of packed pyramid ``data`` from level ``first``, in place.

    Same rule as :func:`reduce_once` (each texel takes its 2x2 block, the last row and column
    also the leftover of an odd size), so the result equals :func:`reduce_levels` exactly. The
    GPU reduces the full-resolution depth to the first level it reads back; finishing the
    small top of the chain here (14,400 texels to 1 for a 1280x720 frame, ~10 us) is cheaper
    on llvmpipe than eight more passes at ~80 us of fixed cost each.
    """
    for lv in range(first + 1, widths.shape[0]):
        sw = widths[lv - 1]
        sh = heights[lv - 1]
        dw = widths[lv]
        dh = heights[lv]
        src = offsets[lv - 1]
        dst = offsets[lv]
        for y in range(dh):
            y0 = 2 * y
            y1 = sh if y == dh - 1 else min(2 * y + 2, sh)
            for x in range(dw):
                x0 = 2 * x
                x1 = sw if x == dw - 1 else min(2 * x + 2, sw)
                m = data[src + y0 * sw + x0]
                for yy in range(y0, y1):
                    row = src + yy * sw
                    for xx in range(x0, x1):
                        v = data[row + xx]
                        if v > m:
                            m = v
                data[dst + y * dw + x] = m


# The pyramid meaning "occlusion off": no level, so every test answers "not hidden".
_NO_OCC = (
    np.eye(4, dtype=np.float64),
    np.zeros(1, dtype=np.float32),
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64),
)


#: The occluder meaning "occlusion off": every test answers "not hidden".
NO_OCCLUDER = Occluder(*_NO_OCC)


class OcclusionOff(NamedTuple):
    """"Occlusion off" as a type of its own: a traversal compiled with :data:`OCCLUSION_OFF`
    (a global constant inside a kernel) leaves every pyramid test out at compile time, so a
    run without occlusion never compiles them (3-6 s at a first start)."""

    viewproj: np.ndarray
    data: np.ndarray
    offsets: np.ndarray
    widths: np.ndarray
    heights: np.ndarray


#: See :class:`OcclusionOff`; the same empty arrays as :data:`NO_OCCLUDER`.
OCCLUSION_OFF = OcclusionOff(*_NO_OCC)


def _is_off(occ) -> bool:
    """At compile time: ``occ`` is typed as :class:`OcclusionOff`."""
    return isinstance(occ, types.BaseNamedTuple) and occ.instance_class is OcclusionOff


def occluder(occlusion: ZPyramid | None) -> Occluder:
    """The occluder of a pyramid, or :data:`NO_OCCLUDER` for None."""
    return NO_OCCLUDER if occlusion is None else occlusion.occluder()


@njit(cache=True)
def rect_occluded(
    x0: float, y0: float, x1: float, y1: float, znear: float,
    data: np.ndarray, offsets: np.ndarray, widths: np.ndarray, heights: np.ndarray,
) -> bool:
    """True when window depth ``znear`` is behind every pyramid texel over the NDC rectangle.

    Starts at the finest level at which the rectangle spans at most ``MAX_TEXELS`` texels per
    axis (or the finest stored level above it); a texel in front there is refined through its
    children down to the finest stored level before the volume counts as visible. ``znear``
    must be finite; the caller handles the near plane.
    """
    w0 = widths[0]
    h0 = heights[0]
    # NDC -> level-0 pixel coordinates, clamped to the screen. A pixel is covered when its
    # centre is, so floor() of the rectangle's edges bounds every covered pixel.
    px0 = min(max((x0 * 0.5 + 0.5) * w0, 0.0), w0 - 1.0)
    px1 = min(max((x1 * 0.5 + 0.5) * w0, 0.0), w0 - 1.0)
    py0 = min(max((y0 * 0.5 + 0.5) * h0, 0.0), h0 - 1.0)
    py1 = min(max((y1 * 0.5 + 0.5) * h0, 0.0), h0 - 1.0)
    nlev = widths.shape[0]
    level = 0
    scale = 1.0
    while level < nlev - 1:
        if offsets[level] >= 0 and (
            math.floor(px1 / scale) - math.floor(px0 / scale) < MAX_TEXELS
            and math.floor(py1 / scale) - math.floor(py0 / scale) < MAX_TEXELS
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
    zref = znear - DEPTH_EPS
    for iy in range(iy0, iy1 + 1):
        row = base + iy * w
        for ix in range(ix0, ix1 + 1):
            if data[row + ix] >= zref and not (
                REFINE and _texel_occluded_below(level, ix, iy, px0, px1, py0, py1, zref,
                                                 data, offsets, widths, heights)
            ):
                return False
    return True


@njit(cache=True)
def _texel_occluded_below(level: int, ix: int, iy: int, px0: float, px1: float, py0: float,
                          py1: float, zref: float, data: np.ndarray, offsets: np.ndarray,
                          widths: np.ndarray, heights: np.ndarray) -> bool:
    """Texel (ix, iy) of ``level`` is in front of ``zref``: is the part of it inside the
    rectangle (level-0 pixels [px0, px1] x [py0, py1]) behind ``zref`` at finer stored levels?

    Depth-first over the children that overlap the rectangle and are themselves in front,
    down to the finest stored level; True when every branch ends behind ``zref``. Children of
    texel x at level l are 2x and 2x+1 at level l-1, and the last texel also owns the leftover
    of an odd row (the reduction rule), so the answer stays conservative.

    Recursive (depth at most the number of levels) so that it allocates nothing: callers
    compiled without the runtime (``_nrt=False``, the grid's cell loop) reach it, and an
    allocated stack failed to compile there (and cost ~40 % of a visible sphere's test).
    """
    if level == 0 or offsets[level - 1] < 0:
        return False  # in front at the finest stored level: not occluded
    cl = level - 1
    scale = float(2 ** cl)
    wc = widths[cl]
    hc = heights[cl]
    cx0 = max(2 * ix, min(int(math.floor(px0 / scale)), wc - 1))
    cx1 = min(wc - 1 if ix == widths[level] - 1 else 2 * ix + 1,
              min(int(math.floor(px1 / scale)), wc - 1))
    cy0 = max(2 * iy, min(int(math.floor(py0 / scale)), hc - 1))
    cy1 = min(hc - 1 if iy == heights[level] - 1 else 2 * iy + 1,
              min(int(math.floor(py1 / scale)), hc - 1))
    cbase = offsets[cl]
    for cy in range(cy0, cy1 + 1):
        for cx in range(cx0, cx1 + 1):
            if data[cbase + cy * wc + cx] >= zref and not _texel_occluded_below(
                    cl, cx, cy, px0, px1, py0, py1, zref, data, offsets, widths, heights):
                return False
    return True


@njit(cache=True)
def box_occluded(
    lo: np.ndarray, hi: np.ndarray,
    viewproj: np.ndarray, data: np.ndarray, offsets: np.ndarray,
    widths: np.ndarray, heights: np.ndarray,
) -> bool:
    """True when the AABB is certainly hidden behind the pyramid's depths (see box_occluded6)."""
    return box_occluded6(lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], viewproj, data, offsets,
                         widths, heights)


@njit(cache=True)
def box_occluded6(
    lx: float, ly: float, lz: float, hx: float, hy: float, hz: float,
    viewproj: np.ndarray, data: np.ndarray, offsets: np.ndarray,
    widths: np.ndarray, heights: np.ndarray,
) -> bool:
    """True when the AABB [l, h] is certainly hidden behind the pyramid's depths.

    A box crossing the near plane or reaching behind the eye is never occluded (kept).
    """
    if widths.shape[0] == 0:
        return False
    xmin = np.inf
    xmax = -np.inf
    ymin = np.inf
    ymax = -np.inf
    zmin = np.inf
    for k in range(8):
        x = hx if (k & 1) else lx
        y = hy if (k & 2) else ly
        z = hz if (k & 4) else lz
        cx = viewproj[0, 0] * x + viewproj[0, 1] * y + viewproj[0, 2] * z + viewproj[0, 3]
        cy = viewproj[1, 0] * x + viewproj[1, 1] * y + viewproj[1, 2] * z + viewproj[1, 3]
        cz = viewproj[2, 0] * x + viewproj[2, 1] * y + viewproj[2, 2] * z + viewproj[2, 3]
        cw = viewproj[3, 0] * x + viewproj[3, 1] * y + viewproj[3, 2] * z + viewproj[3, 3]
        # Every corner strictly in front of the eye and of the near plane, else keep: the
        # projection of a box crossing w = 0 is not the hull of its projected corners.
        if not (cw > 1e-9) or cz < -cw:
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


@njit(cache=True, inline="always")
def _pencil_range(r0: float, r1: float, r2: float, r3: float,
                  w0: float, w1: float, w2: float, w3: float,
                  cx: float, cy: float, cz: float, rad: float) -> tuple[float, float]:
    """Range of ``(R . [p,1]) / (Wr . [p,1])`` over the ball |p - c| <= rad.

    The extremes lie on the planes ``(R - k Wr) . [p,1] = 0`` tangent to the ball:
    ``(A - k W)^2 = rad^2 |a - k w|^2`` with A, W the rows at the centre and a, w their
    xyz parts. Written so that a far, tiny sphere loses no precision. The caller guarantees
    ``W > rad |w|`` (the ball is strictly in front of the eye).
    """
    A = r0 * cx + r1 * cy + r2 * cz + r3
    W = w0 * cx + w1 * cy + w2 * cz + w3
    aw = r0 * w0 + r1 * w1 + r2 * w2
    ww = w0 * w0 + w1 * w1 + w2 * w2
    r2_ = rad * rad
    qa = W * W - r2_ * ww
    qb = A * W - r2_ * aw
    # disc/r^2 = |W a - A w|^2 - r^2 |a x w|^2
    ux = W * r0 - A * w0
    uy = W * r1 - A * w1
    uz = W * r2 - A * w2
    vx = r1 * w2 - r2 * w1
    vy = r2 * w0 - r0 * w2
    vz = r0 * w1 - r1 * w0
    d = (ux * ux + uy * uy + uz * uz) - r2_ * (vx * vx + vy * vy + vz * vz)
    s = rad * math.sqrt(max(d, 0.0))
    return (qb - s) / qa, (qb + s) / qa


@njit(cache=True)
def sphere_ndc_bounds(
    cx: float, cy: float, cz: float, r: float, viewproj: np.ndarray,
) -> tuple[bool, float, float, float, float, float]:
    """(ok, xmin, xmax, ymin, ymax, zmin) of a sphere projected by ``viewproj`` (NDC).

    ``ok`` is False when the sphere touches the near plane or reaches behind the eye (then the
    bounds are meaningless). The rectangle is the exact bounding box of the projected ellipse
    and ``zmin`` the exact nearest NDC depth.
    """
    m = viewproj
    # Near plane (z_clip + w_clip >= 0) and eye plane (w_clip > 0): the ball must be strictly in
    # front of both.
    n0 = m[2, 0] + m[3, 0]
    n1 = m[2, 1] + m[3, 1]
    n2 = m[2, 2] + m[3, 2]
    n3 = m[2, 3] + m[3, 3]
    dn = n0 * cx + n1 * cy + n2 * cz + n3
    if not (dn > r * math.sqrt(n0 * n0 + n1 * n1 + n2 * n2) + 1e-12):
        return False, 0.0, 0.0, 0.0, 0.0, 0.0
    wc = m[3, 0] * cx + m[3, 1] * cy + m[3, 2] * cz + m[3, 3]
    wn = math.sqrt(m[3, 0] * m[3, 0] + m[3, 1] * m[3, 1] + m[3, 2] * m[3, 2])
    if not (wc > r * wn * (1.0 + 1e-9) + 1e-12):
        return False, 0.0, 0.0, 0.0, 0.0, 0.0
    xmin, xmax = _pencil_range(m[0, 0], m[0, 1], m[0, 2], m[0, 3],
                               m[3, 0], m[3, 1], m[3, 2], m[3, 3], cx, cy, cz, r)
    ymin, ymax = _pencil_range(m[1, 0], m[1, 1], m[1, 2], m[1, 3],
                               m[3, 0], m[3, 1], m[3, 2], m[3, 3], cx, cy, cz, r)
    zmin, _ = _pencil_range(m[2, 0], m[2, 1], m[2, 2], m[2, 3],
                            m[3, 0], m[3, 1], m[3, 2], m[3, 3], cx, cy, cz, r)
    return True, xmin, xmax, ymin, ymax, zmin


@njit(cache=True)
def sphere_occluded(
    cx: float, cy: float, cz: float, r: float,
    viewproj: np.ndarray, data: np.ndarray, offsets: np.ndarray,
    widths: np.ndarray, heights: np.ndarray,
) -> bool:
    """True when the sphere is certainly hidden behind the pyramid's depths.

    Uses the exact screen rectangle of the projected sphere and its nearest depth; a sphere
    touching the near plane or reaching behind the eye is never occluded.
    """
    if widths.shape[0] == 0:
        return False
    ok, xmin, xmax, ymin, ymax, zmin = sphere_ndc_bounds(cx, cy, cz, r, viewproj)
    if not ok:
        return False
    if xmax < -1.0 or xmin > 1.0 or ymax < -1.0 or ymin > 1.0:
        return False  # off screen: frustum culling's business, not occlusion's
    return rect_occluded(xmin, ymin, xmax, ymax, zmin * 0.5 + 0.5, data, offsets, widths, heights)


@njit(cache=True)
def spheres_occluded(centers: np.ndarray, radii: np.ndarray,
                     viewproj: np.ndarray, data: np.ndarray, offsets: np.ndarray,
                     widths: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """Vectorised :func:`sphere_occluded` over (N, 3) centres and (N,) radii (bool mask)."""
    n = centers.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        out[i] = sphere_occluded(centers[i, 0], centers[i, 1], centers[i, 2], radii[i],
                                 viewproj, data, offsets, widths, heights)
    return out


def box_hidden(occ: Occluder, lo: np.ndarray, hi: np.ndarray) -> bool:
    """:func:`box_occluded` against an :class:`Occluder` (False when occlusion is off)."""
    return bool(box_occluded(lo, hi, *occ))


def box_hidden6(occ: Occluder, lx: float, ly: float, lz: float, hx: float, hy: float,
                hz: float) -> bool:
    """:func:`box_occluded6` against an :class:`Occluder` (False when occlusion is off)."""
    return bool(box_occluded6(lx, ly, lz, hx, hy, hz, *occ))


def sphere_hidden(occ: Occluder, cx: float, cy: float, cz: float, r: float) -> bool:
    """:func:`sphere_occluded` against an :class:`Occluder` (False when occlusion is off)."""
    return bool(sphere_occluded(cx, cy, cz, r, *occ))


# Compiled, the three are chosen by the occluder's type: with OCCLUSION_OFF a constant False,
# so that the pyramid tests are not compiled into a traversal that never uses them.

@overload(box_hidden, inline="always")
def _box_hidden(occ, lo, hi):
    if _is_off(occ):
        return lambda occ, lo, hi: False
    return lambda occ, lo, hi: box_occluded(lo, hi, occ.viewproj, occ.data, occ.offsets,
                                            occ.widths, occ.heights)


@overload(box_hidden6, inline="always")
def _box_hidden6(occ, lx, ly, lz, hx, hy, hz):
    if _is_off(occ):
        return lambda occ, lx, ly, lz, hx, hy, hz: False
    return lambda occ, lx, ly, lz, hx, hy, hz: box_occluded6(
        lx, ly, lz, hx, hy, hz, occ.viewproj, occ.data, occ.offsets, occ.widths, occ.heights)


@overload(sphere_hidden, inline="always")
def _sphere_hidden(occ, cx, cy, cz, r):
    if _is_off(occ):
        return lambda occ, cx, cy, cz, r: False
    return lambda occ, cx, cy, cz, r: sphere_occluded(
        cx, cy, cz, r, occ.viewproj, occ.data, occ.offsets, occ.widths, occ.heights)
