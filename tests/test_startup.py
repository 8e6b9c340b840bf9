"""A first start that does not leave the user waiting in the dark (issue 23, item 4).

``--help`` and a bad option answer at once without loading numba, even with an empty kernel
cache; a start on an empty cache says what compiles at least once a second (stderr, and the
window opens at once); Ctrl-C at any moment is one line and status 130. The plain-data
catalogues the help reads match what they stand for.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.viewer.startup import Progress, TerminalTicker

ROOT = Path(__file__).resolve().parents[1]
PROGRESS_MARKS = ("compiling kernels:", "starting:")
#: A cold headless start: small, so that it compiles little beyond the start-up itself.
COLD_RUN = ["demo", "--headless", "--frames", "1", "--size", "64x64", "--objects", "2000",
            "--index", "brute"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment with an empty kernel cache of its own."""
    return dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), **extra)


class Lines:
    """A child's stderr (or ``stream``), line by line, each with the time it arrived (a reader
    thread)."""

    def __init__(self, proc: subprocess.Popen, stream=None) -> None:
        self.proc = proc
        self.stream = stream if stream is not None else proc.stderr
        self.t0 = time.monotonic()
        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.stream:
            self.lines.append((time.monotonic() - self.t0, line.rstrip("\n")))

    def wait_for(self, check, timeout: float, since: float = 0.0) -> tuple[float, str]:
        """(time, line) of the first line ``check`` accepts, arrived ``since`` s or later."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, line in list(self.lines):
                if t >= since and check(line):
                    return t, line
            if self.proc.poll() is not None:
                self._thread.join(5)
                for t, line in list(self.lines):
                    if t >= since and check(line):
                        return t, line
                break
            time.sleep(0.05)
        pytest.fail("no such line; stderr so far:\n" + "\n".join(s for _, s in self.lines))

    def finish(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        self._thread.join(5)
        return code

    def text(self) -> str:
        return "\n".join(s for _, s in self.lines)


def _spawn(args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> Lines:
    proc = subprocess.Popen([sys.executable, "-m", "app", *args], cwd=tmp_path,
                            env=env or _env(tmp_path), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return Lines(proc)


def _is_progress(line: str) -> bool:
    return any(m in line for m in PROGRESS_MARKS)


# ---------------------------------------------------------------------------- help


HELP_PROBE = r"""
import sys
from app.cli import build_parser
for sub in ("demo", "bench", "plot", "warm"):
    parser = build_parser(sub)
    parser.format_help()
    next(a for a in parser._actions if a.dest == "command").choices[sub].format_help()
heavy = sorted(m for m in sys.modules
               if m.split(".")[0] in ("numba", "llvmlite", "moderngl", "pyglet")
               or (m.startswith(("app.spatial", "app.scene", "app.culling", "app.geom",
                                 "app.render", "app.viewer.frame", "app.viewer.viewer"))
                   and m != "app.spatial.names"))
print("HEAVY", heavy)
"""


def test_the_parsers_and_their_help_load_no_kernel_module(tmp_path):
    """Every subcommand's parser and help text come from plain data: numba, the indexes,
    the scenes and OpenGL are not even imported."""
    r = subprocess.run([sys.executable, "-c", HELP_PROBE], cwd=ROOT, env=_env(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout, r.stdout


#: ``python -m app ARGS`` that reports at exit which heavy modules it imported.
HEAVY_IMPORTS = """
import atexit, runpy, sys
heavy = ("numba", "moderngl", "pyglet", "matplotlib")
atexit.register(lambda: print("heavy imports:", [m for m in heavy if m in sys.modules],
                              file=sys.stderr))
