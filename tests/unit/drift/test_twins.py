"""Baselines learned from twins, stragglers and regressions, with every expected median, spread
and verdict worked out by hand from the figures below."""

from __future__ import annotations

from datetime import UTC, datetime

from plumb.aggregator.drift.twins import Figure, learn, regression, steps, stragglers
from plumb.aggregator.recipes import load_catalog

RULES = load_catalog().drift.twins  # min_twins 3, straggler below 0.15, regression step 0.10
H100 = ("H100 SXM5 80GB", 8, "nvswitch")
A100 = ("A100 SXM4 80GB", 8, "nvswitch")
T1, T2 = datetime(2026, 7, 1, 3, 0, tzinfo=UTC), datetime(2026, 7, 1, 4, 0, tzinfo=UTC)


def _fig(node: str, value: float, group=H100, check="nccl-allreduce", at=T2) -> Figure:
    return Figure(node, check, value, "GB/s", group, "stack-a", at)


# Five H100 nodes: sorted 368, 450, 455, 460, 470.
FLEET = [
    _fig("h1", 460),
    _fig("h2", 450),
    _fig("h3", 470),
    _fig("h4", 455),
    _fig("h5", 368),
    _fig("a1", 230, A100),
    _fig("a2", 240, A100),
]


def test_the_rules_are_the_shipped_data():
    assert (RULES.min_twins, RULES.straggler.below, RULES.regression.step) == (3, 0.15, 0.10)


def test_a_group_learns_the_median_and_median_absolute_deviation_of_its_latest_figures():
    (h100,) = learn(FLEET, RULES)  # two A100 nodes are fewer than min_twins: no baseline
    # median of 368 450 455 460 470 is 455; deviations 87 5 0 5 15 -> sorted 0 5 5 15 87 -> 5
    assert (h100.model, h100.gpus, h100.fabric, h100.check, h100.unit) == (
        "H100 SXM5 80GB",
        8,
        "nvswitch",
        "nccl-allreduce",
        "GB/s",
    )
    assert (h100.twins, h100.median, h100.spread) == (5, 455, 5)


def test_a_node_20_percent_under_its_twins_is_a_straggler_even_above_the_datasheet():
    found = stragglers(FLEET, RULES)
    assert list(found) == ["h5"]
    (obs,) = found["h5"]
    # h5's twins: 450 455 460 470 -> median 457.5; 368 / 457.5 = 0.804 -> 20 % under
    assert (obs.kind, obs.component, obs.severity) == ("straggler", "nccl-allreduce", "warning")
    assert obs.expected == "within 15% of its twins' median"
    assert obs.observed == (
        "368 GB/s, 20% under the median 457.5 GB/s of its 4 twins (8x H100 SXM5 80GB, nvswitch)"
    )
    assert "drain" in obs.remediation and "rerun" in obs.remediation


def test_a_node_just_inside_the_threshold_is_no_straggler():
    # twins of h5 still have median 457.5; 15 % under is 388.875: 390 is above it, 388 not
    assert stragglers([*FLEET[:4], _fig("h5", 390)], RULES) == {}
    assert list(stragglers([*FLEET[:4], _fig("h5", 388)], RULES)) == ["h5"]


def test_too_few_twins_grade_nobody():
    # three nodes: each has two twins, fewer than min_twins 3
    assert stragglers([_fig("h1", 460), _fig("h2", 460), _fig("h3", 100)], RULES) == {}


def test_twins_are_the_same_model_gpu_count_and_fabric_only():
    pcie = ("H100 SXM5 80GB", 8, "pcie")
    four = ("H100 SXM5 80GB", 4, "nvswitch")
    mixed = [*FLEET[:4], _fig("p1", 300, pcie), _fig("f1", 300, four)]
    assert stragglers(mixed, RULES) == {}


def test_a_step_down_between_two_runs_names_the_stack_change_between_them():
    before = [_fig("h1", 460, at=T1), _fig("h2", 460, at=T1), _fig("h3", 460, at=T1)]
    after = [_fig("h1", 377), _fig("h2", 420), _fig("h3", 377, A100)]
    # h1: 1 - 377/460 = 0.18 -> regression; h2: 1 - 420/460 = 0.087 < 0.10 -> none;
    # h3 moved to other hardware: not comparable
    (step,) = steps(before, after, RULES)
    assert step.latest.node == "h1" and round(step.fraction, 4) == 0.1804
    obs = regression(step, ["nccl.libraries[*].version 2.27.7 → 2.28.3"], RULES)
    assert (obs.kind, obs.component, obs.severity) == ("regression", "nccl-allreduce", "warning")
    assert obs.expected == "460 GB/s as at 2026-07-01 03:00 UTC"
    assert obs.observed == (
        "377 GB/s (−18%) at 2026-07-01 04:00 UTC, after nccl.libraries[*].version 2.27.7 → 2.28.3"
    )
    quiet = regression(step, [], RULES)
    assert quiet.observed.endswith("with no stack change between the runs")
