"""What ``demo --help`` lists, as plain data: the indexes, the shipped scenes with their
descriptions, the window's keys, the largest object count a scene may ask for.

Reading these through ``app.spatial``, ``app.scene`` or ``app.viewer.frame`` would import
numba and, on a cold kernel cache, compile kernels for half a minute before the help prints.
This module loads ``app/spatial/names.py`` by itself (not through ``app/spatial/__init__.py``),
reads the scene files' ``description`` with ``tomllib`` and keeps the key list as text; tests
check that all of it matches what the indexes, the scene loader and the viewer use.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType


def _spatial_names() -> ModuleType:
    """``app.spatial.names``, loaded from its file when ``app.spatial`` is not imported yet
    (registered under its own name, so that ``app.spatial`` later finds it loaded)."""
    name = "app.spatial.names"
    module = sys.modules.get(name)
    if module is None:
        path = Path(__file__).resolve().parents[1] / "spatial" / "names.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


_names = _spatial_names()
#: Every selectable index (``app.spatial.INDEX_NAMES``).
INDEX_NAMES: tuple[str, ...] = _names.INDEX_NAMES
#: The dynamic AABB trees (``app.spatial.TREE_HEURISTICS``).
TREE_HEURISTICS: tuple[str, ...] = _names.TREE_HEURISTICS
#: One line of help per index.
INDEX_HELP: dict[str, str] = _names.INDEX_HELP

#: The repository's scene files (``app.scene.scene.SCENES_DIR``).
SCENES_DIR = Path(__file__).resolve().parents[2] / "scenes"

#: ``--objects`` upper bound (``app.scene.scene.MAX_OBJECTS``).
MAX_OBJECTS = 10**15

#: The window's keys (``app.viewer.frame.HELP_LINES``, which F1 shows in the window).
KEY_LINES: list[str] = [
    "KEYS",
    "  F1            this help",
    "  W A S D       fly forward / left / back / right",
    "  Q / E         down / up  (also Ctrl / Space)",
    "  Shift         move 5x faster",
    "  mouse drag    look around (left or right button held)",
    "  M             capture the mouse (free look), Esc releases",
    "  I / Shift+I   next / previous index (rebuilds from the current objects)",
    "  L             toggle leafy / non-leafy (tree indexes)",
    "  + / -         raise / lower the split threshold",
    "  F             toggle frustum culling (off: draw everything)",
    "  V             toggle view-distance culling",
    "  O             cycle occlusion culling off / previous / two-pass",
    "  B             cycle node-box overlay: off / by depth / by outcome",
    "  N / Shift+N   boxes shown: all / leaves only / depth <= 1, 2, 3, 4",
    "  Z             freeze culling (culling camera stays, its frustum is drawn)",
    "  X             outside view: orbit the frozen culling camera (freezes it)",
    "  C             play / stop the scene's camera path (flying takes over)",
    "  P             pause / resume motion",
    "  R             start / stop recording the frame log (out/logs/)",
    "  F12 or K      screenshot (PNG, out/screenshots/)",
    "  T             collision view: tint balls in contact, HUD line (collide scene)",
    "  Y             pair lines: off / pairs in contact / broad-phase candidates",
    "  U / Shift+U   next / previous collision index (swept spheres, collide scene)",
    "  H             hide / show the HUD",
    "  Home          back to the scene's start camera",
    "  Esc           release mouse, else quit",
]


def list_scenes() -> list[str]:
    """Names of the scene files in scenes/ (as ``app.scene.list_scenes``)."""
    return sorted(p.stem for p in SCENES_DIR.glob("*.toml"))


def scene_descriptions() -> dict[str, str]:
    """Name -> the ``[scene] description`` of every scene in scenes/ ("" when it has none or
    the file does not parse; read, not validated)."""
    out: dict[str, str] = {}
    for name in list_scenes():
        try:
            with open(SCENES_DIR / f"{name}.toml", "rb") as fh:
                desc = tomllib.load(fh).get("scene", {}).get("description", "")
        except (OSError, tomllib.TOMLDecodeError, AttributeError):
            desc = ""
        out[name] = desc if isinstance(desc, str) else ""
    return out
