"""Where numba keeps the compiled kernels, and when a cached kernel is stale.

numba stamps a cached kernel with its own file only, yet it compiles every kernel it calls,
from any module, into that kernel: an edit of ``app/spatial/scan.py`` would leave every index's
cached traversal running the old scan. Throwing the whole cache away on any edit (as this
module once did) is safe but makes an edit of a HUD string recompile every kernel.

So a kernel's stamp is its **module's import closure inside the package**: the module and
every package module it imports, directly or through others, each hashed on its code with
docstrings and comments left out (the AST, not the text). A kernel can only call what its
module imports, so an edit of a module it calls into changes its stamp, and an edit of the
viewer, the HUD, the bench or a docstring changes no kernel's stamp. numba checks the stamp
when it loads the kernel's cache index (``app/kernel_locator.py`` is the numba side).

This module stays free of numba so that ``import app`` and ``--help`` stay instant.
A user's own ``NUMBA_CACHE_DIR`` and ``NUMBA_CACHE_LOCATOR_CLASSES`` win.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent

#: The packages whose kernels are stamped on their import closure (``configure`` adds to it).
PACKAGES: list[Path] = []

#: numba's locator setting: :class:`app.kernel_locator.ClosureLocator` for the package's
#: kernels, then numba's own locators (in numba's order) for anyone else's.
LOCATOR = ("app.kernel_locator.ClosureLocator,UserProvidedCacheLocator,InTreeCacheLocator,"
           "UserWideCacheLocator,IPythonCacheLocator,ZipCacheLocator")

#: What each module's facts are remembered under, next to the compiled kernels.
MEMO_NAME = "module-facts.json"


def cache_base(package: Path) -> Path:
    """The cache folder: ``.numba-cache`` beside the package in a writable checkout (a
    ``pyproject.toml`` beside it), else the user's cache folder (an installed package)."""
    root = package.parent
    if (root / "pyproject.toml").is_file() and os.access(root, os.W_OK):
        return root / ".numba-cache"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "cullview" / "numba"


# ---------------------------------------------------------------------------- module facts


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    """Drop the docstring of the module and of every class and function (they compile to
    nothing a kernel runs)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _imported_names(tree: ast.AST, modname: str, is_package: bool) -> list[str]:
    """Every absolute module name an import statement of the module names; ``from X import
    name`` gives ``X.name``, which resolves to the submodule or else to ``X`` itself."""
    names: list[str] = []
    here = modname.split(".") if is_package else modname.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = here[:len(here) - (node.level - 1)] if node.level > 1 else here
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.extend(f"{base}.{alias.name}" if alias.name != "*" else base
                         for alias in node.names)
    return names


def module_facts(path: Path, modname: str) -> tuple[str, list[str]]:
    """(digest of the module's code without docstrings or comments, the module names it
    imports). Line numbers are left out too: a shifted function compiles to the same code."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    names = _imported_names(tree, modname, path.name == "__init__.py")
    digest = hashlib.blake2b(ast.dump(_strip_docstrings(tree)).encode(), digest_size=16)
    return digest.hexdigest(), sorted(set(names))


