"""The compiled-kernel cache is keyed on the sources: an edit of a module that a cached kernel
calls must never leave the old code running (numba alone keys a kernel on its own file)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from app import kernel_cache

ROOT = Path(__file__).resolve().parents[1]

LIB = "from numba import njit\n\n\n@njit(cache=True)\ndef value():\n    return {}\n"
MAIN = textwrap.dedent("""\
    from numba import njit

    from kpkg.lib import value


    @njit(cache=True)
    def twice():
        return 2 * value()
    """)
RUN = textwrap.dedent("""\
    import os
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {tmp!r})
    if {keyed!r}:
        from app.kernel_cache import configure
        del os.environ["NUMBA_CACHE_DIR"]  # importing app keyed it on app's sources
        configure(Path({pkg!r}))
    from kpkg.main import twice
    print(twice())
    """)


def _package(tmp: Path) -> Path:
    (tmp / "pyproject.toml").write_text("")  # a checkout: caches beside the package
    pkg = tmp / "kpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "lib.py").write_text(LIB.format(1))
    (pkg / "main.py").write_text(MAIN)
    return pkg


def _edit_lib(pkg: Path, value: int) -> None:
    """Rewrite the callee (same size, so only the time tells) with a later modification time."""
    lib = pkg / "lib.py"
    before = lib.stat().st_mtime_ns
    lib.write_text(LIB.format(value))
    os.utime(lib, ns=(before + 10**9, before + 10**9))


def _run(tmp: Path, pkg: Path, keyed: bool, cache: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    code = RUN.format(root=str(ROOT), tmp=str(tmp), pkg=str(pkg), keyed=keyed)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    return out.stdout.strip()


def test_an_edited_callee_is_compiled_again_into_its_cached_caller(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    assert _run(tmp_path, pkg, keyed=True) == "2"
    assert _run(tmp_path, pkg, keyed=True) == "2"  # loaded from the cache
    _edit_lib(pkg, 5)
    assert _run(tmp_path, pkg, keyed=True) == "10"
    states = list((tmp_path / ".numba-cache").iterdir())
    assert len(states) == 2, states


def test_numba_alone_keeps_the_stale_caller(tmp_path: Path) -> None:
    """The trap the keyed cache removes: one fixed cache folder runs the caller compiled
    against the old callee (if numba ever fixes this, the keyed cache is no longer needed)."""
    pkg = _package(tmp_path)
    fixed = tmp_path / "fixed-cache"
    assert _run(tmp_path, pkg, keyed=False, cache=fixed) == "2"
    _edit_lib(pkg, 5)
    assert _run(tmp_path, pkg, keyed=False, cache=fixed) == "2"


def test_the_key_follows_every_source_file(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    (pkg / "sub").mkdir()
    (pkg / "sub" / "deep.py").write_text("X = 1\n")
    first = kernel_cache.sources_key(pkg)
    assert kernel_cache.sources_key(pkg) == first
    (pkg / "sub" / "deep.py").write_text("X = 12\n")
    second = kernel_cache.sources_key(pkg)
    assert second != first
    (pkg / "notes.txt").write_text("not a source")
    assert kernel_cache.sources_key(pkg) == second
    (pkg / "new.py").write_text("")
    assert kernel_cache.sources_key(pkg) != second


def test_only_the_latest_source_states_keep_their_caches(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    made = []
    for k in range(kernel_cache.KEEP + 2):
        _edit_lib(pkg, 10 + k)
        made.append(kernel_cache.cache_dir(pkg))
        os.utime(made[-1], (1e9 + k, 1e9 + k))  # coarse clocks: make the order explicit
    left = sorted((tmp_path / ".numba-cache").iterdir())
    assert left == sorted(made[-kernel_cache.KEEP:])


def test_an_installed_package_caches_in_the_user_cache_folder(tmp_path: Path,
                                                              monkeypatch) -> None:
    pkg = tmp_path / "site-packages" / "kpkg"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.cache_base(pkg) == tmp_path / "xdg" / "cullview" / "numba"
    assert kernel_cache.cache_dir(pkg).parent == tmp_path / "xdg" / "cullview" / "numba"


def _numba_cache_dir(env: dict[str, str]) -> str:
    code = "import app, numba; print(numba.config.CACHE_DIR)"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    return out.stdout.strip()


def test_importing_app_points_numba_at_the_keyed_cache_unless_the_user_chose(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    keyed = Path(_numba_cache_dir(env))
    assert keyed.parent == ROOT / ".numba-cache"
    assert keyed.name == kernel_cache.sources_key(ROOT / "app")
    mine = str(tmp_path / "mine")
    assert _numba_cache_dir(dict(env, NUMBA_CACHE_DIR=mine)) == mine
