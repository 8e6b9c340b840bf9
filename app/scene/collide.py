"""Balls that collide: the simulation step of the ``collide`` scene (issue 14, Shagam 2.2.4).

Shagam's arrangement: a **collision index**, separate from the viewer's visibility index,
holds each ball's sphere grown to cover its motion over the next step (swept bounds: centre
at the midpoint of the step, radius ``r + |v| dt / 2 + margin``). One step of
:meth:`CollisionWorld.step`:

1. **broad phase** -- the swept spheres into the collision index (``update``), one
   ``query_pairs()``: the candidate pairs, every pair whose swept spheres touch;
2. **narrow phase** (compiled) -- per candidate pair the exact time of first contact within
   the step under linear motion (the smaller root of ``|d + w t| = ra + rb``, 0 when the balls
   already touch): the pairs *in contact* this step;
3. **response** (compiled) -- elastic impulses along the contact normal (masses ~ r^3,
   restitution 1 by default, so kinetic energy is conserved), in sweeps over the contacts
   until no pair approaches; then the motion ``x += v dt`` with reflection off the walls, each
   ball kept inside its swept sphere (a ball whose velocity turned goes no farther than its
   bound: every pair that can overlap at the end of the step is then a candidate); then
   positional correction: overlapping candidate pairs are pushed apart (by inverse mass) in a
   few Gauss-Seidel sweeps, and balls are clamped into the box, so none stays interpenetrated.

Nothing here loops over balls or pairs in Python; the step is a handful of compiled kernels
around the index's two calls. No OpenGL: the viewer reads :attr:`CollisionWorld.stats` and
the contacts (:meth:`CollisionWorld.contact_rows`, :attr:`CollisionWorld.contact_pairs`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from app.spatial import INDEX_NAMES, create_index

#: The collision index when neither the scene nor the command line names one: the fastest
#: broad phase on the collide scene's swept spheres at 20,000 and at 100,000 balls, every
#: index on the same steps (docs/collision.md, "Collision view in the viewer").
DEFAULT_COLLISION_INDEX = "viewdist"
#: Gauss-Seidel sweeps of the velocity impulses and of the positional correction per step.
IMPULSE_SWEEPS = 4
CORRECTION_SWEEPS = 64
#: Rounds of the separation at load (each: one index update, one query, correction sweeps).
SEPARATE_ROUNDS = 200
SEPARATE_SWEEPS = 64
#: A pushed pair ends this much farther apart than touching (relative): float rounding of
#: the next comparison then cannot call it overlapping.
PUSH_SLACK = 1e-9
#: At most this share of the box may be ball volume (denser cannot be separated at load).
MAX_PACKING = 0.45


@dataclass
class CollisionStats:
    """What the last step did (the HUD's collision line and the frame log's columns)."""

    pairs: int = 0  # candidate pairs of the broad phase (swept spheres touching)
    contacts: int = 0  # pairs in contact during the step (narrow phase)
    balls_in_contact: int = 0
    broadphase_ms: float = 0.0  # index update + query_pairs
    narrowphase_ms: float = 0.0
    response_ms: float = 0.0  # impulses, motion, walls, positional correction
    step_ms: float = 0.0
    max_overlap: float = 0.0  # deepest overlap left among the candidates (0: none)


# ----------------------------------------------------------------- compiled kernels

@njit(cache=True)
def swept_spheres(pos, vel, radii, dt, margin, out_c, out_r):  # pragma: no cover - compiled
    """Each ball's sphere over the next step: centre ``x + v dt / 2``, radius
    ``r + |v| dt / 2 + margin``, into ``out_c`` and ``out_r``."""
    h = 0.5 * dt
    for i in range(pos.shape[0]):
        vx = vel[i, 0]
        vy = vel[i, 1]
        vz = vel[i, 2]
        out_c[i, 0] = pos[i, 0] + vx * h
        out_c[i, 1] = pos[i, 1] + vy * h
        out_c[i, 2] = pos[i, 2] + vz * h
        out_r[i] = radii[i] + math.sqrt(vx * vx + vy * vy + vz * vz) * h + margin


@njit(cache=True, inline="always")
def _fallback_normal(a, b):  # pragma: no cover - compiled
    """A unit direction for two balls at one point moving together (any fixed one will do,
    the same for the pair whichever way round)."""
    k = (a * 73856093 + b * 19349663) % 3
    if k == 0:
        return 1.0, 0.0, 0.0
    if k == 1:
        return 0.0, 1.0, 0.0
    return 0.0, 0.0, 1.0


@njit(cache=True)
def narrow_phase(pairs, pos, vel, radii, dt, normals, hit):  # pragma: no cover - compiled
    """Which candidate pairs touch during the step under linear motion: ``hit[k]`` and the
    unit normal from a to b at the first contact (``normals[k]``). Returns their number.

    Pair (a, b) with ``d = x_b - x_a``, ``w = v_b - v_a``, ``R = r_a + r_b``: in contact when
    ``|d| <= R`` now, or when they approach and ``|d + w t| = R`` has a root t in [0, dt].
    """
    count = 0
    for k in range(pairs.shape[0]):
        a = pairs[k, 0]
        b = pairs[k, 1]
        dx = pos[b, 0] - pos[a, 0]
        dy = pos[b, 1] - pos[a, 1]
        dz = pos[b, 2] - pos[a, 2]
        wx = vel[b, 0] - vel[a, 0]
        wy = vel[b, 1] - vel[a, 1]
        wz = vel[b, 2] - vel[a, 2]
        rr = radii[a] + radii[b]
        c0 = dx * dx + dy * dy + dz * dz - rr * rr
        t = -1.0
        if c0 <= 0.0:
            t = 0.0
        else:
            bb = dx * wx + dy * wy + dz * wz
            aa = wx * wx + wy * wy + wz * wz
            if bb < 0.0 and aa > 0.0:
                disc = bb * bb - aa * c0
                if disc >= 0.0:
                    t0 = (-bb - math.sqrt(disc)) / aa
                    if t0 <= dt:
                        t = max(t0, 0.0)
        if t < 0.0:
            hit[k] = False
            continue
        hit[k] = True
        count += 1
        nx = dx + wx * t
        ny = dy + wy * t
        nz = dz + wz * t
        norm = math.sqrt(nx * nx + ny * ny + nz * nz)
        if norm > 1e-300:
            normals[k, 0] = nx / norm
            normals[k, 1] = ny / norm
            normals[k, 2] = nz / norm
        else:
            normals[k, 0], normals[k, 1], normals[k, 2] = _fallback_normal(a, b)
    return count


@njit(cache=True)
def apply_impulses(pairs, hit, normals, vel, inv_mass, restitution,
                   sweeps):  # pragma: no cover - compiled
    """Impulses along the contact normals of the pairs in contact, in up to ``sweeps``
    passes until none approaches: ``j = -(1 + e) (w . n) / (1/m_a + 1/m_b)``. With e = 1
    each impulse keeps the pair's kinetic energy and momentum. Returns the impulses applied."""
    applied = 0
    for _ in range(sweeps):
        this = 0
        for k in range(pairs.shape[0]):
            if not hit[k]:
                continue
            a = pairs[k, 0]
            b = pairs[k, 1]
            nx = normals[k, 0]
            ny = normals[k, 1]
            nz = normals[k, 2]
            vn = ((vel[b, 0] - vel[a, 0]) * nx + (vel[b, 1] - vel[a, 1]) * ny
                  + (vel[b, 2] - vel[a, 2]) * nz)
            if vn >= 0.0:
                continue
            ia = inv_mass[a]
            ib = inv_mass[b]
            s = ia + ib
            if s <= 0.0:
                continue
            j = -(1.0 + restitution) * vn / s
            vel[a, 0] -= j * ia * nx
            vel[a, 1] -= j * ia * ny
            vel[a, 2] -= j * ia * nz
            vel[b, 0] += j * ib * nx
            vel[b, 1] += j * ib * ny
            vel[b, 2] += j * ib * nz
            this += 1
        applied += this
        if this == 0:
            break
    return applied


