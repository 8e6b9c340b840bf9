"""The branch-free float32 sphere scan: brute force done right, and every index's leaf loop.

What a performance engineer writes instead of an index: the spheres as float32 structure of
arrays (x, y, z, r and view distance in separate arrays), the six plane tests without
branches, a byte of verdict per sphere, then one compaction. The verdict loop has no early
exit and no data-dependent branch, so LLVM vectorises it (16 spheres per AVX-512 instruction);
the compaction reads the verdicts eight at a time and skips empty words.

Exactness: float32 rounding must never change an answer, so the float32 test is made
*conservative* with a tolerance bounded from the coordinates' magnitude (:func:`tolerances`):
a sphere clearly inside passes, clearly outside fails, and the few within the tolerance of a
plane or of their view distance are decided again in float64 by the shared predicate
(:func:`app.geom.decide.accept_sphere`), the contract's definition. Dead slots carry radius
``-inf`` so they fail every test without an ``alive`` branch.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from app.geom.decide import ACCEPTED, accept_sphere
from app.geom.predicates import NODE_REJECT_FRUSTUM, NODE_REJECT_OCCLUSION
from app.geom.zpyramid import Occluder, sphere_hidden
from app.parallelism import PARALLEL_MIN, threads_for
from app.spatial.prefetch import PREFETCH_AHEAD, prefetch

OUT = np.uint8(0)  # certainly culled
NEAR = np.uint8(1)  # within the tolerance: decide again in float64
IN = np.uint8(2)  # certainly drawn
#: Certainly within its view distance and certainly outside a plane: culled, by the frustum
#: test (view distance is tested first). Neither of the IN and NEAR bits: the compaction takes
#: it for OUT, and counts it (:func:`compact`). Only view-distance scans make it.
OUTSIDE = np.uint8(4)

#: The lanes set in an 8-bit mask, in order (row m: the set bits of m, then padding), and
#: how many: one word of verdicts becomes up to eight positions with one 8-wide store.
_LANES = np.array([[k for k in range(8) if m >> k & 1] + [0] * (8 - bin(m).count("1"))
                   for m in range(256)], dtype=np.int64)
_COUNT = np.array([bin(m).count("1") for m in range(256)], dtype=np.int64)
_LOW_BITS = np.uint64(0x0101010101010101)  # bit 0 of every byte
_TAKEN_BITS = np.uint64(0x0303030303030303)  # the IN and NEAR bits of every byte
_OUTSIDE_BITS = np.uint64(0x0404040404040404)  # the OUTSIDE bit of every byte
_GATHER_BITS = np.uint64(0x0102040810204080)  # moves bit 0 of byte k to bit 56 + k

#: fastmath for the verdict loops: enough for LLVM to vectorise them (2x), without 'ninf'
#: (dead lanes and endless view distances are infinities) and without approximate functions.
FAST = {"nnan", "nsz", "contract", "reassoc"}

#: Relative slack on a view distance in the float32 test: float32 rounding of the distance,
#: its square and the view distance itself, with a margin (about 7 float32 ulps).
_VD_SLACK = 4e-7

#: float32 unit roundoff; the tolerances below allow several roundings of every term.
_U32 = 2.0 ** -24
_ROUNDINGS = 16.0
_F32_MAX = float(np.finfo(np.float32).max)


def tolerances(planes: np.ndarray, eye: np.ndarray, max_abs: float,
               max_r: float) -> tuple[np.ndarray, float, float]:
    """(planes as float32, plane tolerance, distance tolerance) for a scan.

    ``max_abs`` bounds every coordinate and ``max_r`` every radius of the scanned spheres.
    A float32 plane value ``a*x + b*y + c*z + d + r`` differs from the float64 one by less than
    the plane tolerance, and a float32 eye distance from the float64 one by less than the
    distance tolerance (both with a wide margin: 16 roundings of the largest term). Fewer than
    six planes are padded with planes every point is inside: the scan tests six.
    """
    return tolerances32(np.asarray(planes, dtype=np.float64), np.asarray(eye, dtype=np.float64),
                       float(max_abs), float(max_r))


_PAD_PLANE = np.array([[0.0, 0.0, 0.0, 1.0]])


def six_planes(planes: np.ndarray) -> np.ndarray:
    """``planes`` (float64) padded to six rows with planes every point is inside."""
    if planes.shape[0] >= 6:
        return planes
    return np.vstack([planes, np.repeat(_PAD_PLANE, 6 - planes.shape[0], axis=0)])


@njit(cache=True)
def tolerances32(planes, eye, max_abs, max_r):
    """:func:`tolerances` inside compiled code (float64 arrays in)."""
    k = max(planes.shape[0], 6)
    p32 = np.zeros((k, 4), np.float32)
    term = 0.0
    for p in range(k):
        if p >= planes.shape[0]:
            p32[p, 3] = 1.0
            continue
        for a in range(4):
            p32[p, a] = planes[p, a]
        t = (abs(planes[p, 0]) + abs(planes[p, 1]) + abs(planes[p, 2])) * max_abs + abs(
            planes[p, 3]) + max_r
        term = max(term, t)
    e = max(abs(eye[0]), abs(eye[1]), abs(eye[2]))
    # At most float32's largest finite value: an infinite tolerance would turn the dead lanes'
    # -inf into NEAR (-inf >= -inf) and send them to the float64 settle as if alive.
    tol = min(_ROUNDINGS * _U32 * term + 1e-30, _F32_MAX)
    tol_d = min(_ROUNDINGS * _U32 * 4.0 * (max_abs + e) + 1e-30, _F32_MAX)
    return p32, tol, tol_d


@njit(cache=True, fastmath=FAST, inline="always")
def six_plane_code(p32, x, y, z, r, tol) -> np.uint8:
    """OUT / NEAR / IN of one sphere by six float32 planes: every scan's lane test (the brute
    force's, a chunk's, a tree block's). Six, a constant count: inside a loop over spheres
    the plane loop unrolls and the spheres vectorise."""
    m = np.float32(np.inf)
    for p in range(6):
        v = p32[p, 0] * x + p32[p, 1] * y + p32[p, 2] * z + p32[p, 3]
        m = v if v < m else m
    m = m + r
    return np.uint8(m >= tol) + np.uint8(m >= -tol)


@njit(cache=True, fastmath=FAST, inline="always")
def many_plane_code(p32, x, y, z, r, tol) -> np.uint8:
    """:func:`six_plane_code` for a volume of any number of planes (not vectorised)."""
    m = np.float32(np.inf)
    for p in range(p32.shape[0]):
        v = p32[p, 0] * x + p32[p, 1] * y + p32[p, 2] * z + p32[p, 3]
        m = v if v < m else m
    m = m + r
    return np.uint8(m >= tol) + np.uint8(m >= -tol)


@njit(cache=True, fastmath=FAST)
def _plane_verdicts(x, y, z, r, p32, tol, out) -> None:
    """OUT / NEAR / IN by the six planes; straight-line code that vectorises.

    The arrays are views of one range (a loop from 0 lets numba drop its negative-index
    checks, which otherwise stop the vectorisation: 2.0 ms against 0.6 ms for 10^6 spheres).
    """
    for i in range(x.shape[0]):
        out[i] = six_plane_code(p32, x[i], y[i], z[i], r[i], tol)


@njit(cache=True, fastmath=FAST)
def _many_plane_verdicts(x, y, z, r, p32, tol, out) -> None:
    """:func:`_plane_verdicts` for a volume of more than six planes (not vectorised)."""
    for i in range(x.shape[0]):
        out[i] = many_plane_code(p32, x[i], y[i], z[i], r[i], tol)


@njit(cache=True, fastmath=FAST)
def _distance_verdicts(x, y, z, vd, ex, ey, ez, tol_d, out) -> None:
    """Lower each verdict by the view-distance one (:func:`lowered`); vectorises."""
    for i in range(x.shape[0]):
        c = distance_code(x[i] - ex, y[i] - ey, z[i] - ez, vd[i], tol_d)
        out[i] = lowered(c, out[i])


@njit(cache=True, fastmath=FAST, inline="always")
def lowered(c, o) -> np.uint8:
    """The verdict of a sphere whose view-distance verdict is ``c`` and plane verdict ``o``,
    view distance tested first as :func:`~app.geom.decide.accept_sphere` does: OUT (culled by
    view distance), NEAR (even when the planes say OUT, so that the float64 settle names the
    first test it fails), or, certainly within its view distance, the planes' verdict with
    OUT made :data:`OUTSIDE` (culled by the frustum), which the compaction counts: no count in
    this loop (a reduction here cost the loop a third). A dead row (radius -inf, view distance
    inf: :func:`kill32`) comes out OUTSIDE too; :func:`scan_frustum` takes those off."""
    return c if c < IN else (o if o > OUT else OUTSIDE)


@njit(cache=True, fastmath=FAST, inline="always")
def distance_code(dx, dy, dz, vd, tol_d) -> np.uint8:
    """OUT / NEAR / IN for ``|d| <= vd`` in float32, on squares (no square root to round).

    IN needs ``|d|`` below ``vd`` shrunk by :data:`_VD_SLACK` and the distance tolerance, and
    that bound positive; not OUT needs it below ``vd`` stretched by both. An infinite ``vd``
    is always IN.
    """
    d2 = dx * dx + dy * dy + dz * dz
    a = vd * np.float32(1.0 - _VD_SLACK) - tol_d
    b = vd * np.float32(1.0 + _VD_SLACK) + tol_d
    # (an infinite vd by its own test: beyond ~1.8e19 the float32 square d2 overflows to inf,
    # which ``d2 < a * a`` alone would leave NEAR; a dead row, whose stale centre may lie
    # there, must come out OUTSIDE)
    endless = vd == np.float32(np.inf)
    return np.uint8(((a > 0) & (d2 < a * a)) | endless) + np.uint8((d2 <= b * b) | endless)


class SphereTest(NamedTuple):
    """A scan's test in float32: the planes (P, 4), the eye (3), whether view distances
    count, and the plane and distance tolerances (:func:`tolerances`)."""

    planes: np.ndarray
    eye: np.ndarray
    use_vd: bool
    tol: float
    tol_d: float


def sphere_test(planes: np.ndarray, eye: np.ndarray, use_vd: bool, max_abs: float,
                max_r: float) -> SphereTest:
    """The float32 test of ``planes`` and ``eye`` for spheres bounded by ``max_abs`` and
    ``max_r`` (:func:`tolerances`)."""
    p32, tol, tol_d = tolerances(planes, eye, max_abs, max_r)
    return SphereTest(p32, eye.astype(np.float32), bool(use_vd), tol, tol_d)


@njit(cache=True)
def verdicts(s, t, lo: int, hi: int, out) -> None:
    """Verdict bytes (OUT / NEAR / IN, with view distance also OUTSIDE) of spheres
    ``lo .. hi-1`` of ``s`` (:class:`Spheres32`) by the test ``t`` (:class:`SphereTest`) into
    ``out[lo:hi]``."""
    x, y, z, r, vd = s
    p32, eye32, use_vd, tol, tol_d = t
    xs = x[lo:hi]
    ys = y[lo:hi]
    zs = z[lo:hi]
    o = out[lo:hi]
    if p32.shape[0] == 6:
        _plane_verdicts(xs, ys, zs, r[lo:hi], p32, np.float32(tol), o)
    else:
        _many_plane_verdicts(xs, ys, zs, r[lo:hi], p32, np.float32(tol), o)
    if use_vd:
        _distance_verdicts(xs, ys, zs, vd[lo:hi], eye32[0], eye32[1], eye32[2],
                           np.float32(tol_d), o)


@njit(cache=True, parallel=True)
def verdicts_parallel(s, t, n: int, out) -> None:
    """:func:`verdicts` over ``0 .. n-1`` in chunks on every core."""
    chunk = 16384
    nchunks = (n + chunk - 1) // chunk
    for c in prange(nchunks):
        lo = c * chunk
        verdicts(s, t, lo, min(lo + chunk, n), out)


@njit(cache=True, inline="always")
def _take(codes, j0: int, j1: int, sure, ns: int, near, nn: int, nf: int):
    """Append positions ``j0 .. j1-1`` by verdict, without branches, and count the OUTSIDE
    ones: (ns, nn, nf)."""
    for j in range(j0, j1):
        c = codes[j]
        sure[ns] = j
        ns += c == IN
        near[nn] = j
        nn += c == NEAR
        nf += c == OUTSIDE
    return ns, nn, nf


@njit(cache=True, inline="always")
def verdict_words(codes):
    """The verdict bytes eight at a time (the whole words of ``codes``), for :func:`compact`."""
    return codes[: codes.shape[0] // 8 * 8].view(np.uint64)


@njit(cache=True, inline="always")
def _take_word(codes, word, base: int, sure, ns: int, near, nn: int, nf: int):
    """Append the eight positions ``base ..`` of one verdict word by verdict, and count its
    OUTSIDE lanes (bit 2 of a byte, gathered as the IN lanes are): (ns, nn, nf).

    The IN lanes (bit 1 of each byte) gather into an 8-bit mask whose lane list is written
    with one unconditional 8-wide store, then ``ns`` moves by the count: no per-lane work.
    ``sure`` must have room for eight entries at ``ns`` (true when ``ns`` counts positions
    before ``base`` of the same buffer). NEAR lanes (bit 0) are rare and go one by one.
    """
    m = ((word >> np.uint64(1)) & _LOW_BITS) * _GATHER_BITS >> np.uint64(56)
    for k in range(8):
        sure[ns + k] = base + _LANES[m, k]
    ns += _COUNT[m]
    if word & _OUTSIDE_BITS:  # (never without view distance: a branch that predicts well)
        nf += _COUNT[((word >> np.uint64(2)) & _LOW_BITS) * _GATHER_BITS >> np.uint64(56)]
    if word & _LOW_BITS:
        for j in range(base, base + 8):
            near[nn] = j
            nn += codes[j] == NEAR
    return ns, nn, nf


@njit(cache=True, inline="always")
def compact(codes, words, lo: int, hi: int, sure, ns: int, near, nn: int, nf: int = 0):
    """Append the positions in ``lo .. hi-1`` with verdict IN to ``sure`` and NEAR to ``near``,
    and add the OUTSIDE ones to ``nf`` (an all-OUT group has none, so skipping it loses none).

    Reads the verdicts eight bytes at a time (``words`` = :func:`verdict_words` of ``codes``,
    made once by the caller), skips all-OUT words and turns the others into positions a word
    at a time (:func:`_take_word`). Each position is appended at most once, so a ``sure``
    buffer with a row for every position appended in the whole pass has the room the
    8-wide stores need. Returns the new (ns, nn, nf). Inlined: callers compact one 64-lane
    chunk at a time.
    """
    head = min(hi, (lo + 7) & ~7)
    ns, nn, nf = _take(codes, lo, head, sure, ns, near, nn, nf)
    w0 = head // 8
    w1 = max(w0, hi // 8)
    # Eight words (64 lanes) at a time: a group with no IN or NEAR lane is skipped (a branch
    # that predicts well on sparse answers; its OUTSIDE lanes only counted), the words of the
    # others are taken without a branch (a per-word test mispredicts about half the time on
    # answers of 10-50 %).
    g1 = w0 + (w1 - w0) // 8 * 8
    for g in range(w0, g1, 8):
        any_lane = (words[g] | words[g + 1] | words[g + 2] | words[g + 3] | words[g + 4]
                    | words[g + 5] | words[g + 6] | words[g + 7])
        if any_lane & _TAKEN_BITS:
            for w in range(g, g + 8):
                ns, nn, nf = _take_word(codes, words[w], 8 * w, sure, ns, near, nn, nf)
        elif any_lane:
            # Nothing to take, only OUTSIDE lanes to count: sum their bits over the 8 words
            # (at most 8 a byte), then the bytes with one multiply (at most 64).
            out4 = np.uint64(0)
            for w in range(g, g + 8):
                out4 += (words[w] >> np.uint64(2)) & _LOW_BITS
            nf += (out4 * _LOW_BITS) >> np.uint64(56)
    for w in range(g1, w1):
        ns, nn, nf = _take_word(codes, words[w], 8 * w, sure, ns, near, nn, nf)
    return _take(codes, max(head, 8 * w1), hi, sure, ns, near, nn, nf)


@njit(cache=True)
def settle(sure, ns: int, near, nn: int, centers, radii, vdist, planes, eye, use_vd: bool,
           occ: Occluder, rows):
    """Finish a scan: decide the NEAR positions in float64, test every drawn one for occlusion.

    ``sure[:ns]`` and ``near[:nn]`` hold positions; ``rows`` maps a position to its row of the
    float64 ``centers`` / ``radii`` / ``vdist`` (``rows`` empty: the same). Writes the drawn
    positions to ``sure[:k]`` and returns (k, occluded, NEAR ones culled by the frustum).
    """
    same = rows.shape[0] == 0
    occl = occ.widths.shape[0] > 0
    k = 0
    occluded = 0
    outside = 0
    if occl:  # the sure ones passed view distance and frustum: occlusion remains
        for i in range(ns):
            pos = sure[i]
            s = pos if same else rows[pos]
            if sphere_hidden(occ, centers[s, 0], centers[s, 1], centers[s, 2], radii[s]):
                occluded += 1
            else:
                sure[k] = pos
                k += 1
    else:
        k = ns
    for i in range(nn):
        pos = near[i]
        s = pos if same else rows[pos]
        verdict = accept_sphere(planes, eye, use_vd, occ, centers[s, 0], centers[s, 1],
                                centers[s, 2], radii[s], vdist[s])
        if verdict == ACCEPTED:
            sure[k] = pos
            k += 1
        elif verdict == NODE_REJECT_OCCLUSION:
            occluded += 1
        elif verdict == NODE_REJECT_FRUSTUM:
            outside += 1
    return k, occluded, outside


#: Rows from which a scan's verdict loop wakes the second core. The loop costs ~0.6 ns a
#: row and waking the workers ~0.2 ms (app.parallelism), so below ~500,000 rows one core is
#: faster: at 10^5 moving objects the query took 0.28 ms on both cores, 0.18 ms on one.
SCAN_PARALLEL_MIN = 1 << 19

#: Largest magnitude the float32 copy holds: larger finite values are clamped to it (the
#: tolerances, computed from the true float64 magnitudes, then send such spheres to float64).
F32_BIG = 1e38


@njit(cache=True, inline="always")
def to32(v: float) -> np.float32:
    """The float32 copy of a coordinate, radius or view distance (finite values clamped)."""
    if v == np.inf:
        return np.float32(np.inf)
    return np.float32(min(max(v, -F32_BIG), F32_BIG))


class Spheres32(NamedTuple):
    """The float32 copy the scan reads: one array per field; a dead row has radius ``-inf``
    and view distance ``inf`` (:func:`kill32`)."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    r: np.ndarray
    vd: np.ndarray


