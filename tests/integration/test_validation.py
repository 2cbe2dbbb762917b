"""Validation end to end: real agents run node checks over their streams; reports over HTTP."""

from __future__ import annotations

import json
import signal
import subprocess
import xml.etree.ElementTree as ET

from conftest import BIN, scrape, until

from plumb.aggregator.store import Store


def start(aggregator, **body) -> str:
    resp = aggregator.post("/v1/validations", json=body)
    assert resp.status_code == 202, resp.text
    return resp.json()["id"]


def finished(aggregator, run_id: str, timeout: float = 30) -> dict:
    return until(
        lambda: (r := aggregator.json(f"/v1/validations/{run_id}"))["state"] == "finished" and r,
        timeout=timeout,
        what="the run to finish",
    )


def by_key(run: dict) -> dict[tuple[str, str], dict]:
    return {(r["node"], r["check"]): r for r in run["results"]}


def connected(aggregator, *names: str) -> None:
    until(
        lambda: all((n := aggregator.node(name)) and n["connected"] for name in names),
        what=f"{names} connected",
    )


def test_a_degraded_node_fails_with_a_reason_and_the_healthy_one_passes(aggregator, start_agent):
    start_agent(aggregator, "healthy", "dgx-h100")
    sick = start_agent(aggregator, "sick", "dgx-h100")
    sick.edit(
        lambda s: (
            s["gpus"]
            .setdefault("overrides", {})
            .update({3: {"ecc": {"enabled": True, "uncorrected_volatile": 2}}})
        )
    )
    sick.edit(lambda s: s.update(benchmarks={"nccl-allreduce": 120.0}))
    connected(aggregator, "healthy", "sick")
    until(
        lambda: (
            aggregator.json("/v1/nodes/sick")["facts"]["gpus"][3]["ecc_uncorrected_volatile"][
                "value"
            ]
            == 2
        ),
        what="the ECC error in the facts",
    )

    run = finished(aggregator, start(aggregator))

    assert run["result"] == "failed"
    results = by_key(run)
    assert {r["status"] for k, r in results.items() if k[0] == "healthy"} <= {"pass", "skip"}
    ecc = results[("sick", "ecc")]
    assert ecc["status"] == "fail"
    assert "GPU 3: 2 uncorrected ECC errors" in ecc["message"]
    assert ecc["remediation"]
    assert results[("healthy", "ecc")]["status"] == "pass"
    assert results[("healthy", "gpu-count")]["details"]["nvml"] == "8"
    assert results[("healthy", "xid")]["status"] == "pass"
    # A simulated node measures nothing; the sick one's profile states a low NCCL figure.
    assert results[("healthy", "nccl-allreduce")]["status"] == "skip"
    assert results[("healthy", "nccl-allreduce")]["message"] == "simulated node"
    nccl = results[("sick", "nccl-allreduce")]
    assert nccl["status"] == "fail"
    assert nccl["value"] == 120.0 and nccl["unit"] == "GB/s"
    assert nccl["threshold"] == 315.0  # 0.7 x 450 GB/s (one direction of H100 NVLink)
    assert abs(nccl["ratio_to_peak"] - 120 / 450) < 1e-3
    assert "simulated" in nccl["message"]
    assert results[("healthy", "recipe-constraints")]["status"] in ("pass", "warn")
    assert run["progress"]["pending"] == 0
    # The Kubernetes and Prometheus checks (no client, no URL here: skipped) report once,
    # under "(cluster)".
    kube = {c for (n, c) in results if n == "(cluster)"}
    assert kube == {
        "gpu-scheduling",
        "gpu-health-monitor",
        "nodes-ready",
        "secure-accelerator-access",
        "gpu-operator-health",
        "dra-support",
        "gang-scheduling",
        "platform-health",
        "custom-metrics-api",
        "nccl-allreduce-net",
        "nccl-allreduce-nvls",
        "ai-service-metrics",
    }
    assert {results[("(cluster)", c)]["status"] for c in kube} == {"skip"}
    assert run["progress"]["total"] == 2 * (len(run["checks"]) - len(kube)) + len(kube)

    samples = scrape(aggregator)
    assert ("plumb_validation_runs_total", {"result": "failed"}, 1.0) in samples
    assert (
        "plumb_validation_check_status",
        {"node": "sick", "check": "ecc"},
        2.0,
    ) in samples
    assert any(
        n == "plumb_benchmark_ratio_to_peak"
        and lb == {"node": "sick", "benchmark": "nccl-allreduce"}
        for n, lb, _ in samples
    )


def test_ctrf_and_junit_reports_describe_the_run(aggregator, start_agent):
    start_agent(aggregator, "ci-node", "l4")
    connected(aggregator, "ci-node")
    run = finished(aggregator, start(aggregator, phases=["conformance"]))

    report = aggregator.json(f"/v1/validations/{run['id']}", format="ctrf")
    summary = report["results"]["summary"]
    assert report["reportFormat"] == "CTRF"
    assert report["results"]["tool"]["name"] == "plumb"
    assert summary["tests"] == len(run["checks"]) == len(report["results"]["tests"])  # one node
    assert summary["skipped"] >= 1 and summary["pending"] == 0
    assert {t["name"] for t in report["results"]["tests"]} >= {"ci-node/ecc", "ci-node/xid"}

    xml = aggregator.get(f"/v1/validations/{run['id']}", format="junit").text
    root = ET.fromstring(xml.encode())
    assert root.tag == "testsuites"
    suite, cluster = root.findall("testsuite")
    assert suite.get("name") == "ci-node" and cluster.get("name") == "(cluster)"
    cases = suite.findall("testcase") + cluster.findall("testcase")
    assert len(cases) == len(run["checks"])
    json.dumps(report)


