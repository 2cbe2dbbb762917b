"""Run-wide test settings."""

from hypothesis import HealthCheck, settings

# Two shared cores: data generation speed varies with load, which says nothing about the code.
settings.register_profile(
    "plumb", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=100
)
settings.load_profile("plumb")