class SourceGraph:
    """The modules of one package, their code digests and their imports inside the package.

    Facts are parsed once per file state and remembered in ``memo`` (a JSON file keyed on each
    file's size and modification time), so a process that loads cached kernels stats files
    instead of parsing them.
    """

    def __init__(self, package: Path, memo: Path | None = None) -> None:
        self.package = package.resolve()
        self.root = self.package.name
        self.memo = memo
        self._files: dict[str, Path] = {}
        for path in sorted(self.package.rglob("*.py")):
            rel = path.relative_to(self.package.parent).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            self._files[".".join(parts)] = path
        self._known: dict[str, list] = self._load_memo()
        self._dirty = False
        self._facts: dict[str, tuple[str, list[str]]] = {}
        self._stamps: dict[str, str] = {}

    def module_of(self, path: str | Path) -> str | None:
        """The module name of a file of the package, or None for a file elsewhere."""
        p = Path(path).resolve()
        try:
            p.relative_to(self.package)
        except ValueError:
            return None
        return next((m for m, f in self._files.items() if f == p), None)

    def _load_memo(self) -> dict[str, list]:
        if self.memo is None:
            return {}
        try:
            data = json.loads(self.memo.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save_memo(self) -> None:
        """Write the remembered facts (atomically; another process may write them too)."""
        if self.memo is None or not self._dirty:
            return
        tmp = self.memo.with_name(f"{self.memo.name}.{os.getpid()}.tmp")
        with contextlib.suppress(OSError):
            self.memo.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self._known))
            os.replace(tmp, self.memo)
            self._dirty = False

    def _known_facts(self, modname: str) -> tuple[str, list[str]]:
        """(code digest, every module name imported) from the memo, or parsed anew."""
        path = self._files[modname]
        st = path.stat()
        key = str(path.relative_to(self.package.parent))
        known = self._known.get(key)
        if known and known[0] == st.st_size and known[1] == st.st_mtime_ns:
            return known[2], known[3]
        digest, names = module_facts(path, modname)
        self._known[key] = [st.st_size, st.st_mtime_ns, digest, names]
        self._dirty = True
        return digest, names

    def facts(self, modname: str) -> tuple[str, list[str]]:
        """(code digest, package modules imported) of one module."""
        if modname in self._facts:
            return self._facts[modname]
        digest, names = self._known_facts(modname)
        deps = sorted({d for d in (self._resolve(n) for n in names) if d and d != modname})
        self._facts[modname] = (digest, deps)
        return digest, deps

    def kernel_modules(self) -> list[str]:
        """The modules that import numba: the only ones that can hold cached kernels."""
        return [m for m in self._files
                if any(n == "numba" or n.startswith("numba.") for n in self._known_facts(m)[1])]

    def kernels_stamp(self) -> str:
        """One digest of every kernel module's stamp: it changes exactly when some cached
        kernel would be compiled again (``python -m app warm`` keys its stamp on it)."""
        h = hashlib.blake2b(digest_size=8)
        for m in self.kernel_modules():
            h.update(f"{m}\0{self.stamp(m)}\n".encode())
        self._save_memo()
        return h.hexdigest()

    def _resolve(self, name: str) -> str | None:
        """The package module an imported name stands for: the module itself, or for
        ``from pkg import attr`` the package ``pkg`` (its ``__init__``)."""
        if name != self.root and not name.startswith(self.root + "."):
            return None
        while name and name not in self._files:
            name = name.rpartition(".")[0]
        return name or None

    def closure(self, modname: str) -> list[str]:
        """The module and every package module it imports, directly or through others."""
        seen = {modname}
        todo = [modname]
        while todo:
            for dep in self.facts(todo.pop())[1]:
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        self._save_memo()
        return sorted(seen)

    def stamp(self, modname: str) -> str:
        """The stamp of every kernel of ``modname``: a digest of its import closure's code."""
        if modname not in self._stamps:
            h = hashlib.blake2b(digest_size=16)
            for m in self.closure(modname):
                h.update(f"{m}\0{self.facts(m)[0]}\n".encode())
            self._stamps[modname] = h.hexdigest()
        return self._stamps[modname]


_GRAPHS: dict[Path, SourceGraph] = {}


def graph_for(path: str | Path) -> tuple[SourceGraph, str] | None:
    """The source graph of the configured package that holds ``path`` and its module name
    there, or None when the file belongs to no configured package."""
    for package in PACKAGES:
        graph = _GRAPHS.get(package)
        if graph is None:
            cache = os.environ.get("NUMBA_CACHE_DIR")
            memo = Path(cache) / MEMO_NAME if cache else None
            graph = _GRAPHS[package] = SourceGraph(package, memo)
        modname = graph.module_of(path)
        if modname is not None:
            return graph, modname
    return None


# ---------------------------------------------------------------------------- numba's settings


_OLD_STATE = re.compile(r"[0-9a-f]{16}")


def _drop_old_states(base: Path) -> None:
    """Delete the per-source-state folders the earlier scheme left (16 hex digits each)."""
    with contextlib.suppress(OSError):
        for p in base.iterdir():
            if p.is_dir() and _OLD_STATE.fullmatch(p.name):
                shutil.rmtree(p, ignore_errors=True)


def configure(package: Path = PACKAGE) -> None:
    """Point numba at the cache folder (unless ``NUMBA_CACHE_DIR`` is set) and at the closure
    locator for ``package``'s kernels (unless ``NUMBA_CACHE_LOCATOR_CLASSES`` is set).
    Called by ``app/__init__.py`` before any kernel is compiled; works after ``import numba``
    too (numba reads both settings when a kernel is decorated)."""
    package = package.resolve()
    if package not in PACKAGES:
        PACKAGES.append(package)
    if not os.environ.get("NUMBA_CACHE_DIR"):
        base = cache_base(package)
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError:  # nowhere writable: numba's own default folders
            base = None
        if base is not None:
            _drop_old_states(base)
            os.environ["NUMBA_CACHE_DIR"] = str(base)
    if not os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES"):
        os.environ["NUMBA_CACHE_LOCATOR_CLASSES"] = LOCATOR
    config = sys.modules.get("numba.core.config")
    if config is not None:
        config.CACHE_DIR = os.environ.get("NUMBA_CACHE_DIR", config.CACHE_DIR)
        config.CACHE_LOCATOR_CLASSES = os.environ["NUMBA_CACHE_LOCATOR_CLASSES"]
