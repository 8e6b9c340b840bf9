"""The masked node decision the trees' traversal makes (``decide.node_verdict_masked``) is
the shared one (``node_verdict6``), plane by plane, for any box, empty and infinite ones too."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.geom import predicates as geo
from app.geom.decide import (
    MASKED_PLANES,
    VIEWDIST_SLACK,
    box_plane_bits,
    node_verdict6,
    node_verdict_masked,
)
from app.geom.zpyramid import OCCLUSION_OFF

coord = st.one_of(st.floats(-100, 100), st.sampled_from([np.inf, -np.inf, 0.0, -0.0]))
unit = st.floats(-1, 1)


@st.composite
def boxes_and_planes(draw):
    lo = np.array([draw(coord) for _ in range(3)])
    hi = np.array([draw(coord) for _ in range(3)])
    if draw(st.booleans()):  # most boxes are proper; some stay as drawn (empty, inverted)
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    k = draw(st.integers(0, 12))
    planes = np.array([[draw(unit), draw(unit), draw(unit), draw(st.floats(-50, 50))]
                       for _ in range(k)]).reshape(k, 4)
    return lo, hi, planes


@settings(max_examples=300, deadline=None)
@given(boxes_and_planes())
def test_bits_match_the_shared_box_test(case):
    lo, hi, planes = case
    k = planes.shape[0]
    outside, cut = box_plane_bits(planes, k, *lo, *hi)
    for p in range(k):
        cls = geo.box_vs_frustum6(planes[p:p + 1], *lo, *hi)
        bit = (1 << p) if k <= MASKED_PLANES else 1
        if k <= MASKED_PLANES:
            assert bool(outside & bit) == (cls == geo.OUTSIDE)
            if cls != geo.OUTSIDE:  # (a box outside a plane is rejected: its cut bit is moot)
                assert bool(cut & bit) == (cls == geo.PARTIAL)
        elif cls == geo.OUTSIDE:
            assert outside & bit
        elif cls != geo.INSIDE:
            assert cut & bit
    if k > MASKED_PLANES:
        assert bool(outside) == (geo.box_vs_frustum6(planes, *lo, *hi) == geo.OUTSIDE)


def _verdict_written_out(planes, eye, use_vd, lo, hi, max_vd):
    """The node decision from the shared box test, as node_verdict6 made it before it
    called node_verdict_masked: view distance first, then the frustum (occlusion off)."""
    if use_vd and geo.box_point_dist6(*lo, *hi, *eye) > max_vd * (1.0 + VIEWDIST_SLACK):
        return geo.NODE_REJECT_VIEWDIST
    cls = geo.box_vs_frustum6(planes, *lo, *hi)
    if cls == geo.OUTSIDE:
        return geo.NODE_REJECT_FRUSTUM
    return geo.NODE_INSIDE if cls == geo.INSIDE else geo.NODE_PARTIAL


@settings(max_examples=300, deadline=None)
@given(boxes_and_planes(), st.booleans(), st.floats(0, 200))
def test_full_mask_verdict_is_the_shared_one(case, use_vd, max_vd):
    lo, hi, planes = case
    k = planes.shape[0]
    full = ((1 << k) - 1) if k <= MASKED_PLANES else 1
    eye = np.array([1.0, -2.0, 3.0])
    box = (*lo, *hi)
    v, cut = node_verdict_masked(planes, k, full, use_vd, tuple(eye), box, max_vd)
    assert v == _verdict_written_out(planes, eye, use_vd, lo, hi, max_vd)
    assert v == node_verdict6(planes, eye, use_vd, OCCLUSION_OFF, *lo, *hi, max_vd)
    assert (cut != 0) == (v == geo.NODE_PARTIAL)
    # mask 0 (the parent is inside every plane): only view distance can reject
    v0, cut0 = node_verdict_masked(planes, k, 0, use_vd, tuple(eye), box, max_vd)
    assert cut0 == 0 and v0 in (geo.NODE_INSIDE, geo.NODE_REJECT_VIEWDIST)
