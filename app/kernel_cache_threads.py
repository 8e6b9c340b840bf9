"""A cached kernel that runs a parallel loop starts numba's threads when it is loaded.

numba saves with a cached kernel the functions to run when a process loads it
(``reload_init``); for a kernel with ``prange`` loops that is the start of the threading layer.
A kernel that *calls* a parallel kernel inherits the entry only when the callee was compiled
in the same process. Compiled against a callee loaded from the cache (the usual case: edit a
module whose kernels call ``scan.verdicts_parallel`` and only that module's kernels compile
again), it is saved without it, and a later process that loads it and calls it before anything
else started the threads jumps through the threading layer's unset launcher: a segfault
(``bench nested --sweep`` crashed in ``scan._scan`` so; numba issues #8578 and #9938, the fix
in numba's pull request #9950 not merged). Here a loaded kernel whose machine code holds a
parallel loop (a ``__numba_parfor_gufunc`` symbol) starts the threads when its entry forgot.
"""

from __future__ import annotations

#: What every parallel loop's symbol starts with in numba's machine code.
PARFOR_SYMBOL = b"__numba_parfor_gufunc"


def runs_parallel_loops(libdata: tuple) -> bool:
    """Whether a cached library (``(name, kind, data)`` as numba serialises it) holds the
    machine code of a parallel loop."""
    data = libdata[2] if len(libdata) > 2 else ()
    parts = data if isinstance(data, tuple) else (data,)
    return any(isinstance(p, bytes | bytearray) and PARFOR_SYMBOL in p for p in parts)


def install() -> None:
    """Make numba's cache loader start the threads for such kernels (once)."""
    from numba.core import caching
    from numba.core.typed_passes import _reload_parfors

    impl = caching.CompileResultCacheImpl
    if getattr(impl.rebuild, "starts_threads", False):
        return
    rebuild = impl.rebuild

    def rebuild_starting_threads(self, target_context, payload):
        # payload: CompileResult._reduce's (libdata, ..., reload_init, referenced_envs)
        if _reload_parfors not in payload[-2] and runs_parallel_loops(payload[0]):
            _reload_parfors()
        return rebuild(self, target_context, payload)

    rebuild_starting_threads.starts_threads = True
    impl.rebuild = rebuild_starting_threads
