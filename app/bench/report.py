"""Tables for the benchmarks: aligned text for the terminal, markdown, CSV."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path


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

INDEX_HEADERS = ["index", "build s", "1st query ms", "update ms", "query ms", "frame ms",
                 "x numpy", "x best brute", "visible", "working set", "nodes", "exact", "target"]
REMOTE_HEADERS = ["index", "query ms (no cluster)", "query ms (cluster)", "growth",
                  "frame ms (cluster)", "x numpy", "visible", "working set", "exact", "target"]


def _short(s: str, n: int = 48) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


PEER_NAMES = ("numpy-brute", "numba-brute", "numba-brute-mt", "rtree")


def index_rows(rows, workload: str):
    out = []
    for r in rows:
        if r.workload != workload:
            continue
        if r.error:
            out.append([r.subject, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                        ("" if r.error.startswith("skipped") else "FAILED: ") + _short(r.error),
                        "skipped" if r.error.startswith("skipped") else "failed"])
            continue
        out.append([r.subject, r.build_s, r.first_query_ms, r.update_ms, r.query_ms,
                    r.frame_ms, r.x_numpy, r.x_numba, r.visible, r.working_set,
                    r.nodes_visited, r.exact, r.verdict])
    return out


def remote_rows(rows):
    out = []
    for r in rows:
        if r.workload != "remote":
            continue
        if r.error:
            out.append([r.subject, "-", "-", "-", "-", "-", "-", "-", "FAILED: " + _short(r.error),
                        "failed"])
            continue
        out.append([r.subject, r.base_query_ms, r.query_ms, r.growth, r.frame_ms, r.x_numpy,
                    r.visible, r.working_set, r.exact, r.verdict])
    return out


def index_summary(rows, workload: str) -> str:
    wr = [r for r in rows if r.workload == workload and not r.error]
    if not wr:
        return ""
    target = wr[0].extra.get("target")
    if workload == "remote":
        judged = [r for r in wr if r.verdict.startswith(("PASS", "MISS"))]
        g = wr[0].extra.get("growth_target")
        return (f"target: query-time growth < {g:.2f}x for viewdist and the best tree: "
                + ", ".join(f"{r.subject} {r.growth:.2f}x {r.verdict}" for r in judged))
    if target is None:
        return ""
    idx = [r for r in wr if r.subject not in PEER_NAMES]
    brute = wr[0].extra.get("best_brute", "") or "compiled brute force"
    if not idx:
        return f"target >= {target:g}x the faster compiled brute force: no index ran"
    best = max(idx, key=lambda r: r.x_numba)
    passing = [r.subject for r in idx if r.verdict == "PASS"]
    return (f"target >= {target:g}x the faster compiled brute force ({brute}): best "
            f"{best.subject} {best.x_numba:.2f}x -> {'PASS' if best.verdict == 'PASS' else 'MISS'}"
            f"; passing: {', '.join(passing) if passing else 'none'}")


def index_csv_rows(rows):
    headers = ["workload", "index", "n", "build_s", "first_query_ms", "update_ms", "query_ms",
               "frame_ms", "x_numpy", "x_numba", "visible", "working_set", "nodes_visited",
               "exact", "verdict", "base_query_ms", "growth", "error"]
    out = [[r.workload, r.subject, r.n, r.build_s, r.first_query_ms, r.update_ms, r.query_ms,
            r.frame_ms, r.x_numpy, r.x_numba, r.visible, r.working_set, r.nodes_visited,
            r.exact, r.verdict, r.base_query_ms, r.growth, r.error] for r in rows]
    return headers, out