#: A dead row's values, field by field (x, y, z, r, vd: see :func:`kill32`).
DEAD32 = (0.0, 0.0, 0.0, -np.inf, np.inf)


def spheres32(capacity: int) -> Spheres32:
    """An empty float32 copy of ``capacity`` rows (all dead), every page written now (np.zeros
    maps pages lazily: the frame that first appends there would pay the faults)."""
    return Spheres32(*(np.full(capacity, v, np.float32) for v in DEAD32))


def mismatch32(s: Spheres32, held: np.ndarray, dead: np.ndarray, centers: np.ndarray,
               radii: np.ndarray, vdist: np.ndarray) -> str:
    """'' when the rows ``held`` of the float32 copy ``s`` hold their slots' spheres (as
    :func:`store32` writes them) and the rows ``dead`` are marked dead (:func:`kill32`); else
    what is wrong (for a ``validate()``)."""
    want = spheres32(s.r.shape[0])
    store32(want, held, centers, radii, vdist, held)
    for name, have, exp in zip(Spheres32._fields, s, want, strict=True):
        if not np.array_equal(have[held], exp[held]):
            return f"its {name} differs from the store"
    if not (np.all(s.r[dead] == -np.inf) and np.all(s.vd[dead] == np.inf)):
        return "a dead row is not marked dead"
    return ""


