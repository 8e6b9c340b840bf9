"""When the compiled ``prange`` kernels may use both cores.

The package runs numba's OpenMP workers passive (``app/__init__.py``): they sleep between
parallel loops instead of spinning on the cores llvmpipe renders with. Waking them costs
~0.2 ms a loop, more than one core spends on a small batch (a tree's update of 10,000 moved
ids in a 1,000,000-object index: 0.98 ms with the workers woken, 0.59 ms on the calling thread
alone), so batches below :data:`PARALLEL_MIN` run their parallel kernels on the calling thread.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import numba

#: Smallest batch whose parallel kernels wake the workers (the city's 60,000 moving cars do).
PARALLEL_MIN = 32768

_calls: tuple[Callable[[], int], Callable[[int], None]] | None = None


def _thread_calls() -> tuple[Callable[[], int], Callable[[int], None]]:
    """numba's thread-count getter and setter of the calling thread. Once the workers are up,
    the threading layer's own two functions: the public ones take a process lock, type-check
    and dispatch a compiled range check at every call (12-13 us each in a frame, after a
    kernel has pushed them out of the cache: a quarter of a small batch's update overhead);
    the counts set here are 1 and the count read before, always in range."""
    global _calls
    if _calls is None:
        numba.get_num_threads()  # (launches the workers: the layer's functions exist then)
        from numba.np.ufunc import parallel

        _calls = layer_calls(parallel) or (numba.get_num_threads, numba.set_num_threads)
    return _calls


def layer_calls(module: object) -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """The threading layer's getter and setter in numba's ``parallel`` module, or None where
    a numba version has no such private functions (the public ones then serve)."""
    get = getattr(module, "_get_num_threads", None)
    put = getattr(module, "_set_num_threads", None)
    return (get, put) if callable(get) and callable(put) else None


class _OneThread:
    """The context of :func:`threads_for` for a small batch."""

    __slots__ = ("_prev",)

    def __enter__(self) -> None:
        get, put = _thread_calls()
        self._prev = get()
        put(1)

    def __exit__(self, *exc: object) -> bool:
        _thread_calls()[1](self._prev)
        return False


def threads_for(n: int) -> AbstractContextManager[None]:
    """A context that runs the parallel kernels called inside on one thread when ``n`` <
    :data:`PARALLEL_MIN` (and restores the count after, also when they raise)."""
    return nullcontext() if n >= PARALLEL_MIN else _OneThread()
