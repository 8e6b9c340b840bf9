"""cullview: a reference real-time visibility-culling viewer and its spatial indexes."""

import os

# numba's parallel kernels run on GNU OpenMP, whose idle workers spin for a while after every
# parallel region. On this project's target (llvmpipe renders on the same few cores) the
# spinning workers steal the rasterizer's cores: the city's main pass took 4.5 ms right after
# the index update's parallel kernels instead of 3.5 ms. Passive workers sleep at once. It must
# be set before libgomp loads (numba loads it at the first parallel call); a user's own setting
# wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Compiled kernels are cached per state of the sources (see app/kernel_cache.py): numba would
# otherwise keep running a kernel compiled against an older version of a module it calls.
from app.kernel_cache import configure as _configure_kernel_cache  # noqa: E402

_configure_kernel_cache()

__version__ = "0.1.0"
