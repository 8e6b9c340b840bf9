"""Kernel cache entries that name a module or class this version lacks are misses, not errors.

A kernel's cache file carries the stamp of its own module's import closure
(:mod:`app.kernel_locator`), but its index also pickles the types of the arguments it was
called with, and those may be classes of modules outside that closure: ``blocks``' kernels
take the AABB tree's node pool, a named tuple its module never imports. When such a class
moves to another module (the tree's core split into ``pool``, ``bounds``, ``split`` ...),
the kernel's stamp stays, numba finds the old index, and unpickling it raised
``ModuleNotFoundError`` at the first insert of every process, in any checkout that had run
the older version. numba treats a missing or foreign-version index as empty; this treats an
index or a data file that no longer unpickles the same way, so the kernel is compiled again
and its entry written anew.
"""

from __future__ import annotations

import functools
import pickle

#: What unpickling an entry raises when it names code that is gone or renamed.
GONE = (ImportError, AttributeError, pickle.UnpicklingError, EOFError)


def install() -> None:
    """Make numba's index and data loads treat an entry that does not unpickle as absent
    (once; idempotent). numba's own loads stay reachable as ``__wrapped__``."""
    from numba.core.caching import IndexDataCacheFile

    if getattr(IndexDataCacheFile._load_index, "moved_mend", False):
        return
    load_index = IndexDataCacheFile._load_index
    load_data = IndexDataCacheFile._load_data

    @functools.wraps(load_index)
    def _load_index(self):
        try:
            return load_index(self)
        except GONE:
            return {}

    @functools.wraps(load_data)
    def _load_data(self, name):
        try:
            return load_data(self, name)
        except GONE:
            return None

    _load_index.moved_mend = True
    IndexDataCacheFile._load_index = _load_index
    IndexDataCacheFile._load_data = _load_data
