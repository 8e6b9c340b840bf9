"""A lean headless frame loop for occlusion culling, independent of the viewer.

It runs the same sequence as ``app.viewer.frame.Viewer.frame`` (motion, index update, cull
with the provider's pyramid, main pass, the provider's hook and second draw) with any
:class:`~app.spatial.SpatialIndex`, and returns one dict per frame. Used by the end-to-end
tests and to measure the occlusion modes without the viewer's overlays and HUD::

    python -m app.render.occlusion_pass --scene fig26 --mode two-pass --frames 120
    python -m app.render.occlusion_pass summarize LOG.csv ...   # means of viewer logs
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import moderngl
import numpy as np

from app.render.context import SceneTarget
from app.render.meshes import load_mesh
from app.render.objects import ObjectRenderer
from app.render.occlusion import OcclusionCuller
from app.spatial import create_index
from app.viewer.camera import CameraView

LIGHT_DIR = np.array([0.35, 0.85, 0.40])


def run(ctx: moderngl.Context, scene, *, index: str = "brute", mode: str = "two-pass",
        frames: int = 60, size: tuple[int, int] = (640, 360), dt: float = 1 / 60,
        ground_truth: bool = True, index_kwargs: dict | None = None,
        screenshot: str | None = None, first_level: int | None = None) -> list[dict]:
    """Run ``frames`` frames of ``scene`` along its camera path; one result dict per frame."""
    o = scene.objects
    idx = create_index(index, **(index_kwargs or {}))
    idx.insert(o.ids, o.centers, o.radii)
    meshes = [load_mesh(name) for name in scene.meshes]
    objects = ObjectRenderer(ctx, meshes)
    objects.set_objects(o.centers, o.radii, o.colors, o.mesh)
    target = SceneTarget(ctx, size)
    occ = OcclusionCuller(ctx, mode, ground_truth=ground_truth, meshes=meshes,
                          first_level=first_level)
    viewer = SimpleNamespace(pipeline=SimpleNamespace(index=idx), scene=scene,
                             toggles=SimpleNamespace(view_distance=False), frame_index=0)
    cam = scene.camera
    rows = []
    for i in range(frames):
        t_start = time.perf_counter()
        viewer.frame_index = i
        moved = np.asarray(scene.step(dt), np.int64)
        if moved.shape[0]:
            idx.update(moved, o.centers[moved])
            objects.update_moved(moved, o.centers)
        eye, tgt = scene.camera_at(i * dt)
        view = CameraView.make(eye, tgt, cam.fov_deg, size[0] / size[1], cam.near, cam.far)
        t0 = time.perf_counter()
        res = idx.query_frustum(view.planes, eye=view.eye, occlusion=occ.pyramid())
        t1 = time.perf_counter()
        drawn = objects.upload(res.visible)
        target.fbo.use()
        ctx.viewport = (0, 0, *size)
        ctx.enable(moderngl.DEPTH_TEST)
        ctx.disable(moderngl.BLEND)
        ctx.depth_func = "<"
        target.fbo.clear(0.09, 0.10, 0.13, 1.0, depth=1.0)
        objects.draw(view.viewproj, LIGHT_DIR)
        frame = SimpleNamespace(ctx=ctx, target=target, view=view, cull=view, result=res,
                                visible=res.visible, viewer=viewer)
        extra = occ.after_main_pass(frame)
        if extra is not None and len(extra):
            target.fbo.use()
            drawn += objects.upload(extra)
            objects.draw(view.viewproj, LIGHT_DIR)
        ctx.finish()
        t_end = time.perf_counter()
        row = {"frame": i, "visible": int(res.visible.shape[0]), "drawn": drawn,
               "working_set": int(res.working_set), "nodes_visited": int(res.nodes_visited),
               "cull_ms": (t1 - t0) * 1e3, "frame_ms": (t_end - t_start) * 1e3,
               "occlusion": mode}
        row.update(occ.log_values())
        gt = row.pop("ground_truth_ms", 0.0) or 0.0
        row["frame_ms"] -= gt  # the id buffer is measurement, not part of the frame
        rows.append(row)
    if screenshot:
        target.save_png(screenshot)
    occ.release()
    target.release()
    return rows


def summary(rows: list[dict], skip: int = 1) -> dict:
    """Means over the run (first ``skip`` frames left out: no pyramid yet, shader compiles)."""
    r = rows[skip:] or rows
    out = {k: float(np.mean([x[k] for x in r])) for k in
           ("visible", "drawn", "working_set", "frame_ms", "cull_ms")}
    out["occlusion_ms"] = float(np.mean([x.get("occlusion_ms", 0.0) or 0.0 for x in r]))
    if r and r[0].get("true_visible", "") not in ("", None):
        tv = sum(int(x["true_visible"]) for x in r)
        fn = [int(x["false_negatives"]) for x in r]
        worst = int(np.argmax(fn))
        out.update(true_visible=tv / len(r), false_negatives=sum(fn),
                   fn_rate=sum(fn) / max(tv, 1), worst_fn=fn[worst],
                   worst_fn_frame=r[worst]["frame"],
                   worst_fn_of=int(r[worst]["true_visible"]))
    return out


def summarize_log(path: str, skip: int = 5) -> dict:
    """:func:`summary` of a viewer frame log (CSV written by ``python -m app demo --record``)."""
    import csv

    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))

    def num(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return v

    rows = [{k: num(v) for k, v in r.items()} for r in rows]
    for r in rows:
        r.setdefault("drawn", r.get("visible", 0))
        if r.get("true_visible", "") == "":
            r.pop("true_visible", None)
    out = summary(rows, skip)
    r = rows[skip:] or rows
    out["render_ms"] = float(np.mean([x["render_ms"] for x in r]))
    out["frame_ms_median"] = float(np.median([x["frame_ms"] for x in r]))
    return out


def main(argv: list[str] | None = None) -> int:
    from app.render.context import create_headless_context
    from app.scene import load_scene

    if argv is None:
        import sys

        argv = sys.argv[1:]
    if argv and argv[0] == "summarize":
        for path in argv[1:]:
            s = summarize_log(path)
            print(f"{path}: " + "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else
                                          f"{k} {v}" for k, v in s.items()))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scene", default="fig26")
    p.add_argument("--index", default="brute")
    p.add_argument("--mode", default="two-pass", choices=("off", "previous", "two-pass"))
    p.add_argument("--frames", type=int, default=120)
    p.add_argument("--objects", type=int, default=None, help="rescale the scene's object count")
    p.add_argument("--size", default="640x360")
    p.add_argument("--no-ground-truth", action="store_true")
    p.add_argument("--screenshot", default=None)
    a = p.parse_args(argv)
    w, h = (int(v) for v in a.size.lower().split("x"))
    ctx = create_headless_context()
    scene = load_scene(a.scene, objects=a.objects)
    rows = run(ctx, scene, index=a.index, mode=a.mode, frames=a.frames, size=(w, h),
               ground_truth=not a.no_ground_truth, screenshot=a.screenshot)
    s = summary(rows)
    print(f"{a.scene} {a.index} {a.mode} {a.frames} frames {w}x{h}: " +
          "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in s.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
