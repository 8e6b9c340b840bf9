"""The compiled-kernel cache: an edit of a module that a cached kernel calls must never leave
the old code running (numba alone stamps a kernel with its own file), and an edit that no
kernel is compiled from (another module, a docstring, a comment) must recompile nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app import kernel_cache

ROOT = Path(__file__).resolve().parents[1]

LIB = '"""The callee."""\n\nfrom numba import njit\n\n\n@njit(cache=True)\ndef value():\n' \
      '    return {}\n'
MAIN = textwrap.dedent("""\
    from numba import njit

    from kpkg.lib import value


    @njit(cache=True)
    def twice():
        return 2 * value()
    """)
OTHER = "LABEL = 'a HUD string'\n"
RUN = textwrap.dedent("""\
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {tmp!r})
    if {keyed!r}:
        from app.kernel_cache import configure
        configure(Path({pkg!r}))
    from kpkg.main import twice
    print(twice(), sum(twice.stats.cache_misses.values()))
    """)


def _package(tmp: Path) -> Path:
    pkg = tmp / "kpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "lib.py").write_text(LIB.format(1))
    (pkg / "main.py").write_text(MAIN)
    (pkg / "other.py").write_text(OTHER)
    return pkg


def _rewrite(path: Path, text: str) -> None:
    """Write ``text`` with a later modification time (coarse clocks cannot hide the edit)."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def _run(tmp: Path, pkg: Path, keyed: bool) -> tuple[int, int]:
    """(what the cached caller returns, how many kernels this run compiled)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env["NUMBA_CACHE_DIR"] = str(tmp / ("closure-cache" if keyed else "numba-cache"))
    code = RUN.format(root=str(ROOT), tmp=str(tmp), pkg=str(pkg), keyed=keyed)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    value, compiled = out.stdout.split()
    return int(value), int(compiled)


def test_an_edited_callee_is_compiled_again_into_its_cached_caller(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    assert _run(tmp_path, pkg, keyed=True) == (2, 1)
    assert _run(tmp_path, pkg, keyed=True) == (2, 0)  # loaded from the cache
    _rewrite(pkg / "lib.py", LIB.format(5))
    assert _run(tmp_path, pkg, keyed=True) == (10, 1)
    assert _run(tmp_path, pkg, keyed=True) == (10, 0)


def test_an_unrelated_edit_keeps_the_cache(tmp_path: Path) -> None:
    """Another module, the callee's docstring, a comment and blank lines that shift the
    kernels' line numbers: nothing is compiled again."""
    pkg = _package(tmp_path)
    assert _run(tmp_path, pkg, keyed=True) == (2, 1)
    _rewrite(pkg / "other.py", "LABEL = 'another HUD string, longer'\n")
    assert _run(tmp_path, pkg, keyed=True) == (2, 0)
    lib = LIB.format(1).replace('"""The callee."""', '"""The callee,\n\nnow documented."""')
    _rewrite(pkg / "lib.py", lib.replace("def value():", "def value():  # one\n\n"))
    _rewrite(pkg / "main.py", "# a comment\n\n\n" + MAIN)
    assert _run(tmp_path, pkg, keyed=True) == (2, 0)


def test_numba_alone_keeps_the_stale_caller(tmp_path: Path) -> None:
    """The trap the closure stamp removes: numba's own stamp runs the caller compiled against
    the old callee (if numba ever fixes this, the closure locator is no longer needed)."""
    pkg = _package(tmp_path)
    assert _run(tmp_path, pkg, keyed=False) == (2, 1)
    _rewrite(pkg / "lib.py", LIB.format(5))
    assert _run(tmp_path, pkg, keyed=False) == (2, 0)


