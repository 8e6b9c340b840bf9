"""``--compare SPEC``: which index runs as the B side of an A/B comparison, as plain data.

A spec names an index as ``--index`` does and, optionally, its variant and split threshold:
``kd``, ``kd/non-leafy``, ``octree/leafy/split=16``. What it leaves out is A's (the drawn
index's variant and ``--split-threshold``), so ``--index icoseptree --compare kd`` compares
two heuristics of the same variant. Plain data and the standard library only: the command
line checks a spec without importing numba (:mod:`app.viewer.compare` runs it).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.suggest import with_hint
from app.viewer.catalog import INDEX_NAMES, TREE_HEURISTICS

#: The spec's grammar, as error messages show it.
GRAMMAR = "NAME[/leafy|/non-leafy][/split=N]"
VARIANTS = ("leafy", "non-leafy")
MAX_SPLIT = 10**9


@dataclass(frozen=True)
class CompareSpec:
    """The B index: its name, and its variant and split threshold when the spec gives them
    (None: A's)."""

    name: str
    leafy: bool | None = None
    split_threshold: int | None = None

    def resolve(self, leafy: bool, split_threshold: int | None) -> tuple[str, bool, int | None]:
        """(name, leafy, split threshold) with what the spec leaves out taken from A's."""
        return (self.name, leafy if self.leafy is None else self.leafy,
                split_threshold if self.split_threshold is None else self.split_threshold)


def parse_spec(text: str) -> CompareSpec:
    """The spec ``text`` (see the module docstring); a ``ValueError`` saying what is wrong
    with it, with "did you mean" for a near miss."""
    parts = [p.strip() for p in str(text).split("/")]
    name = parts[0]
    if name not in INDEX_NAMES:
        raise ValueError(with_hint(f"unknown index {name!r}", name, INDEX_NAMES)
                         + f" (choose from {', '.join(INDEX_NAMES)}; {GRAMMAR})")
    leafy: bool | None = None
    split: int | None = None
    for part in parts[1:]:
        if part in VARIANTS:
            if name not in TREE_HEURISTICS:
                raise ValueError(f"{name} has no leafy / non-leafy variant (only "
                                 f"{', '.join(TREE_HEURISTICS)})")
            if leafy is not None:
                raise ValueError(f"the variant is given twice in {text!r}")
            leafy = part == "leafy"
        elif part.startswith("split="):
            split = _split(part[len("split="):], text)
        else:
            raise ValueError(with_hint(f"unknown part {part!r} in {text!r}", part,
                                       [*VARIANTS, "split="]) + f" ({GRAMMAR})")
    return CompareSpec(name, leafy, split)


def _split(value: str, text: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"split threshold {value!r} in {text!r} is not an integer") from None
    if not 1 <= n <= MAX_SPLIT:
        raise ValueError(f"split threshold {n} in {text!r}: expected 1 to {MAX_SPLIT:,}")
    return n
