"""What-if verdicts on hand-written nodes, each expected verdict written from the tables.

recipes/knowledge/cuda_driver.yaml: CUDA 13.0 needs 580.65.06 (580 under minor-version
compatibility); CUDA 12.7 has no row. driver_branches.yaml: R535 ended 2026-06 and R570
2026-02, R595 is a production branch to 2027-03, R630 is not listed. overlays/base.yaml: the
recipe wants driver >= 580 and Kubernetes >= 1.32. The date is pinned to 2026-12-01.
"""

from __future__ import annotations

import datetime as dt

import pytest

from plumb.aggregator.drift.whatif import NodeAnswer, apply_plan, check_plan, judge, summarize
from plumb.aggregator.errors import InvalidInput
from plumb.aggregator.recipes import infer_criteria, load_catalog, resolve
from plumb.facts import Reading

CATALOG = load_catalog()
RULES = CATALOG.drift.whatif
AS_OF = dt.date(2026, 12, 1)
POOL = "eks/h100/ubuntu/any/any"
CUDA_DOCS = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"


def h100(driver: str = "580.95.05", cuda: str = "13.0") -> dict[str, Reading]:
    """A p5 H100 node on EKS (Ubuntu 24.04) with fabric manager and CUDA `cuda` in a container
    image; its kernel module matches its driver."""
    facts: dict[str, object] = {
        "host.cloud_provider": "aws",
        "host.instance_type": "p5.48xlarge",
        "host.os_id": "ubuntu",
        "host.os_version_id": "24.04",
        "host.kernel": "6.8.0-1030-aws",
        "host.kubelet_version": "v1.33.5-eks-113cf36",
        "driver.driver_version": driver,
        "driver.kernel_module_version": driver,
        "driver.fabric_manager_version": driver,
        "driver.kernel_module_flavour": "open",
        "cuda.runtimes[0].path": f"/usr/local/cuda/lib64/libcudart.so.{cuda}",
        "cuda.runtimes[0].version": cuda,
        "nccl.libraries[0].path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
        "nccl.libraries[0].version": "2.27.7",
        "gpus[0].index": 0,
        "gpus[0].name": "NVIDIA H100 80GB HBM3",
        "gpus[0].pci_device_id": "0x233010DE",
        "gpus[0].fabric_state": "completed",
    }
    return {p: Reading.ok(v) for p, v in facts.items()}  # type: ignore[arg-type]


def recipe_of(facts):
    return resolve(CATALOG, infer_criteria(facts, catalog=CATALOG), facts, as_of=AS_OF)


def what_if(facts: dict[str, Reading], **plan: str) -> NodeAnswer:
    checked = check_plan({k.replace("_", "-"): v for k, v in plan.items()}, RULES)
    return judge("h100-1", POOL, facts, checked, recipe_of, CATALOG)


def rules(answer: NodeAnswer, verdict: str) -> set[str]:
    return {d.rule for d in answer.decisions if d.verdict == verdict}


def test_a_driver_below_cuda_13s_minimum_is_blocked_citing_the_cuda_table() -> None:
    answer = what_if(h100(cuda="13.0"), driver="570.195.03")
    assert answer.verdict == "blocked"
    (cuda,) = [d for d in answer.decisions if d.rule == "cuda-runtime-driver"]
    assert cuda.verdict == "blocked" and cuda.severity == "critical"
    assert "CUDA runtime 13.0 needs driver >= 580 " in cuda.reason
    assert "570.195.03" in cuda.reason and "580.65.06" in cuda.fix
    assert cuda.source.startswith(CUDA_DOCS) and not cuda.already
    # R570 ended 2026-02, and the recipe wants R580 or later: both block as well.
    assert rules(answer, "blocked") == {
        "cuda-runtime-driver",
        "driver-branch-eol",
        "constraint:driver-minimum",
    }
    assert answer.changes == (("driver", "580.95.05", "570.195.03"),)


