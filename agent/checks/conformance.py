"""Conformance checks on the node: is every GPU there, answering and healthy?

They read the facts the collectors produce (so simulation exercises the same code), plus a
PCI scan and a direct NVML probe. A fact a GPU does not support (no ECC on a GeForce, no
NVLink on a PCIe card) is no failure: the check says which GPUs it could not judge.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from plumb.agent.checks.model import CheckContext, Outcome
from plumb.facts import Reading

__all__ = ["CONFORMANCE", "gpu_facts", "pci_scan"]

_GPU_PATH = re.compile(r"^gpus\[(\d+)\]\.(.+)$")
# PCI class codes of NVIDIA GPUs: VGA (0x0300) and 3D controller (0x0302); NVSwitches are 0x0680.
_GPU_CLASSES = ("0x0300", "0x0302")
_NVIDIA = "0x10de"

Params = Mapping[str, str]


def gpu_facts(facts: Mapping[str, Reading]) -> dict[int, dict[str, Reading]]:
    """The flat facts grouped by GPU index."""
    out: dict[int, dict[str, Reading]] = defaultdict(dict)
    for path, reading in facts.items():
        if m := _GPU_PATH.match(path):
            out[int(m.group(1))][m.group(2)] = reading
    return dict(sorted(out.items()))


def pci_scan(sys_root: Path) -> int | None:
    """NVIDIA GPUs on the PCI bus under `sys_root` (a host's /sys); None when it cannot be read."""
    devices = sys_root / "bus" / "pci" / "devices"
    if not devices.is_dir():
        return None
    count = 0
    for dev in devices.iterdir():
        try:
            vendor = (dev / "vendor").read_text().strip().lower()
            klass = (dev / "class").read_text().strip().lower()
        except OSError:
            continue
        count += vendor == _NVIDIA and klass[:6] in _GPU_CLASSES
    return count


def _ok(reading: Reading | None) -> bool:
    return reading is not None and reading.status == "ok"


def gpu_count(ctx: CheckContext, params: Params) -> Outcome:
    """NVML's GPU count agrees with the PCI bus and with the baseline the aggregator holds."""
    gpus = gpu_facts(ctx.collect())
    nvml_count = len(gpus)
    pci = ctx.pci_gpu_count()
    details = {"nvml": str(nvml_count), "pci": "unreadable" if pci is None else str(pci)}
    problems = []
    if pci is not None and pci != nvml_count:
        problems.append(f"NVML sees {nvml_count} GPUs but the PCI bus has {pci}")
    expected = params.get("expected_gpus")
    if expected:
        details["expected"] = expected
        if int(expected) != nvml_count:
            problems.append(f"{nvml_count} GPUs, the accepted baseline has {expected}")
    if problems:
        return Outcome("fail", "; ".join(problems), details=details)
    if nvml_count == 0:
        return Outcome("fail", "no GPU visible to NVML", details=details)
    basis = "baseline and PCI scan" if expected and pci is not None else "PCI scan"
    if pci is None:
        basis = "baseline" if expected else "nothing to compare (no baseline, /sys unreadable)"
    return Outcome("pass", f"{nvml_count} GPUs, matching the {basis}", details=details)


def driver_nvml(ctx: CheckContext, params: Params) -> Outcome:
    """The kernel driver is loaded and NVML initialises and answers."""
    nvml = ctx.nvml()
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return Outcome("fail", f"NVML does not start: {exc}")
    try:
        version = nvml.nvmlSystemGetDriverVersion()
        count = nvml.nvmlDeviceGetCount()
        for i in range(count):
            nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i))
    except Exception as exc:
        return Outcome("fail", f"NVML started but does not answer: {exc}")
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # a failed shutdown does not undo a good answer
            pass
    version = version.decode() if isinstance(version, bytes) else version
    return Outcome(
        "pass",
        f"driver {version} loaded, NVML answers for {count} GPUs",
        details={"driver_version": str(version), "gpus": str(count)},
    )


def _per_gpu(ctx: CheckContext, judge) -> Outcome:
    """Run `judge(index, facts) -> (problem | None, unsupported)` over every GPU."""
    gpus = gpu_facts(ctx.collect())
    if not gpus:
        return Outcome.skip("no GPU")
    problems, unsupported, details = [], [], {}
    for index, facts in gpus.items():
        problem, not_supported = judge(facts)
        if not_supported:
            unsupported.append(index)
            details[f"gpu{index}"] = "not supported"
        elif problem:
            problems.append(f"GPU {index}: {problem}")
            details[f"gpu{index}"] = problem
        else:
            details[f"gpu{index}"] = "ok"
    if problems:
        return Outcome("fail", "; ".join(problems), details=details)
    if len(unsupported) == len(gpus):
        return Outcome.skip("not supported by these GPUs", **details)
    judged = len(gpus) - len(unsupported)
    extra = f" ({len(unsupported)} not supported)" if unsupported else ""
    return Outcome("pass", f"{judged} GPUs ok{extra}", details=details)


def persistence_mode(ctx: CheckContext, params: Params) -> Outcome:
    """Persistence mode is on, so the driver stays initialised between jobs."""

    def judge(f: dict[str, Reading]):
        r = f.get("persistence_mode")
        if not _ok(r):
            return None, True
        return (None if r.value else "persistence mode off"), False

    return _per_gpu(ctx, judge)