@njit(cache=True, inline="always")
def _wall(x, v, lo, hi):  # pragma: no cover - compiled
    """One axis of a ball centre inside [lo, hi] (the box shrunk by the radius): reflected
    position and velocity (any overshoot folds back; a box narrower than the ball: its middle)."""
    if hi <= lo:
        return 0.5 * (lo + hi), 0.0
    if x < lo:
        x = lo + (lo - x)
        v = abs(v)
    elif x > hi:
        x = hi - (x - hi)
        v = -abs(v)
    if x < lo or x > hi:  # folded past the other wall: a step longer than the box
        x = min(max(x, lo), hi)
    return x, v


@njit(cache=True)
def advance(pos, vel, radii, dt, lo, hi, swept_c, swept_r, margin):  # pragma: no cover
    """``x += v dt``, reflected off the walls of [lo, hi] (shrunk by each radius), then
    kept inside the ball's swept sphere less half the margin: a ball whose velocity an
    impulse turned goes no farther than its bound, so any pair that overlaps after the
    step had touching swept spheres (a candidate). Returns how many balls were held back."""
    held = 0
    for i in range(pos.shape[0]):
        r = radii[i]
        x, vx = _wall(pos[i, 0] + vel[i, 0] * dt, vel[i, 0], lo[0] + r, hi[0] - r)
        y, vy = _wall(pos[i, 1] + vel[i, 1] * dt, vel[i, 1], lo[1] + r, hi[1] - r)
        z, vz = _wall(pos[i, 2] + vel[i, 2] * dt, vel[i, 2], lo[2] + r, hi[2] - r)
        vel[i, 0] = vx
        vel[i, 1] = vy
        vel[i, 2] = vz
        ex = x - swept_c[i, 0]
        ey = y - swept_c[i, 1]
        ez = z - swept_c[i, 2]
        e = math.sqrt(ex * ex + ey * ey + ez * ez)
        limit = swept_r[i] - r - 0.5 * margin
        if e > limit:
            s = max(limit, 0.0) / e
            x = swept_c[i, 0] + ex * s
            y = swept_c[i, 1] + ey * s
            z = swept_c[i, 2] + ez * s
            held += 1
        pos[i, 0] = x
        pos[i, 1] = y
        pos[i, 2] = z
    return held