def test_a_driver_on_an_ended_branch_is_blocked_by_the_lifecycle_table() -> None:
    answer = what_if(h100(), driver="535.288.01")
    (eol,) = [d for d in answer.decisions if d.rule == "driver-branch-eol"]
    assert eol.verdict == "blocked"
    assert "R535" in eol.reason and "(2026-06)" in eol.reason
    assert "supported-drivers-and-cuda-toolkit-versions" in eol.source
    assert answer.verdict == "blocked"


def test_a_newer_compatible_driver_is_safe_with_fabric_manager_and_module_moved_along() -> None:
    facts = h100(cuda="13.0")
    answer = what_if(facts, driver="595.45.04")
    # R595 is a supported production branch, 595.45.04 >= 580.65.06 and >= 580: no rule holds.
    assert (answer.verdict, answer.decisions) == ("safe", ())
    planned = apply_plan(facts, {"driver": "595.45.04"}, RULES)
    assert planned["driver.fabric_manager_version"] == Reading.ok("595.45.04")
    assert planned["driver.kernel_module_version"] == Reading.ok("595.45.04")
    assert facts["driver.driver_version"] == Reading.ok("580.95.05")  # live facts untouched


def test_a_new_feature_branch_is_worth_knowing_but_safe() -> None:
    answer = what_if(h100(), driver="590.44.01")
    assert answer.verdict == "safe"
    (info,) = answer.decisions
    assert (info.rule, info.severity) == ("driver-branch-eol", "info")
    assert "R590 is a new-feature branch" in info.reason


def test_what_the_tables_cannot_judge_is_a_review_never_safe() -> None:
    cuda = what_if(h100(driver="595.45.04"), cuda="12.7")
    assert cuda.verdict == "review"
    (unknown,) = cuda.decisions
    assert unknown.rule == "cuda-runtime-driver" and unknown.severity is None
    assert "CUDA 12.7 is not in the CUDA minimum-driver table" in unknown.reason

    branch = what_if(h100(), driver="630.10")
    assert branch.verdict == "review"
    assert rules(branch, "review") == {"driver-branch-eol"}


def test_a_recipe_constraint_blocks_a_kubernetes_below_its_floor() -> None:
    answer = what_if(h100(), kubernetes="1.31.4")
    assert answer.verdict == "blocked"
    (k8s,) = answer.decisions
    assert k8s.rule == "constraint:k8s-version" and k8s.source == "recipe base"
    assert "k8s.version = 1.31.4, needs >= 1.32" in k8s.reason


def test_a_rule_that_holds_today_counts_and_says_so() -> None:
    answer = what_if(h100(driver="570.195.03", cuda="12.8"), nccl="2.28.3")
    assert answer.verdict == "blocked"
    eol = next(d for d in answer.decisions if d.rule == "driver-branch-eol")
    assert eol.already


def test_the_worst_node_decides_its_pool_and_the_worst_pool_the_answer() -> None:
    def node(name: str, pool: str, verdict: str) -> NodeAnswer:
        return NodeAnswer(name, pool, verdict, (), ())  # type: ignore[arg-type]

    answer = summarize(
        {"driver": "595.45.04"},
        [node("b", "p1", "safe"), node("a", "p1", "review"), node("c", "p2", "safe")],
    )
    assert answer.verdict == "review"
    assert [(p.pool, p.verdict, [n.node for n in p.nodes]) for p in answer.pools] == [
        ("p1", "review", ["a", "b"]),
        ("p2", "safe", ["c"]),
    ]


@pytest.mark.parametrize(
    ("plan", "said"),
    [
        ({"firmware": "1.0"}, "unknown component 'firmware'"),
        ({"driver": "latest"}, "driver version 'latest' is not a version"),
        ({}, "the plan names no component"),
    ],
)
def test_a_bad_plan_is_refused_naming_what_is_wrong(plan: dict, said: str) -> None:
    with pytest.raises(InvalidInput, match=said) as caught:
        check_plan(plan, RULES)
    assert caught.value.hint
