"""The settings and frame inspector: one frame written as a JSON file a user can load.

``demo --headless --dump-frame N`` and the window's J key write the scene's settings (groups
and their counts, seed, view-distance rules, camera planes), the index and its parameters, the
toggles, both cameras, the frame's counts (the frame log's own row) and every node of the index
with its box, depth and outcome in that frame's query. ``docs/viewer.md`` describes each field.

The document is built by pure functions from the viewer's state after the frame
(:func:`frame_document`); the node columns come out of numpy arrays whole (no Python loop over
nodes) and are written by the ``json`` module's C encoder, one line per column, while the
settings above them are indented for reading. A file is written to a temporary name in the
same folder and renamed, so a failed write leaves nothing half-written.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from app.geom.predicates import (
    NODE_INSIDE,
    NODE_NOT_VISITED,
    NODE_PARTIAL,
    NODE_REJECT_FRUSTUM,
    NODE_REJECT_OCCLUSION,
    NODE_REJECT_VIEWDIST,
)
from app.viewer.camera import CameraView, view_depth_range

FORMAT = "cullview-frame/1"
LINE = 100  # the settings' lines: what fits stays on one line
DEFAULT_DUMP_DIR = Path("out") / "inspect"  # J and --dump-frame without --dump-path

#: The name of each ``NODE_*`` outcome code, as the box overlay's legend says it.
OUTCOME_NAMES: dict[int, str] = {
    NODE_NOT_VISITED: "not visited",
    NODE_INSIDE: "inside",
    NODE_PARTIAL: "partial",
    NODE_REJECT_FRUSTUM: "frustum-rejected",
    NODE_REJECT_VIEWDIST: "view-distance-rejected",
    NODE_REJECT_OCCLUSION: "occluded",
}
_NAMES = np.array([OUTCOME_NAMES[k] for k in range(len(OUTCOME_NAMES))], dtype=object)

#: The frame log's columns that count (the rest are times and labels); the dump's "counts".
COUNT_COLUMNS = ("objects", "moved", "working_set", "nodes_visited", "visible", "drawn",
                 "frustum_culled", "distance_culled", "occlusion_culled")


# ---------------------------------------------------------------------- plain JSON values

def plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays made JSON values, non-finite floats None.

    For the small settings dicts (index stats, spec values); node columns go through
    :func:`column`.
    """
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return column(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def column(a: np.ndarray) -> list:
    """A numpy array as nested lists, in one C call; NaN and infinities become None (strict
    JSON has no such numbers: an empty node's inverted box is written as nulls)."""
    a = np.asarray(a)
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        return np.where(np.isfinite(a), a, None).tolist()
    return a.tolist()


def outcome_names(codes: np.ndarray) -> list[str]:
    """Each ``NODE_*`` code's name; an unknown code (a newer index) is "code K"."""
    codes = np.asarray(codes, np.int64)
    known = (codes >= 0) & (codes < _NAMES.shape[0])
    if known.all():
        return _NAMES[codes].tolist()
    out = np.array([f"code {k}" for k in codes.tolist()], dtype=object)  # rare: say which
    out[known] = _NAMES[codes[known]]
    return out.tolist()


def outcome_summary(codes: np.ndarray) -> dict[str, int]:
    """Nodes per outcome name (every name present, zeros included), plus "visited" (every
    outcome but "not visited") and "rejected" (frustum, view distance and occlusion)."""
    codes = np.asarray(codes, np.int64)
    counts = np.bincount(codes[(codes >= 0) & (codes < len(OUTCOME_NAMES))],
                         minlength=len(OUTCOME_NAMES))
    out = {OUTCOME_NAMES[k]: int(counts[k]) for k in range(len(OUTCOME_NAMES))}
    out["visited"] = int(codes.shape[0] - counts[NODE_NOT_VISITED])
    out["rejected"] = int(counts[NODE_REJECT_FRUSTUM] + counts[NODE_REJECT_VIEWDIST]
                          + counts[NODE_REJECT_OCCLUSION])
    return out


# ---------------------------------------------------------------------- settings

def view_distance_rule(rule: str, value: float) -> dict[str, Any]:
    """A group's view distance as written in the scene file, with what it means."""
    meaning = {"factor": f"each object's view distance is {value:g} x its radius",
               "constant": f"every object's view distance is {value:g}",
               "none": "no view distance (infinite)"}.get(rule, rule)
    return {"rule": rule, "value": None if rule == "none" else plain(float(value)),
            "meaning": meaning}


def scene_settings(scene) -> dict[str, Any]:
    """The scene's settings: name, file, seed, object count, each group with its count in
    this run (``--objects`` scales them) and its rules, the camera's planes."""
    o = scene.objects
    counts = np.bincount(np.asarray(o.group, np.int64), minlength=len(scene.groups)) \
        if len(o) else np.zeros(len(scene.groups), np.int64)
    groups: dict[str, dict[str, Any]] = {}
    for g, n in zip(scene.groups, counts.tolist(), strict=True):  # the file's groups, once
        # a [[frame]]'s copies expand a group into NAME#0, NAME#1 ...: one entry, as written
        name = g.name.split("#", 1)[0] if g.frame is not None else g.name
        if name in groups:
            groups[name]["count"] += int(n)
            groups[name]["copies"] += 1
            continue
        groups[name] = {
            "name": name, "count": int(n), "copies": 1, "distribution": g.distribution,
            "motion": g.motion, "mesh": g.mesh, "radius": plain(list(g.radius)),
            "speed": plain(list(g.speed)),
            "view_distance": view_distance_rule(g.view_distance, g.view_distance_value),
            "frame": g.frame,
        }
    cam = scene.camera
    return {
        "name": scene.name, "path": str(scene.path), "description": scene.description,
        "seed": int(scene.seed), "objects": int(len(o)), "groups": list(groups.values()),
        "use_view_distance": bool(scene.use_view_distance),
        "default_index": scene.default_index,
        "camera": {"fov_deg": float(cam.fov_deg), "near": float(cam.near),
                   "far": float(cam.far), "path_duration_s": float(scene.duration)},
        "hierarchy_groups": None if getattr(scene, "hierarchy", None) is None
        else len(scene.hierarchy) + 1,
    }


def index_settings(pipeline) -> dict[str, Any]:
    """The live index: its name, variant, split threshold in effect, description and stats."""
    c = pipeline.config
    index = pipeline.index
    stats: dict[str, Any] = {}
    if index is not None:
        try:
            stats = plain(index.stats())
        except Exception as exc:  # noqa: BLE001 - a dump says why a figure is missing
            stats = {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "name": c.name, "label": c.label(), "leafy": bool(c.leafy) if c.is_tree() else None,
        "split_threshold": pipeline.split_threshold(),
        "split_threshold_asked": c.split_threshold,
        "describe": pipeline.describe(), "rebuild_ms": round(float(pipeline.last_rebuild_ms), 3),
        "nested": hasattr(pipeline, "box_data"), "stats": stats,
    }


def toggle_settings(toggles) -> dict[str, Any]:
    """What the keys switch, as the frame used them."""
    return {"frustum": bool(toggles.frustum), "view_distance": bool(toggles.view_distance),
            "occlusion": toggles.occlusion, "culling_camera_frozen": bool(toggles.frozen),
            "paused": bool(toggles.paused), "boxes": toggles.boxes,
            "box_filter": toggles.box_filter}


def camera_settings(view: CameraView) -> dict[str, Any]:
    """One camera as a user describes it: eye, unit forward and up, vertical field of view,
    aspect, near and far, and the six inward planes (a, b, c, d) the cull tests against."""
    fwd = -np.asarray(view.view[2, :3], np.float64)
    up = np.asarray(view.view[1, :3], np.float64)
    p = np.asarray(view.proj, np.float64)
    near, far = view_depth_range(p)
    return {"eye": column(np.asarray(view.eye, np.float64)), "forward": column(fwd),
            "up": column(up), "fov_deg": math.degrees(2.0 * math.atan(1.0 / p[1, 1])),
            "aspect": float(p[1, 1] / p[0, 0]), "near": near, "far": far,
            "planes": column(np.asarray(view.planes, np.float64))}


# ---------------------------------------------------------------------- the frame

def frame_counts(row: dict[str, Any]) -> dict[str, Any]:
    """The counting columns of the frame log's row (see :data:`COUNT_COLUMNS`)."""
    return {k: row.get(k) for k in COUNT_COLUMNS}


def _queried(pipeline) -> tuple[bool, str | None]:
    """Whether this frame's outcomes are a query's, and if not why."""
    cull = getattr(pipeline, "last_cull", None)
    if cull is None:
        return False, "no frame has been culled yet"
    if not cull.frustum:
        return False, "frustum culling was off: the index was not queried this frame"
    return True, None


def flat_nodes(index, queried: bool) -> tuple[dict[str, Any], np.ndarray, str | None]:
    """(columns, outcome codes, note) of a flat index's nodes: lo, hi, depth, outcome."""
    lo, hi, depth = index.node_boxes()
    n = int(np.asarray(lo).shape[0])
    note = None
    codes = np.zeros(n, np.int64)
    if queried:
        got = np.asarray(index.node_outcomes())
        if got.shape[0] == n:
            codes = got.astype(np.int64)
        else:
            note = (f"the index gave {got.shape[0]} outcomes for {n} nodes: written as "
                    "not visited")
    cols = {"lo": np.asarray(lo, np.float64), "hi": np.asarray(hi, np.float64),
            "depth": np.asarray(depth, np.int64), "outcome": outcome_names(codes)}
    return cols, codes, note


def nested_nodes(pipeline, queried: bool) -> tuple[dict[str, Any], dict[str, Any],
                                                    np.ndarray, np.ndarray]:
    """(group columns, node columns, group codes, node codes) of a nested index: each group's
    box of its objects and each inner index's node boxes, world space, turned with their
    group (8 corners; lo / hi are the corners' axis-aligned bounds)."""
    g_corners, gids, g_depth, g_codes, n_corners, nids, n_depth, n_gdepth, n_codes = \
        pipeline.box_outcomes()
    if not queried:
        g_codes = np.zeros(g_codes.shape[0], np.int64)
        n_codes = np.zeros(n_codes.shape[0], np.int64)
    labels = pipeline.group_labels(gids)
    groups = {"group": group_column(gids), "label": labels,
              "scene_depth": np.asarray(g_depth, np.int64), **_bounds(g_corners),
              "corners": g_corners, "outcome": outcome_names(g_codes)}
    nodes = {"group": group_column(nids),
             "depth": np.asarray(n_depth, np.int64),
             "group_scene_depth": np.asarray(n_gdepth, np.int64), **_bounds(n_corners),
             "corners": n_corners, "outcome": outcome_names(n_codes)}
    return groups, nodes, np.asarray(g_codes, np.int64), np.asarray(n_codes, np.int64)


def _bounds(corners: np.ndarray) -> dict[str, np.ndarray]:
    """lo and hi of turned boxes given as corners (K, 8, 3): their axis-aligned bounds."""
    corners = np.asarray(corners, np.float64).reshape(-1, 8, 3)
    return {"lo": corners.min(axis=1, initial=np.inf), "hi": corners.max(axis=1, initial=-np.inf)}


def group_column(gids: list) -> list:
    """Group ids as a JSON column: integers in one C call, else their strings."""
    try:
        return np.asarray(gids, np.int64).tolist()
    except (TypeError, ValueError):
        return [str(g) for g in gids]  # named groups (not the viewer's): few, at dump time


def nested_note(inner_min: int | None) -> str:
    """What a nested scene's dump holds per group and per inner node."""
    never = inner_min is None or inner_min >= np.iinfo(np.int64).max  # brute inside: never
    asked = ("never: every group is scanned in the descent" if never else
             f"a partly visible group of >= {inner_min} objects")
    return ("nested scene: 'groups' holds each group's box of its objects (one per group, its "
            "outcome the nested query's for the whole group); 'nodes' holds the node boxes of "
            "every group's own index, 'group' naming the group, 'depth' the node's depth inside "
            "that group's index. An inner node's outcome is its index's own only when the query "
            f"asked that group's index ({asked}); otherwise it is its group's outcome (inside, "
            "partial, occluded) or not visited. Boxes turn with their group: 'corners' are the "
            "8 world-space corners, 'lo' / 'hi' their axis-aligned bounds.")


def node_tables(p, queried: bool) -> tuple[dict[str, Any], dict[str, dict[str, Any]],
                                           list[str]]:
    """(summary fields, tables, notes) of the pipeline's index: the outcome summaries and
    counts, the node columns ("nodes"; a nested index also "groups")."""
    if p.index is None:
        empty = {"lo": np.zeros((0, 3)), "hi": np.zeros((0, 3)),
                 "depth": np.zeros(0, np.int64), "outcome": []}
        return ({"outcomes": outcome_summary(np.zeros(0, np.int64)), "node_count": 0},
                {"nodes": empty}, ["no index was built"])
    if hasattr(p, "box_outcomes"):  # a nested index (app/viewer/nested_view.py)
        groups, nodes, g_codes, n_codes = nested_nodes(p, queried)
        summary = {"group_outcomes": outcome_summary(g_codes), "outcomes":
                   outcome_summary(n_codes), "node_count": int(n_codes.shape[0]),
                   "group_count": int(g_codes.shape[0])}
        note = nested_note(getattr(p.index, "inner_min", None))
        return summary, {"groups": groups, "nodes": nodes}, [note]
    nodes, codes, note = flat_nodes(p.index, queried)
    summary = {"outcomes": outcome_summary(codes), "node_count": int(codes.shape[0])}
    return summary, {"nodes": nodes}, [note] if note else []


def frame_document(viewer, st) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(head, tables) of the frame the viewer just drew with stats ``st``: ``head`` holds the
    settings, cameras, counts and outcome summaries, ``tables`` the node columns ("nodes",
    and "groups" for a nested scene)."""
    p = viewer.pipeline
    if st.stages is None:  # the HUD and the log were off: count the stages for the dump
        st = dataclasses.replace(st, stages=p.frame_stages(st.drawn))
    row = plain(viewer.log_row(st))
    queried, why = _queried(p)
    view = viewer.last_view
    tg = viewer.toggles
    frozen = tg.frozen and viewer.frozen_cull is not None
    cull_view = viewer.frozen_cull if frozen else view
    head: dict[str, Any] = {
        "format": FORMAT,
        "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "frame": int(st.frame), "time_s": float(st.time_s),
        "scene": scene_settings(viewer.scene),
        "index": index_settings(p),
        "toggles": toggle_settings(tg),
        "camera": {"view": None if view is None else camera_settings(view),
                   "culling": None if cull_view is None else camera_settings(cull_view),
                   "culling_is_view": not frozen},
        "counts": frame_counts(row),
        "log_row": row,
    }
    notes = [] if queried else [why]
    occ = viewer.occlusion
    if queried and occ is not None and getattr(occ, "ground_truth", False):
        notes.append("ground truth was measured: its query (the view camera, no occlusion) "
                     "ran after the frame's cull, so the node outcomes are that query's")
    summary, tables, more = node_tables(p, queried)
    head.update(summary)
    notes += more
    head["notes"] = notes
    return head, tables


# ---------------------------------------------------------------------- writing

def document_chunks(head: dict[str, Any], tables: dict[str, dict[str, Any]]) -> Iterator[str]:
    """The JSON text in pieces: ``head`` indented (short lists on one line), then each table
    with one column a line. A column (a numpy array) becomes JSON only when its turn comes,
    through the C encoder in one call, so that one column's lists are alive at a time."""
    yield "{\n" + ",\n".join(f' {json.dumps(k)}: {_pretty(v, " ")}' for k, v in head.items())
    for name, cols in tables.items():
        yield f",\n {json.dumps(name)}: {{"
        for i, (k, v) in enumerate(cols.items()):
            yield f"{',' if i else ''}\n  {json.dumps(k)}: {_compact(v)}"
        yield "\n }"
    yield "\n}\n"


def document_text(head: dict[str, Any], tables: dict[str, dict[str, Any]]) -> str:
    """The whole JSON text (:func:`document_chunks` joined)."""
    return "".join(document_chunks(head, tables))


def _pretty(value: Any, pad: str) -> str:
    """``value`` as indented JSON for reading: what fits in :data:`LINE` characters on one
    line (a point, a group's rule), else a dict one key a line and a list one item a line."""
    flat = json.dumps(value, allow_nan=False, separators=(", ", ": "))
    if len(flat) + len(pad) <= LINE or not isinstance(value, dict | list):
        return flat
    if isinstance(value, dict):
        inner = pad + " "
        rows = [f"{inner}{json.dumps(k)}: {_pretty(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(rows) + f"\n{pad}}}"
    inner = pad + " "
    return "[\n" + ",\n".join(inner + _pretty(v, inner) for v in value) + f"\n{pad}]"


