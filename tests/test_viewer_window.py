"""A real window under Xvfb, driven with xdotool: keys, recording, screenshots, closing, Ctrl-C.

CI installs xvfb and xdotool (.ci/run); the tests skip only when xvfb-run is absent.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.xvfb,
    pytest.mark.skipif(shutil.which("xvfb-run") is None, reason="xvfb-run is not installed"),
]


class XvfbViewer:
    """``xvfb-run python -m app demo ...`` plus the DISPLAY/XAUTHORITY to drive it."""

    def __init__(self, tmp: Path, *demo_args: str, cwd: Path = ROOT) -> None:
        if shutil.which("xdotool") is None:
            pytest.fail("xdotool is missing (CI installs it with xvfb)")
        self.tmp = tmp
        self.auth = tmp / "Xauthority"
        self.pidfile = tmp / "viewer.pid"
        self.demo_args = demo_args
        self.cwd = cwd
        self.out = open(tmp / "viewer.out", "w")  # noqa: SIM115 - closed in stop()
        self.launches = 0
        self._launch()

    def _launch(self) -> None:
        """Start xvfb-run; each launch asks for another display number."""
        self.launches += 1
        self.auth.unlink(missing_ok=True)
        first = 90 + (os.getpid() + 37 * self.launches) % 100
        cmd = ["xvfb-run", "-a", "-n", str(first), "-f", str(self.auth),
               "-s", "-screen 0 1280x720x24 -nolisten tcp",
               "sh", "-c", 'echo $$ > "$0"; exec "$@"', str(self.pidfile),
               sys.executable, "-m", "app", "demo", *self.demo_args]
        self.proc = subprocess.Popen(cmd, cwd=self.cwd, stdout=self.out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.env = None
        self.window = None

    def wait_window(self, timeout: float = 600.0) -> str:  # a cold numba cache compiles
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                # Two xvfb-run started at once can race for one display (a busy machine, two
                # test workers): the viewer then finds no X server. Start again, elsewhere.
                if "cannot open a window" in self.output() and self.launches < 3:
                    self._launch()
                    continue
                pytest.fail(f"viewer exited early ({self.proc.returncode}): {self.output()}")
            if self.env is None and self.auth.exists():
                listing = subprocess.run(["xauth", "-f", str(self.auth), "list"],
                                         capture_output=True, text=True).stdout.split()
                if listing:
                    display = ":" + listing[0].rsplit(":", 1)[1]
                    self.env = dict(os.environ, DISPLAY=display, XAUTHORITY=str(self.auth))
            if self.env is not None:
                r = subprocess.run(["xdotool", "search", "--name", "cullview"], env=self.env,
                                   capture_output=True, text=True)
                ids = r.stdout.split()
                if ids:
                    self.window = ids[0]
                    return self.window
            time.sleep(0.5)
        pytest.fail(f"no viewer window within {timeout} s: {self.output()}")

    def key(self, *keys: str, pause: float = 1.0) -> None:
        for k in keys:
            subprocess.run(["xdotool", "key", "--window", self.window, k], env=self.env,
                           check=True, capture_output=True)
            time.sleep(pause)

    def viewer_pid(self) -> int:
        return int(self.pidfile.read_text().strip())

    def wait_exit(self, timeout: float = 60.0) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"viewer did not exit within {timeout} s: {self.output()}")

    def output(self) -> str:
        if not self.out.closed:
            self.out.flush()
        return (self.tmp / "viewer.out").read_text()[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.out.close()


def _rows(path: Path) -> int:
    return max(path.read_text().count("\n") - 1, 0) if path.exists() else 0


def _wait_rows(path: Path, rows: int, timeout: float = 240.0) -> int:
    """Wait until the log has ``rows`` rows (the first use of an index may compile it)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        n = _rows(path)
        if n >= rows:
            return n
        time.sleep(0.3)
    pytest.fail(f"{path} did not reach {rows} rows")


