"""A/B on the same frames (issue 27, item 3): a second index, B, culls every frame the drawn
index, A, culls, and the two costs are shown side by side.

B is a pipeline of its own (:class:`app.culling.pipeline.CullPipeline`, or the nested one for
a hierarchical scene) over the same object arrays. Each frame, beside A's update and cull,
it gets the same moved ids (so the same centres), then the same cull as A: the same
culling camera and toggles, and either A's occlusion mode against the same pyramids
(previous-frame occlusion: last frame's; two-pass: its own early set, then, after A's
occlusion pass, this frame's pyramid) or an occlusion mode of its own (``--compare
occlusion=two-pass``, F3) with pyramids of what B itself draws
(:mod:`app.viewer.compare_occlusion`; their cost is B's ``pyramid`` stage, and A's pyramid
is then counted in A's total). Its answer is not drawn; it is compared with A's (exact
indexes agree exactly with occlusion off on both sides: a difference is a bug), and with
ground truth on, each side's false negatives are counted against the same id buffer.

The order is counterbalanced: B updates and culls right after A on one frame and right before
A on the next. Whichever runs second reads data the first one just brought into the caches
(the moved objects' centres), and whatever runs after the frame's draw finds them evicted by
the software rasterizer's threads: the same index as A and as B (kd against kd, the demo
scene) measured B/A 1.10x with B after the draw, 0.85x with B always right after A.

Per frame the comparison keeps A's and B's update, cull and pyramid times, the ids their
answers differ by, their working sets, nodes visited, objects drawn and false negatives, in
one growing array per pairing (A's index, B's index, the culling toggles, the occlusion
modes). The HUD shows the median and p95 of the last :data:`WINDOW` frames of the current
pairing (:func:`hud_lines`); on exit :func:`write_report` writes every pairing of the run as
a bench-style table, markdown and CSV.

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

from app.culling.pipeline import CullPipeline, FrameCull, IndexConfig, StageCounts
from app.viewer.compare_occlusion import OwnOcclusion
from app.viewer.hud_text import stages_line

#: Frames the HUD's median and p95 are taken over.
WINDOW = 300
#: The frame log's columns of the comparison (empty cells while it is off).
COLUMNS = ("compare_index", "compare_occlusion", "compare_update_ms", "compare_cull_ms",
           "compare_pyramid_ms", "compare_differ")

# The per-frame record's columns (false negatives -1: not measured).
(A_UPDATE, A_CULL, B_UPDATE, B_CULL, DIFFER, A_WS, B_WS, A_NODES, B_NODES, VISIBLE,
 A_PYRAMID, B_PYRAMID, A_DRAWN, B_DRAWN, A_FN, B_FN) = range(16)
_WIDTH = 16


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
    """What a row of the report compares: A's and B's labels, the culling toggles and the
    occlusion modes (``b_occlusion`` None: B culls with A's mode and pyramids)."""

    a: str
    b: str
    frustum: bool
    view_distance: bool
    occlusion: str
    b_occlusion: str | None = None

    @property
    def own_pyramids(self) -> bool:
        """Whether B builds pyramids of its own: then each side's total counts its pyramid."""
        return self.b_occlusion is not None

    @property
    def b_mode(self) -> str:
        return self.occlusion if self.b_occlusion is None else self.b_occlusion

    def settings(self) -> str:
        on = {True: "on", False: "off"}
        own = " (B's own pyramids)" if self.b_occlusion not in (None, "off") else ""
        occ = (f"occlusion {self.occlusion}" if self.b_occlusion is None else
               f"occlusion A {self.occlusion}, B {self.b_occlusion}{own}")
        return f"frustum {on[self.frustum]}, view distance {on[self.view_distance]}, {occ}"

    def side(self, which: str) -> str:
        """A side's label for the HUD and the report: the index, and its occlusion mode
        when the two sides' modes are their own."""
        label, mode = (self.a, self.occlusion) if which == "A" else (self.b, self.b_mode)
        return f"{label} occlusion {mode}" if self.own_pyramids else label

    @property
    def exact(self) -> bool:
        """Whether the two answers must be equal: every index returns the brute-force answer
        without occlusion (the occlusion tests of node boxes may differ between indexes)."""
        return (self.occlusion == "off" and self.b_mode == "off") or not self.frustum

    def why_differ(self) -> str:
        """Why the two answers may differ (or that they must not)."""
        if self.exact:
            return "a bug: exact indexes agree without occlusion"
        if self.b_mode != self.occlusion:
            return "different occlusion modes"
        return "occlusion on: the indexes' box tests may differ"


@dataclass
class AFrame:
    """What A did this frame, as the comparison records it beside B's."""

    cull: FrameCull
    label: str
    update_ms: float
    cull_ms: float  # two-pass: early + late cull
    pyramid_ms: float  # A's pyramid (reduction and read-back)
    drawn: int  # objects the frame drew
    true_visible: np.ndarray | None = None  # ground truth's visible ids (None: not measured)
    false_negatives: int = -1


def side_label(config: IndexConfig, split: int | None) -> str:
    """An index's label with the split threshold in effect: ``kd/leafy split 8``."""
    return config.label() + (f" split {split}" if split is not None else "")


def missed(true_visible: np.ndarray | None, drawn: np.ndarray | None) -> int:
    """False negatives: truly visible ids not drawn (-1: not measured; None drawn: all)."""
    if true_visible is None:
        return -1
    if drawn is None:
        return 0
    return int(np.count_nonzero(~np.isin(true_visible, drawn)))


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
                 scene, make_occlusion: Callable[[str], OwnOcclusion] | None = None) -> None:
        self.make_pipeline = make_pipeline  # (config, scene) -> a pipeline, as A's is made
        self.make_occlusion = make_occlusion  # B's own occlusion mode -> its pyramids
        self.scene = scene
        self.pipeline: CullPipeline | None = None  # None: B is off
        self.own: OwnOcclusion | None = None  # None: B culls with A's mode and pyramids
        self.label = ""
        self.runs: dict[Pairing, Samples] = {}
        self.current: Pairing | None = None
        self.last: dict[str, object] = dict.fromkeys(COLUMNS)  # the last frame's log cells
        self._times = [0.0, 0.0]  # this frame's B update and cull ms so far
        self._frames = 0  # frames B ran (which one goes first alternates)
        self.stages: StageCounts | None = None  # what B's own tests rejected, last frame

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

    @property
    def occlusion_mode(self) -> str | None:
        """B's own occlusion mode (None: A's)."""
        return None if self.own is None else self.own.mode

    def set_occlusion(self, mode: str | None) -> None:
        """B culls with occlusion ``mode`` and pyramids of its own from now on, or with A's
        mode and pyramids (None); its two-pass early set starts empty."""
        if self.own is not None:
            self.own.release()
            self.own = None
        if mode is not None:
            if self.make_occlusion is None:
                raise ValueError("B's own occlusion mode needs an OpenGL context")
            self.own = self.make_occlusion(mode)
        self.forget_visible()

    def release(self) -> None:
        """Free B's own pyramids' GL objects."""
        self.set_occlusion(None)

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
        """B's update and first cull, beside A's: the same moved ids, the same culling camera
        and toggles as A's, and A's occlusion mode against the same pyramid (previous-frame
        occlusion's; two-pass: B's own early set), or B's own mode and pyramid."""
        p = self.pipeline
        if self.own is not None:
            occlusion = self.own.mode
            pyramid = self.own.first_pyramid() if occlusion == "previous" else None
        t0 = time.perf_counter()
        p.update(moved)
        t1 = time.perf_counter()
        p.first_cull(planes, eye, frustum=frustum, view_distance=view_distance,
                     occlusion=occlusion, pyramid=pyramid)
        t2 = time.perf_counter()
        self._times = [(t1 - t0) * 1e3, (t2 - t1) * 1e3]

    def finish(self, a: AFrame, cull_view, late_pyramid=None) -> None:
        """After A's occlusion pass: B's pyramid and two-pass's late cull (B's own pyramid
        of its early set drawn from ``cull_view``, else A's ``late_pyramid``), then B's
        answer against A's and the frame's record."""
        p = self.pipeline
        f = p.last_cull
        b_pyramid = a.pyramid_ms  # A's pyramids, shared (not in either total)
        if self.own is not None:
            b_pyramid = 0.0
            if f.two_pass or self.own.mode == "previous":
                pyramid = self.own.pyramid_of(f.first, cull_view)  # previous: for next frame
                b_pyramid = self.own.pyramid_ms
                if f.two_pass:
                    self._late_cull(pyramid)
        elif f.two_pass and late_pyramid is not None:
            self._late_cull(late_pyramid)
        b_update, b_cull = self._times
        b = f.result
        ra = a.cull.result
        differ = differing_ids(None if ra is None else ra.visible,
                               None if b is None else b.visible, self.scene.objects.ids)
        key = Pairing(a.label, self.label, a.cull.frustum, a.cull.view_distance,
                      a.cull.occlusion, self.occlusion_mode)
        samples = self.runs.setdefault(key, Samples())
        self.current = key
        n = int(self.scene.objects.ids.shape[0])
        b_drawn = f.first if not f.two_pass else np.concatenate((f.first, f.newly))
        b_count = n if b_drawn is None else int(b_drawn.shape[0])
        samples.append((a.update_ms, a.cull_ms, b_update, b_cull, differ,
                        n if ra is None else ra.working_set, n if b is None else b.working_set,
                        0 if ra is None else ra.nodes_visited,
                        0 if b is None else b.nodes_visited,
                        n if ra is None else ra.visible.shape[0],
                        a.pyramid_ms, b_pyramid, a.drawn, b_count,
                        a.false_negatives, missed(a.true_visible, b_drawn)))
        self.last = {"compare_index": self.label, "compare_occlusion": key.b_mode,
                     "compare_update_ms": round(b_update, 4),
                     "compare_cull_ms": round(b_cull, 4),
                     "compare_pyramid_ms": round(b_pyramid, 4), "compare_differ": differ}
        # B's own stage counts: what its query's tests rejected, and what B drew
        self.stages = p.frame_stages(b_count)

    def _late_cull(self, pyramid) -> None:
        """Two-pass's late cull of B against ``pyramid``, timed into B's cull."""
        t0 = time.perf_counter()
        self.pipeline.late_cull(pyramid)
        self._times[1] += (time.perf_counter() - t0) * 1e3

    def log_values(self) -> dict[str, object]:
        """The frame log's comparison cells of the last frame (empty while B is off)."""
        return dict(self.last) if self.active else dict.fromkeys(COLUMNS)

    def hud_lines(self) -> list[str]:
        """The HUD's A/B lines of the current pairing (none while B is off)."""
        if not self.active or self.current is None or self.current.b != self.label:
            return [f"A/B (F2): B {self.label} built, no frame yet"] if self.active else []
        b_stages = stages_line(self.stages, kept="B drew")
        return [*hud_lines(self.current, self.runs[self.current].rows, WINDOW),
                *([f"   B {b_stages}"] if b_stages else [])]


