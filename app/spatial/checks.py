"""The input checks of the index contract (design.md): every batch is checked before anything
changes, and bad input raises ``ValueError`` naming the offending ids. Plain functions that
read no index state, so that every index (the flat ones through ``SpatialIndex``, the nested
one directly) checks and words its errors the same way."""

from __future__ import annotations

import numpy as np
from numba import njit

MAX_NAMED = 8  # how many offending ids an error message lists


def name_ids(ids: np.ndarray) -> str:
    """The distinct ``ids`` as an error message lists them: the first MAX_NAMED, then how
    many more."""
    ids = np.unique(np.asarray(ids))
    shown = ", ".join(str(int(i)) for i in ids[:MAX_NAMED])
    more = f" and {len(ids) - MAX_NAMED} more" if len(ids) > MAX_NAMED else ""
    return f"[{shown}{more}]"


def reject_repeats(op: str, ids: np.ndarray) -> None:
    """ValueError naming the ids given more than once in one batch of ``op``."""
    uniq, counts = np.unique(ids, return_counts=True)
    if uniq.shape[0] != ids.shape[0]:
        raise ValueError(f"{op}: ids given more than once in the batch: "
                         f"{name_ids(uniq[counts > 1])}")


def is_ids(a: object) -> bool:
    """``a`` is a non-empty C-contiguous 1-D int64 array (ids the compiled fast paths take
    without a copy)."""
    return (isinstance(a, np.ndarray) and a.dtype == np.int64 and a.ndim == 1
            and a.flags.c_contiguous and a.shape[0] > 0)


def is_f64(a: object, shape: tuple[int, ...]) -> bool:
    """``a`` is a C-contiguous float64 array of this shape (what the compiled fast paths take
    without a copy)."""
    return (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == shape
            and a.flags.c_contiguous)


# Integer and float types that widen to int64 and float64 without losing a value.
_NARROW_INTS = (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)
_NARROW_FLOATS = (np.float16, np.float32)


def lossless_ids(ids: object) -> object:
    """``ids`` in the form the compiled fast paths take (:func:`is_ids`) when that costs one
    lossless copy: a narrower integer type, a strided view or a list of ints; otherwise as
    given (the checked path then converts it or names what is wrong). A game's ids come as
    int32 as often as not, and the checked path costs twice the fast one."""
    if isinstance(ids, (list, tuple)):
        arr = np.asarray(ids)
        return arr if arr.dtype == np.int64 and is_ids(arr) else ids
    if (isinstance(ids, np.ndarray) and ids.ndim == 1 and ids.shape[0] > 0
            and (ids.dtype == np.int64 or ids.dtype.type in _NARROW_INTS) and not is_ids(ids)):
        return np.ascontiguousarray(ids, dtype=np.int64)
    return ids


def lossless_rows(a: object, shape: tuple[int, ...]) -> object:
    """Rows of a batch (centres, radii or view distances) in the form :func:`is_f64` wants
    when that costs one lossless copy: float32 (a renderer's positions), a strided view (the
    first three columns of a wider array) or Fortran order; otherwise as given."""
    if (isinstance(a, np.ndarray) and a.shape == shape
            and (a.dtype == np.float64 or a.dtype.type in _NARROW_FLOATS)
            and not is_f64(a, shape)):
        return np.ascontiguousarray(a, dtype=np.float64)
    return a


def lossless_batch(ids: object, centers: object, radii: object,
                   view_distances: object) -> tuple[object, object, object, object]:
    """A batch's arrays through :func:`lossless_ids` and :func:`lossless_rows`."""
    ids = lossless_ids(ids)
    if not is_ids(ids):
        return ids, centers, radii, view_distances
    n = ids.shape[0]  # type: ignore[union-attr]
    return (ids, lossless_rows(centers, (n, 3)),
            None if radii is None else lossless_rows(radii, (n,)),
            None if view_distances is None else lossless_rows(view_distances, (n,)))


