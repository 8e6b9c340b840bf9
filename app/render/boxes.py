"""Node-box overlay: the index's node boxes as lines, one instanced draw (the unit cube's
12 edges, per-instance lo, hi and colour).

On software GL the lines' vertices and pixels cost more than the scene they annotate (B took
the demo from ~100 to 39 fps, fixed-octree boxes at 640x360 to 8): most boxes are outside
the view or a few pixels across. :func:`pack_boxes_in_view` keeps, in one compiled pass, the
boxes that touch the view frustum and span at least :data:`MIN_BOX_PX` pixels (smaller ones
are a blur of lines that shows nothing of the tree).

Two colourings: by depth (a palette cycling with the node's depth) and by the outcome of the
last frustum query (``app.geom.predicates.NODE_*``). A filter keeps all boxes, the leaves only
(boxes with no box of the next depth inside them) or the boxes down to a depth
(:func:`select_boxes`): at small split thresholds the full overlay hides the scene.
"""

from __future__ import annotations

import moderngl
import numpy as np
from numba import njit

from app.geom.predicates import OUTSIDE, box_point_dist6, box_vs_frustum6
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
MIN_BOX_PX = 3.0  # boxes smaller on screen are not drawn

#: The box filters, in the order the N key cycles them.
BOX_FILTERS = ("all", "leaves", "depth<=1", "depth<=2", "depth<=3", "depth<=4")


def depth_colors(depth: np.ndarray, alpha: float = 0.6) -> np.ndarray:
    out = np.empty((depth.shape[0], 4), np.float32)
    out[:, :3] = DEPTH_PALETTE[np.asarray(depth, np.int64) % len(DEPTH_PALETTE)]
    out[:, 3] = alpha
    return out


def outcome_colors(codes: np.ndarray) -> np.ndarray:
    c = np.clip(np.asarray(codes, np.int64), 0, len(OUTCOME_COLORS) - 1)
    return OUTCOME_COLORS[c]


_KEY_BITS = 20  # bits per axis of a child's cell key
_KEY_OFF = 1 << (_KEY_BITS - 1)


@njit(cache=True, inline="always")
def _holds(lo, hi, i, k) -> bool:  # pragma: no cover - compiled
    """Box k is centred inside box i and no larger on any axis (a child of i)."""
    for a in range(3):
        c = 0.5 * (lo[k, a] + hi[k, a])
        if c < lo[i, a] or c > hi[i, a] or hi[k, a] - lo[k, a] > hi[i, a] - lo[i, a]:
            return False
    return True


@njit(cache=True, inline="always")
def _first_at_least(keys, key) -> int:  # pragma: no cover - compiled
    """Position of the first key >= ``key`` in the sorted ``keys`` (binary search)."""
    a = 0
    b = keys.shape[0]
    while a < b:
        mid = (a + b) >> 1
        if keys[mid] < key:
            a = mid + 1
        else:
            b = mid
    return a