def _stages(pair: Pairing) -> tuple[str, ...]:
    """The stages a side's total adds up: update and cull, and each side's pyramid when B's
    are its own (shared pyramids are the same cost on both sides, left out)."""
    return ("update", "cull", "pyramid") if pair.own_pyramids else ("update", "cull")


_COLUMNS = {"update": (A_UPDATE, B_UPDATE), "cull": (A_CULL, B_CULL),
            "pyramid": (A_PYRAMID, B_PYRAMID)}


def _totals(rows: np.ndarray, pair: Pairing) -> tuple[np.ndarray, np.ndarray]:
    """A's and B's total per frame (the stages of :func:`_stages`)."""
    cols = [_COLUMNS[s] for s in _stages(pair)]
    return (rows[:, [a for a, _ in cols]].sum(axis=1), rows[:, [b for _, b in cols]].sum(axis=1))


def _drawn_line(pair: Pairing, last: np.ndarray) -> str:
    """With B's own occlusion mode: what each side drew this frame, and their false negatives
    (truly visible, not drawn) when ground truth is on."""
    if not pair.own_pyramids:
        return ""
    out = f"; drawn A {int(last[A_DRAWN]):,} B {int(last[B_DRAWN]):,}"
    if last[A_FN] >= 0:
        out += f"; false negatives A {int(last[A_FN]):,} B {int(last[B_FN]):,}"
    return out


