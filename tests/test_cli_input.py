"""Bad input to ``python -m app``: one clear line on stderr, exit status 2, nothing written.

Each class of input is covered whole: every number of a scene file, every number option,
every output path option, the memory a run needs; then what ``--help`` lists and what
``scripts/ensure-env.sh`` says before it runs ``sudo apt-get``. The issue's own examples run
as real subprocesses; the rest of each class runs through ``app.cli.main`` in-process (the
same code, without a second of start-up per case).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from app.scene import SceneError, list_scenes, load_scene
from app.scene.scene import SCENES_DIR, available_memory, scene_descriptions

ROOT = Path(__file__).resolve().parents[1]
LONG = "x" * 300  # one path component longer than any Linux file system takes (255)

SCENE = """
[scene]
name = "small"
description = "a small scene for the input tests"
[camera]
position = [0.0, 5.0, 40.0]
target = [0.0, 0.0, 0.0]
near = 0.1
far = 500.0
[[camera.path]]
t = 0
position = [0.0, 5.0, 40.0]
target = [0.0, 0.0, 0.0]
[[camera.path]]
t = 5
position = [30.0, 5.0, 0.0]
target = [0.0, 0.0, 0.0]
[[group]]
name = "walkers"
count = 200
distribution = "uniform"
center = [0.0, 0.0, 0.0]
size = 20.0
radius = [0.2, 0.6]
motion = "random_walk"
speed = [1.0, 3.0]
"""


def _scene(tmp_path: Path, old: str = "", new: str = "", name: str = "s.toml") -> Path:
    assert old in SCENE
    p = tmp_path / name
    p.write_text(SCENE.replace(old, new, 1) if old else SCENE)
    return p


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _app(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=120)


def _refused(code: int, err: str, *named: str) -> str:
    """The one stderr line of a refusal (exit 2), after checking it names ``named``."""
    lines = [s for s in err.splitlines() if s.strip()]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in named:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _main(capsys, *args: str) -> tuple[int, str]:
    """``python -m app ARGS`` in this process: (exit status, stderr)."""
    from app.cli import main

    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's refusals
        code = exc.code
    return code, capsys.readouterr().err


# ------------------------------------------------------------- scene files: the cases


@pytest.mark.parametrize(("old", "new", "key"), [
    ("near = 0.1\nfar = 500.0", "near = 1e-20\nfar = 1e30", "camera.near"),  # the file
    ("far = 500.0", "far = 1e30", "camera.far"),
    ("near = 0.1\nfar = 500.0", "near = 0.001\nfar = 1000000.0", "camera.far"),  # depth ratio
    ("radius = [0.2, 0.6]", "radius = [0.2, 1e300]", "group[0].radius"),
    ("position = [0.0, 5.0, 40.0]\ntarget", "position = [0.0, nan, 40.0]\ntarget",
     "camera.position"),
    ("count = 200", "count = 10000000000", "objects need about"),  # fits the file, not memory
])
def test_bad_scene_file_is_one_line_before_anything_runs(tmp_path, old, new, key):
    scene = _scene(tmp_path, old, new)
    before = _files(tmp_path)
    r = _app("demo", "--headless", "--scene", str(scene), "--frames", "2", "--size", "64x64",
             "--record", "out/run.csv", "--screenshot", "out/run.png", cwd=tmp_path)
    _refused(r.returncode, r.stderr, str(scene), key)
    assert _files(tmp_path) == before and r.stdout == ""


# ------------------------------------------------------------- scene files: every number


def _leaves(x, path=()):
    """Paths of every number (not bool) in a parsed TOML document."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _leaves(v, (*path, i))
    elif isinstance(x, int | float) and not isinstance(x, bool):
        yield path


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "[" + ", ".join(_toml_value(x) for x in v) + "]"


