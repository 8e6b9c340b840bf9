"""Shared fixtures, hypothesis profiles and the two tiers of the suite.

``./scripts/test.sh`` runs the everyday tier: everything but the tests marked ``thorough``.
``./scripts/test.sh --thorough`` (``pytest --thorough``) runs every test, with hypothesis's
thorough profile (400 examples a property instead of 25): every cold-compile case in its own
process, the benchmarks' full smoke runs. Run it before a release.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
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