@njit(cache=True)
def _mark_parents(lo, hi, parents, children, keys, cell, flags):  # pragma: no cover
    """flags[p] = 0 for each parent with a child inside: the children's centres hashed into
    cubes of side ``cell`` (``keys`` sorted, ``children`` in that order), each parent probes
    the cubes it overlaps, or scans every child when it overlaps more cubes than that."""
    m = children.shape[0]
    span = 1 << 20
    for q in range(parents.shape[0]):
        i = parents[q]
        x0 = int(np.floor(lo[i, 0] / cell))
        y0 = int(np.floor(lo[i, 1] / cell))
        z0 = int(np.floor(lo[i, 2] / cell))
        x1 = int(np.floor(hi[i, 0] / cell))
        y1 = int(np.floor(hi[i, 1] / cell))
        z1 = int(np.floor(hi[i, 2] / cell))
        cubes = (x1 - x0 + 1) * (y1 - y0 + 1) * (z1 - z0 + 1)
        found = False
        if cubes > m or min(x0, y0, z0) < -(span // 2) or max(x1, y1, z1) >= span // 2:
            for j in range(m):
                if _holds(lo, hi, i, children[j]):
                    found = True
                    break
        else:
            for x in range(x0, x1 + 1):
                for y in range(y0, y1 + 1):
                    for z in range(z0, z1 + 1):
                        key = ((x + span // 2) * span + (y + span // 2)) * span + z + span // 2
                        j = _first_at_least(keys, key)
                        while j < m and keys[j] == key:
                            if _holds(lo, hi, i, children[j]):
                                found = True
                                break
                            j += 1
                        if found:
                            break
                    if found:
                        break
                if found:
                    break
        if found:
            flags[i] = 0


def leaf_boxes(lo: np.ndarray, hi: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Boolean mask of the leaves: boxes with no box of the next depth (no larger than them)
    centred inside them. Worked out from the boxes alone, so it serves every index."""
    n = lo.shape[0]
    flags = np.ones(n, np.uint8)
    if n == 0:
        return flags.astype(bool)
    depth = np.asarray(depth, np.int64)
    lo = np.ascontiguousarray(lo, np.float64)
    hi = np.ascontiguousarray(hi, np.float64)
    order = np.argsort(depth, kind="stable")
    starts = np.searchsorted(depth[order], np.arange(depth.min(), depth.max() + 2))
    span = 1 << _KEY_BITS
    for d in range(starts.shape[0] - 2):  # one compiled pass per depth, not per box
        parents = order[starts[d]:starts[d + 1]]
        children = order[starts[d + 1]:starts[d + 2]]
        if parents.shape[0] == 0 or children.shape[0] == 0:
            continue
        cell = float(np.median((hi[parents] - lo[parents]).max(axis=1)))
        if not np.isfinite(cell) or cell <= 0:
            cell = 1.0
        centre = 0.5 * (lo[children] + hi[children])
        ijk = np.floor(centre / cell).astype(np.int64) + _KEY_OFF
        keys = (ijk[:, 0] * span + ijk[:, 1]) * span + ijk[:, 2]
        srt = np.argsort(keys, kind="stable")
        _mark_parents(lo, hi, parents, children[srt], keys[srt], cell, flags)
    return flags.astype(bool)


def select_boxes(lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, mode: str) -> np.ndarray:
    """Mask of the boxes a filter of :data:`BOX_FILTERS` keeps."""
    if mode == "all":
        return np.ones(lo.shape[0], bool)
    if mode == "leaves":
        return leaf_boxes(lo, hi, depth)
    if mode.startswith("depth<="):
        return np.asarray(depth) <= int(mode[len("depth<="):])
    raise ValueError(f"box filter must be one of {', '.join(BOX_FILTERS)}, got {mode!r}")


def legend_color(rgb) -> tuple[float, float, float, float]:
    """``rgb`` lifted towards white until its luminance is at least 0.62, opaque: a legend's
    label must read on the HUD's dark panel (the overlay's grey "not visited", 0.45, and
    pure red, 0.37, did not)."""
    c = np.asarray(rgb[:3], np.float64)
    lum = float(c @ _LUMA)
    if lum < _LEGEND_LUMA:
        t = (_LEGEND_LUMA - lum) / (1.0 - lum)
        c = c + (1.0 - c) * t
    return (*(float(x) for x in c), 1.0)


_LUMA = np.array([0.2126, 0.7152, 0.0722])
_LEGEND_LUMA = 0.62


def depth_legend(depth: np.ndarray) -> list[tuple[str, tuple[float, ...]]]:
    """(label, RGBA) for each depth colour in use (the palette repeats every 8 depths)."""
    top = int(np.max(depth)) if len(depth) else 0
    k = min(top + 1, len(DEPTH_PALETTE))
    items = [(str(i), legend_color(DEPTH_PALETTE[i])) for i in range(k)]
    if top >= len(DEPTH_PALETTE):
        items[-1] = (f"{k - 1} (then repeats: 8 = 0 ...)", items[-1][1])
    return items


def outcome_legend() -> list[tuple[str, tuple[float, ...]]]:
    """(label, RGBA) of each outcome colour, in NODE_* order after "not visited"."""
    order = [1, 2, 3, 4, 5, 0]
    return [(OUTCOME_NAMES[i], legend_color(OUTCOME_COLORS[i])) for i in order]


@njit(cache=True)
def _pack_in_view(lo, hi, colors, planes, eye, px_per_unit, min_px, out, size_px
                  ):  # pragma: no cover
    """Rows (lo, hi, rgba) of the boxes that touch ``planes`` and span at least ``min_px``
    pixels (largest edge * ``px_per_unit`` / distance from ``eye``; a box holding the eye
    always) written to the front of ``out``, their sizes on screen to ``size_px``; returns
    their number."""
    n = 0
    for i in range(lo.shape[0]):
        lx, ly, lz = lo[i, 0], lo[i, 1], lo[i, 2]
        hx, hy, hz = hi[i, 0], hi[i, 1], hi[i, 2]
        if box_vs_frustum6(planes, lx, ly, lz, hx, hy, hz) == OUTSIDE:
            continue
        d = box_point_dist6(lx, ly, lz, hx, hy, hz, eye[0], eye[1], eye[2])
        edge = max(hx - lx, hy - ly, hz - lz)
        if d > 0.0 and edge * px_per_unit < min_px * d:
            continue
        out[n, 0] = lx
        out[n, 1] = ly
        out[n, 2] = lz
        out[n, 3] = hx
        out[n, 4] = hy
        out[n, 5] = hz
        for k in range(4):
            out[n, 6 + k] = colors[i, k]
        size_px[n] = edge * px_per_unit / d if d > 0.0 else np.inf
        n += 1
    return n


def pack_boxes_in_view(lo: np.ndarray, hi: np.ndarray, colors: np.ndarray, view,
                       height: int, min_px: float, budget: int | None = None) -> np.ndarray:
    """float32 (n, 10) instance rows (lo, hi, rgba) of the boxes worth drawing in ``view`` (a
    :class:`~app.viewer.camera.CameraView`) on a framebuffer ``height`` pixels tall: those
    touching its frustum and at least ``min_px`` pixels across; with ``budget``, only that
    many of them, the largest on screen (the tree's coarse levels first)."""
    out = np.empty((lo.shape[0], 10), np.float32)
    size_px = np.empty(lo.shape[0], np.float64)
    px_per_unit = float(view.proj[1, 1]) * height / 2.0
    n = _pack_in_view(np.ascontiguousarray(lo, np.float64), np.ascontiguousarray(hi, np.float64),
                      np.ascontiguousarray(colors, np.float32),
                      np.ascontiguousarray(view.planes, np.float64),
                      np.ascontiguousarray(view.eye, np.float64), px_per_unit, float(min_px), out,
                      size_px)
    if budget is not None and n > budget:
        keep = np.argpartition(-size_px[:n], budget - 1)[:budget] if budget > 0 else []
        return out[np.sort(keep)]
    return out[:n]


class BoxBudget:
    """How many boxes to draw: fewer while drawing them takes longer than the scene's own
    draw, more again once they take under half of it (on software GL each line costs about
    a microsecond of set-up, so the count is what costs); the largest boxes are kept."""

    FLOOR = 256

    def __init__(self) -> None:
        self.count: int | None = None  # None: every box

    def adjust(self, boxes_ms: float, scene_ms: float, drawn: int, wanted: int) -> None:
        """After ``drawn`` of ``wanted`` boxes took ``boxes_ms`` beside a ``scene_ms`` scene."""
        if boxes_ms > scene_ms and drawn > self.FLOOR:
            self.count = max(self.FLOOR, int(drawn * 0.7))
        elif self.count is not None and boxes_ms < 0.5 * scene_ms:
            self.count = None if self.count * 1.25 >= wanted else int(self.count * 1.25)


class InstancedBoxLines:
    """The unit cube's 12 edges drawn once per box instance in one instanced line draw; a
    subclass turns its boxes into per-instance rows of ``floats`` float32 (``layout`` /
    ``attrs``: the instance buffer's moderngl format and its shader inputs)."""

    def __init__(self, ctx: moderngl.Context, program: str, layout: str,
                 attrs: tuple[str, ...], floats: int, reserve: int) -> None:
        self.ctx = ctx
        self.prog = load_program(ctx, program)
        self.vbo = ctx.buffer(CUBE_EDGES.tobytes())
        self.inst = ctx.buffer(reserve=floats * 4 * reserve, dynamic=True)
        self.layout = layout
        self.attrs = attrs
        self.floats = floats
        self._make_vao()
        self.count = 0

    def _make_vao(self) -> None:
        self.vao = self.ctx.vertex_array(
            self.prog,
            [(self.vbo, "3f", "in_corner"), (self.inst, self.layout, *self.attrs)],
        )

    def _upload(self, data: np.ndarray) -> int:
        """The instance rows to draw (float32 (n, floats)), growing the buffer when needed."""
        n = data.shape[0]
        need = max(n, 1) * self.floats * 4
        if self.inst.size < need:
            self.inst.orphan(need * 2)
            self.vao.release()
            self._make_vao()
        if n:
            self.inst.write(data.tobytes())
        self.count = n
        return n

    def draw(self, viewproj: np.ndarray) -> None:
        """One instanced line draw of the boxes set last."""
        if not self.count:
            return
        self.prog["u_viewproj"].write(np.ascontiguousarray(viewproj.T, np.float32).tobytes())
        self.vao.render(moderngl.LINES, vertices=24, instances=self.count)


class BoxOverlay(InstancedBoxLines):
    """Axis-aligned node boxes (lo, hi), each in its own colour."""

    def __init__(self, ctx: moderngl.Context) -> None:
        super().__init__(ctx, "boxes", "3f 3f 4f/i", ("in_lo", "in_hi", "in_color"), 10, 64)

    def set_rows(self, rows: np.ndarray) -> int:
        """Instance rows made by :func:`pack_boxes_in_view` (at most MAX_BOXES drawn)."""
        return self._upload(rows[:MAX_BOXES])

    def set_boxes(self, lo: np.ndarray, hi: np.ndarray, colors: np.ndarray) -> int:
        """The boxes to draw (lo, hi (K, 3), RGBA (K, 4)); returns how many are kept."""
        n = min(lo.shape[0], MAX_BOXES)
        data = np.empty((n, 10), np.float32)
        data[:, 0:3] = lo[:n]
        data[:, 3:6] = hi[:n]
        data[:, 6:10] = colors[:n]
        return self._upload(data)