@njit(cache=True, inline="always")
def _clamp_one(pos, i, r, lo, hi):  # pragma: no cover - compiled
    """Ball ``i``'s centre into [lo + r, hi - r] (the middle on an axis narrower than it)."""
    for a in range(3):
        lo_a = lo[a] + r
        hi_a = hi[a] - r
        if hi_a <= lo_a:
            pos[i, a] = 0.5 * (lo_a + hi_a)
        elif pos[i, a] < lo_a:
            pos[i, a] = lo_a
        elif pos[i, a] > hi_a:
            pos[i, a] = hi_a


@njit(cache=True)
def clamp_to_box(pos, radii, lo, hi):  # pragma: no cover - compiled
    """Every centre into [lo + r, hi - r] (the middle on an axis narrower than the ball)."""
    for i in range(pos.shape[0]):
        _clamp_one(pos, i, radii[i], lo, hi)


@njit(cache=True)
def push_apart(pairs, pos, radii, share, lo, hi, sweeps, tol, stamp):  # pragma: no cover
    """Positional correction: up to ``sweeps`` Gauss-Seidel passes that move each
    overlapping pair apart along the line of centres (``share`` per ball: a's part of the
    push is share[a] / (share[a] + share[b])) to just touching, each moved ball clamped
    into the box at once; stops when no overlap exceeds ``tol`` (relative to ``r_a + r_b``).
    A pass after the first looks only at pairs with a ball moved since the pair was last
    looked at (``stamp``: per ball, the pass that last moved it; any scratch array of one
    int64 a ball). Returns the deepest overlap left (absolute)."""
    stamp[:] = -2
    clamp_to_box(pos, radii, lo, hi)
    for s in range(sweeps):
        worst = 0.0
        for k in range(pairs.shape[0]):
            a = pairs[k, 0]
            b = pairs[k, 1]
            if s > 0 and stamp[a] < s - 1 and stamp[b] < s - 1:
                continue  # neither moved since this pair was last seen apart
            rr = radii[a] + radii[b]
            dx = pos[b, 0] - pos[a, 0]
            dy = pos[b, 1] - pos[a, 1]
            dz = pos[b, 2] - pos[a, 2]
            d2 = dx * dx + dy * dy + dz * dz
            if d2 >= rr * rr:
                continue
            d = math.sqrt(d2)
            if d > 1e-300:
                nx = dx / d
                ny = dy / d
                nz = dz / d
            else:
                nx, ny, nz = _fallback_normal(a, b)
            sa = share[a]
            sb = share[b]
            t = sa + sb
            if t <= 0.0:
                sa = sb = 1.0
                t = 2.0
            push = rr * (1.0 + PUSH_SLACK) - d
            worst = max(worst, (rr - d) / rr)
            fa = push * sa / t
            fb = push * sb / t
            pos[a, 0] -= nx * fa
            pos[a, 1] -= ny * fa
            pos[a, 2] -= nz * fa
            pos[b, 0] += nx * fb
            pos[b, 1] += ny * fb
            pos[b, 2] += nz * fb
            _clamp_one(pos, a, radii[a], lo, hi)
            _clamp_one(pos, b, radii[b], lo, hi)
            stamp[a] = s
            stamp[b] = s
        if worst <= tol:
            break
    # What is left after the last pass.
    left = 0.0
    for k in range(pairs.shape[0]):
        a = pairs[k, 0]
        b = pairs[k, 1]
        rr = radii[a] + radii[b]
        dx = pos[b, 0] - pos[a, 0]
        dy = pos[b, 1] - pos[a, 1]
        dz = pos[b, 2] - pos[a, 2]
        d2 = dx * dx + dy * dy + dz * dz
        if d2 < rr * rr:
            left = max(left, rr - math.sqrt(d2))
    return left


