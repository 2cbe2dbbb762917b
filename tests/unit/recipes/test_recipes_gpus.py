"""The GPU catalog: keyed by PCI device id, complete for the GPUs users run, each with its
peak figures or the reason one is missing, and every accelerator with its own overlay.

Expected ids, names and figures are copied by hand from the shared real captures
(shared/real-captures/nvidia-smi/*.xml `<pci_device_id>` and `<product_name>`), the shipped
profiles (agent/simulate/profiles/*.yaml) and the sources the catalog cites.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from plumb.aggregator.recipes import Criteria, RecipeError, load_catalog, resolve
from plumb.aggregator.recipes.catalog import default_root
from plumb.aggregator.recipes.schema import GpuRow

PROFILES = Path(__file__).resolve().parents[3] / "agent" / "simulate" / "profiles"

# (nvidia-smi <product_name>, <pci_device_id>) of each shared capture -> accelerator.
CAPTURES = [
    ("NVIDIA H100 80GB HBM3", "233010DE", "h100"),  # qx-h100.xml
    ("NVIDIA B200", "290110DE", "b200"),  # qx-b200.xml
    ("NVIDIA L40S", "26B910DE", "l40s"),  # qx-l40s.xml
    ("NVIDIA A100-SXM4-80GB", "20B210DE", "a100"),  # telegraf_a100-sxm4-v12.xml
    ("NVIDIA A10G", "000000DE", "a10g"),  # telegraf_a10g.xml: id scrubbed, found by name
]

# NVML names of the parts users run today (issue 15) -> accelerator key.
PARTS = {
    "NVIDIA B200": "b200",
    "NVIDIA B300 SXM6 AC": "b300",
    "NVIDIA GB200": "gb200",
    "NVIDIA GB300": "gb300",
    "NVIDIA H100 PCIe": "h100",
    "NVIDIA H100 80GB HBM3": "h100",
    "NVIDIA H100 NVL": "h100",
    "NVIDIA H200": "h200",
    "NVIDIA H200 NVL": "h200",
    "NVIDIA H20": "h20",
    "NVIDIA H800": "h800",
    "NVIDIA A100-PCIE-40GB": "a100",
    "NVIDIA A100 80GB PCIe": "a100",
    "NVIDIA A100-SXM4-40GB": "a100",
    "NVIDIA A100-SXM4-80GB": "a100",
    "NVIDIA A10": "a10",
    "NVIDIA A10G": "a10g",
    "NVIDIA A30": "a30",
    "NVIDIA A40": "a40",
    "NVIDIA A2": "a2",
    "NVIDIA L4": "l4",
    "NVIDIA L40": "l40",
    "NVIDIA L40S": "l40s",
    "NVIDIA L20": "l20",
    "Tesla T4": "t4",
    "Tesla V100-SXM2-32GB": "v100",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "rtx-pro-6000",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": "rtx-pro-6000",
    "NVIDIA RTX 6000 Ada Generation": "rtx-6000-ada",
    "NVIDIA RTX 4000 SFF Ada Generation": "rtx-4000-sff-ada",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA GeForce RTX 5090": "rtx-5090",
    "NVIDIA GB10": "gb10",
}


@pytest.mark.parametrize(("name", "pci", "accelerator"), CAPTURES)
def test_every_gpu_of_the_shared_captures_is_known(catalog, name, pci, accelerator):
    row = catalog.identify_gpu(name, pci)
    assert row is not None and row.accelerator == accelerator


@pytest.mark.parametrize(("name", "pci", "accelerator"), CAPTURES[:4])
def test_the_pci_device_id_alone_identifies_a_captured_gpu(catalog, name, pci, accelerator):
    row = catalog.identify_gpu(None, pci)
    assert row is not None and row.accelerator == accelerator


def test_the_pci_device_id_wins_over_the_name(catalog):
    # A driver that renames the part (or a cloud SKU name) does not move it to another row.
    assert catalog.identify_gpu("NVIDIA L40S", "0x233010DE").model == "H100 SXM5"


def test_every_gpu_of_the_shipped_profiles_is_known(catalog):
    for path in sorted(PROFILES.glob("*.yaml")):
        gpu = yaml.safe_load(path.read_text())["gpus"]["template"]
        row = catalog.identify_gpu(gpu["name"], str(gpu["pci_device_id"]))
        assert row is not None, f"{path.name}: {gpu['name']} is not in the catalog"


@pytest.mark.parametrize(("name", "accelerator"), sorted(PARTS.items()))
def test_the_parts_users_run_are_in_the_catalog(catalog, name, accelerator):
    row = catalog.identify_gpu(name, None)
    assert row is not None and row.accelerator == accelerator
    assert row.source.startswith(("http", "NVIDIA/", "pciutils/"))


def test_the_a100_sxm4_40gb_has_its_own_row(catalog):
    row = catalog.identify_gpu("NVIDIA A100-SXM4-40GB", "0x20B010DE")
    assert (row.memory_gb, row.peak_memory_bandwidth_tbps) == (40, 1.555)
    eighty = catalog.identify_gpu("NVIDIA A100-SXM4-80GB", "0x20B210DE")
    assert (eighty.memory_gb, eighty.peak_memory_bandwidth_tbps) == (80, 2.039)


def test_gb300_and_h200_nvl_have_their_peak_figures(catalog):
    gb300 = catalog.identify_gpu("NVIDIA GB300", None)
    assert (gb300.peak_memory_bandwidth_tbps, gb300.bf16_dense_tflops) == (8.0, 2500)
    nvl = catalog.identify_gpu("NVIDIA H200 NVL", None)
    assert (nvl.peak_memory_bandwidth_tbps, nvl.bf16_dense_tflops) == (4.8, 835)


def test_every_null_peak_figure_says_why(catalog):
    for row in catalog.gpus:
        for figure in ("peak_memory_bandwidth_tbps", "bf16_dense_tflops", "nvlink_bandwidth_gbps"):
            if getattr(row, figure) is None:
                assert row.peaks_unknown[figure], f"{row.model}: {figure} is null without reason"


def _row(**changes) -> dict:
    row = {
        "model": "X",
        "accelerator": "x",
        "nvml_names": ["NVIDIA X"],
        "architecture": "ada",
        "compute_capability": "8.9",
        "memory_gb": 24,
        "min_driver": "525",
        "min_cuda": "11.8",
        "peak_memory_bandwidth_tbps": 0.3,
        "bf16_dense_tflops": 121,
        "nvlink_bandwidth_gbps": None,
        "peaks_unknown": {"nvlink_bandwidth_gbps": "PCIe only"},
        "source": "https://example.invalid/datasheet",
    }
    return row | changes


def test_a_null_peak_without_a_reason_is_rejected():
    GpuRow.model_validate(_row())
    with pytest.raises(ValueError, match="bf16_dense_tflops is null"):
        GpuRow.model_validate(_row(bf16_dense_tflops=None))
    with pytest.raises(ValueError, match="has a value and a reason"):
        GpuRow.model_validate(_row(nvlink_bandwidth_gbps=100))


def test_an_accelerator_without_its_own_overlay_is_rejected(tmp_path):
    root = tmp_path / "recipes"
    shutil.copytree(default_root(), root)
    (root / "overlays" / "gb300.yaml").unlink()
    with pytest.raises(RecipeError, match="accelerator 'gb300' has no overlay"):
        load_catalog(root)


@pytest.mark.parametrize("accelerator", ["gb300", "rtx-pro-6000", "b300", "rtx-4090", "gb10"])
def test_accepted_accelerators_resolve_to_their_overlay(catalog, accelerator):
    resolution = resolve(catalog, Criteria(accelerator=accelerator))
    assert accelerator in resolution.applied
    assert resolution.warnings == ()
