"""The ``nested`` subcommand of ``python -m app bench`` (issue 15): its arguments and its
report. The benchmark itself is ``app/bench/nested.py``, imported only when it runs (the
command line stays quick to start)."""

from __future__ import annotations

import time
from typing import Any


def add_parser(sub: Any) -> None:
    """The ``nested`` subcommand of ``python -m app bench``."""
    p = sub.add_parser("nested", help="nested index (groups turning) vs a flattened index and "
                       "compiled brute force", description="G groups of M objects, a fraction of "
                       "the groups turning every frame, some objects moving inside their groups: "
                       "per frame (transform/update + query) the nested index against the same "
                       "objects flattened into one world-space index and against compiled brute "
                       "force over world spheres; every answer checked against brute force.")
    p.add_argument("--quick", action="store_true",
                   help="20 x 300 and 60 x 300 objects, 3 frames: a smoke test")
    p.add_argument("--sizes", default=None,
                   help="comma-separated GROUPSxOBJECTS (default 100x1000,1000x1000)")
    p.add_argument("--turning", type=float, default=0.1,
                   help="fraction of the groups turning every frame (default 0.1)")
    p.add_argument("--sweep", action="store_true",
                   help="run the turning fractions 0.01,0.02,0.05,0.1,0.2,0.5,1 (the "
                   "cross-over) instead of --turning alone")
    p.add_argument("--fractions", default=None,
                   help="comma-separated turning fractions for --sweep")
    p.add_argument("--moving", type=float, default=0.01,
                   help="fraction of the objects moving inside their groups (default 0.01)")
    p.add_argument("--frames", type=int, default=None,
                   help="measured frames per fraction, after 5 unmeasured ones (default 10, 3 "
                   "quick)")
    p.add_argument("--flat", default="chunks",
                   help="comma-separated world-space indexes to flatten into (default chunks)")
    p.add_argument("--nested", default="brute,chunks-inner",
                   help="comma-separated nested variants: an index name (groups scanned inside "
                   "the descent below inner_min) or NAME-inner (every partly visible group "
                   "asked through its own index); default brute,chunks-inner")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall clock (default) or process CPU time (robust on a busy machine, "
                   "but it adds up both cores' time of numba-brute-mt)")
    p.add_argument("--csv", default=None, help="also write the rows to this CSV file")
    p.add_argument("--md", default=None, help="also write a markdown report to this file")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _parse_sizes(text: str) -> list[tuple[int, int]] | str:
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        g, _, m = part.lower().partition("x")
        try:
            G, M = int(g), int(m)
        except ValueError:
            return f"--sizes: {part!r} is not GROUPSxOBJECTS (e.g. 100x1000)"
        if not (1 <= G <= 100_000 and 1 <= M <= 10_000_000 and G * M <= 20_000_000):
            return f"--sizes: {part!r} out of range (groups 1-1e5, objects 1-1e7, product <= 2e7)"
        out.append((G, M))
    return out or "--sizes: no size given"


def _parse_fractions(text: str) -> list[float] | str:
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            v = float(part)
        except ValueError:
            return f"--fractions: {part!r} is not a number"
        if not (0 <= v <= 1):
            return f"--fractions: {part!r} must be in [0, 1]"
        out.append(v)
    return sorted(set(out), reverse=True) or "--fractions: none given"


