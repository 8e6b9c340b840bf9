"""B's own occlusion mode in an A/B run (``--compare occlusion=MODE``, F3).

When B culls with an occlusion mode of its own, its pyramids must be of what *B* draws, not of
the frame the viewer draws (A's objects): a previous-frame pyramid of B's last answer, a
two-pass pyramid of B's early set. :class:`OwnOcclusion` keeps an occlusion provider of that
mode (:class:`app.render.occlusion.OcclusionPyramids`: the same reduction and read-back as
A's) and draws B's ids depth only from the culling camera into the provider's depth target,
through the frame's object renderer, once A's passes are done with it (its instance buffer
then holds B's ids until the next frame's upload). The depth draw and the pyramid are B's
cost: they run inside the frame's ``compare_ms``; the pyramid's own time is B's ``pyramid``.

With the same index and mode as A, B's pyramids equal A's (the same ids drawn with the same
matrices), so B's answers equal A's: the tests hold the machinery to that.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.geom.zpyramid import ZPyramid


class OwnOcclusion:
    """B's occlusion provider in ``mode`` and the draws of B's ids that feed it."""

    def __init__(self, provider, objects, size: Callable[[], tuple[int, int]]) -> None:
        self.provider = provider  # an OcclusionPyramids of B's mode
        self.objects = objects  # the frame's ObjectRenderer
        self._size = size  # the render target's size, read when B draws
        self.pyramid_ms = 0.0  # the last pyramid's reduction and read-back (B's "pyramid")

    @property
    def mode(self) -> str:
        return self.provider.mode

    def first_pyramid(self) -> ZPyramid | None:
        """``previous``: the pyramid of B's answer last frame, for B's cull now (None on B's
        first frame and in the other modes)."""
        return self.provider.last_frame_pyramid()

    def pyramid_of(self, ids: np.ndarray | None, cull_view) -> ZPyramid | None:
        """Draw ``ids`` (None: every object) depth only from ``cull_view`` and reduce the
        depth: two-pass gets the pyramid now, previous starts the read-back the next frame
        maps (None)."""
        size = self._size()
        self.objects.upload(ids, cull_view.eye)
        depth = self.provider.depth_seen_by(cull_view, self.objects, size)
        pyramid = self.provider.build_pyramid(depth, size, cull_view.viewproj)
        self.pyramid_ms = float(self.provider.log_values().get("occlusion_ms", 0.0))
        return pyramid

    def release(self) -> None:
        self.provider.release()
