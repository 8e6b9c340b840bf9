"""What ``demo --help`` lists, as plain data: the indexes, the shipped scenes with their
descriptions, the largest object count a scene may ask for (the window's keys are
``app.viewer.keys``, plain data too).

Reading these through ``app.spatial``, ``app.scene`` or ``app.viewer.viewer`` would import
numba and, on a cold kernel cache, compile kernels for half a minute before the help prints.
This module loads ``app/spatial/names.py`` by itself (not through ``app/spatial/__init__.py``),
reads the scene files' ``description`` with ``tomllib``; tests check that all of it matches
what the indexes and the scene loader use.
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