def hud_lines(pair: Pairing, rows: np.ndarray, window: int = WINDOW) -> list[str]:
    """Two HUD lines for the last ``window`` frames of ``rows`` (a pairing's samples): both
    costs (update + cull) as medians and their ratio, whether the answers agree; the p95s and
    the last frame's working sets and nodes visited."""
    recent = rows[-window:]
    n = recent.shape[0]
    if n == 0:
        return [f"A/B (F2): B {pair.b}: no frame yet"]
    a, b = _totals(recent, pair)
    ma, mb = float(np.median(a)), float(np.median(b))
    ratio = f"{mb / ma:.2f}x" if ma > 0 else "-"
    now = int(recent[-1, DIFFER])
    bad = int(np.count_nonzero(recent[:, DIFFER]))
    if now == 0 and bad == 0:
        answers = f"answers equal ({n} of {n} frames)"
    else:
        answers = f"answers differ by {now:,} ids this frame, in {bad} of {n} frames"
        answers += f" ({pair.why_differ()})"
    last = recent[-1]
    return [f"A/B (F2): A {pair.side('A')} {ma:.2f} ms | B {pair.side('B')} {mb:.2f} ms | "
            f"B/A {ratio}   {answers}",
            f"   {' + '.join(_stages(pair))}, median of {n} frames; p95 A "
            f"{np.percentile(a, 95):.2f} B {np.percentile(b, 95):.2f}; working set A "
            f"{int(last[A_WS]):,} in {int(last[A_NODES]):,} nodes, B {int(last[B_WS]):,} in "
            f"{int(last[B_NODES]):,}{_drawn_line(pair, last)}"]


