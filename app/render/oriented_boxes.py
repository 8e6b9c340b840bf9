"""Oriented node boxes: boxes given by their 8 world corners (a nested index's boxes turn with
their group), drawn as lines in one instanced draw, each in its own colour.

A box turned by a rigid transform is a parallelepiped: corner 0 and the three edge vectors
to corners 1, 2 and 4 (corner k takes the high side on axis a when bit a of k is set, the
``NestedIndex.node_boxes`` layout) place the unit cube's 12 edges exactly.
"""

from __future__ import annotations

import moderngl
import numpy as np

from app.render.boxes import MAX_BOXES, InstancedBoxLines

FLOATS = 16  # origin, three edges, RGBA


def box_frames(corners: np.ndarray) -> np.ndarray:
    """(K, 12) float32: corner 0 and the edge vectors to corners 1, 2 and 4 of each box."""
    c = np.asarray(corners, np.float64)
    if c.ndim != 3 or c.shape[1:] != (8, 3):
        raise ValueError(f"corners must be a (K, 8, 3) array, got {c.shape}")
    out = np.empty((c.shape[0], 12), np.float32)
    out[:, 0:3] = c[:, 0]
    out[:, 3:6] = c[:, 1] - c[:, 0]
    out[:, 6:9] = c[:, 2] - c[:, 0]
    out[:, 9:12] = c[:, 4] - c[:, 0]
    return out


class OrientedBoxes(InstancedBoxLines):
    """Line boxes from world corners, one instanced draw."""

    def __init__(self, ctx: moderngl.Context) -> None:
        super().__init__(ctx, "oriented_boxes", "3f 3f 3f 3f 4f/i",
                         ("in_origin", "in_ex", "in_ey", "in_ez", "in_color"), FLOATS, 256)

    def set_boxes(self, corners: np.ndarray, colors: np.ndarray) -> int:
        """The boxes to draw (corners (K, 8, 3), RGBA (K, 4)); returns how many are kept."""
        n = min(int(np.asarray(corners).shape[0]), MAX_BOXES)
        data = np.empty((n, FLOATS), np.float32)
        if n:
            data[:, :12] = box_frames(corners[:n])
            data[:, 12:] = colors[:n]
        return self._upload(data)
