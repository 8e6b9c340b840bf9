"""Compiled kernels take records, not long lists of arrays (issue 26): no ``@njit`` / ``@jit``
function takes more than MAX_PARAMS parameters unless a comment right above it (or above its
decorators) starts with ``# many parameters:`` and gives the measured cost that keeps it so.

A record (a NamedTuple of arrays) is the parameter and its arrays are taken into locals once
at the top (``aabbtree/split.py:split_node``, docs/architecture.md on reference counting).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
MAX_PARAMS = 12
REASON = "# many parameters:"

#: Kernels over the limit that are still to be converted (issue 26, item 4), as
#: "path:function". Nothing may be added here: convert a new kernel, or give the reason in a
#: comment. Remove an entry when its kernel is converted.
NOT_YET_CONVERTED = frozenset({
})


def _compiled(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def _params(fn: ast.FunctionDef) -> int:
    a = fn.args
    return (len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None)
            + (a.kwarg is not None))


def _reason_above(lines: list[str], fn: ast.FunctionDef) -> str:
    """The ``# many parameters:`` comment block right above the function's first decorator."""
    first = min([fn.lineno] + [d.lineno for d in fn.decorator_list]) - 1  # 0-based
    block = []
    i = first - 1
    while i >= 0 and lines[i].lstrip().startswith("#"):
        block.insert(0, lines[i].strip())
        i -= 1
    text = " ".join(block)
    return text[text.index(REASON):] if REASON in text else ""


def long_kernels() -> list[tuple[str, int, str]]:
    """(path:function, parameters, reason comment) of every compiled function over the limit."""
    out = []
    for path in sorted(APP.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, ast.FunctionDef) and _compiled(node) and (
                    _params(node) > MAX_PARAMS):
                where = f"{path.relative_to(APP).as_posix()}:{node.name}"
                out.append((where, _params(node), _reason_above(lines, node)))
    return out


def test_no_new_kernel_with_a_long_parameter_list():
    bad = [f"{where} ({n} parameters)" for where, n, reason in long_kernels()
           if where not in NOT_YET_CONVERTED and not re.search(r"\d", reason)]
    assert not bad, (
        f"compiled functions with more than {MAX_PARAMS} parameters: pass a record (a "
        f"NamedTuple of arrays, taken into locals at the top), or say why not in a comment "
        f"above it starting '{REASON}' with the measured cost:\n" + "\n".join(bad))


def test_the_scan_sees_parameters_and_reasons(tmp_path, monkeypatch):
    """The scan counts every kind of parameter and reads the reason above the decorators."""
    pkg = tmp_path / "app"
    pkg.mkdir()
    args = ", ".join(f"a{i}" for i in range(12))
    (pkg / "k.py").write_text(
        "from numba import njit\n\n"
        f"@njit(cache=True)\ndef ok({args}):\n    pass\n\n"
        f"@njit\ndef long({args}, *, b=1):\n    pass\n\n"
        f"# many parameters: a record here cost 12 % (measured)\n@njit(cache=True)\n"
        f"def kept({args}, c):\n    pass\n\n"
        f"def plain({args}, d):\n    pass\n")
    monkeypatch.setattr(sys.modules[__name__], "APP", pkg)
    found = {where: (n, reason) for where, n, reason in long_kernels()}
    assert set(found) == {"k.py:long", "k.py:kept"}
    assert found["k.py:long"] == (13, "")
    assert found["k.py:kept"][1].startswith(REASON) and "12 %" in found["k.py:kept"][1]
