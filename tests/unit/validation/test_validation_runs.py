"""Validation runs without sockets: fan-out, grading, disconnects, deadlines and reports."""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest
from junitparser import JUnitXml

from plumb.aggregator.recipes import RecipeError, load_catalog
from plumb.aggregator.recipes.catalog import default_root
from plumb.aggregator.recipes.check_catalog import Checks
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.validation import Validator, ctrf, junit, run_json
from plumb.aggregator.validation.wire import AgentResult, agent_result
from plumb.facts import Reading
from plumb.v1 import agent_pb2

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "ctrf.schema.json").read_text())
CATALOG = load_catalog()


def now() -> datetime:
    return datetime.now(UTC)


def h100_facts(gpus: int = 8) -> dict[str, Reading]:
    out = {}
    for i in range(gpus):
        out[f"gpus[{i}].index"] = Reading.ok(i)  # every GPU has its index, as collectors give it
        out[f"gpus[{i}].name"] = Reading.ok("NVIDIA H100 80GB HBM3")
        out[f"gpus[{i}].pci_device_id"] = Reading.ok("0x2330")
        out[f"gpus[{i}].pcie_link_gen_max"] = Reading.ok(5)
        out[f"gpus[{i}].pcie_link_width_max"] = Reading.ok(16)
    return out


class Fleet:
    """Live state with connected nodes, and agents that answer RunChecks as told."""

    def __init__(self, *names: str):
        self.state = LiveState()
        for name in names:
            node = self.state.node(name, now())
            node.facts, node.connected, node.session_id = h100_facts(), True, f"s-{name}"
        self.sent: list[tuple[str, agent_pb2.RunChecks]] = []
        self.answer: dict[str, dict] = {}  # node -> check -> (status, value) or None (silent)
        self.validator: Validator | None = None

    def send(self, node: str, msg: agent_pb2.ConnectResponse) -> str | None:
        self.sent.append((node, msg.run_checks))
        plan = self.answer.get(node, {})
        loop = asyncio.get_running_loop()
        for spec in msg.run_checks.checks:
            got = plan.get(spec.id, ("pass", None))
            if got is None:
                continue
            status, value = got
            result = AgentResult(
                msg.run_checks.request_id, spec.id, status, "ok", value, "GB/s", 0.01, {}
            )
            loop.call_soon(self.validator.check_result, node, result)
        return f"s-{node}"

    def make(self, catalog=CATALOG, **over) -> Validator:
        async def save(run):
            self.saved = run

        settings = dict(max_parallel_nodes=2, grace_s=0.2, default_deadline_s=5, keep_runs=3)
        settings.update(over)
        self.validator = Validator(
            catalog,
            self.state,
            _no_recipe,
            lambda n: 8,
            self.send,
            save,
            _finished,
            now,
            **settings,
        )
        return self.validator


def _no_recipe(node):
    raise LookupError("no recipe in this test")


# Set when the validator reports a run finished, by run id.
_FINISHED: dict[str, asyncio.Event] = {}


def _finished(run) -> None:
    _FINISHED.setdefault(run.id, asyncio.Event()).set()


async def finish(v: Validator, run_id: str, timeout_s: float = 5):
    done = _FINISHED.setdefault(run_id, asyncio.Event())
    if v.get(run_id).finished_at is None:
        async with asyncio.timeout(timeout_s):
            await done.wait()
    return v.get(run_id)


async def test_node_checks_fan_out_once_per_node_and_all_results_arrive():
    fleet = Fleet("a", "b", "c")
    v = fleet.make()
    run = await finish(v, v.start(phases=("conformance",)).id)
    assert sorted(n for n, _ in fleet.sent) == ["a", "b", "c"]
    ids = [c.id for c in fleet.sent[0][1].checks]
    assert ids == [c.id for c in run.checks if c.runs_on == "agent"] and "gpu-count" in ids
    gpu_count = next(c for c in fleet.sent[0][1].checks if c.id == "gpu-count")
    assert gpu_count.parameters["expected_gpus"] == "8"
    assert run.result == "passed" and run.counts()["pass"] == 3 * len(ids)
    # The nine conformance Kubernetes checks (kubernetes.yaml's eight, custom-metrics.yaml's
    # one) and the Prometheus one, with no client for either.
    assert run.counts()["skip"] == run.total - 3 * len(ids) == 10


