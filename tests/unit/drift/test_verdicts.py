"""Verdicts an SRE would give on real machines, from node facts written by hand.

The nodes follow the shared real captures (shared/real-captures/README.md): the L40S of
nvidia-smi/qx-l40s.xml (AWS g6e.2xlarge, driver 595.91.07, CUDA 13.2, PCIe gen 4 x8 of x16),
and a one-GPU A100-SXM4-40GB VM. Each expected list is every finding the node gets, each with
its severity from DESIGN.md's table, written from the facts, not from the code's output.
"""

from __future__ import annotations

import datetime as dt
from datetime import UTC, datetime, timedelta

from plumb.aggregator.drift import DriftEngine, pool_majorities
from plumb.aggregator.recipes import infer_criteria, load_catalog, resolve
from plumb.facts import Reading

CATALOG = load_catalog()
AS_OF = dt.date(2026, 12, 1)  # R535 ended 2026-06, R570 2026-02; R580/R595 supported
RECIPE_DRIVER = "580.173.02"  # registry.yaml's driver pin
OPERATOR = {"cluster.components.gpu_operator.version": "v26.7.0"}  # the recipe's own version


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def l40s_g6e(**overrides: object) -> dict[str, Reading]:
    """The g6e.2xlarge of qx-l40s.xml: one L40S at PCIe gen 4 x8 (of x16), no NVLink, no
    fabric manager; EKS on the Amazon Linux 2023 accelerated AMI."""
    facts: dict[str, object] = {
        "host.cloud_provider": "aws",
        "host.instance_type": "g6e.2xlarge",
        "host.os_id": "amzn",
        "host.os_version_id": "2023",
        "host.kernel": "6.1.141-155.222.amzn2023.x86_64",
        "host.kubelet_version": "v1.33.5-eks-113cf36",
        "driver.driver_version": "595.91.07",
        "driver.cuda_driver_version": "13.2",
        "driver.kernel_module_flavour": "open",
        "gpus[0].index": 0,
        "gpus[0].name": "NVIDIA L40S",
        "gpus[0].pci_device_id": "0x26B910DE",
        "gpus[0].pcie_link_gen_current": 4,
        "gpus[0].pcie_link_gen_max": 4,
        "gpus[0].pcie_link_width_current": 8,
        "gpus[0].pcie_link_width_max": 16,
        "gpus[0].ecc_uncorrected_volatile": 0,
        "gpus[0].fabric_state": "N/A",
    }
    facts |= overrides
    out = {p: Reading.ok(v) for p, v in facts.items()}  # type: ignore[arg-type]
    out["driver.fabric_manager_version"] = Reading.not_supported()
    out["gpus[0].nvlink_links_up"] = Reading.not_supported()
    return out


def a100_vm(**overrides: object) -> dict[str, Reading]:
    """A one-GPU A100-SXM4-40GB VM (GCP a2-highgpu-1g): its 12 NVLinks lead nowhere, no
    NVSwitch is passed through, fabric manager is not installed, NVML reports no fabric."""
    facts: dict[str, object] = {
        "host.cloud_provider": "gcp",
        "host.instance_type": "a2-highgpu-1g",
        "host.os_id": "ubuntu",
        "host.os_version_id": "22.04",
        "host.kernel": "6.8.0-1025-gcp",
        "host.kubelet_version": "v1.33.4-gke.1245000",
        "driver.driver_version": RECIPE_DRIVER,
        "driver.cuda_driver_version": "13.0",
        "driver.kernel_module_flavour": "open",
        "gpus[0].index": 0,
        "gpus[0].name": "NVIDIA A100-SXM4-40GB",
        "gpus[0].pci_device_id": "0x20B010DE",
        "gpus[0].nvlink_links_up": 0,
        "gpus[0].nvlink_links_total": 12,
        "gpus[0].pcie_link_gen_max": 4,
        "gpus[0].pcie_link_width_current": 16,
        "gpus[0].pcie_link_width_max": 16,
        "gpus[0].fabric_state": "N/A",
    }
    facts |= overrides
    out = {p: Reading.ok(v) for p, v in facts.items()}  # type: ignore[arg-type]
    out["driver.fabric_manager_version"] = Reading.not_supported()
    return out


