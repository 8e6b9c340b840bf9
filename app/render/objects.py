"""Instanced objects: one buffer write of the visible instances and one draw call per mesh kind.

A packed float32 copy of every object's instance data (centre, radius, colour, pad: 8 floats)
is kept up to date for the objects that moved; each frame the visible ids are gathered, grouped
by mesh kind, into a preallocated staging array with numpy fancy indexing, written to the GPU
in one ``Buffer.write``, and each mesh's VAO is pointed at its slice of that buffer.
"""

from __future__ import annotations

import moderngl
import numpy as np
from numba import njit, prange

from app.parallelism import threads_for
from app.render.context import load_program
from app.render.meshes import Mesh

STRIDE = 8  # floats per instance: cx cy cz r  cr cg cb pad


_CHUNKS = 16  # id ranges gathered in parallel; each knows where its rows go from a prefix sum


@njit(cache=True, parallel=True)
def _gather_by_mesh(visible, mask, mesh_of, centers, packed, staging, counts) -> int:
    """Visible rows, grouped by mesh kind and in ascending id order, into ``staging``.

    Centres come straight from the scene's float64 array (so moved objects need no separate
    refresh pass), the rest of the row from the packed copy. The id range is cut into chunks:
    each chunk counts its rows per mesh, a prefix sum gives every chunk its first row per
    mesh, then the chunks copy in parallel. The order is the same as a serial pass.
    """
    for i in range(visible.shape[0]):
        mask[visible[i]] = True
    n = mask.shape[0]
    nm = counts.shape[0]
    step = (n + _CHUNKS - 1) // _CHUNKS
    per = np.zeros((_CHUNKS, nm), dtype=np.int64)
    for ch in prange(_CHUNKS):
        for j in range(ch * step, min(n, (ch + 1) * step)):
            if mask[j]:
                per[ch, mesh_of[j]] += 1
    first = np.zeros((_CHUNKS, nm), dtype=np.int64)
    row = 0
    for k in range(nm):
        counts[k] = 0
        for ch in range(_CHUNKS):
            first[ch, k] = row
            row += per[ch, k]
            counts[k] += per[ch, k]
    for ch in prange(_CHUNKS):
        nxt = first[ch].copy()
        for j in range(ch * step, min(n, (ch + 1) * step)):
            if mask[j]:
                mask[j] = False
                r = nxt[mesh_of[j]]
                nxt[mesh_of[j]] = r + 1
                staging[r, 0] = centers[j, 0]
                staging[r, 1] = centers[j, 1]
                staging[r, 2] = centers[j, 2]
                for c in range(3, packed.shape[1]):
                    staging[r, c] = packed[j, c]
    return row


