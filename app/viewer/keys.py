"""The window's key bindings as one table: what each key does and how it is described.

:data:`BINDINGS` is the single source of the keys. :class:`app.viewer.viewer.Viewer` dispatches
a pressed key's name through it (:func:`action_of`), F1 and ``demo --help`` print
:func:`help_lines`, and the key table of ``docs/viewer.md`` is :func:`markdown_table`
(``python -m app.viewer.keys`` prints it; a test checks the document holds exactly that).

Plain data and the standard library only: ``--help`` reads it without importing numba or
OpenGL.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Binding:
    """One row of the key table."""

    keys: str  # as shown to the user: "I / Shift+I"
    help: str  # the F1 / --help line's text
    action: str | None = None  # the viewer's action; None: the window handles the key itself
    names: tuple[str, ...] = ()  # pyglet key names (lower case) that trigger ``action``
    doc: str = ""  # docs/viewer.md's longer text (default: ``help``)

    @property
    def doc_text(self) -> str:
        return self.doc or self.help


BINDINGS: tuple[Binding, ...] = (
    Binding("F1", "this help", "help", ("f1",),
            "this key list, under the HUD (which stays on, so a key's effect shows); "
            "F1 again hides it"),
    Binding("W A S D", "fly forward / left / back / right",
            doc="fly forward / left / back / right (also the arrow keys)"),
    Binding("Q / E", "down / up  (also Ctrl / Space)", doc="down / up (also Ctrl / Space)"),
    Binding("Shift", "move 5x faster", doc="5x speed; mouse wheel scales the base speed"),
    Binding("mouse drag", "look around (left or right button held)",
            doc="look around (any button held)"),
    Binding("M", "capture the mouse (free look), Esc releases",
            doc="capture the mouse for free look; `Esc` releases it"),
    Binding("I / Shift+I", "next / previous index (rebuilds from the current objects)", "index",
            ("i",), "next / previous index (rebuilt from the current objects; the HUD shows the "
            "rebuild time; an index not used yet compiles first, its progress drawn over the "
            "last frame)"),
    Binding("L", "toggle leafy / non-leafy (tree indexes)", "leafy", ("l",),
            "leafy / non-leafy (tree indexes)"),
    Binding("+ / -", "raise / lower the split threshold", "split", ("plus", "equal", "num_add",
            "minus", "num_subtract", "underscore"),
            "raise / lower the split threshold (1 2 3 4 6 8 12 16 24 32 48 64 96 128 256 "
            "600 1200; 600: the storage's)"),
    Binding("F", "toggle frustum culling (off: draw everything)", "frustum", ("f",),
            "frustum culling on / off (off: every object is drawn)"),
    Binding("V", "toggle view-distance culling", "view_distance", ("v",),
            "view-distance culling on / off"),
    Binding("O", "cycle occlusion culling off / previous / two-pass", "occlusion", ("o",),
            "occlusion off / previous / two-pass"),
    Binding("B", "cycle node-box overlay: off / by depth / by outcome", "boxes", ("b",),
            "node-box overlay: off / coloured by depth / coloured by the last query's outcome "
            "(green inside, yellow partial, red frustum-rejected, blue view-distance-rejected, "
            "magenta occluded, grey not visited); a legend row under the HUD names the colours"),
    Binding("N / Shift+N", "boxes shown: all / leaves only / depth <= 1, 2, 3, 4", "box_filter",
            ("n",), "which boxes the overlay shows: all / leaves only / depth <= 1, 2, 3, 4 (the "
            "HUD counts them: `leaves only: 562 of 673`); turns the overlay on"),
    Binding("Z", "freeze culling (culling camera stays, its frustum is drawn)", "freeze", ("z",),
            "freeze culling: the culling camera stays and the HUD says `culling camera frozen "
            "(Z)`; its frustum is drawn as orange lines with a camera marker (white box with a "
            "lens), and seen from outside its near plane (cyan) and far plane (faint orange) "
            "filled and labelled; occlusion culls with the frozen camera's own depth pyramid"),
    Binding("X", "outside view: orbit the frozen culling camera (freezes it)", "orbit", ("x",),
            "outside view (Panda3D's `oobeCull`): freezes the culling camera if it is not, and "
            "the view orbits it from behind and above, turning slowly; drag turns the orbit, W/S "
            "or the wheel zoom, X comes back (and unfreezes what X froze)"),
    Binding("C", "play / stop the scene's camera path (flying takes over)", "path", ("c",),
            "play / stop the scene's camera path in the window (from where it stopped; a flying "
            "key or a drag takes over from the path's pose)"),
    Binding("P", "pause / resume motion", "pause", ("p",)),
    Binding("R", "start / stop recording the frame log (out/logs/)", "record", ("r",),
            "start / stop recording (to `--record`'s file, else `out/logs/frames-DATE-TIME.csv`; "
            "a restarted recording goes to `LOG-2.csv`, never overwrites)"),
    Binding("F12 or K", "screenshot (PNG, out/screenshots/)", "screenshot", ("f12", "k"),
            "screenshot of the next frame, without the transient notices (to `--screenshot`'s "
            "name, else `out/screenshots/`)"),
    Binding("J", "write this frame's settings, counts and nodes as JSON (out/inspect/)",
            "inspect", ("j",), "frame inspector: the next frame's settings (scene, groups, "
            "seed, index and its parameters, toggles, cameras), its counts (the log's row) and "
            "every node of the index with its box, depth and outcome, as JSON (to "
            "`--dump-path`'s name, else `out/inspect/`; the notice line says where; the format "
            "is under \"Frame dumps\" below)"),
    Binding("T", "collision view: tint balls in contact, HUD line (collide scene)", "collision",
            ("t",), "collision view (a scene with colliding balls, on at start): the balls in "
            "contact in the last step tinted orange, the walls drawn, the HUD's collision lines; "
            "off: their own colours"),
    Binding("Y", "pair lines: off / pairs in contact / broad-phase candidates", "pair_lines",
            ("y",), "pair lines: off / a segment between the centres of each pair in contact / "
            "of each broad-phase candidate (pairs with a member drawn this frame; an overlay); "
            "turns the collision view on"),
    Binding("U / Shift+U", "next / previous collision index (swept spheres, collide scene)",
            "collision_index", ("u",), "next / previous collision index (built from the balls' "
            "swept spheres; a notice says from which to which and how long it took)"),
    Binding("H", "hide / show the HUD", "hud", ("h",)),
    Binding("G", "frame-time graph: stacked stages, 16.7 / 33.3 ms lines, stalls", "graph",
            ("g",), "frame-time graph (lower right): the last 300 frames as bars stacked by "
            "stage (the HUD's and the log's stages, same colours as `plot`), 16.7 and 33.3 ms "
            "budget lines, a red mark over each stall (a rebuild, an index switch, a compile)"),
    Binding("F2 / Shift+F2", "A/B: next / previous B index culling the same frames, or off",
            "compare", ("f2",), "A/B comparison: the next / previous B index (off, then every "
            "index in I's order, then off; B keeps its variant and split threshold, else A's): "
            "B culls the frames A culls, not drawn, and the HUD shows both costs, B/A and "
            "whether the answers agree; the report is written on exit (`--compare`)"),
    Binding("F3 / Shift+F3", "A/B: B's occlusion mode: A's / own off / previous / two-pass",
            "compare_occlusion", ("f3",), "A/B: the B side's occlusion mode: A's (A's "
            "pyramids), then off, previous and two-pass of its own, with pyramids of what B "
            "draws, their cost in B's total; with B off, B becomes A's index (one index "
            "under two occlusion modes; `--compare occlusion=MODE`)"),
    Binding("Home", "back to the scene's start camera", "home", ("home",),
            "back to the scene's start camera (and to flying)"),
    Binding("Esc", "release mouse, else quit",
            doc="release the mouse, else quit (the log is closed first); Ctrl-C / SIGTERM also "
            "close the log cleanly"),
)

#: The actions a viewer must provide, in table order.
ACTIONS: tuple[str, ...] = tuple(b.action for b in BINDINGS if b.action is not None)

_BY_NAME: dict[str, str] = {n: b.action for b in BINDINGS if b.action for n in b.names}


def action_of(name: str) -> str | None:
    """The action bound to pyglet's key name ``name`` (lower case), None for an unbound key."""
    return _BY_NAME.get(name)


#: Which way a two-way key goes: the minus-side names of ``+ / -``.
DOWN_NAMES = frozenset(("minus", "num_subtract", "underscore"))


def help_lines(title: str = "KEYS") -> list[str]:
    """The key list as F1 shows it (and ``demo --help``, with its own title)."""
    return [title] + [f"  {b.keys:<14}{b.help}" for b in BINDINGS]


def markdown_table() -> str:
    """The key table of ``docs/viewer.md``."""
    rows = ["| key | action |", "| --- | --- |"]
    rows += [f"| {b.keys} | {b.doc_text} |" for b in BINDINGS]
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write(markdown_table() + "\n")
