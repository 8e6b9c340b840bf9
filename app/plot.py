"""``python -m app plot LOG.csv [LOG2.csv ...] -o OUT.png``: frame-log charts (matplotlib)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from app.framelog import FrameLogError, read_log

STAGES = (("update_ms", "update"), ("cull_ms", "cull"), ("render_ms", "render"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the plot subcommand's options."""
    parser.add_argument("logs", nargs="+", type=Path, metavar="LOG.csv",
                        help="frame logs written by the viewer (--record)")
    parser.add_argument("-o", "--output", type=Path, default=Path("frames.png"),
                        metavar="OUT.png", help="image to write (default: frames.png)")
    parser.add_argument("--title", default=None, help="figure title")
    parser.add_argument("--dpi", type=int, default=110, help="image resolution (default: 110)")


def _label(path: Path, log: dict) -> str:
    """File name plus what the run culled with: index(es), occlusion mode, frustum off."""
    names = list(dict.fromkeys(x for x in log["index"] if x))
    parts = [", ".join(names) or "no index"]
    modes = [m for m in dict.fromkeys(log.get("occlusion", [])) if m and m != "off"]
    if modes:
        parts.append("occlusion " + "/".join(modes))
    frustum = log.get("frustum")
    if frustum is not None and len(frustum) and np.nanmax(np.asarray(frustum, float)) == 0:
        parts.append("no culling")
    return f"{path.name} ({'; '.join(parts)})"


def _index_changes(log: dict) -> list[tuple[float, str]]:
    """(frame, new index) wherever the index column changes from one row to the next."""
    idx, frames = log["index"], log["frame"]
    return [(float(frames[i]), idx[i]) for i in range(1, len(idx)) if idx[i] != idx[i - 1]]


def _shared_ms_limit(logs: list[dict]) -> float:
    """One y limit for every frame-time panel, so panels compare at a glance; ignores spikes."""
    tops = [np.nanpercentile(np.asarray(log["frame_ms"], dtype=float), 98) for log in logs]
    top = float(np.nanmax(tops)) if tops else 1.0
    return max(top * 1.3, 1e-3) if np.isfinite(top) else 1.0


def _plot(logs: list[tuple[Path, dict]], out: Path, title: str | None, dpi: int) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display needed, and never a window
    import matplotlib.pyplot as plt

    n = len(logs)
    fig, axes = plt.subplots(n + 1, 1, figsize=(11, 3.2 * (n + 1)), squeeze=False,
                             constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    stage_colors = ("#4c72b0", "#dd8452", "#55a868")
    vis_ax = axes[-1, 0]
    top = _shared_ms_limit([log for _, log in logs])
    for k, (path, log) in enumerate(logs):
        ax = axes[k, 0]
        frames = np.asarray(log["frame"], dtype=float)
        parts = [np.nan_to_num(np.asarray(log[c], dtype=float)) for c, _ in STAGES]
        ax.stackplot(frames, *parts, labels=[lab for _, lab in STAGES], colors=stage_colors,
                     alpha=0.75)
        ax.plot(frames, np.asarray(log["frame_ms"], dtype=float), color="black", lw=1.0,
                label="frame")
        frame_ms = np.asarray(log["frame_ms"], dtype=float)
        ax.set_title(f"{_label(path, log)}: median frame {np.nanmedian(frame_ms):.1f} ms",
                     fontsize=10)
        ax.set_ylim(0, top)
        clipped = frame_ms > top
        if clipped.any():
            # Warm-up frames (JIT compilation, first splits) would flatten everything else.
            ax.annotate(f"{int(clipped.sum())} frame(s) above {top:.0f} ms clipped "
                        f"(max {np.nanmax(frame_ms):.0f} ms)", (0.01, 0.97),
                        xycoords="axes fraction", va="top", fontsize=8, color="dimgray")
        ax.set_ylabel("ms")
        ax.set_xlabel("frame")
        ax.grid(alpha=0.3)
        color = colors[k % len(colors)]
        vis_ax.plot(frames, np.asarray(log["visible"], dtype=float), color=color, lw=1.2,
                    label=f"visible: {_label(path, log)}")
        vis_ax.plot(frames, np.asarray(log["working_set"], dtype=float), color=color, lw=1.0,
                    ls="--", label=f"working set: {_label(path, log)}")
        changes = _index_changes(log)
        for j, (frame, name) in enumerate(changes):
            for a in (ax, vis_ax):
                a.axvline(frame, color=color if a is vis_ax else "red", lw=0.8, ls=":")
            if len(changes) <= 12:  # beyond that the names only smear into each other
                # Staggered in four rows below the top so neighbouring labels do not overlap.
                ax.annotate(f"-> {name}", (frame, 1.0), xycoords=("data", "axes fraction"),
                            xytext=(2, -24 - 10 * (j % 4)), textcoords="offset points",
                            fontsize=7, color="red")
        ax.legend(loc="upper right", fontsize=8)
    vis_ax.set_title("visible objects (solid) and working set (dashed)", fontsize=10)
    vis_ax.set_xlabel("frame")
    vis_ax.set_ylabel("objects")
    vis_ax.grid(alpha=0.3)
    # Below the panel: inside it, the legend hid the no-culling line.
    vis_ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize=8)
    if title:
        fig.suptitle(title)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """Read every log, then draw; a bad log or output path is one line on stderr, exit 2."""
    try:
        logs = [(p, read_log(p)) for p in args.logs]
    except FrameLogError as exc:
        print(f"plot: {exc}", file=sys.stderr)
        return 2
    empty = [str(p) for p, log in logs if len(log["frame"]) == 0]
    if empty:
        print(f"plot: {empty[0]}: the log has a header but no frames", file=sys.stderr)
        return 2
    if args.dpi <= 0:
        print(f"plot: --dpi must be > 0, got {args.dpi}", file=sys.stderr)
        return 2
    out: Path = args.output
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        print(f"plot: {out}: expected a .png, .svg or .pdf output name", file=sys.stderr)
        return 2
    if not out.parent.is_dir() and str(out.parent) not in ("", "."):
        print(f"plot: {out}: the folder {out.parent} does not exist", file=sys.stderr)
        return 2
    try:
        _plot(logs, out, args.title, args.dpi)
    except OSError as exc:
        print(f"plot: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0
