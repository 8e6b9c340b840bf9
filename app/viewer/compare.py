"""A/B on the same frames (issue 27, item 3): a second index, B, culls every frame the drawn
index, A, culls, and the two costs are shown side by side.

B is a pipeline of its own (:class:`app.culling.pipeline.CullPipeline`, or the nested one for
a hierarchical scene) over the same object arrays. Each frame, beside A's update and cull,
it gets the same moved ids (so the same centres), then the same cull as A: the same
culling camera, toggles and occlusion mode, against the same pyramids (previous-frame
occlusion: last frame's; two-pass: its own early set, then, after A's occlusion pass, this
frame's pyramid). Its answer is not drawn; it is compared with A's (exact indexes agree
exactly with occlusion off: a difference is a bug).

The order is counterbalanced: B updates and culls right after A on one frame and right before
A on the next. Whichever runs second reads data the first one just brought into the caches
(the moved objects' centres), and whatever runs after the frame's draw finds them evicted by
the software rasterizer's threads: the same index as A and as B (kd against kd, the demo
scene) measured B/A 1.10x with B after the draw, 0.85x with B always right after A.

Per frame the comparison keeps A's and B's update and cull times, the ids their answers differ
by, their working sets and nodes visited, in one growing array per pairing (A's index, B's
index, the culling toggles). The HUD shows the median and p95 of the last :data:`WINDOW`
frames of the current pairing (:func:`hud_lines`); on exit :func:`write_report` writes every
pairing of the run as a bench-style table, markdown and CSV.

The frame times the whole comparison as its own stage (``compare_ms``), so B never inflates
A's stages and the stages still sum to the frame's wall time.
"""

from __future__ import annotations

import csv
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.culling.pipeline import CullPipeline, FrameCull, IndexConfig

#: Frames the HUD's median and p95 are taken over.
WINDOW = 300
#: The frame log's columns of the comparison (empty cells while it is off).
COLUMNS = ("compare_index", "compare_update_ms", "compare_cull_ms", "compare_differ")

# The per-frame record's columns.
A_UPDATE, A_CULL, B_UPDATE, B_CULL, DIFFER, A_WS, B_WS, A_NODES, B_NODES, VISIBLE = range(10)
_WIDTH = 10


class Samples:
    """One pairing's frames, a row each (the columns above), in an array that doubles when
    full: one append per frame, numpy over the rows for the statistics."""

    def __init__(self) -> None:
        self._rows = np.zeros((256, _WIDTH))
        self.count = 0

    def append(self, row: Sequence[float]) -> None:
        if self.count == self._rows.shape[0]:
            grown = np.zeros((2 * self.count, _WIDTH))
            grown[:self.count] = self._rows
            self._rows = grown
        self._rows[self.count] = row
        self.count += 1

    @property
    def rows(self) -> np.ndarray:
        """(frames, columns), oldest first (a view)."""
        return self._rows[:self.count]


@dataclass(frozen=True)
class Pairing:
    """What a row of the report compares: A's and B's labels and the culling toggles."""

    a: str
    b: str
    frustum: bool
    view_distance: bool
    occlusion: str

    def settings(self) -> str:
        on = {True: "on", False: "off"}
        return (f"frustum {on[self.frustum]}, view distance {on[self.view_distance]}, "
                f"occlusion {self.occlusion}")

    @property
    def exact(self) -> bool:
        """Whether the two answers must be equal: every index returns the brute-force answer
        without occlusion (the occlusion tests of node boxes may differ between indexes)."""
        return self.occlusion == "off" or not self.frustum


def side_label(config: IndexConfig, split: int | None) -> str:
    """An index's label with the split threshold in effect: ``kd/leafy split 8``."""
    return config.label() + (f" split {split}" if split is not None else "")


def differing_ids(a: np.ndarray | None, b: np.ndarray | None, all_ids: np.ndarray) -> int:
    """How many ids are in one answer and not the other (None: every object)."""
    if a is None and b is None:
        return 0
    a = all_ids if a is None else a
    b = all_ids if b is None else b
    if a.shape[0] == b.shape[0] and np.array_equal(a, b):
        return 0
    return int(np.setxor1d(a, b, assume_unique=True).shape[0])


