"""Each knowledge rule fires on one simulated node and stays silent on another."""

from __future__ import annotations

import datetime as dt
import shutil

from plumb.aggregator.recipes import Criteria, load_catalog, resolve
from plumb.aggregator.recipes.catalog import default_root
from plumb.facts import Reading

EKS_H100 = Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training")


def rules(catalog, facts, criteria=EKS_H100):
    found = resolve(catalog, criteria, facts, as_of=dt.date(2026, 9, 1)).findings
    return {(f.rule, f.severity) for f in found}, found


def test_a_healthy_h100_node_has_no_findings(catalog, make_facts):
    assert rules(catalog, make_facts())[0] == set()


def test_driver_too_old_for_a_cuda_runtime(catalog, make_facts):
    fired, found = rules(catalog, make_facts(driver="550.54.15", fabric_manager="550.54.15"))
    assert ("cuda-runtime-driver", "warning") in fired
    message = next(f.message for f in found if f.rule == "cuda-runtime-driver")
    assert "12.8" in message and "570.26" in message and "550.54.15" in message
    fired, _ = rules(catalog, make_facts(cuda_runtimes=("13.0",)))
    assert ("cuda-runtime-driver", "critical") not in fired
    fired, _ = rules(
        catalog, make_facts(driver="570.86.15", fabric_manager="570.86.15", cuda_runtimes=("13.0",))
    )
    assert ("cuda-runtime-driver", "critical") in fired


def test_driver_below_the_gpus_minimum(catalog, make_facts):
    facts = make_facts(
        gpu="NVIDIA B200", pci="0x2901", driver="565.57.01", fabric_manager="565.57.01"
    )
    b200 = Criteria(service="eks", accelerator="b200")
    assert ("gpu-minimum-driver", "critical") in rules(catalog, facts, b200)[0]
    facts = make_facts(gpu="NVIDIA B200", pci="0x2901")
    assert ("gpu-minimum-driver", "critical") not in rules(catalog, facts, b200)[0]


def test_driver_branch_past_end_of_life_is_critical(catalog, make_facts):
    # DESIGN.md: an end-of-life branch gets no security or kernel-compat fixes: critical.
    fired, _ = rules(catalog, make_facts(driver="570.195.03", fabric_manager="570.195.03"))
    assert ("driver-branch-eol", "critical") in fired  # R570 ended 2026-02; rule dated 2026-09
    assert not any(rule == "driver-branch-eol" for rule, _ in rules(catalog, make_facts())[0])


def test_a_branch_the_table_does_not_list_is_judged_by_the_long_term_branches_after_it(
    catalog, make_facts
):
    # R515 (telegraf_a10g.xml's 515.105.01) is not in driver_branches.yaml; it predates R535,
    # a long-term branch that itself ended 2026-06, and no branch outlives a long-term one.
    _, found = rules(catalog, make_facts(driver="515.105.01", fabric_manager=None))
    (eol,) = [f for f in found if f.rule == "driver-branch-eol"]
    assert eol.severity == "critical"
    assert "R515 of 515.105.01 is past end of life" in eol.message and "R535" in eol.message
    assert eol.source == "https://docs.nvidia.com/datacenter/tesla/drivers/driver-lifecycle.html"
    # An unlisted branch after every ended long-term branch (the only long-term branch after
    # R600 is R620, supported to 2029-09) is not known to have ended: no lifecycle finding.
    fired, _ = rules(catalog, make_facts(driver="600.10.01", fabric_manager=None))
    assert not any(rule == "driver-branch-eol" for rule, _ in fired)


def test_fabric_manager_missing_where_the_gpus_report_an_nvswitch_fabric(catalog, make_facts):
    facts = make_facts(fabric_manager=None)
    facts |= {f"gpus[{i}].fabric_state": Reading.ok("In Progress") for i in range(8)}
    fired, found = rules(catalog, facts)
    assert ("fabric-manager", "critical") in fired
    assert "not_supported" in next(f.message for f in found if f.rule == "fabric-manager")
    l4 = make_facts(gpu="NVIDIA L4", pci="0x27b8", fabric_manager=None, provider="gcp")
    assert not any(r == "fabric-manager" for r, _ in rules(catalog, l4, Criteria())[0])


def test_an_nvswitch_sku_without_fabric_facts_gets_no_fabric_manager_finding(catalog, make_facts):
    # Never by SKU alone: 8 H100 SXM GPUs, no fabric manager, no fabric state reported.
    fired, _ = rules(catalog, make_facts(fabric_manager=None))
    assert not any(r == "fabric-manager" for r, _ in fired)


def test_fabric_manager_version_must_equal_the_driver(catalog, make_facts):
    fired, _ = rules(catalog, make_facts(fabric_manager="580.126.20"))
    assert ("fabric-manager", "critical") in fired


def test_known_bad_combination_present(catalog, make_facts):
    gb200 = Criteria(service="eks", accelerator="gb200")
    bad = make_facts(gpu="NVIDIA GB200", pci="0x2941", driver="575.57.08", fabric_manager=None)
    assert ("known-bad:r575-on-gb200", "critical") in rules(catalog, bad, gb200)[0]
    good = make_facts(gpu="NVIDIA GB200", pci="0x2941", driver="570.195.03", fabric_manager=None)
    assert not any(r == "known-bad:r575-on-gb200" for r, _ in rules(catalog, good, gb200)[0])


def test_known_bad_over_a_multi_valued_fact_needs_only_one_match(catalog, make_facts):
    fired, _ = rules(catalog, make_facts(nccl=("2.27.7", "2.19.3")))
    assert ("known-bad:nccl-2.19-cumem", "warning") in fired
    fired, _ = rules(catalog, make_facts(nccl=("2.27.7",)))
    assert ("known-bad:nccl-2.19-cumem", "warning") not in fired


def test_findings_cite_a_knowledge_source(catalog, make_facts):
    _, found = rules(catalog, make_facts(driver="550.54.15", fabric_manager=None))
    assert found and all(f.source.startswith(("http", "NVIDIA/")) for f in found)


def test_no_facts_no_findings(catalog):
    assert resolve(catalog, EKS_H100).findings == ()


def test_a_findings_texts_are_drift_yamls_filled_from_the_node(tmp_path, make_facts):
    # The texts live in recipes/drift.yaml (knowledge.cases); editing them edits the finding.
    root = tmp_path / "recipes"
    shutil.copytree(default_root(), root)
    drift = root / "drift.yaml"
    old = "remediation: install and start nvidia-fabricmanager {driver}, the driver's exact version"
    text = drift.read_text()
    assert old in text
    drift.write_text(text.replace(old, "remediation: pin nvidia-fabricmanager to {driver}"))
    _, found = rules(load_catalog(root), make_facts(fabric_manager="580.126.20"))
    (fm,) = [f for f in found if f.rule == "fabric-manager"]
    assert (
        fm.message
        == "fabric manager 580.126.20 differs from driver 580.173.02: it refuses to start"
    )
    assert fm.remediation == "pin nvidia-fabricmanager to 580.173.02"
    assert fm.source == "https://github.com/NVIDIA/gpu-operator/issues/544"
