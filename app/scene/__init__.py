"""Scene files (TOML), the object store and motion: ``load_scene(name)``.

No OpenGL here: the viewer, the benchmarks and the tests all build scenes the same way.
"""

from app.scene.camera import CameraPath, CameraSpec
from app.scene.scene import SCENES_DIR, ObjectSet, Scene, list_scenes, load_scene
from app.scene.schema import DISTRIBUTIONS, MESH_KINDS, GroupSpec, SceneError

__all__ = [
    "DISTRIBUTIONS",
    "MESH_KINDS",
    "SCENES_DIR",
    "CameraPath",
    "CameraSpec",
    "GroupSpec",
    "ObjectSet",
    "Scene",
    "SceneError",
    "list_scenes",
    "load_scene",
]