class Comparison:
    """The B side: its pipeline, the frames it ran, and the report of the run."""

    def __init__(self, make_pipeline: Callable[[IndexConfig, object], CullPipeline],
                 scene) -> None:
        self.make_pipeline = make_pipeline  # (config, scene) -> a pipeline, as A's is made
        self.scene = scene
        self.pipeline: CullPipeline | None = None  # None: B is off
        self.label = ""
        self.runs: dict[Pairing, Samples] = {}
        self.current: Pairing | None = None
        self.last: dict[str, object] = dict.fromkeys(COLUMNS)  # the last frame's log cells
        self._times = [0.0, 0.0]  # this frame's B update and cull ms so far
        self._frames = 0  # frames B ran (which one goes first alternates)

    @property
    def active(self) -> bool:
        return self.pipeline is not None

    def set_index(self, config: IndexConfig | None) -> float:
        """B is ``config`` from now on (built from the current objects), or off (None);
        returns the build's milliseconds. A failed build raises and leaves B as it was."""
        if config is None:
            self.pipeline, self.label = None, ""
            return 0.0
        p = self.make_pipeline(config, self.scene)
        o = self.scene.objects
        ms = p.build(o.ids, o.centers, o.radii, o.view_distances)
        self.pipeline = p
        self.label = side_label(config, p.split_threshold())
        return ms

    def forget_visible(self) -> None:
        """Two-pass's early set starts empty, as A's does (a new occlusion provider)."""
        if self.pipeline is not None:
            self.pipeline.forget_visible()

    def reset(self) -> None:
        """Forget the frames so far (a headless run's warm-up frames are not reported)."""
        self.runs.clear()
        self.current = None

    def goes_first(self) -> bool:
        """Whether B updates and culls before A this frame: every other frame, so that the
        order's advantage (data the first one warmed in the caches) goes to each side alike."""
        self._frames += 1
        return self._frames % 2 == 0

    def update_and_cull(self, moved: np.ndarray, planes: np.ndarray, eye: np.ndarray, *,
                        frustum: bool, view_distance: bool, occlusion: str,
                        pyramid=None) -> None:
        """B's update and first cull, beside A's: the same moved ids, the same culling camera,
        toggles and occlusion mode as A's, against the same pyramid (previous-frame
        occlusion's; two-pass: B's own early set)."""
        p = self.pipeline
        t0 = time.perf_counter()
        p.update(moved)
        t1 = time.perf_counter()
        p.first_cull(planes, eye, frustum=frustum, view_distance=view_distance,
                     occlusion=occlusion, pyramid=pyramid)
        t2 = time.perf_counter()
        self._times = [(t1 - t0) * 1e3, (t2 - t1) * 1e3]

    def finish(self, a: FrameCull, a_label: str, a_update_ms: float, a_cull_ms: float,
               late_pyramid=None) -> None:
        """After A's occlusion pass: two-pass's late cull against this frame's pyramid (as
        A's), then B's answer against A's and the frame's record. ``a_update_ms`` /
        ``a_cull_ms``: A's (two-pass: early + late cull)."""
        p = self.pipeline
        if a.two_pass and late_pyramid is not None:
            t0 = time.perf_counter()
            p.late_cull(late_pyramid)
            self._times[1] += (time.perf_counter() - t0) * 1e3
        b_update, b_cull = self._times
        b = p.last_cull.result
        ra = a.result
        differ = differing_ids(None if ra is None else ra.visible,
                               None if b is None else b.visible, self.scene.objects.ids)
        key = Pairing(a_label, self.label, a.frustum, a.view_distance, a.occlusion)
        samples = self.runs.setdefault(key, Samples())
        self.current = key
        n = int(self.scene.objects.ids.shape[0])
        samples.append((a_update_ms, a_cull_ms, b_update, b_cull, differ,
                        n if ra is None else ra.working_set, n if b is None else b.working_set,
                        0 if ra is None else ra.nodes_visited,
                        0 if b is None else b.nodes_visited,
                        n if ra is None else ra.visible.shape[0]))
        self.last = {"compare_index": self.label, "compare_update_ms": round(b_update, 4),
                     "compare_cull_ms": round(b_cull, 4), "compare_differ": differ}

    def log_values(self) -> dict[str, object]:
        """The frame log's comparison cells of the last frame (empty while B is off)."""
        return dict(self.last) if self.active else dict.fromkeys(COLUMNS)

    def hud_lines(self) -> list[str]:
        """The HUD's A/B lines of the current pairing (none while B is off)."""
        if not self.active or self.current is None or self.current.b != self.label:
            return [f"A/B (F2): B {self.label} built, no frame yet"] if self.active else []
        return hud_lines(self.current, self.runs[self.current].rows, WINDOW)