def check_ids(ids: np.ndarray) -> np.ndarray:
    """The ids as a contiguous int64 1-D array; ValueError for another shape, non-integers or
    unsigned ids beyond int64 (casting would wrap them onto other objects' ids)."""
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"ids must be a 1-D array, got shape {arr.shape}")
    if arr.shape[0] and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"ids must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.shape[0] and int(arr.max()) > np.iinfo(np.int64).max:
        big = arr[arr > np.iinfo(np.int64).max]
        raise ValueError(f"ids must fit in int64; too large: {name_ids(big)}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_point(p: np.ndarray, what: str) -> np.ndarray:
    """``p`` as 3 finite float64 numbers; ValueError naming ``what`` otherwise."""
    arr = np.asarray(p, dtype=np.float64).reshape(-1)
    if arr.shape != (3,) or not np.isfinite(arr).all():
        raise ValueError(f"{what} must be 3 finite numbers, got {p!r}")
    return arr


def camera_ok(planes: object, eye: object) -> bool:
    """Whether a query's ``planes`` and ``eye`` are already what the query takes: a
    C-contiguous float64 (K, 4) array and a float64 (3,) array, all finite. A frame's
    camera passes here in one compiled check (numpy's ``isfinite().all()`` on both and the
    conversions took 3.4 us a query, this 0.7); anything else goes through the full check,
    which converts it or names what is wrong."""
    return (type(planes) is np.ndarray and type(eye) is np.ndarray
            and planes.dtype == np.float64 and eye.dtype == np.float64
            and planes.ndim == 2 and planes.shape[1] == 4 and eye.shape == (3,)
            and planes.flags.c_contiguous and _all_finite(planes, eye))


@njit(cache=True)
def _all_finite(planes, eye) -> bool:
    """Every number of (K, 4) ``planes`` and (3,) ``eye`` finite."""
    ok = True
    for i in range(planes.shape[0]):
        for a in range(4):
            ok &= np.isfinite(planes[i, a])
    for a in range(3):
        ok &= np.isfinite(eye[a])
    return ok


@njit(cache=True, inline="always")
def values_ok(cx: float, cy: float, cz: float, r: float, v: float) -> bool:
    """A row's values are what the contract accepts: a finite centre, a finite radius >= 0
    and a view distance >= 0 (inf allowed; NaN fails); a column the batch leaves alone is
    passed as 0. Scalars only: an inlined helper that takes arrays pays their reference
    counts at every call (10x the loop's cost)."""
    return (np.isfinite(cx) & np.isfinite(cy) & np.isfinite(cz) & np.isfinite(r) & (r >= 0.0)
            & (v >= 0.0))


def check_batch(ids: np.ndarray, centers: np.ndarray, radii: np.ndarray | None,
                view_distances: np.ndarray | None, radii_optional: bool = False
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(ids, centers, radii, view distances) of an insert or update batch as contiguous int64
    / float64 arrays (a scalar radius or view distance applies to every row); ValueError
    naming the ids with non-finite centres, bad radii (negative, not finite) or bad view
    distances (negative, NaN; infinite is allowed)."""
    ids = check_ids(ids)
    n = ids.shape[0]
    centers = np.ascontiguousarray(np.asarray(centers, dtype=np.float64))
    if centers.ndim == 1 and centers.shape[0] == 3 and n == 1:
        centers = centers.reshape(1, 3)
    if centers.shape != (n, 3):
        raise ValueError(
            f"centers must have shape ({n}, 3) to match {n} ids, got {centers.shape}")
    bad = ~np.isfinite(centers).all(axis=1)
    if bad.any():
        raise ValueError(f"non-finite (NaN or infinite) centers for ids {name_ids(ids[bad])}")
    if radii is None:
        if not radii_optional:
            raise ValueError("radii are required")
    else:
        radii = np.ascontiguousarray(np.broadcast_to(np.asarray(radii, dtype=np.float64), (n,))
                                     if np.ndim(radii) == 0 else np.asarray(radii, np.float64))
        if radii.shape != (n,):
            raise ValueError(
                f"radii must have shape ({n},) to match {n} ids, got {radii.shape}")
        bad = ~np.isfinite(radii) | (radii < 0)
        if bad.any():
            raise ValueError(
                f"radii must be finite and >= 0; bad for ids {name_ids(ids[bad])}")
    if view_distances is not None:
        vd = np.asarray(view_distances, dtype=np.float64)
        if vd.ndim == 0:
            vd = np.full(n, float(vd))
        vd = np.ascontiguousarray(vd)
        if vd.shape != (n,):
            raise ValueError(
                f"view_distances must have shape ({n},) to match {n} ids, got {vd.shape}")
        bad = np.isnan(vd) | (vd < 0)
        if bad.any():
            raise ValueError(
                f"view distances must be >= 0 (inf allowed); bad for ids {name_ids(ids[bad])}")
        view_distances = vd
    return ids, centers, radii, view_distances