@njit(cache=True)
def mark_contacts(pairs, hit, mark, rows, out_rows, out_pairs):  # pragma: no cover
    """The balls of the pairs in contact, once each, as scene rows in ascending order
    (``out_rows``), and the pairs in contact as scene rows (``out_pairs``); returns
    (balls, pairs). ``mark`` (one byte a ball) is left all False."""
    c = 0
    for k in range(pairs.shape[0]):
        if hit[k]:
            a = pairs[k, 0]
            b = pairs[k, 1]
            mark[a] = True
            mark[b] = True
            out_pairs[c, 0] = rows[a]
            out_pairs[c, 1] = rows[b]
            c += 1
    m = 0
    for i in range(mark.shape[0]):
        if mark[i]:
            mark[i] = False
            out_rows[m] = rows[i]
            m += 1
    return m, c


@njit(cache=True)
def kinetic_energy(vel, mass):  # pragma: no cover - compiled
    """Sum of m |v|^2 / 2."""
    e = 0.0
    for i in range(vel.shape[0]):
        e += 0.5 * mass[i] * (vel[i, 0] * vel[i, 0] + vel[i, 1] * vel[i, 1]
                              + vel[i, 2] * vel[i, 2])
    return e


# ----------------------------------------------------------------- the world

def check_collision_index(name: str) -> str:
    """``name`` when it is an index name, else ValueError listing the names."""
    if name not in INDEX_NAMES:
        raise ValueError(f"unknown collision index {name!r}; available: {', '.join(INDEX_NAMES)}")
    return name


