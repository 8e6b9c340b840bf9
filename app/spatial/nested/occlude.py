"""Z-pyramid occlusion for a nested index: the frustum's answer tested against the occluder.

A flat index tests every object that passed the frustum (and view distance) with
``sphere_hidden`` on its sphere (``app.spatial.scan.settle``, ``accept_sphere``). A nested
index does the same with the *canonical world sphere* (``groups.world_point``, ``ws * r``),
after its descent, in one compiled pass over the ids the descent returned
(:func:`occlude_visible`): the answer is exactly "in the frustum (and within view distance),
and not ``sphere_occluded`` by the pyramid".

**Group gate (R(N)).** Before its objects, a group's own world sphere (the descent's
``world_c`` / ``world_r``, which covers the computed world spheres of its objects) is tested
once per query, memoised: when it is hidden, every object of the group is, and they are
culled without their own test. That is exact, not only conservative, because the test is
monotone in the ball: a ball inside a hidden ball projects to a rectangle inside the larger
one, its nearest depth is not nearer, so every pyramid texel it touches is one the larger
ball's test found behind. Three guards keep that true in floating point and at the screen's edge:

* the group ball is widened by ``GATE_SLACK`` of its magnitude (radius plus centre) before
  the test, far above the rounding of the projection (~1e-15 relative);
* the gate decides only when the group's rectangle lies wholly on screen: ``sphere_occluded``
  keeps a ball whose rectangle is off screen (frustum culling's business), and with the
  previous frame's pyramid an object inside the current frustum can be off the old screen;
* a ball crossing the near plane or reaching behind the eye is never hidden (as for objects).

A group whose gate is undecided or visible tests its objects one by one. Gated groups get
the outcome ``NODE_REJECT_OCCLUSION`` (magenta in the box overlay).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from app.geom.predicates import NODE_INSIDE, NODE_PARTIAL, NODE_REJECT_OCCLUSION
from app.geom.zpyramid import Occluder, rect_occluded, sphere_ndc_bounds, sphere_occluded
from app.spatial.idmap import hash_lookup
from app.spatial.nested.groups import world_point

#: Relative widening of a group's world sphere before its gate test (of radius + |centre|).
GATE_SLACK = 1e-9

_UNKNOWN = 0
_SHOWN = 1  # the gate cannot hide the group: test its objects
_HIDDEN = 2


@njit(cache=True)
def group_hidden(cx: float, cy: float, cz: float, r: float, viewproj, data, offsets, widths,
                 heights) -> bool:
    """The gate of one group's world sphere: hidden, with its rectangle wholly on screen
    (widened by :data:`GATE_SLACK`). False when occlusion is off."""
    if widths.shape[0] == 0 or r < 0.0:
        return False
    m = max(abs(cx), abs(cy), abs(cz)) + r
    rw = r + GATE_SLACK * m
    ok, xmin, xmax, ymin, ymax, zmin = sphere_ndc_bounds(cx, cy, cz, rw, viewproj)
    if not ok:
        return False
    if not (xmin >= -1.0 and xmax <= 1.0 and ymin >= -1.0 and ymax <= 1.0):
        return False  # partly off screen: leave it to its objects (see the module docstring)
    return rect_occluded(xmin, ymin, xmax, ymax, zmin * 0.5 + 0.5, data, offsets, widths,
                         heights)


@njit(cache=True)
def occlude_visible(vis, id_table, rows, st, state, gate: bool, occ: Occluder):
    """``vis`` (ids that passed the frustum and view distance) without the occluded ones:
    (kept ids, objects occluded, groups gated). ``id_table``: the id map's (keys, vals,
    dense); ``rows``: the arena (``store.NestedRows``); ``st``: the index's record (state.py);
    ``state`` is a zeroed uint8 scratch array of one entry per group slot; ``gate`` False
    tests every object by itself; ``occ``: the pyramid."""
    keys, vals, dense = id_table
    grp, lc, rad = rows.grp, rows.lc, rows.rad
    W, ws, world_c, world_r, gcode = st.W, st.ws, st.world_c, st.world_r, st.code
    viewproj, data, offsets, widths, heights = (occ.viewproj, occ.data, occ.offsets,
                                                occ.widths, occ.heights)
    n = vis.shape[0]
    out = np.empty(n, np.int64)
    nd = dense.shape[0]
    k = 0
    occluded = 0
    gated = 0
    for i in range(n):
        key = vis[i]
        s = dense[key] if key >= 0 and key < nd else hash_lookup(keys, vals, key)
        g = grp[s]
        if gate:
            st = state[g]
            if st == _UNKNOWN:
                if group_hidden(world_c[g, 0], world_c[g, 1], world_c[g, 2], world_r[g], viewproj,
                                data, offsets, widths, heights):
                    st = _HIDDEN
                    gated += 1
                    c = gcode[g]
                    if NODE_INSIDE <= c <= NODE_PARTIAL:  # it had passed the frustum
                        gcode[g] = NODE_REJECT_OCCLUSION
                else:
                    st = _SHOWN
                state[g] = st
            if st == _HIDDEN:
                occluded += 1
                continue
        x, y, z = world_point(W, g, lc[s, 0], lc[s, 1], lc[s, 2])
        if sphere_occluded(x, y, z, ws[g] * rad[s], viewproj, data, offsets, widths, heights):
            occluded += 1
        else:
            out[k] = key
            k += 1
    return out[:k], occluded, gated


def check_occlusion(occlusion) -> None:
    """ValueError unless ``occlusion`` is None or a well-formed ``ZPyramid`` (a finite (4, 4)
    view-projection, float32 data, per-level int64 offsets / sizes of one length)."""
    if occlusion is None:
        return
    from app.geom.zpyramid import ZPyramid

    if not isinstance(occlusion, ZPyramid):
        raise ValueError(f"query_frustum: occlusion must be a ZPyramid or None, got "
                         f"{type(occlusion).__name__}")
    vp = occlusion.viewproj
    if not (isinstance(vp, np.ndarray) and vp.dtype == np.float64 and vp.shape == (4, 4)
            and np.isfinite(vp).all()):
        raise ValueError("query_frustum: the occlusion pyramid's viewproj must be a finite "
                         "float64 (4, 4) matrix")
    lv = (occlusion.offsets, occlusion.widths, occlusion.heights)
    if not all(isinstance(a, np.ndarray) and a.dtype == np.int64 and a.ndim == 1 for a in lv) \
            or len({a.shape[0] for a in lv}) != 1 or not (
            isinstance(occlusion.data, np.ndarray) and occlusion.data.dtype == np.float32
            and occlusion.data.ndim == 1):
        raise ValueError("query_frustum: the occlusion pyramid's arrays are malformed "
                         "(float32 data, int64 offsets / widths / heights of one length)")
    ends = occlusion.offsets + occlusion.widths * occlusion.heights
    stored = occlusion.offsets >= 0
    if occlusion.offsets.shape[0] and (
            not stored[-1] or (ends[stored] > occlusion.data.shape[0]).any()
            or (occlusion.widths < 1).any() or (occlusion.heights < 1).any()):
        raise ValueError("query_frustum: the occlusion pyramid's levels do not fit its data")


__all__ = ["GATE_SLACK", "check_occlusion", "group_hidden", "occlude_visible"]
