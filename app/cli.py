"""Command line: ``python -m app {demo,bench,plot,warm}`` (contract in design.md).

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; modules load only when their subcommand runs, so ``plot`` never
compiles an index and ``bench`` never opens OpenGL (``bench occlusion`` runs the viewer in
child processes), and no parser needs numba: ``--help`` answers at once on a cold cache.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("app.viewer.cli", "open the viewer (or render headless with --headless)"),
    "bench": ("app.bench.cli", "run the benchmarks (index, paper, occlusion)"),
    "plot": ("app.plot", "plot one or more frame logs"),
    "warm": ("app.viewer.warm", "compile every kernel into the cache ahead of use (run.sh "
                                "does it once after installing)"),
}


EPILOG = """\
python -m app demo --help     lists the scenes, the indexes and the window's keys
python -m app bench --help    the benchmarks
python -m app warm            compile the kernels ahead (a first start otherwise compiles
                              what it uses, with its progress shown)

examples:
  python -m app demo                                 window on the demo scene (F1: keys)
  python -m app demo --scene city --occlusion two-pass
  python -m app demo --headless --frames 300 --record out/run.csv --screenshot out/run.png
  python -m app plot out/run.csv -o out/run-plot.png"""


class OneLineErrorParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (exit status 2), with a
    pointer to ``--help`` instead of the whole usage block."""

    def error(self, message: str):  # type: ignore[override]
        """Print ``prog: message (see prog --help)`` and exit 2."""
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The full parser; only the selected subcommand's module is imported."""
    parser = OneLineErrorParser(
        prog="python -m app",
        description="Real-time visibility-culling viewer and spatial-index benchmarks.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == selected:
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns the exit status.

    Ctrl-C is one line on stderr (``demo: interrupted``) and status 130 at any moment: while
    modules load and kernels compile it ends the process at once (a KeyboardInterrupt inside
    numba's compiler would print hundreds of lines of traceback); ``bench`` and ``plot`` then
    get an ordinary KeyboardInterrupt so that they can close their files, the viewer installs
    its own handling for its frame loops, and ``warm`` keeps ending at once.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in argv if a in SUBCOMMANDS), None)
    from app.viewer.startup import install_interrupt_exit

    prog = selected or "python -m app"
    previous = install_interrupt_exit(prog)
    try:
        parser = build_parser(selected)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        module = importlib.import_module(SUBCOMMANDS[args.command][0])
        if args.command not in ("demo", "warm") and previous is not None:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return int(module.run(args) or 0)
        except KeyboardInterrupt:
            print(f"{prog}: interrupted", file=sys.stderr, flush=True)
            return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