def grown32(s: Spheres32, capacity: int) -> Spheres32:
    """``s`` with room for ``capacity`` rows, the new ones dead."""
    out = spheres32(capacity)
    for a, b in zip(out, s, strict=True):
        a[: b.shape[0]] = b
    return out


def store32(s: Spheres32, rows, centers, radii, vdist, src):
    """Copy float64 rows ``src`` of centers/radii/vdist into float32 rows ``rows`` of ``s``.

    ``src`` empty: the i-th row of the inputs goes to ``rows[i]``. Returns the largest
    coordinate magnitude and radius written, which bound the scan's tolerances. Many rows (a
    build, a re-sort) go on every core; below ``PARALLEL_MIN`` (a frame's spawns) on the
    calling thread: the parallel kernel, even held to one thread, cost a frame of the moving
    workload 25-30 us more a call than the plain loop (100 spawns, after kernels on both
    cores).
    """
    if rows.shape[0] < PARALLEL_MIN:
        return _store32_serial(s, rows, centers, radii, vdist, src)
    with threads_for(rows.shape[0]):
        return _store32_parallel(s, rows, centers, radii, vdist, src)


@njit(cache=True, parallel=True)
def _store32_parallel(s: Spheres32, rows, centers, radii, vdist, src):
    n = rows.shape[0]
    direct = src.shape[0] == 0
    # Unpacked first: numba's parfor lowering drops writes through a named tuple's fields.
    x, y, z, r, vd = s.x, s.y, s.z, s.r, s.vd
    big = np.zeros(n)
    rad = np.zeros(n)
    for i in prange(n):
        j = np.int64(i) if direct else src[i]
        k = rows[i]
        cx = centers[j, 0]
        cy = centers[j, 1]
        cz = centers[j, 2]
        x[k] = to32(cx)
        y[k] = to32(cy)
        z[k] = to32(cz)
        r[k] = to32(radii[j])
        vd[k] = to32(vdist[j])
        big[i] = max(abs(cx), abs(cy), abs(cz))
        rad[i] = radii[j]
    return (big.max() if n else 0.0), (rad.max() if n else 0.0)


