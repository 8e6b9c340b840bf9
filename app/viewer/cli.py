"""``python -m app demo``: the interactive viewer, or a headless run with ``--headless``.

Everything a run can be refused for is checked before anything is built or written: every
number option (type and range), the scene file (every value, the camera's view planes), the
memory the objects need, and every output path (created and removed again to prove the file
system takes it). A refusal is one line on stderr and exit status 2.

The parser and its help use plain data only (``app.viewer.catalog``, ``app.spatial.names``):
``--help`` and a bad option answer at once, without numba, even on a cold kernel cache. A
window run opens its window before anything compiles and checks the scene inside it
(``app.viewer.startup``); a headless run checks the scene first.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import math
import os
import stat
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from app.suggest import with_hint
from app.viewer.catalog import (
    INDEX_HELP,
    INDEX_NAMES,
    MAX_OBJECTS,
    list_scenes,
    scene_descriptions,
)
from app.viewer.compare_spec import GRAMMAR, CompareSpec, parse_spec
from app.viewer.keys import help_lines
from app.viewer.startup import note_unused_tree_options

OCCLUSION_CHOICES = ("off", "previous", "two-pass")
BOX_CHOICES = ("off", "depth", "outcome")

# Option ranges: past them a value is accepted by Python but breaks the run later.
MAX_SEED = 2**63 - 1
MAX_SPLIT_THRESHOLD = 10**9
MAX_FRAMES = 10**9
MAX_WARMUP = 10**6
MAX_DT = 10.0  # seconds of motion per frame
MAX_START_TIME = 1e9
MAX_ORBIT_OUT = 1000.0
SIZE_RANGE = (16, 8192)




def _int_option(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in [lo, hi] (underscores allowed: 1_000_000)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(
                f"expected an integer >= {lo:,} and <= {hi:,}, got {text}")
        return v

    parse.__name__ = "integer"
    return parse


def _threshold_option(text: str) -> int:
    """An argparse type: a split threshold in [1, MAX_SPLIT_THRESHOLD], or ``storage``
    (``heuristics.named_threshold``). Not ``paper``: leaving the option out means the
    scene's threshold first, and only then the index's own (the paper's)."""
    from app.spatial.aabbtree.heuristics import named_threshold  # (numba: only when given)

    try:
        v = named_threshold(text, MAX_SPLIT_THRESHOLD)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v is None:
        raise argparse.ArgumentTypeError("expected storage or an integer (leave the option out "
                                         "for the scene's threshold, else the index's own)")
    return v


def _index_option(text: str) -> str:
    """An argparse type: one of INDEX_NAMES, with "did you mean" for a near miss."""
    if text not in INDEX_NAMES:
        raise argparse.ArgumentTypeError(
            with_hint(f"unknown index {text!r}", text, INDEX_NAMES)
            + f" (choose from {', '.join(INDEX_NAMES)})")
    return text


def _compare_option(text: str) -> CompareSpec:
    """An argparse type: a B index spec (:mod:`app.viewer.compare_spec`)."""
    try:
        return parse_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _float_option(lo: float, hi: float) -> Callable[[str], float]:
    """An argparse type: a finite number in [lo, hi]."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (math.isfinite(v) and lo <= v <= hi):
            raise argparse.ArgumentTypeError(
                f"expected a finite number >= {lo:g} and <= {hi:g}, got {text}")
        return v

    parse.__name__ = "number"
    return parse


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 1280x720, got {text!r}") from None
    lo, hi = SIZE_RANGE
    if not (lo <= w <= hi and lo <= h <= hi):
        raise argparse.ArgumentTypeError(
            f"size out of range: {text!r} (each side {lo} to {hi} pixels)")
    return w, h


def _key_lines() -> list[str]:
    """The window's key list (what F1 shows in the window, from the same table)."""
    return help_lines("KEYS (in the window; F1 shows them there too)")


def epilog() -> str:
    """The text after the options in ``demo --help``: scenes, indexes, keys."""
    scenes = scene_descriptions()
    width = max((len(n) for n in scenes), default=0) + 2
    lines = ["SCENES (--scene NAME, from scenes/NAME.toml; or --scene path/to/file.toml)"]
    for n, d in scenes.items():
        lines += textwrap.wrap(d, 96, initial_indent=f"  {n:<{width}}",
                               subsequent_indent=" " * (width + 2)) or [f"  {n}"]
    names = INDEX_NAMES
    width = max((len(n) for n in names), default=0) + 2
    lines += ["", "INDEXES (--index NAME; I / Shift+I switch in the window)"]
    lines += [f"  {n:<{width}}{INDEX_HELP.get(n, '')}".rstrip() for n in names]
    lines += ["", *_key_lines(), "", "docs/viewer.md: every option and key; docs/scenes.md: "
              "the scene file format."]
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The demo options; the help ends with the scenes, the indexes and the window's keys."""
    names = INDEX_NAMES
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = epilog()
    p.add_argument("--scene", default="demo", metavar="NAME|PATH",
                   help=f"scene: {', '.join(list_scenes())} (listed below), or a TOML file "
                        "(default demo)")
    p.add_argument("--index", default=None, type=_index_option, metavar="NAME",
                   help=f"spatial index: {', '.join(names)} (default: the scene's)")
    p.add_argument("--collision-index", default=None, type=_index_option, metavar="NAME",
                   help="collision index of a scene with colliding balls (collide): one of "
                        f"{', '.join(names)} (default: the scene's, else the fastest measured; "
                        "U / Shift+U switch in the window)")
    p.add_argument("--objects", type=_int_option(0, MAX_OBJECTS), default=None, metavar="N",
                   help="total object count (groups scaled proportionally; refused when it "
                        "would not fit in memory)")
    p.add_argument("--seed", type=_int_option(0, MAX_SEED), default=None, metavar="S",
                   help="random seed (default: the scene's)")
    leafy = p.add_mutually_exclusive_group()
    leafy.add_argument("--leafy", dest="leafy", action="store_true", default=None,
                       help="leafy variant of the tree indexes")
    leafy.add_argument("--non-leafy", dest="leafy", action="store_false",
                       help="non-leafy variant of the tree indexes")
    p.add_argument("--split-threshold", type=_threshold_option, default=None,
                   metavar="N", help="objects per node before a split, or storage (the value "
                   "measured on the trees' contiguous storage; default: the scene's, else the "
                   "index's own, the paper's)")
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
    p.add_argument("--boxes", choices=BOX_CHOICES, default="off",
                   help="node-box overlay at start")
    p.add_argument("--no-hud", action="store_true", help="hide the HUD text")
    p.add_argument("--record", metavar="LOG.csv", default=None,
                   help="write a frame log (one flushed CSV row per frame); missing folders "
                        "are created")
    p.add_argument("--screenshot", metavar="OUT.png", default=None,
                   help="headless: PNG of the last frame; window: where screenshots go")
    p.add_argument("--size", type=_size, default=None, metavar="WxH",
                   help="framebuffer / window size (default 1280x720)")
    p.add_argument("--headless", action="store_true",
                   help="render offscreen through EGL along the scene's camera path and exit")
    p.add_argument("--frames", type=_int_option(1, MAX_FRAMES), default=300, metavar="N",
                   help="headless: number of frames (default 300)")
    p.add_argument("--dt", type=_float_option(0.0, MAX_DT), default=1 / 60, metavar="SECONDS",
                   help="headless: simulated seconds per frame (default 1/60)")
    p.add_argument("--warmup", type=_int_option(0, MAX_WARMUP), default=0, metavar="N",
                   help="headless: N unrecorded frames first (compiles the kernels)")
    p.add_argument("--start-time", type=_float_option(0.0, MAX_START_TIME), default=0.0,
                   metavar="SECONDS", help="headless: camera-path time of the first frame")
    p.add_argument("--freeze-at", type=_int_option(0, MAX_FRAMES), default=None,
                   metavar="FRAME", help="headless: freeze the culling camera at this frame")
    p.add_argument("--orbit-out", type=_float_option(0.0, MAX_ORBIT_OUT), default=0.0,
                   metavar="FACTOR",
                   help="headless: draw from a camera FACTOR times farther out than the "
                        "path's (with --freeze-at, to look at the frozen frustum)")
    p.add_argument("--dump-frame", type=_int_option(0, MAX_FRAMES), default=None,
                   metavar="FRAME",
                   help="headless: write frame FRAME (0 is the first recorded frame, as in the "
                        "log's frame column) as JSON: the scene's settings, the index and its "
                        "parameters, the toggles, the cameras, the frame's counts and every "
                        "index node with its box, depth and outcome (in the window: J)")
    p.add_argument("--dump-path", metavar="FRAME.json", default=None,
                   help="where --dump-frame writes (default out/inspect/SCENE-frame-N.json); "
                        "in the window, J's file (then NAME-2.json ...)")
    p.add_argument("--compare", type=_compare_option, default=None, metavar="SPEC",
                   help=f"A/B: a second index ({GRAMMAR}, e.g. kd/non-leafy; what it leaves "
                        "out is --index's) culls the same frames as the drawn one, not "
                        "drawn; the HUD shows both costs and B/A, a report is written on exit "
                        "(F2 cycles B in the window). occlusion=MODE (off, previous, two-pass): "
                        "B culls in that mode with pyramids of what it draws, e.g. "
                        "--occlusion previous --compare occlusion=two-pass (F3 in the window)")
    p.add_argument("--compare-report", metavar="REPORT.md", default=None,
                   help="where the A/B report goes (markdown, and the same tables as CSV beside "
                        "it); default: beside --record's log (LOG-compare.md), else "
                        "out/logs/compare-SCENE-DATE-TIME.md")
    p.add_argument("--no-warmup", action="store_true",
                   help="accepted for older scripts; the start compiles only what the first "
                        "frame needs (another index compiles when first selected, with its "
                        "progress shown; `python -m app warm` compiles everything ahead)")
    p.add_argument("--paused", action="store_true", help="start with motion paused")


def _has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _shown(value: str) -> str:
    """A path as it goes into a one-line message (a very long one shortened)."""
    return value if len(value) <= 100 else f"{value[:60]}...{value[-30:]} ({len(value)} characters)"


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "the file system refuses a name that long"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a folder"
    return (exc.strerror or str(exc)).lower()


def output_problem(flag: str, value: str, suffixes: tuple[str, ...] | None = None) -> str | None:
    """Why ``value`` cannot be written as a new or replaced file, or None.

    A file that does not exist yet is created, with any missing folders, and removed again:
    only the file system knows every name it refuses. Nothing is left behind either way.
    """
    if not value.strip():
        return f"{flag}: an empty file name"
    shown = _shown(value)
    if "\0" in value:
        return f"{flag} {shown!r}: a file name cannot contain a NUL character"
    path = Path(value)
    if value.endswith(("/", os.sep)):
        return f"{flag} {shown}: names a folder; give a file name"
    if suffixes and path.suffix.lower() not in suffixes:
        return f"{flag} {shown}: expected a {' or '.join(suffixes)} file name"
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        return f"{flag} {shown}: {_os_reason(exc)}"
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            return f"{flag} {shown}: is a folder; give a file name"
        try:
            if stat.S_ISREG(st.st_mode):  # opened without truncating: the file is unchanged
                os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
            elif not os.access(path, os.W_OK):
                return f"{flag} {shown}: is not writable"
        except OSError as exc:
            return f"{flag} {shown}: cannot write it: {_os_reason(exc)}"
        return None
    created: list[Path] = []
    try:
        missing: list[Path] = []
        parent = path.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        if not parent.is_dir():
            return f"{flag} {shown}: {parent} is a file, not a folder"
        for folder in reversed(missing):
            os.mkdir(folder)
            created.append(folder)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.unlink(path)
    except OSError as exc:
        where = exc.filename if exc.filename and exc.filename != value else None
        what = f"the folder {_shown(str(where))}" if where else "it"
        return f"{flag} {shown}: cannot create {what}: {_os_reason(exc)}"
    finally:
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                os.rmdir(folder)
    return None


def default_dump_path(scene: str, frame: int) -> str:
    """``--dump-frame``'s file without ``--dump-path``: out/inspect/SCENE-frame-N.json (a
    scene given as a file path is named by the file's stem)."""
    return str(Path("out") / "inspect" / f"{Path(scene).stem or 'scene'}-frame-{frame}.json")


def _dump_problem(args: argparse.Namespace) -> str | None:
    """Why ``--dump-frame`` cannot be done as asked, or None; a headless run's default
    dump path is filled in (and checked with the other outputs)."""
    if args.dump_frame is None:
        return None
    if not args.headless:
        return (f"--dump-frame {args.dump_frame}: only with --headless (in the window, J "
                "writes the current frame)")
    if args.dump_frame >= args.frames:
        return (f"--dump-frame {args.dump_frame}: expected a frame before --frames "
                f"{args.frames} (frames are numbered from 0)")
    if args.dump_path is None:
        args.dump_path = default_dump_path(args.scene, args.dump_frame)
    return None


def _compare_problem(args: argparse.Namespace) -> str | None:
    """Why the A/B options cannot be done as asked, or None."""
    if getattr(args, "compare_report", None) is not None and args.headless and \
            getattr(args, "compare", None) is None:
        return ("--compare-report: a headless run compares only with --compare SPEC (in the "
                "window, F2 starts a comparison)")
    return None


def _check_run_args(args: argparse.Namespace) -> str | None:
    """Checks across options and of output paths; a message, or None when fine."""
    if args.headless and args.freeze_at is not None and args.freeze_at >= args.frames:
        return (f"--freeze-at {args.freeze_at}: expected a frame before --frames "
                f"{args.frames}, or the culling camera never freezes")
    problem = _dump_problem(args) or _compare_problem(args)
    if problem:
        return problem
    report = getattr(args, "compare_report", None)
    outputs = [(f, v, s) for f, v, s in (("--record", args.record, None),
                                         ("--screenshot", args.screenshot, (".png",)),
                                         ("--dump-path", args.dump_path, (".json",)),
                                         ("--compare-report", report, (".md",)))
               if v is not None]
    if report is not None:  # the CSV beside the report
        outputs.append(("--compare-report", str(Path(report).with_suffix(".csv")), None))
    for i, (f1, v1, _) in enumerate(outputs):
        for f2, v2, _ in outputs[i + 1:]:
            if os.path.abspath(v1) == os.path.abspath(v2):
                return f"{f1} and {f2} name the same file {_shown(v1)}"
    for flag, value, suffixes in outputs:
        problem = output_problem(flag, value, suffixes)
        if problem:
            return problem
    return None


def run(args: argparse.Namespace) -> int:
    """Check everything that can be checked, then run headless or open the window.

    The options and output paths are checked first (instant). A headless run then checks the
    scene before it starts; the window opens first and checks the scene inside it, so that
    the user sees a window at once (``app.viewer.window``).
    """
    if not args.headless and not _has_display():
        print("demo: no display (DISPLAY is not set); use --headless for an offscreen run, "
              "or run under xvfb-run", file=sys.stderr)
        return 2
    problem = _check_run_args(args)
    if problem:
        print(f"demo: {problem}", file=sys.stderr)
        return 2
    if args.headless:
        from app.framelog import FrameLogError
        from app.viewer.headless import run_headless

        try:
            return run_headless(args)
        except (FrameLogError, OSError) as exc:
            print(f"demo: {exc}", file=sys.stderr)
            return 2
    note_unused_tree_options(args)
    from app.viewer.window import run_window

    return run_window(args)
