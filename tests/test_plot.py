"""``python -m app plot`` in a subprocess: a PNG for good logs, exit 2 for bad ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from app.framelog import CONTRACT_COLUMNS, FrameLog
from app.render.occlusion import BASE_COLUMNS
from app.viewer.frame import EXTRA_COLUMNS

ROOT = Path(__file__).resolve().parents[1]


# The real columns: the contract's, the viewer's extra ones and the occlusion provider's, in the
# order the viewer's recorder writes them (the header of a --record log with occlusion on).
LOG_COLUMNS = CONTRACT_COLUMNS + EXTRA_COLUMNS + BASE_COLUMNS
TIMED = ("motion_ms", "index_update_ms", "cull_ms", "upload_ms", "render_ms", "overlay_ms")
SESSION_INDEXES = ("icoseptree/non-leafy", "kd/non-leafy", "octree/leafy", "grid", "brute",
                   "chunks", "fixed-octree", "viewdist", "ternary/non-leafy", "kd/leafy")


def session_log(path: Path, frames: int = 3000, switches: int = 9, seed: int = 0,
                objects: int = 20_000) -> Path:
    """A window session as the viewer records it: a JIT warm-up first frame, ``switches``
    index switches (two of them 8 frames apart, as when a key is pressed twice), occlusion
    off -> previous -> two-pass -> off (its columns empty while off), box overlays some of
    the time (overlay_ms large), every timing the viewer writes, rounded as it rounds them."""
    rng = np.random.default_rng(seed)
    at = np.linspace(0, frames, switches + 1, endpoint=False)[1:].astype(int)
    at[1] = at[0] + 8  # a quick double press
    names = [SESSION_INDEXES[k % len(SESSION_INDEXES)] for k in range(switches + 1)]
    occ_at = (frames // 5, frames // 2, 4 * frames // 5)
    occ_modes = ("off", "previous", "two-pass", "off")
    with FrameLog(path, extra_columns=EXTRA_COLUMNS + BASE_COLUMNS) as log:
        for i in range(frames):
            name = names[int(np.searchsorted(at, i, side="right"))]
            occ = occ_modes[int(np.searchsorted(occ_at, i, side="right"))]
            boxes = (i // 400) % 3 == 1
            t = {"motion_ms": rng.uniform(0.1, 0.4), "index_update_ms": rng.uniform(0.2, 1.5),
                 "cull_ms": rng.uniform(0.5, 3.0), "upload_ms": rng.uniform(1.5, 3.5),
                 "render_ms": rng.uniform(6.0, 9.0), "overlay_ms": rng.uniform(0.3, 0.8)}
            if boxes:
                t["overlay_ms"] += rng.uniform(5.0, 8.0)
            if i == 0 or i in at:
                t["index_update_ms"] += rng.uniform(200, 900)  # building the new index
            t = {k: round(float(v), 4) for k, v in t.items()}
            # time between the timed passes (perf_counter calls, the FrameStats bookkeeping)
            frame_ms = sum(t.values()) + rng.uniform(0.01, 0.3)
            vis = int(objects * (0.2 + 0.1 * np.sin(i / 90)))
            row = {"frame": i, "time_s": round(i / 60, 6), "frame_ms": round(frame_ms, 4),
                   "update_ms": round(t["motion_ms"] + t["index_update_ms"], 4),
                   "cpu_ms": round(t["motion_ms"] + t["index_update_ms"] + t["cull_ms"]
                                   + t["upload_ms"], 4),
                   "visible": vis, "working_set": int(vis * 1.4), "nodes_visited": 900,
                   "objects": objects, "index": name, "occlusion": occ, "drawn": vis,
                   "split_threshold": "" if name in ("grid", "brute", "chunks") else 50,
                   "frustum": 1, "view_distance": int(name == "viewdist"), "frozen": 0,
                   "moved": 200, **t}
            if occ != "off":
                row.update(occlusion_ms=round(rng.uniform(0.5, 1.2), 4),
                           occlusion_cull_ms=round(rng.uniform(0.3, 1.0), 4)
                           if occ == "two-pass" else 0.0,
                           occluded_nodes=40, occluded_objects=int(vis * 0.3), second_pass=3)
            log.write(row)
    return path


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
