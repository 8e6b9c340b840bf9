"""numba's side of the kernel cache: a cache locator that stamps a kernel with its module's
import closure (see :mod:`app.kernel_cache`), so that a kernel compiled against an older
version of a module it calls is never loaded, and an unrelated edit keeps it.

numba finds this class through ``NUMBA_CACHE_LOCATOR_CLASSES`` (set by ``import app``) and
asks it first for every cached kernel; for a file outside the configured packages it declines
and numba's own locators take over.
"""

from __future__ import annotations

import os

from numba.core import config
from numba.core.caching import _CacheLocator

from app import kernel_cache


class ClosureLocator(_CacheLocator):
    """Cache files under ``NUMBA_CACHE_DIR/<module path>/``, stamped with the module's import
    closure; named by the kernel's qualified name only (not its line number, which a docstring
    edit above it would shift)."""

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
        return "k"

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
        except (OSError, SyntaxError):  # unwritable folder, a file mid-edit: numba's own
            return None
        return self