async def test_a_prometheus_check_without_a_url_is_skipped_saying_what_to_set():
    fleet = Fleet("a", "b")
    v = fleet.make()  # no prometheus: validation.prometheus_url is unset
    run = await finish(v, v.start(checks=("ai-service-metrics",)).id)
    assert list(run.results) == [("(cluster)", "ai-service-metrics")]
    result = run.results[("(cluster)", "ai-service-metrics")]
    assert result.status == "skip"
    assert result.message == (
        "no Prometheus to ask: set validation.prometheus_url (PLUMB_VALIDATION__PROMETHEUS_URL)"
    )
    assert fleet.sent == []  # nothing asked of the nodes


async def test_a_benchmark_below_its_share_of_peak_fails_with_figures():
    fleet = Fleet("fast", "slow")
    fleet.answer = {
        "fast": {"nccl-allreduce": ("pass", 450.0), "host-device-bandwidth": ("pass", 50.0)}
    }
    fleet.answer["slow"] = {"nccl-allreduce": ("pass", 120.0)}
    v = fleet.make()
    run = await finish(v, v.start(checks=("nccl-allreduce", "host-device-bandwidth")).id)
    slow = run.results[("slow", "nccl-allreduce")]
    assert slow.status == "fail" and slow.threshold == 315.0 and slow.peak == 450.0
    assert "below the threshold 315.0" in slow.message and slow.remediation
    assert run.results[("fast", "nccl-allreduce")].status == "pass"
    # host<->device: the peak is the PCIe link's (gen 5 x16 = 63 GB/s)
    hd = run.results[("fast", "host-device-bandwidth")]
    assert hd.peak == pytest.approx(3.938 * 16) and hd.status == "pass"
    assert run.result == "failed"


async def test_a_failed_warning_severity_check_only_warns():
    fleet = Fleet("n")
    fleet.answer = {"n": {"persistence-mode": ("fail", None)}}
    v = fleet.make()
    run = await finish(v, v.start(checks=("persistence-mode",)).id)
    assert run.results[("n", "persistence-mode")].status == "warn"
    assert run.result == "passed"


async def test_a_node_that_disconnects_mid_run_gets_errors_and_the_run_ends():
    fleet = Fleet("ok", "gone")
    fleet.answer = {"gone": {c: None for c in CATALOG.checks.by_id}}
    asked, send = asyncio.Event(), fleet.send

    def send_and_tell(node, msg):
        sent = send(node, msg)
        if {n for n, _ in fleet.sent} == {"ok", "gone"}:
            asked.set()
        return sent

    fleet.send = send_and_tell  # type: ignore[method-assign]
    v = fleet.make(grace_s=30)
    run_id = v.start(phases=("conformance",)).id
    await asyncio.wait_for(asked.wait(), 5)  # both nodes were asked
    assert v.get(run_id).finished_at is None
    v.stream_closed("gone", "s-other")  # a newer stream's close says nothing of this one
    # What a close does, it does at once (the checks it owed get `error`): nothing did here.
    assert not [r for (n, _), r in v.get(run_id).results.items() if n == "gone"]
    assert v.get(run_id).finished_at is None
    v.stream_closed("gone", "s-gone")
    run = await finish(v, run_id)
    gone = [r for (n, _), r in run.results.items() if n == "gone"]
    assert gone and all(r.status == "error" and "disconnected" in r.message for r in gone)
    assert all(r.status == "pass" for (n, _), r in run.results.items() if n == "ok")


async def test_a_silent_node_times_out_and_a_disconnected_one_is_not_asked():
    fleet = Fleet("silent", "down")
    fleet.state.get("down").connected = False
    fleet.answer = {"silent": {"xid": None}}
    quick = {k: c.model_copy(update={"timeout_s": 0.1}) for k, c in CATALOG.checks.by_id.items()}
    catalog = replace(CATALOG, checks=Checks(quick, CATALOG.checks.pcie_lane_gbps))
    v = fleet.make(catalog)
    run = await finish(v, v.start(checks=("xid", "ecc")).id, timeout_s=30)
    assert [n for n, _ in fleet.sent] == ["silent"]
    assert run.results[("down", "ecc")].message == "node not connected"
    assert "budget" in run.results[("silent", "xid")].message
    assert run.results[("silent", "ecc")].status == "pass"


async def test_the_global_deadline_ends_the_run_with_errors():
    fleet = Fleet("slow")
    fleet.answer = {"slow": {"ecc": None}}
    v = fleet.make(grace_s=60)
    run = await finish(v, v.start(checks=("ecc",), deadline_s=0.1).id)
    assert run.results[("slow", "ecc")].status == "error"
    assert "deadline" in run.results[("slow", "ecc")].message
    assert fleet.saved is run


