"""What a run writes: the frame log (R, ``--record``) and screenshots (K / F12,
``--screenshot``), and the list of every file written, printed at exit.

Files written without a name go under ``out/`` (:data:`DEFAULT_LOG_DIR`,
:data:`DEFAULT_SHOT_DIR`); a restarted recording or a second screenshot never overwrites an
earlier file. The frame log's row is :func:`log_row` (the contract's columns, then
:data:`EXTRA_COLUMNS`, then those of the occlusion provider, the collision view and a nested
index).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from app.viewer.state import FrameStats, Toggles

DEFAULT_LOG_DIR = Path("out") / "logs"  # R without --record
DEFAULT_SHOT_DIR = Path("out") / "screenshots"  # K / F12 without --screenshot

# Frame-log columns beyond the contract's (design.md), always present.
EXTRA_COLUMNS = ("motion_ms", "index_update_ms", "upload_ms", "overlay_ms", "cpu_ms", "drawn",
                 "split_threshold", "frustum", "view_distance", "frozen", "moved",
                 "frustum_culled", "distance_culled", "occlusion_culled", "stages_ms",
                 # the timing model (app/viewer/timing.py): with motion_ms ... overlay_ms these
                 # stages sum to frame_ms; wall_s is wall-clock time beside time_s (simulated)
                 "draw_ms", "occlusion_pass_ms", "compare_ms", "hud_ms", "present_ms",
                 "stall_ms", "other_ms", "wall_s", "stall", "compile_ms", "drawn_late")


def log_row(st: FrameStats, toggles: Toggles, *, objects: int, index: str,
            split: int | None, extras: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """One frame-log row: frame ``st`` with the toggles in effect, the object count, the
    index's label and split threshold, then the extra cells (occlusion, collision, nested)."""
    c, tg = st.stages, toggles
    row = {
        "frame": st.frame, "time_s": round(st.time_s, 6), "frame_ms": round(st.frame_ms, 4),
        "update_ms": round(st.update_ms, 4), "cull_ms": round(st.cull_ms, 4),
        "render_ms": round(st.render_ms, 4), "visible": st.visible,
        "working_set": st.working_set, "nodes_visited": st.nodes_visited,
        "objects": objects, "index": index, "occlusion": tg.occlusion,
        "motion_ms": round(st.motion_ms, 4), "index_update_ms": round(st.index_update_ms, 4),
        "upload_ms": round(st.upload_ms, 4), "overlay_ms": round(st.overlay_ms, 4),
        "cpu_ms": round(st.cpu_ms, 4), "drawn": st.drawn,
        "split_threshold": "" if split is None else split,
        "frustum": int(tg.frustum), "view_distance": int(tg.view_distance),
        "frozen": int(tg.frozen), "moved": st.moved,
        "frustum_culled": None if c is None else c.frustum,
        "distance_culled": None if c is None else c.distance,
        "occlusion_culled": None if c is None else c.occlusion,
        "stages_ms": round(st.stages_ms, 4),
        "draw_ms": round(st.draw_ms, 4), "occlusion_pass_ms": round(st.occlusion_pass_ms, 4),
        "compare_ms": round(st.compare_ms, 4),
        "hud_ms": round(st.hud_ms, 4), "present_ms": round(st.present_ms, 4),
        "stall_ms": round(st.stall_ms, 4), "other_ms": round(st.other_ms, 4),
        "wall_s": round(st.wall_s, 6), "stall": st.stall, "compile_ms": round(st.compile_ms, 4),
        "drawn_late": st.drawn_late,
    }
    for cells in extras:
        row.update(cells)
    return row


