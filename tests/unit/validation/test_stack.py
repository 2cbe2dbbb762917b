"""The stack a figure was measured on: its hash moves with versions only, and the twin group
(GPU model, count, fabric) follows the node's own facts and recipes/drift.yaml `twins`."""

from __future__ import annotations

from plumb.aggregator.recipes import load_catalog
from plumb.aggregator.validation.stack import stack_of
from plumb.facts import Reading

CATALOG = load_catalog()


def _facts(
    name="NVIDIA H100 80GB HBM3",
    pci="0x2330",
    gpus=8,
    nvlink=18,
    fabric_manager: str | None = "580.173.02",
    nccl="2.27.7",
    serial="1650",
) -> dict[str, Reading]:
    out = {
        "driver.driver_version": Reading.ok("580.173.02"),
        "nccl.libraries[0].version": Reading.ok(nccl),
        "host.kernel": Reading.ok("6.8.0-1030-aws"),
        "driver.fabric_manager_version": (
            Reading.ok(fabric_manager) if fabric_manager else Reading.not_supported()
        ),
    }
    for i in range(gpus):
        out |= {
            f"gpus[{i}].index": Reading.ok(i),
            f"gpus[{i}].name": Reading.ok(name),
            f"gpus[{i}].pci_device_id": Reading.ok(pci),
            f"gpus[{i}].serial": Reading.ok(f"{serial}{i}"),
            f"gpus[{i}].uuid": Reading.ok(f"GPU-{serial}-{i}"),
            f"gpus[{i}].nvlink_links_total": Reading.ok(nvlink),
        }
    return out


def test_an_hgx_h100_with_fabric_manager_is_eight_h100_sxm5_on_nvswitch():
    stack = stack_of(_facts(), CATALOG)
    assert stack is not None and stack.group == ("H100 SXM5", 8, "nvswitch")
    assert len(stack.hash) == 64


def test_nvlink_without_a_switch_fabric_is_nvlink_and_no_link_at_all_is_pcie():
    bridged = _facts("NVIDIA A100 80GB PCIe", "0x20b5", gpus=2, nvlink=12, fabric_manager=None)
    l4 = _facts("NVIDIA L4", "0x27b8", gpus=1, nvlink=0, fabric_manager=None)
    assert stack_of(bridged, CATALOG).fabric == "nvlink"  # type: ignore[union-attr]
    assert stack_of(l4, CATALOG).group == ("L4", 1, "pcie")  # type: ignore[union-attr]


def test_twins_share_a_stack_hash_that_moves_with_a_version_and_not_with_serials():
    one, twin = stack_of(_facts(), CATALOG), stack_of(_facts(serial="1651"), CATALOG)
    upgraded = stack_of(_facts(nccl="2.28.3"), CATALOG)
    assert one is not None and twin is not None and upgraded is not None
    assert one.hash == twin.hash
    assert upgraded.hash != one.hash and upgraded.group == one.group


def test_a_node_without_gpus_has_no_stack():
    assert stack_of({"host.kernel": Reading.ok("6.8.0")}, CATALOG) is None
