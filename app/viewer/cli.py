"""``python -m app demo``: the interactive viewer, or a headless run with ``--headless``."""

from __future__ import annotations

import argparse
import os
import sys

OCCLUSION_CHOICES = ("off", "previous", "two-pass")


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 1280x720, got {text!r}") from None
    if w < 16 or h < 16 or w > 8192 or h > 8192:
        raise argparse.ArgumentTypeError(f"size out of range: {text!r}")
    return w, h


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scene", default="demo", help="scene name (scenes/NAME.toml) or a TOML path")
    p.add_argument("--index", default=None,
                   help="spatial index (default: the scene's); one of app.spatial.INDEX_NAMES")
    p.add_argument("--objects", type=int, default=None,
                   help="total object count (groups scaled proportionally)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: the scene's)")
    leafy = p.add_mutually_exclusive_group()
    leafy.add_argument("--leafy", dest="leafy", action="store_true", default=None,
                       help="leafy variant of the tree indexes")
    leafy.add_argument("--non-leafy", dest="leafy", action="store_false",
                       help="non-leafy variant of the tree indexes")
    p.add_argument("--split-threshold", type=int, default=None,
                   help="objects per node before a split (default: the index's own)")
    p.add_argument("--no-cull", action="store_true",
                   help="frustum culling off: draw every object")
    vd = p.add_mutually_exclusive_group()
    vd.add_argument("--view-distance", dest="view_distance", action="store_true", default=None,
                    help="cull objects beyond their view distance")
    vd.add_argument("--no-view-distance", dest="view_distance", action="store_false",
                    help="ignore per-object view distances")
    p.add_argument("--occlusion", choices=OCCLUSION_CHOICES, default="off",
                   help="Z-pyramid occlusion culling mode")
    p.add_argument("--ground-truth", action="store_true",
                   help="measure the true visible set with an id buffer (adds log columns; its "
                        "cost is inside render_ms and frame_ms, so time runs without it)")
    p.add_argument("--boxes", choices=("off", "depth", "outcome"), default="off",
                   help="node-box overlay at start")
    p.add_argument("--no-hud", action="store_true", help="hide the HUD text")
    p.add_argument("--record", metavar="LOG.csv", default=None,
                   help="write a frame log (one flushed CSV row per frame)")
    p.add_argument("--screenshot", metavar="OUT.png", default=None,
                   help="headless: PNG of the last frame; window: where screenshots go")
    p.add_argument("--size", type=_size, default=None, metavar="WxH",
                   help="framebuffer / window size (default 1280x720)")
    p.add_argument("--headless", action="store_true",
                   help="render offscreen through EGL along the scene's camera path and exit")
    p.add_argument("--frames", type=int, default=300,
                   help="headless: number of frames (default 300)")
    p.add_argument("--dt", type=float, default=1 / 60,
                   help="headless: simulated seconds per frame (default 1/60)")
    p.add_argument("--warmup", type=int, default=0, metavar="N",
                   help="headless: N unrecorded frames first (compiles the kernels)")
    p.add_argument("--start-time", type=float, default=0.0,
                   help="headless: camera-path time of the first frame")
    p.add_argument("--freeze-at", type=int, default=None, metavar="FRAME",
                   help="headless: freeze the culling camera at this frame")
    p.add_argument("--orbit-out", type=float, default=0.0, metavar="FACTOR",
                   help="headless: draw from a camera FACTOR times farther out than the "
                        "path's (with --freeze-at, to look at the frozen frustum)")
    p.add_argument("--no-warmup", action="store_true",
                   help="window: skip compiling every index's kernels at start-up (the first "
                        "switch to an index then waits for its compilation)")
    p.add_argument("--paused", action="store_true", help="start with motion paused")


def _has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _check_run_args(args: argparse.Namespace) -> str | None:
    """Everything that can be checked before a frame runs; a message, or None when fine."""
    import math
    from pathlib import Path

    if not (math.isfinite(args.dt) and args.dt >= 0):
        return f"--dt must be a finite number >= 0, got {args.dt}"
    if args.warmup < 0:
        return f"--warmup must be >= 0, got {args.warmup}"
    if not math.isfinite(args.start_time) or args.start_time < 0:
        return f"--start-time must be a finite number >= 0, got {args.start_time}"
    if args.freeze_at is not None and args.freeze_at < 0:
        return f"--freeze-at must be >= 0, got {args.freeze_at}"
    if not math.isfinite(args.orbit_out) or args.orbit_out < 0:
        return f"--orbit-out must be >= 0, got {args.orbit_out}"
    for flag, value, suffixes in (("--record", args.record, None),
                                  ("--screenshot", args.screenshot, (".png",))):
        if value is None:
            continue
        path = Path(value)
        if path.is_dir():
            return f"{flag} {value}: is a folder; give a file name"
        if suffixes and path.suffix.lower() not in suffixes:
            return f"{flag} {value}: expected a {' or '.join(suffixes)} file name"
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            return f"{flag} {value}: the folder {parent} does not exist"
        if not os.access(parent, os.W_OK):
            return f"{flag} {value}: the folder {parent} is not writable"
    return None


def _note_unused_tree_options(args: argparse.Namespace) -> None:
    """Say so when --leafy/--split-threshold are given for an index that has no such option."""
    from app.spatial import TREE_HEURISTICS

    given = [flag for flag, v in (("--leafy/--non-leafy", args.leafy),
                                  ("--split-threshold", args.split_threshold)) if v is not None]
    if given and args.index is not None and args.index not in TREE_HEURISTICS:
        print(f"demo: note: {' and '.join(given)} apply to the tree indexes "
              f"({', '.join(TREE_HEURISTICS)}), not to {args.index}; they are kept for when "
              "you switch to a tree", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if args.objects is not None and args.objects < 0:
        print("demo: --objects must be >= 0", file=sys.stderr)
        return 2
    if args.split_threshold is not None and args.split_threshold < 1:
        print("demo: --split-threshold must be >= 1", file=sys.stderr)
        return 2
    problem = _check_run_args(args)
    if problem:
        print(f"demo: {problem}", file=sys.stderr)
        return 2
    _note_unused_tree_options(args)
    from app.framelog import FrameLogError

    try:
        if args.headless:
            from app.viewer.headless import run_headless

            return run_headless(args)
    except (FrameLogError, OSError) as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    if not _has_display():
        print("demo: no display (DISPLAY is not set); use --headless for an offscreen run, "
              "or run under xvfb-run", file=sys.stderr)
        return 2
    from app.viewer.window import run_window

    return run_window(args)