def test_a_node_that_drops_mid_run_gets_errors_and_the_run_ends(aggregator, start_agent):
    start_agent(aggregator, "stays", "l4")
    leaver = start_agent(aggregator, "leaves", "l4")
    connected(aggregator, "stays", "leaves")
    leaver.proc.send_signal(signal.SIGSTOP)  # frozen: its stream stays open, answers nothing
    try:
        run_id = start(aggregator, phases=["conformance"], nodes=["stays", "leaves"])
        until(
            lambda: (
                aggregator.json(f"/v1/validations/{run_id}")["progress"]["done"]
                >= len(aggregator.json(f"/v1/validations/{run_id}")["checks"])
            ),
            what="the healthy node's results",
        )
        running = aggregator.json(f"/v1/validations/{run_id}")
        assert running["state"] == "running" and running["progress"]["pending"] > 0
    finally:
        leaver.proc.kill()  # the TCP connection closes: the stream ends mid-run
        leaver.proc.wait()
    run = finished(aggregator, run_id)
    left = [r for r in run["results"] if r["node"] == "leaves"]
    assert left and all(r["status"] == "error" for r in left)
    assert all("disconnected" in r["message"] for r in left)
    assert all(r["status"] in ("pass", "skip") for r in run["results"] if r["node"] == "stays")


def test_bad_requests_are_refused_with_a_reason(aggregator, start_agent):
    start_agent(aggregator, "only", "l4")
    connected(aggregator, "only")
    resp = aggregator.post("/v1/validations", json={"checks": ["warp-drive"]})
    assert resp.status_code == 400 and "warp-drive" in resp.json()["message"]
    resp = aggregator.post("/v1/validations", json={"nodes": ["nope"]})
    assert resp.status_code == 404
    assert aggregator.get("/v1/validations/0000").status_code == 404


def test_a_finished_run_is_read_back_from_the_store_after_a_restart(aggregator, start_agent):
    start_agent(aggregator, "kept", "l4")
    connected(aggregator, "kept")
    run = finished(aggregator, start(aggregator, phases=["deployment"]))
    aggregator.stop()
    aggregator.start()
    again = aggregator.json(f"/v1/validations/{run['id']}")
    assert again["result"] == run["result"]
    assert by_key(again).keys() == by_key(run).keys()


def test_cli_validate_waits_prints_and_exits_by_its_result(aggregator, start_agent, tmp_path):
    start_agent(aggregator, "cli-ok", "l4")
    connected(aggregator, "cli-ok")
    cli = [str(BIN / "plumb"), "validate", "--server", aggregator.url]
    report = tmp_path / "report.xml"
    ok = subprocess.run(
        [*cli, "--phase", "conformance", "--report", str(report)],
        capture_output=True,
        text=True,
        timeout=60,
        env=aggregator.cli_env,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "passed" in ok.stdout and "cli-ok" in ok.stdout
    assert ET.parse(report).getroot().tag == "testsuites"

    bad = subprocess.run(
        [*cli, "--check", "ecc", "--node", "cli-ok", "-o", "ctrf"],
        capture_output=True,
        text=True,
        timeout=60,
        env=aggregator.cli_env,
    )
    assert bad.returncode == 0, bad.stderr
    assert json.loads(bad.stdout)["results"]["summary"]["tests"] == 1
    missing = subprocess.run(
        [*cli, "--node", "nope"], capture_output=True, text=True, timeout=60, env=aggregator.cli_env
    )
    assert missing.returncode == 3 and "nope" in missing.stderr


def test_a_run_cut_short_by_sigkill_is_listed_and_finished_as_an_error_after_restart(
    aggregator, start_agent
):
    agent = start_agent(aggregator, "frozen", "dgx-h100")
    connected(aggregator, "frozen")
    agent.proc.send_signal(signal.SIGSTOP)  # connected, but it will answer no check
    try:
        run_id = start(aggregator, phases=["conformance"], nodes=["frozen"])
        store = Store(aggregator.db)
        try:
            until(lambda: store.validation(run_id), what="the run stored as started")
        finally:
            store.close()
        aggregator.stop(signal.SIGKILL)
    finally:
        agent.proc.send_signal(signal.SIGCONT)
    aggregator.start()

    listed = {r["id"]: r for r in aggregator.json("/v1/validations")}
    assert listed[run_id]["state"] == "finished" and listed[run_id]["result"] == "failed"
    run = aggregator.json(f"/v1/validations/{run_id}")
    agent_checks = [r for r in run["results"] if r["node"] == "frozen"]
    assert agent_checks and run["progress"]["pending"] == 0
    assert {(r["status"], r["message"]) for r in agent_checks} == {
        ("error", "aggregator restarted")
    }
    junit = aggregator.get(f"/v1/validations/{run_id}", format="junit")
    assert ET.fromstring(junit.text).get("errors") == str(len(run["results"]))