# ---------------------------------------------------------------------- the report

REPORT_HEADERS = ("side", "index", "stage", "median ms", "p95 ms", "max ms", "frames",
                  "B/A median")
CSV_HEADERS = ("a_index", "b_index", "settings", "side", "index", "stage", "median_ms",
               "p95_ms", "max_ms", "frames", "b_over_a", "working_set_median", "nodes_median",
               "frames_differing", "drawn_median", "false_negatives")


def _stats(x: np.ndarray) -> tuple[float, float, float]:
    return float(np.median(x)), float(np.percentile(x, 95)), float(x.max())


def report_rows(pair: Pairing, rows: np.ndarray) -> list[tuple]:
    """Per side and stage (update, cull, with B's own pyramids pyramid, total): median, p95,
    max, frames, and on B's rows B's median over A's."""
    a_tot, b_tot = _totals(rows, pair)
    names = (*_stages(pair), "total")
    sides = (("A", pair.side("A"), *(rows[:, _COLUMNS[s][0]] for s in names[:-1]), a_tot),
             ("B", pair.side("B"), *(rows[:, _COLUMNS[s][1]] for s in names[:-1]), b_tot))
    a_med = {s: float(np.median(x)) for s, x in zip(names, sides[0][2:], strict=True)}
    out = []
    for side, label, *stages in sides:
        for stage, x in zip(names, stages, strict=True):
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
    return (f"answers differ on {bad:,} of {rows.shape[0]:,} frames (at most "
            f"{int(rows[:, DIFFER].max()):,} ids; {pair.why_differ()})")


