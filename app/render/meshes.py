"""Meshes for instanced drawing: loaded from ``assets/<name>.obj``.

Every mesh is scaled so that it fits in the unit sphere: an object of radius ``r`` is drawn
as the mesh scaled by ``r``, so its pixels never leave its bounding sphere and frustum culling
by sphere can never change the image.

``python -m app.render.meshes`` regenerates the OBJ files in ``assets/`` (they are committed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

ASSETS_DIR = Path(__file__).resolve().parents[2] / "assets"


@dataclass
class Mesh:
    """Flat-shaded triangle mesh: per-vertex positions and normals, uint32 indices."""

    name: str
    positions: np.ndarray  # (V, 3) float32
    normals: np.ndarray  # (V, 3) float32
    indices: np.ndarray  # (T*3,) uint32

    def interleaved(self) -> np.ndarray:
        """(V, 6) float32: position then normal."""
        return np.ascontiguousarray(np.hstack([self.positions, self.normals]), dtype=np.float32)


class MeshError(ValueError):
    """A mesh file is missing or malformed."""


def load_mesh(name: str, assets_dir: Path | None = None) -> Mesh:
    """Load ``assets/<name>.obj`` (v, vn, f with v//vn indices; triangles or convex polygons)."""
    path = (assets_dir or ASSETS_DIR) / f"{name}.obj"
    if not path.is_file():
        have = sorted(p.stem for p in (assets_dir or ASSETS_DIR).glob("*.obj"))
        raise MeshError(f"mesh {name!r}: no file {path} (available: {', '.join(have) or 'none'})")
    vs: list[list[float]] = []
    vns: list[list[float]] = []
    out_p: list[list[float]] = []
    out_n: list[list[float]] = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        try:
            if parts[0] == "v":
                vs.append([float(x) for x in parts[1:4]])
            elif parts[0] == "vn":
                vns.append([float(x) for x in parts[1:4]])
            elif parts[0] == "f":
                corners = []
                for tok in parts[1:]:
                    f = tok.split("/")
                    vi = int(f[0]) - 1
                    ni = int(f[2]) - 1 if len(f) > 2 and f[2] else None
                    corners.append((vi, ni))
                for k in range(1, len(corners) - 1):  # fan triangulation
                    tri = [corners[0], corners[k], corners[k + 1]]
                    p = np.array([vs[c[0]] for c in tri])
                    face_n = np.cross(p[1] - p[0], p[2] - p[0])
                    face_n /= max(np.linalg.norm(face_n), 1e-12)
                    for (vi, ni) in tri:
                        out_p.append(vs[vi])
                        out_n.append(vns[ni] if ni is not None else list(face_n))
        except (ValueError, IndexError) as exc:
            raise MeshError(f"{path}:{lineno}: cannot parse {line!r} ({exc})") from exc
    if not out_p:
        raise MeshError(f"{path}: no faces")
    pos = np.asarray(out_p, dtype=np.float32)
    rmax = float(np.linalg.norm(pos, axis=1).max())
    if rmax > 1.0 + 1e-5:
        raise MeshError(f"{path}: mesh reaches radius {rmax:.4f}; meshes must fit the unit sphere")
    return Mesh(name, pos, np.asarray(out_n, dtype=np.float32),
                np.arange(pos.shape[0], dtype=np.uint32))


# ---------------------------------------------------------------------- generators


def cube_faces() -> tuple[np.ndarray, list[list[int]]]:
    """Cube inscribed in the unit sphere (half-extent 1/sqrt(3)), 6 quads."""
    h = 1.0 / np.sqrt(3.0) * 0.999999
    v = np.array([[x, y, z] for x in (-h, h) for y in (-h, h) for z in (-h, h)])
    # vertex index = 4*ix + 2*iy + iz
    faces = [
        [0, 1, 3, 2],  # -x
        [4, 6, 7, 5],  # +x
        [0, 4, 5, 1],  # -y
        [2, 3, 7, 6],  # +y
        [0, 2, 6, 4],  # -z
        [1, 5, 7, 3],  # +z
    ]
    return v, faces


def icosphere_faces(subdivisions: int = 2) -> tuple[np.ndarray, list[list[int]]]:
    """Icosphere with its vertices on the unit sphere (so every face is inside it)."""
    t = (1.0 + 5 ** 0.5) / 2.0
    verts = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t],
             [0, -1, -t], [0, 1, -t], [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    verts = [list(np.asarray(v) / np.linalg.norm(v)) for v in verts]
    faces = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4],
             [11, 10, 2], [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8],
             [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]]
    for _ in range(subdivisions):
        cache: dict[tuple[int, int], int] = {}

        def mid(a: int, b: int, cache: dict[tuple[int, int], int] = cache) -> int:
            key = (min(a, b), max(a, b))
            if key not in cache:
                m = (np.asarray(verts[a]) + np.asarray(verts[b])) / 2.0
                verts.append(list(m / np.linalg.norm(m)))
                cache[key] = len(verts) - 1
            return cache[key]

        new = []
        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            new += [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
        faces = new
    return np.asarray(verts) * 0.999999, faces


def write_obj(path: Path, verts: np.ndarray, faces: list[list[int]], smooth: bool) -> None:
    """Write an OBJ; smooth meshes get per-vertex normals (the normalized position)."""
    lines = [f"# {path.name}: generated by python -m app.render.meshes; fits the unit sphere"]
    lines += [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in verts]
    if smooth:
        n = verts / np.linalg.norm(verts, axis=1, keepdims=True)
        lines += [f"vn {x:.6f} {y:.6f} {z:.6f}" for x, y, z in n]
        lines += ["f " + " ".join(f"{i + 1}//{i + 1}" for i in f) for f in faces]
    else:
        lines += ["f " + " ".join(str(i + 1) for i in f) for f in faces]
    path.write_text("\n".join(lines) + "\n")


def generate_assets(assets_dir: Path | None = None) -> list[Path]:
    """(Re)write the committed mesh files."""
    d = assets_dir or ASSETS_DIR
    d.mkdir(parents=True, exist_ok=True)
    out = []
    v, f = cube_faces()
    write_obj(d / "cube.obj", v, f, smooth=False)
    out.append(d / "cube.obj")
    v, f = icosphere_faces(2)
    write_obj(d / "icosphere.obj", v, f, smooth=True)
    out.append(d / "icosphere.obj")
    # A quarter of the icosphere's triangles (80): tens of thousands of small balls (the
    # collide scene) on software GL, which pays per triangle.
    v, f = icosphere_faces(1)
    write_obj(d / "ball.obj", v, f, smooth=True)
    out.append(d / "ball.obj")
    return out


if __name__ == "__main__":
    for p in generate_assets():
        print("wrote", p)
