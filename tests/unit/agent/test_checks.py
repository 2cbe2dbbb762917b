"""Node checks on simulated nodes and fakes: verdicts, skips with reasons, timeouts."""

from __future__ import annotations

import asyncio
import shutil
import sys
import threading
import types
from dataclasses import replace
from pathlib import Path

import yaml

from plumb.agent.checks import CHECKS, CheckContext, CheckRunner, Outcome
from plumb.agent.checks.conformance import CONFORMANCE, pci_scan
from plumb.agent.checks.params import PARAMS, refused
from plumb.agent.checks.performance import PERFORMANCE
from plumb.agent.collect import collect_all
from plumb.agent.main import make_node
from plumb.agent.settings import AgentSettings
from plumb.facts import Reading


def context(sim, **over) -> CheckContext:
    ctx = CheckContext(
        collect=lambda: collect_all(sim.sources()),
        nvml=lambda: sim.sources().nvml,
        pci_gpu_count=lambda: len([p for p in collect_all(sim.sources()) if p.endswith("].uuid")]),
    )
    return replace(ctx, **over)


def run(check_id: str, ctx: CheckContext, **params: str) -> Outcome:
    return {**CONFORMANCE, **PERFORMANCE}[check_id](ctx, params)


def test_a_healthy_h100_node_passes_every_conformance_check(simulate):
    ctx = context(simulate("dgx-h100"))
    for check_id in ("gpu-count", "driver-nvml", "persistence-mode", "ecc", "nvlink", "pcie-link"):
        assert run(check_id, ctx, expected_gpus="8").status == "pass", check_id


def test_an_uncorrected_ecc_error_fails_naming_the_gpu(simulate, profile_copy):
    path = profile_copy(
        edit=lambda d: d["gpus"].update(overrides={5: {"ecc": {"uncorrected_volatile": 3}}})
    )
    out = run("ecc", context(simulate(str(path))))
    assert out.status == "fail"
    assert out.message == "GPU 5: 3 uncorrected ECC errors since boot"
    assert out.details["gpu5"] != "ok" and out.details["gpu0"] == "ok"


def test_a_pending_row_remap_and_a_down_nvlink_fail(simulate, profile_copy):
    path = profile_copy(
        edit=lambda d: d["gpus"].update(
            overrides={
                1: {"remapped_rows": {"pending": True}},
                2: {"nvlink": {"links_total": 18, "links_up": 16}},
            }
        )
    )
    ctx = context(simulate(str(path)))
    assert "row remap pending" in run("ecc", ctx).message
    nvlink = run("nvlink", ctx)
    assert nvlink.status == "fail" and nvlink.message == "GPU 2: 16/18 links up"


def test_gpu_count_fails_against_the_baseline_and_the_pci_bus(simulate):
    ctx = context(simulate("dgx-h100"), pci_gpu_count=lambda: 7)
    out = run("gpu-count", ctx, expected_gpus="9")
    assert out.status == "fail"
    assert "PCI bus has 7" in out.message and "baseline has 9" in out.message


def test_consumer_gpus_without_ecc_or_nvlink_are_skipped_not_failed(simulate):
    ctx = context(simulate("rtx-4090"))
    assert run("ecc", ctx).status == "skip"
    assert run("nvlink", ctx).status == "skip"


def test_a_narrow_pcie_link_fails_and_a_slow_one_only_warns(simulate, profile_copy):
    narrow = profile_copy(
        edit=lambda d: d["gpus"].update(
            overrides={0: {"pcie": {"gen_current": 5, "gen_max": 5, "width_current": 8}}}
        )
    )
    assert run("pcie-link", context(simulate(str(narrow), "n1"))).status == "fail"
    slow = profile_copy(
        edit=lambda d: d["gpus"].update(overrides={0: {"pcie": {"gen_current": 1, "gen_max": 5}}})
    )
    out = run("pcie-link", context(simulate(str(slow), "n2")))
    assert out.status == "warn" and "idle" in out.message


def test_no_driver_fails_driver_nvml_with_nvmls_reason(simulate, profile_copy):
    path = profile_copy(edit=lambda d: d["driver"].update(loaded=False))
    out = run("driver-nvml", context(simulate(str(path))))
    assert out.status == "fail" and "NVML does not start" in out.message


def test_checks_of_a_simulated_node_follow_its_edited_profile(profile_copy, write_yaml, tmp_path):
    # The agent's own wiring: before, driver-nvml kept the FakeNvml of the profile at start.
    path = profile_copy("dgx-h100")
    settings = AgentSettings(simulate=str(path), node_name="n", sim_workdir=tmp_path / "work")
    ctx = make_node(settings).checks
    assert run("driver-nvml", ctx).details["driver_version"] == "580.173.02"

    data = yaml.safe_load(path.read_text())
    data["driver"]["version"] = "570.86.15"
    data["gpus"]["count"] = 4
    write_yaml(path, data)

    out = run("driver-nvml", ctx)
    assert out.details == {"driver_version": "570.86.15", "gpus": "4"}
    assert run("gpu-count", ctx).details == {"nvml": "4", "pci": "4"}


