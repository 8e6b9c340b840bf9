"""A first start that does not leave the user waiting in the dark (issue 23, item 4).

``--help`` and a bad option answer at once without loading numba, even with an empty kernel
cache. The plain-data catalogues the help reads match what they stand for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment with an empty kernel cache of its own."""
    return dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), **extra)


# ---------------------------------------------------------------------------- help


HELP_PROBE = r"""
import sys
from app.cli import build_parser
for sub in ("demo", "bench", "plot"):
    parser = build_parser(sub)
    parser.format_help()
    next(a for a in parser._actions if a.dest == "command").choices[sub].format_help()
heavy = sorted(m for m in sys.modules
               if m.split(".")[0] in ("numba", "llvmlite", "moderngl", "pyglet")
               or (m.startswith(("app.spatial", "app.scene", "app.culling", "app.geom",
                                 "app.render", "app.viewer.frame"))
                   and m != "app.spatial.names"))
print("HEAVY", heavy)
"""


def test_the_parsers_and_their_help_load_no_kernel_module(tmp_path):
    """Every subcommand's parser and help text come from plain data: numba, the indexes,
    the scenes and OpenGL are not even imported."""
    r = subprocess.run([sys.executable, "-c", HELP_PROBE], cwd=ROOT, env=_env(tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout, r.stdout


@pytest.mark.parametrize(("args", "code"), [
    (["--help"], 0), (["demo", "--help"], 0), (["bench", "--help"], 0), (["plot", "--help"], 0),
    (["demo", "--index", "nope"], 2),
    (["demo", "--headless", "--frames", "0"], 2), (["demo", "--no-such-option"], 2),
])
def test_help_and_bad_options_answer_at_once_on_an_empty_cache(tmp_path, args, code):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "app", *args], cwd=tmp_path, env=_env(tmp_path),
                       capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr
    assert took < 5.0, f"{took:.1f} s"  # well under 1 s on a quiet machine
    assert not list((tmp_path / "numba").rglob("*.nbi")), "something was compiled"


def test_the_catalogues_match_the_indexes_scenes_and_keys():
    from app import spatial
    from app.scene import scene as scene_module
    from app.viewer import catalog
    from app.viewer.frame import HELP_LINES

    assert catalog.INDEX_NAMES == spatial.INDEX_NAMES == tuple(spatial._REGISTRY)
    assert catalog.TREE_HEURISTICS == spatial.TREE_HEURISTICS
    assert set(catalog.INDEX_HELP) == set(catalog.INDEX_NAMES)
    assert list(HELP_LINES) == catalog.KEY_LINES
    assert catalog.SCENES_DIR == scene_module.SCENES_DIR
    assert catalog.list_scenes() == scene_module.list_scenes()
    assert catalog.scene_descriptions() == scene_module.scene_descriptions()
    assert catalog.MAX_OBJECTS == scene_module.MAX_OBJECTS
