"""``--compare SPEC``: which index runs as the B side of an A/B comparison, as plain data.

A spec names an index as ``--index`` does and, optionally, its variant, split threshold and
an occlusion mode of B's own: ``kd``, ``kd/non-leafy``, ``octree/leafy/split=16``,
``kd/occlusion=two-pass``; or only the occlusion mode, ``occlusion=previous``, to compare A's
index under two occlusion modes. What it leaves out is A's (the drawn index, its variant,
``--split-threshold`` and occlusion mode), so ``--index icoseptree --compare kd`` compares two
heuristics of the same variant. Plain data and the standard library only: the command line
checks a spec without importing numba (:mod:`app.viewer.compare` runs it).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.suggest import with_hint
from app.viewer.catalog import INDEX_NAMES, TREE_HEURISTICS

#: The spec's grammar, as error messages show it.
GRAMMAR = "NAME[/leafy|/non-leafy][/split=N][/occlusion=MODE] or occlusion=MODE"
VARIANTS = ("leafy", "non-leafy")
#: B's own occlusion modes (those of ``--occlusion``).
OCCLUSION_MODES = ("off", "previous", "two-pass")
OCCLUSION = "occlusion="
MAX_SPLIT = 10**9


@dataclass(frozen=True)
class CompareSpec:
    """The B side: its index name, variant, split threshold and occlusion mode when the spec
    gives them (None: A's)."""

    name: str | None
    leafy: bool | None = None
    split_threshold: int | None = None
    occlusion: str | None = None  # B's own occlusion mode (None: B culls with A's pyramids)

    def resolve(self, name: str, leafy: bool,
                split_threshold: int | None) -> tuple[str, bool, int | None]:
        """(name, leafy, split threshold) with what the spec leaves out taken from A's."""
        return (name if self.name is None else self.name,
                leafy if self.leafy is None else self.leafy,
                split_threshold if self.split_threshold is None else self.split_threshold)


def parse_spec(text: str) -> CompareSpec:
    """The spec ``text`` (see the module docstring); a ``ValueError`` saying what is wrong
    with it, with "did you mean" for a near miss."""
    parts = [p.strip() for p in str(text).split("/")]
    name: str | None = parts[0]
    if name.startswith(OCCLUSION):
        name, parts = None, ["", *parts]  # A's index under an occlusion mode of B's own
    elif name not in INDEX_NAMES:
        raise ValueError(with_hint(f"unknown index {name!r}", name, INDEX_NAMES)
                         + f" (choose from {', '.join(INDEX_NAMES)}; {GRAMMAR})")
    leafy: bool | None = None
    split: int | None = None
    occlusion: str | None = None
    for part in parts[1:]:
        if part.startswith(OCCLUSION):
            if occlusion is not None:
                raise ValueError(f"the occlusion mode is given twice in {text!r}")
            occlusion = _occlusion(part[len(OCCLUSION):], text)
        elif name is None:
            raise ValueError(f"{part!r} in {text!r}: an index's variant or split threshold "
                             f"follows its name ({GRAMMAR})")
        elif part in VARIANTS:
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
                                       [*VARIANTS, "split=", OCCLUSION]) + f" ({GRAMMAR})")
    return CompareSpec(name, leafy, split, occlusion)


def _occlusion(mode: str, text: str) -> str:
    if mode not in OCCLUSION_MODES:
        raise ValueError(with_hint(f"unknown occlusion mode {mode!r} in {text!r}", mode,
                                   OCCLUSION_MODES)
                         + f" (choose from {', '.join(OCCLUSION_MODES)})")
    return mode


def _split(value: str, text: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"split threshold {value!r} in {text!r} is not an integer") from None
    if not 1 <= n <= MAX_SPLIT:
        raise ValueError(f"split threshold {n} in {text!r}: expected 1 to {MAX_SPLIT:,}")
    return n
