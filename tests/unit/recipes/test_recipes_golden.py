"""Golden resolutions for the combinations issue 3 names.

Each case's output (less the catalog digest and content hash, which change with any edit of
``recipes/``) is stored in ``golden/<case>.yaml``. After an intended change, regenerate with
``PLUMB_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/recipes -k golden`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from plumb.aggregator.recipes import Criteria, infer_criteria, resolve

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "eks-h100-training": (
        Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training"),
        {},
    ),
    "gke-a100-cos-training": (
        Criteria(service="gke", accelerator="a100", os="cos", intent="training"),
        None,
    ),
    "aks-h100-inference": (
        Criteria(service="aks", accelerator="h100", os="ubuntu", intent="inference"),
        dict(
            provider="azure",
            instance_type="Standard_ND96isr_H100_v5",
            kubelet="v1.34.1",
            kernel="6.8.0-1041-azure",
            driver="550.54.15",
            fabric_manager=None,
        ),
    ),
    "kind-any-accelerator": (Criteria(service="kind", intent="inference"), None),
    "l4-inference": (
        "infer",
        dict(
            gpu="NVIDIA L4",
            pci="0x27b8",
            gpus=1,
            provider="gcp",
            instance_type="g2-standard-8",
            os_id="cos",
            os_version="121",
            kernel="6.6.87+",
            kubelet="v1.33.4-gke.1245000",
            fabric_manager=None,
        ),
    ),
    "gb200-eks-training": (
        Criteria(service="eks", accelerator="gb200", os="ubuntu", intent="training"),
        dict(
            gpu="NVIDIA GB200",
            pci="0x2941",
            gpus=4,
            driver="575.57.08",
            fabric_manager=None,
            nccl=("2.24.3",),
            instance_type="p6e-gb200.36xlarge",
            kernel="6.8.0-1030-aws",
        ),
    ),
    "unknown-hardware-base-only": (
        Criteria(),
        dict(gpu="NVIDIA Quantum Widget", pci="0xffff", gpus=2, provider=None, instance_type=None),
    ),
    "eks-h100-ubuntu-22.04-excluded": (
        Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training"),
        dict(os_version="22.04", kernel="5.15.0-1050-aws"),
    ),
}


def resolved(case: str, catalog, make_facts, as_of) -> dict:
    criteria, facts_args = CASES[case]
    facts = make_facts(**facts_args) if facts_args is not None else None
    if criteria == "infer":
        criteria = infer_criteria(facts, intent="inference", catalog=catalog)
    out = resolve(catalog, criteria, facts, as_of=as_of).to_dict()
    del out["catalog"], out["content_hash"]
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_resolution(case, catalog, make_facts, as_of):
    got = resolved(case, catalog, make_facts, as_of)
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("PLUMB_UPDATE_GOLDEN") == "1":
        path.write_text(yaml.safe_dump(got, sort_keys=True, width=100, allow_unicode=True))
    assert path.is_file(), f"missing golden {path.name}; run with PLUMB_UPDATE_GOLDEN=1"
    assert got == yaml.safe_load(path.read_text())
