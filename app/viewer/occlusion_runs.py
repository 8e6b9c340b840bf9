"""Headless occlusion runs for tests and measurements: the viewer's frame without its HUD.

:func:`run` drives :class:`app.viewer.viewer.Viewer` (the same frame sequence as the window and
``python -m app demo --headless``) along a scene's camera path with any index and occlusion
mode and returns one dict per frame; :func:`summary` averages them. From the shell::

    python -m app.viewer.occlusion_runs --scene fig26 --mode two-pass --frames 120
    python -m app.viewer.occlusion_runs summarize LOG.csv ...   # means of viewer logs
"""

from __future__ import annotations

import argparse

import moderngl
import numpy as np

from app.culling.pipeline import IndexConfig
from app.viewer.camera import CameraView
from app.viewer.setup import occlusion_factory
from app.viewer.state import Toggles
from app.viewer.viewer import Viewer


def run(ctx: moderngl.Context, scene, *, index: str = "brute", mode: str = "two-pass",
        frames: int = 60, size: tuple[int, int] = (640, 360), dt: float = 1 / 60,
        ground_truth: bool = True, leafy: bool = True, split_threshold: int | None = None,
        screenshot: str | None = None) -> list[dict]:
    """Run ``frames`` frames of ``scene`` along its camera path; one frame-log dict per frame
    (``frame_ms`` without the ground-truth pass, which is measurement, not part of the frame).
    """
    toggles = Toggles(hud=False, view_distance=bool(scene.use_view_distance))
    viewer = Viewer(ctx, scene, IndexConfig(index, leafy, split_threshold), size, toggles,
                    occlusion_factory=occlusion_factory(ground_truth))
    viewer.set_occlusion(mode)
    cam = scene.camera
    rows = []
    try:
        for i in range(frames):
            eye, tgt = scene.camera_at(i * dt)
            view = CameraView.make(eye, tgt, cam.fov_deg, size[0] / size[1], cam.near, cam.far)
            row = viewer.log_row(viewer.frame(dt, view))
            row["frame_ms"] -= float(row.pop("ground_truth_ms", 0.0) or 0.0)
            rows.append(row)
        if screenshot:
            viewer.screenshot(screenshot)
    finally:
        viewer.close()
        viewer.target.release()
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
    p.add_argument("--non-leafy", action="store_true", help="non-leafy variant of a tree index")
    a = p.parse_args(argv)
    w, h = (int(v) for v in a.size.lower().split("x"))
    ctx = create_headless_context()
    scene = load_scene(a.scene, objects=a.objects)
    rows = run(ctx, scene, index=a.index, mode=a.mode, frames=a.frames, size=(w, h),
               ground_truth=not a.no_ground_truth, leafy=not a.non_leafy,
               screenshot=a.screenshot)
    s = summary(rows)
    print(f"{a.scene} {a.index} {a.mode} {a.frames} frames {w}x{h}: " +
          "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in s.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
