"""Position arrays reserved ahead and written as the layout grows into them.

The layout's arrays are by position, and under churn its used positions creep up (movers
wake at the end, holes they leave are dropped only when the awake region re-sorts). A growth
used to allocate every array anew, copy the used part, write the rest dead and refit every
box: 23-77 ms at 10^6 objects, under churn every ~120 frames, the stall a user sees. Here
each array is allocated for twice the capacity asked for (:func:`app.spatial.pool.reserved`:
a page is mapped only when it is first written), and growing within that reserve writes the
new positions' dead values and nothing else, a step at a time (:data:`COMMIT_STEP`); the
tree is built for the whole reserve at once, its unused chunks empty.

The part past the first commit is mapped in small pages: in the bench's process a step that
crossed into a new 2 MB huge page of one array stalled 4.7 ms on that one fault (eleven
arrays cross together), where small pages fault a few microseconds at a time as the step
writes them.
"""

from __future__ import annotations

import numpy as np

from app.spatial.pool import reserved

#: Positions a growth within the reserve writes at least (about 0.5 MB over all the arrays:
#: 0.5-0.7 ms with the page faults of this machine): under churn, a step every ~8 frames.
COMMIT_STEP = 8192


class Reserved:
    """One array allocated for ``size`` entries, of which the first ``used`` are written
    (``fill`` where nothing else was); what :meth:`commit` returns is what the index works
    on."""

    def __init__(self, size: int, dtype: np.dtype | type, fill: float | int,
                 head: int) -> None:
        """Room for ``size`` entries, the first ``head`` of them in huge pages where the
        system gives them (the array the index starts with), the rest in small ones."""
        self.base = reserved((size,), dtype, head)
        self.fill = fill
        self.used = 0

    def adopt(self, old: np.ndarray, n: int) -> None:
        """Take the first ``n`` entries of ``old`` (a growth past the reserve)."""
        self.base[:n] = old[:n]
        self.used = n

    def commit(self, n: int) -> np.ndarray:
        """The first ``n`` entries, those past the written ones set to the fill value."""
        if n > self.used:
            self.base[self.used:n] = self.fill
            self.used = n
        return self.base[:n]
