"""GPU Z-pyramid: max-depth reduction of a depth texture, read back without stalling.

Each level is an R32F texture written by one full-screen pass of ``shaders/depthreduce.*``
over the level below (level 0 is the depth texture itself). The reduction rule (next size
``max(1, w // 2)``, the last texel of a row or column also covers an odd leftover) is the one
``app/geom/zpyramid.py`` documents and tests against numpy.

Only the coarse levels the CPU test needs are read back: from ``first_level`` up (by default
the finest level of at most ``cpu_texels`` texels, e.g. 160x90 for a 1280x720 frame), which
is exact because :class:`~app.geom.zpyramid.ZPyramid` keeps every level's size. The first
pass reads every depth pixel whichever level it writes, but a coarser level has fewer fragments
(each gathering more): at 1280x720 on llvmpipe 160x90 costs 0.6 ms and 320x180 0.9 ms, for 1-5 %
more objects drawn (fig26 88.8 vs 87.9 a frame, city 870 vs 833), hence 16,384 texels.

By default (``cpu_top=True``) the GPU makes only ``first_level`` (one pass over the whole depth
buffer: all the bandwidth) and the CPU finishes the small top of the chain from the read-back
level with :func:`~app.geom.zpyramid.reduce_stored_levels` (~10 us). On llvmpipe every
extra pass costs ~80 us of fixed overhead whatever its size, so eight GPU passes for levels
of 160x90 texels and less cost ~0.8 ms a frame. ``cpu_top=False`` reduces every level on the
GPU and reads them all back (a GPU with cheap passes would choose that).

Read-back goes through a ring of pixel-pack buffers: :meth:`DepthPyramid.build` reduces and
*starts* the copy of frame N's levels into ring slot N; :meth:`DepthPyramid.previous` maps
the slot of the frame before, whose copy finished long ago, so the frame never waits for the
reduction it just queued. :meth:`DepthPyramid.build_now` is the stalling variant the two-pass
mode needs (it tests this frame's depth within the frame).
"""

from __future__ import annotations

import time

import moderngl
import numpy as np

from app.geom.zpyramid import ZPyramid, level_sizes, reduce_stored_levels
from app.render.context import load_program


def default_first_level(sizes: list[tuple[int, int]], cpu_texels: int) -> int:
    """The finest level with at most ``cpu_texels`` texels."""
    for i, (w, h) in enumerate(sizes):
        if w * h <= cpu_texels:
            return i
    return len(sizes) - 1