def h100_node(**overrides: object) -> dict[str, Reading]:
    """An HGX H100 EKS node on the recipe's driver, its driver from the GPU Operator."""
    facts: dict[str, object] = {
        **OPERATOR,
        "host.cloud_provider": "aws",
        "host.instance_type": "p5.48xlarge",
        "host.os_id": "ubuntu",
        "host.os_version_id": "24.04",
        "host.kernel": "6.8.0-1030-aws",
        "host.kubelet_version": "v1.33.5-eks-113cf36",
        "driver.driver_version": RECIPE_DRIVER,
        "driver.fabric_manager_version": RECIPE_DRIVER,
        "driver.cuda_driver_version": "13.0",
        "driver.kernel_module_flavour": "open",
    }
    for i in range(8):
        facts |= {
            f"gpus[{i}].index": i,
            f"gpus[{i}].name": "NVIDIA H100 80GB HBM3",
            f"gpus[{i}].pci_device_id": "0x233010DE",
            f"gpus[{i}].fabric_state": "completed",  # nvidia-smi's "Completed"
            f"gpus[{i}].nvlink_links_up": 18,
            f"gpus[{i}].pcie_link_gen_max": 5,
            f"gpus[{i}].pcie_link_width_current": 16,
        }
    facts |= overrides
    return {p: Reading.ok(v) for p, v in facts.items()}  # type: ignore[arg-type]


def verdict(engine: DriftEngine, facts, node="n1", majorities=None):
    """(kind, component, severity, expected, observed) of every open finding of `node`."""
    resolution = resolve(CATALOG, infer_criteria(facts, catalog=CATALOG), facts, as_of=AS_OF)
    engine.evaluate(node, facts, resolution, majorities or {})
    return sorted(
        (f.kind, f.component, f.severity, f.expected, f.observed)
        for f in engine.open_findings(node)
    )


def fresh() -> DriftEngine:
    return DriftEngine(CATALOG.drift, Clock(), xids=CATALOG.xids)


def test_l40s_on_a_newer_driver_from_the_operator_is_one_warning_never_critical():
    # 595.91.07 is R595 (production, supported to 2027-03), above the recipe's R580 floor and
    # CUDA 13.2's 595.45.04: the node is ahead of its 580.173.02 pin, nothing more. On Ubuntu:
    # on Amazon Linux the accelerated AMI owns the driver (mixin os-amazonlinux), no pin.
    engine = fresh()
    ubuntu = {"host.os_id": "ubuntu", "host.os_version_id": "24.04"}
    assert verdict(engine, l40s_g6e(**OPERATOR, **ubuntu)) == [
        ("recipe", "driver", "warning", RECIPE_DRIVER, "595.91.07"),
    ]
    (finding,) = engine.open_findings()
    assert "ahead of its recipe" in finding.remediation
    assert "roll the node back" in finding.remediation  # remedy one
    assert "move the recipe's driver pin" in finding.remediation  # remedy two


def test_l40s_whose_host_image_owns_the_driver_is_judged_by_range_and_quiet():
    # No GPU Operator in sight: the EKS accelerated AMI installed the driver, so the operator's
    # pin says nothing; the driver is inside every range, and x8 is this shape's normal.
    assert verdict(fresh(), l40s_g6e()) == []


def test_a_one_gpu_a100_sxm4_vm_without_nvswitch_gets_no_fabric_manager_finding():
    # No fabric manager and no NVSwitch fabric in the facts; its NVLinks were down (0 of 12)
    # from the first report, so they are its baseline, not a fault.
    assert verdict(fresh(), a100_vm()) == []


def test_an_l40s_at_its_shapes_x8_is_quiet_and_a_drop_from_x16_to_x4_warns():
    engine = fresh()
    assert verdict(engine, l40s_g6e()) == []  # x8 at baseline
    assert verdict(engine, l40s_g6e()) == []  # and still x8: quiet
    wide = fresh()
    assert verdict(wide, l40s_g6e(**{"gpus[0].pcie_link_width_current": 16})) == []
    assert verdict(wide, l40s_g6e(**{"gpus[0].pcie_link_width_current": 4})) == [
        ("health", "gpu0/pcie-width", "warning", "16 (baseline)", "4"),
    ]


