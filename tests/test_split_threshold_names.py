"""The trees' split threshold by name: ``paper`` (each heuristic's default, the contract's
None) and ``storage`` (the value measured on the contiguous storage), as ``bench index`` and
the viewer take them; the defaults stay the paper's."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from app.bench.cli import _threshold_option
from app.bench.index_bench import _variants_at
from app.cli import build_parser
from app.spatial import TREE_HEURISTICS, create_index, index_variants
from app.spatial.aabbtree import DEFAULT_THRESHOLDS, STORAGE_THRESHOLD, named_threshold

ROOT = Path(__file__).resolve().parents[1]


def test_names_and_integers():
    assert named_threshold("paper", 10**9) is None
    assert named_threshold(" Storage ", 10**9) == STORAGE_THRESHOLD
    assert named_threshold("16", 10**9) == 16
    for bad in ("0", "-3", "2.5", "tuned", "", str(10**10)):
        with pytest.raises(ValueError):
            named_threshold(bad, 10**9)


def test_the_default_stays_the_papers_and_storage_is_larger():
    for h in TREE_HEURISTICS:
        for leafy in (True, False):
            idx = create_index(h, leafy=leafy)
            assert idx.split_threshold == DEFAULT_THRESHOLDS[h][0 if leafy else 1]
            assert idx.split_threshold < STORAGE_THRESHOLD
            assert create_index(h, leafy=leafy,
                                split_threshold=STORAGE_THRESHOLD).split_threshold == 600


def test_bench_index_puts_the_threshold_on_the_trees_only():
    assert _variants_at(None) == index_variants()
    at = {label: (name, kw) for label, name, kw in _variants_at(STORAGE_THRESHOLD)}
    assert set(at) == {label for label, _, _ in index_variants()}
    for _, (name, kw) in at.items():
        if name in TREE_HEURISTICS:
            assert kw["split_threshold"] == STORAGE_THRESHOLD
            assert create_index(name, **kw).split_threshold == STORAGE_THRESHOLD
        else:
            assert "split_threshold" not in kw
            create_index(name, **kw)  # (an index without the option would refuse it)


def test_bench_index_option_parses_names_and_refuses_the_rest():
    assert _threshold_option("paper") is None
    assert _threshold_option("storage") == STORAGE_THRESHOLD
    assert _threshold_option("90") == 90
    for bad in ("0", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            _threshold_option(bad)


def test_viewer_option_takes_storage():
    args = build_parser("demo").parse_args(["demo", "--split-threshold", "storage"])
    assert args.split_threshold == STORAGE_THRESHOLD
    args = build_parser("demo").parse_args(["demo", "--split-threshold", "24"])
    assert args.split_threshold == 24
    for bad in ("paper", "0", "x"):  # (paper: leaving the option out means the scene's first)
        with pytest.raises(SystemExit):
            build_parser("demo").parse_args(["demo", "--split-threshold", bad])


def test_bench_index_command_says_the_threshold_and_refuses_a_bad_one():
    base = [sys.executable, "-m", "app", "bench", "index", "--quick", "--only", "octree/leafy",
            "--workloads", "static", "--patterns", "fixed", "--no-rtree", "--frames", "2",
            "--quiet"]
    p = subprocess.run(base + ["--split-threshold", "storage"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"the trees at split threshold {STORAGE_THRESHOLD}," in p.stdout.splitlines()[0]
    p = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "the trees at their default split thresholds (the paper's)" in p.stdout
    p = subprocess.run(base + ["--split-threshold", "0"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "--split-threshold" in p.stderr and "octree" not in p.stdout


def test_the_split_keys_reach_the_storage_threshold_and_the_help_lists_them():
    from app.culling.pipeline import SPLIT_STEPS
    from app.viewer.keys import markdown_table

    assert STORAGE_THRESHOLD in SPLIT_STEPS and list(SPLIT_STEPS) == sorted(set(SPLIT_STEPS))
    listed = " ".join(str(s) for s in SPLIT_STEPS)
    assert listed in markdown_table(), listed