@njit(cache=True)
def _store32_serial(s: Spheres32, rows, centers, radii, vdist, src):
    """:func:`_store32_parallel`'s loop on one thread, maxima kept as it goes (its own body:
    one function compiled both ways would share a cache entry)."""
    direct = src.shape[0] == 0
    x, y, z, r, vd = s.x, s.y, s.z, s.r, s.vd
    big = 0.0
    rad = 0.0
    for i in range(rows.shape[0]):
        j = np.int64(i) if direct else src[i]
        k = rows[i]
        cx = centers[j, 0]
        cy = centers[j, 1]
        cz = centers[j, 2]
        x[k] = to32(cx)
        y[k] = to32(cy)
        z[k] = to32(cz)
        r[k] = to32(radii[j])
        vd[k] = to32(vdist[j])
        big = max(big, abs(cx), abs(cy), abs(cz))
        rad = max(rad, radii[j])
    return big, rad


@njit(cache=True)
def kill32(s: Spheres32, rows) -> None:
    """Mark rows dead: radius -inf fails every plane test without a branch, and an endless
    view distance keeps them out of the view-distance count (:func:`_distance_verdicts`)."""
    r, vd = s.r, s.vd  # (a record's field read in a loop is refcounted)
    n = rows.shape[0]
    for i in range(n):
        if i + PREFETCH_AHEAD < n:
            prefetch(r, rows[i + PREFETCH_AHEAD])
            prefetch(vd, rows[i + PREFETCH_AHEAD])
        r[rows[i]] = -np.inf
        vd[rows[i]] = np.inf


