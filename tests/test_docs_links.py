"""Every relative link in the README and the docs leads somewhere: the file exists and, for a
``#anchor`` into a markdown file, a heading of that file has that anchor (GitHub's rule:
lowercase, punctuation dropped, spaces to hyphens, repeats numbered). The docs are moved and
split as the project grows; a reader who follows a link to nothing is lost."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors GitHub gives the headings of a markdown file (read once a file: the
    log's contents link into it some fifty times)."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(out)


def test_anchor_rule(tmp_path: Path) -> None:
    """The slug rule on headings like the docs' own (backticks, commas, parentheses,
    apostrophes dropped; a repeated heading numbered)."""
    doc = tmp_path / "probe.md"
    doc.write_text("# `bench index`: the reference\n## Where it stands (2026-11-29, 1db0a21)\n"
                   "## A slot's row\n## A slot's row\n```\n# not a heading\n```\n",
                   encoding="utf-8")
    assert anchors(doc) == {"bench-index-the-reference", "where-it-stands-2026-11-29-1db0a21",
                            "a-slots-row", "a-slots-row-1"}


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    broken = []
    for line in _prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else (path.parent / file_part).resolve()
            if not dest.exists():
                broken.append(f"{target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)