def _dump(doc: dict, prefix: str = "") -> str:
    """A TOML text of a scene document (tables, arrays of tables, scalars, arrays)."""
    out = []
    scalars = {k: v for k, v in doc.items() if not isinstance(v, dict)
               and not (isinstance(v, list) and v and isinstance(v[0], dict))}
    out += [f"{k} = {_toml_value(v)}" for k, v in scalars.items()]
    for k, v in doc.items():
        name = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out += [f"[{name}]", _dump(v, name)]
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for item in v:
                out += [f"[[{name}]]", _dump(item, name)]
    return "\n".join(out)


def _set(doc, path, value):
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def _distinct_leaves() -> list[tuple[str, tuple]]:
    """(scene, path) of every number of every shipped scene, one per distinct key (the same
    field of another group or keyframe is the same check)."""
    seen, out = set(), []
    for name in list_scenes():
        doc = tomllib.loads((SCENES_DIR / f"{name}.toml").read_text())
        for path in _leaves(doc):
            key = tuple("*" if isinstance(p, int) and path[i - 1] in ("group", "path", "centers")
                        else p for i, p in enumerate(path))
            if key not in seen:
                seen.add(key)
                out.append((name, path))
    return out


LEAVES = _distinct_leaves()
BAD_NUMBERS = (1e300, -1e300, math.nan, math.inf, -math.inf, 10**30, -(10**30))


def test_every_number_of_every_shipped_scene_is_range_checked(tmp_path):
    """Each number of each shipped scene file, replaced by a value out of any sane range
    (huge, NaN, infinite, a 100-bit integer), is refused with a SceneError naming the file
    and the key: no number is taken unchecked."""
    assert len(LEAVES) > 40
    for name, path in LEAVES:
        doc = tomllib.loads((SCENES_DIR / f"{name}.toml").read_text())
        key = next(p for p in reversed(path) if isinstance(p, str))
        for bad in BAD_NUMBERS:
            _set(doc, path, bad)
            p = tmp_path / f"{name}.toml"
            p.write_text(_dump(doc))
            with pytest.raises(SceneError) as info:
                load_scene(str(p), objects=None if name != "meadow" else 1000)
            msg = str(info.value)
            assert str(p) in msg and key in msg, (path, bad, msg)


def test_the_dump_round_trips_every_shipped_scene(tmp_path):
    for name in list_scenes():
        doc = tomllib.loads((SCENES_DIR / f"{name}.toml").read_text())
        assert tomllib.loads(_dump(doc)) == doc


@pytest.mark.parametrize(("old", "new", "key"), [
    ("near = 0.1", "near = 0", "camera.near"),
    ("near = 0.1", "near = -1", "camera.near"),
    ("far = 500.0", "far = 0.1", "camera.far"),  # not beyond near
    ("far = 500.0", "far = 20000.0", "camera.far"),  # ratio 200,000
    ("far = 500.0", "far = 500.0\nfov = 0", "camera.fov"),
    ("far = 500.0", "far = 500.0\nfov = 180", "camera.fov"),
    ("far = 500.0", "far = 500.0\nduration = 1e300", "camera.duration"),
    ("t = 5", "t = 1e300", "camera.path[1].t"),
    ("size = 20.0", "size = 1e7", "group[0].size"),
    ("center = [0.0, 0.0, 0.0]", "center = [999999.0, 0.0, 0.0]", "group[0].size"),
    ("speed = [1.0, 3.0]", "speed = [1.0, 3e6]", "group[0].speed"),
    ("speed = [1.0, 3.0]", "speed = 2.0\nturn = 1e9", "group[0].turn"),
    ("count = 200", "count = 0\nlane_count = 0", "group[0].lane_count"),
    ("count = 200", "count = 99999999999", "group[0].count"),
    ("name = \"small\"", "seed = 9223372036854775808", "scene.seed"),
    ("name = \"small\"", "split_threshold = 0", "scene.split_threshold"),
    ("name = \"small\"", "split_threshold = 10000000000", "scene.split_threshold"),
    ("speed = [1.0, 3.0]", "speed = 1.0\nview_distance_factor = 1e300",
     "group[0].view_distance_factor"),
    ("speed = [1.0, 3.0]", "speed = 1.0\nview_distance = 1e300", "group[0].view_distance"),
])
def test_scene_numbers_outside_their_range_name_file_and_key(tmp_path, old, new, key):
    p = _scene(tmp_path, old, new)
    with pytest.raises(SceneError) as info:
        load_scene(str(p))
    assert str(p) in str(info.value) and key in str(info.value), str(info.value)


