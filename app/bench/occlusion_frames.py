"""``python -m app bench occlusion``: the viewer's frame time with each culling mode.

Each run is a fresh ``python -m app demo --headless`` process along the scene's camera path
(warm-up frames first, then a recorded frame log), so this module never opens OpenGL itself.
The modes are alternated within every repetition, and each occlusion mode is compared with the
frustum-only run *of the same repetition*: a machine whose speed drifts (other jobs on two
shared cores) moves both sides of a ratio together.

Modes: ``none`` (no culling: draw everything), ``off`` (frustum culling only, the baseline of
the ratios), ``previous`` (Shagam's previous-frame Z-pyramid), ``two-pass`` (no popping).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MODES = ("none", "off", "previous", "two-pass")
MODE_LABELS = {"none": "no culling", "off": "frustum only", "previous": "previous",
               "two-pass": "two-pass"}
HEADERS = ["mode", "frame ms", "render ms", "occlusion ms", "drawn", "ratio to frustum",
           "ratio range"]


@dataclass
class ModeRuns:
    """One mode's per-repetition medians (frame, render, pyramid ms and drawn objects)."""

    mode: str
    frame_ms: list[float] = field(default_factory=list)
    render_ms: list[float] = field(default_factory=list)
    occlusion_ms: list[float] = field(default_factory=list)
    drawn: list[float] = field(default_factory=list)


def demo_command(scene: str, mode: str, *, frames: int, warmup: int, size: str, log: Path,
                 index: str | None = None, objects: int | None = None,
                 no_hud: bool = False) -> list[str]:
    """The ``python -m app demo --headless`` command line of one run."""
    cmd = [sys.executable, "-m", "app", "demo", "--headless", "--scene", scene, "--frames",
           str(frames), "--warmup", str(warmup), "--size", size, "--record", str(log)]
    cmd += ["--no-cull"] if mode == "none" else ["--occlusion", mode]
    if index:
        cmd += ["--index", index]
    if objects is not None:
        cmd += ["--objects", str(objects)]
    if no_hud:
        cmd.append("--no-hud")
    return cmd


def log_medians(path: Path) -> dict[str, float]:
    """Medians of one frame log's frame_ms, render_ms, occlusion_ms (0 if absent), drawn."""
    from app.framelog import read_log

    log = read_log(path)
    if len(log["frame"]) == 0:
        raise ValueError(f"{path}: empty frame log")

    def med(col: str) -> float:
        vals = np.asarray(log.get(col, []), dtype=np.float64)
        vals = vals[~np.isnan(vals)]
        return float(np.median(vals)) if vals.size else 0.0

    return {"frame_ms": med("frame_ms"), "render_ms": med("render_ms"),
            "occlusion_ms": med("occlusion_ms"), "drawn": med("drawn")}


def ratios(runs: dict[str, ModeRuns], mode: str) -> list[float]:
    """Per-repetition frame-time ratios of ``mode`` to frustum-only (empty without it)."""
    if "off" not in runs or mode not in runs:
        return []
    return [a / b for a, b in zip(runs[mode].frame_ms, runs["off"].frame_ms, strict=False)
            if b > 0]


def table_rows(runs: dict[str, ModeRuns]) -> list[list]:
    out = []
    for mode, r in runs.items():
        q = ratios(runs, mode)
        out.append([MODE_LABELS[mode], statistics.median(r.frame_ms),
                    statistics.median(r.render_ms), statistics.median(r.occlusion_ms),
                    round(statistics.median(r.drawn)),
                    f"{statistics.median(q):.3f}" if q else "-",
                    f"{min(q):.3f}-{max(q):.3f}" if q else "-"])
    return out


def run_occlusion(args) -> int:
    """Run the benchmark described by the ``bench occlusion`` arguments; exit code."""
    from tqdm import tqdm

    from app.bench import report

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        print(f"bench occlusion: unknown mode {', '.join(map(repr, bad)) or '(none)'}; choose "
              f"from {', '.join(MODES)}", file=sys.stderr)
        return 2
    if args.reps < 1 or args.frames < 1 or args.warmup < 0:
        print("bench occlusion: --reps and --frames must be >= 1, --warmup >= 0",
              file=sys.stderr)
        return 2
    runs = {m: ModeRuns(m) for m in modes}
    with tempfile.TemporaryDirectory(prefix="bench-occlusion-") as tmp:
        bar = tqdm(total=args.reps * len(modes), desc="bench occlusion", file=sys.stderr,
                   dynamic_ncols=True, disable=args.quiet)
        for rep in range(args.reps):
            for mode in modes:
                bar.set_postfix_str(f"rep {rep + 1} {mode}")
                log = Path(tmp) / f"{rep}-{mode}.csv"
                cmd = demo_command(args.scene, mode, frames=args.frames, warmup=args.warmup,
                                   size=args.size, log=log, index=args.index,
                                   objects=args.objects, no_hud=args.no_hud)
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode != 0:
                    bar.close()
                    print(f"bench occlusion: run failed ({' '.join(cmd[2:])}):\n"
                          f"{done.stderr.strip()}", file=sys.stderr)
                    return 1
                m = log_medians(log)
                r = runs[mode]
                r.frame_ms.append(m["frame_ms"])
                r.render_ms.append(m["render_ms"])
                r.occlusion_ms.append(m["occlusion_ms"])
                r.drawn.append(m["drawn"])
                bar.update(1)
        bar.close()
    scaled = f" ({args.objects:,} objects)" if args.objects else ""
    head = (f"bench occlusion: scene {args.scene}{scaled}, {args.size}, {args.frames} frames "
            f"after {args.warmup} warm-up, "
            f"{args.reps} repetitions (modes alternated), index "
            f"{args.index or 'the scene default'}{', no HUD' if args.no_hud else ''}; "
            "medians over frames, then over repetitions; ratios per repetition")
    rows = table_rows(runs)
    print(head)
    print(report.text_table(HEADERS, rows))
    if args.md:
        Path(args.md).parent.mkdir(parents=True, exist_ok=True)
        Path(args.md).write_text(f"{head}\n\n{report.md_table(HEADERS, rows)}\n")
    return 0
