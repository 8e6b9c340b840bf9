"""Frame logs (design.md contract): one CSV row per frame, flushed as it is written."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import numpy as np

CONTRACT_COLUMNS = ("frame", "time_s", "frame_ms", "update_ms", "cull_ms", "render_ms",
                    "visible", "working_set", "nodes_visited", "objects", "index", "occlusion")
GROUND_TRUTH_COLUMNS = ("true_visible", "false_negatives")
TEXT_COLUMNS = ("index", "occlusion", "stall", "compare_index", "compare_occlusion")
#: The frame's wall time split into stages, in frame order: (column, label, colour). The
#: viewer's log rows have every column, and they sum to ``frame_ms`` (the frame's wall time,
#: from its start to the next frame's start); ``update_ms`` is motion + index update and
#: ``render_ms`` draw + occlusion. The HUD, the frame graph and the plot show these;
#: :data:`OPTIONAL_STAGES` only in frames that have them.
TIME_STAGES: tuple[tuple[str, str, str], ...] = (
    ("motion_ms", "motion", "#8da0cb"),
    ("index_update_ms", "index update", "#4c72b0"),
    ("cull_ms", "cull", "#dd8452"),
    ("upload_ms", "upload", "#c44e52"),
    ("draw_ms", "draw", "#55a868"),
    ("occlusion_pass_ms", "occlusion", "#64b5cd"),
    ("compare_ms", "compare B", "#937860"),
    ("overlay_ms", "overlay", "#da8bc3"),
    ("hud_ms", "HUD", "#ccb974"),
    ("present_ms", "present", "#8172b3"),
    ("stall_ms", "stall", "#e5484d"),
    ("other_ms", "other", "#b0b0b0"),
)
#: Stages the HUD names only in frames that spent time in them: a stall, an A/B comparison.
OPTIONAL_STAGES = ("stall_ms", "compare_ms")


class FrameLogError(OSError):
    """A frame log cannot be opened, written or read; the message names the path."""


def _cell(value: object) -> str:
    """CSV text of one value: floats compact but exact enough, None and NaN empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float | np.floating):
        return "" if math.isnan(value) else f"{float(value):.6g}"
    if isinstance(value, np.integer):
        return str(int(value))
    return str(value)


class FrameLog:
    """A CSV frame log: the contract columns, then any extra columns, one row per frame."""

    def __init__(self, path: str | os.PathLike, extra_columns: Sequence[str] = (),
                 fsync: bool = False) -> None:
        self.path = Path(path)
        extra = [c for c in extra_columns if c not in CONTRACT_COLUMNS]
        if len(set(extra)) != len(extra):
            raise ValueError(f"{self.path}: extra_columns repeat a name: {list(extra_columns)}")
        self.columns: tuple[str, ...] = CONTRACT_COLUMNS + tuple(extra)
        self._known = set(self.columns)
        self._fsync = fsync
        # Open now so a bad --record path fails before the first frame renders.
        try:
            self._fh = self.path.open("w", newline="", encoding="utf-8")
        except OSError as exc:
            raise FrameLogError(
                f"cannot write frame log {self.path}: {exc.strerror or exc}") from None
        self._writer = csv.writer(self._fh)
        self.rows = 0
        self._emit(self.columns)

    def _emit(self, cells: Sequence[str]) -> None:
        try:
            self._writer.writerow(cells)
            # Flush every row: a crash or closed window loses at most the frame in flight.
            self._fh.flush()
            if self._fsync:
                os.fsync(self._fh.fileno())
        except OSError as exc:
            raise FrameLogError(
                f"cannot write frame log {self.path}: {exc.strerror or exc}") from None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._fh.closed

    def write(self, row: Mapping[str, object]) -> None:
        """Append one frame; missing columns are left empty, unknown keys are an error."""
        if self._fh.closed:
            raise FrameLogError(f"frame log {self.path} is closed")
        unknown = [k for k in row if k not in self._known]
        if unknown:
            raise ValueError(f"{self.path}: unknown frame-log columns {unknown}; "
                             f"declare them in extra_columns")
        self._emit([_cell(row.get(c)) for c in self.columns])
        self.rows += 1

    def close(self) -> None:
        """Close the file (safe to call more than once)."""
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> FrameLog:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _column(name: str, cells: list[str]) -> np.ndarray | list[str]:
    if name in TEXT_COLUMNS:
        return cells
    try:
        values = np.array([float(c) if c.strip() else math.nan for c in cells], dtype=np.float64)
    except ValueError:
        return cells  # a non-numeric extra column stays text
    finite = values[np.isfinite(values)]
    if len(finite) == len(values) and np.all(finite == np.round(finite)) and (
            name in ("frame", "visible", "working_set", "nodes_visited", "objects",
                     *GROUND_TRUTH_COLUMNS)):
        return values.astype(np.int64)
    return values


def read_log(path: str | os.PathLike) -> dict[str, np.ndarray | list]:
    """Parse a frame log: numeric columns as arrays (NaN for empty cells), text as lists.

    A last line cut short by a crash is dropped; anything else malformed raises FrameLogError.
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise FrameLogError(f"cannot read frame log {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FrameLogError(f"{path}: not a frame log (not UTF-8 text)") from None
    lines = text.splitlines()
    if not lines:
        raise FrameLogError(f"{path}: empty file, expected a frame-log header")
    # The writer ends every row with a newline; without one, the last row was in flight.
    if not text.endswith(("\n", "\r")):
        lines = lines[:-1]
    rows = list(csv.reader(lines))
    header = rows[0] if rows else []
    missing = [c for c in CONTRACT_COLUMNS if c not in header]
    if missing:
        raise FrameLogError(f"{path}: not a frame log: header lacks columns {missing}")
    body = rows[1:]
    for i, r in enumerate(body, start=2):
        if len(r) != len(header):
            raise FrameLogError(
                f"{path}: line {i}: expected {len(header)} cells, got {len(r)}")
    out: dict[str, np.ndarray | list] = {}
    for j, name in enumerate(header):
        cells = [r[j] for r in body]
        try:
            out[name] = _column(name, cells)
        except ValueError as exc:
            raise FrameLogError(f"{path}: column {name}: {exc}") from None
    bad = [c for c in CONTRACT_COLUMNS if c not in TEXT_COLUMNS and isinstance(out[c], list)]
    if bad:
        raise FrameLogError(f"{path}: column {bad[0]}: expected numbers")
    return out
