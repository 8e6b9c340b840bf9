"""GL context helpers: headless EGL context, shader loading, the scene framebuffer."""

from __future__ import annotations

from pathlib import Path

import moderngl
import numpy as np

SHADERS_DIR = Path(__file__).resolve().parents[2] / "shaders"


def create_headless_context() -> moderngl.Context:
    """A standalone OpenGL 3.3+ core context through EGL (no display needed)."""
    return moderngl.create_context(standalone=True, backend="egl", require=330)


def load_program(ctx: moderngl.Context, name: str) -> moderngl.Program:
    """Compile ``shaders/<name>.vert`` + ``shaders/<name>.frag`` (one program per purpose)."""
    vert = (SHADERS_DIR / f"{name}.vert").read_text()
    frag = (SHADERS_DIR / f"{name}.frag").read_text()
    return ctx.program(vertex_shader=vert, fragment_shader=frag)


class SceneTarget:
    """The framebuffer the frame is drawn into: RGBA8 colour texture + depth texture.

    The depth texture stays attached so that a later pass (the Z-pyramid of occlusion
    culling) can read the main pass's depth. The window blits ``fbo`` to the screen.
    """

    def __init__(self, ctx: moderngl.Context, size: tuple[int, int]) -> None:
        self.ctx = ctx
        self.size = (int(size[0]), int(size[1]))
        self.color = ctx.texture(self.size, 4)
        self.depth = ctx.depth_texture(self.size)
        self.fbo = ctx.framebuffer(color_attachments=[self.color], depth_attachment=self.depth)

    def resize(self, size: tuple[int, int]) -> None:
        size = (max(1, int(size[0])), max(1, int(size[1])))
        if size == self.size:
            return
        self.release()
        self.__init__(self.ctx, size)

    def release(self) -> None:
        self.fbo.release()
        self.color.release()
        self.depth.release()

    def read_rgb(self) -> np.ndarray:
        """(h, w, 3) uint8, top row first (ready for PIL)."""
        raw = self.fbo.read(components=3, alignment=1)
        img = np.frombuffer(raw, dtype=np.uint8).reshape(self.size[1], self.size[0], 3)
        return np.ascontiguousarray(img[::-1])

    def read_depth(self) -> np.ndarray:
        """(h, w) float32 window depth in [0, 1], bottom row first (as glReadPixels)."""
        raw = self.fbo.read(attachment=-1, dtype="f4")
        return np.frombuffer(raw, dtype=np.float32).reshape(self.size[1], self.size[0])

    def save_png(self, path: str | Path) -> Path:
        from PIL import Image

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(self.read_rgb()).save(path)
        return path