def test_checks_of_a_replayed_capture_follow_its_edits(tmp_path):
    path = tmp_path / "l40s.xml"
    shutil.copy(Path(__file__).parents[2] / "data/real/qx-l40s.xml", path)
    settings = AgentSettings(simulate=str(path), node_name="n", sim_workdir=tmp_path / "work")
    ctx = make_node(settings).checks
    assert run("driver-nvml", ctx).details["driver_version"] == "595.91.07"

    path.write_text(
        path.read_text().replace(">595.91.07</driver_version>", ">580.95.05</driver_version>")
    )
    assert run("driver-nvml", ctx).details["driver_version"] == "580.95.05"


def test_pci_scan_counts_nvidia_gpus_but_not_nvswitches(tmp_path: Path):
    devices = tmp_path / "bus" / "pci" / "devices"
    for name, vendor, klass in [
        ("0000:18:00.0", "0x10de", "0x030200"),
        ("0000:2a:00.0", "0x10de", "0x030000"),
        ("0000:05:00.0", "0x10de", "0x068000"),  # NVSwitch
        ("0000:00:1f.0", "0x8086", "0x030000"),
    ]:
        (devices / name).mkdir(parents=True)
        (devices / name / "vendor").write_text(vendor + "\n")
        (devices / name / "class").write_text(klass + "\n")
    assert pci_scan(tmp_path) == 2
    assert pci_scan(tmp_path / "missing") is None


def test_benchmarks_on_a_simulated_node_say_so_and_never_invent_figures(simulate):
    ctx = context(simulate("dgx-h100"), simulated=True)
    for check_id in PERFORMANCE:
        out = run(check_id, ctx)
        assert (out.status, out.message, out.value) == ("skip", "simulated node", None)
    ctx = replace(ctx, simulated_figures=lambda: {"nccl-allreduce": 120.0})
    out = run("nccl-allreduce", ctx)
    assert out.status == "pass" and out.value == 120.0 and out.unit == "GB/s"
    assert "simulated" in out.message and out.details["simulated"] == "true"