async def test_deployment_checks_error_per_node_when_the_recipe_cannot_resolve():
    fleet = Fleet("n")
    v = fleet.make()
    run = await finish(v, v.start(phases=("deployment",)).id)
    assert {r.status for r in run.results.values()} == {"error"}
    assert fleet.sent == []


async def test_bad_requests_name_the_problem():
    v = Fleet("n").make()
    with pytest.raises(Exception, match="warp"):
        v.start(checks=("warp",))
    with pytest.raises(Exception, match="nope"):
        v.start(nodes=("nope",))
    with pytest.raises(Exception, match="phase"):
        v.start(phases=("chaos",))


async def test_reports_validate_as_ctrf_and_parse_as_junit(tmp_path: Path):
    fleet = Fleet("a", "b")
    fleet.answer = {"b": {"ecc": ("fail", None), "xid": ("skip", None), "nvlink": None}}
    v = fleet.make(grace_s=0.1)
    # The silent nvlink check ends at the deadline (no default: that would be the plan's bound).
    run = await finish(v, v.start(phases=("conformance",), deadline_s=5).id, timeout_s=30)
    report = ctrf(run)
    jsonschema.validate(report, SCHEMA)
    s = report["results"]["summary"]
    # No Kubernetes client here: the cluster-wide checks are skipped once, under "(cluster)".
    kube = [c for c in run.checks if c.runs_on in ("kubernetes", "prometheus")]
    assert kube and run.total == 2 * (len(run.checks) - len(kube)) + len(kube)
    assert s["tests"] == run.total and s["failed"] == 2 and s["skipped"] == 1 + len(kube)
    assert s["start"] <= s["stop"]
    path = tmp_path / "junit.xml"
    path.write_text(junit(run))
    xml = JUnitXml.fromfile(str(path))
    suites = {suite.name: suite for suite in xml}
    assert set(suites) == {"a", "b", "(cluster)"}
    assert suites["b"].failures == 1 and suites["b"].errors == 1 and suites["b"].skipped == 1
    assert suites["a"].tests == len(run.checks) - len(kube)
    assert suites["(cluster)"].tests == suites["(cluster)"].skipped == len(kube)
    cluster = [r for r in run.results.values() if r.node == "(cluster)"]
    assert {r.message for r in cluster if r.check_id != "ai-service-metrics"} == {
        "Kubernetes is not configured"
    }
    body = run_json(run)
    assert body["progress"]["done"] == run.total and len(body["results"]) == run.total


def test_a_running_report_lists_pending_tests_in_both_formats():
    fleet = Fleet("a")
    from plumb.aggregator.validation.model import PlannedCheck, ValidationRun

    run = ValidationRun(
        id="0" * 32,
        phases=("conformance",),
        checks=(PlannedCheck("ecc", "conformance", "critical", "agent"),),
        nodes=("a",),
        created_at=now(),
        deadline_s=5,
    )
    report = ctrf(run)
    jsonschema.validate(report, SCHEMA)
    assert report["results"]["summary"]["pending"] == 1
    assert "pending" in junit(run)
    assert fleet.state.get("a") is not None


def test_agent_results_are_bounded_and_unknown_statuses_become_errors():
    msg = agent_pb2.CheckResult(
        request_id="r", check_id="ecc", status="great", message="x" * 10_000, duration_s=-1
    )
    for i in range(200):
        msg.details[f"k{i:03d}"] = "v" * 1000
    got = agent_result(msg)
    assert got.status == "error" and "unknown status" in got.message
    assert len(got.details) == 64 and all(len(v) <= 256 for v in got.details.values())
    assert got.duration_s == 0.0 and got.value is None
    nan = agent_pb2.CheckResult(request_id="r", check_id="c", status="pass", value=float("nan"))
    assert agent_result(nan).status == "error"


def test_a_broken_check_file_stops_loading_with_file_and_line(tmp_path: Path):
    root = tmp_path / "recipes"
    shutil.copytree(default_root(), root)
    path = root / "checks" / "performance.yaml"
    text = path.read_text().replace("fraction: 0.7, scale: 0.5", "fraction: 7, scale: 0.5")
    path.write_text(text)
    (root / "checks" / "extra.yaml").write_text(
        "kind: CheckCatalog\nchecks:\n  - id: ecc\n    phase: conformance\n    runs_on: agent\n"
        "    severity: critical\n    timeout_s: 5\n    description: d\n    remediation: r\n"
    )
    with pytest.raises(RecipeError) as err:
        load_catalog(root)
    text = str(err.value)
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if "fraction: 7" in ln)
    assert f"checks/performance.yaml:{line}:" in text and "less than or equal to 1" in text
    assert "checks/extra.yaml:3: checks[0].id: duplicate check 'ecc'" in text
