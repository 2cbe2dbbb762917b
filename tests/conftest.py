"""Run-wide test settings."""

import pytest
from hypothesis import HealthCheck, settings
from timeouts import scaled

# Two shared cores: data generation speed varies with load, which says nothing about the code.
settings.register_profile(
    "plumb", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=100
)
settings.load_profile("plumb")

# The slowest test takes under a minute (integration, `--durations`); one that hangs fails
# here with every thread's stack (pytest-timeout) instead of holding the run until CI ends it.
TEST_LIMIT_S = 120.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(scaled(TEST_LIMIT_S)))
