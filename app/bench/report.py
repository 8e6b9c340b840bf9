"""Tables for the benchmarks: aligned text for the terminal, markdown, CSV."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def fmt(v, digits: int = 3) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if math.isinf(v):
            return "inf"
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 100:
            return f"{v:.1f}"
        if a >= 10:
            return f"{v:.2f}"
        return f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def text_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    cells = [[fmt(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    def line(vals):
        return "  ".join(v.ljust(w) if i == 0 or not _numeric(v) else v.rjust(w)
                         for i, (v, w) in enumerate(zip(vals, widths, strict=True))).rstrip()
    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _numeric(s: str) -> bool:
    s = s.replace(",", "").replace("x", "")
    try:
        float(s)
        return True
    except ValueError:
        return s in ("-", "inf")


def md_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    """Markdown table; a column is right-aligned when every cell in it is a number."""
    def numeric_col(i: int) -> bool:
        return i > 0 and all(_numeric(fmt(r[i])) for r in rows if i < len(r))

    out = ["| " + " | ".join(headers) + " |",
           "| " + " | ".join("---:" if numeric_col(i) else "---"
                             for i in range(len(headers))) + " |"]
    for r in rows:
        out.append("| " + " | ".join(fmt(c).replace("|", "/") for c in r) + " |")
    return "\n".join(out)


def write_csv(path: str | Path, headers: Sequence[str], rows: Sequence[Sequence]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(headers)
        for r in rows:
            w.writerow(r)


# ----------------------------------------------------------------- index bench

INDEX_HEADERS = ["pattern", "index", "update ms", "ns/object", "query ms", "frame ms", "p99 ms",
                 "x numpy", "x best brute", "floor x", "visible", "working set", "nodes",
                 "exact", "target"]
SUMMARY_HEADERS = ["index", "build s", "1st query ms", "worst pattern", "x best brute there",
                   "frame ms there", "p99 ms there", "median x (patterns)", "max p99/median",
                   "target", "note"]
REMOTE_HEADERS = ["index", "query ms (no cluster)", "query ms (cluster)", "growth",
                  "frame ms (cluster)", "x numpy", "visible", "working set", "exact", "target"]


def _short(s: str, n: int = 48) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


PEER_NAMES = ("numpy-brute", "numba-brute", "numba-brute-mt", "rtree")


def index_rows(rows, workload: str) -> list[list]:
    """The pattern x subject matrix of one workload, pattern by pattern (run order)."""
    out = []
    wr = [r for r in rows if r.workload == workload]
    for pat in dict.fromkeys(r.pattern for r in wr):
        for r in (r for r in wr if r.pattern == pat):
            if r.error and r.exact in ("skipped", "n/a"):
                out.append([r.pattern, r.subject, *["-"] * 11, _short(r.error, 72), r.exact])
                continue
            if r.error and not np.isfinite(r.frame_ms):
                out.append([r.pattern, r.subject, *["-"] * 11, "FAILED: " + _short(r.error),
                            "failed"])
                continue
            exact = r.exact if not r.error else f"{r.exact}: {_short(r.error)}"
            out.append([r.pattern, r.subject, r.update_ms, r.ns_per_object, r.query_ms,
                        r.frame_ms, r.p99_ms, r.x_numpy, r.x_numba, r.floor_x, r.visible,
                        r.working_set, r.nodes_visited, exact, _verdict(r)])
    return out


def _verdict(r) -> str:
    """PASS / MISS, with the ratio judged against where it is not the workload's target."""
    t = r.extra.get("target")
    if r.verdict in ("PASS", "MISS") and np.isfinite(r.target_x) and r.target_x != t:
        return f"{r.verdict} (>= {r.target_x:.1f}x: floor)"
    return r.verdict


def summary_rows(rows, workload: str) -> list[list]:
    """Per subject: its worst pattern, the ratio there, the median ratio across patterns."""
    from app.bench.index_bench import worst_patterns

    first = {}
    for r in rows:
        if r.workload == workload and r.subject not in first and np.isfinite(r.build_s):
            first[r.subject] = r
    out = []
    for d in worst_patterns(rows, workload):
        f = first.get(d["subject"])
        out.append([d["subject"], f.build_s if f else float("nan"),
                    f.first_query_ms if f else float("nan"), d["worst"], d["ratio"],
                    d["frame_ms"], d["p99_ms"], d["median"], d["stall"], d["verdict"],
                    _short(d["note"], 60)])
    return out


