"""Shared start-up of the window and the headless runner: scene, index config, toggles, and
the occlusion provider factory.

Imports stay inside the functions: the window imports this before it opens, and the scene
and viewer modules load numba (and, on a cold cache, compile kernels) when first imported.
"""

from __future__ import annotations

import sys
from typing import Any


class StartupError(Exception):
    """A clear one-line reason the viewer cannot start (exit code 2)."""


def load(args) -> tuple[Any, Any, Any]:
    """(scene, IndexConfig, Toggles) from the demo arguments; raises StartupError."""
    from app.culling.pipeline import IndexConfig
    from app.scene import SceneError, load_scene
    from app.spatial import INDEX_NAMES
    from app.viewer.state import Toggles

    try:
        scene = load_scene(args.scene, objects=args.objects, seed=args.seed)
    except SceneError as exc:
        raise StartupError(str(exc)) from None
    except (FileNotFoundError, ValueError) as exc:
        raise StartupError(f"scene {args.scene!r}: {exc}") from None
    name = args.index or scene.default_index
    if name not in INDEX_NAMES:
        if args.index is None:
            print(f"demo: scene's default index {name!r} is not available; using brute",
                  file=sys.stderr)
            name = "brute"
        else:
            raise StartupError(f"unknown index {name!r}; available: {', '.join(INDEX_NAMES)}")
    opts = dict(getattr(scene, "default_index_options", {}) or {})
    leafy = args.leafy if args.leafy is not None else bool(opts.get("leafy", True))
    split = args.split_threshold if args.split_threshold is not None else \
        opts.get("split_threshold")
    config = IndexConfig(name, leafy, split)
    vd = args.view_distance if args.view_distance is not None else bool(scene.use_view_distance)
    toggles = Toggles(frustum=not args.no_cull, view_distance=vd, occlusion=args.occlusion,
                      boxes=args.boxes, paused=args.paused, hud=not args.no_hud)
    return scene, config, toggles


def hud_px(height: int) -> int:
    """The HUD's font size in pixels for a framebuffer ``height`` pixels tall."""
    from app.render.hud import font_px

    return font_px(height)


def occlusion_factory(ground_truth: bool = False):
    """``Viewer(occlusion_factory=...)``: (viewer, mode) -> the occlusion provider of that mode
    (None for "off" without ``ground_truth``)."""
    from app.render.occlusion import create_provider

    return lambda viewer, mode: create_provider(viewer, mode, ground_truth)


def start_comparison(viewer, args) -> str | None:
    """``--compare`` and ``--compare-report`` on a new ``viewer``: B built from the current
    objects; why it cannot be (one line), or None."""
    from pathlib import Path

    if getattr(args, "compare_report", None):
        viewer.compare_report = Path(args.compare_report)
    spec = getattr(args, "compare", None)
    if spec is None:
        return None
    if not viewer.set_compare(viewer.compare_config(spec)):
        return f"--compare: {viewer.notices[-1][1]}"
    if spec.occlusion is not None:  # F3's path: B's own mode, with its notice
        viewer.set_compare_occlusion(spec.occlusion)
    return None