sys.argv = ["app"] + sys.argv[1:]
runpy.run_module("app", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(("args", "code"), [
    (["--help"], 0), (["demo", "--help"], 0), (["bench", "--help"], 0), (["plot", "--help"], 0),
    (["warm", "--help"], 0), (["demo", "--index", "nope"], 2),
    (["demo", "--headless", "--frames", "0"], 2), (["demo", "--no-such-option"], 2),
])
def test_help_and_bad_options_answer_at_once_on_an_empty_cache(tmp_path, args, code):
    """At once, judged by what the answer loads, not by a clock (a timed assertion fails on
    a loaded machine): neither numba nor OpenGL nor matplotlib is imported, nothing compiled.
    On a quiet machine that is 0.1-0.2 s."""
    r = subprocess.run([sys.executable, "-c", HEAVY_IMPORTS, *args], cwd=tmp_path,
                       env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.splitlines()[-1] == "heavy imports: []", r.stderr
    assert not list((tmp_path / "numba").rglob("*.nbi")), "something was compiled"


def test_the_catalogues_match_the_indexes_scenes_and_keys():
    from app import spatial
    from app.scene import scene as scene_module
    from app.viewer import catalog
    from app.viewer.keys import help_lines
    from app.viewer.overlays import HELP_LINES

    assert catalog.INDEX_NAMES == spatial.INDEX_NAMES == tuple(spatial._REGISTRY)
    assert catalog.TREE_HEURISTICS == spatial.TREE_HEURISTICS
    assert set(catalog.INDEX_HELP) == set(catalog.INDEX_NAMES)
    assert list(HELP_LINES) == help_lines()
    assert catalog.SCENES_DIR == scene_module.SCENES_DIR
    assert catalog.list_scenes() == scene_module.list_scenes()
    assert catalog.scene_descriptions() == scene_module.scene_descriptions()
    assert catalog.MAX_OBJECTS == scene_module.MAX_OBJECTS


# ---------------------------------------------------------------------------- progress


def test_the_ticker_speaks_every_second_and_not_during_a_silent_check():
    """Quiet steps print only while numba compiles (a refusal stays one line on a warm
    cache); afterwards a line comes at least every ``every`` seconds, naming the kernel."""
    p = Progress("compiling kernels", ["checking the scene", "octree index: build"])
    out = io.StringIO()
    ticker = TerminalTicker(p, out, every=0.3, quiet_steps=1).start()
    try:
        p.begin(0)
        time.sleep(0.8)
        assert out.getvalue() == ""
        p.compile_started("spatial.nested.groups.refresh")
        time.sleep(0.8)
        assert "refresh" in out.getvalue()
        p.compile_ended("spatial.nested.groups.refresh")
        p.begin(1)
        time.sleep(1.0)
    finally:
        ticker.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 4, lines
    assert lines[-1].startswith("demo: compiling kernels: octree index: build (2 of 2)")
    assert "1 kernel compiled" in lines[-1]


@pytest.mark.thorough  # compiles a whole first frame (about 40 s); the Ctrl-C test below
# checks the first lines of the same start in the everyday tier
def test_headless_start_on_an_empty_cache_reports_at_least_every_second(tmp_path):
    run = _spawn(COLD_RUN, tmp_path)
    code = run.finish(timeout=900)
    assert code == 0, run.text()
    assert "Traceback" not in run.text()
    times = [t for t, line in run.lines if _is_progress(line)]
    assert times, run.text()
    first_frame = next(t for t, line in run.lines if "first frame at" in line)
    assert times[0] < 4.0, run.text()  # numba's import, then the first compile
    gaps = [b - a for a, b in zip(times, [*times[1:], first_frame], strict=True)]
    assert max(gaps) < 2.5, (gaps, run.text())  # a line a second, with room for a busy machine
    assert any("kernels compiled" in line for _, line in run.lines)


# ---------------------------------------------------------------------------- Ctrl-C


def _interrupted_cleanly(run: Lines, code: int) -> None:
    text = run.text()
    assert code == 130, text
    assert "Traceback" not in text, text
    others = [line for _, line in run.lines if line.strip() and not _is_progress(line)]
    assert others == ["demo: interrupted"], text


def test_ctrl_c_while_kernels_compile_is_one_line_and_130(tmp_path):
    """A cold start says what compiles from its first second on, a line a second; Ctrl-C in
    the middle of it is one line and status 130."""
    run = _spawn(COLD_RUN, tmp_path)
    t_signal, _ = run.wait_for(lambda line: "kernels compiled" in line, timeout=120, since=4.5)
    run.proc.send_signal(signal.SIGINT)
    _interrupted_cleanly(run, run.finish(timeout=30))
    times = [t for t, line in run.lines if _is_progress(line) and t <= t_signal]
    assert times[0] < 4.0, run.text()  # numba's import, then the first compile
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) < 2.5, run.text()


def test_ctrl_c_while_modules_load_is_one_line_and_130(tmp_path):
    run = _spawn(COLD_RUN, tmp_path)
    time.sleep(0.6)  # past the interpreter's own start, into the imports
    run.proc.send_signal(signal.SIGINT)
    _interrupted_cleanly(run, run.finish(timeout=30))


# ---------------------------------------------------------------------------- the window


def _xvfb(tmp_path: Path):
    """An Xvfb server on a display number it picks itself; (process, DISPLAY)."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed")
    r, w = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "1280x800x24",
                             "-nolisten", "tcp"], pass_fds=(w,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as fh:
        number = fh.readline().strip()
    if not number:
        proc.kill()
        pytest.skip("Xvfb did not start")
    return proc, f":{number}"


def test_the_window_opens_at_once_and_ctrl_c_while_it_compiles_is_130(tmp_path):
    xvfb, display = _xvfb(tmp_path)
    try:
        args = ["demo", "--size", "320x180", "--objects", "2000", "--index", "brute"]
        proc = subprocess.Popen([sys.executable, "-m", "app", *args], cwd=tmp_path,
                                env=_env(tmp_path, DISPLAY=display), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        run = Lines(proc, proc.stdout)  # stdout and stderr together
        t_open, _ = run.wait_for(lambda line: line.startswith("demo: window "), timeout=60)
        assert t_open < 5.0, run.text()  # before anything compiles
        run.wait_for(lambda line: "kernel" in line and "compiled" in line, timeout=120)
        assert not any("first frame at" in line for _, line in run.lines)
        proc.send_signal(signal.SIGINT)
        code = run.finish(timeout=30)
        text = run.text()
        assert code == 130 and "Traceback" not in text, text
        assert text.splitlines()[-1] == "demo: interrupted", text
    finally:
        xvfb.terminate()
        xvfb.wait(10)


# ---------------------------------------------------------------------------- warm


def test_warm_if_needed_is_a_quick_check_once_stamped(tmp_path, monkeypatch):
    """``warm --if-needed`` (what run.sh calls before the viewer) returns at once, compiling
    nothing, when the stamp of the current sources is in the cache folder."""
    from app.viewer import warm

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    stamp = warm.stamp_path()
    assert stamp is not None and not warm.is_warm()
    stamp.parent.mkdir(parents=True, exist_ok=True)  # the kernels' stamp left its memo there
    stamp.write_text("test\n")
    assert warm.is_warm()
    # Judged by what it wrote, not by a clock: a timed assertion fails on a loaded machine.
    r = subprocess.run([sys.executable, "-m", "app", "warm", "--if-needed"], cwd=tmp_path,
                       env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    folder = tmp_path / "numba"
    assert [p.name for p in folder.iterdir() if p.name.startswith(warm.STAMP_PREFIX)] == \
        [stamp.name]
    assert not list(folder.rglob("*.nbi")), "the check compiled or cached a kernel"


def test_run_sh_warms_before_the_viewer_when_needed():
    text = (ROOT / "scripts" / "run.sh").read_text()
    assert "-m app warm --if-needed" in text
    assert text.index("warm --if-needed") < text.index("-m app demo")


def test_a_flat_scene_never_imports_the_nested_index(tmp_path):
    """The viewer's modules import the nested index only for a hierarchical scene: importing
    it compiles its typed entry points (10-15 s on an empty cache), which a flat scene's
    first frame must not wait for."""
    code = ("import sys, app.viewer.viewer, app.viewer.headless, app.viewer.startup, "
            "app.culling.pipeline; print(sorted(m for m in sys.modules "
            "if m.startswith('app.spatial.nested')))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(tmp_path),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
