"""GET /v1/baselines and the straggler and regression findings on the real app: runs stored
through the validator, nodes through the intake, findings read back over HTTP and /metrics."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from plumb.aggregator.api import create_app
from plumb.aggregator.process import Process, open_process
from plumb.aggregator.settings import AggregatorSettings
from plumb.aggregator.validation import CheckResult, PlannedCheck, ValidationRun
from plumb.aggregator.validation.stack import stack_of
from plumb.facts import Reading, content_hash

READ = "read-token-0123456789"
NODES = ("h1", "h2", "h3", "h4", "h5")
CHECK = PlannedCheck("nccl-allreduce", "performance", "critical", "agent")


def _facts(node: str, nccl: str) -> dict[str, Reading]:
    out = {
        "driver.driver_version": Reading.ok("580.173.02"),
        "driver.fabric_manager_version": Reading.ok("580.173.02"),
        "nccl.libraries[0].version": Reading.ok(nccl),
    }
    for i in range(8):
        out |= {
            f"gpus[{i}].index": Reading.ok(i),
            f"gpus[{i}].name": Reading.ok("NVIDIA H100 80GB HBM3"),
            f"gpus[{i}].pci_device_id": Reading.ok("0x2330"),
            f"gpus[{i}].uuid": Reading.ok(f"GPU-{node}-{i}"),
        }
    return out


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[tuple[Process, httpx.AsyncClient]]:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ci read {READ}\n")
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}",
        api={"tokens_file": tokens, "rate_per_s": 1000, "burst": 1000},
    )
    process = await open_process(settings)
    writer = asyncio.create_task(process.writer.run())
    for node in NODES:
        facts = _facts(node, "2.27.7")
        assert process.intake.report(node, 1, facts, content_hash(facts))
    transport = httpx.ASGITransport(app=create_app(process.core))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://t", headers={"Authorization": f"Bearer {READ}"}
    ) as client:
        yield process, client
    writer.cancel()
    await asyncio.gather(writer, return_exceptions=True)
    process.store.close()


async def _run(process: Process, figures: dict[str, float]) -> None:
    """One finished nccl-allreduce run with these figures, stored like an agent's results."""
    now = datetime.now(UTC)
    results = {}
    for node, value in figures.items():
        stack = stack_of(process.core.node(node).facts, process.core.catalog)
        results[(node, CHECK.id)] = CheckResult(
            node, CHECK.id, "performance", "critical", "pass", "m", value, "GB/s",
            finished_at=now, stack=stack,
        )  # fmt: skip
    run = ValidationRun(uuid.uuid4().hex, ("performance",), (CHECK,), tuple(figures), now, 60.0)
    run.results, run.finished_at = results, now
    await process.core.validator.attach(run)


async def test_a_node_20_percent_under_its_twins_gets_a_straggler_finding(fleet):
    process, client = fleet
    await _run(process, {"h1": 460, "h2": 450, "h3": 470, "h4": 455, "h5": 368})
    # 368 450 455 460 470: median 455, deviations 87 5 0 5 15 -> median absolute deviation 5
    assert (await client.get("/v1/baselines")).json() == [
        {
            "model": "H100 SXM5",
            "gpus": 8,
            "fabric": "nvswitch",
            "check": "nccl-allreduce",
            "unit": "GB/s",
            "twins": 5,
            "median": 455.0,
            "spread": 5.0,
        }
    ]
    (finding,) = (await client.get("/v1/drift", params={"kind": "straggler"})).json()
    assert (finding["node"], finding["component"], finding["severity"]) == (
        "h5",
        "nccl-allreduce",
        "warning",
    )
    # h5's twins 450 455 460 470: median 457.5; 368 / 457.5 -> 20 % under
    assert finding["observed"].startswith("368 GB/s, 20% under the median 457.5 GB/s of its 4")
    metrics = b"".join(process.core.metrics_page()).decode()
    assert any(
        'node="h5"' in line and 'kind="straggler"' in line
        for line in metrics.splitlines()
        if line.startswith("plumb_node_drift{")
    )
    stored = await client.get("/v1/drift", params={"kind": "straggler", "include_closed": "true"})
    assert [f["node"] for f in stored.json()] == ["h5"]


async def test_a_pool_stepping_down_after_an_nccl_upgrade_names_the_upgrade(fleet):
    process, client = fleet
    await _run(process, {"h1": 460, "h2": 460, "h3": 460, "h4": 460, "h5": 460})
    assert (await client.get("/v1/drift", params={"kind": "regression"})).json() == []
    for node in NODES:
        facts = _facts(node, "2.28.3")
        assert process.intake.report(node, 2, facts, content_hash(facts))
    await _run(process, {"h1": 377, "h2": 377, "h3": 377, "h4": 377, "h5": 460})
    found = (await client.get("/v1/drift", params={"kind": "regression"})).json()
    # 1 - 377/460 = 0.18 on h1..h4; h5 held its figure
    assert [f["node"] for f in found] == ["h1", "h2", "h3", "h4"]
    assert all(
        "(−18%)" in f["observed"]
        and f["observed"].endswith("after nccl.libraries[*].version 2.27.7 → 2.28.3")
        and f["expected"].startswith("460 GB/s as at ")
        for f in found
    )
    # h5 now measures 22 % over its twins' median 377: fast is no straggler
    assert (await client.get("/v1/drift", params={"kind": "straggler"})).json() == []
