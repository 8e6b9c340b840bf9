"""Every index's kernels compile from an empty numba cache, whatever compiles first.

A kernel compiled without the runtime (``_nrt=False``) compiles the functions it calls the same
way when they are not compiled yet; one of them allocating then fails to compile, but only when
that kernel is the first to reach it in a process. The suite compiles in whatever order its
tests run, so these tests start a fresh process with an empty cache and ask each index for its
per-frame work first: occlusion queries, moves, pairs.

The everyday tier compiles every index kind and the nested index once, in one process (the
shared kernels, geometry, scan, Z-pyramid, sort and sweep, compile once, not seven times); the
thorough tier gives each kind its own process, so that each is the first to reach the shared
kernels, and loads the nested index's record back from the cache in a second process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r"""
import sys
import numpy as np
from app.culling.frustum import camera_planes, look_at, perspective
from app.geom.zpyramid import ZPyramid
from app.spatial import create_index

kind = sys.argv[1]
rng = np.random.default_rng(1)
n = 2000
ids = np.arange(n, dtype=np.int64)
c = rng.uniform(-50, 50, (n, 3))
r = rng.uniform(0.2, 2.0, n)
eye = np.zeros(3)
target = np.array([1.0, 0.2, 0.1])
vp = perspective(60, 16 / 9, 0.1, 300) @ look_at(eye, target)
depth = rng.choice([0.95, 0.999, 1.0], size=(64, 64)).astype(np.float32)
depth[16:48, 8:40] = 0.0
pyr = ZPyramid.from_depth(vp, depth)
planes = camera_planes(eye, target)
for kind in sys.argv[1:]:
    idx = create_index(kind)
    idx.insert(ids, c, r, r * 40.0)
    for use_vd in (False, True):  # the occlusion path first: it reaches the pyramid's tests
        idx.query_frustum(planes, eye=eye, use_view_distance=use_vd, occlusion=pyr)
    idx.update(ids[::3], c[::3] + 1.0)
    idx.query_frustum(planes, eye=eye, use_view_distance=True)
    idx.query_pairs()
    idx.query_pairs(ids[:10], margin=0.5)
    idx.validate()
    print("ok", kind, flush=True)
"""

KINDS = ["grid", "viewdist", "kd", "fixed-octree", "chunks", "brute"]
ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, *argv: str, cache: Path, timeout: float = 600) -> str:
    """Run ``code`` in a fresh interpreter with the kernel cache at ``cache``; its stdout."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-3000:]
    return done.stdout


def test_every_kind_compiles_from_an_empty_cache_in_one_process(tmp_path: Path) -> None:
    """Every index kind, then the nested index, from one empty cache: the everyday tier's
    cold start, as a fresh clone's first run meets it."""
    out = _run(SCRIPT, *KINDS, cache=tmp_path / "numba")
    assert [line for line in out.splitlines() if line.startswith("ok")] == \
        [f"ok {k}" for k in KINDS]
    nested = _run(NESTED, cache=tmp_path / "numba")
    assert nested.strip().splitlines()[-1].startswith("ok nested")


@pytest.mark.thorough
@pytest.mark.parametrize("kind", KINDS)
def test_kernels_compile_from_an_empty_cache(kind: str, tmp_path: Path) -> None:
    """Each kind first in its own process: it is the one to reach the shared kernels."""
    assert f"ok {kind}" in _run(SCRIPT, kind, cache=tmp_path / "numba")


NESTED = r"""
import numpy as np
from app.culling.frustum import camera_planes, look_at, perspective
from app.geom.zpyramid import ZPyramid
from app.spatial.nested import NestedIndex

rng = np.random.default_rng(2)
eye = np.zeros(3)
target = np.array([1.0, 0.2, 0.1])
vp = perspective(60, 16 / 9, 0.1, 300) @ look_at(eye, target)
depth = rng.choice([0.95, 0.999, 1.0], size=(64, 64)).astype(np.float32)
pyr = ZPyramid.from_depth(vp, depth)
planes = camera_planes(eye, target)
h = NestedIndex("brute")
for g in range(6):
    m = np.eye(4)
    m[:3, 3] = rng.uniform(-40, 40, 3)
    h.add_group(g, None if g < 3 else g - 3, m)
    h.insert(g, np.arange(g * 300, g * 300 + 300), rng.uniform(-8, 8, (300, 3)),
             rng.uniform(0.2, 1.0, 300))
h.query_frustum(planes, eye=eye, use_view_distance=False, occlusion=pyr)
movers = np.arange(0, 1800, 7)
for f in range(3):  # the per-frame paths: transforms, moves, query through the record
    t = np.tile(np.eye(4), (2, 1, 1))
    t[:, :3, 3] = f
    h.set_transforms([1, 4], t)
    h.update(None, movers, rng.uniform(-8, 8, (movers.shape[0], 3)))
    got = h.query_frustum(planes)
h.validate()
print("ok nested", int(got.visible.shape[0]))
"""


@pytest.mark.thorough
def test_nested_frame_compiles_then_loads_from_the_cache(tmp_path: Path) -> None:
    """The nested index's per-frame record (a StructRef) and its entry points compile from an
    empty cache, and a second process loads them and gives the same answer."""
    outs = [_run(NESTED, cache=tmp_path / "numba").strip().splitlines()[-1] for _ in range(2)]
    assert outs[0].startswith("ok nested") and outs[0] == outs[1]
