"""numba's side of the kernel cache: a cache locator that stamps a kernel with its module's
import closure (see :mod:`app.kernel_cache`), so that a kernel compiled against an older
version of a module it calls is never loaded, and an unrelated edit keeps it.

numba finds this class through ``NUMBA_CACHE_LOCATOR_CLASSES`` (set by ``import app``) and
asks it first for every cached kernel; for a file outside the configured packages it declines
and numba's own locators take over.
"""

from __future__ import annotations

import os
import time

from numba.core import config
from numba.core.caching import _CacheLocator

from app import kernel_cache, kernel_cache_lock, kernel_cache_moved, kernel_cache_threads

# numba imports this module before it saves or loads any kernel
kernel_cache_lock.install()
kernel_cache_threads.install()
kernel_cache_moved.install()

#: Cache files of another version of a module's closure are deleted after this many seconds
#: untouched: switching between branches keeps each one's kernels, the folder stays bounded.
STALE_AFTER_S = 7 * 24 * 3600

_PRUNED: set[str] = set()  # module cache folders already pruned by this process


class ClosureLocator(_CacheLocator):
    """Cache files under ``NUMBA_CACHE_DIR/<module path>/``, named by the kernel's qualified
    name (not its line number, which a docstring edit above it would shift) and the module's
    import-closure stamp.

    The stamp is in the file name, not only inside the index: numba unpickles an index before
    it compares stamps, and an index written by another version of the code may name a class
    this version does not have (an AttributeError at the first call instead of a recompile).
    """

    def __init__(self, py_file: str, modname: str, stamp: str) -> None:
        self._py_file = py_file
        self._stamp = stamp
        self._cache_path = os.path.join(config.CACHE_DIR, *modname.split("."))

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> str:
        return self._stamp

    def get_disambiguator(self) -> str:
        # Same-named kernels of one module (closures made by a factory) share one index file;
        # numba keys each entry on the function's bytecode and closure values as well.
        return self._stamp[:16]

    @classmethod
    def from_function(cls, py_func, py_file: str) -> ClosureLocator | None:
        """A locator for a kernel of a configured package, or None (numba asks the next)."""
        if not config.CACHE_DIR:
            return None
        found = kernel_cache.graph_for(py_file)
        if found is None:
            return None
        graph, modname = found
        try:
            self = cls(py_file, modname, graph.stamp(modname))
            self.ensure_cache_path()
            self.prune_stale()
        except (OSError, SyntaxError):  # unwritable folder, a file mid-edit: numba's own
            return None
        return self

    def prune_stale(self, now: float | None = None) -> None:
        """Delete this module's cache files of other stamps untouched for STALE_AFTER_S (once
        per folder and process). A file another process still uses is only recompiled."""
        if self._cache_path in _PRUNED:
            return
        _PRUNED.add(self._cache_path)
        mine = f"-{self.get_disambiguator()}."
        cutoff = (time.time() if now is None else now) - STALE_AFTER_S
        try:
            entries = list(os.scandir(self._cache_path))
        except OSError:
            return
        for e in entries:
            if not e.name.endswith((".nbi", ".nbc", ".nbi.lock")) or mine in e.name:
                continue
            try:
                if e.stat().st_mtime < cutoff:
                    os.unlink(e.path)
            except OSError:
                pass
