"""Shared fixtures and hypothesis profiles."""

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