def test_the_stamp_follows_imports_code_not_text(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    (pkg / "sub").mkdir()
    (pkg / "sub" / "__init__.py").write_text("from .deep import X\n")
    (pkg / "sub" / "deep.py").write_text("X = 1\n")
    (pkg / "uses_sub.py").write_text("from kpkg.sub import X\n")
    (pkg / "relative.py").write_text("from . import lib\nfrom .sub import deep\n")

    def stamps() -> dict[str, str]:
        g = kernel_cache.SourceGraph(pkg, memo=tmp_path / "memo.json")
        return {m: g.stamp(m) for m in ("kpkg.main", "kpkg.uses_sub", "kpkg.relative",
                                        "kpkg.other")}

    g = kernel_cache.SourceGraph(pkg)
    assert g.closure("kpkg.main") == ["kpkg.lib", "kpkg.main"]
    assert g.closure("kpkg.uses_sub") == ["kpkg.sub", "kpkg.sub.deep", "kpkg.uses_sub"]
    assert g.closure("kpkg.relative") == ["kpkg.lib", "kpkg.relative", "kpkg.sub.deep"]
    first = stamps()
    assert stamps() == first  # the memo gives the same answer as a parse
    _rewrite(pkg / "sub" / "deep.py", "X = 2\n")
    second = stamps()
    changed = {m for m in first if first[m] != second[m]}
    assert changed == {"kpkg.uses_sub", "kpkg.relative"}
    _rewrite(pkg / "sub" / "deep.py", '"""Deep."""\n\nX = 2  # two\n')
    assert stamps() == second


def _kernel_modules(graph: kernel_cache.SourceGraph) -> list[str]:
    return [m for m, p in graph._files.items() if "njit" in p.read_text()]


def test_no_kernel_of_the_package_is_compiled_from_the_viewer_bench_or_render() -> None:
    """What a kernel module imports, directly or not, is what its stamp covers: the viewer,
    the HUD and the other OpenGL passes, the bench, the command line must stay out of it."""
    graph = kernel_cache.SourceGraph(ROOT / "app")
    kernels = _kernel_modules(graph)
    assert len(kernels) > 20, kernels
    outside = ("app.viewer", "app.render", "app.bench", "app.cli", "app.plot", "app.framelog",
               "app.scene")
    for m in kernels:
        if m.startswith(outside):
            continue
        leaks = [d for d in graph.closure(m) if d.startswith(outside)]
        assert not leaks, f"{m}'s kernels would recompile when {leaks} change"


def test_an_installed_package_caches_in_the_user_cache_folder(tmp_path: Path,
                                                              monkeypatch) -> None:
    pkg = tmp_path / "site-packages" / "kpkg"
    pkg.mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.cache_base(pkg) == tmp_path / "xdg" / "cullview" / "numba"
    (tmp_path / "checkout" / "kpkg").mkdir(parents=True)
    (tmp_path / "checkout" / "pyproject.toml").write_text("")
    assert kernel_cache.cache_base(tmp_path / "checkout" / "kpkg") == \
        tmp_path / "checkout" / ".numba-cache"


def _numba_settings(env: dict[str, str]) -> tuple[str, str]:
    code = "import app, numba; print(numba.config.CACHE_DIR); " \
           "print(numba.config.CACHE_LOCATOR_CLASSES)"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    cache_dir, locators = out.stdout.strip().splitlines()
    return cache_dir, locators


@pytest.mark.parametrize("mine", [False, True])
def test_importing_app_configures_numba_unless_the_user_chose(tmp_path: Path,
                                                             mine: bool) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    if mine:
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "mine")
        env["NUMBA_CACHE_LOCATOR_CLASSES"] = "UserProvidedCacheLocator"
    cache_dir, locators = _numba_settings(env)
    if mine:
        assert (cache_dir, locators) == (str(tmp_path / "mine"), "UserProvidedCacheLocator")
    else:
        assert Path(cache_dir) == ROOT / ".numba-cache"
        assert locators.split(",")[0] == "app.kernel_locator.ClosureLocator"


def test_the_kernels_stamp_follows_the_kernel_modules_only(tmp_path: Path) -> None:
    """``python -m app warm --if-needed`` trusts this stamp: it must change with any kernel's
    closure, and stay when only modules without kernels change."""
    pkg = _package(tmp_path)

    def stamp() -> str:
        return kernel_cache.SourceGraph(pkg, memo=tmp_path / "memo.json").kernels_stamp()

    graph = kernel_cache.SourceGraph(pkg)
    assert graph.kernel_modules() == ["kpkg.lib", "kpkg.main"]
    first = stamp()
    _rewrite(pkg / "other.py", "LABEL = 'changed'\n")
    assert stamp() == first
    _rewrite(pkg / "lib.py", LIB.format(3))
    assert stamp() != first