@njit(cache=True)
def _scan(s: Spheres32, n: int, t: SphereTest, centers, radii, vdist, planes, eye,
          occ: Occluder, rows, codes, parallel: bool):
    use_vd = t.use_vd
    if parallel:
        verdicts_parallel(s, t, n, codes)
    else:
        verdicts(s, t, 0, n, codes)
    sure = np.empty(n, np.int64)
    near = np.empty(n, np.int64)
    ns, nn, nf = compact(codes, verdict_words(codes), 0, n, sure, 0, near, 0, 0)
    k, occluded, outside = settle(sure, ns, near, nn, centers, radii, vdist, planes, eye,
                                  use_vd, occ, rows)
    return sure[:k], occluded, nf + outside


def scan_frustum(s: Spheres32, n: int, planes: np.ndarray, eye: np.ndarray, use_vd: bool,
                 max_abs: float, max_r: float, centers: np.ndarray, radii: np.ndarray,
                 vdist: np.ndarray, occ: Occluder, rows: np.ndarray | None = None,
                 parallel: bool = False, codes: np.ndarray | None = None,
                 dead: int = 0) -> tuple[np.ndarray, int, int | None]:
    """Brute force over rows ``0 .. n-1`` of ``s``: (drawn rows, occluded count, count culled
    by the frustum), each sphere counted under the first test it fails (view distance,
    frustum, occlusion: :func:`~app.geom.decide.accept_sphere`'s order; the view distance's
    count is the rest). ``dead``: how many of the rows are dead. Without view distance the
    frustum's count is None (the rest, too).

    ``max_abs`` / ``max_r`` bound every live row's coordinates and radius; ``rows`` maps a row
    of ``s`` to its row of the float64 arrays (None: the same); ``codes`` is an optional
    reusable verdict buffer of at least ``n`` bytes.
    """
    t = sphere_test(planes, eye, use_vd, max_abs, max_r)
    if codes is None or codes.shape[0] < n:
        codes = np.empty(n, np.uint8)
    drawn, occluded, outside = _scan(s, n, t, centers, radii, vdist, planes, eye, occ,
                                     _NO_ROWS if rows is None else rows, codes, parallel)
    # Dead rows (radius -inf, view distance inf) come out OUTSIDE in a view-distance scan.
    return drawn, occluded, int(outside) - dead if use_vd else None


_NO_ROWS = np.zeros(0, np.int64)