def _totals(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A's and B's update + cull per frame."""
    return rows[:, A_UPDATE] + rows[:, A_CULL], rows[:, B_UPDATE] + rows[:, B_CULL]


def hud_lines(pair: Pairing, rows: np.ndarray, window: int = WINDOW) -> list[str]:
    """Two HUD lines for the last ``window`` frames of ``rows`` (a pairing's samples): both
    costs (update + cull) as medians and their ratio, whether the answers agree; the p95s and
    the last frame's working sets and nodes visited."""
    recent = rows[-window:]
    n = recent.shape[0]
    if n == 0:
        return [f"A/B (F2): B {pair.b}: no frame yet"]
    a, b = _totals(recent)
    ma, mb = float(np.median(a)), float(np.median(b))
    ratio = f"{mb / ma:.2f}x" if ma > 0 else "-"
    now = int(recent[-1, DIFFER])
    bad = int(np.count_nonzero(recent[:, DIFFER]))
    if now == 0 and bad == 0:
        answers = f"answers equal ({n} of {n} frames)"
    else:
        answers = f"answers differ by {now:,} ids this frame, in {bad} of {n} frames"
        answers += (" (a bug: exact indexes agree without occlusion)" if pair.exact else
                    " (occlusion on: the indexes' box tests may differ)")
    last = recent[-1]
    return [f"A/B (F2): A {pair.a} {ma:.2f} ms | B {pair.b} {mb:.2f} ms | B/A {ratio}   "
            f"{answers}",
            f"   update + cull, median of {n} frames; p95 A {np.percentile(a, 95):.2f} B "
            f"{np.percentile(b, 95):.2f}; working set A {int(last[A_WS]):,} in "
            f"{int(last[A_NODES]):,} nodes, B {int(last[B_WS]):,} in {int(last[B_NODES]):,}"]


# ---------------------------------------------------------------------- the report

REPORT_HEADERS = ("side", "index", "stage", "median ms", "p95 ms", "max ms", "frames",
                  "B/A median")
CSV_HEADERS = ("a_index", "b_index", "settings", "side", "index", "stage", "median_ms",
               "p95_ms", "max_ms", "frames", "b_over_a", "working_set_median", "nodes_median",
               "frames_differing")


def _stats(x: np.ndarray) -> tuple[float, float, float]:
    return float(np.median(x)), float(np.percentile(x, 95)), float(x.max())


def report_rows(pair: Pairing, rows: np.ndarray) -> list[tuple]:
    """Per side and stage (update, cull, total): median, p95, max, frames, and on B's rows
    B's median over A's."""
    a_tot, b_tot = _totals(rows)
    sides = (("A", pair.a, rows[:, A_UPDATE], rows[:, A_CULL], a_tot),
             ("B", pair.b, rows[:, B_UPDATE], rows[:, B_CULL], b_tot))
    a_med = {s: float(np.median(x)) for s, x in zip(("update", "cull", "total"), sides[0][2:],
                                                     strict=True)}
    out = []
    for side, label, *stages in sides:
        for stage, x in zip(("update", "cull", "total"), stages, strict=True):
            med, p95, mx = _stats(x)
            ratio = med / a_med[stage] if side == "B" and a_med[stage] > 0 else None
            out.append((side, label if stage == "update" else "", stage, med, p95, mx,
                        rows.shape[0], ratio))
    return out


def _ms(v: float) -> str:
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 100 else f"{v:,.1f}"


def _md_table(rows: list[tuple]) -> list[str]:
    out = ["| " + " | ".join(REPORT_HEADERS) + " |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for side, label, stage, med, p95, mx, frames, ratio in rows:
        cells = [side, label, stage, _ms(med), _ms(p95), _ms(mx), f"{frames:,}",
                 "" if ratio is None else f"{ratio:.2f}x"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _answers(pair: Pairing, rows: np.ndarray) -> str:
    bad = int(np.count_nonzero(rows[:, DIFFER]))
    if bad == 0:
        return f"answers equal on all {rows.shape[0]:,} frames"
    why = ("a bug: exact indexes agree without occlusion" if pair.exact else
           "occlusion on: the indexes' box tests may differ")
    return (f"answers differ on {bad:,} of {rows.shape[0]:,} frames (at most "
            f"{int(rows[:, DIFFER].max()):,} ids; {why})")


def report_notes(scene: str, objects: int, size: tuple[int, int], frames: int,
                 command: str = "") -> list[str]:
    """The report's opening paragraphs: the run, and what the numbers are."""
    written = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return [
        f"Scene {scene}, {objects:,} objects, {size[0]}x{size[1]}, {frames:,} frames with a B "
        f"index; written {written}.",
        *([f"Command: `{command}`"] if command else []),
        "",
        "A is the index the viewer draws with; B culls the same frames (the same moved ids, "
        "culling camera, toggles and pyramids), its answer compared with A's and not drawn; "
        "B updates and culls right after A on one frame, right before A on the next, so that "
        "the order's cache advantage goes to each side alike. Milliseconds of wall clock per "
        "frame (perf_counter): update = `index.update` of the moved objects, cull = the query "
        "(two-pass occlusion: early + late cull), total = both; p95 = `np.percentile(x, 95)`; "
        "B/A = B's median over A's. The machine's other work shows in both sides alike: the "
        "ratio of the same run is the robust figure.",
    ]


def command_line() -> str:
    """This process's command as a user would type it (``python -m app demo ...``)."""
    argv = list(sys.argv)
    if argv and argv[0].endswith("__main__.py"):
        return " ".join(["python -m app", *argv[1:]])
    return " ".join(argv)


def report_markdown(runs: dict[Pairing, Samples], title: str, notes: Sequence[str]) -> str:
    """The run's comparisons as markdown: one table per pairing, with its working sets,
    nodes visited and whether the answers agreed."""
    lines = [f"# {title}", "", *notes, ""]
    if not any(s.count for s in runs.values()):
        return "\n".join([*lines, "No frame ran with a B index.", ""])
    for pair, s in runs.items():
        if not s.count:
            continue
        r = s.rows
        lines += [f"## A {pair.a} vs B {pair.b} ({pair.settings()})", "",
                  *_md_table(report_rows(pair, r)), "",
                  f"Median working set: A {np.median(r[:, A_WS]):,.0f}, B "
                  f"{np.median(r[:, B_WS]):,.0f}; nodes visited: A "
                  f"{np.median(r[:, A_NODES]):,.0f}, B {np.median(r[:, B_NODES]):,.0f}; visible "
                  f"{np.median(r[:, VISIBLE]):,.0f}; {_answers(pair, r)}.", ""]
    return "\n".join(lines)


def report_csv_rows(runs: dict[Pairing, Samples]) -> list[tuple]:
    """The CSV's rows: the markdown tables' rows with the pairing, working set and nodes."""
    out = []
    for pair, s in runs.items():
        if not s.count:
            continue
        r = s.rows
        bad = int(np.count_nonzero(r[:, DIFFER]))
        for side, _label, stage, med, p95, mx, frames, ratio in report_rows(pair, r):
            ws, nodes = (A_WS, A_NODES) if side == "A" else (B_WS, B_NODES)
            out.append((pair.a, pair.b, pair.settings(), side, pair.a if side == "A" else pair.b,
                        stage, round(med, 5), round(p95, 5), round(mx, 5), frames,
                        "" if ratio is None else round(ratio, 4),
                        float(np.median(r[:, ws])), float(np.median(r[:, nodes])), bad))
    return out


def write_report(path: Path, runs: dict[Pairing, Samples], title: str,
                 notes: Sequence[str]) -> tuple[Path, Path]:
    """``path`` (markdown) and the same tables as CSV beside it (``.csv``); both paths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report_markdown(runs, title, notes), encoding="utf-8")
    out_csv = report_csv_path(path)
    with out_csv.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_HEADERS)
        w.writerows(report_csv_rows(runs))
    return path, out_csv


def report_csv_path(path: Path) -> Path:
    """The CSV beside a report: ``NAME.md`` -> ``NAME.csv``."""
    return Path(path).with_suffix(".csv")


def summary_lines(runs: dict[Pairing, Samples]) -> list[str]:
    """One line per pairing for the terminal at the end of a headless run."""
    out = []
    for pair, s in runs.items():
        if not s.count:
            continue
        a, b = _totals(s.rows)
        ma, mb = float(np.median(a)), float(np.median(b))
        ratio = f"{mb / ma:.2f}x" if ma > 0 else "-"
        out.append(f"A {pair.a} {ma:.3f} ms | B {pair.b} {mb:.3f} ms | B/A {ratio} (update + "
                   f"cull, median of {s.count} frames; {pair.settings()}); "
                   f"{_answers(pair, s.rows)}")
    return out
