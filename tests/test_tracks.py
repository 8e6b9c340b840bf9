"""Hierarchical scenes in the viewer (issue 15): the ``tracks`` scene (Shagam figure 2.5), the
nested index driven per frame through the real headless viewer (EGL), its boxes, keys and log.

The oracle flattens the scene: every object's world sphere from ``NestedIndex.world_spheres``
(the canonical definition), then the contract's brute-force test in numpy.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.gl


def _viewer(ctx, index="icoseptree", leafy=False, size=(320, 180), **toggles):
    from app.culling.pipeline import IndexConfig
    from app.scene import load_scene
    from app.viewer.state import Toggles
    from app.viewer.viewer import Viewer

    scene = load_scene("tracks")
    return Viewer(ctx, scene, IndexConfig(index, leafy), size, Toggles(**toggles))


def _view(scene, t):
    from app.viewer.camera import CameraView

    eye, target = scene.camera_at(t)
    cam = scene.camera
    return CameraView.make(eye, target, cam.fov_deg, 16 / 9, cam.near, cam.far)


def _flat_oracle(h, ids, planes, eye=None, use_vd=False):
    """Brute force over the flattened scene's world spheres (numpy)."""
    c, r, vd = h.world_spheres(ids, with_view_distances=True)
    ok = (c @ planes[:, :3].T + planes[:, 3] >= -r[:, None]).all(axis=1)
    if use_vd:
        ok &= np.sqrt(((c - eye) ** 2).sum(axis=1)) <= vd
    return np.sort(ids[ok])


def test_tracks_scene_is_figure_25s_composition():
    from app.scene import load_scene

    s = load_scene("tracks")
    h = s.hierarchy
    assert h is not None
    # five groups under the world; 3 x 72 segments below the tracks
    roots = [h.labels[g] for g in range(len(h)) if h.parent[g] < 0]
    assert roots == ["track0", "track1", "track2", "cloud", "lights"]
    assert len(h) == 5 + 3 * 72
    o = s.objects
    per_instance = np.bincount(h.instance_of[h.instance_of >= 0], minlength=len(h))
    segments = [g for g in range(len(h)) if h.parent[g] >= 0]
    assert len(segments) == 216 and (per_instance[segments] == 4).all()  # walls x2, floor, ring
    assert per_instance[h.labels.index("cloud")] == 1500
    assert len(o) == 216 * 4 + 1500 + 24
    # segments are fixed in their track; the tracks, the cloud and the lights turn
    turning = {h.labels[g] for g in h.turning.tolist()}
    assert turning == {"track0", "track1", "track2", "cloud", "lights"}


def test_scene_world_spheres_are_the_nested_indexes(ctx):
    """The scene's world centres (what is drawn) are bit for bit the index's world spheres,
    also after frames of turning groups and moving sprites."""
    v = _viewer(ctx)
    s = v.scene
    for i in range(3):
        v.frame(1 / 30, _view(s, 0.5 * i))
    c, r = v.pipeline.index.world_spheres(s.objects.ids)
    assert np.array_equal(c, s.objects.centers)
    assert np.array_equal(r, s.objects.radii)
    v.pipeline.index.validate()


@pytest.mark.parametrize("index,leafy", [("icoseptree", False), ("kd", True), ("brute", True),
                                         ("chunks", True)])
def test_frames_answer_brute_force_over_world_spheres(ctx, index, leafy):
    from app.viewer.nested_view import NestedPipeline

    v = _viewer(ctx, index=index, leafy=leafy)
    assert isinstance(v.pipeline, NestedPipeline)
    s = v.scene
    inner = 0
    for i in range(8):  # the figure 2.5 view, then out along the path
        view = _view(s, [0.0, 0.0, 2.0, 4.0, 8.0, 20.0, 33.0, 50.0][i])
        st = v.frame(1 / 30, view)
        res = v.pipeline.last_result
        want = _flat_oracle(v.pipeline.index, s.objects.ids, view.planes)
        assert np.array_equal(np.sort(res.visible), want), f"frame {i}"
        assert st.visible == want.shape[0] == st.drawn
        assert st.working_set >= st.visible
        inner += res.extra["inner_queries"]
    v.pipeline.index.validate()
    if index != "brute":
        assert inner > 0  # the cloud, cut by the view, asked through its own index


