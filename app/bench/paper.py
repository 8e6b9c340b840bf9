"""``python -m app bench paper``: Shagam's benchmark (chapters 3 and 4) with every index of the
project and the peers (numpy brute force, compiled brute force, rtree).

* ``sweep`` (figure 3.1), chapter 3 protocol: n spheres of radius 1-10 uniform in a cube
  3 n^(1/3) on a side; insert (build time); query the whole volume once (split time: lazy trees
  split fully); then cycles of: query a random 100^3 box, move 1,000 random objects in a random
  direction by a distance equal to their radius. Split threshold swept per heuristic and variant.
* ``leafy`` (figure 4.1): leafy against non-leafy, each at its best threshold of the sweep,
  chapter 3 protocol, several n.
* ``dist`` (figures 4.2-4.5), chapter 4 protocol: cube n^(1/3) on a side, 10^3 query box, the
  four distributions, n from 10^3 to 10^6: query time, move-1,000 time, split time, working set
  against visible set, maximum depth.
* ``ablate``: the paper's choices one at a time (issue 16), chapter 4 protocol: each heuristic
  (non-leafy, the paper's thresholds) in our mode, our mode plus one of appendix A's choices,
  the paper mode minus one of them, and the paper mode.
* ``paired``: query and move times of a few of those modes measured side by side in one
  process on the same data, boxes and moves, the trees taking turns every cycle, so that a
  busy machine slows them alike; ratios to our mode are medians of per-cycle ratios.

``--modes ours,paper`` runs the four trees in our mode and in the paper mode (appendix A's
choices, ``create_index(..., mode="paper")``), labelled ``kd/non-leafy`` and
``kd/paper/non-leafy``, in the sweep, leafy and dist parts.

Every run is one independent task (one subject on one data set), so ``--jobs N`` spreads them
over processes; all subjects of one point see the same objects, boxes and moves. Times are
process CPU time (``time.process_time``), like the paper's ``times()``, which also makes them
less sensitive to other programs on a shared machine; ratios to numpy brute force of the same
point are reported besides absolute times.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.workloads import DISTRIBUTIONS, box_planes, box_truth, paper_distributions

MOVES = 1000  # objects moved per cycle
MOVE_FACTOR = 1.0  # distance moved = MOVE_FACTOR x radius
PAPER_THRESHOLDS = {  # (leafy, non-leafy), Shagam chapter 3
    "kd": (35, 30), "ternary": (25, 20), "octree": (40, 30), "icoseptree": (70, 50),
}
HEURISTICS = ("kd", "ternary", "octree", "icoseptree")
# rtree's moves are Python-level delete + insert (about 0.5-5 ms each in a big tree), so it runs
# fewer cycles: its medians are over at most this many.
RTREE_MAX_CYCLES = 6
PEERS = ("numpy-brute", "numba-brute", "rtree")
#: The ablation's tree modes: ours, each of appendix A's choices added alone, the paper mode
#: without each of them, the paper mode (see app.spatial.aabbtree.heuristics.parse_mode).
FEATURES = ("split", "axis", "nonleafy", "lazy", "threshold")
ABLATION_MODES = (("ours",) + tuple(f"ours+{f}" for f in FEATURES)
                  + tuple(f"paper-{f}" for f in FEATURES) + ("paper",))
#: The modes the paired part times side by side (the first is the reference).
PAIRED_MODES = ("ours", "ours+split", "paper-lazy", "paper")
PAIRED_CYCLES = 60


@dataclass
class Config:
    sweep_n: list[int]
    thresholds: list[int]
    leafy_n: list[int]
    dist_n: list[int]
    cycles: int
    sweep_cycles: int
    ablate_n: list[int] = field(default_factory=list)
    ablate_dists: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=lambda: ["ours"])
    paired_cycles: int = PAIRED_CYCLES
    ablate_modes: tuple[str, ...] = ABLATION_MODES
    dist_subjects: list[str] = field(default_factory=list)  # filled at run time


FULL = Config(sweep_n=[10_000, 100_000],
              thresholds=[5, 10, 20, 30, 40, 50, 70, 100, 130],
              leafy_n=[1_000, 10_000, 100_000, 300_000],
              dist_n=[1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000],
              cycles=30, sweep_cycles=20, ablate_n=[100_000, 1_000_000],
              ablate_dists=["clustered", "uniform"])
QUICK = Config(sweep_n=[3_000], thresholds=[10, 50], leafy_n=[2_000],
               dist_n=[1_000, 8_000], cycles=4, sweep_cycles=4, ablate_n=[8_000],
               ablate_dists=["clustered"], paired_cycles=4,
               ablate_modes=("ours", "ours+split", "paper-split", "paper"))


# ----------------------------------------------------------------- one run

def _factory(label: str, name: str, kwargs: dict[str, Any]):
    if label in PEERS:
        from app.bench.baselines import PEERS as P

        return P[label]
    from app.spatial import create_index

    return lambda: create_index(name, **kwargs)


def _warm(factory) -> None:
    rng = np.random.default_rng(0)
    idx = factory()
    c = rng.random((200, 3)) * 30
    r = rng.uniform(1, 3, 200)
    ids = np.arange(200, dtype=np.int64)
    idx.insert(ids, c, r)
    idx.query_box(np.zeros(3), np.full(3, 30.0))
    idx.query_frustum(box_planes(np.zeros(3), np.full(3, 10.0)))
    idx.update(ids[:20], c[:20] + 1.0)
    idx.query_box(np.zeros(3), np.full(3, 10.0))
    idx.stats()


def split_fully(idx: Any, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The protocol's "query the whole volume once" that splits a lazy tree fully: in our
    mode the AABB tree's queries only note what to split and its upkeep splits it
    (``maintain``), one level per query of a box, so query and upkeep alternate until the
    upkeep has nothing left. Returns the whole-volume query's answer."""
    got = idx.query_box(lo, hi)
    maintain = getattr(idx, "maintain", None)
    while maintain is not None and maintain() > 0:
        got = idx.query_box(lo, hi)
    return got


