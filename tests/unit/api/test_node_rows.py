"""GET /v1/nodes joins each node's cached row: a touch re-renders only the node touched, a
heartbeat moves only its report time, and the body reads as NodeOut's JSON written by hand.

The expected bodies are written from api/models.py's NodeOut field order and the facts below
(GPU 0 of tests/data/real/qx-b200.xml), in FastAPI's compact JSON.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import httpx

from plumb import facts as wire
from plumb.aggregator.api import create_app
from plumb.aggregator.api.models import NodeOut
from plumb.aggregator.core import NodeRows
from plumb.aggregator.drift import DriftFinding
from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.settings import AggregatorSettings
from plumb.aggregator.state.live import LiveState

AT = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
B200 = {
    "driver.driver_version": wire.Reading.ok("580.95.05"),
    "gpus[0].index": wire.Reading.ok(0),
    "gpus[0].name": wire.Reading.ok("NVIDIA B200"),
    "nccl.libraries[0].version": wire.Reading.ok("2.27.3"),
}
POOL = SimpleNamespace(
    criteria=SimpleNamespace(
        service="eks", accelerator="b200", os="ubuntu", intent="any", platform="any"
    )
)
FINDING = DriftFinding(
    id="f1",
    node="b",
    kind="recipe",
    component="driver",
    expected=">= 580.65.06",
    observed="570.86.15",
    severity="critical",
    remediation="upgrade the driver",
    recipe_hash="0123456789ab",
    opened_at=AT,
)
ROW_A = (
    b'{"name":"a","connected":true,"last_report_at":"2026-12-01T12:00:00Z",'
    b'"driver_version":"580.95.05","cuda_driver_version":null,"gpu_count":1,'
    b'"gpu_product":"NVIDIA B200","kernel":null,"os":null,"pool":"eks/b200/ubuntu/any/any",'
    b'"nccl_version":"2.27.3","cuda_runtime_version":null,'
    b'"findings":{"critical":0,"warning":0,"info":0},"drifted":false}'
)
ROW_B = (
    b'{"name":"b","connected":false,"last_report_at":null,'
    b'"driver_version":"570.86.15","cuda_driver_version":null,"gpu_count":1,'
    b'"gpu_product":"NVIDIA B200","kernel":null,"os":null,"pool":null,'
    b'"nccl_version":"2.27.3","cuda_runtime_version":null,'
    b'"findings":{"critical":1,"warning":0,"info":0},"drifted":true}'
)


class Verdicts:
    """What NodeRows reads of the evaluator: recipes, open findings and views per node."""

    def __init__(self) -> None:
        self.open: dict[str, list[DriftFinding]] = {}
        self.drift = SimpleNamespace(open_findings=lambda node: self.open.get(node, []))
        self.resolutions: dict = {}

    def view(self, node) -> NodeView:
        return NodeView.from_facts(node.facts)


def render(o) -> dict:
    return NodeOut.of(o).model_dump(mode="json")


def fleet():
    """Nodes `a` (connected, in a pool) and `b` (restored, one critical finding)."""
    state, verdicts = LiveState(), Verdicts()
    a = state.node("a", AT)
    a.facts = a.reported = dict(B200)
    a.connected, a.last_report_at = True, AT
    verdicts.resolutions["a"] = POOL
    state.restore("b", {**B200, "driver.driver_version": wire.Reading.ok("570.86.15")})
    verdicts.open["b"] = [FINDING]
    rows = NodeRows(state, verdicts, render)  # type: ignore[arg-type]
    for name in ("a", "b"):
        rows.touched(name)
    return state, verdicts, rows


class FakeCore:
    settings = AggregatorSettings(api={"anonymous_read": True})

    def __init__(self, rows: NodeRows):
        self.node_rows = rows.rows


async def get(rows: NodeRows, query: str = "") -> bytes:
    app = create_app(FakeCore(rows))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        resp = await c.get("/v1/nodes" + query)
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
    return resp.content


async def test_the_list_of_two_nodes_reads_as_written_by_hand():
    _, _, rows = fleet()
    assert await get(rows) == b"[" + ROW_A + b"," + ROW_B + b"]"
    assert await get(rows, "?pool=eks/b200/ubuntu/any/any") == b"[" + ROW_A + b"]"
    assert await get(rows, "?drifted=true") == b"[" + ROW_B + b"]"
    assert await get(rows, "?drifted=false&pool=other") == b"[]"


async def test_a_change_re_renders_only_the_node_touched():
    state, verdicts, rows = fleet()
    before_a, before_b = rows.rows()
    rows.touched("a")  # nothing changed: the same row
    assert rows.rows() == [before_a, before_b]

    a = state.get("a")
    a.last_report_at = AT + timedelta(seconds=5)  # a heartbeat
    rows.touched("a")
    after_a, after_b = rows.rows()
    assert after_b is before_b
    assert after_a.json == ROW_A.replace(b"12:00:00Z", b"12:00:05Z")

    verdicts.open["a"] = [replace(FINDING, node="a", severity="warning")]
    a.facts = {**B200, "driver.driver_version": wire.Reading.ok("575.57.08")}
    a.connected = False
    rows.touched("a")
    changed_a, still_b = rows.rows()
    assert still_b is before_b
    assert changed_a.out["driver_version"] == "575.57.08"
    assert changed_a.out["connected"] is False
    assert changed_a.out["last_report_at"] == "2026-12-01T12:00:05Z"
    assert changed_a.out["findings"] == {"critical": 0, "warning": 1, "info": 0}
    assert changed_a.out["drifted"] is True


async def test_a_heartbeat_swaps_the_report_time_of_its_row_alone():
    state, _, rows = fleet()
    before_a, before_b = rows.rows()
    state.get("a").last_report_at = AT + timedelta(seconds=5)  # type: ignore[union-attr]
    rows.seen("a")
    after_a, after_b = rows.rows()
    assert after_b is before_b
    assert after_a.json == ROW_A.replace(b"12:00:00Z", b"12:00:05Z")
    rows.seen("a")  # the same time again: the same row
    assert rows.rows()[0] is after_a


async def test_findings_opened_and_closed_move_the_counts():
    _, verdicts, rows = fleet()
    verdicts.open.pop("b")
    rows.touched("b")
    assert await get(rows, "?drifted=true") == b"[]"


async def test_nodes_restored_before_any_touch_are_listed_and_removed_ones_are_not():
    state, _, rows = fleet()
    state.restore("c", {})
    state.remove("a")
    rows.touched("a")
    names = [r.out["name"] for r in rows.rows()]
    assert names == ["b", "c"]


async def test_a_resume_swaps_the_connection_and_report_time_of_its_row_alone():
    state, _, rows = fleet()
    before_a, before_b = rows.rows()
    b = state.get("b")
    b.connected, b.last_report_at = True, AT  # a stream opened on the facts held
    rows.touched("b")
    after_a, after_b = rows.rows()
    assert after_a is before_a
    assert after_b.json == ROW_B.replace(
        b'"connected":false,"last_report_at":null',
        b'"connected":true,"last_report_at":"2026-12-01T12:00:00Z"',
    )
    b.connected = False  # and ended
    rows.touched("b")
    assert rows.rows()[1].json == ROW_B.replace(
        b'"last_report_at":null', b'"last_report_at":"2026-12-01T12:00:00Z"'
    )