class CollisionWorld:
    """Balls (rows of the scene's centre array) with velocities in a box, their swept
    spheres in a separate collision index, and the step (module docstring)."""

    def __init__(self, centers: np.ndarray, rows: np.ndarray, radii: np.ndarray,
                 velocities: np.ndarray, lo: np.ndarray, hi: np.ndarray, *,
                 index: str = DEFAULT_COLLISION_INDEX, margin: float = 0.05,
                 restitution: float = 1.0, separate: bool = True) -> None:
        """``centers`` is the scene's (N, 3) array, moved in place; ``rows`` the balls' rows
        in it; ``radii`` and ``velocities`` per ball; [lo, hi] the walls. With ``separate``
        the balls that overlap at the start are pushed apart now (:meth:`separate`)."""
        if not (math.isfinite(margin) and margin >= 0):
            raise ValueError(f"collision margin must be a finite number >= 0, got {margin!r}")
        if not (math.isfinite(restitution) and 0.0 <= restitution <= 1.0):
            raise ValueError(f"restitution must be in [0, 1], got {restitution!r}")
        self.index_name = check_collision_index(index)
        self.centers = centers
        self.rows = np.ascontiguousarray(rows, dtype=np.int64)
        n = self.rows.shape[0]
        self.n = n
        self.radii = np.ascontiguousarray(radii, dtype=np.float64)
        self.vel = np.ascontiguousarray(velocities, dtype=np.float64).reshape(n, 3).copy()
        self.lo = np.asarray(lo, np.float64).copy()
        self.hi = np.asarray(hi, np.float64).copy()
        self.margin = float(margin)
        self.restitution = float(restitution)
        self.mass = self.radii ** 3
        with np.errstate(divide="ignore"):
            self.inv_mass = np.where(self.mass > 0, 1.0 / np.maximum(self.mass, 1e-300), 0.0)
        # Positional correction moves a ball by a share ~ 1/r (not 1/m: a small ball jammed
        # between large ones would move them by a hundredth of each push and need many
        # sweeps); positions only, so momentum and energy are untouched either way.
        self.push_share = np.where(self.radii > 0, 1.0 / np.maximum(self.radii, 1e-300), 1.0)
        # The balls' centres: a view of the scene's array when the rows are one run (no
        # gather or scatter per step), else a copy written back after each step.
        start = int(self.rows[0]) if n else 0
        self._run = bool(n) and np.array_equal(self.rows, np.arange(start, start + n))
        self.pos = centers[start:start + n] if self._run else centers[self.rows].copy()
        self.ids = np.arange(n, dtype=np.int64)
        self.ids.flags.writeable = False
        self.swept_c = np.zeros((n, 3), np.float64)
        self.swept_r = np.zeros(n, np.float64)
        self._mark = np.zeros(n, np.bool_)
        self._stamp = np.zeros(n, np.int64)  # push_apart's scratch
        self._contact_rows = np.zeros(n, np.int64)
        self.contact_count = 0
        self.contact_pairs = np.zeros((0, 2), np.int64)  # scene rows, pairs in contact
        self.candidate_pairs = np.zeros((0, 2), np.int64)  # ball indices, last broad phase
        self.stats = CollisionStats()
        self.index = None
        self.separation_rounds = 0
        self.start_overlap = 0  # pairs that overlapped at load
        self.note = ""  # one line about the load (separation), for the viewer
        clamp_to_box(self.pos, self.radii, self.lo, self.hi)
        if separate:
            self.separate()
        self._write_back()
        self.set_index(self.index_name)

    # ------------------------------------------------------------------ set-up

    def _write_back(self) -> None:
        if not self._run and self.n:
            self.centers[self.rows] = self.pos

    def set_index(self, name: str) -> float:
        """Use (a new) collision index ``name``, built from the current swept spheres with
        a step of 1/60 s; returns the build time in ms. ValueError for an unknown name."""
        check_collision_index(name)
        t0 = time.perf_counter()
        idx = create_index(name)
        if self.n:
            swept_spheres(self.pos, self.vel, self.radii, 1.0 / 60.0, self.margin,
                          self.swept_c, self.swept_r)
            idx.insert(self.ids, self.swept_c, self.swept_r)
        self.index = idx
        self.index_name = name
        return (time.perf_counter() - t0) * 1e3

    def separate(self, rounds: int = SEPARATE_ROUNDS) -> int:
        """Push apart balls that overlap (at load), velocities unchanged: rounds of one
        exact pair query (a temporary index over the true spheres) and correction sweeps,
        until none overlaps by more than 1e-9 of a pair's radii. Returns the pairs that
        overlapped at first; :attr:`note` says what happened in one line."""
        if self.n < 2:
            return 0
        idx = create_index(self.index_name)
        idx.insert(self.ids, self.pos, self.radii)
        first = None
        done = 0
        equal = np.ones(self.n, np.float64)
        # Pairs within a margin: the pushes of a round that close a gap are then seen in
        # the same round's sweeps.
        reach = 0.5 * float(self.radii.mean())
        while done < rounds:  # rounds, not balls: each is compiled throughout
            pairs = idx.query_pairs(margin=reach)
            overlapping = _count_overlaps(pairs, self.pos, self.radii, 1e-9)
            if first is None:
                first = overlapping
            if overlapping == 0:
                break
            # Equal shares, not by mass: a small ball jammed between large ones would
            # otherwise move them by a hundredth of each push and take many rounds.
            push_apart(pairs, self.pos, self.radii, equal, self.lo, self.hi,
                       SEPARATE_SWEEPS, 1e-9, self._stamp)
            idx.update(self.ids, self.pos)
            done += 1
        left = float(_max_overlap(idx.query_pairs(), self.pos, self.radii))
        r = done
        self.separation_rounds = r
        self.start_overlap = int(first or 0)
        if self.start_overlap == 0:
            self.note = ""
        elif left <= 1e-9 * 2 * float(self.radii.max()):
            self.note = (f"collide: {self.start_overlap:,} pairs of balls overlapped at the "
                         f"start; separated in {r} rounds")
        else:
            self.note = (f"collide: {self.start_overlap:,} pairs of balls overlapped at the "
                         f"start; after {r} rounds some still overlap (by up to {left:.3g}): "
                         "the box is too full")
        return self.start_overlap

    # ------------------------------------------------------------------ per step

    def step(self, dt: float) -> CollisionStats:
        """Advance the balls by ``dt`` seconds (module docstring); the scene's centres move
        in place. Returns (and keeps) the step's :class:`CollisionStats`."""
        st = CollisionStats()
        t0 = time.perf_counter()
        if self.n == 0 or dt <= 0:
            self.stats = st
            self.contact_count = 0
            self.contact_pairs = np.zeros((0, 2), np.int64)
            return st
        # 1. broad phase: swept spheres into the collision index, one pair query
        swept_spheres(self.pos, self.vel, self.radii, dt, self.margin, self.swept_c,
                      self.swept_r)
        self.index.update(self.ids, self.swept_c, self.swept_r)
        pairs = self.index.query_pairs()
        t1 = time.perf_counter()
        # 2. narrow phase: exact first contact within the step
        k = pairs.shape[0]
        normals = np.empty((k, 3), np.float64)
        hit = np.empty(k, np.bool_)
        contacts = narrow_phase(pairs, self.pos, self.vel, self.radii, dt, normals, hit)
        t2 = time.perf_counter()
        # 3. response: impulses, motion with walls inside the swept bounds, correction
        apply_impulses(pairs, hit, normals, self.vel, self.inv_mass, self.restitution,
                       IMPULSE_SWEEPS)
        advance(self.pos, self.vel, self.radii, dt, self.lo, self.hi, self.swept_c,
                self.swept_r, self.margin)
        st.max_overlap = float(push_apart(pairs, self.pos, self.radii, self.push_share, self.lo,
                                          self.hi, CORRECTION_SWEEPS, 1e-7, self._stamp))
        self._write_back()
        t3 = time.perf_counter()
        out_pairs = np.empty((contacts, 2), np.int64)
        balls, _ = mark_contacts(pairs, hit, self._mark, self.rows, self._contact_rows,
                                 out_pairs)
        self.contact_count = int(balls)
        self.contact_pairs = out_pairs
        self.candidate_pairs = pairs
        st.pairs = int(k)
        st.contacts = int(contacts)
        st.balls_in_contact = int(balls)
        st.broadphase_ms = (t1 - t0) * 1e3
        st.narrowphase_ms = (t2 - t1) * 1e3
        st.response_ms = (t3 - t2) * 1e3
        st.step_ms = (time.perf_counter() - t0) * 1e3
        self.stats = st
        return st

    # ------------------------------------------------------------------ reading

    def contact_rows(self) -> np.ndarray:
        """Scene rows of the balls in contact in the last step, ascending (a view)."""
        return self._contact_rows[: self.contact_count]

    def candidate_rows(self) -> np.ndarray:
        """The last broad phase's candidate pairs as scene rows."""
        return self.rows[self.candidate_pairs]

    def energy(self) -> float:
        """Kinetic energy of the balls (mass = r^3)."""
        return float(kinetic_energy(self.vel, self.mass))

    def describe(self) -> str:
        """One line for the HUD: the collision index and the last step's numbers."""
        s = self.stats
        return (f"collision index {self.index_name}   pairs {s.pairs:,}   in contact "
                f"{s.contacts:,} ({s.balls_in_contact:,} balls)   broad-phase "
                f"{s.broadphase_ms:.2f} ms   narrow {s.narrowphase_ms:.2f}   response "
                f"{s.response_ms:.2f}")


