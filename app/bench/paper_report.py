"""Outputs of ``bench paper``: CSV files, PNG plots (matplotlib Agg) and a markdown report that
puts our results beside the paper's conclusions, point by point, for each tree mode (ours and
the paper's appendix A, labels ``kd/non-leafy`` and ``kd/paper/non-leafy``), and the ablation
of the paper's choices one at a time."""

from __future__ import annotations

import math
import platform
from pathlib import Path

import numpy as np

from app.bench.report import fmt, md_table, write_csv

COLUMNS = ["part", "label", "name", "mode", "leafy", "threshold", "dist", "n", "side", "box",
           "cycles",
           "build_ms", "split_ms", "query_ms", "move_ms", "cycle_ms", "query_mean_ms",
           "move_mean_ms", "visible", "working_set", "nodes_visited", "max_depth",
           "max_depth_end", "nodes", "exact", "error", "query_ratio", "move_ratio",
           "cycle_ratio"]
HEURISTICS = ("kd", "ternary", "octree", "icoseptree")
PAPER_THRESHOLDS = {"kd": (35, 30), "ternary": (25, 20), "octree": (40, 30),
                    "icoseptree": (70, 50)}
STYLE = {
    "numpy-brute": ("black", ":"), "numba-brute": ("dimgray", "--"), "rtree": ("tab:brown", "-."),
    "brute": ("silver", "--"),
    "kd": ("tab:blue", "-"), "ternary": ("tab:orange", "-"), "octree": ("tab:green", "-"),
    "icoseptree": ("tab:red", "-"), "fixed-octree": ("tab:purple", "-."),
    "grid": ("tab:olive", "-."), "viewdist": ("tab:cyan", "-."),
}


MODE_TAGS = {"ours": "", "paper": "/paper"}  # mode -> label infix of the tree variants


def _style(label: str):
    base = label.split("/")[0]
    color, ls = STYLE.get(base, ("tab:gray", "-"))
    if label.endswith("/leafy"):
        ls = "--"
    if "/paper/" in label:
        ls = ":" if label.endswith("/leafy") else "-."
    return color, ls


def _marker(label: str) -> str:
    return "x" if "/paper/" in label else "o"


def _modes(rows) -> list[str]:
    """The tree modes present in the rows, ours first."""
    got = {r.get("mode") or "ours" for r in rows if r.get("name") in HEURISTICS
           and r["part"] != "ablate"}
    return [m for m in ("ours", "paper") if m in got]


def _ok(rows, **kw):
    return [r for r in rows if not r.get("error") and all(r.get(k) == v for k, v in kw.items())]


def _series(rows, label, key, **kw):
    pts = sorted((r["n"], r[key]) for r in _ok(rows, label=label, **kw)
                 if r.get(key) is not None and not (isinstance(r[key], float)
                                                    and math.isnan(r[key])))
    return [p[0] for p in pts], [p[1] for p in pts]


def _labels(rows, part):
    seen = []
    for r in rows:
        if r["part"] == part and r["label"] not in seen:
            seen.append(r["label"])
    return seen


# ----------------------------------------------------------------- plots

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sweep(rows, path: Path) -> None:
    plt = _plt()
    modes = _modes([r for r in rows if r["part"] == "sweep"]) or ["ours"]
    fig, grid = plt.subplots(len(modes), 4, figsize=(17, 4.2 * len(modes)), sharey=False,
                             squeeze=False)
    ns = sorted({r["n"] for r in rows if r["part"] == "sweep"})
    markers = "osd^v"
    for row, mode in zip(grid, modes, strict=True):
        _plot_sweep_row(rows, row, ns, markers, mode)
    grid[0][0].legend(fontsize=7)
    fig.suptitle("Figure 3.1 — split-threshold sweep, chapter 3 protocol "
                 "(grey dashed: compiled brute force; one row per tree mode)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_sweep_row(rows, axes, ns, markers, mode) -> None:
    tag = MODE_TAGS[mode]
    for ax, h in zip(axes, HEURISTICS, strict=True):
        for k, n in enumerate(ns):
            for leafy in (True, False):
                pts = sorted((r["threshold"], r["cycle_ms"]) for r in _ok(rows, part="sweep", n=n)
                             if r["label"] == f"{h}{tag}/{'leafy' if leafy else 'non-leafy'}")
                if not pts:
                    continue
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=markers[k % 5],
                        ls="--" if leafy else "-", color="tab:blue" if leafy else "tab:red",
                        alpha=0.5 + 0.5 * k / max(1, len(ns) - 1), ms=4,
                        label=f"{'leafy' if leafy else 'non-leafy'} n={n:,}")
            for p, (c, ls) in (("numba-brute", STYLE["numba-brute"]),):
                nb = _ok(rows, part="sweep", n=n, label=p)
                if nb:
                    ax.axhline(nb[0]["cycle_ms"], color=c, ls=ls, lw=0.8)
        pl, pn = PAPER_THRESHOLDS[h]
        ax.axvline(pl, color="tab:blue", lw=0.6, alpha=0.4)
        ax.axvline(pn, color="tab:red", lw=0.6, alpha=0.4)
        ax.set_title(f"{h}, {mode} mode (paper: {pl} leafy / {pn} non-leafy)", fontsize=10)
        ax.set_xlabel("split threshold")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel(f"{mode} mode: ms per cycle\n(100³ query + 1,000 moves)")