TYPED_LIB = textwrap.dedent("""\
    from collections import namedtuple

    Pair = namedtuple("Pair", ["a", "b"])
    """)
TYPED_MAIN = textwrap.dedent("""\
    from numba import njit

    {imports}


    @njit(cache=True)
    def total(p):
        return p[0] + p[1]
    """)
TYPED_RUN = textwrap.dedent("""\
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {tmp!r})
    from app.kernel_cache import configure
    configure(Path({pkg!r}))
    from kpkg.main import total
    {call}
    print(int(r), sum(total.stats.cache_misses.values()))
    """)


def _call_total(tmp: Path, pkg: Path, call: str, prelude: str = ""
                ) -> subprocess.CompletedProcess:
    """A fresh process that configures the closure cache for ``pkg``, runs ``prelude``, then
    ``call`` on ``kpkg.main.total``, and prints its answer and the kernels it compiled."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env["NUMBA_CACHE_DIR"] = str(tmp / "closure-cache")
    run = TYPED_RUN.replace("from kpkg.main", prelude + "from kpkg.main")
    code = run.format(root=str(ROOT), tmp=str(tmp), pkg=str(pkg), call=call)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)


def _typed_run(tmp: Path, pkg: Path, with_pair: bool) -> tuple[int, int]:
    """(the kernel's answer, kernels compiled) for the version that passes a NamedTuple
    (``with_pair``) or the older one, which has no such class, a plain tuple instead."""
    main = TYPED_MAIN.format(imports="from kpkg.lib import Pair" if with_pair else "")
    _rewrite(pkg / "main.py", main)
    _rewrite(pkg / "lib.py", TYPED_LIB if with_pair else "")
    call = "from kpkg.lib import Pair; r = total(Pair(2, 3))" if with_pair else "r = total((2, 3))"
    out = _call_total(tmp, pkg, call)
    assert out.returncode == 0, out.stderr[-2000:]
    value, compiled = out.stdout.split()
    return int(value), int(compiled)


def test_switching_versions_never_reads_the_other_versions_index(tmp_path: Path) -> None:
    """An index written by a version whose kernels take a class the other version lacks
    (a branch switch, a worktree sharing the cache) is a file of its own: the other version
    compiles instead of failing to unpickle it, and switching back loads each one's kernels."""
    pkg = _package(tmp_path)
    assert _typed_run(tmp_path, pkg, with_pair=True) == (5, 1)
    assert _typed_run(tmp_path, pkg, with_pair=False) == (5, 1)
    assert _typed_run(tmp_path, pkg, with_pair=True) == (5, 0)
    assert _typed_run(tmp_path, pkg, with_pair=False) == (5, 0)


MOVED_MAIN = textwrap.dedent("""\
    from numba import njit


    @njit(cache=True)
    def total(p):
        return p[0] + p[1]
    """)


#: Lines that put numba's own index load back after the mends are installed.
NUMBA_ALONE = ("import app.kernel_locator, numba.core.caching as c\n"
               "c.IndexDataCacheFile._load_index = c.IndexDataCacheFile._load_index.__wrapped__\n")


def _moved_run(tmp: Path, pkg: Path, home: str, numba_alone: bool = False
               ) -> tuple[int, int, str]:
    """(the kernel's answer, kernels compiled, stderr's tail) for the version whose named
    tuple lives in ``kpkg/<home>.py``: a module the kernel's own does not import, so the
    kernel's stamp is the same in both versions. ``numba_alone``: without the mend."""
    for name in ("shapes", "forms"):
        (pkg / f"{name}.py").unlink(missing_ok=True)
    _rewrite(pkg / "main.py", MOVED_MAIN)
    (pkg / f"{home}.py").write_text(TYPED_LIB)
    out = _call_total(tmp, pkg, f"from kpkg.{home} import Pair; r = total(Pair(2, 3))",
                      NUMBA_ALONE if numba_alone else "")
    if out.returncode != 0:
        return -1, -1, out.stderr[-300:]
    value, compiled = out.stdout.split()
    return int(value), int(compiled), ""


def test_an_argument_class_that_moved_module_is_compiled_again_not_an_error(
        tmp_path: Path) -> None:
    """A kernel's index pickles its argument types; when such a class moves to another
    module that the kernel's module never imported (the AABB tree's node pool, taken by
    ``blocks``' kernels, moved out of ``kernels.py``), the stamp stays and numba alone
    fails to unpickle the old index (ModuleNotFoundError at the first call). With the
    mend the kernel compiles again, and the next run loads the new entry."""
    pkg = _package(tmp_path)
    assert _moved_run(tmp_path, pkg, "shapes") == (5, 1, "")
    assert _moved_run(tmp_path, pkg, "shapes") == (5, 0, "")
    assert _moved_run(tmp_path, pkg, "forms") == (5, 1, "")
    assert _moved_run(tmp_path, pkg, "forms") == (5, 0, "")


def test_numba_alone_fails_on_the_moved_class(tmp_path: Path) -> None:
    """The case above without the mend: numba's own index load raises (so the test above
    can fail)."""
    pkg = _package(tmp_path)
    assert _moved_run(tmp_path, pkg, "shapes") == (5, 1, "")
    value, _, err = _moved_run(tmp_path, pkg, "forms", numba_alone=True)
    assert value == -1 and "No module named 'kpkg.shapes'" in err, err


def test_stale_versions_cache_files_are_pruned_after_a_week(tmp_path: Path,
                                                           monkeypatch) -> None:
    """Files of another stamp untouched for STALE_AFTER_S go; this stamp's files and recent
    ones of other stamps stay (another branch may still use them)."""
    from app import kernel_locator as kl

    folder = tmp_path / "app" / "mod"
    folder.mkdir(parents=True)
    loc = kl.ClosureLocator.__new__(kl.ClosureLocator)
    loc._stamp, loc._cache_path = "a" * 32, str(folder)
    names = {"mine": f"f-{'a' * 16}.py311.nbi", "mine_data": f"f-{'a' * 16}.py311.1.nbc",
             "old": f"f-{'b' * 16}.py311.nbi", "old_data": f"f-{'b' * 16}.py311.1.nbc",
             "old_lock": f"f-{'b' * 16}.py311.nbi.lock",
             "recent": f"f-{'c' * 16}.py311.nbi", "other": "notes.txt"}
    now = 10 * kl.STALE_AFTER_S
    for key, name in names.items():
        (folder / name).write_text(key)
        age = 2 * kl.STALE_AFTER_S if key != "recent" else kl.STALE_AFTER_S / 2
        os.utime(folder / name, (now - age, now - age))
    monkeypatch.setattr(kl, "_PRUNED", set())
    loc.prune_stale(now=now)
    left = {p.name for p in folder.iterdir()}
    assert left == {names[k] for k in ("mine", "mine_data", "recent", "other")}


def test_a_tree_removal_compiles_once_not_in_every_process() -> None:
    """Kernels take no function as an argument: numba types one by its dispatcher object,
    new in every process, so such a kernel missed the cache and was compiled again (and
    added to it) by every process (remove_objects did, about 0.6 s a process)."""
    code = textwrap.dedent("""\
        import numpy as np
        from app.spatial import create_index
        from app.spatial.aabbtree import entry as en
        from app.spatial.aabbtree.batches import remove_objects
        for mode in ("ours", "paper"):
            idx = create_index("octree", leafy=True, mode=mode)
            idx.insert(np.arange(50), np.random.default_rng(0).uniform(0, 9, (50, 3)),
                       np.ones(50))
            idx.remove(np.arange(20))
        print(sum(remove_objects.stats.cache_misses.values())
              + sum(en.remove_objects.stats.cache_misses.values()))
        """)
    runs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, timeout=300, check=True) for _ in range(2)]
    assert runs[1].stdout.strip() == "0", runs[1].stdout + runs[1].stderr