class _BusyNvml:
    """Two GPUs; GPU 1 runs a process."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list:
        return [types.SimpleNamespace(pid=4242)] if h == 1 else []


def _ctx(nvml) -> CheckContext:
    return CheckContext(collect=dict, nvml=lambda: nvml, pci_gpu_count=lambda: None)


def test_benchmarks_skip_as_busy_when_a_gpu_runs_a_process():
    out = run("matmul-bf16", _ctx(_BusyNvml()))
    assert out.status == "skip" and out.message == "busy"
    assert out.details["processes"] == "gpu1:4242"


def test_benchmarks_skip_without_a_gpu_or_without_torch(monkeypatch):
    class NoDriver:
        def nvmlInit(self):
            raise RuntimeError("Driver Not Loaded")

    assert run("memory-bandwidth", _ctx(NoDriver())).message == "no GPU"
    idle = _BusyNvml()
    idle.nvmlDeviceGetComputeRunningProcesses = lambda h: []
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    monkeypatch.setitem(sys.modules, "cupy", None)
    for check_id in PERFORMANCE:
        out = run(check_id, _ctx(idle))
        assert (out.status, out.message) == ("skip", "no torch"), check_id


NOW = 1_796_000_000.0  # the checks' clock in the XID tests


def xid_context(**gpus: dict[str, object]) -> CheckContext:
    """A node whose facts are `gpuI={leaf: value}` (a Reading is kept as it is)."""
    facts = {}
    for name, leaves in gpus.items():
        i = int(name.removeprefix("gpu"))
        facts[f"gpus[{i}].index"] = Reading.ok(i)
        for leaf, value in leaves.items():
            reading = value if isinstance(value, Reading) else Reading.ok(value)
            facts[f"gpus[{i}].{leaf}"] = reading
    return CheckContext(
        collect=lambda: facts, nvml=lambda: None, pci_gpu_count=lambda: None, now=lambda: NOW
    )


def xid_entry(j: int, code: int, count: int, ago_s: float) -> dict[str, object]:
    return {
        f"xids[{j}].code": code,
        f"xids[{j}].count": count,
        f"xids[{j}].last_seen_unix_s": int(NOW - ago_s),
    }


def test_xid_passes_on_gpus_with_no_xid_in_the_window():
    old = {"xid_count": 4, **xid_entry(0, 13, 4, ago_s=3 * 86400)}  # three days ago
    out = run("xid", xid_context(gpu0={"xid_count": 0}, gpu1=old))
    assert out.status == "pass"
    assert out.message == "no XID on 2 GPUs in the last 24 h"
    assert out.details == {"window_s": "86400"}


def test_xid_lists_each_gpus_xids_in_the_window_for_the_aggregator_to_grade():
    ctx = xid_context(
        gpu0={"xid_count": 0},
        gpu3={"xid_count": 3, **xid_entry(0, 31, 2, ago_s=7200), **xid_entry(1, 79, 1, ago_s=60)},
    )
    out = run("xid", ctx, window_s="3600")
    assert out.status == "fail"
    assert out.message == "XIDs in the last 1 h: GPU 3: XID 79 x1"
    assert out.details == {"window_s": "3600", "gpu3.xid79": "1"}
    wide = run("xid", ctx)
    assert wide.details == {"window_s": "86400", "gpu3.xid31": "2", "gpu3.xid79": "1"}


def test_xid_is_an_error_when_the_agent_cannot_watch_and_a_skip_without_xid_facts():
    why = "no XID source: NVML events: Not Supported; /host/dev/kmsg: Permission denied"
    out = run("xid", xid_context(gpu0={"xid_count": Reading.failed(why)}))
    assert out.status == "error" and out.message == f"XIDs not watched: {why}"
    assert run("xid", xid_context(gpu0={"name": "NVIDIA L4"})).status == "skip"


def test_xid_window_is_a_bounded_parameter():
    assert refused("xid", {"window_s": "0"}) == "parameter window_s: 0 is outside [1, 2.592e+06]"
    assert refused("xid", {"window_s": "600"}) is None


def test_a_check_past_its_timeout_is_an_error_and_later_ones_skip_as_busy(monkeypatch):
    release, finished = threading.Event(), threading.Event()

    def stuck(ctx, params):
        release.wait(5)
        finished.set()
        return Outcome("pass", "late")

    monkeypatch.setitem(CONFORMANCE, "ecc", stuck)
    monkeypatch.setattr("plumb.agent.checks.runner.CHECKS", {**CONFORMANCE, **PERFORMANCE})
    runner = CheckRunner(_ctx(_BusyNvml()))

    async def go():
        first = await runner.run("ecc", {}, 0.05)
        # The runner answered without waiting for the stuck check, which is still running.
        still_running = not finished.is_set()
        second = await runner.run("xid", {}, 1)
        release.set()
        await asyncio.to_thread(finished.wait, 5)
        return first, second, still_running

    first, second, still_running = asyncio.run(go())
    assert still_running
    assert first.outcome.status == "error" and "timeout" in first.outcome.message
    assert second.outcome.status == "skip" and second.outcome.message == "busy"


def test_an_unknown_check_and_a_crashing_check_are_results_not_exceptions(monkeypatch):
    def boom(ctx, params):
        raise ValueError("bad")

    monkeypatch.setattr("plumb.agent.checks.runner.CHECKS", {"boom": boom})
    runner = CheckRunner(_ctx(_BusyNvml()))
    unknown = asyncio.run(runner.run("warp", {}, 1)).outcome
    crashed = asyncio.run(runner.run("boom", {}, 1)).outcome
    assert unknown.status == "skip" and "unknown" in unknown.message
    assert crashed.status == "error" and "ValueError: bad" in crashed.message


def test_parameters_outside_the_agents_catalog_refuse_the_check_before_it_runs(monkeypatch):
    ran: list[dict] = []

    def recording(ctx, params):
        ran.append(dict(params))
        return Outcome("pass", "ran")

    monkeypatch.setattr("plumb.agent.checks.runner.CHECKS", {"nccl-allreduce": recording})
    runner = CheckRunner(_ctx(_BusyNvml()))
    for params, why in [
        ({"max_bytes": "--op=max"}, "max_bytes: '--op=max' does not parse"),
        ({"bytes": str(1 << 40)}, "outside"),
        ({"iterations": "ten"}, "does not parse"),
        ({"shell": "rm -rf /"}, "not one nccl-allreduce takes"),
    ]:
        outcome = asyncio.run(runner.run("nccl-allreduce", params, 1)).outcome
        assert outcome.status == "error" and why in outcome.message, outcome
    assert ran == []
    allowed = {"max_bytes": "4G", "bytes": "1048576", "iterations": "20", "timeout_s": "300"}
    assert asyncio.run(runner.run("nccl-allreduce", allowed, 1)).outcome.status == "pass"
    assert ran == [allowed]


def test_the_aggregators_catalog_sends_only_parameters_the_agent_allows():
    from plumb.aggregator.recipes import load_catalog

    assert set(PARAMS) == set(CHECKS), "every agent check declares its parameters"
    agent_checks = [c for c in load_catalog().checks.by_id.values() if c.runs_on == "agent"]
    assert {c.id for c in agent_checks} <= set(CHECKS)
    for check in agent_checks:
        sent = {k: str(v) for k, v in check.parameters.items()}
        sent["timeout_s"] = f"{check.timeout_s:g}"
        if check.id == "gpu-count":
            sent["expected_gpus"] = "8"
        assert refused(check.id, sent) is None, check.id
