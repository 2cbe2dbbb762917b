"""Validation on a schedule: a conformance phase runs on its own, stored like any run."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta

from conftest import BIN, ENV, Aggregator, free_port, scrape, until
from timeouts import scaled


def test_a_scheduled_conformance_run_happens_on_its_own(tmp_path, start_agent):
    # Slots every minute from a time of day that has passed by the time the aggregator is up:
    # the next slot of the series runs (not tomorrow's), and one that comes before the agent
    # connected finds no node and counts `no_nodes`. Nobody asks for a run here.
    first = (datetime.now(UTC) - timedelta(seconds=10)).time().replace(microsecond=0)
    schedule = [{"phase": "conformance", "every_s": 60, "at": first.isoformat()}]
    agg = Aggregator(tmp_path, extra_env={"PLUMB_VALIDATION__SCHEDULE": json.dumps(schedule)})
    agg.start()
    try:
        start_agent(agg, "h100-0", "dgx-h100")
        until(lambda: agg.node("h100-0") and agg.node("h100-0")["connected"], what="the node")

        (run, *_) = until(
            lambda: (
                (runs := agg.json("/v1/validations")) and runs[0]["state"] == "finished" and runs
            ),
            timeout=90,
            what="the scheduled run finished",
        )
        assert run["phases"] == ["conformance"] and run["nodes"] == ["h100-0"]
        slots = {
            (labels["phase"], labels["outcome"]): value
            for name, labels, value in scrape(agg)
            if name == "plumb_validation_scheduled_total"
        }
        assert slots[("conformance", "started")] >= 1
        assert set(slots) <= {("conformance", o) for o in ("started", "no_nodes", "overlap")}
    finally:
        agg.stop()


def test_a_schedule_naming_an_unknown_phase_stops_start_up(tmp_path):
    schedule = json.dumps([{"phase": "conformace", "every_s": 3600}])
    argv = [str(BIN / "plumb"), "serve", "--db", f"sqlite:///{tmp_path}/plumb.db",
            "--http-listen", f"127.0.0.1:{free_port()}", "--grpc-listen",
            f"127.0.0.1:{free_port()}"]  # fmt: skip
    env = {**ENV, "PLUMB_VALIDATION__SCHEDULE": schedule}
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=scaled(60))
    assert result.returncode == 2, result.stderr  # invalid_input (aggregator/errors.py STATUS)
    assert "unknown phase(s) ['conformace']" in result.stderr
