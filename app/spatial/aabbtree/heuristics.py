"""Nesting heuristics of Shagam's dynamic AABB tree (chapter 3), as one compiled chooser.

A heuristic is identified by its number of children, which is also the width of the node
pool's child table: 2 = K-D, 3 = ternary, 8 = octree, 27 = icoseptree.
"""

from __future__ import annotations

import math
import re

import numpy as np
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

#: The split threshold that suits our mode's contiguous storage, for every heuristic and
#: variant: a node visited by a query costs 25-40 ns and a block scan 0.5-1 ns an object, so
#: leaves far larger than the paper's (tuned for per-node linked lists) cost less. Measured
#: with ``bench index`` at 10^6 (static and viewdist; fixed, churn100, turn, fly and spawn),
#: every tree at 40-ish (the paper's), 130, 300, 600 and 1,200: the worst pattern gained
#: 0.1-0.4x from the paper's value to 300 and stayed flat within noise from 300 to 1,200;
#: the first query after a build fell from 134-343 ms to 97-187 ms (docs/bench-index-log.md,
#: "Split thresholds on contiguous storage"). Not the default: the contract's None is the
#: paper's value; ask for it by name (:func:`named_threshold`).
STORAGE_THRESHOLD = 600

#: Names a command line takes for a split threshold: None is each index's own default.
THRESHOLD_NAMES: dict[str, int | None] = {"paper": None, "storage": STORAGE_THRESHOLD}


def named_threshold(text: str, largest: int) -> int | None:
    """A command line's split threshold: ``paper`` (None, the paper's value for each
    heuristic), ``storage`` (:data:`STORAGE_THRESHOLD`) or an integer in [1, ``largest``];
    ValueError naming what it takes otherwise."""
    word = text.strip().lower()
    if word in THRESHOLD_NAMES:
        return THRESHOLD_NAMES[word]
    try:
        v = int(word)
    except ValueError:
        raise ValueError(f"expected {', '.join(THRESHOLD_NAMES)} or an integer, "
                         f"got {text!r}") from None
    if not 1 <= v <= largest:
        raise ValueError(f"expected an integer >= 1 and <= {largest:,}, got {text}")
    return v


# Which objects an internal node keeps (``keep`` of which_child): none (leafy), ours (an
# object whose bounding cube is at least 1/8 of the box), the paper's (appendix A's formula).
KEEP_NONE = 0
KEEP_OURS = 1
KEEP_PAPER = 2

# The tree's mode is a set of appendix A's choices, each one bit (see parse_mode).
PAPER_SPLIT_POINT = 1  # split point = mean of pos + (r, r, r), not of the centres
PAPER_AXIS = 2  # K-D / ternary axis: strictly longest, every tie to Z
PAPER_NONLEAFY = 4  # keep at an inner node when r * 4 * pi / 3 > box volume / 8
PAPER_LAZY = 8  # the listing's extents bookkeeping (stale boxes, GetExtents at every visit)
PAPER_THRESHOLD = 16  # a leaf splits when it holds >= threshold objects (ours: >)
PAPER_FEATURES: dict[str, int] = {
    "split": PAPER_SPLIT_POINT, "axis": PAPER_AXIS, "nonleafy": PAPER_NONLEAFY,
    "lazy": PAPER_LAZY, "threshold": PAPER_THRESHOLD,
}
PAPER_ALL = sum(PAPER_FEATURES.values())
MODES = ("ours", "paper")


def parse_mode(mode: str) -> int:
    """Feature bits of a mode: ``ours`` (0), ``paper`` (all of appendix A's choices), or one of
    them with features switched: ``ours+split+axis``, ``paper-lazy`` (features: split, axis,
    nonleafy, lazy, threshold)."""
    if not isinstance(mode, str):
        raise ValueError(f"mode must be a string, got {mode!r}")
    parts = re.split(r"([+-])", mode.strip())
    base = parts[0]
    if base not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose ours or paper, optionally with "
                         f"+feature / -feature ({', '.join(PAPER_FEATURES)})")
    flags = 0 if base == "ours" else PAPER_ALL
    for sign, feat in zip(parts[1::2], parts[2::2], strict=True):
        if feat not in PAPER_FEATURES:
            raise ValueError(f"unknown feature {feat!r} in mode {mode!r}; choose from "
                             f"{', '.join(PAPER_FEATURES)}")
        if sign == "+":
            flags |= PAPER_FEATURES[feat]
        else:
            flags &= ~PAPER_FEATURES[feat]
    return flags


def mode_name(flags: int) -> str:
    """The shortest mode string for a set of feature bits (inverse of parse_mode)."""
    if flags == 0:
        return "ours"
    if flags == PAPER_ALL:
        return "paper"
    on = [f for f, b in PAPER_FEATURES.items() if flags & b]
    off = [f for f, b in PAPER_FEATURES.items() if not flags & b]
    if len(on) <= len(off):
        return "ours" + "".join("+" + f for f in on)
    return "paper" + "".join("-" + f for f in off)


