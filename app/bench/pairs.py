"""``python -m app bench pairs``: the collision broad-phase of every index against compiled
brute-force peers in the same run (issue 14).

Workloads: the paper's uniform and clustered distributions (``app.scene.distributions``),
n objects with mixed radii (log-uniform in [0.5, 2]) in a cube sized so that an object touches
about :data:`CONTACTS` others on average, every object moving a little every step (0.05-0.25
units, bouncing off the cube's walls). Per step and per subject: ``update`` of every object
(the peers write their arrays) + ``query_pairs()``; medians over the measured steps (the first
step after the insert is a warm-up). The peer ``sweep`` runs first and its pairs of every step
are the reference: every other subject's pairs are checked against them, exactly, as a set,
every step.
"""

from __future__ import annotations

import gc
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from app.bench.pairs_peers import PAIR_PEERS

#: Mean number of other objects each object touches at the start.
CONTACTS = 4.0
R_MIN, R_MAX = 0.5, 2.0  # radii: log-uniform in [R_MIN, R_MAX]
V_MIN, V_MAX = 0.05, 0.25  # speeds: units per step
DISTRIBUTIONS = ("uniform", "clustered")
FULL_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 4_000)
ALL_PAIRS_MAX_N = 10_000  # the O(n^2) peer runs up to this n
PEER_LABELS = ("sweep", "sweep-mt", "all-pairs")


# ----------------------------------------------------------------- workload

@dataclass
class PairsWorkload:
    """n spheres of one distribution and their motion; ``positions`` replays the steps."""

    dist: str
    n: int
    side: float
    centers: np.ndarray
    radii: np.ndarray
    velocity: np.ndarray

    @property
    def ids(self) -> np.ndarray:
        return np.arange(self.n, dtype=np.int64)

    def positions(self, steps: int):
        """Yield the centres after each of ``steps`` steps (one buffer, rewritten in place)."""
        pos = self.centers.copy()
        vel = self.velocity.copy()
        for _ in range(steps):
            _advance(pos, vel, self.side)
            yield pos


@njit(cache=True)
def _advance(pos, vel, side):
    """One step: move by the velocity, bounce off the walls of [0, side]^3."""
    for i in range(pos.shape[0]):
        for a in range(3):
            p = pos[i, a] + vel[i, a]
            if p < 0.0:
                p = -p
                vel[i, a] = -vel[i, a]
            elif p > side:
                p = 2.0 * side - p
                vel[i, a] = -vel[i, a]
            pos[i, a] = p


def _unit_points(dist: str, n: int, rng: np.random.Generator) -> np.ndarray:
    from app.scene import distributions as d

    return {"uniform": d.unit_uniform, "clustered": d.unit_clustered}[dist](n, rng)


def _mean_contacts(unit: np.ndarray, u: np.ndarray, s: float) -> float:
    """Mean contacts per object of ``unit`` points with radii ``s * u``."""
    from app.bench.pairs_peers import SweepPeer

    p = SweepPeer()
    p.insert(np.arange(unit.shape[0]), unit, s * u)
    return 2.0 * p.query_pairs().shape[0] / unit.shape[0]


def make_workload(dist: str, n: int, seed: int = 7) -> PairsWorkload:
    """The workload of ``dist`` at ``n`` objects (deterministic for a seed).

    Radii are log-uniform in [0.5, 2]; the cube's side is calibrated on a subsample (the
    chance that two given objects touch does not depend on n and scales as the radii cubed)
    so that an object touches about :data:`CONTACTS` others.
    """
    rng = np.random.default_rng([seed, n, DISTRIBUTIONS.index(dist)])
    unit = _unit_points(dist, n, rng)
    u = R_MIN * (R_MAX / R_MIN) ** rng.random(n)
    m = min(n, 40_000)
    sub = unit[:m]  # the points are independent: the first m are a random sample
    # start from the uniform estimate: n * (4/3) pi E[(ua + ub)^3] s^3 = CONTACTS
    e3 = float(np.mean((u[:m] + u[rng.permutation(m)]) ** 3))
    s = (CONTACTS / (max(n - 1, 1) * 4.0 / 3.0 * math.pi * e3)) ** (1.0 / 3.0)
    for _ in range(2):  # two corrections by the cube root of the measured ratio
        got = _mean_contacts(sub, u[:m], s) * (n - 1) / max(m - 1, 1)
        if got <= 0:
            s *= 2.0
            continue
        s *= (CONTACTS / got) ** (1.0 / 3.0)
    side = 1.0 / s
    speed = rng.uniform(V_MIN, V_MAX, n)
    d = rng.normal(size=(n, 3))
    d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    return PairsWorkload(dist, n, side, np.ascontiguousarray(unit * side), u,
                         np.ascontiguousarray(d * speed[:, None]))


