"""The HUD's text as pure functions of plain values: no OpenGL, no index, no viewer.

:class:`app.viewer.viewer.Viewer` gathers a :class:`HudState` each frame and draws
:func:`hud_lines`; the tests call these functions with made-up values. Each line's meaning is
described in docs/viewer.md ("The HUD").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from app.culling.pipeline import StageCounts
from app.framelog import OPTIONAL_STAGES, TIME_STAGES
from app.viewer.state import FrameStats, Toggles

# The HUD calls a frame render-bound when drawing takes this share of frames this slow (ms).
RENDER_BOUND_SHARE = 0.6
RENDER_BOUND_MS = 33.0
#: Frames of (render, frame) times :func:`render_bound` needs before it says anything.
RENDER_BOUND_MIN_FRAMES = 10


@dataclass
class HudState:
    """Everything the HUD prints besides one frame's :class:`FrameStats`."""

    timed: FrameStats | None  # the last closed frame: its stages and wall time (None: none)
    objects: int
    index: str  # the index's name
    variant: str  # "leafy", "non-leafy" or "-"
    split: int | None  # the split threshold in effect
    describe: str  # the index's own one-line description
    toggles: Toggles
    box_count: int = 0  # boxes the overlay drew (of box_total)
    box_total: int = 0
    recording: str | None = None  # the log's file name while recording
    scene: str = ""
    camera: str = ""
    reason: str | None = None  # why there are no nodes (no_nodes_reason)
    hint: str | None = None  # render_bound's advice
    extra: list[str] = field(default_factory=list)  # the occlusion, collision, nested lines
    cost: str | None = None  # cost_text's: the index's cost against the brute force's


def box_filter_label(box_filter: str) -> str:
    """N's filter as the HUD names it: ``all``, ``leaves only``, ``depth <= 2``."""
    return {"all": "all", "leaves": "leaves only"}.get(box_filter,
                                                       box_filter.replace("<=", " <= "))


def timing_lines(t: FrameStats | None) -> list[str]:
    """The last closed frame's wall time as the sum of its stages (:data:`TIME_STAGES`, in
    frame order; a stall or an A/B comparison only when there was one) and fps as 1000 / that
    time: the same numbers as its frame-log row."""
    if t is None:
        return ["fps -   frame - ms (no frame finished yet)"]
    parts = [f"{label} {getattr(t, col):.2f}" for col, label, _ in TIME_STAGES
             if col not in OPTIONAL_STAGES or getattr(t, col) > 0]
    half = (len(parts) + 1) // 2
    first = (f"{t.fps:6.1f} fps = 1000 / frame {t.frame_ms:.2f} ms = "
             + " + ".join(parts[:half]))
    second = "      + " + " + ".join(parts[half:]) + f"   (frame {t.frame}, ms)"
    lines = [first, second]
    if t.stall:
        lines.append(f"stall in frame {t.frame}: {t.stall}")
    return lines


def counts_line(st: FrameStats, objects: int, nodes: str, two_pass: bool) -> str:
    """What this frame's culls tested and drew, each count named for what it counts."""
    line = (f"objects {objects:,}   tested {st.working_set:,} (working set) in {nodes.strip()} "
            f"nodes   query answer {st.visible:,}   drawn {st.drawn:,}")
    if two_pass:
        line += f" (early {st.drawn - st.drawn_late:,} + late {st.drawn_late:,})"
    return line


def stages_line(c: StageCounts | None, toggles: Toggles | None = None,
                kept: str = "drawn") -> str | None:
    """Unreal's ``stat initviews`` in one line: how many objects each test of the cull
    rejected, as the query counted them (a node rejected whole counts its objects under that
    test; see docs/viewer.md), and how many were ``kept`` (drawn; an A/B run's B side: its
    answer). A stage switched on that cannot act says why (occlusion needs frustum culling's
    query)."""
    if c is None:
        return None
    occ_mode = toggles.occlusion if toggles is not None else "off"

    def part(name: str, v: int | None) -> str:
        return f"{name} {'off' if v is None else f'{v:,}'}"

    occlusion = part("occlusion", c.occlusion)
    if c.occlusion is None and occ_mode != "off" and c.frustum is None:
        occlusion = f"occlusion {occ_mode} inactive (frustum off)"
    share = c.culled / c.objects if c.objects else 0.0
    # in the order the kernels apply the tests (app/geom/decide.py), which decides the counts
    return (f"culled {c.culled:,} of {c.objects:,} ({share:.1%}), rejected in the order "
            f"tested by:  {part('view distance', c.distance)}   {part('frustum', c.frustum)}   "
            f"{occlusion}   -> {kept} {c.drawn:,}")


