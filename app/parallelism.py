"""When the compiled ``prange`` kernels may use both cores.

The package runs numba's OpenMP workers passive (``app/__init__.py``): they sleep between
parallel loops instead of spinning on the cores llvmpipe renders with. Waking them costs
~0.2 ms a loop, more than one core spends on a small batch (a tree's update of 10,000 moved
ids in a 1,000,000-object index: 0.98 ms with the workers woken, 0.59 ms on the calling thread
alone), so batches below :data:`PARALLEL_MIN` run their parallel kernels on the calling thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numba

#: Smallest batch whose parallel kernels wake the workers (the city's 60,000 moving cars do).
PARALLEL_MIN = 32768


@contextmanager
def threads_for(n: int) -> Iterator[None]:
    """Run the parallel kernels called inside on one thread when ``n`` < :data:`PARALLEL_MIN`."""
    if n >= PARALLEL_MIN:
        yield
        return
    prev = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(prev)
