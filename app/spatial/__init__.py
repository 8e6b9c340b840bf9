"""Spatial indexes behind one contract (design.md): ``create_index(name, ...)``.

No OpenGL here: every index is testable and benchmarkable alone.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from app.spatial.base import QueryResult, SpatialIndex

# name -> (module, class, fixed keyword arguments). Modules load lazily so that importing
# app.spatial does not compile every index's kernels.
_REGISTRY: dict[str, tuple[str, str, dict[str, Any]]] = {
    "brute": ("app.spatial.brute", "BruteIndex", {}),
}


def register(name: str, module: str, cls: str, **fixed: Any) -> None:
    """Make an index selectable by name (indexes register themselves in this file)."""
    _REGISTRY[name] = (module, cls, fixed)


def _available() -> list[str]:
    names = []
    for name, (module, _cls, _fixed) in _REGISTRY.items():
        if importlib.util.find_spec(module) is not None:
            names.append(name)
    return names


# Indexes added by their own modules; each line is a selectable name.
register("kd", "app.spatial.aabbtree", "AABBTree", heuristic="kd")
register("ternary", "app.spatial.aabbtree", "AABBTree", heuristic="ternary")
register("octree", "app.spatial.aabbtree", "AABBTree", heuristic="octree")
register("icoseptree", "app.spatial.aabbtree", "AABBTree", heuristic="icoseptree")
register("fixed-octree", "app.spatial.fixed_octree", "FixedOctree")
register("grid", "app.spatial.hashgrid", "HashedGrid")
register("viewdist", "app.spatial.viewdist_tree", "ViewDistanceTree")
register("chunks", "app.spatial.chunks", "ChunkedIndex")

from app.spatial.names import INDEX_NAMES  # noqa: E402 - plain data (help reads it alone)


def create_index(name: str, **kwargs: Any) -> SpatialIndex:
    """Build an empty index by name; keyword arguments (leafy, split_threshold...) go to it.

    ``mode`` ("ours", default, or "paper": appendix A's choices, see AABBTree) exists for the
    four dynamic trees; the other indexes accept only ``mode="ours"``.
    """
    if name not in INDEX_NAMES:
        raise ValueError(f"unknown index {name!r}; choose one of {', '.join(INDEX_NAMES)}")
    if "mode" in kwargs and name not in TREE_HEURISTICS:
        mode = kwargs.pop("mode")
        if mode != "ours":
            raise ValueError(f"mode {mode!r} exists only for the dynamic trees "
                             f"({', '.join(TREE_HEURISTICS)}); {name} has mode 'ours' only")
    module, cls, fixed = _REGISTRY[name]
    klass = getattr(importlib.import_module(module), cls)
    return klass(**fixed, **kwargs)


__all__ = ["INDEX_NAMES", "QueryResult", "SpatialIndex", "create_index", "register"]


TREE_HEURISTICS: tuple[str, ...] = ("kd", "ternary", "octree", "icoseptree")


def index_variants(modes: tuple[str, ...] = ("ours",)) -> list[tuple[str, str, dict[str, Any]]]:
    """Every selectable (label, name, kwargs): the trees once leafy and once non-leafy.

    Each mode other than "ours" (e.g. "paper") adds the trees again, labelled
    ``octree/paper/leafy`` and with ``mode`` in their kwargs.
    """
    out: list[tuple[str, str, dict[str, Any]]] = []
    for name in INDEX_NAMES:
        if name in TREE_HEURISTICS:
            for mode in modes:
                tag = "" if mode == "ours" else f"/{mode}"
                extra = {} if mode == "ours" else {"mode": mode}
                out.append((f"{name}{tag}/leafy", name, {"leafy": True, **extra}))
                out.append((f"{name}{tag}/non-leafy", name, {"leafy": False, **extra}))
        elif "ours" in modes:
            out.append((name, name, {}))
    return out


__all__ += ["TREE_HEURISTICS", "index_variants"]
