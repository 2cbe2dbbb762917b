"""The pure parts of remediation: the circuit breaker's cap, which nodes a round cordons or
holds back, and how a Node's annotations read as Plumb's cordon."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import get_args

import pytest

from plumb.aggregator.drift import KINDS, SEVERITIES, DriftFinding
from plumb.aggregator.k8s.nodes import NodeInfo, node_info
from plumb.aggregator.k8s.remediation import Cordon, cordon_cap, cordon_of, plan
from plumb.aggregator.settings import AggregatorSettings, RemediationSettings

OPENED = datetime(2026, 7, 1, 3, 0, tzinfo=UTC)


def finding(node: str, fid: str, kind="health", component="gpu3/xid-79", severity="critical"):
    return DriftFinding(
        id=fid,
        node=node,
        kind=kind,
        component=component,
        expected="no XID",
        observed="XID 79: GPU has fallen off the bus",
        severity=severity,
        remediation="drain the node and reboot it",
        recipe_hash="h",
        opened_at=OPENED,
    )


@pytest.mark.parametrize(
    ("fraction", "absolute", "size", "cap"),
    [
        (0.1, None, 10, 1),
        (0.1, None, 9, 0),  # rounds down: a tenth of 9 nodes is none
        (0.1, None, 100, 10),
        (0.3, None, 10, 3),  # 0.3 * 10 is 3.0000000000000004 in floats
        (0.29, None, 100, 29),  # and 0.29 * 100 is 28.999999999999996
        (0.5, None, 2, 1),
        (1.0, None, 3, 3),
        (0.5, 2, 100, 2),  # the absolute cap wins
        (0.5, 10, 4, 2),  # the share wins
        (0.1, None, 0, 0),
    ],
)
def test_the_cap_is_the_share_rounded_down_then_the_absolute_cap(fraction, absolute, size, cap):
    settings = RemediationSettings(max_cordoned_fraction=fraction, max_cordoned_nodes=absolute)
    assert cordon_cap(size, settings) == cap


def test_cordoning_is_off_by_default_and_takes_critical_health_findings():
    settings = AggregatorSettings().remediation
    assert settings.cordon is False
    assert (settings.kinds, settings.severities, settings.max_cordoned_fraction) == (
        ["health"],
        ["critical"],
        0.1,
    )


def test_the_settings_name_every_drift_kind_and_severity():
    fields = RemediationSettings.model_fields
    assert get_args(get_args(fields["kinds"].annotation)[0]) == KINDS
    assert get_args(get_args(fields["severities"].annotation)[0]) == SEVERITIES


def test_a_share_above_one_is_refused():
    with pytest.raises(ValueError, match="max_cordoned_fraction"):
        RemediationSettings(max_cordoned_fraction=1.5)


SCHEDULABLE = Cordon(unschedulable=False)


def test_the_breaker_cordons_the_first_sick_node_of_a_small_pool_and_holds_back_the_second():
    pools = {"eks/h100/ubuntu/any/any": {"a", "b", "c", "d"}}
    nodes = dict.fromkeys("abcd", SCHEDULABLE)
    open_ = {"a": [finding("a", "fa")], "b": [finding("b", "fb")]}
    decisions = plan(
        pools, nodes, lambda n: open_.get(n, []), RemediationSettings(max_cordoned_fraction=0.25)
    )
    assert [(d.node, d.action, d.unschedulable, d.pool_size, d.cap) for d in decisions] == [
        ("a", "cordon", 0, 4, 1),
        ("b", "blocked", 1, 4, 1),
    ]
    assert decisions[0].share == "1/4 (cap 1)"
    assert decisions[1].share == "1/4 (cap 1)"


def test_nodes_cordoned_by_anyone_count_and_are_left_alone():
    pools = {"p": {"a", "b", "ops"}}
    # An operator cordoned `ops` (no annotation of Plumb's); it is sick too.
    nodes = {"a": SCHEDULABLE, "b": SCHEDULABLE, "ops": Cordon(unschedulable=True)}
    open_ = {n: [finding(n, f"f{n}")] for n in nodes}
    decisions = plan(
        pools, nodes, lambda n: open_[n], RemediationSettings(max_cordoned_fraction=0.67)
    )
    # A cap of 2 of 3 with one down already: `a` cordons, `b` is blocked, `ops` untouched.
    assert [(d.node, d.action) for d in decisions] == [("a", "cordon"), ("b", "blocked")]


def test_only_the_configured_kinds_and_severities_cordon_and_seen_findings_do_not():
    pools = {"p": {"warn", "drift", "seen", "new"}}
    nodes = {n: SCHEDULABLE for n in pools["p"]}
    nodes["seen"] = Cordon(unschedulable=False, seen=frozenset({"old"}))
    nodes["new"] = Cordon(unschedulable=False, seen=frozenset({"old"}))
    open_ = {
        "warn": [finding("warn", "w", severity="warning")],
        "drift": [finding("drift", "d", kind="recipe", component="driver")],
        "seen": [finding("seen", "old")],
        "new": [finding("new", "old"), finding("new", "fresh", component="gpu0/xid-48")],
    }
    decisions = plan(pools, nodes, lambda n: open_[n], RemediationSettings(max_cordoned_fraction=1))
    assert [(d.node, [f.id for f in d.findings]) for d in decisions] == [("new", ["fresh"])]


def test_pools_count_only_their_members_that_are_nodes():
    # `gone` reports to Plumb but has no Node object: it neither counts nor can be cordoned.
    pools = {"p": {"a", "b", "gone"}}
    nodes = {"a": SCHEDULABLE, "b": SCHEDULABLE}
    decisions = plan(
        pools,
        nodes,
        lambda n: [finding(n, f"f{n}")],
        RemediationSettings(max_cordoned_fraction=0.5),
    )
    assert [(d.node, d.action, d.pool_size) for d in decisions] == [
        ("a", "cordon", 2),
        ("b", "blocked", 2),
    ]


def test_each_pool_has_its_own_breaker():
    pools = {"p1": {"a", "b"}, "p2": {"c", "d"}}
    nodes = dict.fromkeys("abcd", SCHEDULABLE)
    decisions = plan(
        pools,
        nodes,
        lambda n: [finding(n, f"f{n}")] if n in "ac" else [],
        RemediationSettings(max_cordoned_fraction=0.5),
    )
    assert [(d.node, d.pool, d.action) for d in decisions] == [
        ("a", "p1", "cordon"),
        ("c", "p2", "cordon"),
    ]


def node(unschedulable: bool, **annotations: str) -> NodeInfo:
    return node_info(
        {
            "metadata": {"name": "n", "annotations": {"other": "x", **annotations}},
            "spec": {"unschedulable": unschedulable},
        }
    )


CORDONED = {"plumb.dev/cordoned-by": json.dumps({"ids": ["f1"], "at": "2026-07-01T03:00:00Z"})}


def test_the_watcher_keeps_only_the_cordon_and_plumbs_remediation_annotations():
    info = node(True, **CORDONED)
    assert info.unschedulable is True
    assert info.remediation == CORDONED


def test_a_node_plumb_cordoned_is_plumbs_and_its_findings_are_not_yet_seen():
    assert cordon_of(node(True, **CORDONED)) == Cordon(True, frozenset({"f1"}), frozenset())


def test_kubectl_uncordon_of_plumbs_cordon_counts_its_findings_as_seen():
    seen = {"plumb.dev/uncordoned-by": json.dumps({"ids": ["f0"]})}
    assert cordon_of(node(False, **CORDONED, **seen)).seen == {"f0", "f1"}


def test_an_operators_cordon_or_a_hand_edited_annotation_is_not_plumbs():
    assert cordon_of(node(True)) == Cordon(True, None, frozenset())
    assert cordon_of(node(True, **{"plumb.dev/cordoned-by": "by hand"})).cordoned_for is None
