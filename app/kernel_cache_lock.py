"""Kernel cache entries saved under a file lock, so that processes compiling at once (the
test suite's two workers, a viewer beside a benchmark) never pair a kernel's index entry with
another signature's machine code.

numba saves an entry as: read the index, pick the first free data file number, write the
index, write the data file (``IndexDataCacheFile.save``). Two processes that compile two
signatures of one kernel at the same time both read the same index, both pick number 1, and
the last index written names file 1 for its signature while file 1 may hold the other
process's code: the next process that loads that entry calls the wrong machine code and
crashes (seen here: ``bench nested`` segfaulting in ``scan._scan`` after a parallel test run;
numba issues #4807 and #10128 report the same kind of race). Here the read, the choice, the
data file and the index are one step under an exclusive lock on ``<index>.lock``, and the data
is written before the index names it, so a reader that takes no lock sees either the old
index or a new one whose files exist. Without ``fcntl`` (Windows) numba's save is kept.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux / macOS
    fcntl = None


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """An exclusive lock on ``path`` + ".lock" for the block (waits for other processes)."""
    with open(path + ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def save_locked(self, key, data) -> None:
    """``IndexDataCacheFile.save`` as one locked step: the index read again under the lock,
    a data file number no entry uses, the data written, then the index."""
    with locked(self._index_path):
        overloads = self._load_index()
        name = overloads.get(key)
        if name is None:
            used = set(overloads.values())
            name = next(n for n in (self._data_name(i) for i in itertools.count(1))
                        if n not in used)
        self._save_data(name, data)
        if overloads.get(key) != name:
            overloads[key] = name
            self._save_index(overloads)


def install() -> bool:
    """Make numba save cache entries with :func:`save_locked` (once); False without fcntl."""
    if fcntl is None:
        return False
    from numba.core.caching import IndexDataCacheFile

    IndexDataCacheFile.save = save_locked
    return True