# ----------------------------------------------------------------- exactness

@dataclass
class Truth:
    """The reference pairs of one step as sorted adjacency lists: row a holds the b > a."""

    off: np.ndarray
    nbr: np.ndarray

    @property
    def count(self) -> int:
        return int(self.nbr.shape[0])


@njit(cache=True)
def _csr(pairs, n):
    off = np.zeros(n + 1, np.int64)
    for k in range(pairs.shape[0]):
        off[min(pairs[k, 0], pairs[k, 1]) + 1] += 1
    for a in range(n):
        off[a + 1] += off[a]
    fill = off[:-1].copy()
    nbr = np.empty(pairs.shape[0], np.int32)
    for k in range(pairs.shape[0]):
        a = min(pairs[k, 0], pairs[k, 1])
        nbr[fill[a]] = max(pairs[k, 0], pairs[k, 1])
        fill[a] += 1
    for a in range(n):
        nbr[off[a]: off[a + 1]].sort()
    return off, nbr


def truth_of(pairs: np.ndarray, n: int) -> Truth:
    """The reference :class:`Truth` of a (K, 2) pair array over ids 0 .. n-1."""
    off, nbr = _csr(np.asarray(pairs, np.int64), n)
    return Truth(off, nbr)


@njit(cache=True)
def _compare(pairs, off, nbr, seen):
    """(missing, extra, repeated, misordered) of ``pairs`` against the reference lists."""
    n = off.shape[0] - 1
    seen[:] = False
    extra = 0
    dup = 0
    bad = 0
    hit = 0
    for k in range(pairs.shape[0]):
        a = pairs[k, 0]
        b = pairs[k, 1]
        if not (a < b):
            bad += 1
            a, b = min(a, b), max(a, b)
        if a < 0 or b >= n:
            extra += 1
            continue
        lo = off[a]
        hi = off[a + 1]
        while lo < hi:  # binary search of b in row a
            mid = (lo + hi) // 2
            if nbr[mid] < b:
                lo = mid + 1
            else:
                hi = mid
        if lo < off[a + 1] and nbr[lo] == b:
            if seen[lo]:
                dup += 1
            else:
                seen[lo] = True
                hit += 1
        else:
            extra += 1
    return nbr.shape[0] - hit, extra, dup, bad


def compare(pairs: np.ndarray, truth: Truth) -> str:
    """'' when ``pairs`` is exactly the reference set (a < b, no repeats), else what differs."""
    p = np.asarray(pairs)
    if p.ndim != 2 or p.shape[1] != 2:
        return f"shape {p.shape}"
    missing, extra, dup, bad = _compare(p.astype(np.int64, copy=False), truth.off, truth.nbr,
                                        np.zeros(truth.count, np.bool_))
    if missing == extra == dup == bad == 0:
        return ""
    return " ".join(s for s in (f"-{missing}" if missing else "", f"+{extra}" if extra else "",
                                f"dup{dup}" if dup else "", f"a>=b {bad}" if bad else "") if s)


# ----------------------------------------------------------------- running

@dataclass
class PairsRow:
    dist: str
    n: int
    subject: str
    build_s: float = math.nan
    update_ms: float = math.nan
    pairs_ms: float = math.nan
    step_ms: float = math.nan
    pairs: int = 0
    steps: int = 0
    exact: str = ""
    note: str = ""
    x_peer: float = math.nan  # the faster peer's step time / this step time
    error: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.error


def _warm(factory: Callable[[], Any]) -> None:
    """Load or compile the subject's kernels on a tiny instance (no timing includes it)."""
    rng = np.random.default_rng(0)
    s = factory()
    n = 300
    c = rng.random((n, 3)) * 20
    ids = np.arange(n, dtype=np.int64)
    s.insert(ids, c, rng.uniform(0.3, 1.5, n))
    s.query_pairs()
    s.update(ids, c + 0.1)
    s.query_pairs()


