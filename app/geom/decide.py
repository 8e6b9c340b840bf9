"""The culling decisions every index makes, written once: one for an object, one for a node.

Each index walks its own structure, but what it decides at an object or at a node is the
same three stages in the same order (view distance, the cheapest; the frustum; occlusion, the
dearest), so every index returns bit for bit the brute-force answer and the overlay's outcome
codes mean the same thing whichever index drew them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.geom.predicates import (
    NODE_INSIDE,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
    box_point_dist6,
    ray_sphere_entry,
    sphere_in_frustum,
    sphere_overlaps_box,
    spheres_touch,
    within_view_distance,
)
from app.geom.zpyramid import Occluder, box_hidden6, sphere_hidden

#: :func:`accept_sphere`'s answer for an object that is drawn.
ACCEPTED = 0

#: The kinds of region query (:func:`region_hit`): a box, a sphere, a ray.
REGION_BOX = 0
REGION_SPHERE = 1
REGION_RAY = 2

#: The most planes that :func:`node_verdict_masked`'s masks give a bit each; with more, every
#: plane shares bit 0 (the mask then only says whether some plane cuts the box).
MASKED_PLANES = 8

#: Relative slack of the node view-distance test: the box's distance to the eye and an object's
#: distance round differently, and a node must never be rejected for an object that passes.
VIEWDIST_SLACK = 1e-9


@njit(cache=True, inline="always")
def accept_sphere(planes: np.ndarray, eye: np.ndarray, use_vd: bool, occ: Occluder,
                  cx: float, cy: float, cz: float, r: float, vd: float) -> int:
    """:data:`ACCEPTED` when the sphere is drawn, else the ``NODE_REJECT_*`` code that culled it."""
    if use_vd and not within_view_distance(eye[0], eye[1], eye[2], cx, cy, cz, vd):
        return NODE_REJECT_VIEWDIST
    if not sphere_in_frustum(planes, cx, cy, cz, r):
        return NODE_REJECT_FRUSTUM
    if occ.widths.shape[0] > 0 and sphere_hidden(occ, cx, cy, cz, r):
        return NODE_REJECT_OCCLUSION
    return ACCEPTED


@njit(cache=True, inline="always")
def region_hit(kind: int, cx: float, cy: float, cz: float, r: float, qa: np.ndarray,
               qb: np.ndarray, qr: float) -> float:
    """A region query's decision for a sphere: negative when it is not in the answer, else 0,
    or for a ray the distance at which the ray enters it.

    ``qa``, ``qb``: the box's corners (REGION_BOX); the query sphere's centre, its radius
    ``qr`` (REGION_SPHERE, ``qb`` unused); the ray's origin and unit direction (REGION_RAY).
    """
    if kind == REGION_BOX:
        return 0.0 if sphere_overlaps_box(cx, cy, cz, r, qa, qb) else -1.0
    if kind == REGION_SPHERE:
        return 0.0 if spheres_touch(cx, cy, cz, r, qa[0], qa[1], qa[2], qr) else -1.0
    return ray_sphere_entry(qa[0], qa[1], qa[2], qb[0], qb[1], qb[2], cx, cy, cz, r)


@njit(cache=True, inline="always")
def node_verdict(planes: np.ndarray, eye: np.ndarray, use_vd: bool, occ: Occluder,
                 lo: np.ndarray, hi: np.ndarray, max_vd: float) -> int:
    """Outcome of a node whose box [lo, hi] holds every sphere below it (see node_verdict6)."""
    return node_verdict6(planes, eye, use_vd, occ, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2],
                         max_vd)


@njit(cache=True, inline="always")
def node_verdict6(planes: np.ndarray, eye: np.ndarray, use_vd: bool, occ: Occluder,
                  lx: float, ly: float, lz: float, hx: float, hy: float, hz: float,
                  max_vd: float) -> int:
    """Outcome of a node whose box [l, h] holds every sphere below it.

    ``max_vd`` is the largest view distance below the node. Returns ``NODE_REJECT_*`` (nothing
    below can be drawn), ``NODE_INSIDE`` (every sphere below passes the frustum: only view
    distance and occlusion remain per object) or ``NODE_PARTIAL``. Scalars, so that a
    traversal reading boxes from a table makes no array views. The view distance and
    frustum stages are :func:`node_verdict_masked`'s against every plane.
    """
    k = planes.shape[0]
    every = ((1 << k) - 1) if k <= MASKED_PLANES else 1
    v, _ = node_verdict_masked(planes, k, every, use_vd, (eye[0], eye[1], eye[2]),
                               (lx, ly, lz, hx, hy, hz), max_vd)
    if v <= NODE_PARTIAL and occ.widths.shape[0] > 0 and box_hidden6(occ, lx, ly, lz, hx,
                                                                     hy, hz):
        return NODE_REJECT_OCCLUSION
    return v


@njit(cache=True, inline="always")
def box_plane_bits(planes: np.ndarray, k: int, lx: float, ly: float, lz: float, hx: float,
                   hy: float, hz: float) -> tuple[int, int]:
    """(outside, cut): bit p of ``outside`` set when the box [l, h] lies wholly outside plane
    p, of ``cut`` when the plane's negative side holds part of it (more than
    :data:`MASKED_PLANES` planes share bit 0). The first ``k`` planes of ``planes``.

    :func:`~app.geom.predicates.box_vs_frustum6`'s corners and arithmetic, every plane tested
    with no early exit: the plane loop is straight-line code (selects, no branches), which
    costs a node a quarter of the branchy test and its second pass for the cut planes.
    """
    outside = 0
    cut = 0
    for p in range(k):
        a = planes[p, 0]
        b = planes[p, 1]
        c = planes[p, 2]
        d = planes[p, 3]
        bit = (1 << p) if k <= MASKED_PLANES else 1
        px = hx if a >= 0.0 else lx
        py = hy if b >= 0.0 else ly
        pz = hz if c >= 0.0 else lz
        nx = lx if a >= 0.0 else hx
        ny = ly if b >= 0.0 else hy
        nz = lz if c >= 0.0 else hz
        outside |= bit * (a * px + b * py + c * pz + d < 0.0)
        cut |= bit * (a * nx + b * ny + c * nz + d < 0.0)
    return outside, cut


@njit(cache=True, inline="always")
def node_verdict_masked(planes: np.ndarray, k: int, mask: int, use_vd: bool, eye: tuple,
                        box: tuple, max_vd: float) -> tuple[int, int]:
    """:func:`node_verdict6`'s first two stages (view distance from ``eye`` = (x, y, z), the
    frustum) for the box (lx, ly, lz, hx, hy, hz), tuples of floats (passed by value, no
    array to reference-count), against the planes of ``mask`` only (those the parent's box
    straddles, as bits of :func:`box_plane_bits`), and the planes of ``mask`` that cut the
    box (its children's mask). Mask 0: the box is inside every plane.

    Occlusion, the third stage, is the caller's (:func:`~app.geom.zpyramid.box_hidden6` on a
    node this passes), so that a traversal touches the occluder only when there is one:
    numba reference-counts every array of a tuple handed to a helper, inlined or not, and
    the occluder's cost the trees' traversal 57 ns a node with occlusion off.
    """
    lx, ly, lz, hx, hy, hz = box
    if use_vd and box_point_dist6(lx, ly, lz, hx, hy, hz, eye[0], eye[1], eye[2]) > (
            max_vd * (1.0 + VIEWDIST_SLACK)):
        return NODE_REJECT_VIEWDIST, 0
    cut = 0
    if mask != 0:
        outside, cut = box_plane_bits(planes, k, lx, ly, lz, hx, hy, hz)
        if outside & mask:
            return NODE_REJECT_FRUSTUM, 0
        cut &= mask
    return (NODE_INSIDE if cut == 0 else NODE_PARTIAL), cut
