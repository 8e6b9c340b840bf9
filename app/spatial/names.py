"""The selectable spatial indexes as plain data: their names, the tree heuristics, one line of
help each.

This file imports nothing: ``app.viewer.catalog`` loads it on its own, without
``app/spatial/__init__.py`` (which imports numba), so that ``--help``, the argument checks and
the command line's choices cost nothing even on a cold kernel cache. ``app.spatial`` takes its
``INDEX_NAMES`` from here and registers the classes behind them.
"""

from __future__ import annotations

#: Every selectable index, in the order the window's I key cycles through them.
INDEX_NAMES: tuple[str, ...] = (
    "brute", "kd", "ternary", "octree", "icoseptree", "fixed-octree", "grid", "viewdist",
    "chunks",
)

#: The dynamic AABB trees (leafy / non-leafy variants, a split threshold).
TREE_HEURISTICS: tuple[str, ...] = ("kd", "ternary", "octree", "icoseptree")

#: One line per index for ``demo --help``.
INDEX_HELP: dict[str, str] = {
    "brute": "no structure: one branch-free scan of every sphere",
    "kd": "dynamic AABB tree, 2 children a node (Shagam)",
    "ternary": "dynamic AABB tree, 3 children a node (Shagam)",
    "octree": "dynamic AABB tree, 8 children a node (Shagam)",
    "icoseptree": "dynamic AABB tree, 27 children a node (Shagam)",
    "fixed-octree": "octree over a power-of-two cube (Nevala)",
    "grid": "hierarchical hashed grid (Bitsquid)",
    "viewdist": "view-distance sphere tree (Matthews); for scenes with view distances",
    "chunks": "64-sphere chunks on a Hilbert curve under a 16-ary box tree (engines today)",
}
