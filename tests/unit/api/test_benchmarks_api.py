"""POST /v1/benchmarks on the real app: an admin attaches a nccl-tests log, the run is stored
and listed; bad input gets a {code, message, hint} answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from plumb.aggregator.api import create_app
from plumb.aggregator.process import open_process
from plumb.aggregator.settings import AggregatorSettings
from plumb.facts import Reading, content_hash

REAL = Path(__file__).parents[2] / "data" / "real" / "nccl-tests"
ADMIN, READ = "admin-token-0123456789", "read-token-0123456789"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ops admin {ADMIN}\nci read {READ}\n")
    settings = AggregatorSettings(
        db=f"sqlite:///{tmp_path / 'plumb.db'}",
        api={"tokens_file": tokens, "rate_per_s": 1000, "burst": 1000},
    )
    process = await open_process(settings)
    facts = {"gpus[0].index": Reading.ok(0), "gpus[0].name": Reading.ok("NVIDIA H200")}
    for name in ("nccl-test-dranet-1gpu-1nic-worker-0", "nccl-test-dranet-1gpu-1nic-worker-1"):
        assert process.intake.report(name, 1, facts, content_hash(facts))
    transport = httpx.ASGITransport(app=create_app(process.core))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c
    process.store.close()


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_an_attached_run_is_stored_listed_and_readable_as_a_validation(client):
    log = (REAL / "dranet_h200_2x1_mpi_noise.txt").read_text()
    resp = await client.post("/v1/benchmarks", json={"log": log}, headers=_auth(ADMIN))
    assert resp.status_code == 201, resp.text
    (run,) = resp.json()
    assert run["state"] == "finished" and run["result"] == "passed"
    assert run["nodes"] == [
        "nccl-test-dranet-1gpu-1nic-worker-0",
        "nccl-test-dranet-1gpu-1nic-worker-1",
    ]
    assert {(r["check"], r["status"], r["value"]) for r in run["results"]} == {
        ("nccl-allreduce", "pass", 31.89)
    }
    listed = (await client.get("/v1/benchmarks", headers=_auth(READ))).json()
    assert [r["id"] for r in listed] == [run["id"]]
    stored = await client.get(f"/v1/validations/{run['id']}", headers=_auth(READ))
    assert stored.status_code == 200 and stored.json()["result"] == "passed"


async def test_the_read_scope_may_not_attach_and_bad_logs_are_explained(client):
    body = {"log": (REAL / "schmaustech_l40s_2x2.txt").read_text()}
    resp = await client.post("/v1/benchmarks", json=body, headers=_auth(READ))
    assert resp.status_code == 403
    resp = await client.post("/v1/benchmarks", json=body, headers=_auth(ADMIN))
    assert resp.status_code == 400
    err = resp.json()
    assert err["code"] == "invalid_input" and "nvidiatools-29-workload" in err["message"]
    assert err["hint"]
    resp = await client.post("/v1/benchmarks", json={"log": ""}, headers=_auth(ADMIN))
    assert resp.status_code == 400 and resp.json()["code"] == "invalid_input"
