"""Hierarchical scenes (Shagam 2.2.2, figure 2.5): a tree of groups with rigid transforms,
each group an index of any ``INDEX_NAMES`` kind over its objects in local coordinates;
queries carry the view volume into each group's frame (design.md, "Hierarchical scenes")."""

from app.spatial.nested.index import NestedIndex

__all__ = ["NestedIndex"]
