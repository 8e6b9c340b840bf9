"""Frame logs: header, flushed rows, clear errors, crash safety (app.framelog)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from app.framelog import (
    CONTRACT_COLUMNS,
    GROUND_TRUTH_COLUMNS,
    FrameLog,
    FrameLogError,
    read_log,
)

ROOT = Path(__file__).resolve().parents[1]


def row(i: int, index: str = "icoseptree") -> dict:
    return {"frame": i, "time_s": i / 60, "frame_ms": 16.5, "update_ms": 1.25, "cull_ms": 2.5,
            "render_ms": 12.0, "visible": 100 + i, "working_set": 150 + i, "nodes_visited": 40,
            "objects": 1000, "index": index, "occlusion": "off"}


def test_header_and_rows_readable_while_open(tmp_path):
    p = tmp_path / "log.csv"
    log = FrameLog(p, extra_columns=GROUND_TRUTH_COLUMNS)
    header = p.read_text().splitlines()[0].split(",")
    assert tuple(header) == CONTRACT_COLUMNS + GROUND_TRUTH_COLUMNS
    log.write(row(0))
    log.write({**row(1), "true_visible": 90, "false_negatives": 0})
    data = read_log(p)  # still open: rows must already be on disk
    assert list(data["frame"]) == [0, 1]
    assert data["visible"].dtype == np.int64 and list(data["visible"]) == [100, 101]
    assert data["index"] == ["icoseptree", "icoseptree"]
    assert np.isnan(data["true_visible"][0]) and data["true_visible"][1] == 90
    np.testing.assert_allclose(data["time_s"], [0, 1 / 60], rtol=1e-5)
    log.close()
    log.close()  # idempotent
    with pytest.raises(FrameLogError, match="closed"):
        log.write(row(2))


def test_missing_keys_are_empty_and_unknown_keys_rejected(tmp_path):
    p = tmp_path / "log.csv"
    with FrameLog(p) as log:
        log.write({"frame": 0, "index": "kd"})
        with pytest.raises(ValueError, match="bogus"):
            log.write({"frame": 1, "bogus": 3})
    assert p.read_text().splitlines()[1] == "0" + "," * 10 + "kd,"
    data = read_log(p)
    assert len(data["frame"]) == 1 and np.isnan(data["frame_ms"][0])


@pytest.mark.parametrize("sub", ["no_such_dir/log.csv", ""])
def test_unwritable_path_is_a_clear_error(tmp_path, sub):
    bad = tmp_path / sub if sub else tmp_path  # a folder cannot be opened as a file
    with pytest.raises(FrameLogError) as info:
        FrameLog(bad)
    assert str(bad) in str(info.value)
    assert isinstance(info.value, OSError)


def test_read_log_errors(tmp_path):
    with pytest.raises(FrameLogError, match="cannot read"):
        read_log(tmp_path / "missing.csv")
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(FrameLogError, match="empty"):
        read_log(tmp_path / "e.csv")
    (tmp_path / "h.csv").write_text("a,b,c\n1,2,3\n")
    with pytest.raises(FrameLogError, match="header lacks"):
        read_log(tmp_path / "h.csv")
    p = tmp_path / "r.csv"
    with FrameLog(p) as log:
        log.write(row(0))
    with p.open("a") as fh:
        fh.write("1,2,3\n")
    with pytest.raises(FrameLogError, match="line 3"):
        read_log(p)


def test_half_written_last_line_is_dropped(tmp_path):
    p = tmp_path / "log.csv"
    with FrameLog(p) as log:
        log.write(row(0))
        log.write(row(1))
    with p.open("a") as fh:
        fh.write("2,0.03,16")  # the frame in flight when the process died
    assert list(read_log(p)["frame"]) == [0, 1]


WRITER = """
import sys, time
from app.framelog import FrameLog
log = FrameLog(sys.argv[1])
i = 0
while True:
    log.write({"frame": i, "time_s": i * 0.01, "frame_ms": 10.0, "visible": i,
               "index": "brute", "occlusion": "off"})
    i += 1
    if i == 5:
        print("ready", flush=True)
    time.sleep(0.002)
"""


def test_killed_writer_leaves_a_parseable_log(tmp_path):
    p = tmp_path / "killed.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(p)], stdout=subprocess.PIPE,
                            env=env, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    data = read_log(p)
    frames = data["frame"]
    assert len(frames) >= 5
    assert list(frames) == list(range(len(frames)))
