"""A cached kernel that calls a cached parallel kernel, loaded by a process that has not
started numba's threads yet, must run, not crash (``app/kernel_cache_threads.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

KERNELS = textwrap.dedent("""\
    from numba import njit, prange


    @njit(cache=True, parallel=True)
    def fill(out):
        for i in prange(out.shape[0]):
            out[i] = i


    @njit(cache=True)
    def caller(out, parallel):
        if parallel:
            fill(out)
        else:
            out[:] = 0.0
    """)

STEP = textwrap.dedent("""\
    import sys
    sys.path.insert(0, {root!r})
    if {with_app!r}:
        import app  # noqa: F401 - what every entry point of the package imports first
    sys.path.insert(0, {tmp!r})
    import numpy as np
    import pkernels
    out = np.empty(1000)
    if {step!r} == "callee":
        pkernels.fill(out)
    elif {step!r} == "caller":
        pkernels.caller(out, False)
    else:
        pkernels.caller(out, True)
        print(int(out[999]))
    """)


def _step(tmp: Path, step: str, with_app: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env["NUMBA_CACHE_DIR"] = str(tmp / "cache")
    code = STEP.format(root=str(ROOT), tmp=str(tmp), step=step, with_app=with_app)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache where the caller was compiled against the parallel callee loaded from the
    cache: the callee in one process, the caller (its serial branch) in the next."""
    tmp = tmp_path_factory.mktemp("parallel-callee")
    (tmp / "pkernels.py").write_text(KERNELS)
    for step in ("callee", "caller"):
        done = _step(tmp, step, with_app=False)
        assert done.returncode == 0, done.stderr
    return tmp


def test_a_cached_caller_of_a_cached_parallel_kernel_runs(cached: Path) -> None:
    done = _step(cached, "call", with_app=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["999"]


def test_numba_alone_crashes_on_it(cached: Path) -> None:
    """The trap the patch removes (numba issues #8578, #9938): if numba ever fixes it, this
    fails and ``app/kernel_cache_threads.py`` can go."""
    done = _step(cached, "call", with_app=False)
    assert done.returncode < 0, (done.returncode, done.stdout)