def test_view_distance_through_the_nested_index(ctx):
    v = _viewer(ctx, view_distance=True)
    s = v.scene
    s.objects.view_distances[:] = 30.0  # the world's; the index holds the local ones
    h = v.pipeline.hierarchy
    h.local_vd[:] = 30.0
    v.rebuild()
    view = _view(s, 8.0)
    v.frame(1 / 30, view)
    want = _flat_oracle(v.pipeline.index, s.objects.ids, view.planes, view.eye, True)
    assert np.array_equal(np.sort(v.pipeline.last_result.visible), want)
    assert 0 < want.shape[0] < int(v.stats.stages.objects)


def test_index_hotkeys_switch_the_inner_kind(ctx):
    from app.spatial import INDEX_NAMES

    v = _viewer(ctx, index="icoseptree", leafy=False)
    s = v.scene
    view = _view(s, 0.0)
    v.frame(1 / 30, view)
    assert v.pipeline.index.kind == "icoseptree"
    seen = []
    for _ in range(len(INDEX_NAMES)):
        assert v.key("i")
        v.frame(1 / 30, view)
        h = v.pipeline.index
        seen.append(h.kind)
        assert h.kind == v.config.name
        assert len(h) == len(s.objects)
        want = _flat_oracle(h, s.objects.ids, view.planes)
        assert np.array_equal(np.sort(v.pipeline.last_result.visible), want), h.kind
        assert v.pipeline.describe().startswith(f"nested[{h.kind}")
    assert sorted(seen) == sorted(INDEX_NAMES)
    # L and + / - rebuild every group's index with the tree's new variant / threshold
    while v.config.name != "octree":
        v.key("i")
    v.key("l")
    assert v.config.leafy and v.pipeline.index.group_index(0).leafy
    before = v.pipeline.split_threshold()
    v.key("plus")
    assert v.pipeline.split_threshold() > before
    assert v.pipeline.index.group_index(0).split_threshold == \
        v.pipeline.split_threshold()
    v.frame(1 / 30, view)
    lines = v.hud_lines(v.stats)
    assert any(x.startswith("nested: 222 groups, octree/leafy inside each") for x in lines)


def test_boxes_are_turned_with_their_groups(ctx):
    v = _viewer(ctx, boxes="depth")
    s = v.scene
    view = _view(s, 0.0)
    v.frame(1 / 30, view)
    h = v.pipeline.index
    gc, gids, _, codes = h.group_boxes()
    nc = h.node_boxes()
    ov = v.overlays
    assert ov.box_total == gc.shape[0] + nc.shape[0] and ov.box_count == ov.box_total
    assert gc.shape[0] == 218  # the groups holding objects: 216 segments, cloud, lights
    # a segment's box is turned with its segment: its edges follow the world matrix's axes
    g = 10
    k = gids.index(g)
    edge = gc[k, 1] - gc[k, 0]
    axis = h.world_transform(g)[:3, 0]
    assert abs(abs(edge @ axis) - np.linalg.norm(edge)) < 1e-9 * max(1.0, np.linalg.norm(edge))
    assert abs(axis[1]) < 0.999 and abs(axis[0]) < 0.999  # not axis-aligned
    # outcome colouring: the group codes of the last query; the legend names outcomes
    v.key("b")
    v.frame(1 / 30, view)
    assert v.overlays.legend[0] == "box outcome:"
    from app.geom.predicates import NODE_INSIDE, NODE_PARTIAL, NODE_REJECT_FRUSTUM

    codes = v.pipeline.index.group_boxes()[3]
    assert {NODE_PARTIAL, NODE_REJECT_FRUSTUM} <= set(codes.tolist())
    assert NODE_INSIDE in codes.tolist() or NODE_PARTIAL in codes.tolist()
    # N keeps fewer boxes, the HUD counts them
    v.key("n")
    v.frame(1 / 30, view)
    assert 0 < v.overlays.box_count <= v.overlays.box_total


def test_boxes_draw_the_figure(ctx, tmp_path):
    """Boxes change the picture (lines drawn over the scene), and the picture is saved."""
    v = _viewer(ctx, boxes="off", hud=False)
    view = _view(v.scene, 8.0)
    v.frame(0.0, view)
    plain = v.target.read_rgb().copy()
    v.toggles.boxes = "depth"
    v.frame(0.0, view)
    boxed = v.target.read_rgb()
    changed = (np.abs(boxed.astype(int) - plain.astype(int)).sum(axis=2) > 30).mean()
    assert changed > 0.02
    out = v.screenshot(tmp_path / "tracks.png")
    assert out.stat().st_size > 10_000


