"""Where numba keeps the compiled kernels: one cache per state of the package's sources.

numba keys a cached kernel on its own file only, yet it compiles every kernel it calls, from
any module, into that kernel. An edit of ``app/spatial/scan.py`` therefore left every index's
cached traversal running the old scan until someone deleted the caches by hand. Keying the
whole cache directory on the sources (each ``.py`` file's path, size and modification time)
makes any edit start a fresh cache: the kernels a run uses compile again (seconds each, once),
and nothing stale is ever loaded. A user's own ``NUMBA_CACHE_DIR`` wins.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

#: How many source states keep their caches (switching branches back and forth stays warm).
KEEP = 3

PACKAGE = Path(__file__).resolve().parent


def sources_key(package: Path) -> str:
    """A short digest of every ``.py`` file under ``package``: path, size, modification time.

    Stat only, no reading (about 1 ms for the package): a touched file counts as changed,
    which costs a recompile, never a stale kernel.
    """
    h = hashlib.blake2b(digest_size=8)
    for path in sorted(package.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(package).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n"
                 .encode())
    return h.hexdigest()


def cache_base(package: Path) -> Path:
    """The folder the keyed caches live in: ``.numba-cache`` beside the package in a writable
    checkout (a ``pyproject.toml`` beside it), else the user's cache folder (an install)."""
    root = package.parent
    if (root / "pyproject.toml").is_file() and os.access(root, os.W_OK):
        return root / ".numba-cache"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "cullview" / "numba"


def cache_dir(package: Path = PACKAGE) -> Path:
    """The cache folder for the sources as they are now (created; older states pruned)."""
    base = cache_base(package)
    here = base / sources_key(package)
    if not here.is_dir():
        here.mkdir(parents=True, exist_ok=True)
        _prune(base, here)
    return here


def _prune(base: Path, keep: Path) -> None:
    """Delete all but the :data:`KEEP` most recent source states' caches (``keep`` among them).

    Another process may be pruning or filling them too: errors are ignored.
    """
    try:
        states = sorted((p for p in base.iterdir() if p.is_dir() and p != keep),
                        key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in states[KEEP - 1:]:
        shutil.rmtree(old, ignore_errors=True)


def configure(package: Path = PACKAGE) -> None:
    """Point numba at :func:`cache_dir` unless ``NUMBA_CACHE_DIR`` is set. Called by
    ``app/__init__.py`` before any kernel is compiled; works after ``import numba`` too."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    try:
        path = str(cache_dir(package))
    except OSError:  # nowhere writable: numba's own default
        return
    os.environ["NUMBA_CACHE_DIR"] = path
    config = sys.modules.get("numba.core.config")
    if config is not None:
        config.CACHE_DIR = path