def no_nodes_reason(index: str, frustum: bool, stats: Mapping | None,
                    live: int) -> str | None:
    """Why ``index`` visits no nodes and has no boxes to draw when that is by design (brute,
    viewdist without view distances, chunks in slot order, frustum culling off); None
    otherwise. ``stats``: the index's ``stats()`` (None when there is no index); ``live``: its
    object count."""
    if not frustum:
        return "frustum culling is off (F), so no query walks the index"
    if index == "brute":
        return "brute is a flat scan of every object, it has none"
    if stats is None:
        return None
    if index == "viewdist" and live and stats.get("infinite", 0) >= live:
        return ("viewdist keeps objects without a view distance in a flat list beside its "
                "tree, and no object of this scene has one (meadow has)")
    if stats.get("order") == "slot":
        return ("chunks went to slot order because most objects move every frame, and scans "
                "them flat; pause (P) and it lays them out along its curve again")
    if stats.get("flat"):
        what, it = ("its cells", "them") if index == "grid" else ("a tree", "it")
        return (f"{index} went flat because most objects move every frame (a scan of them "
                f"all is cheaper than keeping {what}); pause (P) and it builds {it} again")
    return None


def render_bound(timings: Sequence[tuple[float, float]], drawn: int, size: tuple[int, int],
                 objects: int, software_gl: bool) -> str | None:
    """A hint when drawing dominates slow frames (llvmpipe draws in software): ``timings``
    are the last frames' (render ms, frame ms), render being the stage line's draw +
    occlusion (the occlusion pass draws too: pyramid, frozen depth, ground truth's id
    buffer), named so on the line."""
    if len(timings) < RENDER_BOUND_MIN_FRAMES:
        return None
    render = sum(r for r, _ in timings)
    frame = sum(f for _, f in timings)
    mean = frame / len(timings)
    if frame <= 0 or render < RENDER_BOUND_SHARE * frame or mean < RENDER_BOUND_MS:
        return None
    w, h = size
    gl = ", software GL" if software_gl else ""
    return (f"render-bound: draw + occlusion are {render / frame:.0%} of a {mean:.0f} ms frame "
            f"({drawn:,} objects at {w}x{h}{gl}); try --size {w // 2}x{h // 2} or "
            f"fewer objects (--objects {max(objects // 2, 1)})")


#: The paper's nesting heuristics by tree name, and the children of a node they split into.
HEURISTICS = {"kd": ("K-D", 2), "ternary": ("ternary", 3), "octree": ("octree", 8),
              "icoseptree": ("icoseptree", 27)}


def index_line(index: str, variant: str, split: int | None, describe: str,
               cost: str | None = None) -> str:
    """The active index said plainly (for the paper's trees: leafy or non-leafy, the split
    threshold and the heuristic; another index: its own description), then ``cost``
    (:func:`cost_text`) on the same line."""
    if index in HEURISTICS:
        head = (f"index {index} {variant}, split threshold {split if split is not None else '-'} "
                f"(heuristic {HEURISTICS[index][0]})")
    else:
        head = f"index {index}" + (f" [{describe}]" if describe != index else "")
    return head if cost is None else f"{head}: {cost}"


