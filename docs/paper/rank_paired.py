"""The paper's heuristics ranked side by side: the measurement behind the section "The claims
again, on contiguous storage (issue 25)" of report.md.

Every heuristic x mode (ours, paper) x leafiness is built on the same data in one process and
timed in turns, the order rotating each cycle, so that load from other programs falls on all
16 trees alike (as the paired part of ``bench paper``, which pairs modes, not heuristics).
Protocol as ``app.bench.paper``: chapter 4 (side n^(1/3), a random 10^3 box) or chapter 3
(uniform, side 3 n^(1/3), a 100^3 box), then per cycle a timed ``query_box`` and a timed
``update`` of 1,000 random objects moved 1x their radius. The tree is split fully first, as
the bench does it (``app.bench.paper.split_fully``: whole-volume queries and the upkeep in
turn until nothing is left; the report's runs used a frustum-query loop of their own, which
builds the same trees: node counts and depths checked equal at 10^5).

    PYTHONPATH=. .venv/bin/python docs/paper/rank_paired.py measure ch4 clustered 1e6 40 out.json
    python docs/paper/rank_paired.py summary out.json [more.json ...]
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

HEURISTICS = ("kd", "ternary", "octree", "icoseptree")
SHORT = {"kd": "K", "ternary": "T", "octree": "O", "icoseptree": "I"}
MODES = ("ours", "paper")
LEAFINESS = ("non-leafy", "leafy")


def build(h: str, mode: str, leafy: bool, threshold: int | None, data) -> tuple[object, dict]:
    """One tree on the task's objects, split fully; (tree, its build figures)."""
    from app.bench.paper import _warm, split_fully
    from app.spatial import create_index

    kw = {"leafy": leafy, "mode": mode}
    if threshold:
        kw["split_threshold"] = threshold
    factory = lambda: create_index(h, **kw)  # noqa: E731
    _warm(factory)
    idx = factory()
    _, centers, radii, ids, lo, hi = data
    t0 = time.process_time()
    idx.insert(ids, centers, radii)
    t1 = time.process_time()
    split_fully(idx, lo, hi)
    t2 = time.process_time()
    st = idx.stats()
    return idx, {"build_ms": (t1 - t0) * 1e3, "split_ms": (t2 - t1) * 1e3,
                 "max_depth": int(st["max_depth"]), "nodes": int(st["nodes"]),
                 "threshold": threshold}


def measure(proto: str, dist: str, n: int, cycles: int, thresholds: dict[str, int]) -> dict:
    """Build the 16 trees, then time ``cycles`` of query and moves in turns."""
    from app.bench.paper import _data_set, paired_cycles
    from app.bench.workloads import box_planes

    side, qb, part = ((n ** (1 / 3), 10.0, "dist") if proto == "ch4"
                      else (3.0 * n ** (1 / 3), 100.0, "leafy"))
    data = _data_set({"part": part, "dist": dist, "n": n, "side": side})
    rng, _, radii = data[0], data[1], data[2]
    trees, info = {}, {}
    for h in HEURISTICS:
        for mode in MODES:
            for leaf in LEAFINESS:
                label = f"{h}/{mode}/{leaf}"
                trees[label], info[label] = build(h, mode, leaf == "leafy",
                                                  thresholds.get(label), data)
    ws = {k: [] for k in trees}
    visible = []

    def record(lo, hi, truth) -> None:  # the checked cycles: visible count, working sets
        visible.append(int(truth.shape[0]))
        for k in trees:
            ws[k].append(int(trees[k].query_frustum(box_planes(lo, hi)).working_set))

    q, m, exact = paired_cycles(trees, rng, data[1].copy(), radii, side, qb, cycles,
                                time.process_time, on_check=record)
    return {"proto": proto, "dist": dist, "n": n, "cycles": cycles, "info": info, "q": q,
            "m": m, "ws": ws, "visible": visible, "exact": exact}


def _times(r: dict, label: str, key: str) -> np.ndarray:
    if key == "cycle":
        return np.add(r["q"][label], r["m"][label])
    return np.asarray(r["q" if key == "query" else "m"][label])


def ranking(r: dict, mode: str, leaf: str, key: str) -> str:
    """The four heuristics fastest first by median ms; between neighbours, the share of
    cycles in which the faster one was faster on that very cycle."""
    t = {h: _times(r, f"{h}/{mode}/{leaf}", key) for h in HEURISTICS}
    order = sorted(HEURISTICS, key=lambda h: np.median(t[h]))
    parts = [f"{SHORT[h]} {np.median(t[h]) * 1e3:.2f}" for h in order]
    wins = [f" <{np.mean(t[a] < t[b]) * 100:.0f}% " for a, b in zip(order, order[1:], strict=False)]
    return parts[0] + "".join(w + p for w, p in zip(wins, parts[1:], strict=True))


def leafy_ratio(r: dict, mode: str, key: str) -> str:
    """Per heuristic: median over cycles of leafy / non-leafy time, and the share of cycles
    in which leafy was faster."""
    out = []
    for h in HEURISTICS:
        rat = (_times(r, f"{h}/{mode}/leafy", key)
               / np.maximum(_times(r, f"{h}/{mode}/non-leafy", key), 1e-9))
        out.append(f"{SHORT[h]} {np.median(rat):.2f} ({np.mean(rat < 1) * 100:.0f}%)")
    return ", ".join(out)


def summary(r: dict) -> str:
    lines = [f"== {r['proto']} {r['dist']} n={r['n']} cycles={r['cycles']} "
             f"exact={all(r['exact'].values())}"]
    for mode in MODES:
        for leaf in LEAFINESS:
            for key in ("query", "cycle"):
                lines.append(f"  {mode:5s} {leaf:9s} {key}: {ranking(r, mode, leaf, key)}")
            lines.append("        depth/nodes: " + ", ".join(
                f"{SHORT[h]} {r['info'][f'{h}/{mode}/{leaf}']['max_depth']}"
                f"/{r['info'][f'{h}/{mode}/{leaf}']['nodes']}" for h in HEURISTICS))
        for key in ("query", "move", "cycle"):
            lines.append(f"  {mode:5s} leafy/non-leafy {key}: {leafy_ratio(r, mode, key)}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["measure"] and len(argv) in (6, 7):
        proto, dist, n, cycles, out = argv[1], argv[2], int(float(argv[3])), int(argv[4]), argv[5]
        thresholds = json.loads(argv[6]) if len(argv) == 7 else {}
        r = measure(proto, dist, n, cycles, thresholds)
        with open(out, "w") as fh:
            json.dump(r, fh)
        print(summary(r))
        return 0
    if argv[:1] == ["summary"] and len(argv) > 1:
        for path in argv[1:]:
            with open(path) as fh:
                print(summary(json.load(fh)))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
