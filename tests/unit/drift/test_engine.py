"""The drift engine: each kind of finding opens when its difference appears and closes after."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from plumb.aggregator.drift import DriftEngine, PoolTally, pool_majorities
from plumb.aggregator.recipes import infer_criteria, load_catalog, resolve
from plumb.facts import Reading

CATALOG = load_catalog()
RECIPE_DRIVER = "580.173.02"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


HOUR = timedelta(hours=1)


def h100_facts(**overrides: object) -> dict[str, Reading]:
    """An EKS H100 node, its driver from the GPU Operator, that matches its recipe; keyword
    overrides replace fact values."""
    facts = {
        "cluster.components.gpu_operator.version": "v26.7.0",
        "host.cloud_provider": "aws",
        "host.instance_type": "p5.48xlarge",
        "host.os_id": "ubuntu",
        "host.os_version_id": "22.04",
        "host.kernel": "5.15.0-1058-aws",
        "host.kubelet_version": "v1.33.5-eks-113cf36",
        "driver.driver_version": RECIPE_DRIVER,
        "driver.cuda_driver_version": "13.0",
        "driver.fabric_manager_version": RECIPE_DRIVER,
        "driver.kernel_module_flavour": "open",
        "nccl.libraries[0].path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
        "nccl.libraries[0].version": "2.27.7",
    }
    for i in range(2):
        facts |= {
            f"gpus[{i}].index": i,
            f"gpus[{i}].name": "NVIDIA H100 80GB HBM3",
            f"gpus[{i}].pci_device_id": "0x2330",
            f"gpus[{i}].vbios_version": "96.00.89.00.01",
            f"gpus[{i}].ecc_uncorrected_volatile": 0,
            f"gpus[{i}].nvlink_links_up": 18,
            f"gpus[{i}].nvlink_links_total": 18,
            f"gpus[{i}].pcie_link_width_current": 16,
            f"gpus[{i}].pcie_link_width_max": 16,
        }
    facts |= overrides
    return {path: Reading.ok(value) for path, value in facts.items()}  # type: ignore[arg-type]


def evaluate(engine: DriftEngine, facts, node="n1", majorities=None):
    resolution = resolve(CATALOG, infer_criteria(facts, catalog=CATALOG), facts)
    return engine.evaluate(node, facts, resolution, majorities or {})


@pytest.fixture
def engine() -> DriftEngine:
    return DriftEngine(CATALOG.drift, Clock(), xids=CATALOG.xids)


def kinds(engine: DriftEngine) -> set[tuple[str, str, str]]:
    return {(f.kind, f.component, f.severity) for f in engine.open_findings()}


def test_first_facts_become_the_baseline_and_a_matching_node_has_no_findings(engine):
    result = evaluate(engine, h100_facts())
    assert result.baseline is not None
    assert result.baseline.gpu_count == 2
    assert "driver.driver_version" in result.baseline.facts
    assert "gpus[0].ecc_uncorrected_volatile" not in result.baseline.facts  # volatile
    assert engine.open_findings() == []


def test_a_driver_ahead_of_the_recipe_is_a_warning_with_both_remedies_then_closes(engine):
    evaluate(engine, h100_facts())
    newer = {"driver.driver_version": "595.45.04", "driver.fabric_manager_version": "595.45.04"}
    opened = evaluate(engine, h100_facts(**newer)).opened
    recipe = next(f for f in opened if f.kind == "recipe")
    # R595 is a production branch inside the recipe's range (>= 580): warn, never page.
    assert (recipe.component, recipe.expected, recipe.observed, recipe.severity) == (
        "driver",
        RECIPE_DRIVER,
        "595.45.04",
        "warning",
    )
    assert "ahead of its recipe" in recipe.remediation
    assert "roll the node back" in recipe.remediation and "accept" in recipe.remediation
    assert not any(f.severity == "critical" for f in opened)
    closed = evaluate(engine, h100_facts()).closed
    assert recipe.id in {f.id for f in closed}
    assert all(f.closed_at is not None for f in closed)
    assert engine.open_findings() == []


def test_a_patch_of_the_same_branch_is_only_a_warning(engine):
    evaluate(engine, h100_facts())
    older = {"driver.driver_version": "580.95.05", "driver.fabric_manager_version": "580.95.05"}
    evaluate(engine, h100_facts(**older))
    assert ("recipe", "driver", "warning") in kinds(engine)
    recipe = next(f for f in engine.open_findings() if f.kind == "recipe")
    assert "behind its recipe" in recipe.remediation


def test_a_failing_knowledge_rule_is_a_constraint_finding(engine):
    # A CUDA 13.2 runtime needs an R595 driver; the node has R580.
    facts = h100_facts(
        **{
            "cuda.runtimes[0].path": "/usr/local/cuda/lib64/libcudart.so.13",
            "cuda.runtimes[0].version": "13.2",
        }
    )
    evaluate(engine, facts)
    assert any(kind == "constraint" for kind, _, _ in kinds(engine))
    evaluate(engine, h100_facts())
    assert not any(kind == "constraint" for kind, _, _ in kinds(engine))


def test_a_baseline_change_opens_and_accepting_it_closes(engine):
    evaluate(engine, h100_facts())
    bumped = h100_facts(**{"host.kernel": "5.15.0-1070-aws"})
    evaluate(engine, bumped)
    assert ("baseline", "host.kernel", "warning") in kinds(engine)
    (finding,) = [f for f in engine.open_findings() if f.kind == "baseline"]
    assert "(`plumb baseline accept n1`)" in finding.remediation  # pasteable, the node named
    engine.accept_baseline("n1", bumped)
    result = evaluate(engine, bumped)
    assert [f.component for f in result.closed] == ["host.kernel"]


def test_pool_majority_flags_the_odd_node_out_and_ties_flag_nobody(engine):
    same, odd = h100_facts(), h100_facts(**{"driver.driver_version": "580.95.05"})
    majorities = pool_majorities([same, same, odd], CATALOG.drift.pool)
    assert majorities["driver"] == RECIPE_DRIVER
    evaluate(engine, odd, majorities=majorities)
    assert ("pool", "driver", "warning") in kinds(engine)
    assert pool_majorities([same, odd, same, odd], CATALOG.drift.pool).get("driver") is None
    assert pool_majorities([same, odd], CATALOG.drift.pool) == {}  # below min_nodes


def test_gpu_health_readings_and_missing_gpus(engine):
    evaluate(engine, h100_facts())
    sick = h100_facts(
        **{
            "gpus[1].ecc_uncorrected_volatile": 3,
            "gpus[0].nvlink_links_up": 17,
            "gpus[1].pcie_link_width_current": 8,
        }
    )
    evaluate(engine, sick)
    # Links below the node's own baseline (18 links, x16): warnings (DESIGN.md's table).
    assert {
        ("health", "gpu1/ecc-uncorrected", "critical"),
        ("health", "gpu0/nvlink-down", "warning"),
        ("health", "gpu1/pcie-width", "warning"),
    } <= kinds(engine)
    one_gpu = {p: r for p, r in h100_facts().items() if not p.startswith("gpus[1]")}
    evaluate(engine, one_gpu)
    assert ("health", "gpus/missing", "critical") in kinds(engine)
    assert not any(c.startswith("gpu1/") for _, c, _ in kinds(engine))
    evaluate(engine, h100_facts())
    assert not any(kind == "health" for kind, _, _ in kinds(engine))


def test_a_changed_observation_closes_and_reopens_so_each_transition_is_kept(engine):
    evaluate(engine, h100_facts())
    first = evaluate(engine, h100_facts(**{"driver.driver_version": "595.45.04"})).opened
    second = evaluate(engine, h100_facts(**{"driver.driver_version": "595.58.03"}))
    old = next(f for f in first if f.kind == "recipe")
    new = next(f for f in second.opened if f.kind == "recipe")
    assert old.id in {f.id for f in second.closed}
    assert new.observed == "595.58.03" and new.id != old.id


def test_restored_findings_that_still_hold_keep_their_identity(engine):
    evaluate(engine, h100_facts())
    opened = evaluate(engine, h100_facts(**{"driver.driver_version": "595.45.04"})).opened
    restarted = DriftEngine(CATALOG.drift, Clock(), xids=CATALOG.xids)
    restarted.restore(opened, dict(engine.baselines))
    result = evaluate(restarted, h100_facts(**{"driver.driver_version": "595.45.04"}))
    assert not result.opened and not result.closed and result.baseline is None
    assert {f.id for f in restarted.open_findings()} == {f.id for f in opened}


def test_adopting_the_stored_copy_of_a_finding_takes_its_id_only_when_content_matches(engine):
    evaluate(engine, h100_facts())
    opened = evaluate(engine, h100_facts(**{"driver.driver_version": "595.45.04"})).opened
    recipe = next(f for f in opened if f.kind == "recipe")
    stored = replace(recipe, id="stored-by-another-replica", opened_at=recipe.opened_at - HOUR)
    stale = replace(recipe, id="older-content", observed="595.1.1")
    engine.adopt([stored, stale, replace(stored, id="closed", closed_at=recipe.opened_at)])
    held = next(f for f in engine.open_findings() if f.kind == "recipe")
    assert held == stored
    assert not evaluate(engine, h100_facts(**{"driver.driver_version": "595.45.04"})).opened


def test_the_pool_tally_follows_members_as_they_change_and_leave():
    tally = PoolTally(CATALOG.drift.pool)
    for name in ("a", "b", "c"):
        tally.add(name, h100_facts())
    assert tally.majorities()["driver"] == RECIPE_DRIVER
    tally.add("a", h100_facts(**{"driver.driver_version": "580.95.05"}))
    tally.add("b", h100_facts(**{"driver.driver_version": "580.95.05"}))
    assert tally.majorities()["driver"] == "580.95.05"
    tally.discard("a")
    assert tally.majorities() == {}  # two members left: below min_nodes
    assert len(tally) == 2