def _drawn_sentence(pair: Pairing, rows: np.ndarray) -> str:
    """With B's own occlusion mode: median objects drawn a frame, and false negatives summed
    over the frames ground truth measured."""
    if not pair.own_pyramids:
        return ""
    out = (f" Drawn a frame (median): A {np.median(rows[:, A_DRAWN]):,.0f}, B "
           f"{np.median(rows[:, B_DRAWN]):,.0f}.")
    measured = rows[:, A_FN] >= 0
    if measured.any():
        out += (f" False negatives (truly visible, not drawn) over {int(measured.sum()):,} "
                f"frames: A {int(rows[measured, A_FN].sum()):,}, B "
                f"{int(rows[measured, B_FN].sum()):,}.")
    return out


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
        "culling camera and toggles; A's occlusion mode and pyramids, or an occlusion mode of "
        "B's own with pyramids of what B draws), its answer compared with A's and not drawn; "
        "B updates and culls right after A on one frame, right before A on the next, so that "
        "the order's cache advantage goes to each side alike. Milliseconds of wall clock per "
        "frame (perf_counter): update = `index.update` of the moved objects, cull = the query "
        "(two-pass occlusion: early + late cull), pyramid (only when B has an occlusion mode "
        "of its own: each side's pyramid reduction and read-back; B's depth draw of its own "
        "ids is not in it), total = their sum; p95 = `np.percentile(x, 95)`; "
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
        lines += [f"## A {pair.side('A')} vs B {pair.side('B')} ({pair.settings()})", "",
                  *_md_table(report_rows(pair, r)), "",
                  f"Median working set: A {np.median(r[:, A_WS]):,.0f}, B "
                  f"{np.median(r[:, B_WS]):,.0f}; nodes visited: A "
                  f"{np.median(r[:, A_NODES]):,.0f}, B {np.median(r[:, B_NODES]):,.0f}; visible "
                  f"{np.median(r[:, VISIBLE]):,.0f}; {_answers(pair, r)}."
                  f"{_drawn_sentence(pair, r)}", ""]
    return "\n".join(lines)


def report_csv_rows(runs: dict[Pairing, Samples]) -> list[tuple]:
    """The CSV's rows: the markdown tables' rows with the pairing, working set, nodes, objects
    drawn and false negatives (summed over the frames ground truth measured; empty when none
    was)."""
    out = []
    for pair, s in runs.items():
        if not s.count:
            continue
        r = s.rows
        bad = int(np.count_nonzero(r[:, DIFFER]))
        for side, _label, stage, med, p95, mx, frames, ratio in report_rows(pair, r):
            ws, nodes, drawn, fn = ((A_WS, A_NODES, A_DRAWN, A_FN) if side == "A" else
                                    (B_WS, B_NODES, B_DRAWN, B_FN))
            measured = r[:, fn] >= 0
            out.append((pair.a, pair.b, pair.settings(), side, pair.side(side),
                        stage, round(med, 5), round(p95, 5), round(mx, 5), frames,
                        "" if ratio is None else round(ratio, 4),
                        float(np.median(r[:, ws])), float(np.median(r[:, nodes])), bad,
                        float(np.median(r[:, drawn])),
                        int(r[measured, fn].sum()) if measured.any() else ""))
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
        a, b = _totals(s.rows, pair)
        ma, mb = float(np.median(a)), float(np.median(b))
        ratio = f"{mb / ma:.2f}x" if ma > 0 else "-"
        out.append(f"A {pair.side('A')} {ma:.3f} ms | B {pair.side('B')} {mb:.3f} ms | B/A "
                   f"{ratio} ({' + '.join(_stages(pair))}, median of {s.count} frames; "
                   f"{pair.settings()}); {_answers(pair, s.rows)}")
    return out