def cost_text(index_ms: float, brute_ms: float | None = None, frames_ago: int = 0,
              note: str | None = None, occlusion: str = "off", of: int = 1) -> str:
    """The live index's update + cull of this frame against the brute force's (the ``brute``
    index's update + cull: the median of its last ``of`` measurements, the latest
    ``frames_ago`` frames ago), as a ratio, brute force over index (the benchmarks' "x brute
    force", here "as fast": above 1 the index is faster); ``note`` says why there is none."""
    head = f"update + cull {index_ms:.2f} ms"
    if note is not None:
        return f"{head}; brute force {note}"
    if brute_ms is None:
        return f"{head}; brute force not measured yet"
    ago = "this frame" if frames_ago == 0 else \
        f"{frames_ago} frame{'s' if frames_ago != 1 else ''} ago"
    when = f"median of {of}, latest {ago}" if of > 1 else f"measured {ago}"
    occ = "" if occlusion == "off" else ", no occlusion"
    if index_ms <= 0:
        return f"{head}; brute force {brute_ms:.2f} ms ({when}{occ})"
    return (f"{head} vs brute force {brute_ms:.2f} ms: {brute_ms / index_ms:.2f}x as fast "
            f"({when}{occ})")


def help_head(index: str, variant: str, split: int | None) -> list[str]:
    """F1's first lines: which index, heuristic, variant and threshold are active, and the
    keys that switch them."""
    if index in HEURISTICS:
        name, children = HEURISTICS[index]
        active = (f"ACTIVE  {index}: heuristic {name} ({children} children a node), "
                  f"{variant}, split threshold {split if split is not None else '-'}")
    else:
        active = f"ACTIVE  {index} (not one of the paper's trees: L and + / - do not apply)"
    return [active,
            "  I / Shift+I switches the index (kd, ternary, octree, icoseptree: the paper's "
            "heuristics), L leafy / non-leafy, + / - the split threshold; the HUD's index "
            "line compares each with the brute force", ""]


def hud_lines(st: FrameStats, s: HudState) -> list[str]:
    """The HUD's lines for frame ``st``: times, counts, the stages, the index, the toggles,
    the scene and camera, then the lines that apply (no nodes, render-bound, extras)."""
    tg = s.toggles
    on = {True: "on", False: "off"}
    nodes = "      -" if s.reason and st.nodes_visited == 0 else f"{st.nodes_visited:>7,}"
    boxes = tg.boxes if tg.boxes == "off" or tg.box_filter == "all" else \
        f"{tg.boxes} ({box_filter_label(tg.box_filter)}: {s.box_count:,} of {s.box_total:,})"
    two_pass = tg.occlusion == "two-pass" and tg.frustum
    lines = timing_lines(s.timed) + [counts_line(st, s.objects, nodes, two_pass)]
    stages = stages_line(st.stages, tg)
    if stages:
        lines.append(stages)
    lines.append(index_line(s.index, s.variant, s.split, s.describe, s.cost))
    lines += [
        f"frustum {on[tg.frustum]}  view distance {on[tg.view_distance]}  occlusion "
        f"{tg.occlusion}  boxes {boxes}  frozen {on[tg.frozen]}  motion "
        f"{'paused' if tg.paused else 'running'}  rec {s.recording or 'off'}",
        f"scene {s.scene}   camera: {s.camera}   F1 help",
    ]
    if s.reason:
        empty = tg.boxes != "off" and s.box_total == 0
        lines.append(f"{'no nodes, no boxes to draw' if empty else 'no nodes visited'}: "
                     f"{s.reason}")
    if s.hint:
        lines.append(s.hint)
    return lines + list(s.extra)


def graph_title(frame_ms: np.ndarray, stalls: int, capacity: int) -> str:
    """The frame graph's title: how many frames it shows, their median and worst time."""
    if frame_ms.shape[0] == 0:
        return "frame time (G): no frame finished yet"
    marks = f", {stalls} stall{'s' if stalls != 1 else ''} (red)" if stalls else ""
    return (f"last {frame_ms.shape[0]}/{capacity} frames: median "
            f"{float(np.median(frame_ms)):.1f} ms, worst {float(frame_ms.max()):.0f} ms{marks}")


def needs_reason(st: FrameStats, toggles: Toggles, box_total: int) -> bool:
    """Whether the HUD asks why there are no nodes: none visited, or boxes on and none."""
    return st.nodes_visited == 0 or (toggles.boxes != "off" and box_total == 0)
