"""The viewer's state as plain data: the toggles the keys flip and one frame's figures.

No OpenGL and no index here: the frame (``frame``), the HUD text (``hud_text``), the frame
log (``capture``) and the viewer (``viewer``) share these records.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass
class FrameStats:
    """One frame's times and counts, for the HUD and the frame log."""

    frame: int = 0
    time_s: float = 0.0
    frame_ms: float = 0.0
    motion_ms: float = 0.0
    index_update_ms: float = 0.0
    cull_ms: float = 0.0
    upload_ms: float = 0.0
    render_ms: float = 0.0
    overlay_ms: float = 0.0
    visible: int = 0
    drawn: int = 0
    working_set: int = 0
    nodes_visited: int = 0
    moved: int = 0
    stages: StageCounts | None = None  # culled per stage (None: not counted, HUD off)
    stages_ms: float = 0.0

    @property
    def update_ms(self) -> float:
        return self.motion_ms + self.index_update_ms

    @property
    def cpu_ms(self) -> float:
        return self.motion_ms + self.index_update_ms + self.cull_ms + self.upload_ms