def run_subject(wl: PairsWorkload, label: str, factory: Callable[[], Any], steps: int,
                truth: list[Truth] | None, budget_s: float, step_budget_s: float = math.inf,
                keep: list[Truth] | None = None, min_steps: int = 1) -> PairsRow:
    """Insert, then up to ``steps`` + 1 steps of update + query_pairs (the first a warm-up),
    stopping once ``budget_s`` is spent (after at least ``min_steps`` measured steps) or when
    one step takes longer than ``step_budget_s``. ``truth``: reference per step to check
    against; ``keep``: list that receives this subject's pairs as the reference."""
    row = PairsRow(wl.dist, wl.n, label)
    clock = time.perf_counter
    try:
        _warm(factory)
        s = factory()
        ids = wl.ids
        t0 = clock()
        s.insert(ids, wl.centers, wl.radii)
        row.build_s = clock() - t0
        ups: list[float] = []
        qs: list[float] = []
        bad = 0
        first_bad = ""
        limit = steps + 1 if truth is None else min(steps + 1, len(truth))
        if limit == 0:
            raise RuntimeError("no reference pairs (the sweep peer failed)")
        k = 0
        start = clock()
        for k, pos in enumerate(wl.positions(limit)):
            t0 = clock()
            s.update(ids, pos)
            t1 = clock()
            p = s.query_pairs()
            t2 = clock()
            if k > 0 or limit == 1:
                ups.append(t1 - t0)
                qs.append(t2 - t1)
            if k == min(1, limit - 1):  # the first measured step: the same for every subject
                row.pairs = int(p.shape[0])
            if keep is not None:
                keep.append(truth_of(p, wl.n))
            if truth is not None:
                msg = compare(p, truth[k])
                if msg:
                    bad += 1
                    first_bad = first_bad or f"step {k}: {msg}"
            del p
            if t2 - t0 > step_budget_s:
                if not ups:  # the warm-up step alone: report it as the one measurement
                    ups.append(t1 - t0)
                    qs.append(t2 - t1)
                row.note = f"stopped: a step took {t2 - t0:.1f} s (> {step_budget_s:g} s)"
                break
            if len(ups) >= min_steps and clock() - start > budget_s:
                break
        row.steps = len(ups)
        row.update_ms = float(np.median(ups)) * 1e3
        row.pairs_ms = float(np.median(qs)) * 1e3
        row.step_ms = float(np.median(np.add(ups, qs))) * 1e3
        checked = k + 1
        if truth is None:
            row.exact = "reference"
        else:
            row.exact = "yes" if bad == 0 else f"NO {bad}/{checked}: {first_bad}"
        del s
    except Exception as exc:  # noqa: BLE001 - a failing index must not stop the run
        row.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        row.exact = "failed"
        row.extra["traceback"] = traceback.format_exc()
    gc.collect()
    return row


def subjects(only: list[str] | None = None) -> list[tuple[str, Callable[[], Any]]]:
    """(label, factory) of the peers and of every index variant (``only``: as bench index)."""
    from app.spatial import create_index, index_variants

    out: list[tuple[str, Callable[[], Any]]] = [(p, PAIR_PEERS[p]) for p in PEER_LABELS]
    for label, name, kw in index_variants():
        if only and not any(label == o or label.startswith(o + "/") or name == o for o in only):
            continue
        out.append((label, lambda name=name, kw=kw: create_index(name, **kw)))
    return out


def known_labels() -> set[str]:
    """Every label and index name ``--only`` accepts."""
    from app.spatial import index_variants

    known = set(PEER_LABELS)
    for label, name, _ in index_variants():
        known.update((label, name))
    return known


