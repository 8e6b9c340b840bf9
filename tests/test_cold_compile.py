"""Every index's kernels compile from an empty numba cache, whatever compiles first (why:
``tests/cold_start.py``).

The everyday tier compiles every index kind and the nested index once, in one process (the
shared kernels, geometry, scan, Z-pyramid, sort and sweep, compile once, not seven times); on a
fresh clone the session start has already run it into the suite's empty cache, and the test
judges that run. A passing check leaves a proof named by the kernels' sources, numba and
Python (``tests/cold_start.py``); while it stands the everyday tier skips the check, and any
kernel edit runs it again. The thorough tier always runs it, gives each kind its own process,
so that each is the first to reach the shared kernels, and loads the nested index's record
back in a second process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cold_start import (
    KINDS,
    NESTED,
    SCRIPT,
    proof_path,
    record_proof,
    run_cold,
    run_script,
    suite_cache,
)


def _ok(run: dict | None, what: str) -> str:
    assert run is not None, f"{what} did not run"
    assert run["returncode"] == 0, f"{what} failed:\n{run['stdout']}\n{run['stderr']}"
    return run["stdout"]


def _primed(config: pytest.Config) -> dict | None:
    """The session start's run into the suite's empty cache (None: it did not run)."""
    worker = getattr(config, "workerinput", None)
    return worker.get("cold_compile") if worker is not None else \
        getattr(config, "cold_compile", None)


def test_every_kind_compiles_from_an_empty_cache_in_one_process(tmp_path: Path,
                                                               request) -> None:
    """Every index kind, then the nested index, from one empty cache: the everyday tier's
    cold start, as a fresh clone's first run meets it."""
    result = _primed(request.config)
    cache = suite_cache()
    if result is None:
        if cache is not None and not request.config.getoption("--thorough"):
            proof = proof_path(cache)
            if proof.is_file():
                pytest.skip(f"passed already for these kernels' sources, numba and Python "
                            f"({proof.name}); an edit of any kernel's module, or --thorough, "
                            "runs it again")
        result = run_cold(tmp_path / "numba")
    if cache is not None:
        record_proof(cache, result)
    out = _ok(result["kinds"], "the index kinds' cold compile")
    assert [line for line in out.splitlines() if line.startswith("ok")] == \
        [f"ok {k}" for k in KINDS]
    nested = _ok(result["nested"], "the nested index's cold compile")
    assert nested.strip().splitlines()[-1].startswith("ok nested")


@pytest.mark.thorough
@pytest.mark.parametrize("kind", KINDS)
def test_kernels_compile_from_an_empty_cache(kind: str, tmp_path: Path) -> None:
    """Each kind first in its own process: it is the one to reach the shared kernels."""
    assert f"ok {kind}" in _ok(run_script(SCRIPT, [kind], tmp_path / "numba"), kind)


@pytest.mark.thorough
def test_nested_frame_compiles_then_loads_from_the_cache(tmp_path: Path) -> None:
    """The nested index's per-frame record (a StructRef) and its entry points compile from an
    empty cache, and a second process loads them and gives the same answer."""
    outs = [_ok(run_script(NESTED, [], tmp_path / "numba"), "nested").strip().splitlines()[-1]
            for _ in range(2)]
    assert outs[0].startswith("ok nested") and outs[0] == outs[1]


def test_only_a_passing_check_is_recorded_and_the_proof_names_the_sources(tmp_path: Path) -> None:
    ok = {"returncode": 0, "stdout": "ok", "stderr": "", "seconds": 1.0}
    bad = dict(ok, returncode=1)
    record_proof(tmp_path, {"kinds": ok, "nested": bad})
    record_proof(tmp_path, {"kinds": bad, "nested": None})
    assert not list(tmp_path.glob("cold-compile-ok-*"))
    (tmp_path / "cold-compile-ok-0000000000000000.json").write_text("{}")  # older sources
    record_proof(tmp_path, {"kinds": ok, "nested": ok})
    assert list(tmp_path.glob("cold-compile-ok-*")) == [proof_path(tmp_path)]
