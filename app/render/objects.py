"""Instanced objects: one buffer write of the visible instances and one draw call per mesh kind.

Each frame one compiled pass writes the visible instances (centre, radius, colour: the 7
floats the shader reads), grouped by mesh kind, into a persistent float32 staging array, and
exactly those bytes go to the GPU in one ``Buffer.write``; each mesh's VAO is pointed at its
slice of that buffer.
"""

from __future__ import annotations

import moderngl
import numpy as np
from numba import njit

from app.render.context import load_program
from app.render.meshes import Mesh

STRIDE = 7  # floats per instance: cx cy cz r  cr cg cb (no padding: every byte is read)


@njit(cache=True, inline="always")
def _put(staging, row, centers, looks, j) -> None:  # pragma: no cover - compiled
    """Instance row ``row`` := object ``j``: its centre (the scene's, as float32), then its
    radius and colour (float32 already)."""
    staging[row, 0] = centers[j, 0]
    staging[row, 1] = centers[j, 1]
    staging[row, 2] = centers[j, 2]
    staging[row, 3] = looks[j, 0]
    staging[row, 4] = looks[j, 1]
    staging[row, 5] = looks[j, 2]
    staging[row, 6] = looks[j, 3]


@njit(cache=True)
def _nearest_first(ids, n, centers, eye, dist):  # pragma: no cover - compiled
    """Positions of ``ids[:n]`` by distance to ``eye``, ties in the given order (a stable
    sort; the ids come in ascending order)."""
    for i in range(n):
        j = ids[i]
        dx = centers[j, 0] - eye[0]
        dy = centers[j, 1] - eye[1]
        dz = centers[j, 2] - eye[2]
        dist[i] = dx * dx + dy * dy + dz * dz
    return _stable_argsort(dist, n)


@njit(cache=True)
def _stable_argsort(keys, n):  # pragma: no cover - compiled
    """Positions of ``keys[:n]`` in ascending order, ties in index order: a bottom-up merge
    sort. Not numba's ``argsort(kind="mergesort")``: that one compiles for 1.5-3 s on the
    first start, this one in a third of a second, and runs as fast to within 20 %."""
    a = np.arange(n)
    b = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            for k in range(lo, hi):
                # The left run's element goes first unless the right one is smaller: stable.
                if j >= hi or (i < mid and keys[a[i]] <= keys[a[j]]):
                    b[k] = a[i]
                    i += 1
                else:
                    b[k] = a[j]
                    j += 1
        a, b = b, a
        width *= 2
    return a


@njit(cache=True)
def _gather_by_mesh(visible, everything, mesh_runs, objects, eye,
                    buffers) -> int:  # pragma: no cover - compiled
    """The visible objects (``everything``: all of them) into the staging rows, grouped by
    mesh kind; within a kind the large ones (``big``, when ``eye`` has 3 values) come first,
    nearest first, then the rest in ascending id order. Returns the number of rows.

    ``mesh_runs`` (runs, runs_end): each kind's runs of consecutive ids (``runs[q]`` =
    [first, end), kind k's end at ``runs_end[k]``); ``objects`` (centers, looks, big);
    ``buffers`` (mask, near, dist: scratch; staging, starts, counts: the answer). One serial
    pass over the runs, reading the arrays in order: at 100,000 objects it costs less than
    waking the OpenMP workers would. ``mask`` is left all False.
    """
    runs, runs_end = mesh_runs
    centers, looks, big = objects
    mask, near, dist, staging, starts, counts = buffers
    if not everything:
        for i in range(visible.shape[0]):
            mask[visible[i]] = True
    occluders = eye.shape[0] == 3
    row = 0
    q0 = 0
    for k in range(runs_end.shape[0]):
        starts[k] = row
        q1 = runs_end[k]
        if occluders:  # llvmpipe's early depth test then rejects what they hide
            n = np.int64(0)  # not the literal 0: one compiled _nearest_first, not two
            for q in range(q0, q1):
                for j in range(runs[q, 0], runs[q, 1]):
                    if big[j] and (everything or mask[j]):
                        near[n] = j
                        n += 1
            rank = _nearest_first(near, n, centers, eye, dist)
            for i in range(n):
                _put(staging, row, centers, looks, near[rank[i]])
                row += 1
        for q in range(q0, q1):
            for j in range(runs[q, 0], runs[q, 1]):
                if everything or mask[j]:
                    mask[j] = False
                    if not (occluders and big[j]):
                        _put(staging, row, centers, looks, j)
                        row += 1
        counts[k] = row - starts[k]
        q0 = q1
    return row


