"""The viewer's state as plain data: the toggles the keys flip and one frame's figures.

No OpenGL and no index here: the frame (``frame``), the HUD text (``hud_text``), the frame
log (``capture``) and the viewer (``viewer``) share these records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.culling.pipeline import StageCounts

BOX_MODES = ("off", "depth", "outcome")
OCCLUSION_MODES = ("off", "previous", "two-pass")


@dataclass
class Toggles:
    """What the keys switch: culling stages, overlays, motion."""

    frustum: bool = True
    view_distance: bool = False
    occlusion: str = "off"
    boxes: str = "off"
    box_filter: str = "all"
    frozen: bool = False
    paused: bool = False
    hud: bool = True
    help: bool = False
    collision: bool = True  # the collision view (a scene with colliding balls)
    pair_lines: str = "off"  # off / contacts / candidates
    graph: bool = False  # the frame-time graph (G)


@dataclass
class FrameStats:
    """One frame's times and counts, for the HUD, the frame log and the frame graph.

    The times are the stages of :data:`app.framelog.TIME_STAGES`, which sum to ``frame_ms``,
    the frame's wall time (start to the next frame's start; see :mod:`app.viewer.timing`).
    """

    frame: int = 0
    time_s: float = 0.0  # simulated time (steps capped at 0.1 s)
    wall_s: float = 0.0  # wall-clock time at the frame's start, from the viewer's start
    frame_ms: float = 0.0
    motion_ms: float = 0.0
    index_update_ms: float = 0.0
    cull_ms: float = 0.0
    upload_ms: float = 0.0
    draw_ms: float = 0.0  # the main pass
    occlusion_pass_ms: float = 0.0  # pyramid, two-pass's late cull and draw, ground truth
    compare_ms: float = 0.0  # the A/B comparison's B index: its update, cull and answer check
    overlay_ms: float = 0.0  # boxes, the frozen camera, pair lines (not the HUD)
    hud_ms: float = 0.0  # the stage counts, the HUD text and the frame graph
    present_ms: float = 0.0  # the window's blit and buffer swap
    stall_ms: float = 0.0  # a rebuild or an index switch between this frame and the next
    other_ms: float = 0.0  # the rest of frame_ms (event loop, log row, Python between passes)
    stall: str = ""  # what stalled this frame ("rebuild kd 723 ms", "compile 340 ms")
    compile_ms: float = 0.0  # numba compiling during the frame (inside its stages)
    visible: int = 0
    drawn: int = 0
    working_set: int = 0
    nodes_visited: int = 0
    moved: int = 0
    stages: StageCounts | None = None  # culled per stage (None: not counted, HUD off)
    stages_ms: float = 0.0  # the stage counts' time (part of hud_ms)
    drawn_late: int = 0  # of drawn: two-pass's late cull's newly visible objects
    started: float = 0.0  # perf_counter at the frame's start
    compile_mark: float = 0.0  # the compile clock at the frame's start
    # The brute-force reference measured in this frame (app.viewer.brute_reference), and its
    # wall time, which is a measurement outside the frame: in no stage, not in frame_ms.
    brute: Any = None
    reference_ms: float = 0.0

    @property
    def update_ms(self) -> float:
        return self.motion_ms + self.index_update_ms

    @property
    def render_ms(self) -> float:
        """The log's ``render_ms``: the main pass and the occlusion pass."""
        return self.draw_ms + self.occlusion_pass_ms

    @property
    def cpu_ms(self) -> float:
        return self.motion_ms + self.index_update_ms + self.cull_ms + self.upload_ms

    @property
    def fps(self) -> float:
        """Frames per second of this frame's wall time."""
        return 1000.0 / self.frame_ms if self.frame_ms > 0 else 0.0
