"""The trees' frustum traversal that tests a node's children together (our mode,
``queries._frustum_wide``) against the node-by-node one (``queries._frustum_lazy``, which
the paper mode runs and which, given our mode's rules, is the traversal as it was before):
the same answer, counters, node outcomes and noted nodes, on trees of every heuristic, with
and without view distance and occlusion, cameras inside and outside the scene."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.culling.frustum import camera_planes, look_at, perspective
from app.geom.zpyramid import OCCLUSION_OFF, ZPyramid
from app.spatial import create_index
from app.spatial.aabbtree import queries as qu
from app.spatial.aabbtree.pool import Pending

NEVER = np.iinfo(np.int64).max


def _tree(name: str, leafy: bool, seed: int, n: int = 3000):
    rng = np.random.default_rng(seed)
    c = rng.uniform(-100, 100, (n, 3)) * rng.uniform(0.2, 1.0, (1, 3))
    r = rng.uniform(0.1, 3.0, n)
    vd = rng.uniform(5.0, 200.0, n)
    vd[: n // 10] = np.inf
    idx = create_index(name, leafy=leafy, split_threshold=8)
    idx.insert(np.arange(n), c, r, vd)
    idx.query_frustum(camera_planes([0, 0, 0], [1, 0, 0], far=400))  # (build, then split)
    for _ in range(3):
        idx.query_box([-150, -150, -150], [150, 150, 150])
        idx.maintain()
    m = rng.choice(n, n // 5, replace=False)
    idx.update(m, c[m] + rng.normal(scale=4.0, size=(len(m), 3)))  # loose and dirty boxes
    return idx


def _run(idx, kernel, planes, eye, use_vd, occ):
    pend = Pending(idx._pend.noted.copy(), idx._pend.pending.copy(),
                      idx._pend.count.copy(), idx._pend.waited.copy())
    nd = idx._nodes
    out = kernel(nd, idx._objs, idx._spheres(), planes, eye, use_vd, occ, idx._rules, NEVER,
                 1.0, pend, idx._verdict_bytes())
    noted = set(pend.pending[: int(pend.count[0])].tolist())
    return (np.sort(out[0]), tuple(int(x) for x in out[1:]), nd.outcome.copy(), noted)


def _pyramid(eye, target):
    vp = perspective(60, 1.0, 0.1, 500) @ look_at(eye, target)
    levels, w = [], 64
    while True:
        levels.append(np.full((w, w), 0.93, np.float32))
        if w == 1:
            break
        w //= 2
    return ZPyramid.from_levels(vp, levels)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), leafy=st.booleans(),
       name=st.sampled_from(["kd", "ternary", "octree", "icoseptree"]),
       inside=st.booleans(), use_vd=st.booleans(), occluded=st.booleans())
def test_children_tested_together_decide_as_one_at_a_time(seed, leafy, name, inside, use_vd,
                                                         occluded):
    idx = _tree(name, leafy, seed)
    rng = np.random.default_rng(seed + 1)
    eye = rng.uniform(-60, 60, 3) if inside else np.array([-250.0, 10.0, -5.0])
    target = rng.uniform(-30, 30, 3)
    planes = camera_planes(eye, target, aspect=1.0, far=rng.uniform(80, 500))
    occ = _pyramid(eye, target).occluder() if occluded else OCCLUSION_OFF
    wide = _run(idx, qu._frustum_wide, planes, eye, use_vd, occ)
    one = _run(idx, qu._frustum_lazy, planes, eye, use_vd, occ)
    assert np.array_equal(wide[0], one[0])
    assert wide[1] == one[1]  # working set, nodes visited, occlusion and distance counts
    assert np.array_equal(wide[2], one[2])  # every node's outcome
    assert wide[3] == one[3]  # the nodes noted for the upkeep


def test_many_planes_share_one_bit():
    """More planes than the masks have bits (MASKED_PLANES): every plane under bit 0."""
    idx = _tree("octree", True, 3)
    planes = camera_planes([0, 0, 0], [1, 0.3, 0.2], far=300)
    extra = np.array([[0.0, 1.0, 0.0, 40.0], [0.0, -1.0, 0.0, 40.0], [0.0, 0.0, 1.0, 60.0]])
    many = np.vstack([planes, extra, extra * [1, 1, 1, 2]])
    assert many.shape[0] > 8
    eye = np.zeros(3)
    wide = _run(idx, qu._frustum_wide, many, eye, False, OCCLUSION_OFF)
    one = _run(idx, qu._frustum_lazy, many, eye, False, OCCLUSION_OFF)
    assert np.array_equal(wide[0], one[0]) and wide[1] == one[1]
    assert np.array_equal(wide[2], one[2])