@njit(cache=True)
def _retint(looks, base, old, new, r, g, b):  # pragma: no cover - compiled
    """Rows ``old`` get their own colour back (``base``), then rows ``new`` get (r, g, b)."""
    for i in range(old.shape[0]):
        j = old[i]
        looks[j, 1] = base[j, 0]
        looks[j, 2] = base[j, 1]
        looks[j, 3] = base[j, 2]
    for i in range(new.shape[0]):
        j = new[i]
        looks[j, 1] = r
        looks[j, 2] = g
        looks[j, 3] = b


def _mesh_runs(mesh_of: np.ndarray, kinds: int) -> tuple[np.ndarray, np.ndarray]:
    """The maximal runs of consecutive ids of one mesh kind as [first, end) rows, ordered by
    kind then id, and where each kind's runs end. A scene builds each group as one run, so
    there are few, and the gather reads no id permutation (8 bytes an object, cold after
    the render)."""
    n = mesh_of.shape[0]
    if n == 0:
        return np.zeros((0, 2), np.int64), np.zeros(kinds, np.int64)
    cut = np.flatnonzero(np.diff(mesh_of)) + 1
    first = np.concatenate(([0], cut))
    end = np.concatenate((cut, [n]))
    kind = mesh_of[first].astype(np.int64)
    order = np.argsort(kind, kind="stable")
    runs = np.ascontiguousarray(np.stack([first[order], end[order]], axis=1), dtype=np.int64)
    return runs, np.cumsum(np.bincount(kind, minlength=kinds)).astype(np.int64)