def _data_set(task: dict[str, Any]) -> tuple[np.random.Generator, np.ndarray, np.ndarray,
                                              np.ndarray, np.ndarray, np.ndarray]:
    """A task's objects, the same for every subject and mode: (its generator after drawing
    them, centres, radii, ids, lo and hi of a box around every sphere)."""
    n = task["n"]
    seed = zlib.crc32(f"{task['part']}:{task['dist']}:{n}".encode())
    rng = np.random.default_rng(seed)
    centers = paper_distributions()[task["dist"]](n, task["side"], rng).astype(np.float64)
    radii = rng.uniform(1.0, 10.0, n)
    ids = np.arange(n, dtype=np.int64)
    lo_all = centers.min(axis=0) - radii.max() - 1.0
    hi_all = centers.max(axis=0) + radii.max() + 1.0
    return rng, centers, radii, ids, lo_all, hi_all


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """One subject on one data set: build, split, then ``cycles`` of box query + 1,000 moves."""
    out = dict(task)
    clock = time.process_time
    n = task["n"]
    side = task["side"]
    qb = task["box"]
    try:
        rng, centers, radii, ids, lo_all, hi_all = _data_set(task)
        factory = _factory(task["label"], task["name"], task["kwargs"])
        _warm(factory)
        idx = factory()
        t0 = clock()
        idx.insert(ids, centers, radii)
        out["build_ms"] = (clock() - t0) * 1e3
        t0 = clock()
        got = split_fully(idx, lo_all, hi_all)
        out["split_ms"] = (clock() - t0) * 1e3
        exact = got.shape[0] == n
        st = idx.stats()
        out["max_depth"] = int(st.get("max_depth", 0) or 0)
        out["nodes"] = int(st.get("nodes", 0) or 0)
        qts, mts, vis, ws, nv = [], [], [], [], []
        cur = centers.copy()
        cycles = task["cycles"]
        if task["label"] == "rtree":
            cycles = min(cycles, RTREE_MAX_CYCLES)
        out["cycles"] = cycles
        for c in range(cycles):
            lo = rng.uniform(0.0, max(side - qb, 0.0), 3)
            hi = lo + qb
            t0 = clock()
            got = idx.query_box(lo, hi)
            qts.append(clock() - t0)
            vis.append(got.shape[0])
            if task["working_set"]:
                res = idx.query_frustum(box_planes(lo, hi))
                ws.append(res.working_set)
                nv.append(res.nodes_visited)
            if c in (0, cycles - 1):
                truth = box_truth(cur, radii, lo, hi)
                exact &= np.array_equal(np.sort(got), truth)
            movers, newc = move_batch(rng, cur, radii)
            t0 = clock()
            idx.update(movers, newc)
            mts.append(clock() - t0)
            cur[movers] = newc
        out["query_ms"] = float(np.median(qts)) * 1e3
        out["move_ms"] = float(np.median(mts)) * 1e3
        out["cycle_ms"] = float(np.median(np.add(qts, mts))) * 1e3
        out["query_mean_ms"] = float(np.mean(qts)) * 1e3
        out["move_mean_ms"] = float(np.mean(mts)) * 1e3
        out["visible"] = float(np.mean(vis))
        out["working_set"] = float(np.mean(ws)) if ws else float("nan")
        out["nodes_visited"] = float(np.mean(nv)) if nv else float("nan")
        out["max_depth_end"] = int(idx.stats().get("max_depth", 0) or 0)
        out["exact"] = bool(exact)
        out["error"] = ""
    except Exception as exc:  # noqa: BLE001 - a failing index is reported, not fatal
        out["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        out["exact"] = False
    out.pop("kwargs", None)
    return out


def move_batch(rng: np.random.Generator, cur: np.ndarray,
               radii: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A cycle's moves: MOVES random objects (of those at ``cur``), each MOVE_FACTOR x its
    radius in a random direction; (their ids, their new centres)."""
    n = cur.shape[0]
    movers = rng.choice(n, min(MOVES, n), replace=False)
    d = rng.normal(size=(movers.shape[0], 3))
    d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    return movers, cur[movers] + d * (MOVE_FACTOR * radii[movers])[:, None]


def paired_cycles(trees: dict[str, Any], rng: np.random.Generator, cur: np.ndarray,
                  radii: np.ndarray, side: float, qb: float, cycles: int, clock,
                  on_check=None) -> tuple[dict[str, list[float]], dict[str, list[float]],
                                          dict[str, bool]]:
    """``cycles`` of a random ``qb`` box query and a :func:`move_batch` on every tree of
    ``trees`` (label -> index, all holding the objects at ``cur``, which follows the moves),
    timed in turns, the order rotating each cycle, so that load from other programs falls
    on all alike. Returns (query times, move times, exact) per label; the queries of the
    first and last cycles are checked against the brute force, and ``on_check(lo, hi,
    truth)`` is called then."""
    labels = list(trees)
    qts: dict[str, list[float]] = {k: [] for k in labels}
    mts: dict[str, list[float]] = {k: [] for k in labels}
    exact = dict.fromkeys(labels, True)
    for c in range(cycles):
        lo = rng.uniform(0.0, max(side - qb, 0.0), 3)
        hi = lo + qb
        order = labels[c % len(labels):] + labels[:c % len(labels)]
        truth = box_truth(cur, radii, lo, hi) if c in (0, cycles - 1) else None
        for k in order:
            t0 = clock()
            got = trees[k].query_box(lo, hi)
            qts[k].append(clock() - t0)
            if truth is not None:
                exact[k] &= bool(np.array_equal(np.sort(got), truth))
        if truth is not None and on_check is not None:
            on_check(lo, hi, truth)
        movers, newc = move_batch(rng, cur, radii)
        for k in order:
            t0 = clock()
            trees[k].update(movers, newc)
            mts[k].append(clock() - t0)
        cur[movers] = newc
    return qts, mts, exact


def run_paired(task: dict[str, Any]) -> dict[str, Any]:
    """One heuristic in several modes on one data set, timed in turns (see the module doc)."""
    out = dict(task)
    clock = time.process_time
    side = task["side"]
    qb = task["box"]
    modes = task["modes"]
    try:
        rng, centers, radii, ids, lo_all, hi_all = _data_set(task)
        trees = {}
        info: dict[str, dict[str, Any]] = {}
        for m in modes:
            factory = _factory(f"{task['name']}/{m}", task["name"], {**task["kwargs"], "mode": m})
            _warm(factory)
            idx = factory()
            idx.insert(ids, centers, radii)
            t0 = clock()
            split_fully(idx, lo_all, hi_all)
            info[m] = {"split_ms": (clock() - t0) * 1e3,
                       "max_depth": int(idx.stats()["max_depth"])}
            trees[m] = idx
        qts, mts, exact_of = paired_cycles(trees, rng, centers.copy(), radii, side, qb,
                                           task["cycles"], clock)
        exact = all(exact_of.values())
        ref = modes[0]
        for m in modes:
            q = np.asarray(qts[m])
            mv = np.asarray(mts[m])
            info[m].update({
                "query_ms": float(np.median(q)) * 1e3, "move_ms": float(np.median(mv)) * 1e3,
                "cycle_ms": float(np.median(q + mv)) * 1e3,
                "query_ratio": float(np.median(q / np.maximum(qts[ref], 1e-9))),
                "move_ratio": float(np.median(mv / np.maximum(mts[ref], 1e-9))),
                "cycle_ratio": float(np.median((q + mv) / np.maximum(
                    np.add(qts[ref], mts[ref]), 1e-9))),
            })
        out["paired"] = info
        out["exact"] = bool(exact)
        out["error"] = ""
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        out["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        out["exact"] = False
    out.pop("kwargs", None)
    return out


def expand_paired(rows: list[dict]) -> list[dict]:
    """One row per (heuristic, mode) out of each paired run's record."""
    out = []
    for r in rows:
        if r.get("part") != "paired":
            out.append(r)
            continue
        for m, vals in (r.get("paired") or {}).items():
            out.append({**{k: v for k, v in r.items() if k != "paired"},
                        "label": f"{r['name']}/{m}", "mode": m, **vals})
        if r.get("error"):
            out.append(r)
    return out


def _run_any(task: dict[str, Any]) -> dict[str, Any]:
    return run_paired(task) if task["part"] == "paired" else run_task(task)


# ----------------------------------------------------------------- task lists

def _variants(only: list[str] | None, modes=("ours",)) -> list[tuple[str, str, dict]]:
    from app.spatial import index_variants

    vs = index_variants(tuple(modes))
    if only:
        vs = [v for v in vs if any(v[0] == o or v[0].startswith(o + "/") for o in only)]
    return vs


def _task(part, label, name, kwargs, dist, n, side, box, cycles, working_set,
          threshold=None, leafy=None) -> dict[str, Any]:
    return {"part": part, "label": label, "name": name, "kwargs": kwargs, "dist": dist, "n": n,
            "side": side, "box": box, "cycles": cycles, "working_set": working_set,
            "threshold": threshold, "leafy": leafy,
            "mode": kwargs.get("mode", "ours") if name in HEURISTICS else ""}


def sweep_tasks(cfg: Config, only) -> list[dict]:
    tasks = []
    trees = [v for v in _variants(only, cfg.modes) if v[1] in HEURISTICS]
    for n in cfg.sweep_n:
        side = 3.0 * n ** (1 / 3)
        for p in ("numpy-brute", "numba-brute"):
            tasks.append(_task("sweep", p, p, {}, "uniform", n, side, 100.0, cfg.sweep_cycles,
                               False))
        for label, name, kw in trees:
            for t in cfg.thresholds:
                tasks.append(_task("sweep", label, name, {**kw, "split_threshold": t}, "uniform",
                                   n, side, 100.0, cfg.sweep_cycles, False, threshold=t,
                                   leafy=kw.get("leafy")))
    return tasks


def best_thresholds(rows: list[dict]) -> dict[str, int]:
    """label -> threshold with the smallest cycle time, summed over n after normalising each
    n by its best time (so that the largest n does not decide alone)."""
    out = {}
    by_label: dict[str, dict[int, dict[int, float]]] = {}
    for r in rows:
        if r["part"] != "sweep" or r.get("error") or r["threshold"] is None:
            continue
        by_label.setdefault(r["label"], {}).setdefault(r["n"], {})[r["threshold"]] = r["cycle_ms"]
    for label, per_n in by_label.items():
        score: dict[int, float] = {}
        for _n, times in per_n.items():
            best = min(times.values())
            for t, v in times.items():
                score[t] = score.get(t, 0.0) + v / best
        common = [t for t in score if all(t in per_n[n] for n in per_n)]
        out[label] = min(common, key=lambda t: score[t]) if common else None
    return out


def leafy_tasks(cfg: Config, only, best: dict[str, int]) -> list[dict]:
    tasks = []
    trees = [v for v in _variants(only, cfg.modes) if v[1] in HEURISTICS]
    for n in cfg.leafy_n:
        side = 3.0 * n ** (1 / 3)
        for p in ("numpy-brute", "numba-brute"):
            tasks.append(_task("leafy", p, p, {}, "uniform", n, side, 100.0, cfg.cycles, True))
        for label, name, kw in trees:
            t = best.get(label)
            if t is None:
                t = PAPER_THRESHOLDS[name][0 if kw.get("leafy") else 1]
            tasks.append(_task("leafy", label, name, {**kw, "split_threshold": t}, "uniform", n,
                               side, 100.0, cfg.cycles, True, threshold=t, leafy=kw.get("leafy")))
    return tasks


def dist_subjects(only, modes=("ours",)) -> list[tuple[str, str, dict]]:
    """Peers, the four heuristics (non-leafy, the paper's defaults) in every mode, every other
    index."""
    subs: list[tuple[str, str, dict]] = []
    try:
        import rtree  # noqa: F401

        peers = PEERS
    except ImportError:
        peers = PEERS[:2]
    subs += [(p, p, {}) for p in peers]
    for label, name, kw in _variants(None, modes):
        if name in HEURISTICS and kw.get("leafy"):
            continue
        subs.append((label, name, kw))
    if only:
        subs = [s for s in subs if s[0] == "numpy-brute" or any(
            s[0] == o or s[0].startswith(o + "/") for o in only)]
    return subs


def dist_tasks(cfg: Config, only, max_n: int | None) -> list[dict]:
    tasks = []
    for dist in DISTRIBUTIONS:
        for n in cfg.dist_n:
            if max_n and n > max_n:
                continue
            side = n ** (1 / 3)
            for label, name, kw in dist_subjects(only, cfg.modes):
                tasks.append(_task("dist", label, name, kw, dist, n, side, 10.0, cfg.cycles,
                                   True, leafy=kw.get("leafy")))
    return tasks


def ablate_tasks(cfg: Config, only) -> list[dict]:
    """Each heuristic (non-leafy, the paper's threshold) in every ablation mode; numpy brute
    force as the yardstick of each point."""
    tasks = []
    heur = [h for h in HEURISTICS if not only or any(o == h or o.startswith(h + "/")
                                                     for o in only)]
    for dist in cfg.ablate_dists:
        for n in cfg.ablate_n:
            side = n ** (1 / 3)
            tasks.append(_task("ablate", "numpy-brute", "numpy-brute", {}, dist, n, side, 10.0,
                               cfg.cycles, True))
            for h in heur:
                for mode in cfg.ablate_modes:
                    tasks.append(_task("ablate", f"{h}/{mode}", h,
                                       {"leafy": False, "mode": mode}, dist, n, side, 10.0,
                                       cfg.cycles, True, leafy=False))
    return tasks


def paired_tasks(cfg: Config, only) -> list[dict]:
    """Each heuristic at the largest ablation n of every ablation distribution."""
    tasks = []
    heur = [h for h in HEURISTICS if not only or any(o == h or o.startswith(h + "/")
                                                     for o in only)]
    n = max(cfg.ablate_n) if cfg.ablate_n else 0
    for dist in cfg.ablate_dists:
        for h in heur:
            t = _task("paired", f"{h}/paired", h, {"leafy": False}, dist, n, n ** (1 / 3),
                      10.0, cfg.paired_cycles, False, leafy=False)
            t["modes"] = list(PAIRED_MODES)
            tasks.append(t)
    return tasks


# ----------------------------------------------------------------- running

def _cost(t: dict) -> float:
    c = t["n"] * (1.0 + 0.05 * t["cycles"])
    if t["label"] == "rtree":
        c *= 3
    if t["part"] == "paired":
        c *= len(t["modes"])
    return c


def _key(t: dict) -> str:
    return json.dumps({k: t[k] for k in ("part", "label", "kwargs", "dist", "n", "cycles",
                                         "modes") if k in t}, sort_keys=True, default=str)


def run_tasks(tasks: list[dict], jobs: int, desc: str, cache: Path | None = None) -> list[dict]:
    """Run the tasks (longest first); results already in ``cache`` (a JSON-lines file of an
    interrupted run with the same settings) are reused, new ones appended to it."""
    from tqdm import tqdm

    out = []
    done: dict[str, dict] = {}
    if cache is not None and cache.exists():
        for line in cache.read_text().splitlines():
            try:
                rec = json.loads(line)
                done[rec.pop("_key")] = rec
            except (ValueError, KeyError):
                continue
    todo = []
    for t in tasks:
        k = _key(t)
        if k in done and not done[k].get("error"):
            out.append({**done[k], "reused": True})
        else:
            todo.append(t)
    tasks = sorted(todo, key=_cost, reverse=True)  # longest first: better packing
    fh = cache.open("a") if cache is not None else None

    def keep(t: dict, r: dict) -> None:
        out.append(r)
        if fh is not None:
            fh.write(json.dumps({**r, "_key": _key(t)}, default=str) + "\n")
            fh.flush()

    bar = tqdm(total=len(tasks), desc=desc, file=sys.stderr, dynamic_ncols=True,
               mininterval=0.5)
    if jobs <= 1:
        for t in tasks:
            keep(t, _run_any(t))
            bar.update(1)
    else:
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
            futs = {ex.submit(_run_any, t): t for t in tasks}
            for f in as_completed(futs):
                keep(futs[f], f.result())
                bar.update(1)
    bar.close()
    if fh is not None:
        fh.close()
    return out


def _load() -> str:
    """The machine's load averages (1, 5, 15 min) at the end of the run, for the report."""
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def run_paper(args) -> int:
    from app.bench.paper_report import write_outputs

    cfg = QUICK if args.quick else FULL
    modes = [m.strip() for m in getattr(args, "modes", "ours,paper").split(",") if m.strip()]
    bad = [m for m in modes if m not in ("ours", "paper")]
    if bad or not modes:
        print(f"bench paper: --modes takes ours and/or paper, got {getattr(args, 'modes', '')!r}",
              file=sys.stderr)
        return 2
    cfg.modes = modes
    load_start = _load()
    if args.cycles:
        cfg.cycles = args.cycles
        cfg.sweep_cycles = args.cycles
        cfg.paired_cycles = 2 * args.cycles
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    only = [o.strip() for o in args.only.split(",") if o.strip()] or None
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = max(1, int(args.jobs))
    cache = None if args.no_resume else out_dir / ".runs.jsonl"
    if cache is not None and args.fresh and cache.exists():
        cache.unlink()
    t_start = time.perf_counter()
    rows: list[dict] = []
    best: dict[str, int] = {}
    if "sweep" in parts:
        rows += run_tasks(sweep_tasks(cfg, only), jobs, "sweep (fig 3.1)", cache)
        best = best_thresholds(rows)
    later = []
    if "leafy" in parts:
        later += leafy_tasks(cfg, only, best)
    if "dist" in parts:
        later += dist_tasks(cfg, only, args.max_n)
    if "ablate" in parts:
        later += ablate_tasks(cfg, only)
    if "paired" in parts:
        later += paired_tasks(cfg, only)
    if later:
        rows += run_tasks(later, jobs, "leafy + distributions", cache)
    rows = expand_paired(rows)
    elapsed = time.perf_counter() - t_start
    meta = {"quick": bool(args.quick), "jobs": jobs, "elapsed_s": elapsed, "cfg": cfg,
            "load_start": load_start, "load_end": _load(),
            "reused": sum(1 for r in rows if r.get("reused")), "runs": len(rows),
            "best": best, "cpu": os.cpu_count(), "moves": MOVES, "move_factor": MOVE_FACTOR}
    report = write_outputs(rows, out_dir, meta)
    failed = [r for r in rows if r.get("error")]
    seen = set()
    for r in failed:
        if (r["label"], r["error"]) not in seen:
            seen.add((r["label"], r["error"]))
            print(f"failed: {r['label']} ({r['part']}, n={r['n']}): {r['error']}",
                  file=sys.stderr)
    print(report)
    print(f"\nwrote {out_dir}/ ({elapsed:.0f} s)")
    return 0
