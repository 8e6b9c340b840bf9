"""The package's layers import downwards only, and no modules import each other in a cycle.

Every import is counted, also those inside functions (a lazy import is still a dependency).
docs/architecture.md explains the layers; this test keeps them true.
"""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"

#: Layer of each top-level part of ``app``: a module may import its own layer's parts (no
#: cycles) and lower layers, never a higher one.
LAYERS: dict[str, int] = {
    "geom": 0,
    "parallelism": 0,
    "kernel_cache": 0,
    "kernel_locator": 0,
    "kernel_cache_lock": 0,
    "kernel_cache_threads": 0,
    "kernel_cache_moved": 0,
    "suggest": 0,
    "spatial": 1,
    "culling": 2,
    "framelog": 2,
    "scene": 2,
    "plot": 3,
    "render": 3,
    "viewer": 4,
    "bench": 5,
    "cli": 6,
    "__main__": 7,
    "__init__": 0,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(APP.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    pkg = _module_name(path).split(".")
    if path.name != "__init__.py":
        pkg = pkg[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("app"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(pkg[: len(pkg) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if mod == "app" or mod.startswith("app."):
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in APP.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps = {d for d in _imports(path) if d in files and d != name}
        graph[name] = deps
    return graph


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_part_has_a_layer():
    parts = {_part(m) for m in _graph()}
    assert parts <= set(LAYERS), f"give these a layer in LAYERS: {sorted(parts - set(LAYERS))}"


def test_no_upward_imports():
    upward = []
    for mod, deps in _graph().items():
        for d in deps:
            if d == "app":  # the package's own __init__ (environment set-up) is below all
                continue
            if LAYERS[_part(d)] > LAYERS[_part(mod)]:
                upward.append(f"{mod} -> {d}")
    assert not upward, "imports that go up a layer:\n" + "\n".join(sorted(upward))


def test_no_import_cycles():
    graph = _graph()
    # A package's __init__ re-exporting its modules is not a cycle of meaning: skip edges
    # from a package to its own submodules.
    edges = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in graph.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(edges.get(m, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


SPATIAL = APP / "spatial"
#: Folders of ``spatial/`` that are shared code, not an index: the pair descent of a tree
#: snapshot, which the AABB trees and the view distance tree both build and call.
SHARED_PACKAGES = {"tree_pairs"}


def _index_package(module: str) -> str | None:
    """The index package of ``app.spatial`` a module belongs to (``aabbtree``, ``nested``
    ...), or None for the package itself and its shared modules and packages (storage,
    scans, pairs, :data:`SHARED_PACKAGES`)."""
    parts = module.split(".")
    if (len(parts) > 2 and parts[1] == "spatial" and (SPATIAL / parts[2]).is_dir()
            and parts[2] not in SHARED_PACKAGES):
        return parts[2]
    return None


def test_index_packages_import_no_other_index():
    """Inside ``spatial/`` an index package imports only the shared modules (storage, scans,
    pairs, the contract) and ``geom``, never another index package, and a shared module
    imports no index package: what two indexes share is a shared module of its own.
    ``app.spatial`` itself (the registry, which loads an index by name) is allowed: the
    nested index builds its inner indexes through it."""
    sideways = []
    for mod, deps in _graph().items():
        if not mod.startswith("app.spatial"):
            continue
        own = _index_package(mod)
        for d in deps:
            other = _index_package(d)
            if other is not None and other != own:
                sideways.append(f"{mod} -> {d}")
    assert not sideways, "imports between index packages of spatial/:\n" + "\n".join(
        sorted(sideways))


def test_named_tuple_class_names_are_unique():
    """numba caches argument types by a named tuple's class name: two classes of one name
    (two structures' ``Nodes``) made one index's every kernel call re-type its arguments in
    Python, 3x slower once the other index had run in the same process."""
    import importlib
    import inspect

    seen: dict[str, str] = {}
    clashes = []
    for name in sorted(_graph()):
        if ".viewer" in name or ".render" in name or name.endswith("__main__"):
            continue  # OpenGL layers: no compiled kernels take named tuples there
        mod = importlib.import_module(name)
        for _attr, obj in vars(mod).items():
            if (inspect.isclass(obj) and issubclass(obj, tuple) and hasattr(obj, "_fields")
                    and obj.__module__ == name):
                where = f"{name}.{obj.__qualname__}"
                if obj.__name__ in seen and seen[obj.__name__] != where:
                    clashes.append(f"{obj.__name__}: {seen[obj.__name__]} and {where}")
                seen.setdefault(obj.__name__, where)
    assert not clashes, "named tuples sharing a class name:\n" + "\n".join(clashes)


def test_named_tuple_classes_are_found_under_their_own_name():
    """numba's cache pickles argument types with cloudpickle, which pickles a class by value
    unless ``module.<class name>`` is that class: then every process unpickled a new class,
    missed its cached kernels and compiled them again (the AABB tree's ``Nodes`` bound under
    another name cost 20-40 s at every first query)."""
    import importlib
    import inspect

    lost = []
    for name in sorted(_graph()):
        if ".viewer" in name or ".render" in name or name.endswith("__main__"):
            continue
        mod = importlib.import_module(name)
        for attr, obj in vars(mod).items():
            if (inspect.isclass(obj) and issubclass(obj, tuple) and hasattr(obj, "_fields")
                    and obj.__module__ == name and getattr(mod, obj.__qualname__, None) is not obj):
                lost.append(f"{name}.{attr} is class {obj.__qualname__}")
    assert not lost, "named tuples not reachable by their class name:\n" + "\n".join(lost)
