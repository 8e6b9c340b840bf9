"""``python -m app plot LOG.csv [LOG2.csv ...] -o OUT.png``: frame-log charts (matplotlib).

Per log: a timeline of what the run culled with (one row per index, B index of an A/B
comparison, occlusion mode and culling toggle, so every switch is labelled by its row) above
the frame time stacked by stage (the timing model of :data:`app.framelog.TIME_STAGES`, the
HUD's and the frame graph's), the stack summing to ``frame_ms`` (time no stage accounts for is
the "other" layer; older logs without the newer stage columns stack what they have), with the
frames the log marks as stalls in red. Last, the visible objects and working set of every
log. Legends sit right of their panels.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.framelog import TIME_STAGES, FrameLogError, read_log

# The frame's stages in frame order (app/viewer/timing.py): they partition frame_ms. A stage
# whose parts the log also has is stacked as those parts (update = motion + index update,
# render = draw + occlusion).
PASSES: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("update_ms", "update", (("motion_ms", "motion"), ("index_update_ms", "index update"))),
    ("cull_ms", "cull", ()),
    ("upload_ms", "upload", ()),
    ("render_ms", "render", (("draw_ms", "draw"), ("occlusion_pass_ms", "occlusion"))),
    ("compare_ms", "compare B", ()),
    ("overlay_ms", "overlay", ()),
    ("hud_ms", "HUD", ()),
    ("present_ms", "present", ()),
    ("stall_ms", "stall", ()),
)
# Timed columns that lie inside the passes above (or sum them): never stacked a second time.
NESTED: dict[str, str] = {
    "cpu_ms": "update + cull + upload",
    "occlusion_ms": "cull (previous: map) and render (pyramid)",
    "occlusion_cull_ms": "render (two-pass late cull)",
    "ground_truth_ms": "render (id buffer)",
    "stages_ms": "HUD (the culled-by-stage counts)",
    "other_ms": "other (frame_ms less the stages: the stack's top layer)",
    "compile_ms": "the stage that called the kernel (a stall mark)",
    "compare_update_ms": "compare B (the B index's update)",
    "compare_cull_ms": "compare B (the B index's cull)",
    "compare_pyramid_ms": "compare B (the B side's own pyramid)",
}
STAGE_COLORS = {label: color for _, label, color in TIME_STAGES} | {
    "update": "#4c72b0", "render": "#55a868", "render (incl. occlusion)": "#55a868"}
STALL_COLOR = STAGE_COLORS["stall"]
OCCLUSION_COLORS = {"off": "#c8c8c8", "previous": "#8172b3", "two-pass": "#64b5cd"}
# Culling toggles worth a timeline row while they are in this state.
TOGGLES = (("frustum", 0, "frustum culling off"), ("view_distance", 1, "view distance on"),
           ("frozen", 1, "culling camera frozen"))
MAX_POINTS = 1500  # longer logs are drawn as means of consecutive frames (about a pixel each)
MAX_SWITCH_LINES = 200  # beyond that the timeline alone shows the switches
MAX_NAME = 44


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the plot subcommand's options."""
    parser.add_argument("logs", nargs="+", type=Path, metavar="LOG.csv",
                        help="frame logs written by the viewer (--record)")
    parser.add_argument("-o", "--output", type=Path, default=Path("frames.png"),
                        metavar="OUT.png", help="image to write: .png, .svg or .pdf "
                        "(default: frames.png)")
    parser.add_argument("--title", default=None, help="figure title")
    parser.add_argument("--dpi", type=int, default=110,
                        help="image resolution, 20 to 600 (default: 110)")


# ---------------------------------------------------------------------------- data


@dataclass(frozen=True)
class TimeStack:
    """The frame time split into stacked layers: ``layers`` (k, n) sum to ``frame_ms``."""

    labels: list[str]
    layers: np.ndarray  # non-negative; the last row is "other", frame_ms minus the passes
    frame_ms: np.ndarray  # the log's frame time (the passes' sum where the log has none)
    excess: np.ndarray  # how far the passes' sum exceeds frame_ms (0 where it does not)
    unplaced: list[str]  # timed columns whose place in the frame this module does not know


