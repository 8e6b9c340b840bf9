"""Shared fixtures, hypothesis profiles and the two tiers of the suite.

``./scripts/test.sh`` runs the everyday tier: everything but the tests marked ``thorough``.
``./scripts/test.sh --thorough`` (``pytest --thorough``) runs every test, with hypothesis's
thorough profile (400 examples a property instead of 25): every cold-compile case in its own
process, the benchmarks' full smoke runs. Run it before a release.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

# The everyday tier draws the same examples every run (derandomize): a property that fails
# on one rare draw in a hundred runs would otherwise block whoever meets it; the thorough
# tier explores new examples every run.
settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile(
    "dev", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--thorough", action="store_true",
                     help="run the thorough tier too (tests marked thorough, hypothesis's "
                          "thorough profile)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "thorough: only in the thorough tier (--thorough)")
    if config.getoption("--thorough") and not os.environ.get("HYPOTHESIS_PROFILE"):
        settings.load_profile("thorough")


#: Tests that take minutes: started first, so that a worker begins them at once while the
#: other worker takes the rest, instead of one of them starting last and running alone.
LONG_FIRST = ("tests/test_cold_compile.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave the thorough tier out unless asked for (reported as deselected, not skipped);
    put the long tests first."""
    if not config.getoption("--thorough"):
        keep, drop = [], []
        for item in items:
            (drop if item.get_closest_marker("thorough") else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))  # stable


def _whole_suite(config: pytest.Config) -> bool:
    """The suite was asked for as a whole (no files, -k or -m chosen): it will run the
    cold-compile test."""
    opt = config.option
    return not (opt.file_or_dir or opt.keyword or opt.markexpr)


def pytest_sessionstart(session: pytest.Session) -> None:
    """On a fresh clone (the suite's kernel cache is empty), run the cold-compile check into
    that cache before the workers start (see ``tests/cold_start.py``); its test judges it."""
    config = session.config
    if hasattr(config, "workerinput") or not _whole_suite(config):
        return
    from tests.cold_start import is_empty, run_cold, suite_cache

    cache = suite_cache()
    if cache is None or not is_empty(cache):
        return
    say = config.pluginmanager.get_plugin("terminalreporter")
    line = say.write_line if say is not None else print
    line(f"the kernel cache {cache} is empty: the cold-compile check compiles every index "
         "kind into it first, in one process (about two minutes; the tests then load them)")
    config.cold_compile = run_cold(cache)
    took = config.cold_compile["kinds"]["seconds"] + (
        config.cold_compile["nested"] or {"seconds": 0.0})["seconds"]
    line(f"cold-compile check done in {took:.0f} s")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist: hand the session start's cold-compile result to every worker."""
    node.workerinput["cold_compile"] = getattr(node.config, "cold_compile", None)


@pytest.fixture(scope="module")
def ctx():
    """A headless EGL context for the tests that drive the viewer (skips without EGL)."""
    try:
        from app.render.context import create_headless_context

        c = create_headless_context()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no headless EGL context: {exc}")
    yield c
    c.release()