def run(dists: list[str], sizes: list[int], only: list[str] | None, steps: int,
        budget_s: float = 12.0, step_budget_s: float = 15.0, seed: int = 7,
        progress: Callable[[str, int], None] | None = None) -> list[PairsRow]:
    """Every (distribution, size, subject) row. ``progress(text, done)`` after each subject.

    An index is skipped at a size when its step time extrapolated from the smaller sizes
    (:func:`_predict`) exceeds ``step_budget_s``, and stops measuring at a size once a step
    takes longer than that. The peers are never skipped.
    """
    rows: list[PairsRow] = []
    subs = subjects(only)
    sizes = sorted(sizes)
    for dist in dists:
        seen: dict[str, list[tuple[int, float]]] = {}
        for n in sizes:
            wl = make_workload(dist, n, seed)
            truth: list[Truth] = []
            block: list[PairsRow] = []
            for label, factory in subs:
                tag = f"{dist} n={n:,} {label}"
                if label == "all-pairs" and n > ALL_PAIRS_MAX_N:
                    if progress:
                        progress(tag, 1)
                    continue
                hist = seen.setdefault(label, [])
                guess = _predict(hist, n)
                if label not in PEER_LABELS and guess > step_budget_s * 1e3:
                    r = PairsRow(dist, n, label, exact="skipped", error="skipped",
                                 note=f"skipped: ~{guess / 1e3:.0f} s a step predicted (from "
                                 f"{hist[-1][1]:.0f} ms at n={hist[-1][0]:,})")
                    block.append(r)
                    hist.append((n, guess))
                    if progress:
                        progress(tag + " skipped", 1)
                    continue
                if label == "sweep":  # the reference: at least 3 measured steps
                    r = run_subject(wl, label, factory, steps, None, budget_s, keep=truth,
                                    min_steps=min(3, steps))
                elif label in PEER_LABELS:
                    r = run_subject(wl, label, factory, steps, truth, budget_s)
                else:
                    r = run_subject(wl, label, factory, steps, truth, budget_s, step_budget_s)
                r.extra["side"] = wl.side
                block.append(r)
                if r.ok:
                    hist.append((n, r.step_ms))
                if progress:
                    progress(tag + (f" {r.step_ms:.1f} ms/step" if r.ok else " FAILED"), 1)
            peers = [r for r in block if r.subject in PEER_LABELS and r.ok]
            best = min(peers, key=lambda r: r.step_ms) if peers else None
            for r in block:
                r.extra["best_peer"] = best.subject if best else ""
                if best and r.ok and r.step_ms > 0:
                    r.x_peer = best.step_ms / r.step_ms
            rows.extend(block)
            del wl, truth
            gc.collect()
    return rows


def _predict(hist: list[tuple[int, float]], n: int) -> float:
    """Step ms at ``n`` extrapolated from (n, ms) at smaller sizes: the growth exponent of the
    last two sizes (at least 1), or linear growth from one size; 0 without history."""
    if not hist:
        return 0.0
    n1, t1 = hist[-1]
    p = 1.0
    if len(hist) >= 2:
        n0, t0 = hist[-2]
        if t0 > 0 and t1 > 0 and n1 > n0:
            p = max(1.0, math.log(t1 / t0) / math.log(n1 / n0))
    return t1 * (n / n1) ** p


def units(dists: list[str], sizes: list[int], only: list[str] | None) -> int:
    """How many progress units :func:`run` reports."""
    return len(dists) * len(sizes) * len(subjects(only))


# ----------------------------------------------------------------- reporting

HEADERS = ["distribution", "n", "subject", "build s", "update ms", "pairs ms", "step ms",
           "x faster peer", "pairs (step 1)", "steps", "exact", "note"]


def table_rows(rows: list[PairsRow]) -> list[list]:
    out = []
    for r in rows:
        if r.error:
            note = r.note or ("FAILED: " + r.error[:60])
            out.append([r.dist, r.n, r.subject, "-", "-", "-", "-", "-", "-", "-", r.exact, note])
            continue
        out.append([r.dist, r.n, r.subject, r.build_s, r.update_ms, r.pairs_ms, r.step_ms,
                    r.x_peer, r.pairs, r.steps, r.exact, r.note])
    return out


def csv_rows(rows: list[PairsRow]) -> tuple[list[str], list[list]]:
    headers = ["distribution", "n", "subject", "side", "build_s", "update_ms", "pairs_ms",
               "step_ms", "x_faster_peer", "best_peer", "pairs", "steps", "exact", "note",
               "error"]
    return headers, [[r.dist, r.n, r.subject, r.extra.get("side", ""), r.build_s, r.update_ms,
                      r.pairs_ms, r.step_ms, r.x_peer, r.extra.get("best_peer", ""), r.pairs,
                      r.steps, r.exact, r.note, r.error] for r in rows]


def goal_lines(rows: list[PairsRow], goal_sizes: tuple[int, ...] = (100_000, 1_000_000)
               ) -> list[str]:
    """Issue 14's goal per distribution and size: does the best index beat the faster peer?"""
    out = []
    for dist in dict.fromkeys(r.dist for r in rows):
        for n in sorted({r.n for r in rows if r.dist == dist}):
            block = [r for r in rows if r.dist == dist and r.n == n]
            idx = [r for r in block if r.subject not in PEER_LABELS and r.ok
                   and not math.isnan(r.x_peer)]
            peer = next((r.extra.get("best_peer") for r in block if r.extra.get("best_peer")),
                        "")
            judged = n in goal_sizes
            if not idx:
                out.append(f"{dist} n={n:,}: no index measured")
                continue
            best = max(idx, key=lambda r: r.x_peer)
            exact = "" if best.exact == "yes" else f" (exact: {best.exact})"
            verdict = ""
            if judged:
                verdict = " -> " + ("PASS" if best.x_peer > 1.0 and best.exact == "yes"
                                    else "MISS")
            out.append(f"{dist} n={n:,}: best index {best.subject} {best.step_ms:.1f} ms/step, "
                       f"{best.x_peer:.2f}x the faster peer ({peer}){exact}{verdict}")
    return out