def test_view_planes_are_checked_for_finite_exact_near_and_far():
    from app.scene.camera import view_problem

    pose = [(np.array([0.0, 0.0, 10.0]), np.zeros(3))]
    assert view_problem(pose, 60.0, 0.1, 600.0) is None
    assert "not finite" in view_problem(pose, 60.0, 1e-20, 1e30)
    assert "far at" in view_problem(pose, 60.0, 1e-3, 1e13)  # finite, but far is off by 2x
    assert "degenerate" in view_problem(pose, 1e-300, 0.1, 600.0)
    down = [(np.array([0.0, 50.0, 0.0]), np.zeros(3))]  # straight down: the other up vector
    assert view_problem(down, 60.0, 0.1, 600.0) is None


def test_shipped_scenes_pass_every_check_they_ship_with():
    for name in list_scenes():
        load_scene(name, objects=None if name != "meadow" else 1000)


# ------------------------------------------------------------- memory


def test_objects_far_beyond_memory_are_refused_with_the_estimate(tmp_path):
    scene = _scene(tmp_path)
    r = _app("demo", "--headless", "--scene", str(scene), "--objects", str(10**12),
             "--record", "run.csv", cwd=tmp_path)
    line = _refused(r.returncode, r.stderr, "1,000,000,000,000 objects", "TB", "available",
                    "--objects")
    assert "bytes an object" in line
    assert _files(tmp_path) == {"s.toml"}


def test_load_scene_refuses_before_allocating(tmp_path):
    avail = available_memory()
    assert avail is not None and avail > 0  # Linux: /proc/meminfo
    with pytest.raises(SceneError, match="objects need about"):
        load_scene(str(_scene(tmp_path)), objects=10**12)


def test_load_scene_overrides_are_range_checked(tmp_path):
    scene = str(_scene(tmp_path))
    for objects in (-1, 1.5, True, "10", 10**400, 10**16):
        with pytest.raises(SceneError, match="objects override"):
            load_scene(scene, objects=objects)
    for seed in (-1, 1.5, True, 2**63, 10**400):
        with pytest.raises(SceneError, match="seed override"):
            load_scene(scene, seed=seed)


# ------------------------------------------------------------- number options


@pytest.mark.parametrize(("option", "values"), [
    ("--objects", ["-1", "abc", "1.5", str(10**30)]),
    ("--seed", ["-1", "x", str(2**63)]),
    ("--split-threshold", ["0", "-3", str(10**12)]),
    ("--frames", ["0", "-1", str(10**12)]),
    ("--warmup", ["-1", str(10**12)]),
    ("--freeze-at", ["-1", str(10**12)]),
    ("--dt", ["-1", "nan", "inf", "1e300"]),
    ("--start-time", ["-1", "nan", "-inf", "1e300"]),
    ("--orbit-out", ["-2", "nan", "1e300"]),
    ("--size", ["0x0", "15x720", "100000x720", "abc", "-64x64"]),
    ("--index", ["nope", ""]),
    ("--occlusion", ["sometimes"]),
])
def test_every_number_option_refuses_zero_negative_and_absurd(tmp_path, monkeypatch, capsys,
                                                              option, values):
    monkeypatch.chdir(tmp_path)
    scene = str(_scene(tmp_path))
    for v in values:
        code, err = _main(capsys, "demo", "--headless", "--scene", scene, "--frames", "1",
                          "--size", "64x64", f"{option}={v}", "--record", "out/r.csv")
        _refused(code, err, option)
    assert _files(tmp_path) == {"s.toml"}