class Recorder:
    """Frame-log writer around app.framelog.FrameLog; one flushed row per frame."""

    def __init__(self) -> None:
        self.log = None
        self.path: Path | None = None
        self.columns: set[str] = set()
        self.rows = 0

    @property
    def active(self) -> bool:
        return self.log is not None

    def start(self, path: str | Path, extra_columns: tuple[str, ...]) -> Path:
        from app.framelog import FrameLog

        self.stop()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.log = FrameLog(self.path, extra_columns=extra_columns)
        self.columns = set(self.log.columns)
        self.rows = 0
        return self.path

    def write(self, row: dict[str, Any]) -> None:
        if self.log is not None:
            # Columns that appear mid-recording (occlusion switched on) are left out.
            self.log.write({k: v for k, v in row.items() if k in self.columns})
            self.rows += 1

    def stop(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None


def next_free_path(path: Path) -> Path:
    """``path`` if unused, else ``stem-2.ext``, ``stem-3.ext`` ..."""
    if not path.exists():
        return path
    k = 2
    while True:
        cand = path.with_name(f"{path.stem}-{k}{path.suffix}")
        if not cand.exists():
            return cand
        k += 1


class Capture:
    """The run's recording and screenshots, and every file they wrote.

    ``notice`` hears what the user should see on screen ("recording to ...").
    """

    def __init__(self, notice: Callable[[str], None]) -> None:
        self.notice = notice
        self.recorder = Recorder()
        self.record_path: Path | None = None  # the last log started
        self.record_base: Path | None = None  # R's file (--record), else out/logs/...
        self.screenshot_base: Path | None = None  # K's file (--screenshot), else out/...
        self.shot_count = 0
        self.last_screenshot_s = 0.0  # how long saving the last one took (not part of a frame)
        self.written: dict[Path, str] = {}  # every file written, with a note (rows ...)
        self._shot_path: Path | None = None  # a screenshot to take at the end of the next frame

    # ------------------------------------------------------------------ the frame log

    @property
    def recording(self) -> bool:
        return self.recorder.active

    def start_recording(self, path: str | Path | None, columns: tuple[str, ...]) -> Path:
        """Record to ``path`` (else the last log's name, else one under out/logs/); a
        restarted recording of the same name goes to NAME-2.csv."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = Path(path or self.record_path or DEFAULT_LOG_DIR / f"frames-{stamp}.csv")
        if self.record_path is not None and path == self.record_path and path.exists():
            path = next_free_path(path)  # a restarted recording never overwrites the last one
        out = self.recorder.start(path, columns)
        self.record_path = out
        self.note_written(out, "0 rows")
        self.notice(f"recording to {out}")
        return out

    def stop_recording(self) -> None:
        r = self.recorder
        if r.active:
            self.notice(f"recording stopped: {r.rows} rows in {r.path}")
            self.note_written(r.path, f"{r.rows} rows")
        r.stop()

    def next_log_path(self, default_path: str | Path | None = None) -> Path | None:
        """R's next file: ``default_path``, else --record's, else None (one under out/logs/);
        never an existing file."""
        base = Path(default_path) if default_path else (self.record_path or self.record_base)
        return next_free_path(base) if base else None

    def write(self, row: dict[str, Any]) -> None:
        self.recorder.write(row)

    # ------------------------------------------------------------------ screenshots

    def next_screenshot_path(self) -> Path:
        """K: ``--screenshot``'s name (then NAME-2.png ...), else out/screenshots/shot-...png."""
        n = self.shot_count + 1
        self.shot_count = n
        if self.screenshot_base is not None:
            base = self.screenshot_base
            return base if n == 1 else base.with_name(f"{base.stem}-{n}{base.suffix}")
        return DEFAULT_SHOT_DIR / f"shot-{time.strftime('%Y%m%d-%H%M%S')}-{n}.png"

    def request_screenshot(self, path: str | Path) -> Path:
        """Save the next frame, drawn without the transient notices; written when that frame
        ends (:meth:`take_requested`)."""
        self._shot_path = Path(path)
        return self._shot_path

    @property
    def shot_pending(self) -> bool:
        return self._shot_path is not None

    def screenshot(self, target, path: str | Path) -> Path:
        """Save what is on ``target`` (a SceneTarget) now."""
        t0 = time.perf_counter()
        out = target.save_png(path)
        self.last_screenshot_s = time.perf_counter() - t0
        self.note_written(out)
        self.notice(f"screenshot {out}")
        return out

    def take_requested(self, target) -> Path | None:
        """The requested screenshot, if any, of ``target`` now; the file written."""
        if self._shot_path is None:
            return None
        path, self._shot_path = self._shot_path, None
        return self.screenshot(target, path)

    def write_hud_text(self, shot: Path, lines: list[str]) -> Path:
        """The HUD's text of a screenshot beside it (``shot.hud.txt``): its numbers exactly,
        for a report or a test, where the image has them only as pixels."""
        out = Path(shot).with_suffix(".hud.txt")
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.note_written(out)
        return out

    # ------------------------------------------------------------------ files written

    def note_written(self, path: Path, note: str = "") -> None:
        """Remember a file this run wrote, for :meth:`written_lines`."""
        self.written[Path(path)] = note

    def written_lines(self) -> list[str]:
        """One line per file written (logs with their rows), in the order first written."""
        return [f"{p}{f' ({n})' if n else ''}" for p, n in self.written.items()]

    def close(self, target) -> None:
        """A screenshot still requested, then the log."""
        self.take_requested(target)
        self.stop_recording()