def plot_leafy(rows, path: Path) -> None:
    plt = _plt()
    modes = _modes([r for r in rows if r["part"] == "leafy"]) or ["ours"]
    fig, axes = plt.subplots(1, len(modes) + 1, figsize=(6 * (len(modes) + 1), 4.5))
    ratio_ax = axes[-1]
    for ax, mode in zip(axes, modes, strict=False):
        tag = MODE_TAGS[mode]
        for h in HEURISTICS:
            for leafy in (True, False):
                label = f"{h}{tag}/{'leafy' if leafy else 'non-leafy'}"
                x, y = _series(rows, label, "cycle_ms", part="leafy")
                if x:
                    c, ls = _style(label)
                    thr = next((r["threshold"] for r in _ok(rows, part="leafy", label=label)),
                               "")
                    ax.plot(x, y, color=c, ls=ls, marker=_marker(label), ms=3,
                            label=f"{label} ({thr})")
            xl, yl = _series(rows, f"{h}{tag}/leafy", "cycle_ms", part="leafy")
            xn, yn = _series(rows, f"{h}{tag}/non-leafy", "cycle_ms", part="leafy")
            common = sorted(set(xl) & set(xn))
            if common:
                ratio = [yl[xl.index(n)] / yn[xn.index(n)] for n in common]
                ratio_ax.plot(common, ratio, color=_style(h)[0],
                              marker="o" if mode == "ours" else "x",
                              ls="-" if mode == "ours" else "-.", label=f"{h} ({mode})")
        for p in ("numpy-brute", "numba-brute"):
            x, y = _series(rows, p, "cycle_ms", part="leafy")
            if x:
                c, ls = _style(p)
                ax.plot(x, y, color=c, ls=ls, label=p)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.set_ylabel("ms per cycle")
        ax.set_title(f"{mode} mode: cycle time at the best swept threshold (in brackets)",
                     fontsize=10)
        ax.legend(fontsize=7, ncol=2)
    ratio_ax.axhline(1.0, color="black", lw=0.8)
    ratio_ax.set_xscale("log")
    ratio_ax.set_xlabel("n")
    ratio_ax.set_ylabel("leafy / non-leafy cycle time (>1: non-leafy faster)")
    ratio_ax.legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    fig.suptitle("Figure 4.1 — leafy against non-leafy, chapter 3 protocol", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_dist(rows, dist: str, fig_no: str, path: Path) -> None:
    plt = _plt()
    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    labels = _labels([r for r in rows if r["dist"] == dist], "dist")
    panels = [("query_ms", "query time (ms, 10³ box)"), ("move_ms", "move 1,000 objects (ms)"),
              ("split_ms", "full split: first whole query (ms)"), ("working_set", None),
              ("max_depth", "maximum tree depth"), ("ratio", "per-cycle speed-up over numpy "
                                                             "brute force")]
    ref_x, ref_y = _series(rows, "numpy-brute", "cycle_ms", part="dist", dist=dist)
    ref = dict(zip(ref_x, ref_y, strict=True))
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        for label in labels:
            c, ls = _style(label)
            if key == "ratio":
                x, y = _series(rows, label, "cycle_ms", part="dist", dist=dist)
                pts = [(n, ref[n] / v) for n, v in zip(x, y, strict=True) if n in ref and v > 0]
                x, y = [p[0] for p in pts], [p[1] for p in pts]
            elif key == "working_set":
                if label in ("numpy-brute", "numba-brute", "brute"):
                    continue
                x, y = _series(rows, label, "working_set", part="dist", dist=dist)
            elif key == "max_depth" and label.split("/")[0] not in HEURISTICS + ("fixed-octree",
                                                                                  "viewdist"):
                continue
            else:
                x, y = _series(rows, label, key, part="dist", dist=dist)
            if x:
                ax.plot(x, y, color=c, ls=ls, marker=_marker(label), ms=3, label=label)
        if key == "working_set":
            x, y = _series(rows, "numpy-brute", "visible", part="dist", dist=dist)
            ax.plot(x, y, color="black", lw=2.2, label="visible set")
            title = "working set vs visible set (objects)"
        ax.set_title(title, fontsize=10)
        ax.set_xscale("log")
        if key != "max_depth":
            ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.grid(alpha=0.3, which="both")
    axes.flat[0].legend(fontsize=7, ncol=2)
    fig.suptitle(f"Figure {fig_no} — {dist} distribution, chapter 4 protocol "
                 "(cube n^(1/3) on a side, radii 1-10, 10³ query box, 1,000 moves per cycle; "
                 "x markers, dash-dot: the paper mode)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------- analysis

def _slope(x, y):
    lx = np.log(np.asarray(x, float))
    ly = np.log(np.asarray(y, float))
    if len(lx) < 2:
        return float("nan")
    return float(np.polyfit(lx, ly, 1)[0])


def _log_fit(n, depth):
    """depth = a + b log10 n: (b, R^2)."""
    x = np.log10(np.asarray(n, float))
    y = np.asarray(depth, float)
    if len(x) < 3 or np.ptp(y) == 0:
        return (0.0, 1.0) if len(x) >= 2 else (float("nan"), float("nan"))
    b, a = np.polyfit(x, y, 1)
    pred = a + b * x
    ss = ((y - y.mean()) ** 2).sum()
    return float(b), float(1 - ((y - pred) ** 2).sum() / ss) if ss > 0 else 1.0


def _tree(label):
    return label.split("/")[0] in HEURISTICS


def analyse(rows, mode: str = "ours") -> list[tuple[str, str, str]]:
    """(paper's claim, verdict, our evidence) per point, for the trees of one mode."""
    out = []
    tag = MODE_TAGS[mode]
    dist_rows = [r for r in rows if r["part"] == "dist" and not r.get("error")]
    trees = [h + tag + "/non-leafy" for h in HEURISTICS]
    big = [n for n in sorted({r["n"] for r in dist_rows}) if n >= 10_000] or \
        sorted({r["n"] for r in dist_rows})[-2:]

    # 1 icoseptree best on clustered and Lissajous (and overall)
    for dist in ("clustered", "lissajous", "uniform", "sphere"):
        wins = []
        for n in big:
            cand = [r for r in dist_rows if r["dist"] == dist and r["n"] == n
                    and r["label"] in trees]
            if cand:
                wins.append((n, min(cand, key=lambda r: r["query_ms"])["label"].split("/")[0]))
        if not wins:
            continue
        ico = sum(1 for _, w in wins if w == "icoseptree")
        top = wins[-1][1]
        claim = {"clustered": "icoseptree clearly best on clustered data",
                 "lissajous": "icoseptree the clear winner on the Lissajous loop",
                 "uniform": "octree and icoseptree ahead of K-D and ternary on uniform data",
                 "sphere": "icoseptree best on the sphere distribution (octree equal at 10^6)",
                 }[dist]
        if dist == "uniform":
            good = top in ("octree", "icoseptree")
        else:
            good = top == "icoseptree" or ico * 2 > len(wins)
        allsub = [r for r in dist_rows if r["dist"] == dist and r["n"] == big[-1]]
        alltrees = [r for r in allsub if r["name"] in HEURISTICS]
        best_any = min(allsub, key=lambda r: r["cycle_ms"]) if allsub else None
        best_tree = min(alltrees, key=lambda r: r["query_ms"]) if alltrees else None
        ev = ("fastest tree query per n: " + ", ".join(f"{n:,}: {w}" for n, w in wins)
              + (f"; fastest tree query of either mode at n={big[-1]:,}: "
                 f"{best_tree['label']} ({best_tree['query_ms']:.2f} ms)" if best_tree else "")
              + (f"; fastest of all subjects per cycle: {best_any['label']}"
                 if best_any else ""))
        out.append((claim, "agrees" if good else ("partly" if ico else "disagrees"), ev))

    # 2 non-leafy slightly ahead of leafy
    lr = [r for r in rows if r["part"] == "leafy" and not r.get("error")]
    ratios = {}
    for h in HEURISTICS:
        rs = []
        for n in sorted({r["n"] for r in lr}):
            a = [r for r in lr if r["n"] == n and r["label"] == f"{h}{tag}/leafy"]
            b = [r for r in lr if r["n"] == n and r["label"] == f"{h}{tag}/non-leafy"]
            if a and b and b[0]["cycle_ms"] > 0:
                rs.append(a[0]["cycle_ms"] / b[0]["cycle_ms"])
        if rs:
            ratios[h] = float(np.exp(np.mean(np.log(rs))))
    if ratios:
        ahead = sum(1 for v in ratios.values() if v > 1.0)
        verdict = "agrees" if ahead == len(ratios) else ("partly" if ahead else "disagrees")
        out.append(("non-leafy consistently (slightly) ahead of leafy at the best thresholds",
                    verdict, "leafy/non-leafy cycle time, geometric mean over n: "
                    + ", ".join(f"{h} {v:.2f}" for h, v in ratios.items())))

    # 3 working sets approach the visible set (icoseptree and K-D, clustered and Lissajous)
    ev = []
    good = 0
    tot = 0
    for dist in ("clustered", "lissajous"):
        for h in ("icoseptree", "kd"):
            pts = sorted((r["n"], r["working_set"] / max(r["visible"], 1e-9)) for r in dist_rows
                         if r["dist"] == dist and r["label"] == f"{h}{tag}/non-leafy"
                         and r["visible"] > 0)
            if len(pts) >= 2:
                tot += 1
                lo_ratio = max(p[1] for p in pts)
                last = pts[-1][1]
                if last < lo_ratio and last < 2.0:
                    good += 1
                ev.append(f"{h} {dist}: ws/visible peak {lo_ratio:.2f} -> {last:.2f} at "
                          f"n={pts[-1][0]:,}")
    if tot:
        out.append(("working sets of icoseptree and K-D approach the visible set as n grows",
                    "agrees" if good == tot else ("partly" if good else "disagrees"),
                    "; ".join(ev)))

    # 4 depth grows logarithmically: fit depth = a + b log n on the smaller half of the n,
    # extrapolate to the largest n; much deeper than that means faster than logarithmic.
    ev = []
    good = tot = 0
    fast = []
    for h in HEURISTICS:
        for dist in ("uniform", "clustered", "lissajous", "sphere"):
            pts = sorted((r["n"], r["max_depth"]) for r in dist_rows
                         if r["dist"] == dist and r["label"] == f"{h}{tag}/non-leafy")
            if len(pts) < 4:
                continue
            half = pts[: (len(pts) + 1) // 2]
            x = np.log10([p[0] for p in half])
            b, a = np.polyfit(x, [p[1] for p in half], 1)
            pred = a + b * np.log10(pts[-1][0])
            tot += 1
            if pts[-1][1] <= max(1.5 * pred, pred + 3):
                good += 1
            else:
                fast.append(f"{h} {dist} ({pts[-1][1]} levels at n={pts[-1][0]:,}, "
                            f"log trend {pred:.0f})")
            if dist == "uniform":
                ev.append(f"{h}: {pts[0][1]}->{pts[-1][1]}")
    if tot:
        out.append(("maximum depth grows logarithmically with n",
                    "agrees" if good == tot else ("partly" if good * 2 >= tot else "disagrees"),
                    f"{good}/{tot} (heuristic, distribution) pairs stay on the logarithmic trend "
                    "of their smaller n; uniform depths " + ", ".join(ev)
                    + ("; faster than logarithmic: " + "; ".join(fast) if fast else "")))

    # 5 split time close to linear
    ev = []
    slopes = []
    for h in HEURISTICS:
        for dist in ("uniform", "clustered", "lissajous", "sphere"):
            pts = sorted((r["n"], r["split_ms"]) for r in dist_rows
                         if r["dist"] == dist and r["label"] == f"{h}{tag}/non-leafy"
                         and r["n"] >= 10_000 and r["split_ms"] > 0)
            if len(pts) >= 2:
                s = _slope([p[0] for p in pts], [p[1] for p in pts])
                slopes.append(s)
                if dist == "uniform":
                    ev.append(f"{h} {s:.2f}")
    if slopes:
        med = float(np.median(slopes))
        verdict = ("agrees" if 0.8 <= med <= 1.15 else
                   "partly" if 0.7 <= med <= 1.35 else "disagrees")
        out.append(("full split time close to linear in n",
                    verdict, f"log-log slope of split time for n >= 10^4: median {med:.2f} over "
                    f"{len(slopes)} (heuristic, distribution) pairs (min {min(slopes):.2f}, max "
                    f"{max(slopes):.2f}); uniform: " + ", ".join(ev)))
    return out


def analyse_thresholds(best: dict, mode: str) -> tuple[str, str, str] | None:
    """The figure 3.1 claim (optimum thresholds 20-70) for one mode's swept optimum."""
    tag = MODE_TAGS[mode]
    pairs = []
    for h in HEURISTICS:
        pl, pn = PAPER_THRESHOLDS[h]
        for v, paper in (("leafy", pl), ("non-leafy", pn)):
            got = best.get(f"{h}{tag}/{v}")
            if got is not None:
                pairs.append((h, v, got, paper))
    if not pairs:
        return None
    ratio = float(np.exp(np.mean([np.log(g / p) for _, _, g, p in pairs])))
    near = sum(1 for _, _, g, p in pairs if 0.5 <= g / p <= 2.0)
    verdict = "agrees" if near == len(pairs) else ("partly" if near * 2 >= len(pairs)
                                                   else "disagrees")
    return ("optimum split thresholds 20-70 (K-D 35/30, ternary 25/20, octree 40/30, "
            "icoseptree 70/50)", verdict,
            "best swept (leafy/non-leafy): " + ", ".join(
                f"{h} {'/'.join(str(g) for hh, _, g, _ in pairs if hh == h)}" for h in HEURISTICS
                if any(hh == h for hh, *_ in pairs))
            + f"; {near}/{len(pairs)} within 2x of the paper's, geometric mean ratio "
            f"{ratio:.1f}x")


def analyse_modes(rows, best: dict) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(claim, {mode: verdict}, {mode: evidence}) for every claim and mode in the rows."""
    modes = _modes(rows) or ["ours"]
    claims: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    for mode in modes:
        res = analyse(rows, mode)
        th = analyse_thresholds(best, mode)
        if th:
            res.append(th)
        for claim, verdict, ev in res:
            v, e = claims.setdefault(claim, ({}, {}))
            v[mode] = verdict
            e[mode] = ev
    return [(c, v, e) for c, (v, e) in claims.items()]


# ----------------------------------------------------------------- ablation

ABLATE_KEYS = (("max_depth", "depth"), ("ws_ratio", "ws/visible"),
               ("nodes_visited", "nodes visited"), ("query_ms", "query ms"))


def _ablate_value(r, key):
    if key == "ws_ratio":
        return r["working_set"] / r["visible"] if r.get("visible") else float("nan")
    return r.get(key, float("nan"))


def ablation_tables(rows) -> list[str]:
    """One markdown table per (distribution, n): a row per mode, a column per heuristic with
    depth · working set / visible · nodes visited · query ms."""
    ab = [r for r in rows if r["part"] == "ablate" and not r.get("error")
          and r["name"] in HEURISTICS]
    md = []
    for dist in sorted({r["dist"] for r in ab}, key=("clustered", "uniform", "lissajous",
                                                      "sphere").index):
        for n in sorted({r["n"] for r in ab if r["dist"] == dist}):
            sel = [r for r in ab if r["dist"] == dist and r["n"] == n]
            modes = []
            for r in sel:
                if r["mode"] not in modes:
                    modes.append(r["mode"])
            order = {m: i for i, m in enumerate(_ablation_order())}
            modes.sort(key=lambda m: order.get(m, 99))
            ref = next((r for r in rows if r["part"] == "ablate" and r["dist"] == dist
                        and r["n"] == n and r["label"] == "numpy-brute"
                        and not r.get("error")), None)
            trs = []
            for m in modes:
                cells = [m]
                for h in HEURISTICS:
                    r = next((x for x in sel if x["name"] == h and x["mode"] == m), None)
                    if r is None:
                        cells.append("-")
                        continue
                    cells.append(f"{r['max_depth']} · {_ablate_value(r, 'ws_ratio'):.2f} · "
                                 f"{r['nodes_visited']:,.0f} · {r['query_ms']:.2f}")
                trs.append(cells)
            md.append(f"**{dist}, n = {n:,}** (each cell: maximum depth after the full split · "
                      "working set / visible set · nodes visited · query ms"
                      + (f"; numpy brute force's query: {ref['query_ms']:.2f} ms" if ref else "")
                      + ")")
            md.append("")
            md.append(md_table(["mode"] + list(HEURISTICS), trs))
            md.append("")
    return md


def paired_tables(rows) -> list[str]:
    """Per distribution: a row per heuristic, per mode its query ms, move ms and the median
    per-cycle ratios to our mode measured in turns."""
    pr = [r for r in rows if r["part"] == "paired" and not r.get("error") and r.get("mode")]
    md = []
    for dist in [d for d in ("clustered", "uniform", "lissajous", "sphere")
                 if any(r["dist"] == d for r in pr)]:
        sel = [r for r in pr if r["dist"] == dist]
        n = max(r["n"] for r in sel)
        modes = []
        for r in sel:
            if r["mode"] not in modes:
                modes.append(r["mode"])
        trs = []
        for h in HEURISTICS:
            cells = [h]
            for m in modes:
                r = next((x for x in sel if x["name"] == h and x["mode"] == m and x["n"] == n),
                         None)
                if r is None:
                    cells.append("-")
                elif m == modes[0]:
                    cells.append(f"{r['query_ms']:.2f} / {r['move_ms']:.2f} "
                                 f"(depth {r['max_depth']})")
                else:
                    cells.append(f"{r['query_ms']:.2f} / {r['move_ms']:.2f} "
                                 f"(depth {r['max_depth']}; x{r['query_ratio']:.2f} query, "
                                 f"x{r['cycle_ratio']:.2f} cycle)")
            trs.append(cells)
        cyc = next((r["cycles"] for r in sel), "")
        md.append(f"**{dist}, n = {n:,}**, {cyc} cycles (each cell: median query ms / move-1,000 "
                  f"ms (maximum depth after the full split; median per-cycle ratio of query "
                  f"time and of cycle time to `{modes[0]}`'s on the same cycle))")
        md.append("")
        md.append(md_table(["heuristic"] + modes, trs))
        md.append("")
    return md


def _ablation_order() -> list[str]:
    feats = ("split", "axis", "nonleafy", "lazy", "threshold")
    return (["ours"] + [f"ours+{f}" for f in feats] + [f"paper-{f}" for f in feats]
            + ["paper"])


def plot_ablation(rows, path: Path) -> bool:
    """Bars per mode (x) and heuristic (colour) for the largest n of the first distribution:
    depth, working set / visible set, nodes visited, query ms."""
    ab = [r for r in rows if r["part"] == "ablate" and not r.get("error")
          and r["name"] in HEURISTICS]
    if not ab:
        return False
    plt = _plt()
    dists = [d for d in ("clustered", "uniform", "lissajous", "sphere")
             if any(r["dist"] == d for r in ab)]
    fig, axes = plt.subplots(len(dists), 4, figsize=(20, 4.4 * len(dists)), squeeze=False)
    modes = [m for m in _ablation_order() if any(r["mode"] == m for r in ab)]
    x = np.arange(len(modes))
    w = 0.8 / len(HEURISTICS)
    for row, dist in zip(axes, dists, strict=True):
        n = max(r["n"] for r in ab if r["dist"] == dist)
        for ax, (key, title) in zip(row, ABLATE_KEYS, strict=True):
            for k, h in enumerate(HEURISTICS):
                vals = []
                for m in modes:
                    r = next((r for r in ab if r["dist"] == dist and r["n"] == n
                              and r["name"] == h and r["mode"] == m), None)
                    vals.append(_ablate_value(r, key) if r else np.nan)
                ax.bar(x + (k - 1.5) * w, vals, w, color=STYLE[h][0], label=h)
            ax.set_xticks(x, modes, rotation=60, ha="right", fontsize=8)
            ax.set_title(f"{title} ({dist}, n={n:,})", fontsize=10)
            ax.grid(alpha=0.3, axis="y")
            if key in ("max_depth", "nodes_visited"):
                ax.set_yscale("log")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("The paper's choices one at a time (non-leafy, the paper's thresholds, "
                 "chapter 4 protocol): ours, ours + one choice, paper - one choice, paper",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# ----------------------------------------------------------------- report

def _dist_table(rows, dist, n):
    sel = [r for r in rows if r["part"] == "dist" and r["dist"] == dist and r["n"] == n]
    ref = next((r for r in sel if r["label"] == "numpy-brute" and not r.get("error")), None)
    out = []
    for r in sorted(sel, key=lambda r: (bool(r.get("error")), r.get("cycle_ms", 1e18))):
        if r.get("error"):
            out.append([r["label"], "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                        "failed: " + r["error"][:60]])
            continue
        x = ref["cycle_ms"] / r["cycle_ms"] if ref and r["cycle_ms"] > 0 else float("nan")
        out.append([r["label"], r["build_ms"], r["split_ms"], r["query_ms"], r["move_ms"],
                    r["cycle_ms"], x, r["visible"], r["working_set"], r["nodes_visited"],
                    r["max_depth"], "yes" if r["exact"] else "NO"])
    return out


DIST_HEAD = ["subject", "build ms", "split ms", "query ms", "move ms", "cycle ms", "x numpy",
             "visible", "working set", "nodes", "depth", "exact"]


def write_outputs(rows: list[dict], out: Path, meta: dict) -> str:
    out.mkdir(parents=True, exist_ok=True)
    for part in ("sweep", "leafy", "dist", "ablate", "paired"):
        sel = [r for r in rows if r["part"] == part]
        if sel:
            write_csv(out / f"{part}.csv", COLUMNS, [[r.get(c, "") for c in COLUMNS] for r in sel])
    figs = []
    if any(r["part"] == "sweep" for r in rows):
        plot_sweep(rows, out / "fig3_1_thresholds.png")
        figs.append(("Figure 3.1 — threshold sweep", "fig3_1_thresholds.png"))
    if any(r["part"] == "leafy" for r in rows):
        plot_leafy(rows, out / "fig4_1_leafy.png")
        figs.append(("Figure 4.1 — leafy vs non-leafy", "fig4_1_leafy.png"))
    for k, dist in enumerate(("uniform", "clustered", "lissajous", "sphere")):
        if any(r["part"] == "dist" and r["dist"] == dist for r in rows):
            plot_dist(rows, dist, f"4.{k + 2}", out / f"fig4_{k + 2}_{dist}.png")
            figs.append((f"Figure 4.{k + 2} — {dist}", f"fig4_{k + 2}_{dist}.png"))
    if plot_ablation(rows, out / "ablation.png"):
        figs.append(("The paper's choices one at a time", "ablation.png"))

    cfg = meta["cfg"]
    md = ["# Shagam's benchmark (chapters 3 and 4), reproduced", ""]
    if meta["quick"]:
        md += ["> **Smoke test (`--quick`)**: small n and a few cycles. The verdicts below are "
               "computed the same way as in a full run but mean little at this size; the full "
               "run's committed report is `docs/paper/report.md`.", ""]
    md.append(f"Generated by `python -m app bench paper{' --quick' if meta['quick'] else ''} "
              f"--jobs {meta['jobs']}`"
              + ("" if meta.get("reused") else f" in {meta['elapsed_s']:.0f} s")
              + f" on {platform.node()} "
              f"({meta['cpu']} CPUs, shared with other work)"
              + (f"; {meta['reused']} of {meta['runs']} runs were taken from `.runs.jsonl`, "
                 "recorded by an earlier invocation with the same settings"
                 if meta.get("reused") else "")
              + (f"; load average {meta['load_start']} at the start and {meta['load_end']} at "
                 "the end (1, 5, 15 min)" if meta.get("load_start")
                 and meta.get("reused", 0) < meta.get("runs", 0) else "")
              + ". Times are process CPU time "
              "(like the paper's `times()`), medians over the cycles; because the machine is "
              "shared, compare ratios (`x numpy`: numpy brute force's cycle time over the "
              "subject's, same data, same run) rather than absolute times.")
    md.append("")
    md.append("Protocol. Chapter 3: n spheres, radius uniform in [1, 10], uniform in a cube "
              "3·n^(1/3) on a side; insert (build), query the whole volume once (split time: "
              "the lazy trees split fully), then cycles of: query a random 100³ box with "
              f"`query_box`; move {meta['moves']:,} random objects in a random direction by "
              f"{meta['move_factor']:g}× their radius with one `update` call. Chapter 4: the "
              "same with a cube n^(1/3) on a side and a 10³ box, for the four distributions. "
              f"Cycles per run: {cfg.cycles} (sweep {cfg.sweep_cycles}; the paper used 1,000). "
              "Working set and nodes visited come from `query_frustum` with the box's six "
              "planes (exactly the `query_box` rule), outside the timed query. `exact` compares "
              "the first and last query of each run with a numpy reference.")
    md.append("")
    md.append("Subjects: numpy brute force, the same loop compiled with numba (one thread), "
              "`rtree` (libspatialindex R*-tree, bulk-loaded, moves as delete + insert from "
              "Python), and every index of the project that existed at run time (the four "
              "heuristics non-leafy at the paper's thresholds in chapter 4). The four trees run "
              "in each mode of `--modes`: ours (`kd/non-leafy`) and the paper's appendix A "
              "(`kd/paper/non-leafy`, `create_index(..., mode=\"paper\")`).")
    md.append("")
    # conclusions
    md.append("## Our results against the paper's conclusions")
    md.append("")
    best = meta.get("best") or {}
    res = analyse_modes(rows, best)
    modes = _modes(rows) or ["ours"]
    md.append(md_table(["paper says"] + [f"{m} mode" for m in modes] + ["evidence"],
                       [[c] + [v.get(m, "-") for m in modes]
                        + ["<br>".join(f"**{m}**: {e[m]}" for m in modes if m in e)]
                        for c, v, e in res]))
    md.append("")
    md.append("NOTES_PLACEHOLDER")
    md.append("")
    # thresholds
    if best:
        md.append("## Figure 3.1: best split thresholds")
        md.append("")
        trs = []
        for h in HEURISTICS:
            pl, pn = PAPER_THRESHOLDS[h]
            trs.append([h] + [best.get(f"{h}{MODE_TAGS[m]}/leafy") for m in modes] + [pl]
                       + [best.get(f"{h}{MODE_TAGS[m]}/non-leafy") for m in modes] + [pn])
        md.append(md_table(["heuristic"] + [f"{m} mode leafy" for m in modes]
                           + ["paper's leafy"] + [f"{m} mode non-leafy" for m in modes]
                           + ["paper's non-leafy"], trs))
        md.append("")
        md.append(f"Swept thresholds {cfg.thresholds} at n = "
                  f"{', '.join(f'{n:,}' for n in cfg.sweep_n)}; best = smallest sum over n of "
                  "cycle time / best cycle time at that n.")
        md.append("")
    # leafy table
    lr = [r for r in rows if r["part"] == "leafy" and not r.get("error")]
    if lr:
        md.append("## Figure 4.1: leafy against non-leafy (cycle ms, chapter 3 protocol)")
        md.append("")
        ns = sorted({r["n"] for r in lr})
        trs = []
        for lab in _labels(rows, "leafy"):
            vals = {r["n"]: r["cycle_ms"] for r in lr if r["label"] == lab}
            thr = next((r["threshold"] for r in lr if r["label"] == lab), None)
            trs.append([lab, thr if thr is not None else ""] + [vals.get(n, float("nan"))
                                                                for n in ns])
        md.append(md_table(["subject", "threshold"] + [f"n={n:,}" for n in ns], trs))
        md.append("")
    # distribution tables at the largest n
    dr = [r for r in rows if r["part"] == "dist"]
    if dr:
        nmax = max(r["n"] for r in dr)
        for dist in ("uniform", "clustered", "lissajous", "sphere"):
            if not any(r["dist"] == dist for r in dr):
                continue
            md.append(f"## {dist}, n = {nmax:,} (chapter 4 protocol)")
            md.append("")
            md.append(md_table(DIST_HEAD, _dist_table(rows, dist, nmax)))
            md.append("")
        md.append("Per-cycle speed-up over numpy brute force at every n (cycle = query + "
                  "1,000 moves):")
        md.append("")
        for dist in ("uniform", "clustered", "lissajous", "sphere"):
            ns = sorted({r["n"] for r in dr if r["dist"] == dist})
            if not ns:
                continue
            trs = []
            for lab in _labels([r for r in dr if r["dist"] == dist], "dist"):
                vals = []
                for n in ns:
                    a = _ok(dr, dist=dist, n=n, label=lab)
                    b = _ok(dr, dist=dist, n=n, label="numpy-brute")
                    vals.append(b[0]["cycle_ms"] / a[0]["cycle_ms"] if a and b and
                                a[0]["cycle_ms"] > 0 else float("nan"))
                trs.append([lab] + vals)
            md.append(f"**{dist}**")
            md.append("")
            md.append(md_table(["subject"] + [f"{n:,}" for n in ns], trs))
            md.append("")
    abl = ablation_tables(rows)
    if abl:
        md.append("## The paper's choices one at a time (chapter 4 protocol)")
        md.append("")
        md.append("Each heuristic non-leafy at the paper's threshold, in our mode (`ours`), our "
                  "mode with one of appendix A's choices (`ours+X`), the paper mode without one "
                  "of them (`paper-X`) and the paper mode. X: `split` = split point at the mean "
                  "of pos + (r, r, r); `axis` = longest axis with ties to Z; `nonleafy` = keep "
                  "an object at an inner node when r·4π/3 > volume/8; `lazy` = the listing's "
                  "extents bookkeeping (stale boxes for decisions, recomputation at every "
                  "visit); `threshold` = split at >= threshold objects.")
        md.append("")
        md += abl
    pairs = paired_tables(rows)
    if pairs:
        md.append("### Timed side by side")
        md.append("")
        md.append("The query times above come from separate runs on a shared machine. Here "
                  "each heuristic is built in a few modes in one process on the same data; "
                  "every cycle, the trees answer the same box and take the same moves in "
                  "turn (the order rotating), so that load from other programs falls on all "
                  "of them alike.")
        md.append("")
        md += pairs
    failed = [r for r in rows if r.get("error")]
    if failed:
        md.append("## Failed runs")
        md.append("")
        seen = set()
        for r in failed:
            if (r["label"], r["error"]) in seen:
                continue
            seen.add((r["label"], r["error"]))
            md.append(f"- `{r['label']}` ({r['part']}, {r['dist']}, n={r['n']:,}): {r['error']}")
        md.append("")
    md.append("## Plots")
    md.append("")
    for title, f in figs:
        md.append(f"![{title}]({f})")
        md.append("")
    md.append("Raw data: `sweep.csv`, `leafy.csv`, `dist.csv`, `ablate.csv`, `paired.csv` in "
              "this folder.")
    text = "\n".join(md) + "\n"
    notes_file = out / "notes.md"
    notes = notes_file.read_text().strip() if notes_file.exists() else (
        "_No hand-written interpretation for this run; the full run's is in "
        "`docs/paper/notes.md`._")
    text = text.replace("NOTES_PLACEHOLDER", notes)
    (out / "report.md").write_text(text)
    # short terminal summary
    lines = ["bench paper: our results against the paper's conclusions"]
    for a, v, e in res:
        lines.append(f"- {a}: " + ", ".join(f"{m} {v[m].upper()}" for m in modes if m in v)
                     + " (" + "; ".join(f"{m}: {e[m]}" for m in modes if m in e) + ")")
    if best:
        lines.append("best thresholds: " + ", ".join(f"{k} {v}" for k, v in best.items()))
    if dr:
        nmax = max(r["n"] for r in dr)
        for dist in ("uniform", "clustered", "lissajous", "sphere"):
            t = _dist_table(rows, dist, nmax)
            if t:
                lines.append(f"{dist} n={nmax:,}: " + ", ".join(
                    f"{row[0]} {fmt(row[6])}x" for row in t[:6] if row[1] != "-"))
    return "\n".join(lines)
