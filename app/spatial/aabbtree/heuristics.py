"""Nesting heuristics of Shagam's dynamic AABB tree (chapter 3), as one compiled chooser.

A heuristic is identified by its number of children, which is also the width of the node
pool's child table: 2 = K-D, 3 = ternary, 8 = octree, 27 = icoseptree.
"""

from __future__ import annotations

from numba import njit

# name -> number of children (the child table width, and the heuristic's code).
CHILDREN: dict[str, int] = {"kd": 2, "ternary": 3, "octree": 8, "icoseptree": 27}

# The paper's optimum split thresholds (chapter 3): name -> (leafy, non-leafy).
DEFAULT_THRESHOLDS: dict[str, tuple[int, int]] = {
    "kd": (35, 30),
    "ternary": (25, 20),
    "octree": (40, 30),
    "icoseptree": (70, 50),
}


@njit(cache=True, inline="always")
def _side(p: float, r: float, s: float) -> int:
    """Ternary side of an extent [p - r, p + r] against split s: 1 below, 2 above, 0 straddling."""
    if p + r < s:
        return 1
    if p - r > s:
        return 2
    return 0


@njit(cache=True, inline="always")
def keeps_big_object(lo, hi, n: int, r: float) -> bool:
    """Non-leafy rule: an object stays at an internal node when it is at least 1/8 of its box.

    The object's volume is its bounding cube (2r)^3, the same box the tree bounds it with, so
    the rule compares like with like. A zero-size object never counts as big (a flat or empty
    node box would otherwise keep every point object at the node and stop all splitting).
    """
    side = 2.0 * r
    vol = side * side * side
    box = (hi[n, 0] - lo[n, 0]) * (hi[n, 1] - lo[n, 1]) * (hi[n, 2] - lo[n, 2])
    return (vol > 0.0) & (8.0 * vol >= box)


@njit(cache=True, inline="always")
def which_child(child, is_split, axis, split, lo, hi, leafy: bool, n: int,
                cx: float, cy: float, cz: float, r: float) -> int:
    """Child index (0..K-1) the heuristic picks for a sphere at split node n; -1 keeps it at n."""
    if not is_split[n]:
        return -1
    if not leafy and keeps_big_object(lo, hi, n, r):
        return -1
    k = child.shape[1]
    sx = split[n, 0]
    sy = split[n, 1]
    sz = split[n, 2]
    if k == 2 or k == 3:
        a = axis[n]
        p = cx if a == 0 else (cy if a == 1 else cz)
        s = sx if a == 0 else (sy if a == 1 else sz)
        if k == 2:
            # K-D: by center, across the axis chosen when the node was split.
            return 0 if p < s else 1
        return _side(p, r, s)
    if k == 8:
        # Octree: by center, one bit per axis.
        c = 0
        if cx < sx:
            c |= 1
        if cy < sy:
            c |= 2
        if cz < sz:
            c |= 4
        return c
    # Icoseptree: per axis below / above / straddling, 3 x 3 x 3 regions.
    return _side(cx, r, sx) + 3 * _side(cy, r, sy) + 9 * _side(cz, r, sz)