@njit(cache=True)
def _count_overlaps(pairs, pos, radii, tol):  # pragma: no cover - compiled
    """Pairs whose overlap exceeds ``tol`` of their summed radii."""
    c = 0
    for k in range(pairs.shape[0]):
        a = pairs[k, 0]
        b = pairs[k, 1]
        rr = radii[a] + radii[b]
        dx = pos[b, 0] - pos[a, 0]
        dy = pos[b, 1] - pos[a, 1]
        dz = pos[b, 2] - pos[a, 2]
        if math.sqrt(dx * dx + dy * dy + dz * dz) < rr * (1.0 - tol):
            c += 1
    return c


@njit(cache=True)
def _max_overlap(pairs, pos, radii):  # pragma: no cover - compiled
    """The deepest overlap ``r_a + r_b - |c_a - c_b|`` among ``pairs`` (0 when none)."""
    worst = 0.0
    for k in range(pairs.shape[0]):
        a = pairs[k, 0]
        b = pairs[k, 1]
        dx = pos[b, 0] - pos[a, 0]
        dy = pos[b, 1] - pos[a, 1]
        dz = pos[b, 2] - pos[a, 2]
        worst = max(worst, radii[a] + radii[b] - math.sqrt(dx * dx + dy * dy + dz * dz))
    return worst


def random_velocities(n: int, speed_lo: float, speed_hi: float, lo: np.ndarray,
                      hi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random directions (none along a flat axis of the box) with speeds uniform in
    [speed_lo, speed_hi]."""
    d = rng.normal(size=(n, 3)) * (np.asarray(hi) > np.asarray(lo))
    norm = np.linalg.norm(d, axis=1, keepdims=True)
    d = np.where(norm > 1e-12, d / np.maximum(norm, 1e-12), 0.0)
    return d * rng.uniform(speed_lo, speed_hi, n)[:, None]


def packing(radii: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Share of the box's volume the balls fill (inf for a box without volume)."""
    vol = float(np.prod(np.maximum(np.asarray(hi) - np.asarray(lo), 0.0)))
    balls = float(4.0 / 3.0 * math.pi * np.sum(np.asarray(radii, np.float64) ** 3))
    return balls / vol if vol > 0 else (math.inf if balls > 0 else 0.0)


__all__ = ["DEFAULT_COLLISION_INDEX", "MAX_PACKING", "CollisionStats", "CollisionWorld",
           "check_collision_index", "packing", "random_velocities", "swept_spheres"]