def _numbers(log: dict, column: str) -> np.ndarray | None:
    """The column as floats, or None if the log lacks it or it holds text."""
    values = log.get(column)
    if values is None or isinstance(values, list):
        return None
    return np.asarray(values, dtype=np.float64)


def time_stack(log: dict) -> TimeStack:
    """Stack every pass the log times; what frame_ms holds beyond them is "other"."""
    frame = _numbers(log, "frame_ms")
    n = len(log["frame"])
    labels: list[str] = []
    parts: list[np.ndarray] = []
    for column, label, subparts in PASSES:
        values = _numbers(log, column)
        subs = [(_numbers(log, c), lab) for c, lab in subparts]
        if subs and all(v is not None for v, _ in subs) and (
                values is None or all(np.isfinite(v[np.isfinite(values)]).all() for v, _ in subs)):
            for v, lab in subs:
                labels.append(lab)
                parts.append(v)
        elif values is not None and np.isfinite(values).any():  # a column never written: none
            labels.append(label)
            parts.append(values)
    occ = [_numbers(log, c) for c in ("occlusion_ms", "occlusion_cull_ms")]
    if "render" in labels and any(v is not None and np.nansum(v) > 0 for v in occ):
        labels[labels.index("render")] = "render (incl. occlusion)"
    stacked = np.zeros((len(parts) + 1, n))
    for k, v in enumerate(parts):
        stacked[k] = np.clip(np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0), 0.0, None)
    total = stacked[:-1].sum(axis=0)
    frame = total.copy() if frame is None else np.where(np.isfinite(frame), frame, total)
    stacked[-1] = np.clip(frame - total, 0.0, None)
    known = {c for c, _, _ in PASSES} | {c for _, _, subs in PASSES for c, _ in subs}
    unplaced = [c for c in log if c.endswith("_ms") and c != "frame_ms" and c not in known
                and c not in NESTED and _numbers(log, c) is not None
                and np.isfinite(_numbers(log, c)).any()]
    return TimeStack(labels + ["other"], stacked, frame, np.clip(total - frame, 0.0, None),
                     unplaced)


def stall_rows(log: dict) -> list[int]:
    """Rows the log marks as stalls (a non-empty ``stall`` cell, or ``stall_ms`` above 0)."""
    marks = np.zeros(len(log["frame"]), bool)
    text = log.get("stall")
    if isinstance(text, list):
        marks |= np.array([bool(str(t).strip()) for t in text], bool)
    ms = _numbers(log, "stall_ms")
    if ms is not None:
        marks |= np.nan_to_num(ms, nan=0.0) > 0
    return np.nonzero(marks)[0].tolist()


