"""Schemathesis drives every operation of the live aggregator's OpenAPI spec: never a 500."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import pytest
from conftest import ADMIN_TOKEN, BIN, ENV, Aggregator, until

pytestmark = pytest.mark.integration

# As the admin, so admin operations are fuzzed past their 401, and with a rate limit no fuzzer
# reaches, so every operation is fuzzed rather than answered 429.
HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
UNLIMITED = {"PLUMB_API__RATE_PER_S": "1000000", "PLUMB_API__BURST": "1000000"}
# Bounds the whole run (all phases); each operation still gets its examples first.
MAX_TIME_S = 45
EXAMPLES_PER_OPERATION = 20


@pytest.fixture
def aggregator(tmp_path):
    agg = Aggregator(tmp_path, extra_env=UNLIMITED).start()
    yield agg
    agg.stop()


def test_no_operation_answers_a_server_error(aggregator, start_agent, tmp_path):
    start_agent(aggregator, "fuzzed-node", "hgx-a100")  # so node routes reach real state
    until(lambda: aggregator.node("fuzzed-node"), what="node fuzzed-node")
    report = tmp_path / "schemathesis.xml"
    headers = [arg for name, value in HEADERS.items() for arg in ("-H", f"{name}: {value}")]
    result = subprocess.run(
        [
            str(BIN / "st"),
            "run",
            f"{aggregator.url}/openapi.json",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            str(EXAMPLES_PER_OPERATION),
            "--max-time",
            str(MAX_TIME_S),
            "--request-timeout",
            "30",
            # Hypothesis' own checks on its generator, not on the server: that examples stay
            # small (trips at random on list-valued query parameters), and that few are
            # filtered out (trips on a `{pool:path}` parameter, whose values hold slashes).
            "--suppress-health-check",
            "data_too_large,filter_too_much",
            "--report",
            "junit",
            "--report-junit-path",
            str(report),
            *headers,
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=MAX_TIME_S + 120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    # Schemathesis warns when operations answer only 401/403 or 429: then they were not fuzzed.
    for warning in ("Authentication failed", "Rate limited"):
        assert warning not in result.stdout, result.stdout[-3000:]
    cases = ET.parse(report).getroot().iter("testcase")
    tested = {case.get("name") for case in cases}
    # Reads and writes alike were exercised, node routes included.
    assert {"GET /v1/nodes/{name}", "POST /v1/bundles", "POST /v1/validations"} <= tested
    assert aggregator.get("/healthz").status_code == 200
