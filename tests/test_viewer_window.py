"""A real window under Xvfb, driven with xdotool: keys, recording, screenshots, closing,
held keys, Ctrl-C, and the session files a run without names writes under out/.

Each test starts its own Xvfb (tests/xvfb_display.py: the server picks a free display number
itself, so parallel workers never race for one) and the viewer directly on it. The window is
not searched for: the viewer prints ``demo: first frame at T s (window ID)`` once its first
frame is on screen, and keys go to that window id from then on, so none is lost to a window
that is not listening yet. (The viewer also drops keys while an index new to the run
compiles: after I the test waits for the switch in the log before the next key.)

Every wait fails within a minute, or three where numba may compile an index's kernels on a
cold cache (the first frame, a switch of index), and shows the viewer's last output; a viewer
that exits fails the wait at once.

CI installs xvfb and xdotool (.ci/run); the tests skip only when Xvfb is absent.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn, TypeVar

import numpy as np
import pytest

from tests.hud_reader import read_hud
from tests.xvfb_display import XvfbDisplay, XvfbError, xvfb_installed

ROOT = Path(__file__).resolve().parents[1]

# numba compiles an index's kernels on its first use when the kernel cache is cold (after any
# edit of app/): the start-up (first frame) and a switch to another index then take 20-50 s on
# two busy cores; with a warm cache they take under a second. Only those waits get minutes.
COMPILE_S = 180.0
ROWS_S = 60.0  # log rows after other keys
FILE_S = 30.0  # a screenshot or log file to appear
EXIT_S = 30.0  # Escape / Ctrl-C to the end of the process

FIRST_FRAME = re.compile(r"^demo: first frame at [0-9.]+ s \(window (\d+)\)$", re.MULTILINE)

T = TypeVar("T")

pytestmark = [
    pytest.mark.xvfb,
    pytest.mark.skipif(not xvfb_installed(), reason="Xvfb is not installed"),
]


class WindowViewer:
    """``python -m app demo --no-warmup ...`` on an Xvfb display, its output in a file."""

    def __init__(self, display: XvfbDisplay, out: Path, args: Sequence[str], cwd: Path) -> None:
        if shutil.which("xdotool") is None:
            pytest.fail("xdotool is missing (CI installs it with xvfb)")
        self.env = display.env
        self.out_path = out
        self.window = ""
        # --no-warmup: compile (or load) only the index in use, not every index at start-up
        # (the viewer's default since its start-up moved into the window; kept explicit).
        cmd = [sys.executable, "-m", "app", "demo", "--no-warmup", *args]
        with open(out, "wb") as fh:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(cmd, cwd=cwd, env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=fh, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    # ------------------------------------------------------------------ output and waiting

    def text(self) -> str:
        """Everything the viewer printed so far (stdout and stderr)."""
        return self.out_path.read_text(errors="replace")

    def output(self) -> str:
        """The viewer's last output, for failure messages."""
        return self.text()[-3000:]

    def fail(self, why: str) -> NoReturn:
        pytest.fail(f"{why}\n--- viewer output (pid {self.proc.pid}, exit code "
                    f"{self.proc.poll()}), last lines:\n{self.output()}")

    def wait_until(self, check: Callable[[], T | None], timeout: float, what: str) -> T:
        """Poll ``check`` until it returns something other than None; fail after ``timeout``
        seconds, or at once when the viewer exits first."""
        deadline = time.monotonic() + timeout
        while True:
            got = check()
            if got is not None:
                return got
            if self.proc.poll() is not None:
                got = check()  # it may have arrived just before the exit
                if got is not None:
                    return got
                self.fail(f"the viewer exited while waiting for {what}")
            if time.monotonic() > deadline:
                self.fail(f"no {what} within {timeout:.0f} s")
            time.sleep(0.1)

    def wait_first_frame(self, timeout: float = COMPILE_S) -> str:
        """The window id, once the viewer says its first frame is on screen."""
        m = self.wait_until(lambda: FIRST_FRAME.search(self.text()), timeout,
                            "'demo: first frame' line")
        self.window = m.group(1)
        return self.window

    def wait_rows(self, path: Path, rows: int, timeout: float = ROWS_S) -> int:
        """Wait until the log at ``path`` has ``rows`` rows; their number."""
        return self.wait_until(lambda: (n if (n := _rows(path)) >= rows else None), timeout,
                               f"{rows} rows in {path.name} (has {_rows(path)})")

    def wait_more_rows(self, path: Path, more: int, timeout: float = ROWS_S) -> int:
        """Wait for ``more`` frames to be logged after now (keys sent are handled by then)."""
        return self.wait_rows(path, _rows(path) + more, timeout)

    def wait_file(self, path: Path, timeout: float = FILE_S) -> Path:
        """Wait for ``path`` to exist and be non-empty."""
        return self.wait_until(
            lambda: path if path.exists() and path.stat().st_size > 0 else None, timeout,
            f"file {path}")

    def wait_exit(self, timeout: float = EXIT_S) -> int:
        """The exit code, once the viewer has ended."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(f"the viewer did not exit within {timeout:.0f} s")

    # ------------------------------------------------------------------ input

    def xdotool(self, *args: str) -> None:
        r = subprocess.run(["xdotool", *args], env=self.env, capture_output=True, text=True,
                           timeout=10)
        if r.returncode != 0:
            self.fail(f"xdotool {' '.join(args)} failed: {r.stderr.strip()}")

    def key(self, *keys: str, pause: float = 0.1) -> None:
        """Press and release each key in the window, ``pause`` seconds apart."""
        assert self.window, "wait_first_frame() first"
        for k in keys:
            self.xdotool("key", "--window", self.window, k)
            time.sleep(pause)

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the viewer process itself (it runs without a wrapper)."""
        os.kill(self.proc.pid, signal.SIGINT)

    def stop(self) -> None:
        """Kill the viewer's process group if it still runs."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def display(tmp_path: Path) -> Iterator[XvfbDisplay]:
    """A private Xvfb for this test, killed at the end."""
    try:
        d = XvfbDisplay(tmp_path / "xvfb.log")
    except XvfbError as exc:
        pytest.fail(str(exc))
    with d:
        yield d


@pytest.fixture
def launch(display: XvfbDisplay, tmp_path: Path) -> Iterator[Callable[..., WindowViewer]]:
    """Start viewers on this test's display; any still running are killed at the end."""
    started: list[WindowViewer] = []

    def start(*args: str, cwd: Path = ROOT) -> WindowViewer:
        v = WindowViewer(display, tmp_path / f"viewer-{len(started) + 1}.out", args, cwd)
        started.append(v)
        return v

    yield start
    for v in started:
        v.stop()