def _wait_file(path: Path, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists() and path.stat().st_size > 0:
            return
        time.sleep(0.3)
    pytest.fail(f"{path} was not written")


def _check_png(path: Path) -> None:
    from PIL import Image

    assert path.exists() and path.stat().st_size > 0, f"no screenshot {path}"
    img = np.asarray(Image.open(path).convert("RGB")).astype(np.int16)
    assert img.shape[0] > 100 and img.shape[1] > 100
    assert img.std() > 2.0, "screenshot is a uniform colour"


def test_window_keys_recording_screenshot_and_close(tmp_path):
    from app.framelog import CONTRACT_COLUMNS, read_log
    from app.spatial import INDEX_NAMES

    log, shot = tmp_path / "win.csv", tmp_path / "shot.png"
    v = XvfbViewer(tmp_path, "--scene", "demo", "--objects", "2000", "--record", str(log),
                   "--screenshot", str(shot), "--size", "640x360", "--index", "brute")
    try:
        v.wait_window()
        _wait_rows(log, 3)
        # Each group of keys is followed by a wait for frames, so that keys are not all
        # handled between the same two frames.
        for group in (["i"], ["i"], ["b", "b", "F1"], ["F1", "b", "l", "plus", "minus"],
                      ["f", "f", "v", "v", "z", "w", "z", "p", "p", "h", "h"]):
            v.key(*group, pause=0.3)
            _wait_rows(log, _rows(log) + 2)
        v.key("F12", pause=0.5)
        _wait_file(shot)
        v.key("r", pause=0.5)  # stop recording
        v.key("r", pause=0.5)  # start again: a new file, the first is kept
        _wait_rows(tmp_path / "win-2.csv", 2)
        v.key("k", pause=0.5)  # second screenshot
        _wait_file(tmp_path / "shot-2.png")
        v.key("Escape")
        assert v.wait_exit() == 0, v.output()
    finally:
        v.stop()
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


def _image(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB")).astype(np.int16)


def test_held_keys_fly_the_camera(tmp_path):
    """Holding W moves the camera: two shots without keys are equal, a third after W is not."""
    log, shot = tmp_path / "fly.csv", tmp_path / "fly.png"
    v = XvfbViewer(tmp_path, "--scene", "demo", "--objects", "2000", "--record", str(log),
                   "--screenshot", str(shot), "--size", "480x270", "--index", "brute",
                   "--paused", "--no-hud")
    try:
        v.wait_window()
        _wait_rows(log, 3)
        v.key("k", pause=0.3)
        _wait_file(shot)
        _wait_rows(log, _rows(log) + 2)
        v.key("k", pause=0.3)
        _wait_file(tmp_path / "fly-2.png")
        for action in ("keydown", "keyup"):
            subprocess.run(["xdotool", action, "--window", v.window, "w"], env=v.env,
                           check=True, capture_output=True)
            if action == "keydown":
                _wait_rows(log, _rows(log) + 10)
        _wait_rows(log, _rows(log) + 2)
        v.key("k", pause=0.3)
        _wait_file(tmp_path / "fly-3.png")
        v.key("Escape")
        v.wait_exit()
    finally:
        v.stop()
    a, b, c = (_image(tmp_path / n) for n in ("fly.png", "fly-2.png", "fly-3.png"))
    assert np.array_equal(a, b), "the image changed although nothing moved"
    assert np.abs(c - b).mean() > 1.0, "holding W did not move the camera"


def test_ctrl_c_while_recording_leaves_a_parseable_log(tmp_path):
    from app.framelog import CONTRACT_COLUMNS, read_log

    log = tmp_path / "sigint.csv"
    v = XvfbViewer(tmp_path, "--scene", "demo", "--objects", "2000", "--record", str(log),
                   "--size", "480x270")
    try:
        v.wait_window()
        _wait_rows(log, 5)
        os.kill(v.viewer_pid(), signal.SIGINT)
        v.wait_exit()
    finally:
        v.stop()
    text = log.read_text()
    assert text.endswith("\n"), "the last row was cut short"
    data = read_log(log)
    assert list(data)[: len(CONTRACT_COLUMNS)] == list(CONTRACT_COLUMNS)
    assert len(data["frame"]) >= 5
    assert list(data["frame"]) == list(range(len(data["frame"])))


def test_window_session_files_go_under_out_and_are_listed_at_exit(tmp_path):
    """R and K without --record/--screenshot write under out/ of the current folder, and the
    window prints every file it wrote when it closes. On the way: L says what it did to the
    split threshold, N leaves only the leaf boxes, C plays the camera path, X orbits the
    frozen culling camera; the log and the screenshots show each."""
    from app.framelog import read_log

    run = tmp_path / "run"
    run.mkdir()
    v = XvfbViewer(tmp_path, "--scene", "demo", "--objects", "6000", "--size", "640x360",
                   "--index", "octree", cwd=run)
    logs = run / "out" / "logs"
    shots = run / "out" / "screenshots"
    try:
        v.wait_window()
        for _ in range(3):  # keys sent while the kernels compile at start-up can be lost
            deadline = time.time() + 120
            while time.time() < deadline and "ready in" not in v.output():
                time.sleep(0.3)
            time.sleep(2.0)
            v.key("r", pause=0.5)
            deadline = time.time() + 20
            while time.time() < deadline and not list(logs.glob("frames-*.csv")):
                time.sleep(0.3)
            if list(logs.glob("frames-*.csv")):
                break
        log = next(logs.glob("frames-*.csv"))
        _wait_rows(log, 3)
        steps = [(["l", "b", "n"], "boxes.png"), (["b", "b", "c"], "path.png"),
                 (["x"], "orbit.png")]
        for n, (keys, _name) in enumerate(steps, start=1):
            v.key(*keys, pause=0.3)
            _wait_rows(log, _rows(log) + 6)
            v.key("k", pause=0.5)
            deadline = time.time() + 60
            while time.time() < deadline and len(list(shots.glob("shot-*.png"))) < n:
                time.sleep(0.3)
            _wait_rows(log, _rows(log) + 2)
        v.key("Escape")
        assert v.wait_exit() == 0, v.output()
    finally:
        v.stop()
    out = v.output()
    pngs = sorted(shots.glob("shot-*.png"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    assert len(pngs) == 3, out
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
    a, b, c = (_image(p) for p in pngs)
    assert np.abs(a - b).mean() > 1.0 and np.abs(b - c).mean() > 1.0