@njit(cache=True, inline="always")
def _side(p: float, r: float, s: float) -> int:
    """Ternary side of an extent [p - r, p + r] against split s: 1 below, 2 above, 0 straddling."""
    return np.int64(p + r < s) + 2 * np.int64(p - r > s)  # (exclusive: r >= 0)


@njit(cache=True, inline="always")
def keeps_big_object(box: float, r: float) -> bool:
    """Non-leafy rule: an object stays at an internal node when it is at least 1/8 of its box.

    The object's volume is its bounding cube (2r)^3, the same box the tree bounds it with, so
    the rule compares like with like. A zero-size object never counts as big (a flat or empty
    node box would otherwise keep every point object at the node and stop all splitting).
    """
    side = 2.0 * r
    vol = side * side * side
    return (vol > 0.0) & (8.0 * vol >= box)


@njit(cache=True, inline="always")
def paper_keeps_object(box: float, r: float) -> bool:
    """Appendix A's non-leafy rule exactly as written in ``WhichChild``: keep the object when
    ``r * 4 * pi / 3 > box volume / 8``.

    The listing's comment says "bounding volume is at least 1/8 the last known tree bounding
    volume", but the code uses the radius, not its cube (a visible slip), and a strict ``>``;
    the box is the node's stored one, current or not (the ``m_extentsCorrect`` guard is
    commented out). For objects of radius 1-10 it keeps only objects of radius < ~2 in boxes
    smaller than ~34 r: the opposite of its intent (big objects high in the tree). Computed in
    float64 (the paper's floats would round differently only at exact ties).
    """
    sv = r * 4.0 * math.pi / 3.0
    return sv > box / 8.0


@njit(cache=True, inline="always")
def split_axis(ex: float, ey: float, ez: float, paper: bool) -> int:
    """K-D / ternary split axis from the box's extents: the longest.

    Ours breaks ties towards X. The paper's ``DoSplit`` takes X or Y only when strictly
    longer than both others and Z otherwise, so a tie between X and Y goes to Z even when Z is
    the shortest axis (implemented as written).
    """
    if paper:
        if ex > ey and ex > ez:
            return 0
        if ey > ex and ey > ez:
            return 1
        return 2
    return 0 if (ex >= ey and ex >= ez) else (1 if ey >= ez else 2)


@njit(cache=True, _nrt=False)
def which_child(child, is_split, axis, split, lo, hi, keep: int, n: int,
                cx: float, cy: float, cz: float, r: float) -> int:
    """Child index (0..K-1) the heuristic picks for a sphere at split node n; -1 keeps it at n.

    ``keep`` is the non-leafy rule (KEEP_NONE, KEEP_OURS, KEEP_PAPER), read against the box
    rows ``lo``/``hi`` the caller passes. The child rules are the paper's (and ours): strict
    comparisons, an object exactly on a plane counts as straddling / goes above.
    """
    if not is_split[n]:
        return -1
    box = box_volume(lo, hi, n) if keep != KEEP_NONE else 0.0  # (only the rules read it)
    return child_index(child.shape[1], keep, axis[n], split[n, 0], split[n, 1], split[n, 2],
                       box, cx, cy, cz, r)


@njit(cache=True, inline="always")
def box_volume(lo, hi, n: int) -> float:
    """Volume of node n's stored box (what the non-leafy rules compare an object with)."""
    return (hi[n, 0] - lo[n, 0]) * (hi[n, 1] - lo[n, 1]) * (hi[n, 2] - lo[n, 2])


@njit(cache=True, inline="always")
def child_index(k: int, keep: int, a: int, sx: float, sy: float, sz: float, box: float,
                cx: float, cy: float, cz: float, r: float) -> int:
    """:func:`which_child` of a split node given as scalars (K children, its axis ``a``,
    split point, box volume): scalars only, so that a loop over a node's objects (a split)
    calls it inlined with no array to reference-count."""
    if keep == KEEP_OURS and keeps_big_object(box, r):
        return -1
    if keep == KEEP_PAPER and paper_keeps_object(box, r):
        return -1
    if k == 2 or k == 3:
        p = cx if a == 0 else (cy if a == 1 else cz)
        s = sx if a == 0 else (sy if a == 1 else sz)
        if k == 2:
            # K-D: by center, across the axis chosen when the node was split.
            return np.int64(p >= s)
        return _side(p, r, s)
    if k == 8:
        # Octree: by center, one bit per axis.
        return np.int64(cx < sx) | (np.int64(cy < sy) << 1) | (np.int64(cz < sz) << 2)
    # Icoseptree: per axis below / above / straddling, 3 x 3 x 3 regions.
    return _side(cx, r, sx) + 3 * _side(cy, r, sy) + 9 * _side(cz, r, sz)