def test_a_pool_of_x8_shapes_is_quiet_and_a_node_narrower_than_its_pool_warns():
    x8 = l40s_g6e()
    majorities = pool_majorities([x8, x8, x8], CATALOG.drift.pool)
    assert majorities["gpus[].pcie_link_width_current"] == "8"
    assert verdict(fresh(), x8, majorities=majorities) == []
    # A node that came up at x4 (so x4 is its own baseline) among x8 peers.
    x4 = l40s_g6e(**{"gpus[0].pcie_link_width_current": 4})
    assert verdict(fresh(), x4, majorities=majorities) == [
        ("health", "gpu0/pcie-width", "warning", "8 (pool)", "4"),
    ]


def test_an_unknown_gpu_is_named_in_an_info_finding_and_the_recipe_warnings():
    facts = l40s_g6e(
        **{"gpus[0].name": "NVIDIA Graphics Device", "gpus[0].pci_device_id": "0x2E2A10DE"}
    )
    resolution = resolve(CATALOG, infer_criteria(facts, catalog=CATALOG), facts, as_of=AS_OF)
    assert resolution.criteria.accelerator == "any"
    named = "NVIDIA Graphics Device (PCI device 0x2e2a)"
    assert resolution.unknown_gpus == (named,)
    assert any(named in w for w in resolution.warnings)
    engine = fresh()
    engine.evaluate("n1", facts, resolution, {})
    (finding,) = engine.open_findings()
    assert (finding.kind, finding.component, finding.severity) == (
        "constraint",
        "unknown-gpu",
        "info",
    )
    assert named in finding.observed


def test_a_node_moved_to_an_old_end_of_life_driver_is_critical():
    engine = fresh()
    assert verdict(engine, h100_node()) == []
    old = {"driver.driver_version": "550.163.01", "driver.fabric_manager_version": "550.163.01"}
    assert verdict(engine, h100_node(**old, **{"driver.cuda_driver_version": "12.4"})) == [
        ("baseline", "driver.cuda_driver_version", "warning", "13.0", "12.4"),
        ("baseline", "driver.driver_version", "warning", RECIPE_DRIVER, "550.163.01"),
        ("baseline", "driver.fabric_manager_version", "warning", RECIPE_DRIVER, "550.163.01"),
        # R550 is past end of life: no more fixes.
        (
            "constraint",
            "driver-branch-eol",
            "critical",
            "",
            "driver branch R550 of 550.163.01 is past end of life: no more security fixes or"
            " kernel-compatibility updates",
        ),
        # Below the recipe's floor (base.yaml: driver.version >= 580).
        (
            "constraint",
            "driver-minimum",
            "critical",
            "driver.version >= 580",
            "driver.version = 550.163.01, needs >= 580",
        ),
        ("recipe", "driver", "warning", RECIPE_DRIVER, "550.163.01"),
    ]


def test_a_kernel_module_other_than_the_driver_library_is_critical():
    # The driver was upgraded to 580.173.02 without a reboot: the loaded module is older.
    facts = h100_node(**{"driver.kernel_module_version": "580.126.20"})
    assert verdict(fresh(), facts) == [
        (
            "constraint",
            "driver-kernel-module",
            "critical",
            "",
            "kernel module 580.126.20 differs from the user-space driver library 580.173.02"
            " (driver/library version mismatch): NVML and CUDA fail until the module is"
            " reloaded",
        ),
    ]
    assert verdict(fresh(), h100_node(**{"driver.kernel_module_version": RECIPE_DRIVER})) == []


def test_fabric_manager_rules_follow_the_nodes_own_fabric():
    # The HGX H100's GPUs report a fabric that has not finished training and no fabric manager
    # is installed: CUDA init fails with error 802, so it is critical.
    facts = h100_node(**{f"gpus[{i}].fabric_state": "not_started" for i in range(8)})
    facts["driver.fabric_manager_version"] = Reading.not_supported()
    found = verdict(fresh(), facts)
    assert [(k, c, s) for k, c, s, _, _ in found] == [("constraint", "fabric-manager", "critical")]


def test_a_trained_fabric_without_a_visible_fabric_manager_is_quiet():
    # Every GPU reports its fabric `completed`: fabric manager ran and trained the NVSwitches
    # (from the GPU Operator's driver container, which the host's packages do not show).
    facts = h100_node()
    facts["driver.fabric_manager_version"] = Reading.not_supported()
    assert verdict(fresh(), facts) == []
    # One GPU still in progress is not a trained fabric.
    found = verdict(fresh(), facts | {"gpus[3].fabric_state": Reading.ok("in_progress")})
    assert [(k, c, s) for k, c, s, _, _ in found] == [("constraint", "fabric-manager", "critical")]
