"""The cold-compile check's scripts and its runner, shared by ``test_cold_compile.py`` and
the session start in ``conftest.py``.

A kernel compiled without the runtime (``_nrt=False``) compiles the functions it calls the same
way when they are not compiled yet; one of them allocating then fails to compile, but only when
that kernel is the first to reach it in a process. So the check runs in a fresh interpreter
with an empty kernel cache and asks each index for its per-frame work first: occlusion
queries, moves, pairs, then the nested index's frame.

When the suite's own kernel cache is empty (a fresh clone), the session start runs the check
into that cache before the test workers start: the check is as cold as ever, and the workers
then load what it compiled instead of compiling it a second time (about two minutes of the
fresh clone's run). Otherwise the test runs it into a folder of its own.

The check's outcome is decided by the kernels' sources, numba, Python and this file, nothing
else: a passing run leaves a proof named by all of them in the suite's cache folder, and the
everyday tier skips the check while that proof stands (any edit of a kernel's module or of a
module it imports changes the name). ``--thorough`` always runs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KINDS = ["grid", "viewdist", "kd", "fixed-octree", "chunks", "brute"]

SCRIPT = r"""
import sys
import numpy as np
from app.culling.frustum import camera_planes, look_at, perspective
from app.geom.zpyramid import ZPyramid
from app.spatial import create_index

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
    for k in range(2):  # every object, shuffled: the one-pass path of whole-scene batches
        perm = rng.permutation(n)
        idx.update(ids[perm], c[perm] + 0.5 * k, r[perm])
    for k in range(2):  # every object in order, as last frame: with radii, then without
        idx.update(ids, c + 0.25 * k, r)
    for k in range(2):
        idx.update(ids, c + 0.25 * k)
    idx.query_frustum(planes, eye=eye, use_view_distance=True)
    idx.query_pairs()
    idx.query_pairs(ids[:10], margin=0.5)
    idx.validate()
    print("ok", kind, flush=True)
"""

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


def run_script(code: str, argv: list[str], cache: Path, timeout: float = 900) -> dict:
    """Run ``code`` in a fresh interpreter with the kernel cache at ``cache``: what a test
    needs to judge it (return code, output, seconds)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return {"returncode": done.returncode, "stdout": done.stdout[-4000:],
            "stderr": done.stderr[-4000:], "seconds": time.perf_counter() - t0}


def run_cold(cache: Path) -> dict:
    """The everyday tier's check: every index kind, then the nested index, from ``cache``
    (empty when called)."""
    kinds = run_script(SCRIPT, KINDS, cache)
    nested = run_script(NESTED, [], cache) if kinds["returncode"] == 0 else None
    return {"kinds": kinds, "nested": nested, "cache": str(cache)}


def suite_cache() -> Path | None:
    """The kernel cache the test processes use (``import app`` chooses it), or None."""
    import app  # noqa: F401 - sets NUMBA_CACHE_DIR unless the user did

    path = os.environ.get("NUMBA_CACHE_DIR")
    return Path(path) if path else None


def is_empty(cache: Path) -> bool:
    """No compiled kernel in ``cache`` yet."""
    return next(cache.rglob("*.nbi"), None) is None if cache.is_dir() else True


def proof_key(cache: Path) -> str:
    """Everything that decides the check's outcome: every kernel module's import closure
    (``app.kernel_cache``, its facts remembered in ``cache``), numba's and Python's versions,
    and this file."""
    from importlib.metadata import version

    from app.kernel_cache import MEMO_NAME, SourceGraph

    graph = SourceGraph(ROOT / "app", memo=cache / MEMO_NAME)
    h = hashlib.blake2b(digest_size=8)
    h.update(graph.kernels_stamp().encode())
    h.update(f"{version('numba')}\0{sys.version}\0".encode())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()


def proof_path(cache: Path) -> Path:
    """Where a passing check for the current sources is recorded."""
    return cache / f"cold-compile-ok-{proof_key(cache)}.json"


def record_proof(cache: Path, result: dict) -> None:
    """Record a passing check (the run's own output, for whoever wants to read it)."""
    if result["kinds"]["returncode"] == 0 and result["nested"] is not None \
            and result["nested"]["returncode"] == 0:
        for old in cache.glob("cold-compile-ok-*.json"):
            old.unlink(missing_ok=True)
        proof_path(cache).write_text(json.dumps(result, indent=1))