def test_options_that_depend_on_each_other(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scene = str(_scene(tmp_path))
    code, err = _main(capsys, "demo", "--headless", "--scene", scene, "--frames", "5",
                      "--freeze-at", "5")
    _refused(code, err, "--freeze-at", "--frames")
    code, err = _main(capsys, "demo", "--headless", "--scene", scene, "--objects", "0",
                      "--frames", "1", "--scene", str(SCENES_DIR / "city.toml"))
    _refused(code, err, "fixed groups")  # city's buildings are fixed: 0 objects cannot be
    assert _files(tmp_path) == {"s.toml"}


def test_number_options_through_the_real_command(tmp_path):
    for args, named in ((["--objects", "-5"], "--objects"), (["--frames", "0"], "--frames"),
                        (["--dt", "nan"], "--dt"), (["--size", "0x0"], "--size")):
        r = _app("demo", "--headless", *args, "--record", "r.csv", cwd=tmp_path)
        _refused(r.returncode, r.stderr, named)
    assert _files(tmp_path) == set()


# ------------------------------------------------------------- output paths


@pytest.mark.parametrize("flag,suffix", [("--record", ".csv"), ("--screenshot", ".png")])
def test_a_name_the_file_system_refuses_is_one_line(tmp_path, flag, suffix):
    scene = _scene(tmp_path)
    for target in (f"{LONG}{suffix}", f"out/{LONG}/run{suffix}"):
        r = _app("demo", "--headless", "--scene", str(scene), "--frames", "1", "--size",
                 "64x64", flag, target, cwd=tmp_path)
        _refused(r.returncode, r.stderr, flag, "name that long")
        assert _files(tmp_path) == {"s.toml"}


@pytest.mark.parametrize(("make", "flag", "value", "named"), [
    (None, "--record", "/sys/cullview-new/run.csv", "cannot create the folder"),
    (None, "--record", "/sys/run.csv", "cannot create it"),
    ("file", "--record", "afile/run.csv", "not a folder"),
    ("file", "--screenshot", "afile/sub/shot.png", "not a folder"),
    ("dir", "--record", "adir", "is a folder"),
    (None, "--record", "out/", "names a folder"),
    (None, "--record", "", "empty file name"),
    (None, "--record", "a\0b.csv", "NUL"),
    (None, "--screenshot", "out/shot.jpeg", ".png"),
])
def test_every_output_path_problem_is_one_line_and_leaves_nothing(
        tmp_path, monkeypatch, capsys, make, flag, value, named):
    monkeypatch.chdir(tmp_path)
    scene = str(_scene(tmp_path))
    if make == "file":
        (tmp_path / "afile").write_text("keep")
    elif make == "dir":
        (tmp_path / "adir").mkdir()
    before = _files(tmp_path)
    code, err = _main(capsys, "demo", "--headless", "--scene", scene, "--frames", "1",
                      "--size", "64x64", flag, value)
    _refused(code, err, flag, named)
    assert _files(tmp_path) == before
    if make == "file":
        assert (tmp_path / "afile").read_text() == "keep"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_folder_or_file_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scene = str(_scene(tmp_path))
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "old.csv").write_text("old")
    (ro / "old.csv").chmod(0o444)
    ro.chmod(0o555)
    try:
        for value in ("ro/run.csv", "ro/new/run.csv", "ro/old.csv"):
            code, err = _main(capsys, "demo", "--headless", "--scene", scene, "--record", value)
            _refused(code, err, "--record", value)
    finally:
        ro.chmod(0o755)
    assert (ro / "old.csv").read_text() == "old" and _files(ro) == {"old.csv"}


def test_probing_a_good_path_leaves_nothing_when_another_option_is_refused(
        tmp_path, monkeypatch, capsys):
    """--record's folders are created to prove they can be, then removed again when
    --screenshot turns out wrong: a refused run leaves no trace."""
    monkeypatch.chdir(tmp_path)
    scene = str(_scene(tmp_path))
    code, err = _main(capsys, "demo", "--headless", "--scene", scene, "--record",
                      "new/deep/run.csv", "--screenshot", f"new/{LONG}.png")
    _refused(code, err, "--screenshot")
    code, err = _main(capsys, "demo", "--headless", "--scene", scene, "--record", "same.png",
                      "--screenshot", "./same.png")
    _refused(code, err, "same file")
    assert _files(tmp_path) == {"s.toml"}