#: Issue 25's goals for the trees' collision broad-phase: every tree within 2x of the faster
#: peer (no step of seconds), and the best index ahead of it by 1.5x.
TREE_WITHIN = 0.5
BEST_AHEAD = 1.5


def tree_goal_lines(rows: list[PairsRow], goal_sizes: tuple[int, ...] = (100_000, 1_000_000)
                    ) -> list[str]:
    """Issue 25's goals per distribution at each goal size measured: the slowest of the
    paper's trees against ``TREE_WITHIN`` and the best index against ``BEST_AHEAD`` (both as
    the faster peer's step time over theirs, exact answers only)."""
    from app.spatial import TREE_HEURISTICS

    out = []
    for dist in dict.fromkeys(r.dist for r in rows):
        for n in sorted({r.n for r in rows if r.dist == dist} & set(goal_sizes)):
            block = [r for r in rows if r.dist == dist and r.n == n
                     and r.subject not in PEER_LABELS]
            trees = [r for r in block if r.subject.split("/")[0] in TREE_HEURISTICS]
            good = [r for r in block if r.ok and r.exact == "yes" and not math.isnan(r.x_peer)]
            if not block:
                out.append(f"{dist} n={n:,}: not measured")
                continue
            parts = []
            if trees:
                # A tree that failed or answered wrongly counts as the slowest, at NaN (a MISS).
                slow = min(trees, key=lambda r: r.x_peer if r in good else -1.0)
                slow_x = slow.x_peer if slow in good else math.nan
                parts.append(f"slowest tree {slow.subject} {slow_x:.2f}x -> "
                             f"{'PASS' if slow_x >= TREE_WITHIN else 'MISS'} "
                             f"(>= {TREE_WITHIN:g}x)")
            else:
                parts.append("no tree measured (--only)")
            if good:
                best = max(good, key=lambda r: r.x_peer)
                parts.append(f"best index {best.subject} {best.x_peer:.2f}x -> "
                             f"{'PASS' if best.x_peer >= BEST_AHEAD else 'MISS'} "
                             f"(>= {BEST_AHEAD:g}x)")
            else:
                parts.append("best index: none answered exactly -> MISS")
            out.append(f"{dist} n={n:,}: " + "; ".join(parts))
    return out


def plot(rows: list[PairsRow], out_dir: str | Path) -> list[Path]:
    """One log-log PNG per distribution: step time against n, every subject."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    cmap = plt.get_cmap("tab20")
    labels = list(dict.fromkeys(r.subject for r in rows if r.subject not in PEER_LABELS))
    for dist in dict.fromkeys(r.dist for r in rows):
        fig, ax = plt.subplots(figsize=(8.5, 5.5))
        for label in list(PEER_LABELS) + labels:
            pts = sorted((r.n, r.step_ms) for r in rows if r.dist == dist
                         and r.subject == label and r.ok)
            if not pts:
                continue
            x, y = zip(*pts, strict=True)
            if label in PEER_LABELS:
                style = {"sweep": ("k", "--", "s"), "sweep-mt": ("k", "-", "s"),
                         "all-pairs": ("0.5", ":", "x")}[label]
                ax.plot(x, y, color=style[0], linestyle=style[1], marker=style[2], lw=2.2,
                        label=f"{label} (peer)")
            else:
                i = labels.index(label)
                ax.plot(x, y, color=cmap(i % 20), marker="o", ms=4, lw=1.2, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("objects n")
        ax.set_ylabel("step time (update + query_pairs), ms")
        ax.set_title(f"collision broad-phase, {dist}: every object moves every step")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        path = out_dir / f"pairs_{dist}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


__all__ = ["DISTRIBUTIONS", "FULL_SIZES", "PairsRow", "PairsWorkload", "compare",
           "make_workload", "plot", "run", "truth_of"]
