""""Did you mean ...?" for a mistyped name (a scene, an index, a key of a scene file)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, options: Iterable[str]) -> str:
    """``"did you mean 'city'?"`` for the option closest to ``word``, or ``""`` when none is
    close enough to be a typo of it."""
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


def with_hint(message: str, word: str, options: Iterable[str]) -> str:
    """``message`` followed by ``"; did you mean ...?"`` when a close option exists."""
    hint = did_you_mean(word, options)
    return f"{message}; {hint}" if hint else message