def _compact(value: Any) -> str:
    if isinstance(value, np.ndarray):
        value = column(value)
    return json.dumps(value, allow_nan=False, separators=(",", ":"))


def write_atomic(path: str | Path, text: str | Iterable[str]) -> tuple[Path, int]:
    """Write ``text`` (a string or its pieces) to ``path`` through a temporary file in the
    same folder and a rename: the file is whole or absent (its folder is created when
    missing). Returns the path and the bytes written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for piece in [text] if isinstance(text, str) else text:
                fh.write(piece)
        size = tmp.stat().st_size
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path, size


@dataclasses.dataclass
class Dump:
    """What one dump wrote."""

    path: Path
    frame: int
    nodes: int
    bytes: int
    build_ms: float  # the settings and the node arrays
    write_ms: float  # JSON encoding and writing


def dump_frame(viewer, st, path: str | Path) -> Dump:
    """Write the frame the viewer just drew (stats ``st``) to ``path``; what was written."""
    t0 = time.perf_counter()
    head, tables = frame_document(viewer, st)
    t1 = time.perf_counter()
    out, size = write_atomic(path, document_chunks(head, tables))
    t2 = time.perf_counter()
    return Dump(out, int(st.frame), int(head.get("node_count", 0)), size, (t1 - t0) * 1e3,
                (t2 - t1) * 1e3)


class Inspector:
    """The viewer's dumps: the file of the next one (``--dump-path``'s name, then NAME-2.json
    ..., else one under out/inspect/), the one requested for the end of the next frame, and
    the last failure (a headless run exits 2 on it; the window shows it)."""

    def __init__(self, notice: Callable[[str, float], None],
                 note_written: Callable[[Path, str], None]) -> None:
        self.notice = notice
        self.note_written = note_written  # the run's list of files written (printed at exit)
        self.base: Path | None = None  # --dump-path
        self.count = 0
        self.pending: Path | None = None
        self.last: Dump | None = None
        self.failed: str | None = None

    def next_path(self, scene: str, frame: int) -> Path:
        """J's file: ``--dump-path``'s name (NAME-2.json ... after it, never an existing file),
        else out/inspect/SCENE-DATE-TIME-frame-N.json."""
        self.count += 1
        if self.base is not None:
            base = self.base if self.count == 1 else \
                self.base.with_name(f"{self.base.stem}-{self.count}{self.base.suffix}")
        else:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            base = DEFAULT_DUMP_DIR / f"{scene}-{stamp}-frame-{frame}.json"
        k = 2
        free = base
        while free.exists():
            free = base.with_name(f"{base.stem}-{k}{base.suffix}")
            k += 1
        return free

    def request(self, path: str | Path) -> Path:
        """Dump the next frame when it ends (:meth:`take`)."""
        self.pending = Path(path)
        return self.pending

    def take(self, viewer, st) -> Dump | None:
        """The requested dump, if any, of the frame just drawn; a failure is noticed and kept
        in :attr:`failed`, not raised (a window keeps running)."""
        if self.pending is None:
            return None
        path, self.pending = self.pending, None
        try:
            d = dump_frame(viewer, st, path)
        except OSError as exc:
            self.failed = f"cannot write {path}: {(exc.strerror or str(exc)).lower()}"
            self.notice(f"frame dump failed: {self.failed}", 8.0)
            return None
        self.last = d
        what = (f"{d.nodes:,} nodes, {d.bytes / 1e6:.1f} MB, {d.build_ms:.0f} + "
                f"{d.write_ms:.0f} ms")
        self.note_written(d.path, f"frame {d.frame}, {what}")
        self.notice(f"frame {d.frame} written to {d.path} ({what})", 6.0)
        return d