def _rows(path: Path) -> int:
    return max(path.read_text().count("\n") - 1, 0) if path.exists() else 0


def _last_cell(path: Path, column: str) -> str | None:
    """``column`` of the last whole row of a frame log (None before the first row)."""
    lines = path.read_text().split("\n")[:-1] if path.exists() else []  # whole lines only
    if len(lines) < 2:
        return None
    header, last = next(csv.reader(lines[:1])), next(csv.reader(lines[-1:]))
    return last[header.index(column)]


def _image(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB")).astype(np.int16)


def _check_png(path: Path) -> None:
    assert path.exists() and path.stat().st_size > 0, f"no screenshot {path}"
    img = _image(path)
    assert img.shape[0] > 100 and img.shape[1] > 100
    assert img.std() > 2.0, "screenshot is a uniform colour"


def test_window_keys_recording_screenshot_and_close(tmp_path, launch):
    from app.framelog import CONTRACT_COLUMNS, read_log
    from app.spatial import INDEX_NAMES

    log, shot = tmp_path / "win.csv", tmp_path / "shot.png"
    v = launch("--scene", "demo", "--objects", "2000", "--record", str(log),
               "--screenshot", str(shot), "--size", "640x360", "--index", "brute")
    v.wait_first_frame()
    v.wait_rows(log, 3)
    # Each group of keys is followed by a wait for frames, so that keys are not all handled
    # between the same two frames.
    for group in (["i"], ["i"], ["b", "b", "F1"], ["F1", "b", "l", "plus", "minus"],
                  ["f", "f", "v", "v", "z", "w", "z", "p", "p", "h", "h", "g"]):
        before = _last_cell(log, "index")
        v.key(*group)
        if group == ["i"] and len(INDEX_NAMES) > 1:
            # An index new to this run compiles on a worker thread; the window draws no
            # frames and drops keys until it is ready. Wait for the logged switch itself,
            # not for frames that may have come before the key was handled.
            v.wait_until(lambda b=before: lab if (lab := _last_cell(log, "index")) != b
                         else None, COMPILE_S, f"the switch from index {before} in {log.name}")
        # L switches to the other variant, which may compile kernels too.
        v.wait_more_rows(log, 2, COMPILE_S if "l" in group else ROWS_S)
    v.key("F12")
    v.wait_file(shot)
    v.key("r")  # stop recording
    v.key("r")  # start again: a new file, the first is kept
    v.wait_rows(tmp_path / "win-2.csv", 2)
    v.key("k")  # second screenshot
    v.wait_file(tmp_path / "shot-2.png")
    v.key("Escape")
    assert v.wait_exit() == 0, v.output()
    data = read_log(log)
    assert list(data)[: len(CONTRACT_COLUMNS)] == list(CONTRACT_COLUMNS)
    assert len(data["frame"]) >= 3
    labels = list(dict.fromkeys(data["index"]))
    assert labels[0] == "brute"
    if len(INDEX_NAMES) > 1:
        assert len(labels) >= 2, f"index switch not in the log: {labels}"
    second = tmp_path / "win-2.csv"
    assert second.exists(), "the restarted recording wrote no new log"
    assert len(read_log(second)["frame"]) >= 1
    _check_png(shot)
    _check_png(tmp_path / "shot-2.png")
    # G drew the frame graph: its 16.7 ms budget line is a long green row in the lower right
    img = _image(shot)
    h, w = img.shape[:2]
    corner = img[h // 2:, w // 2:]
    green = (corner[..., 1] > corner[..., 0] + 40) & (corner[..., 1] > corner[..., 2] + 40)
    assert green.sum(axis=1).max() >= 100, "no frame graph (G) in the screenshot"
    # the HUD's numbers add up: its timing lines (beside the screenshot as text) are stages
    # summing to the frame time, fps is 1000 / frame ms, and they are that frame's log row
    from app.framelog import TIME_STAGES
    from tests.test_viewer_parts import parse_timing

    fps, frame, parts, n = parse_timing(shot.with_suffix(".hud.txt").read_text().splitlines())
    assert abs(sum(parts.values()) - frame) <= 0.005 * len(parts)
    assert abs(fps - 1000 / frame) <= 0.05 + 5.0 / frame**2
    row = list(data["frame"]).index(n)
    assert abs(float(data["frame_ms"][row]) - frame) <= 0.0051
    for col, label, _ in TIME_STAGES:
        if label in parts:
            assert abs(float(data[col][row]) - parts[label]) <= 0.0051, label
    assert data["present_ms"][row] > 0, "the window's swap is not timed"


def test_held_keys_fly_the_camera_and_ctrl_c_leaves_a_parseable_log(tmp_path, launch):
    """Holding W moves the camera: two shots without keys are equal, a third after W is not.
    Then Ctrl-C (SIGINT) while recording: the log ends with a whole row and parses, its
    frames numbered without a gap. One viewer run checks both."""
    from app.framelog import CONTRACT_COLUMNS, read_log

    log, shot = tmp_path / "fly.csv", tmp_path / "fly.png"
    v = launch("--scene", "demo", "--objects", "2000", "--record", str(log),
               "--screenshot", str(shot), "--size", "480x270", "--index", "brute",
               "--paused", "--no-hud")
    v.wait_first_frame()
    v.wait_rows(log, 3)
    v.key("k")
    v.wait_file(shot)
    v.wait_more_rows(log, 2)
    v.key("k")
    v.wait_file(tmp_path / "fly-2.png")
    v.xdotool("keydown", "--window", v.window, "w")
    v.wait_more_rows(log, 10)
    v.xdotool("keyup", "--window", v.window, "w")
    v.wait_more_rows(log, 2)
    v.key("k")
    v.wait_file(tmp_path / "fly-3.png")
    v.wait_rows(log, 5)
    v.interrupt()
    assert v.wait_exit() == 130, v.output()
    assert "demo: interrupted" in v.text() and "Traceback" not in v.text(), v.output()
    a, b, c = (_image(tmp_path / n) for n in ("fly.png", "fly-2.png", "fly-3.png"))
    assert np.array_equal(a, b), "the image changed although nothing moved"
    assert np.abs(c - b).mean() > 1.0, "holding W did not move the camera"
    text = log.read_text()
    assert text.endswith("\n"), "the last row was cut short"
    data = read_log(log)
    assert list(data)[: len(CONTRACT_COLUMNS)] == list(CONTRACT_COLUMNS)
    assert len(data["frame"]) >= 5
    assert list(data["frame"]) == list(range(len(data["frame"])))


def test_window_session_files_go_under_out_and_are_listed_at_exit(tmp_path, launch):
    """R and K without --record/--screenshot write under out/ of the current folder, and the
    window prints every file it wrote when it closes. On the way: L says what it did to the
    split threshold, N leaves only the leaf boxes, C plays the camera path, X orbits the
    frozen culling camera; the log and the screenshots show each, and the HUD read back from
    the screenshots says the culling camera is frozen after Z and seen from outside after X."""
    from app.framelog import read_log
    from app.render.hud import font_px

    run = tmp_path / "run"
    run.mkdir()
    v = launch("--scene", "demo", "--objects", "6000", "--size", "640x360", "--index", "octree",
               cwd=run)
    logs = run / "out" / "logs"
    shots = run / "out" / "screenshots"
    v.wait_first_frame()
    v.key("r")  # start recording (the first frame is on screen: R is not lost)
    log = v.wait_until(lambda: next(logs.glob("frames-*.csv"), None), FILE_S,
                       "frame log under out/logs after R")
    v.wait_rows(log, 3)
    steps = [(["l", "b", "n"], "boxes.png"), (["b", "b", "c"], "path.png"),
             (["c", "z"], "frozen.png"), (["x"], "orbit.png")]
    for n, (keys, name) in enumerate(steps, start=1):
        v.key(*keys)
        v.wait_more_rows(log, 6, COMPILE_S if "l" in keys else ROWS_S)  # L: another variant
        v.key("k")
        v.wait_until(lambda n=n: True if len(list(shots.glob("shot-*.png"))) >= n else None,
                     FILE_S, f"screenshot {n} ({name}) under out/screenshots")
        v.wait_more_rows(log, 2)
    v.key("Escape")
    assert v.wait_exit() == 0, v.output()
    out = v.text()
    pngs = sorted(shots.glob("shot-*.png"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    assert len(pngs) == 4, out
    for png in pngs:
        _check_png(png)
        assert f"demo: wrote {Path('out/screenshots') / png.name}" in out
    data = read_log(log)
    assert f"demo: wrote {Path('out/logs') / log.name} ({len(data['frame'])} rows)" in out
    assert not (run / "logs").exists() and not (run / "screenshots").exists()
    # L: non-leafy 30 -> leafy 40 (the octree's defaults), logged
    assert list(dict.fromkeys(data["index"]))[:2] == ["octree/non-leafy", "octree/leafy"]
    assert list(dict.fromkeys(data["split_threshold"].tolist()))[:2] == [30, 40]
    # every row splits the objects by stage; X froze the culling camera at the end
    parts = data["frustum_culled"] + data["distance_culled"] + data["drawn"]
    np.testing.assert_array_equal(parts, data["objects"])
    assert data["frozen"][-1] == 1 and data["frozen"][0] == 0
    keep = Path(os.environ.get("CULLVIEW_KEEP_SHOTS", "")) if os.environ.get(
        "CULLVIEW_KEEP_SHOTS") else None
    if keep is not None:  # to look at them: CULLVIEW_KEEP_SHOTS=folder pytest ...
        keep.mkdir(parents=True, exist_ok=True)
        for png, (_, name) in zip(pngs, steps, strict=True):
            shutil.copy(png, keep / name)
    a, b, c, d = (_image(p) for p in pngs)
    assert np.abs(a - b).mean() > 1.0 and np.abs(b - c).mean() > 1.0
    assert np.abs(c - d).mean() > 1.0
    # The HUD as the user reads it (tests/hud_reader.py: the font's glyphs matched cell by
    # cell): no frozen line before Z, after Z frozen at the eye, after X seen from outside.
    hud = [read_hud(_image(p), font_px(360)) for p in pngs]
    frozen = [next((s for s in lines if s.startswith("culling camera frozen (Z)")), None)
              for lines in hud]
    assert frozen[0] is None and frozen[1] is None, hud[1]
    assert frozen[2] is not None and "X views it from outside" in frozen[2], hud[2]
    assert frozen[3] is not None and "seen from outside" in frozen[3], hud[3]


def test_f2_compares_a_second_index_on_the_same_frames_and_writes_the_report(tmp_path, launch):
    """F2 turns the A/B comparison on (B brute, A's own index), F2 again makes B kd (new to
    the run: built and compiled on the worker thread, like I); F3 twice gives B an occlusion
    mode of its own (off, then previous); the HUD read back from the screenshot shows A's and
    B's costs, B/A and B's mode; Esc writes the report beside the log and the viewer lists
    it."""
    from app.framelog import read_log
    from app.render.hud import font_px

    log, shot = tmp_path / "ab.csv", tmp_path / "ab.png"
    v = launch("--scene", "demo", "--objects", "3000", "--record", str(log), "--screenshot",
               str(shot), "--size", "960x540", "--index", "brute")
    v.wait_first_frame()
    v.wait_rows(log, 3)
    for prefix, wait in (("brute", ROWS_S), ("kd/", COMPILE_S)):
        v.key("F2")
        v.wait_until(lambda p=prefix: c if (c := _last_cell(log, "compare_index") or ""
                                            ).startswith(p) else None, wait,
                     f"B {prefix} in {log.name}")
    v.wait_more_rows(log, 5)
    v.key("F3")
    v.key("F3")
    v.wait_until(lambda: _last_cell(log, "compare_occlusion") == "previous" or None, ROWS_S,
                 f"B's own previous-frame occlusion in {log.name}")
    v.wait_more_rows(log, 3)
    v.key("k")
    v.wait_file(shot)
    v.key("Escape")
    assert v.wait_exit() == 0, v.output()
    report = tmp_path / "ab-compare.md"
    assert f"demo: wrote {report} (A/B report" in v.text(), v.output()
    text = report.read_text()
    assert "## A brute vs B brute" in text and "## A brute vs B kd/" in text
    assert "occlusion A off, B previous (B's own pyramids)" in text and "a bug" not in text
    data = read_log(log)
    on = [i for i, c in enumerate(data["compare_index"]) if c]
    same = [i for i in on if data["compare_occlusion"][i] == "off"]  # A's mode (off), or own off
    assert same and all(data["compare_differ"][i] == 0 for i in same)
    assert any(data["compare_pyramid_ms"][i] > 0 for i in on)
    assert all(data["compare_ms"][i] > 0 for i in on)
    assert any("build B kd/" in s for s in data["stall"]), "B's build is not a stall"
    hud = read_hud(_image(shot), font_px(540))
    ab = next((s for s in hud if s.startswith("A/B (F2): A brute")), None)
    assert ab is not None and "| B kd/" in ab and "B/A" in ab, hud
    assert "occlusion previous" in ab, hud
    saved = shot.with_suffix(".hud.txt").read_text().splitlines()
    assert any(s.startswith("A/B (F2): A brute") for s in saved)