class DepthPyramid:
    """Max-depth mip chain of a ``size`` depth texture, with a ring of read-back buffers."""

    def __init__(self, ctx: moderngl.Context, size: tuple[int, int], *,
                 first_level: int | None = None, cpu_texels: int = 16384,
                 ring: int = 2, cpu_top: bool = True) -> None:
        self.ctx = ctx
        self.size = (int(size[0]), int(size[1]))
        self.sizes = level_sizes(*self.size)
        n = len(self.sizes)
        if first_level is None:
            first_level = default_first_level(self.sizes, cpu_texels)
        self.first_level = min(max(int(first_level), 0), n - 1)
        self.cpu_top = bool(cpu_top)
        # The coarsest level the GPU makes, and the levels read back into the ring.
        self.gpu_top = self.first_level if self.cpu_top else n - 1
        self.read_levels = [self.first_level] if self.cpu_top else list(range(self.first_level, n))
        self.prog = load_program(ctx, "depthreduce")
        self.vao = ctx.vertex_array(self.prog, [])
        # Level textures 1..gpu_top (level 0 is the caller's depth texture); the levels the
        # GPU never makes get no texture.
        self.levels: list[moderngl.Texture | None] = [None]
        self.fbos: list[moderngl.Framebuffer | None] = [None]
        for i, (w, h) in enumerate(self.sizes[1:], start=1):
            if not max(1, self.first_level) <= i <= self.gpu_top:
                self.levels.append(None)
                self.fbos.append(None)
                continue
            tex = ctx.texture((w, h), 1, dtype="f4")
            tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
            tex.repeat_x = tex.repeat_y = False
            self.levels.append(tex)
            self.fbos.append(ctx.framebuffer(color_attachments=[tex]))
        # Byte layout of the stored levels inside one read-back buffer.
        self.offsets = np.full(n, -1, dtype=np.int64)
        total = 0
        for i in range(self.first_level, n):
            self.offsets[i] = total
            total += self.sizes[i][0] * self.sizes[i][1]
        self.total = total
        self.read_texels = sum(self.sizes[i][0] * self.sizes[i][1] for i in self.read_levels)
        self.ring = [ctx.buffer(reserve=self.read_texels * 4) for _ in range(max(1, int(ring)))]
        self.ring_vp: list[np.ndarray | None] = [None] * len(self.ring)
        self.ring_frame = [-1] * len(self.ring)
        self.frame = 0  # frames built so far
        self.last_build_ms = 0.0
        self.last_read_ms = 0.0
        self._widths = np.array([s[0] for s in self.sizes], dtype=np.int64)
        self._heights = np.array([s[1] for s in self.sizes], dtype=np.int64)

    # ------------------------------------------------------------------ GPU passes

    def reduce(self, depth: moderngl.Texture) -> None:
        """Run the reduction passes from ``depth`` (a depth texture of ``size``).

        The first pass jumps straight to the first level read back (or level 1), the rest
        halve up to ``gpu_top``; levels between 0 and ``first_level`` are not computed, the CPU
        never sees them.
        """
        if tuple(depth.size) != self.size:
            raise ValueError(f"depth texture is {depth.size}, pyramid was made for {self.size}")
        ctx = self.ctx
        depth.compare_func = ""  # sample raw depth values with a plain sampler2D
        prev_viewport = ctx.viewport
        ctx.disable(moderngl.DEPTH_TEST | moderngl.BLEND | moderngl.CULL_FACE)
        self.prog["u_src"].value = 0
        src: moderngl.Texture = depth
        src_level = 0
        for i in range(max(1, self.first_level), self.gpu_top + 1):
            self.fbos[i].use()
            ctx.viewport = (0, 0, *self.sizes[i])
            src.use(location=0)
            self.prog["u_src_size"].value = self.sizes[src_level]
            self.prog["u_dst_size"].value = self.sizes[i]
            self.prog["u_factor"].value = 2 ** (i - src_level)
            self.vao.render(moderngl.TRIANGLES, vertices=3)
            src = self.levels[i]
            src_level = i
        ctx.viewport = prev_viewport

    def _start_readback(self, depth: moderngl.Texture, slot: int) -> None:
        buf = self.ring[slot]
        for i in self.read_levels:  # stored back to back from offset 0, like ``offsets``
            tex = depth if i == 0 else self.levels[i]
            tex.read_into(buf, alignment=1, write_offset=int(self.offsets[i]) * 4)

    def _pyramid_from(self, slot: int) -> ZPyramid:
        t0 = time.perf_counter()
        data = np.empty(self.total, dtype=np.float32)
        self.ring[slot].read_into(data, size=self.read_texels * 4)
        if self.cpu_top:
            reduce_stored_levels(data, self.offsets, self._widths, self._heights,
                                 self.first_level)
        self.last_read_ms = (time.perf_counter() - t0) * 1e3
        return ZPyramid(viewproj=self.ring_vp[slot], data=data, offsets=self.offsets.copy(),
                        widths=self._widths, heights=self._heights)

    # ------------------------------------------------------------------ API

    def build(self, depth: moderngl.Texture, viewproj: np.ndarray) -> None:
        """Reduce this frame's depth and start its read-back (does not wait for it)."""
        t0 = time.perf_counter()
        self.reduce(depth)
        slot = self.frame % len(self.ring)
        self._start_readback(depth, slot)
        self.ring_vp[slot] = np.ascontiguousarray(viewproj, dtype=np.float64).copy()
        self.ring_frame[slot] = self.frame
        self.frame += 1
        self.last_build_ms = (time.perf_counter() - t0) * 1e3

    def previous(self, age: int = 1) -> ZPyramid | None:
        """The pyramid built ``age`` builds ago (1: the last one), or None if there is none."""
        age = int(age)
        if age < 1 or age > len(self.ring) or self.frame - age < 0:
            return None
        slot = (self.frame - age) % len(self.ring)
        if self.ring_frame[slot] != self.frame - age:
            return None
        return self._pyramid_from(slot)

    def build_now(self, depth: moderngl.Texture, viewproj: np.ndarray) -> ZPyramid:
        """Reduce and read back at once (waits for the GPU): the two-pass mode's pyramid."""
        self.build(depth, viewproj)
        return self.previous(1)

    def read_all_levels(self, depth: moderngl.Texture) -> list[np.ndarray]:
        """Every level the GPU computed as (h, w) float32 arrays, level 0 first (for tests;
        stalls). Levels it does not compute come back as None.
        """
        out: list[np.ndarray | None] = []
        for i, (w, h) in enumerate(self.sizes):
            if i > 0 and self.levels[i] is None:
                out.append(None)
                continue
            tex = depth if i == 0 else self.levels[i]
            raw = tex.read(alignment=1)
            out.append(np.frombuffer(raw, dtype=np.float32).reshape(h, w).copy())
        return out

    def release(self) -> None:
        for obj in [*self.fbos[1:], *self.levels[1:], *self.ring, self.vao]:
            if obj is not None:
                obj.release()
        self.fbos, self.levels, self.ring = [None], [None], []
