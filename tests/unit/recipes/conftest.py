"""Fixtures for the recipe engine: the repository's catalog and simulated node facts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from plumb.aggregator.recipes import Catalog, load_catalog
from plumb.facts import Reading

AS_OF = dt.date(2026, 9, 1)  # fixed, so the lifecycle rule and the goldens never age

FactsMaker = Callable[..., dict[str, Reading]]


def _facts(
    *,
    gpu: str | None = "NVIDIA H100 80GB HBM3",
    pci: str | None = "0x2330",
    gpus: int = 8,
    driver: str | None = "580.173.02",
    fabric_manager: str | None = "580.173.02",
    kernel_module: str = "open",
    cuda_runtimes: tuple[str, ...] = ("12.8",),
    nccl: tuple[str, ...] = ("2.27.7",),
    mig: bool = False,
    provider: str | None = "aws",
    instance_type: str | None = "p5.48xlarge",
    os_id: str = "ubuntu",
    os_version: str = "24.04",
    kernel: str = "6.8.0-1030-aws",
    kubelet: str = "v1.33.5-eks-113cf36",
) -> dict[str, Reading]:
    """A node's flat facts; ``None`` leaves a fact out, as a node that lacks it would."""
    out: dict[str, Reading] = {
        "host.hostname": Reading.ok("gpu-node-1"),
        "host.kernel": Reading.ok(kernel),
        "host.os_id": Reading.ok(os_id),
        "host.os_version_id": Reading.ok(os_version),
        "host.kubelet_version": Reading.ok(kubelet),
        "driver.kernel_module_flavour": Reading.ok(kernel_module),
    }
    optional = {
        "host.cloud_provider": provider,
        "host.instance_type": instance_type,
        "driver.driver_version": driver,
    }
    out.update({path: Reading.ok(v) for path, v in optional.items() if v is not None})
    out["driver.fabric_manager_version"] = (
        Reading.ok(fabric_manager) if fabric_manager else Reading.not_supported()
    )
    for i, version in enumerate(cuda_runtimes):
        out[f"cuda.runtimes[{i}].path"] = Reading.ok(f"/usr/lib/cuda{i}/libcudart.so")
        out[f"cuda.runtimes[{i}].version"] = Reading.ok(version)
    for i, version in enumerate(nccl):
        out[f"nccl.libraries[{i}].version"] = Reading.ok(version)
    for i in range(gpus if gpu or pci else 0):
        out[f"gpus[{i}].index"] = Reading.ok(i)  # the agent writes it for every GPU it sees
        if gpu:
            out[f"gpus[{i}].name"] = Reading.ok(gpu)
        if pci:
            out[f"gpus[{i}].pci_device_id"] = Reading.ok(pci)
        out[f"gpus[{i}].uuid"] = Reading.ok(f"GPU-{i:04d}")
        out[f"gpus[{i}].mig_mode_current"] = Reading.ok(mig)
    return out


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="session")
def as_of() -> dt.date:
    return AS_OF


@pytest.fixture(scope="session")
def make_facts() -> FactsMaker:
    return _facts
