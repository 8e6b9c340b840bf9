"""Seeded object-placement generators (numpy): the paper's four plus grid, lanes and lists.

The four distributions of Shagam chapter 4 (uniform, clustered, Lissajous, sphere) are plain
functions ``f(n, size, rng) -> (n, 3) float64 centers`` filling the cube ``[0, size]^3`` (size
may also be a 3-vector for a box), so the paper benchmark can call them directly. Scenes map the
same unit-cube samples onto arbitrary group bounds with :func:`in_box`.
"""

from __future__ import annotations

import numpy as np

# Five cluster seeds, "placed through the area at the same position every time" (Shagam 4.2).
CLUSTER_SEEDS = np.array(
    [
        [0.25, 0.30, 0.28],
        [0.72, 0.22, 0.65],
        [0.50, 0.75, 0.45],
        [0.20, 0.68, 0.78],
        [0.80, 0.80, 0.20],
    ]
)
CLUSTER_SPREAD = 0.18  # half-width of one cluster in unit-cube units

# Fixed Lissajous constants (Shagam 4.3): incommensurate frequencies, so over t in [0, 5000]
# the loop looks like a line locally but fills the cube globally.
LISSAJOUS_C = np.array([1.0, 1.41421356, 1.73205081])
LISSAJOUS_K = np.array([0.0, 0.5, 1.1])
LISSAJOUS_T_MAX = 5000.0

SPHERE_SHELL = 0.95  # the hollow sphere's objects lie between 0.95 R and R ("near the surface")


def _count(n: int) -> int:
    n = int(n)
    if n < 0:
        raise ValueError(f"object count must be >= 0, got {n}")
    return n


def _scale(size: float | np.ndarray) -> np.ndarray:
    s = np.broadcast_to(np.asarray(size, dtype=np.float64), (3,)).copy()
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"size must be finite and >= 0, got {size!r}")
    return s


def unit_uniform(n: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform points in the unit cube."""
    return rng.random((_count(n), 3))


def unit_clustered(n: int, rng: np.random.Generator) -> np.ndarray:
    """Five pseudo-Gaussian clusters around fixed seeds, inside the unit cube."""
    n = _count(n)
    which = rng.integers(0, len(CLUSTER_SEEDS), n)
    # Mean of three uniforms: a bounded bell curve (pseudo-Gaussian) that needs no clipping
    # tails; the final clip only guards seeds near the cube's faces.
    bell = rng.random((n, 3, 3)).mean(axis=2) * 2.0 - 1.0
    return np.clip(CLUSTER_SEEDS[which] + CLUSTER_SPREAD * bell, 0.0, 1.0)


def lissajous_curve(t: np.ndarray) -> np.ndarray:
    """Points of the fixed Lissajous loop at parameters ``t``, mapped into the unit cube."""
    t = np.asarray(t, dtype=np.float64)
    return 0.5 + 0.5 * np.sin(t[..., None] * LISSAJOUS_C + LISSAJOUS_K)


def unit_lissajous_params(n: int, rng: np.random.Generator) -> np.ndarray:
    """Curve parameters t in [0, 5000] for n objects on the Lissajous loop."""
    return rng.uniform(0.0, LISSAJOUS_T_MAX, _count(n))


def unit_lissajous(n: int, rng: np.random.Generator) -> np.ndarray:
    """Points on the Lissajous loop in the unit cube."""
    return lissajous_curve(unit_lissajous_params(n, rng))


def _ball(n: int, rng: np.random.Generator, r_in: float, r_out: float) -> np.ndarray:
    """Uniform points in the spherical shell r_in <= r <= r_out around the origin."""
    d = rng.normal(size=(n, 3))
    d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    # Inverse-CDF of r^2 dr keeps the density uniform by volume.
    u = rng.random(n)
    r = np.cbrt(r_in**3 + u * (r_out**3 - r_in**3))
    return d * r[:, None]


def unit_sphere(n: int, rng: np.random.Generator) -> np.ndarray:
    """Half near a hollow sphere's surface, half in a solid sphere of a third its radius."""
    n = _count(n)
    big = 0.5
    shell = _ball(n - n // 2, rng, SPHERE_SHELL * big, big)
    core = _ball(n // 2, rng, 0.0, big / 3.0)
    pts = np.concatenate([shell, core]) + 0.5
    return pts[rng.permutation(n)]


def uniform(n: int, size: float | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Paper distribution 4.1: uniform in the cube [0, size]^3."""
    return unit_uniform(n, rng) * _scale(size)


def clustered(n: int, size: float | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Paper distribution 4.2: five fixed pseudo-Gaussian clusters in [0, size]^3."""
    return unit_clustered(n, rng) * _scale(size)


def lissajous(n: int, size: float | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Paper distribution 4.3: a Lissajous loop, t in [0, 5000], scaled to [0, size]^3."""
    return unit_lissajous(n, rng) * _scale(size)


def sphere(n: int, size: float | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Paper distribution 4.4: hollow sphere plus a solid core of a third its radius."""
    return unit_sphere(n, rng) * _scale(size)


PAPER_DISTRIBUTIONS = {
    "uniform": uniform,
    "clustered": clustered,
    "lissajous": lissajous,
    "sphere": sphere,
}


def in_box(unit: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Map unit-cube points onto the box [lo, hi]."""
    return lo + unit * (hi - lo)


def grid_dims(n: int, extent: np.ndarray) -> np.ndarray:
    """Cells per axis so that a regular grid over ``extent`` has at least n cells."""
    n = _count(n)
    dims = np.ones(3, dtype=np.int64)
    active = extent > 0
    if n == 0 or not active.any():
        return dims
    spacing = (np.prod(extent[active]) / n) ** (1.0 / active.sum())
    # The small epsilon keeps 1331 objects in a cube at 11 per axis, not 12.
    dims[active] = np.maximum(1, np.ceil(extent[active] / spacing - 1e-9)).astype(np.int64)
    return dims


def grid(n: int, lo: np.ndarray, hi: np.ndarray, dims: np.ndarray | None = None) -> np.ndarray:
    """Cell centers of a regular grid over [lo, hi], the first n in x-fastest order."""
    n = _count(n)
    extent = hi - lo
    dims = grid_dims(n, extent) if dims is None else np.asarray(dims, dtype=np.int64)
    if n > int(np.prod(dims)):
        raise ValueError(f"grid of {tuple(int(d) for d in dims)} holds fewer than {n} objects")
    k = np.arange(n)
    ijk = np.stack([k % dims[0], (k // dims[0]) % dims[1], k // (dims[0] * dims[1])], axis=1)
    return lo + (ijk + 0.5) * (extent / dims)


def lanes(
    n: int,
    lo: np.ndarray,
    hi: np.ndarray,
    axis: int,
    across: int,
    count: int,
    jitter: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Points on ``count`` evenly spaced lines parallel to ``axis`` (streets), spread ``across``.

    Lines sit at evenly spaced positions of axis ``across`` from lo to hi inclusive; each point
    gets a random lateral offset in [-jitter, jitter] (two-way traffic) and a random height in
    the box.
    """
    n = _count(n)
    pts = lo + rng.random((n, 3)) * (hi - lo)
    if count == 1:
        line_pos = np.full(1, 0.5 * (lo[across] + hi[across]))
    else:
        line_pos = np.linspace(lo[across], hi[across], count)
    offset = rng.uniform(-jitter, jitter, n)
    # Clip so the outermost streets' traffic stays inside the group bounds.
    pts[:, across] = np.clip(line_pos[rng.integers(0, count, n)] + offset, lo[across], hi[across])
    return pts