class ObjectRenderer:
    def __init__(self, ctx: moderngl.Context, meshes: list[Mesh]) -> None:
        self.ctx = ctx
        self.prog = load_program(ctx, "objects")
        self.meshes = meshes
        self.capacity = 0
        self.packed = np.zeros((0, STRIDE), np.float32)
        self.staging = np.zeros((0, STRIDE), np.float32)
        self.mesh_of = np.zeros(0, np.int8)
        self.inst = ctx.buffer(reserve=STRIDE * 4 * 16, dynamic=True)
        self._mask = np.zeros(0, np.bool_)
        self._centers: np.ndarray | None = None
        self.counts = [0] * len(meshes)
        self.starts = [0] * len(meshes)
        self.vaos = []
        self._loc_sphere = self.prog["in_sphere"].location
        self._loc_color = self.prog["in_color"].location
        self._vbos = []
        for m in meshes:
            vbo = ctx.buffer(m.interleaved().tobytes())
            ibo = ctx.buffer(m.indices.astype(np.uint32).tobytes())
            self._vbos += [vbo, ibo]
            vao = ctx.vertex_array(
                self.prog,
                [(vbo, "3f 3f", "in_position", "in_normal"),
                 (self.inst, "4f 3f 4x/i", "in_sphere", "in_color")],
                index_buffer=ibo, index_element_size=4,
            )
            self.vaos.append((vao, m.indices.shape[0]))

    # ------------------------------------------------------------------ data

    def set_objects(self, centers: np.ndarray, radii: np.ndarray, colors: np.ndarray,
                    mesh: np.ndarray) -> None:
        """All objects (ids 0..N-1 index the rows). Reallocates the staging arrays."""
        n = centers.shape[0]
        self.capacity = n
        self.packed = np.zeros((n, STRIDE), np.float32)
        self.packed[:, 0:3] = centers
        self.packed[:, 3] = radii
        self.packed[:, 4:7] = colors
        self.mesh_of = np.asarray(mesh, np.int8).copy()
        self._centers = np.ascontiguousarray(centers, dtype=np.float64)
        bad = (self.mesh_of < 0) | (self.mesh_of >= len(self.meshes))
        if bad.any():
            raise ValueError(f"mesh index out of range for objects {np.flatnonzero(bad)[:8]}")
        self.staging = np.zeros((n, STRIDE), np.float32)
        self._mask = np.zeros(n, np.bool_)
        # Occluders: objects much larger than the typical one are drawn first, front to back,
        # so that llvmpipe's early depth test rejects what they hide.
        r = np.asarray(radii, np.float64)
        self.big = r >= 4.0 * float(np.median(r)) if n else np.zeros(0, np.bool_)
        self.has_big = bool(self.big.any()) and int(self.big.sum()) <= max(4096, n // 8)
        need = max(n, 16) * STRIDE * 4
        if self.inst.size < need:
            self.inst.orphan(need)

    def use_centers(self, centers: np.ndarray) -> None:
        """Read centres from ``centers``, the full array the scene moves in place.

        Both gathers read centres from it directly, so moved objects need no refresh of the
        packed copy (whose centres only seed it).
        """
        self._centers = centers

    def upload(self, visible: np.ndarray | None, eye: np.ndarray | None = None) -> int:
        """Gather the visible instances (None: all), grouped by mesh, in one buffer write.

        Within each mesh kind the large objects (occluders) come first, nearest to ``eye``
        first, then the rest in ascending id order; the order depends only on the visible set,
        never on the index, so culling does not change the image.
        """
        n_all = self.capacity
        if (visible is not None and self._centers is not None
                and not (self.has_big and eye is not None)):
            counts = np.zeros(len(self.meshes), dtype=np.int64)
            with threads_for(self.capacity):  # the gather scans every object's mark
                total = _gather_by_mesh(np.ascontiguousarray(visible, dtype=np.int64),
                                        self._mask, self.mesh_of, self._centers, self.packed,
                                        self.staging, counts)
            start = 0
            for k in range(len(self.meshes)):
                self.starts[k] = start
                self.counts[k] = int(counts[k])
                start += int(counts[k])
            self._write(total)
            return total
        if visible is None:
            order = None
            mesh_vis = self.mesh_of
        else:
            mask = self._mask
            mask[:] = False
            mask[visible] = True
            order = np.flatnonzero(mask)
            mesh_vis = self.mesh_of[order]
        total = 0
        nm = len(self.meshes)
        for k in range(nm):
            if nm == 1:
                sel = order
                cnt = n_all if order is None else order.shape[0]
            else:
                hit = mesh_vis == k
                sel = np.flatnonzero(hit) if order is None else order[hit]
                cnt = sel.shape[0]
            if self.has_big and eye is not None and cnt:
                sel = self._occluders_first(sel if sel is not None else np.arange(n_all), eye)
            self.starts[k] = total
            self.counts[k] = cnt
            if cnt:
                dst = self.staging[total: total + cnt]
                if sel is None:
                    dst[:] = self.packed
                    dst[:, 0:3] = self._centers
                else:
                    np.take(self.packed, sel, axis=0, out=dst)
                    dst[:, 0:3] = self._centers[sel]
            total += cnt
        self._write(total)
        return total

    def _write(self, total: int) -> None:
        """Orphan, then write: the previous frame's draw may still read the old storage, and
        writing into it would make the driver wait for that draw to finish."""
        if total:
            self.inst.orphan(self.inst.size)
            self.inst.write(memoryview(self.staging[:total]).cast("B"))

    def _occluders_first(self, sel: np.ndarray, eye: np.ndarray) -> np.ndarray:
        big = self.big[sel]
        if not big.any():
            return sel
        b = sel[big]
        d = ((self._centers[b] - np.asarray(eye, np.float64)) ** 2).sum(axis=1)
        return np.concatenate([b[np.argsort(d, kind="stable")], sel[~big]])

    # ------------------------------------------------------------------ draw

    def draw(self, viewproj: np.ndarray, light_dir: np.ndarray) -> None:
        self.prog["u_viewproj"].write(np.ascontiguousarray(viewproj.T, dtype=np.float32).tobytes())
        ld = np.asarray(light_dir, np.float64)
        self.prog["u_light_dir"].value = tuple(float(x) for x in ld / np.linalg.norm(ld))
        for k, (vao, nidx) in enumerate(self.vaos):
            cnt = self.counts[k]
            if not cnt:
                continue
            off = self.starts[k] * STRIDE * 4
            vao.bind(self._loc_sphere, "f", self.inst, "4f", offset=off, stride=STRIDE * 4,
                     divisor=1)
            vao.bind(self._loc_color, "f", self.inst, "3f", offset=off + 16, stride=STRIDE * 4,
                     divisor=1)
            vao.render(moderngl.TRIANGLES, vertices=nidx, instances=cnt)