def test_an_existing_log_is_kept_until_the_run_replaces_it(tmp_path, monkeypatch, capsys):
    """Checking an existing file opens it without truncating: refused runs keep it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.csv").write_text("previous run\n")
    scene = str(_scene(tmp_path))
    code, err = _main(capsys, "demo", "--headless", "--scene", scene, "--record", "old.csv",
                      "--screenshot", "x.gif")
    _refused(code, err, "--screenshot")
    assert (tmp_path / "old.csv").read_text() == "previous run\n"


def test_window_mode_checks_its_paths_before_opening(tmp_path):
    scene = _scene(tmp_path)
    r = _app("demo", "--scene", str(scene), "--screenshot", f"{LONG}.png", cwd=tmp_path,
             env={"DISPLAY": ":97531"})  # no such display: it must not get that far
    _refused(r.returncode, r.stderr, "--screenshot", "name that long")
    assert _files(tmp_path) == {"s.toml"}


def test_bad_scene_paths_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    for value, named in ((LONG, LONG[:20]), (f"{LONG}.toml", "name too long"),
                         ("adir", "adir"), ("nosuch", "available: "), ("", "no scene")):
        code, err = _main(capsys, "demo", "--headless", "--scene", value)
        _refused(code, err, named)
    assert _files(tmp_path) == {"adir"}


def test_a_scene_file_that_is_not_text_is_one_line(tmp_path, monkeypatch, capsys):
    """A picture or any binary given as the scene: one line naming the file and the first
    byte that is not UTF-8, exit 2, nothing written (not tomllib's decoding traceback)."""
    monkeypatch.chdir(tmp_path)
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    latin = tmp_path / "latin.toml"
    latin.write_bytes('[scene]\nname = "caf\xe9"\n'.encode("latin-1"))
    for path, byte in ((png, "0x89"), (latin, "0xe9")):
        code, err = _main(capsys, "demo", "--headless", "--scene", str(path))
        _refused(code, err, path.name, "not a text file", byte)
    assert _files(tmp_path) == {"shot.png", "latin.toml"}


def test_near_misses_get_did_you_mean(tmp_path, capsys):
    """A mistyped scene name, scene-file key or index name in a scene file is answered with
    the closest right one; a name close to none gets no guess."""
    code, err = _main(capsys, "demo", "--headless", "--scene", "citty")
    _refused(code, err, "no scene named 'citty'", "did you mean 'city'?", "available: ")
    code, err = _main(capsys, "demo", "--headless", "--scene", "qqqqq")
    _refused(code, err, "no scene named 'qqqqq'", "available: ")
    assert "did you mean" not in err
    typo_key = _scene(tmp_path, 'name = "small"', 'nmae = "small"')
    code, err = _main(capsys, "demo", "--headless", "--scene", str(typo_key))
    _refused(code, err, "unknown key scene.nmae", "did you mean 'name'?")
    typo_index = _scene(tmp_path, 'name = "small"', 'name = "small"\ndefault_index = "octre"',
                        name="t.toml")
    code, err = _main(capsys, "demo", "--headless", "--scene", str(typo_index))
    _refused(code, err, "scene.default_index", "did you mean 'octree'?")
    for args, hint in ((["demo", "--index", "octre"], "did you mean 'octree'?"),
                       (["demo", "--collision-index", "gird"], "did you mean 'grid'?"),
                       (["bench", "index", "--only", "kd/lefy"], "did you mean 'kd/leafy'?"),
                       (["bench", "pairs", "--only", "swep"], "did you mean 'sweep'?")):
        code, err = _main(capsys, *args)
        _refused(code, err, "unknown index", hint, "choose from")
    code, err = _main(capsys, "demo", "--index", "zzzz")
    assert "did you mean" not in _refused(code, err, "unknown index 'zzzz'", "choose from")


# ------------------------------------------------------------- help


def test_demo_help_lists_indexes_scenes_and_keys(tmp_path):
    from app.spatial import INDEX_NAMES

    r = _app("demo", "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "app.spatial.INDEX_NAMES" not in out
    index_help = out[out.index("  --index NAME "):out.index("  --objects N ")]
    for name in INDEX_NAMES:
        assert name in index_help and f"\n  {name} " in out, name
    descriptions = scene_descriptions()
    assert set(descriptions) == set(list_scenes()) and descriptions
    for name, desc in descriptions.items():
        assert f"\n  {name} " in out, name
        assert " ".join(desc.split()[:4]) in " ".join(out.split()), desc
    assert "KEYS" in out and "F1" in out and "screenshot" in out
    assert _files(tmp_path) == set()


def test_top_level_help_points_to_demo_help_and_errors_are_one_line(tmp_path):
    r = _app("--help", cwd=tmp_path)
    assert r.returncode == 0 and "demo --help" in r.stdout
    r = _app("demo", "--no-such-option", cwd=tmp_path)
    _refused(r.returncode, r.stderr, "--no-such-option", "--help")
    r = _app("nosuchcommand", cwd=tmp_path)
    _refused(r.returncode, r.stderr, "nosuchcommand")


# ------------------------------------------------------------- run.sh / ensure-env.sh


def _fake_bin(tmp_path: Path, uid: int) -> Path:
    """A PATH with bash and dirname but no Xvfb/xdotool, a fake id, and sudo/apt-get that
    only report how they were called."""
    b = tmp_path / "bin"
    b.mkdir()
    for cmd in ("bash", "dirname"):
        (b / cmd).symlink_to(shutil.which(cmd))
    scripts = {"id": f"echo {uid}",
               "sudo": 'echo "CALLED sudo $*" >&2\n"$@"',
               "apt-get": 'echo "CALLED apt-get $*" >&2'}
    for name, body in scripts.items():
        (b / name).write_text(f"#!/bin/bash\n{body}\n")
        (b / name).chmod(0o755)
    return b


def _ensure(path: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp")}
    e.update(env or {})
    return subprocess.run(["/bin/bash", str(ROOT / "scripts" / "ensure-env.sh"),
                           "--packages-only"], env=e, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)


def test_ensure_env_says_what_it_installs_and_why_before_sudo_apt_get(tmp_path):
    r = _ensure(str(_fake_bin(tmp_path, uid=1000)))
    assert r.returncode == 0, r.stdout
    out = r.stdout
    first_call = out.index("CALLED")
    said = out[:first_call]
    assert "sudo apt-get" in said and "xvfb" in said and "xdotool" in said
    assert "window test" in said  # the why, per package
    assert "CALLED sudo apt-get install -y -qq xvfb xdotool" in out


def test_ensure_env_as_root_without_apt_lists_and_does_not_install(tmp_path):
    r = _ensure(str(_fake_bin(tmp_path, uid=0)), env={"CULLVIEW_NO_APT": "1"})
    assert r.returncode == 0 and "CALLED" not in r.stdout, r.stdout
    assert "xvfb" in r.stdout and "apt-get install -y xvfb xdotool" in r.stdout


@pytest.mark.skipif(not all(shutil.which(c) for c in ("Xvfb", "xvfb-run", "xdotool")),
                    reason="the Debian packages are not all installed here")
def test_ensure_env_is_silent_when_the_packages_are_present():
    r = _ensure(os.environ["PATH"])
    assert r.returncode == 0 and r.stdout == "", r.stdout


def test_run_sh_goes_through_ensure_env():
    text = (ROOT / "scripts" / "run.sh").read_text()
    assert '"$ROOT/scripts/ensure-env.sh"' in text
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "run.sh")]).returncode == 0
