"""One setting scales every wait of the test suite: PLUMB_TEST_TIMEOUT_SCALE (default 1).

A slow or loaded machine (CI shares its cores) needs longer waits, not other tests; a wait
that is too short fails for the wrong reason, so `.ci/run` raises the scale.
"""

from __future__ import annotations

import os

SCALE = float(os.environ.get("PLUMB_TEST_TIMEOUT_SCALE", "1"))


def scaled(seconds: float) -> float:
    """`seconds` times the suite's scale."""
    return seconds * SCALE