def ecc(ctx: CheckContext, params: Params) -> Outcome:
    """ECC on where supported, no uncorrected errors since boot, no page retirement or row
    remap pending."""

    def judge(f: dict[str, Reading]):
        mode = f.get("ecc_mode_current")
        if not _ok(mode):
            return None, True
        issues = []
        if not mode.value:
            issues.append("ECC off")
        volatile = f.get("ecc_uncorrected_volatile")
        if _ok(volatile) and volatile.value:
            issues.append(f"{volatile.value} uncorrected ECC errors since boot")
        for name, what in (
            ("retired_pages_pending", "page retirement pending"),
            ("remapped_rows_pending", "row remap pending (reset the GPU)"),
            ("remapped_rows_failed", "row remap failed (replace the GPU)"),
        ):
            r = f.get(name)
            if _ok(r) and r.value:
                issues.append(what)
        return ("; ".join(issues) or None), False

    return _per_gpu(ctx, judge)


def nvlink(ctx: CheckContext, params: Params) -> Outcome:
    """Every NVLink link the GPU has is up."""

    def judge(f: dict[str, Reading]):
        up, total = f.get("nvlink_links_up"), f.get("nvlink_links_total")
        if not (_ok(up) and _ok(total)) or not total.value:
            return None, True
        return (None if up.value == total.value else f"{up.value}/{total.value} links up"), False

    return _per_gpu(ctx, judge)


def pcie_link(ctx: CheckContext, params: Params) -> Outcome:
    """PCIe link at its maximum width (a fail) and generation (a warning: GPUs lower the
    generation when idle to save power, so only a loaded GPU proves it)."""
    gpus = gpu_facts(ctx.collect())
    if not gpus:
        return Outcome.skip("no GPU")
    narrow, slow, details = [], [], {}
    for index, f in gpus.items():
        vals = {k: f.get(f"pcie_link_{k}") for k in ("width_current", "width_max", "gen_current")}
        vals["gen_max"] = f.get("pcie_link_gen_max")
        if not all(_ok(r) for r in vals.values()):
            details[f"gpu{index}"] = "not reported"
            continue
        v = {k: r.value for k, r in vals.items()}
        details[f"gpu{index}"] = f"gen {v['gen_current']}/{v['gen_max']} x{v['width_current']}"
        details[f"gpu{index}"] += f"/x{v['width_max']}"
        if v["width_current"] < v["width_max"]:
            narrow.append(f"GPU {index} at x{v['width_current']} of x{v['width_max']}")
        if v["gen_current"] < v["gen_max"]:
            slow.append(f"GPU {index} at gen {v['gen_current']} of {v['gen_max']}")
    if narrow:
        return Outcome("fail", "; ".join(narrow + slow), details=details)
    if slow:
        msg = "; ".join(slow) + " (idle GPUs downshift; rerun under load to confirm)"
        return Outcome("warn", msg, details=details)
    msg = f"{len(gpus)} GPUs at maximum PCIe width and generation"
    return Outcome("pass", msg, details=details)


DEFAULT_XID_WINDOW_S = 86400.0
_MAX_XID_DETAILS = 60  # the aggregator keeps 64 details per result


def xid(ctx: CheckContext, params: Params) -> Outcome:
    """XIDs each GPU reported within `window_s` seconds: none passes; any fails here, and
    the aggregator, which holds the XID table, grades each code (details `gpuI.xidN`: the
    count since the watch began)."""
    window_s = float(params.get("window_s", DEFAULT_XID_WINDOW_S))
    gpus = gpu_facts(ctx.collect())
    if not gpus:
        return Outcome.skip("no GPU visible to NVML")
    watched = {i: g for i, g in gpus.items() if "xid_count" in g}
    if not watched:
        return Outcome.skip("this agent watches no XIDs (no XID facts)")
    for g in watched.values():
        if g["xid_count"].status != "ok":
            return Outcome("error", f"XIDs not watched: {g['xid_count'].error}")
    since = ctx.now() - window_s
    seen = [
        (i, code, count)
        for i, g in watched.items()
        for code, count, last_s in _xid_codes(g)
        if last_s >= since
    ]
    details = {"window_s": f"{window_s:g}"}
    details |= {f"gpu{i}.xid{code}": str(n) for i, code, n in seen[:_MAX_XID_DETAILS]}
    if not seen:
        hours = window_s / 3600
        return Outcome(
            "pass", f"no XID on {len(watched)} GPUs in the last {hours:g} h", details=details
        )
    shown = "; ".join(f"GPU {i}: XID {code} x{n}" for i, code, n in seen)
    return Outcome("fail", f"XIDs in the last {window_s / 3600:g} h: {shown}", details=details)


def _xid_codes(gpu: Mapping[str, Reading]) -> list[tuple[int, int, float]]:
    """(code, count, last seen) of each `xids[j]` entry of one GPU's facts that is complete."""
    out, j = [], 0
    while (code := gpu.get(f"xids[{j}].code")) is not None:
        count, last = gpu.get(f"xids[{j}].count"), gpu.get(f"xids[{j}].last_seen_unix_s")
        j += 1
        if _ok(code) and _ok(count) and _ok(last):
            out.append((int(code.value), int(count.value), float(last.value)))  # type: ignore[arg-type, union-attr]
    return out


CONFORMANCE = {
    "gpu-count": gpu_count,
    "driver-nvml": driver_nvml,
    "persistence-mode": persistence_mode,
    "ecc": ecc,
    "nvlink": nvlink,
    "pcie-link": pcie_link,
    "xid": xid,
}
