"""The viewer's collision view (issue 14): what the frame shows of a scene's colliding balls.

The simulation (``app/scene/collide.py``) runs inside ``scene.step``: its own collision index
of swept spheres, one pair query a step, the narrow phase and the response. This module only
reads it: it tints the balls in contact, draws pair lines (the pairs in contact or every
broad-phase candidate) and the walls, writes the HUD's collision line and the frame log's
columns, and switches the collision index (U). :class:`app.viewer.viewer.Viewer` calls it
from small hooks in its frame.
"""

from __future__ import annotations

import numpy as np

from app.render.pair_lines import CANDIDATE_COLOR, CONTACT_COLOR, PairLines
from app.spatial import INDEX_NAMES

#: The colour of a ball in contact (orange against the blue and grey balls).
TINT = (1.0, 0.42, 0.12)
LINE_MODES = ("off", "contacts", "candidates")
#: Frame-log columns of a scene with colliding balls (the step runs whether or not the view
#: is shown, so they are filled in every frame).
COLUMNS = ("pairs", "contacts", "broadphase_ms", "narrowphase_ms", "response_ms")


class CollisionView:
    """Tint, lines, HUD line and log values of one scene's :class:`CollisionWorld`."""

    def __init__(self, ctx, objects, world) -> None:
        self.world = world
        self.objects = objects  # the ObjectRenderer whose colours are tinted
        self.lines = PairLines(ctx)
        self._tinted = False
        self.lines_drawn = 0

    # ------------------------------------------------------------------ keys

    def cycle_index(self, step: int = 1) -> str:
        """U / Shift+U: the next / previous collision index, built from the balls' current
        swept spheres; returns the notice."""
        names = list(INDEX_NAMES)
        cur = self.world.index_name
        i = names.index(cur) if cur in names else 0
        name = names[(i + step) % len(names)]
        ms = self.world.set_index(name)
        return f"collision index {cur} -> {name}: {self.world.n:,} swept spheres in {ms:.0f} ms"

    # ------------------------------------------------------------------ per frame

    def tint(self, on: bool) -> None:
        """Before the upload: the balls in contact in the tint colour (or no tint)."""
        if on:
            self.objects.set_tint(self.world.contact_rows(), TINT)
            self._tinted = True
        elif self._tinted:
            self.objects.set_tint(np.zeros(0, np.int64), TINT)
            self._tinted = False

    def draw_lines(self, mode: str, viewproj: np.ndarray, centers: np.ndarray,
                   visible: np.ndarray | None) -> int:
        """The walls and, per ``mode``, a segment for each pair in contact or each candidate
        with a member drawn this frame (``visible``; None: all); returns the pairs drawn."""
        if mode == "candidates":
            pairs, color = self.world.candidate_rows(), CANDIDATE_COLOR
        elif mode == "contacts":
            pairs, color = self.world.contact_pairs, CONTACT_COLOR
        else:
            pairs, color = np.zeros((0, 2), np.int64), CONTACT_COLOR
        self.lines_drawn = self.lines.set_lines(pairs, centers, visible, color,
                                                box=(self.world.lo, self.world.hi))
        self.lines.draw(viewproj)
        return self.lines_drawn

    def hud_lines(self, mode: str) -> list[str]:
        """The HUD's collision lines: index and numbers of the last step, then the keys."""
        w, s = self.world, self.world.stats
        lines = [
            f"collision  index {w.index_name}   pairs {s.pairs:,}   in contact {s.contacts:,} "
            f"({s.balls_in_contact:,} balls tinted)   broad-phase {s.broadphase_ms:.2f} ms   "
            f"narrow {s.narrowphase_ms:.2f}   response {s.response_ms:.2f}",
        ]
        shown = "" if mode == "off" else f" ({self.lines_drawn:,} drawn)"
        lines.append(f"collision view on (T)   pair lines {mode}{shown} (Y)   collision index "
                     f"{w.n:,} swept spheres (U)")
        return lines

    def log_values(self) -> dict[str, object]:
        """The log's collision cells of the last step."""
        s = self.world.stats
        return {"pairs": s.pairs, "contacts": s.contacts,
                "broadphase_ms": round(s.broadphase_ms, 4),
                "narrowphase_ms": round(s.narrowphase_ms, 4),
                "response_ms": round(s.response_ms, 4)}


def apply_collision_index(scene, name: str | None) -> str | None:
    """``--collision-index NAME``: the scene's collision index becomes ``name``; a note
    (one line) when the scene has no colliding balls, else None."""
    if name is None:
        return None
    world = getattr(scene, "collision", None)
    if world is None:
        return (f"note: --collision-index applies to scenes with colliding balls (collide); "
                f"{scene.name} has none")
    if world.index_name != name:
        world.set_index(name)
    return None