def run_cli(args: Any) -> int:
    """``python -m app bench nested``: run, print the tables, the goal and the cross-over."""
    import platform
    import sys
    from pathlib import Path

    from app.bench import report
    from app.bench.nested import (
        FULL_SIZES,
        GOAL,
        HEADERS,
        QUICK_SIZES,
        QUICK_SWEEP,
        SWEEP,
        WARMUP,
        check_variants,
        crossover_lines,
        csv_rows,
        goal_lines,
        overhead_lines,
        run,
        table_rows,
    )

    def fail(msg: str) -> int:
        print(f"bench nested: {msg}", file=sys.stderr)
        return 2

    sizes = _parse_sizes(args.sizes) if args.sizes else list(
        QUICK_SIZES if args.quick else FULL_SIZES)
    if isinstance(sizes, str):
        return fail(sizes)
    if not (0 <= args.turning <= 1):
        return fail(f"--turning must be in [0, 1], got {args.turning:g}")
    if not (0 <= args.moving <= 1):
        return fail(f"--moving must be in [0, 1], got {args.moving:g}")
    if args.sweep:
        turnings = _parse_fractions(args.fractions) if args.fractions else list(
            reversed(QUICK_SWEEP if args.quick else SWEEP))
        if isinstance(turnings, str):
            return fail(turnings)
    else:
        turnings = [args.turning]
    frames = args.frames if args.frames is not None else (3 if args.quick else 10)
    if not (1 <= frames <= 10_000):
        return fail(f"--frames must be in [1, 10000], got {frames}")
    flat = [k.strip() for k in args.flat.split(",") if k.strip()]
    inner = [k.strip() for k in args.nested.split(",") if k.strip()]
    problem = check_variants(flat, inner) or (None if inner else "--nested: no variant given")
    if problem:
        return fail(problem)
    t0 = time.perf_counter()
    rows = run(sizes, turnings, args.moving, frames, flat, inner,
               progress=(lambda s: None) if args.quiet else
               (lambda s: print(s, file=sys.stderr, flush=True)), clock=args.clock)
    elapsed = time.perf_counter() - t0
    head = (f"bench nested: {args.moving:g} of the objects moving, turning "
            f"{', '.join(f'{t:g}' for t in turnings)}; {frames} measured frames per fraction "
            f"(median, after {WARMUP} warm-up frames), {args.clock} clock; {platform.node()} "
            f"{platform.processor() or ''}".rstrip())
    print(head)
    print("frame = update (set_transforms + update, or world centres + update) + query; "
          "x nested = frame / the best nested variant's frame; exact = numba-brute's ids")
    md = ["# `python -m app bench nested` results\n", head + "\n"]
    for G, M in sizes:
        title = f"{G:,} groups x {M:,} objects = {G * M:,}"
        print(f"\n== {title}")
        tbl = table_rows(rows, G, M)
        print(report.text_table(HEADERS, tbl))
        md += [f"\n## {title}\n", report.md_table(HEADERS, tbl)]
    goal_at = 0.1 if 0.1 in turnings else turnings[0]
    goals = goal_lines(rows, goal_at)
    cross = crossover_lines(rows)
    at = "" if goal_at == 0.1 else f" (0.1 not measured: shown at {goal_at:g})"
    print(f"\ngoal (issue 15): nested >= {GOAL:g}x the flattened index and >= {GOAL:g}x compiled "
          f"brute force at 10 % turning{at}:")
    for g in goals:
        print("  " + g)
    md += ["\n## Goal\n", f"nested >= {GOAL:g}x flattened and >= {GOAL:g}x compiled brute force "
           f"at 10 % turning{at}:\n"] + [f"- {g}" for g in goals]
    if cross:
        print("\ncross-over (peer frame / best nested frame, by turning fraction):")
        for c in cross:
            print("  " + c)
        md += ["\n## Cross-over\n"] + [f"- {c}" for c in cross]
    over = overhead_lines(rows)
    if over:
        print("\nper-group Python overhead of asking groups through their own index:")
        for o in over:
            print("  " + o)
        md += ["\n## Per-group overhead of the inner indexes\n"] + [f"- {o}" for o in over]
    print(f"\n({elapsed:.0f} s)")
    if args.csv:
        h, r = csv_rows(rows)
        report.write_csv(args.csv, h, r)
    if args.md:
        Path(args.md).parent.mkdir(parents=True, exist_ok=True)
        Path(args.md).write_text("\n".join(md) + "\n")
    for r in rows:
        if r.error:
            print(f"failed: {r.subject} ({r.G} x {r.M}, {r.turning:g}): {r.error}",
                  file=sys.stderr)
    return 0