def bin_means(values: np.ndarray, size: int) -> np.ndarray:
    """Means of consecutive runs of ``size`` values along the last axis (the last run shorter);
    NaN-aware, so a binned stack still sums to the binned frame time."""
    values = np.asarray(values, dtype=np.float64)
    if size <= 1:
        return values
    n = values.shape[-1]
    starts = np.arange(0, n, size)
    finite = np.isfinite(values)
    sums = np.add.reduceat(np.where(finite, values, 0.0), starts, axis=-1)
    counts = np.add.reduceat(finite.astype(np.float64), starts, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def runs(values: Sequence) -> list[tuple[int, int, object]]:
    """(first row, last row + 1, value) of every run of equal consecutive values."""
    out: list[tuple[int, int, object]] = []
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            out.append((start, i, values[start]))
            start = i
    return out


def _finite(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return values[np.isfinite(values)]


def _short(text: str, limit: int = MAX_NAME) -> str:
    """``text`` cut in the middle to at most ``limit`` characters."""
    if len(text) <= limit:
        return text
    keep = limit - 1
    return text[: keep - keep // 2] + "…" + text[len(text) - keep // 2:]


def _names(paths: Sequence[Path]) -> list[str]:
    """Short distinct names: file names, with their folders where two share a name."""
    names = [p.name for p in paths]
    if len(set(names)) < len(names):
        names = [str(Path(*p.parts[-2:])) for p in paths]
    if len(set(names)) < len(names):
        names = [str(p) for p in paths]
    return [_short(n) for n in names]


def _summary(name: str, log: dict) -> str:
    """One short line: file, objects, frames, median frame time."""
    frame = _finite(_numbers(log, "frame_ms"))
    objects = _finite(_numbers(log, "objects"))
    if len(objects) and objects.min() != objects.max():
        obj = f"{int(objects.min()):,}-{int(objects.max()):,} objects"
    elif len(objects):
        obj = f"{int(objects[0]):,} objects"
    else:
        obj = "objects not logged"
    med = f"median frame {np.median(frame):.1f} ms" if len(frame) else "no frame times"
    n = len(log["frame"])
    return f"{name}: {obj}, {n:,} frame{'s' if n != 1 else ''}, {med}"


def _timeline_rows(log: dict) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """(label, colour key, row ranges) of each timeline row: each index, each B index of an
    A/B comparison, then each occlusion mode (when any is on), then each culling toggle while
    it is in its notable state."""
    rows: list[tuple[str, str, list[tuple[int, int]]]] = []
    index = [x or "(no index)" for x in log["index"]]
    spans: dict[str, list[tuple[int, int]]] = {}
    for a, b, v in runs(index):
        spans.setdefault(str(v), []).append((a, b))
    rows += [(name, "index:" + name, s) for name, s in spans.items()]
    compared = log.get("compare_index")  # an A/B comparison's B index (--compare, F2)
    if isinstance(compared, list) and any(compared):
        spans = {}
        for a, b, v in runs(compared):
            if v:
                spans.setdefault(str(v), []).append((a, b))
        rows += [(f"B {name}", "compare", s) for name, s in spans.items()]
    occ = [x or "off" for x in log.get("occlusion", [])]
    if any(m != "off" for m in occ):
        spans = {}
        for a, b, v in runs(occ):
            spans.setdefault(str(v), []).append((a, b))
        rows += [(f"occlusion {m}", "occlusion:" + m, s) for m, s in spans.items()]
    for column, state, label in TOGGLES:
        v = _numbers(log, column)
        if v is None:
            continue
        on = [bool(x == state) for x in v]
        s = [(a, b) for a, b, flag in runs(on) if flag]
        if s:
            rows.append((label, "toggle", s))
    return rows


# ---------------------------------------------------------------------------- drawing


def _ms_limit(stacks: list[TimeStack]) -> float:
    """One y limit for every frame-time panel, so panels compare at a glance; ignores spikes
    (frames 10 times the median: JIT warm-up, index builds) and the top 2 % of the rest."""
    tops = []
    for f in (_finite(s.frame_ms) for s in stacks):
        if len(f):
            calm = f[f <= 10 * max(np.median(f), 1e-6)]
            tops.append(np.percentile(calm if len(calm) else f, 98))
    top = max(tops) if tops else 1.0
    return max(top * 1.3, 1e-3)


def build_figure(logs: Sequence[tuple[Path, dict]], title: str | None = None):
    """The whole chart as a matplotlib Figure (Agg), not yet drawn or saved."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed, and never a window
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    names = _names([p for p, _ in logs])
    stacks = [time_stack(log) for _, log in logs]
    timelines = [_timeline_rows(log) for _, log in logs]
    row_in = 0.17  # inches per timeline row
    heights: list[float] = []
    for rows in timelines:
        heights += [row_in * len(rows) + 0.12, 2.5]
    heights.append(2.4)
    fig_h = sum(heights) + 0.75 * len(logs) + 0.9 + (0.3 * _title_lines(title))
    fig = Figure(figsize=(12.0, fig_h), layout="constrained")
    gs = fig.add_gridspec(len(heights), 1, height_ratios=heights)
    palette = [c for c in matplotlib.colormaps["tab10"].colors]
    index_colors: dict[str, tuple] = {}
    for rows in timelines:
        for _, key, _ in rows:
            if key.startswith("index:") and key not in index_colors:
                index_colors[key] = palette[len(index_colors) % len(palette)]

    def color_of(key: str):
        if key.startswith("index:"):
            return index_colors[key]
        if key.startswith("occlusion:"):
            return OCCLUSION_COLORS.get(key.split(":", 1)[1], "#937860")
        if key == "compare":
            return STAGE_COLORS["compare B"]
        return "#7f7f7f"

    top = _ms_limit(stacks)
    for k, ((_, log), name, stack, rows) in enumerate(zip(logs, names, stacks, timelines,
                                                         strict=True)):
        frames = np.asarray(log["frame"], dtype=np.float64)
        n = len(frames)
        # each log on its own frame range: logs of different lengths stay readable
        tl = fig.add_subplot(gs[2 * k, 0], gid=f"timeline:{k}")
        ax = fig.add_subplot(gs[2 * k + 1, 0], sharex=tl, gid=f"stack:{k}")
        # timeline: one row per state, bars over the frames it held
        edges = np.append(frames, frames[-1] + 1 if n else 1.0)
        for r, (_, key, spans) in enumerate(rows):
            bars = [(edges[a], edges[b] - edges[a]) for a, b in spans]
            c = color_of(key)
            # an edge of the bar's colour keeps one-frame states visible on long logs
            tl.broken_barh(bars, (r - 0.38, 0.76), facecolors=c, edgecolors=c, linewidth=0.8)
        tl.set_yticks(range(len(rows)), [_short(r[0], 28) for r in rows], fontsize=8)
        tl.set_ylim(len(rows) - 0.5, -0.5)
        tl.tick_params(axis="x", labelbottom=False)
        tl.tick_params(axis="y", length=0)
        tl.grid(axis="x", alpha=0.3)
        tl.set_title(_summary(name, log), loc="left", fontsize=10)
        tl.set_xlim(*_frame_range([log]))
        # frame time, stacked by pass
        size = max(1, math.ceil(n / MAX_POINTS))
        layers = bin_means(stack.layers, size)
        frame_ms = bin_means(stack.frame_ms, size)
        # each frame (or bin) a step from its first frame to the next one's: a spike stays
        # one frame wide instead of a ramp over its neighbours
        xe = np.append(frames[::size], edges[-1])
        base = np.zeros(len(xe) - 1)
        for values, lab in zip(layers, stack.labels, strict=True):
            _stairs(ax, base + values, xe, baseline=base.copy(), fill=True, alpha=0.85,
                    color=STAGE_COLORS.get(lab, "#937860"), label=lab, gid=f"stack:{lab}")
            base = base + values
        _stairs(ax, frame_ms, xe, color="black", lw=0.8, label="frame", gid="frame_ms",
                baseline=None)
        for j, column in enumerate(stack.unplaced):
            _stairs(ax, bin_means(_numbers(log, column), size), xe, lw=0.8, ls="--",
                    label=f"{column} (not stacked)", baseline=None, color=f"C{j % 10}")
        changes = [a for a, _, _ in runs(list(log["index"]))][1:]
        if len(changes) <= MAX_SWITCH_LINES:
            for a in changes:
                ax.axvline(edges[a], color=color_of("index:" + (log["index"][a] or
                                                               "(no index)")),
                           lw=1.0, ls=(0, (2, 2)))
        stalls = stall_rows(log)
        for a in stalls[:MAX_SWITCH_LINES]:
            ax.axvline(edges[a] + 0.5, color=STALL_COLOR, lw=1.2, alpha=0.8)
        ax.set_ylim(0, top)
        ax.set_ylabel("ms")
        ax.grid(alpha=0.3)
        ax.set_title("frame time by stage" + (f" (means of {size} frames)" if size > 1 else "")
                     + (" ; stalls: red lines" if len(stalls) else ""), loc="left", fontsize=9)
        notes = []
        if len(stalls):
            notes.append(f"{len(stalls)} stall{'s' if len(stalls) > 1 else ''}")
        finite = _finite(stack.frame_ms)
        clipped = int((finite > top).sum())
        if clipped:
            # Warm-up frames (JIT compilation, index builds) would flatten everything else.
            notes.append(f"{clipped} frame{'s' if clipped > 1 else ''} above {top:.0f} ms "
                         f"clipped (max {finite.max():,.0f} ms)")
        over = stack.excess > max(0.01, 1e-3 * top)
        if over.any():
            notes.append(f"passes exceed frame_ms in {int(over.sum())} frames "
                         f"(by up to {stack.excess.max():.2f} ms)")
        if notes:
            ax.set_title("; ".join(notes), loc="right", fontsize=8, color="dimgray")
        handles, labels = ax.get_legend_handles_labels()
        # top layer first; a stage at zero on every frame (no A/B run, no stall) stays out
        order = [labels.index(lab) for lab, layer in zip(reversed(stack.labels),
                                                         reversed(stack.layers), strict=True)
                 if np.nanmax(layer, initial=0.0) > 0.0]
        order += [i for i, lab in enumerate(labels) if lab not in stack.labels]
        leg = ax.legend([handles[i] for i in order], [labels[i] for i in order],
                        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                        borderaxespad=0.0, title="stack = frame", title_fontsize=8)
        leg.set_gid("legend:stack")
    vis_ax = fig.add_subplot(gs[-1, 0], gid="visible")
    colors = [c for c in matplotlib.colormaps["tab10"].colors]
    handles = []
    for k, ((_, log), name) in enumerate(zip(logs, names, strict=True)):
        frames = np.asarray(log["frame"], dtype=np.float64)
        size = max(1, math.ceil(len(frames) / MAX_POINTS))
        xe = np.append(frames[::size], frames[-1] + 1)
        c = colors[k % len(colors)] if len(logs) > 1 else "#4c72b0"
        _stairs(vis_ax, bin_means(_numbers(log, "visible"), size), xe, color=c, lw=1.2,
                baseline=None, gid=f"visible:{k}")
        _stairs(vis_ax, bin_means(_numbers(log, "working_set"), size), xe, color=c, lw=1.0,
                ls="--", baseline=None, gid=f"working_set:{k}")
        handles.append(Line2D([], [], color=c, lw=2, label=name))
    handles += [Line2D([], [], color="black", lw=1.2, label="visible"),
                Line2D([], [], color="black", lw=1.0, ls="--", label="working set")]
    vis_ax.set_title("visible objects (solid) and working set (dashed)", loc="left",
                     fontsize=9)
    vis_ax.set_xlabel("frame")
    vis_ax.set_ylabel("objects")
    tops = [_finite(_numbers(log, c)) for _, log in logs for c in ("visible", "working_set")]
    vis_top = max([float(t.max()) for t in tops if len(t)], default=1.0)
    vis_ax.set_ylim(0, max(vis_top * 1.08, 1.0))  # a line at the maximum stays off the spine
    vis_ax.grid(alpha=0.3)
    leg = vis_ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                        fontsize=8, borderaxespad=0.0)
    leg.set_gid("legend:visible")
    vis_ax.set_xlim(*_frame_range([log for _, log in logs]))
    if title:
        fig.suptitle(_wrap_title(title), fontsize=12)
    return fig


def _stairs(ax, values: np.ndarray, edges: np.ndarray, **kwargs):
    """``ax.stairs`` without its data-limit update (seconds per long log: it walks every
    segment); the callers set both limits themselves."""
    from matplotlib.patches import StepPatch

    color = kwargs.pop("color")
    if kwargs.setdefault("fill", False):
        kwargs.setdefault("facecolor", color)
        kwargs.setdefault("linewidth", 0)
    else:
        kwargs.setdefault("edgecolor", color)
    patch = StepPatch(values, edges, **kwargs)
    ax.add_artist(patch)
    return patch


def _frame_range(logs: Sequence[dict]) -> tuple[float, float]:
    """x limits from the first frame to the end of the last (never an empty range)."""
    lo = min(float(np.min(log["frame"])) for log in logs)
    hi = max(float(np.max(log["frame"])) + 1 for log in logs)
    return lo, hi


def _wrap_title(title: str) -> str:
    lines = textwrap.wrap(" ".join(title.split()), 100) or [""]
    if len(lines) > 3:
        lines = lines[:3]
        lines[-1] = _short(lines[-1] + " …", 100)
    return "\n".join(lines)


def _title_lines(title: str | None) -> int:
    return _wrap_title(title).count("\n") + 1 if title else 0


def render(logs: Sequence[tuple[Path, dict]], fmt: str, title: str | None = None,
           dpi: int = 110) -> bytes:
    """The chart as image bytes in ``fmt`` (png, svg or pdf)."""
    fig = build_figure(logs, title)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi)
    return buf.getvalue()


# ---------------------------------------------------------------------------- command


def _check_output(out: Path, inputs: Sequence[Path]) -> str | None:
    """Why ``out`` cannot be written, or None."""
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        return f"{_short(str(out), 80)}: expected a .png, .svg or .pdf output name"
    parent = out.parent
    try:
        if not parent.exists():
            return f"{out}: the folder {parent} does not exist"
        if not parent.is_dir():
            return f"{out}: {parent} is not a folder"
        try:
            limit = os.pathconf(parent, "PC_NAME_MAX")
        except (OSError, ValueError):
            limit = 255
        if len(os.fsencode(out.name)) > limit:
            return f"{_short(str(out), 80)}: file name longer than {limit} bytes"
        if out.is_dir():
            return f"{out}: is a folder, expected an image file name"
        if not os.access(parent, os.W_OK):
            return f"{out}: cannot write in {parent} (permission denied)"
        resolved = out.resolve()
        if any(resolved == p.resolve() for p in inputs):
            return f"{out}: is one of the input logs"
    except OSError as exc:  # a path the file system refuses to even look at
        return f"{_short(str(out), 80)}: {exc.strerror or exc}"
    return None


def _write_atomically(out: Path, data: bytes) -> None:
    """Write through a temporary file in the same folder: on any error an existing ``out``
    is left as it was and no partial file remains."""
    fd, tmp = tempfile.mkstemp(prefix=".plot-", suffix=out.suffix, dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def run(args: argparse.Namespace) -> int:
    """Read every log, then draw; a bad log or output path is one line on stderr, exit 2,
    and nothing written."""
    out: Path = args.output
    if not 20 <= args.dpi <= 600:
        print(f"plot: --dpi must be between 20 and 600, got {args.dpi}", file=sys.stderr)
        return 2
    problem = _check_output(out, args.logs)
    if problem:
        print(f"plot: {problem}", file=sys.stderr)
        return 2
    try:
        logs = [(p, read_log(p)) for p in args.logs]
    except FrameLogError as exc:
        print(f"plot: {exc}", file=sys.stderr)
        return 2
    for p, log in logs:
        if len(log["frame"]) == 0:
            print(f"plot: {p}: the log has a header but no frames", file=sys.stderr)
            return 2
        if not np.isfinite(np.asarray(log["frame"], dtype=np.float64)).all():
            print(f"plot: {p}: column frame has empty or non-finite cells", file=sys.stderr)
            return 2
    data = render(logs, out.suffix.lower()[1:], args.title, args.dpi)
    try:
        _write_atomically(out, data)
    except OSError as exc:
        print(f"plot: cannot write {_short(str(out), 80)}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0
