"""The routes are thin: over a fake Core that answers with typed values, each route only
renders them in the API's one shape (api/models.py), and errors in the `{code, message,
hint, request_id}` shape. A route that needs more than this fake has found leaked logic."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from plumb.aggregator.api import create_app
from plumb.aggregator.api.models import NodeOut
from plumb.aggregator.core import NodeRow, Overview
from plumb.aggregator.drift import DriftFinding
from plumb.aggregator.errors import NotFound
from plumb.aggregator.settings import AggregatorSettings
from plumb.aggregator.state.live import NodeState, NodeSummary
from plumb.facts import Reading

AT = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def _node() -> NodeState:
    node = NodeState(name="gpu-7", first_seen_at=AT, last_report_at=AT, connected=True)
    node.facts = {
        "driver.driver_version": Reading.ok("580.173.02"),
        "gpus[0].index": Reading.ok(0),
        "gpus[0].name": Reading.ok("NVIDIA L4"),
    }
    return node


FINDING = DriftFinding(
    id="f1",
    node="gpu-7",
    kind="constraint",
    component="driver-minimum",
    expected="driver.version >= 580",
    observed="550.163.01",
    severity="critical",
    remediation="upgrade the driver",
    recipe_hash="ab" * 32,
    opened_at=AT,
    closed_at=None,
)


class FakeCore:
    """What the node and drift routes ask of the Core, and nothing else."""

    settings = AggregatorSettings(api={"anonymous_read": True})

    def __init__(self) -> None:
        self.node_ = _node()

    def node_rows(self, *, pool=None, drifted=None) -> list[NodeRow]:
        return [NodeRow(NodeOut.of(self.overview(self.node_)).model_dump(mode="json"))]

    def overview(self, node: NodeState) -> Overview:
        return Overview(NodeSummary.of(node), "gke/l4/cos/any/any", None, None, {"critical": 1})

    def node(self, name: str) -> NodeState:
        if name != self.node_.name:
            raise NotFound(f"no node named {name!r}", hint="`plumb nodes` lists the known nodes")
        return self.node_

    def open_findings(self, **filters) -> list[DriftFinding]:
        return [FINDING]


@pytest.fixture
async def client():
    app = create_app(FakeCore())  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


async def test_a_node_list_is_the_cores_rows_in_the_api_shape(client):
    (row,) = (await client.get("/v1/nodes")).json()
    assert row["name"] == "gpu-7" and row["connected"] is True
    assert row["driver_version"] == "580.173.02" and row["gpu_product"] == "NVIDIA L4"
    assert row["pool"] == "gke/l4/cos/any/any"
    assert row["findings"] == {"critical": 1} and row["drifted"] is True
    assert row["last_report_at"] == "2026-12-01T03:00:00Z"


async def test_a_node_detail_nests_its_facts(client):
    body = (await client.get("/v1/nodes/gpu-7")).json()
    assert body["facts"]["driver"]["driver_version"] == {"status": "ok", "value": "580.173.02"}
    assert body["facts"]["gpus"][0]["name"]["value"] == "NVIDIA L4"


async def test_findings_are_rendered_as_the_core_gave_them(client):
    (f,) = (await client.get("/v1/drift")).json()
    assert (f["component"], f["severity"], f["observed"]) == (
        "driver-minimum",
        "critical",
        "550.163.01",
    )


async def test_an_unknown_node_is_a_404_in_the_error_shape(client):
    resp = await client.get("/v1/nodes/nope", headers={"X-Request-Id": "trace-7"})
    assert resp.status_code == 404
    assert resp.json() == {
        "code": "not_found",
        "message": "no node named 'nope'",
        "hint": "`plumb nodes` lists the known nodes",
        "request_id": "trace-7",
    }
