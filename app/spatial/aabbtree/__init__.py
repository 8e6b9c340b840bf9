"""Shagam's dynamic AABB tree with the K-D, ternary, octree and icoseptree nesting heuristics."""

from app.spatial.aabbtree.heuristics import (
    CHILDREN,
    DEFAULT_THRESHOLDS,
    STORAGE_THRESHOLD,
    named_threshold,
)
from app.spatial.aabbtree.tree import AABBTree

__all__ = ["AABBTree", "CHILDREN", "DEFAULT_THRESHOLDS", "STORAGE_THRESHOLD", "named_threshold"]
