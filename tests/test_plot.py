"""``python -m app plot`` in a subprocess: a PNG for good logs, exit 2 for bad ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from app.framelog import FrameLog

ROOT = Path(__file__).resolve().parents[1]


def make_log(path: Path, index: str, frames: int = 60, switch_to: str | None = None) -> Path:
    rng = np.random.default_rng(len(index))
    with FrameLog(path) as log:
        for i in range(frames):
            name = switch_to if switch_to and i >= frames // 2 else index
            u, c, r = rng.uniform(0.5, 1.0), rng.uniform(1, 3), rng.uniform(8, 12)
            vis = int(300 + 50 * np.sin(i / 10))
            log.write({"frame": i, "time_s": i / 60, "frame_ms": u + c + r + 0.3,
                       "update_ms": u, "cull_ms": c, "render_ms": r, "visible": vis,
                       "working_set": int(vis * 1.5), "nodes_visited": 80, "objects": 2000,
                       "index": name, "occlusion": "off"})
    return path


def plot(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "app", "plot", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


def test_plot_two_logs_writes_png(tmp_path):
    a = make_log(tmp_path / "a.csv", "icoseptree")
    b = make_log(tmp_path / "b.csv", "octree", switch_to="grid")
    out = tmp_path / "out.png"
    res = plot(str(a), str(b), "-o", str(out))
    assert res.returncode == 0, res.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # real chart content, not an empty canvas


def test_plot_bad_inputs_exit_2_with_one_line(tmp_path):
    good = make_log(tmp_path / "good.csv", "kd", frames=5)
    bad = tmp_path / "bad.csv"
    bad.write_text("not,a,frame,log\n1,2,3,4\n")
    empty = tmp_path / "empty.csv"
    FrameLog(empty).close()
    cases = [
        ([str(tmp_path / "missing.csv")], "missing.csv"),
        ([str(bad)], "bad.csv"),
        ([str(empty)], "empty.csv"),
        ([str(good), "-o", str(tmp_path / "no_dir" / "x.png")], "no_dir"),
    ]
    for args, needle in cases:
        extra = [] if "-o" in args else ["-o", str(tmp_path / "x.png")]
        res = plot(*args, *extra)
        assert res.returncode == 2, (args, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], res.stderr