def remote_rows(rows) -> list[list]:
    """Remote's growth table: the fixed pattern with the cluster against without it."""
    out = []
    for r in rows:
        if r.workload != "remote" or r.pattern != "fixed":
            continue
        if r.error:
            out.append([r.subject, "-", "-", "-", "-", "-", "-", "-", _short(r.error),
                        r.exact if r.exact in ("skipped", "n/a") else "failed"])
            continue
        out.append([r.subject, r.base_query_ms, r.query_ms, r.growth, r.frame_ms, r.x_numpy,
                    r.visible, r.working_set, r.exact, r.verdict])
    return out


def index_summary(rows, workload: str) -> str:
    """The workload's target, judged on every index's worst pattern."""
    wr = [r for r in rows if r.workload == workload and not r.error]
    if not wr:
        return ""
    target = wr[0].extra.get("target")
    lines = []
    if workload == "remote":
        judged = [r for r in wr if r.pattern == "fixed" and r.verdict.startswith(("PASS", "MISS"))]
        g = wr[0].extra.get("growth_target")
        lines.append(f"target: query-time growth < {g:.2f}x for viewdist and the best tree "
                     "(fixed pattern; without the cluster: a twin instance given each frame "
                     "beside it): "
                     + ", ".join(f"{r.subject} {r.growth:.2f}x {r.verdict}" for r in judged))
    if target is None:
        return "\n".join(lines)
    from app.bench.index_bench import worst_patterns

    ws = [d for d in worst_patterns(rows, workload) if d["subject"] not in PEER_NAMES]
    brutes = sorted({r.extra.get("best_brute", "") for r in wr} - {""})
    brute = "/".join(brutes) or "compiled brute force"
    if not ws:
        lines.append(f"target >= {target:g}x the faster compiled brute force: no index ran")
        return "\n".join(lines)
    ok = [d for d in ws if np.isfinite(d["ratio"])]
    best = max(ok, key=lambda d: d["ratio"] / d["target"] if np.isfinite(d["target"])
               else d["ratio"]) if ok else None
    passing = [d["subject"] for d in ws if d["verdict"] == "PASS"]
    fresh = [r for r in wr if np.isfinite(r.target_x) and r.target_x != target]
    floor_note = ""
    if fresh:
        from app.bench.workloads import FLOOR_SLACK

        pats = ", ".join(dict.fromkeys(r.pattern for r in fresh))
        floor_note = (f" ({pats}: >= {fresh[0].target_x:.1f}x, the measured floor "
                      f"{fresh[0].floor_x:.1f}x / {FLOOR_SLACK:g}, at least "
                      f"{wr[0].extra.get('fresh_target', 0) or 0:g}x)")
    lines.append(
        f"target >= {target:g}x the faster compiled brute force ({brute}){floor_note} on "
        "every index's worst pattern (relative to its target): best "
        + (f"{best['subject']} {best['ratio']:.2f}x on {best['worst']} -> "
           f"{'PASS' if best['verdict'] == 'PASS' else 'MISS'}" if best else "none ran")
        + f"; passing: {', '.join(passing) if passing else 'none'}")
    return "\n".join(lines)


CSV_HEADERS = ["workload", "pattern", "index", "n", "build_s", "first_query_ms", "update_ms",
               "query_ms", "frame_ms", "p99_ms", "x_numpy", "x_numba", "visible",
               "working_set", "nodes_visited", "exact", "verdict", "base_query_ms", "growth",
               "error", "floor_x", "target_x", "ns_per_object"]


def index_csv_rows(rows) -> tuple[list[str], list[list]]:
    """(headers, rows) of the CSV: one line per workload x pattern x subject."""
    out = [[r.workload, r.pattern, r.subject, r.n, r.build_s, r.first_query_ms, r.update_ms,
            r.query_ms, r.frame_ms, r.p99_ms, r.x_numpy, r.x_numba, r.visible, r.working_set,
            r.nodes_visited, r.exact, r.verdict, r.base_query_ms, r.growth, r.error, r.floor_x,
            r.target_x, r.ns_per_object]
           for r in rows]
    return list(CSV_HEADERS), out