class ObjectRenderer:
    def __init__(self, ctx: moderngl.Context, meshes: list[Mesh]) -> None:
        self.ctx = ctx
        self.prog = load_program(ctx, "objects")
        self.meshes = meshes
        self.capacity = 0
        nm = len(meshes)
        self.looks = np.zeros((0, 4), np.float32)  # radius, colour
        self.staging = np.zeros((0, STRIDE), np.float32)
        self.mesh_of = np.zeros(0, np.int8)
        self._runs, self._runs_end = _mesh_runs(self.mesh_of, nm)
        self._starts = np.zeros(nm, np.int64)
        self._counts = np.zeros(nm, np.int64)
        self._near = np.zeros(0, np.int64)
        self._dist = np.zeros(0, np.float64)
        self._no_eye = np.zeros(0, np.float64)
        self._no_ids = np.zeros(0, np.int64)
        # Two instance buffers, used in turn (see _write).
        self._bufs = [ctx.buffer(reserve=STRIDE * 4 * 16, dynamic=True) for _ in range(2)]
        self._turn = 0
        self.inst = self._bufs[0]
        self._mask = np.zeros(0, np.bool_)
        self._base_colors = np.zeros((0, 3), np.float32)  # the colours a tint replaces
        self._tinted = np.zeros(0, np.int64)
        self._centers: np.ndarray | None = None
        self.counts = [0] * nm
        self.starts = [0] * nm
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
                 (self.inst, "4f 3f/i", "in_sphere", "in_color")],
                index_buffer=ibo, index_element_size=4,
            )
            self.vaos.append((vao, m.indices.shape[0]))

    # ------------------------------------------------------------------ data

    def set_objects(self, centers: np.ndarray, radii: np.ndarray, colors: np.ndarray,
                    mesh: np.ndarray) -> None:
        """All objects (ids 0..N-1 index the rows). Reallocates the staging arrays."""
        n = centers.shape[0]
        self.capacity = n
        self.looks = np.zeros((n, 4), np.float32)
        self.looks[:, 0] = radii
        self.looks[:, 1:4] = colors
        self._base_colors = np.ascontiguousarray(colors, np.float32).reshape(n, 3).copy()
        self._tinted = np.zeros(0, np.int64)
        self.mesh_of = np.asarray(mesh, np.int8).copy()
        self._centers = np.ascontiguousarray(centers, dtype=np.float64)
        bad = (self.mesh_of < 0) | (self.mesh_of >= len(self.meshes))
        if bad.any():
            raise ValueError(f"mesh index out of range for objects {np.flatnonzero(bad)[:8]}")
        self._runs, self._runs_end = _mesh_runs(self.mesh_of, len(self.meshes))
        self.staging = np.zeros((n, STRIDE), np.float32)
        self._mask = np.zeros(n, np.bool_)
        # Occluders: objects much larger than the typical one are drawn first, front to back,
        # so that llvmpipe's early depth test rejects what they hide.
        r = np.asarray(radii, np.float64)
        self.big = r >= 4.0 * float(np.median(r)) if n else np.zeros(0, np.bool_)
        self.has_big = bool(self.big.any()) and int(self.big.sum()) <= max(4096, n // 8)
        nbig = int(self.big.sum()) if self.has_big else 0
        self._near = np.zeros(nbig, np.int64)
        self._dist = np.zeros(nbig, np.float64)
        need = max(n, 16) * STRIDE * 4
        for buf in self._bufs:
            if buf.size < need:
                buf.orphan(need)

    def set_tint(self, rows: np.ndarray, color: tuple[float, float, float]) -> None:
        """Draw ``rows`` in ``color`` from the next upload on (the collision view's balls in
        contact); the rows of the previous call get their own colour back. One compiled
        pass over both sets of rows; an empty ``rows`` clears the tint."""
        new = np.array(np.asarray(rows, np.int64), copy=True)
        if new.shape[0] and (new.min() < 0 or new.max() >= self.capacity):
            raise ValueError(f"set_tint: rows outside 0..{self.capacity - 1}")
        _retint(self.looks, self._base_colors, self._tinted, new, float(color[0]),
                float(color[1]), float(color[2]))
        self._tinted = new

    def use_centers(self, centers: np.ndarray) -> None:
        """Read centres from ``centers``, the full array the scene moves in place (float64,
        C-contiguous): the gather converts them, so moved objects need no refresh pass."""
        self._centers = centers

    def upload(self, visible: np.ndarray | None, eye: np.ndarray | None = None) -> int:
        """Gather the visible instances (None: all), grouped by mesh, in one buffer write.

        Within each mesh kind the large objects (occluders) come first, nearest to ``eye``
        first, then the rest in ascending id order; the order depends only on the visible set,
        never on the index, so culling does not change the image.
        """
        everything = visible is None
        ids = self._no_ids if everything else np.ascontiguousarray(visible, dtype=np.int64)
        eye3 = (np.asarray(eye, np.float64) if self.has_big and eye is not None
                else self._no_eye)
        total = _gather_by_mesh(ids, everything, (self._runs, self._runs_end),
                                (self._centers, self.looks, self.big), eye3,
                                (self._mask, self._near, self._dist, self.staging,
                                 self._starts, self._counts))
        self.starts = self._starts.tolist()
        self.counts = self._counts.tolist()
        self._write(total)
        return total

    def _write(self, total: int) -> None:
        """Exactly the rows used, into the buffer the previous upload did not write: a draw
        still queued (two-pass's early draw when its late upload comes) reads the other one,
        and writing storage a queued draw reads would make the driver wait. Two persistent
        buffers used in turn need no orphaning (a fresh allocation, faulted in page by page,
        every frame)."""
        if total:
            self._turn ^= 1
            self.inst = self._bufs[self._turn]
            self.inst.write(memoryview(self.staging[:total]).cast("B"))

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