def test_oriented_box_frames_rebuild_the_corners():
    from app.render.oriented_boxes import box_frames
    from app.scene.groups import euler

    rng = np.random.default_rng(3)
    lo = rng.uniform(-5, 0, (20, 3))
    hi = lo + rng.uniform(0.1, 4, (20, 3))
    rot = euler(np.array([20.0, 40.0, -70.0]))
    k = np.arange(8)
    bits = np.stack([(k >> a) & 1 for a in range(3)], axis=1).astype(bool)
    local = np.where(bits[None], hi[:, None], lo[:, None])
    corners = local @ rot.T + np.array([3.0, -1.0, 7.0])
    f = box_frames(corners).astype(np.float64)
    rebuilt = f[:, None, 0:3] + bits[None, :, 0:1] * f[:, None, 3:6] \
        + bits[None, :, 1:2] * f[:, None, 6:9] + bits[None, :, 2:3] * f[:, None, 9:12]
    assert np.allclose(rebuilt, corners, atol=1e-4)
    with pytest.raises(ValueError, match=r"\(K, 8, 3\)"):
        box_frames(np.zeros((3, 4, 3)))


def test_headless_run_writes_the_log(tmp_path):
    log = tmp_path / "tracks.csv"
    shot = tmp_path / "tracks.png"
    r = subprocess.run(
        [sys.executable, "-m", "app", "demo", "--headless", "--scene", "tracks", "--frames",
         "4", "--size", "320x180", "--index", "kd", "--boxes", "outcome", "--record", str(log),
         "--screenshot", str(shot)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(log.open()))
    assert len(rows) == 4
    assert {row["index"] for row in rows} == {"kd/leafy"} or \
        {row["index"] for row in rows} == {"kd/non-leafy"}
    first = rows[0]
    assert int(first["objects"]) == 2388
    assert 0 < int(first["visible"]) <= int(first["working_set"])
    assert int(first["nodes_visited"]) > 0
    assert int(first["groups_visited"]) == 221 and int(first["inner_queries"]) == 1
    assert shot.exists()


@pytest.mark.parametrize("bad,message", [
    ('[[frame]]\nname = "a"\nparent = "nope"\n', "frame[0].parent"),
    ('[[frame]]\nname = "a"\n[[frame]]\nname = "a"\n', "frame[1].name"),
    ('[[frame]]\nname = "a"\nturn_axis = [0, 0, 0]\n', "frame[0].turn_axis"),
    ('[[frame]]\nname = "a"\ncopies = 0\n', "frame[0].copies"),
    ('[[frame]]\nname = "a"\nspin = 1\n', "unknown key frame[0].spin"),
    ('', "group[0].frame"),
])
def test_bad_frames_are_one_clear_line(tmp_path, bad, message):
    from app.scene import SceneError, load_scene

    p = tmp_path / "s.toml"
    p.write_text('[camera]\nposition = [0, 0, 10]\ntarget = [0, 0, 0]\n' + bad
                 + '[[group]]\ncount = 3\ndistribution = "uniform"\nsize = 4\nframe = "b"\n')
    with pytest.raises(SceneError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_scene(p)
    r = subprocess.run([sys.executable, "-m", "app", "demo", "--headless", "--scene", str(p),
                        "--frames", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and message.split()[-1] in r.stderr


def test_occlusion_and_frustum_keys_keep_the_frame_exact(ctx):
    """O: the nested index tests its world spheres against the pyramid (previous frame's, or
    two-pass's late cull); the frame draws the frustum's answer minus what the pyramid hides
    (two-pass: plus the early cull's), the HUD counts occlusion as for a flat index; F (frustum
    off) works as for a flat index."""
    from app.viewer.setup import occlusion_factory

    v = _viewer(ctx)
    v.occlusion_factory = occlusion_factory(False)
    s = v.scene
    view = _view(s, 8.0)  # the overview: tracks behind tracks, sprites behind the cloud
    for mode in ("previous", "two-pass"):
        v.set_occlusion(mode)
        for _ in range(3):
            v.frame(1 / 30, view)
        res = v.pipeline.last_result
        inview = _flat_oracle(v.pipeline.index, s.objects.ids, view.planes)
        got = np.sort(res.visible)
        assert np.isin(got, inview).all(), mode
        # what the query left out of the frustum's answer, it counted as occluded (that it is
        # exactly what the pyramid hides: tests/test_nested_occlusion.py)
        gone = np.setdiff1d(inview, got)
        assert res.occluded_objects == gone.shape[0] > 0, mode
        st = v.stats
        stages = st.stages
        assert stages.occlusion is not None and stages.frustum == len(s.objects) - len(inview)
        assert stages.occlusion == len(inview) - st.drawn > 0, mode
        line = next(x for x in v.hud_lines(st) if x.startswith("culled "))
        assert f"occlusion {stages.occlusion:,}" in line, line
        assert not any("not applied" in x for x in v.hud_lines(st))
    v.set_occlusion("off")
    v.key("f")
    st = v.frame(1 / 30, view)
    assert st.drawn == len(s.objects)


def test_two_pass_occlusion_culls_nothing_the_id_buffer_sees(ctx):
    """Conservativeness in the tracks scene with real GL: along the camera path, two-pass
    occlusion (this frame's pyramid) leaves out no object that owns a pixel of the id buffer
    (ground truth), while it culls some; previous-frame occlusion culls more (and pops)."""
    from app.scene import load_scene
    from app.viewer.occlusion_runs import run

    rows = run(ctx, load_scene("tracks"), index="icoseptree", leafy=False, mode="two-pass",
               frames=24, size=(480, 270), dt=0.5, ground_truth=True)
    assert sum(int(r["false_negatives"]) for r in rows) == 0
    assert sum(int(r["occluded_objects"]) for r in rows) > 0
    assert all(int(r["true_visible"]) <= int(r["drawn"]) for r in rows)
    prev = run(ctx, load_scene("tracks"), index="brute", mode="previous", frames=24,
               size=(480, 270), dt=0.5, ground_truth=True)
    assert sum(int(r["occluded_objects"]) for r in prev[1:]) > 0


def test_late_cull_keeps_every_object_the_id_buffer_sees(ctx):
    """The strict form, frame by frame: the late cull's answer (this frame's pyramid) holds
    every object with a pixel in an id buffer of everything in the frustum, drawn right after
    with the same matrices."""
    from app.viewer.setup import occlusion_factory

    v = _viewer(ctx, size=(480, 270))
    v.occlusion_factory = occlusion_factory(False)  # (its ground truth re-queries the index)
    v.set_occlusion("two-pass")
    s = v.scene
    o = s.objects
    culled = 0
    for t in (0.0, 0.0, 4.0, 8.0, 8.0, 19.0, 19.0, 31.0, 41.0, 41.0):  # twice: the early draw
        view = _view(s, t)
        v.frame(1 / 30, view)
        res = v.pipeline.last_result
        inview = _flat_oracle(v.pipeline.index, o.ids, view.planes)
        mesh = getattr(o, "mesh", None)
        seen = v.occlusion._id_buffer(v.target.size).render(
            view.viewproj, inview, o.centers[inview], o.radii[inview],
            None if mesh is None else mesh[inview])
        missing = np.setdiff1d(seen, res.visible)
        assert missing.shape[0] == 0, (t, missing[:10])
        culled += inview.shape[0] - res.visible.shape[0]
        assert res.occluded_objects == inview.shape[0] - res.visible.shape[0]
    assert culled > 100  # ~1,300 at 480x270


def test_framed_motions_stay_in_their_local_boxes():
    from app.scene import load_scene

    s = load_scene("tracks")
    h = s.hierarchy
    for _ in range(40):
        s.step(0.25)
    for gi, g in enumerate(s.groups):
        if g.frame is None or g.motion == "static":
            continue
        c = h.local[s.objects.group == gi]
        assert np.all(c >= g.lo - 1e-9) and np.all(c <= g.hi + 1e-9), g.name
    assert np.all(s.objects.centers - s.objects.radii[:, None] >= s.extent_lo)
    assert np.all(s.objects.centers + s.objects.radii[:, None] <= s.extent_hi)
