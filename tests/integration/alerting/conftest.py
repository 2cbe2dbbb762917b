"""The alerting tests' fixtures: a real Prometheus (tests/integration/prom_fixture.py) on top of
the parent conftest's `aggregator` and `start_agent`."""

from prom_fixture import prometheus  # noqa: F401  (a fixture: imported to register it here)
