"""Ground truth for occlusion culling: an id buffer of every object in the frustum.

Every object given (the caller passes the frustum's objects) is drawn with the same instanced
geometry as ``shaders/objects.vert`` into an R32I texture (cleared to -1) with a depth test,
at the same size and with the same view-projection as the frame. The ids with at least one
pixel are the truly visible objects; a visible-set cull that misses one of them is a false
negative (it would pop).
"""

from __future__ import annotations

import time

import moderngl
import numpy as np

from app.render.context import load_program
from app.render.meshes import Mesh

_STRIDE = 5 * 4  # bytes per instance: centre xyz, radius (f4), id (i4)


class IdBuffer:
    """Renders objects' ids and returns the set of ids that own at least one pixel."""

    def __init__(self, ctx: moderngl.Context, size: tuple[int, int], meshes: list[Mesh]) -> None:
        self.ctx = ctx
        self.size = (int(size[0]), int(size[1]))
        self.prog = load_program(ctx, "idbuffer")
        self.tex = ctx.texture(self.size, 1, dtype="i4")
        self.depth = ctx.depth_renderbuffer(self.size)
        self.fbo = ctx.framebuffer(color_attachments=[self.tex], depth_attachment=self.depth)
        self.inst = ctx.buffer(reserve=_STRIDE * 64, dynamic=True)
        self.meshes = meshes
        self._vbos = []
        self.vaos = []
        for m in meshes:
            vbo = ctx.buffer(np.ascontiguousarray(m.positions, np.float32).tobytes())
            self._vbos.append(vbo)
            self.vaos.append((vbo, m.positions.shape[0]))
        self._vao_cache: dict[int, moderngl.VertexArray] = {}
        self.last_ms = 0.0

    def _vao(self, k: int) -> moderngl.VertexArray:
        vao = self._vao_cache.get(k)
        if vao is None:
            vbo, _ = self.vaos[k]
            vao = self.ctx.vertex_array(
                self.prog, [(vbo, "3f", "in_position"),
                            (self.inst, "4f 1i/i", "in_sphere", "in_id")])
            self._vao_cache[k] = vao
        return vao

    def render(self, viewproj: np.ndarray, ids: np.ndarray, centers: np.ndarray,
               radii: np.ndarray, mesh_of: np.ndarray | None = None) -> np.ndarray:
        """Draw objects ``ids`` (rows of ``centers``/``radii``/``mesh_of`` are per id given) and
        return the sorted unique ids that own at least one pixel."""
        t0 = time.perf_counter()
        ids = np.asarray(ids, np.int64)
        n = ids.shape[0]
        ctx = self.ctx
        prev_viewport = ctx.viewport
        self.fbo.use()
        ctx.viewport = (0, 0, *self.size)
        self.fbo.clear(-1.0, -1.0, -1.0, -1.0, depth=1.0)
        if n:
            if ids.max() >= 2 ** 31 - 1:
                raise ValueError("id buffer: ids must fit in int32")
            ctx.enable(moderngl.DEPTH_TEST)
            ctx.disable(moderngl.BLEND | moderngl.CULL_FACE)
            ctx.depth_func = "<"
            self.prog["u_viewproj"].write(
                np.ascontiguousarray(np.asarray(viewproj).T, dtype=np.float32).tobytes())
            mesh_of = (np.zeros(n, np.int64) if mesh_of is None
                       else np.asarray(mesh_of, np.int64))
            for k in range(len(self.meshes)):
                sel = np.flatnonzero(mesh_of == k) if len(self.meshes) > 1 else slice(None)
                rows = np.empty(ids[sel].shape[0],
                                dtype=[("s", np.float32, 4), ("id", np.int32)])
                if rows.shape[0] == 0:
                    continue
                rows["s"][:, :3] = centers[sel]
                rows["s"][:, 3] = radii[sel]
                rows["id"] = ids[sel]
                data = rows.tobytes()
                if self.inst.size < len(data):
                    self.inst.orphan(len(data))
                self.inst.write(data)
                self._vao(k).render(moderngl.TRIANGLES, vertices=self.vaos[k][1],
                                    instances=rows.shape[0])
        raw = self.tex.read(alignment=1)
        ctx.viewport = prev_viewport
        img = np.frombuffer(raw, dtype=np.int32)
        out = np.unique(img)
        out = out[out >= 0].astype(np.int64)
        self.last_image = img.reshape(self.size[1], self.size[0])
        self.last_ms = (time.perf_counter() - t0) * 1e3
        return out

    def release(self) -> None:
        for obj in [*self._vao_cache.values(), *self._vbos, self.inst, self.fbo, self.tex,
                    self.depth]:
            obj.release()
        self._vao_cache = {}
