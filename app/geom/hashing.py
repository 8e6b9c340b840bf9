"""The one integer hash of the project: the splitmix64 finaliser.

Consecutive keys (object ids, neighbouring grid cells, frame counters) must land far apart;
splitmix64's finaliser scatters them with three multiply-xorshift rounds and no state.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def mix64(key: np.int64) -> np.uint64:
    """splitmix64 finaliser of ``key`` (all 64 bits mixed)."""
    x = np.uint64(key)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))
