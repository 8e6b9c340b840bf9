"""``python -m app bench {index,paper,occlusion,pairs,nested}``."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from app.suggest import with_hint


def _threshold_option(text: str) -> int | None:
    """An argparse type: ``paper`` (None), ``storage`` or an integer split threshold."""
    from app.scene.schema import MAX_SPLIT_THRESHOLD  # (numba: only when given)
    from app.spatial.aabbtree.heuristics import named_threshold

    try:
        return named_threshold(text, MAX_SPLIT_THRESHOLD)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="BENCH")
    p = sub.add_parser("index", help="per-frame cost of every index against brute force",
                       description="Build time and per-frame update + query_frustum time of "
                       "every index variant and of the peers (numpy brute force, compiled brute "
                       "force on one and on every core, rtree), on the static, moving, viewdist, "
                       "remote and world workloads, each under several motion patterns on the "
                       "same index (median and p99 frame per pattern, each index's worst "
                       "pattern); ratios are against the faster compiled brute force of the "
                       "same pattern.")
    p.add_argument("--quick", action="store_true",
                   help="1/50 of the objects and 3 frames: a smoke test (well under a minute)")
    p.add_argument("--only", default="", help="comma-separated index names or labels "
                   "(kd, kd/leafy, grid, rtree ...); numpy-brute always runs")
    p.add_argument("--workloads", default="static,moving,viewdist,remote,world",
                   help="comma-separated subset of static,moving,viewdist,remote,world")
    p.add_argument("--patterns", default="",
                   help="comma-separated motion patterns, run in this order on one index: "
                   "fixed,order,churn10,churn100,sizes,turn,fly,teleport,spawn (default all)")
    p.add_argument("--frames", type=int, default=None,
                   help="measured frames per pattern, after a warm-up frame (default 20, 3 "
                   "with --quick)")
    p.add_argument("--scale", type=float, default=None,
                   help="fraction of the full object counts (default 1, 0.02 with --quick)")
    p.add_argument("--no-rtree", action="store_true", help="leave the rtree peer out")
    p.add_argument("--between", type=int, default=0, metavar="MB",
                   help="stream (read and write) this many MiB between two frames, untimed, as "
                        "a renderer's passes would: each frame then starts with the caches "
                        "others have used (default 0: frames back to back, the movers' lines "
                        "stay cached)")
    p.add_argument("--split-threshold", type=_threshold_option, default=None, metavar="T",
                   help="the trees' split threshold: paper (default: each heuristic's value "
                   "from the paper), storage (the value measured on the trees' contiguous "
                   "storage, docs/bench-index.md) or an integer")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every subject this many times, the subjects' order reversed "
                   "every other round, and give each cell the median of its rounds (default "
                   "1; 3 steadies the ratios on a machine whose speed drifts)")
    p.add_argument("--clock", choices=("cpu", "wall"), default="wall",
                   help="wall clock (default: what a frame costs, threads included) or process "
                   "CPU time (robust on a shared machine, but it adds up both cores' time)")
    p.add_argument("--csv", default=None, help="also write the rows to this CSV file")
    p.add_argument("--md", default=None, help="also write a markdown report to this file")
    p.add_argument("--quiet", action="store_true", help="no progress lines")

    q = sub.add_parser("paper", help="Shagam chapters 3 and 4: thresholds, leafy, distributions",
                       description="The paper's benchmark (chapter 3 threshold sweep, figure "
                       "4.1, chapter 4 distributions) with every index and the peers; writes "
                       "CSV, PNG plots and a markdown report.")
    q.add_argument("--quick", action="store_true", help="small n, few cycles: a smoke test")
    q.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    q.add_argument("--out", default="out/paper",
                   help="output folder (default out/paper; `--out docs/paper` refreshes the "
                   "committed report)")
    q.add_argument("--cycles", type=int, default=None, help="query+move cycles per run")
    q.add_argument("--only", default="", help="comma-separated index names or labels")
    q.add_argument("--parts", default="sweep,leafy,dist,ablate,paired",
                   help="comma-separated subset of sweep,leafy,dist,ablate,paired")
    q.add_argument("--modes", default="ours,paper",
                   help="tree modes: ours and/or paper (appendix A's choices); default both")
    q.add_argument("--fresh", action="store_true",
                   help="forget the results of an interrupted run in OUT/.runs.jsonl")
    q.add_argument("--no-resume", action="store_true",
                   help="neither reuse nor record per-run results in OUT/.runs.jsonl")
    q.add_argument("--max-n", type=int, default=None, help="largest n of the chapter 4 runs")

    o = sub.add_parser("occlusion", help="viewer frame time: occlusion modes vs frustum only",
                       description="Median frame time of headless viewer runs along a scene's "
                       "camera path with no culling / frustum only / previous / two-pass, "
                       "modes alternated in fresh processes, ratios per repetition.")
    o.add_argument("--scene", default="city", help="scene (default city)")
    o.add_argument("--modes", default="off,previous,two-pass",
                   help="comma-separated subset of none,off,previous,two-pass")
    o.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    o.add_argument("--frames", type=int, default=150, help="recorded frames per run")
    o.add_argument("--warmup", type=int, default=5, help="unrecorded frames first (default 5)")
    o.add_argument("--size", default="1280x720", help="framebuffer size (default 1280x720)")
    o.add_argument("--index", default=None, help="index (default: the scene's)")
    o.add_argument("--objects", type=int, default=None, help="rescale the scene's objects")
    o.add_argument("--no-hud", action="store_true", help="runs without the HUD text")
    o.add_argument("--md", default=None, help="also write the table as markdown to this file")
    o.add_argument("--quiet", action="store_true", help="no progress bar")

    c = sub.add_parser("pairs", help="collision broad-phase: query_pairs of every index vs "
                       "compiled sort-and-sweep", description="Per-step time (update of every "
                       "object + query_pairs) of every index variant and of the compiled "
                       "brute-force peers (sort-and-sweep on one and on every core; the O(n^2) "
                       "loop up to n=10,000), uniform and clustered, 10^4, 10^5 and 10^6 "
                       "objects of mixed radii all moving every step; every answer checked "
                       "against the sweep's, exactly, every step.")
    c.add_argument("--quick", action="store_true",
                   help="n = 1,000 and 4,000, 2 steps: a smoke test (well under a minute)")
    c.add_argument("--only", default="", help="comma-separated index names or labels (kd, "
                   "kd/leafy, grid ...); the peers always run")
    c.add_argument("--dists", default="uniform,clustered",
                   help="comma-separated subset of uniform,clustered")
    c.add_argument("--sizes", default=None,
                   help="comma-separated object counts (default 1e4,1e5,1e6; 1e3,4e3 with "
                   "--quick)")
    c.add_argument("--steps", type=int, default=None,
                   help="measured steps per run, after a warm-up step (default 10, 2 with "
                   "--quick); fewer when a run's time budget is spent")
    c.add_argument("--budget", type=float, default=None,
                   help="seconds of steps per run before it stops early (default 10)")
    c.add_argument("--step-budget", type=float, default=None,
                   help="an index whose step takes (or is predicted to take) longer than this "
                   "many seconds stops (or is skipped) at that size (default 10)")
    c.add_argument("--csv", default=None, help="also write the rows to this CSV file")
    c.add_argument("--md", default=None, help="also write a markdown report to this file")
    c.add_argument("--plots", default="out",
                   help="folder for the plots pairs_<distribution>.png (default out)")
    c.add_argument("--no-plots", action="store_true", help="write no plots")
    c.add_argument("--quiet", action="store_true", help="no progress bar")

    from app.bench.nested_cli import add_parser as add_nested  # nested: its own module

    add_nested(sub)


def run(args: argparse.Namespace) -> int:
    if args.bench == "index":
        return _run_index(args)
    if args.bench == "paper":
        from app.bench.paper import run_paper

        return run_paper(args)
    if args.bench == "occlusion":
        from app.bench.occlusion_frames import run_occlusion

        return run_occlusion(args)
    if args.bench == "pairs":
        return _run_pairs(args)
    if args.bench == "nested":
        from app.bench.nested_cli import run_cli

        return run_cli(args)
    print("usage: python -m app bench {index,paper,occlusion,pairs,nested} [--quick] ...  "
          "(see --help)")
    return 2


def _check_index_args(only: list[str] | None, scale: float, frames: int,
                      between: int = 0, rounds: int = 1) -> str | None:
    """A message for arguments that would make a run meaningless, or None."""
    from app.spatial import index_variants

    if not (scale > 0 and scale <= 1):
        return f"--scale must be in (0, 1], got {scale:g}"
    if frames < 1:
        return f"--frames must be >= 1, got {frames}"
    if not 0 <= between <= 4096:
        return f"--between must be 0..4096 MiB, got {between}"
    if not 1 <= rounds <= 20:
        return f"--rounds must be 1..20, got {rounds}"
    if only:
        known = {"numpy-brute", "numba-brute", "numba-brute-mt", "rtree"}
        for label, name, _ in index_variants():
            known.update((label, name))
        unknown = [o for o in only if o not in known]
        if unknown:
            return (with_hint(f"unknown index {', '.join(map(repr, unknown))}", unknown[0],
                              known) + f" (choose from {', '.join(sorted(known))})")
    return None


def _run_index(args: argparse.Namespace) -> int:
    from app.bench import report
    from app.bench.index_bench import run
    from app.bench.workloads import WORKLOADS

    scale = args.scale if args.scale is not None else (0.02 if args.quick else 1.0)
    frames = args.frames if args.frames is not None else (3 if args.quick else 20)
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in workloads:
        if w not in WORKLOADS:
            print(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}", file=sys.stderr)
            return 2
    from app.bench.workloads import PATTERNS

    patterns = [q.strip() for q in args.patterns.split(",") if q.strip()] or None
    for q in patterns or ():
        if q not in PATTERNS:
            print(f"bench index: unknown pattern {q!r}; choose from {', '.join(PATTERNS)}",
                  file=sys.stderr)
            return 2
    only = [o.strip() for o in args.only.split(",") if o.strip()] or None
    problem = _check_index_args(only, scale, frames, args.between, args.rounds)
    if problem:
        print(f"bench index: {problem}", file=sys.stderr)
        return 2
    if args.quick:
        print("bench index --quick: a smoke test at 1/50 of the objects; the targets (and the "
              "PASS/MISS verdicts) are meant for the full-size run", file=sys.stderr)
    t0 = time.perf_counter()
    rows = run(workloads, only, scale, frames, args.clock,
               progress=(lambda s: None) if args.quiet else
               (lambda s: print(s, file=sys.stderr, flush=True)),
               include_rtree=not args.no_rtree, budget_s=3.0 if args.quick else 20.0,
               patterns=patterns, between_mb=args.between, split_threshold=args.split_threshold,
               rounds=args.rounds)
    elapsed = time.perf_counter() - t0
    ran = ",".join(q for q in PATTERNS if q in (patterns or PATTERNS))
    head = (f"bench index: scale {scale:g}, {frames} measured frames per pattern (median and "
            f"p99, after a warm-up frame), patterns {ran}, "
            + (f"each cell the median of {args.rounds} rounds (the subjects' order reversed "
               "every other round), " if args.rounds > 1 else "")
            + (f"{args.between} MiB streamed between frames, " if args.between else "")
            + ("the trees at their default split thresholds (the paper's), "
               if args.split_threshold is None
               else f"the trees at split threshold {args.split_threshold}, ")
            + f"{args.clock} clock, load average {os.getloadavg()[0]:.1f}, {platform.node()} "
            f"{platform.processor() or ''}".rstrip())
    print(head)
    print("a frame = remove + insert + update (update ms) + query_frustum (query ms); x best "
          "brute = the faster compiled brute force's frame / this one's, same pattern")
    md = ["# `python -m app bench index` results\n", head + "\n"]
    for w in workloads:
        desc = next((r.extra.get("description", "") for r in rows if r.workload == w
                     and "description" in r.extra), "")
        print(f"\n== {w}: {desc}")
        md.append(f"\n## {w}\n\n{desc}\n")
        if w == "remote":
            print(report.text_table(report.REMOTE_HEADERS, report.remote_rows(rows)))
            md.append(report.md_table(report.REMOTE_HEADERS, report.remote_rows(rows)) + "\n")
        print(f"\n-- {w}: each index's worst pattern")
        md.append(f"\n### {w}: each index's worst pattern\n")
        print(report.text_table(report.SUMMARY_HEADERS, report.summary_rows(rows, w)))
        md.append(report.md_table(report.SUMMARY_HEADERS, report.summary_rows(rows, w)))
        s = report.index_summary(rows, w)
        if s:
            print(s)
            md.append("\n" + s + "\n")
        print(f"\n-- {w}: every pattern")
        md.append(f"\n### {w}: every pattern\n")
        print(report.text_table(report.INDEX_HEADERS, report.index_rows(rows, w)))
        md.append(report.md_table(report.INDEX_HEADERS, report.index_rows(rows, w)))
    print(f"\n({elapsed:.0f} s)")
    if args.csv:
        h, r = report.index_csv_rows(rows)
        report.write_csv(args.csv, h, r)
    if args.md:
        Path(args.md).parent.mkdir(parents=True, exist_ok=True)
        Path(args.md).write_text("\n".join(md) + "\n")
    seen = set()
    for r in rows:
        if (r.error and not r.error.startswith(("skipped", "n/a"))
                and (r.subject, r.error) not in seen):
            seen.add((r.subject, r.error))
            print(f"failed: {r.subject} ({r.workload}, {r.pattern}): {r.error}",
                  file=sys.stderr)
    short = [f"{r.workload}/{r.pattern}/{r.subject}" for r in rows if not r.error
             and r.extra.get("frames", frames) < frames]
    if short:
        print("measured fewer frames (time budget): " + ", ".join(short))
    return 0


def _parse_sizes(text: str) -> list[int] | str:
    """Object counts from '1e4,100000'; a message when one is not an integer >= 2."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            v = float(part)
        except ValueError:
            return f"--sizes: {part!r} is not a number"
        if not (v >= 2 and v == int(v) and v <= 1e8):
            return f"--sizes: {part!r} must be a whole number of objects in [2, 1e8]"
        out.append(int(v))
    return sorted(set(out)) or "--sizes: no object count given"


def _run_pairs(args: argparse.Namespace) -> int:
    from app.bench import pairs, report

    def fail(msg: str) -> int:
        print(f"bench pairs: {msg}", file=sys.stderr)
        return 2

    dists = [d.strip() for d in args.dists.split(",") if d.strip()]
    for d in dists:
        if d not in pairs.DISTRIBUTIONS:
            return fail(f"unknown distribution {d!r}; choose from "
                        f"{', '.join(pairs.DISTRIBUTIONS)}")
    if not dists:
        return fail("--dists: no distribution given")
    sizes = _parse_sizes(args.sizes) if args.sizes else list(
        pairs.QUICK_SIZES if args.quick else pairs.FULL_SIZES)
    if isinstance(sizes, str):
        return fail(sizes)
    steps = args.steps if args.steps is not None else (2 if args.quick else 10)
    if steps < 1:
        return fail(f"--steps must be >= 1, got {steps}")
    budget = args.budget if args.budget is not None else (3.0 if args.quick else 10.0)
    step_budget = args.step_budget if args.step_budget is not None else (
        3.0 if args.quick else 10.0)
    for name, v in (("--budget", budget), ("--step-budget", step_budget)):
        if not (v > 0 and v < float("inf")):
            return fail(f"{name} must be a positive number of seconds, got {v:g}")
    only = [o.strip() for o in args.only.split(",") if o.strip()] or None
    if only:
        known = pairs.known_labels()
        unknown = [o for o in only if o not in known]
        if unknown:
            return fail(with_hint(f"unknown index {', '.join(map(repr, unknown))}",
                                  unknown[0], known) + f" (choose from {', '.join(sorted(known))})")
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=pairs.units(dists, sizes, only), file=sys.stderr, unit="run",
                   dynamic_ncols=True, desc="bench pairs")

    def progress(text: str, done: int) -> None:
        if bar is not None:
            bar.set_postfix_str(text, refresh=False)
            bar.update(done)

    import numba

    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    try:
        rows = pairs.run(dists, sizes, only, steps, budget, step_budget, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - t0
    head = (f"bench pairs: {', '.join(dists)}; n = {', '.join(f'{n:,}' for n in sizes)}; "
            f"{steps} measured steps at most (median, after a warm-up step), wall clock; "
            f"{numba.get_num_threads()} threads, load average {load0:.1f} at the start and "
            f"{os.getloadavg()[0]:.1f} at the end; "
            f"{platform.node()} {platform.processor() or ''}".rstrip())
    print(head)
    print("each step: update(all ids) + query_pairs(); x faster peer = the faster compiled "
          "peer's step time / this one's (> 1: faster than the peer); exact = the sweep's "
          "pairs, as a set, every step")
    table = pairs.table_rows(rows)
    print(report.text_table(pairs.HEADERS, table))
    goals = pairs.goal_lines(rows)
    print("\ngoal (issue 14): the best index beats the faster compiled peer at 10^5 and 10^6:")
    for g in goals:
        print("  " + g)
    tree_goals = pairs.tree_goal_lines(rows) or [
        "judged at n = 100,000 and 1,000,000: neither measured here"]
    print("goal (issue 25): every tree within 2x of the faster peer, the best index 1.5x ahead:")
    for g in tree_goals:
        print("  " + g)
    print(f"\n({elapsed:.0f} s)")
    if args.csv:
        h, r = pairs.csv_rows(rows)
        report.write_csv(args.csv, h, r)
    if args.md:
        md = ["# `python -m app bench pairs` results\n", head + "\n",
              report.md_table(pairs.HEADERS, table), "\n## Goal\n",
              "The best index beats the faster compiled peer at 10^5 and 10^6:\n"]
        md += [f"- {g}" for g in goals]
        md += ["\nEvery tree within 2x of the faster peer, the best index 1.5x ahead:\n"]
        md += [f"- {g}" for g in tree_goals]
        Path(args.md).parent.mkdir(parents=True, exist_ok=True)
        Path(args.md).write_text("\n".join(md) + "\n")
    if not args.no_plots:
        for path in pairs.plot(rows, args.plots):
            print(f"plot: {path}")
    for r in rows:
        if r.error and r.error != "skipped":
            print(f"failed: {r.subject} ({r.dist}, n={r.n:,}): {r.error}", file=sys.stderr)
    return 0
