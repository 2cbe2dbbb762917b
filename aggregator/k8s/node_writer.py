"""What Plumb writes on Nodes (leader only, opt-in): labels, an ownership annotation, conditions.

Labels `plumb.dev/recipe` (the node's pool) and `plumb.dev/drift` (worst open severity, or
`none`) let schedulers and dashboards select on the stack; `plumb.dev/validated-stack`
(the first 16 hex digits of the stack hash, aggregator/gates.py) marks a node that passed
validation at the stack it runs now, and goes the moment a stack fact changes, so gang jobs
can be placed only on nodes validated at their current stack; the `GpuStackDrift` condition
says why, and `PlumbAgentDown` says the node's agent stopped reporting. The labels Plumb
set are listed in the `plumb.dev/owned-labels` annotation, so a label it no longer sets is
removed, even by a new leader; only `plumb.dev/` labels are ever written or pruned, never
`nvidia.com/*` or NFD's. A node is patched only when what it should carry changed since the
last write.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client

from plumb.aggregator.drift import SEVERITIES
from plumb.aggregator.drift.evaluation import Evaluator, pool_name
from plumb.aggregator.gates import LABEL_HASH_CHARS, validated_stack
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.validation.model import CheckResult, health

log = logging.getLogger(__name__)

PREFIX = "plumb.dev/"
OWNED_ANNOTATION = "plumb.dev/owned-labels"
DRIFT_CONDITION = "GpuStackDrift"
AGENT_CONDITION = "PlumbAgentDown"
HEALTH_CONDITION = "GpuHealthCheckFailed"
_STRATEGIC = "application/strategic-merge-patch+json"
_TIMEOUT_S = 10
# The API server keeps condition messages short in practice; a long finding list is cut here.
_MESSAGE_MAX = 1024


@dataclass(frozen=True)
class Condition:
    """One node condition as Plumb wants it."""

    type: str
    status: bool
    reason: str
    message: str


@dataclass(frozen=True)
class NodeMark:
    """Everything Plumb wants on one Node."""

    name: str
    labels: dict[str, str]
    conditions: tuple[Condition, ...]


def node_marks(
    state: LiveState,
    evaluator: Evaluator,
    agent_stale_s: float,
    now: datetime,
    checks: Mapping[str, list[CheckResult]] | None = None,
) -> list[NodeMark]:
    """What every known node should carry: its pool and worst open drift as labels, a
    GpuStackDrift condition listing its open findings, and whether its agent reports; where
    ``checks`` holds the node's latest check results, a `plumb.dev/gpu-health` label
    (pass|warn|fail) and a GpuHealthCheckFailed condition naming what failed, and where
    they passed at the stack the node runs now, `plumb.dev/validated-stack`."""
    stale_before = now - timedelta(seconds=agent_stale_s)
    marks = []
    for node in state.nodes():
        resolution = evaluator.resolutions.get(node.name)
        findings = evaluator.drift.open_findings(node.name)
        worst = next((s for s in SEVERITIES if any(f.severity == s for f in findings)), None)
        labels = {PREFIX + "drift": worst or "none"}
        if resolution is not None:  # a pool "eks/h100/ubuntu/any/any" as a label value
            labels[PREFIX + "recipe"] = pool_name(resolution).replace("/", ".")
        drift = Condition(
            DRIFT_CONDITION,
            bool(findings),
            "DriftOpen" if findings else "NoDrift",
            "; ".join(
                f"{f.severity} {f.kind} {f.component}: expected {f.expected or '-'}, "
                f"observed {f.observed or '-'}"
                for f in findings
            )
            or "the node matches its recipe",
        )
        if not node.connected:
            agent = Condition(AGENT_CONDITION, True, "AgentDisconnected", "no agent stream")
        elif node.last_report_at is None or node.last_report_at < stale_before:
            agent = Condition(AGENT_CONDITION, True, "AgentSilent", "no report recently")
        else:
            agent = Condition(AGENT_CONDITION, False, "AgentReporting", "agent streaming")
        conditions = (drift, agent)
        results = (checks or {}).get(node.name, ())
        stack = validated_stack(node, results)
        if stack is not None:
            labels[PREFIX + "validated-stack"] = stack[:LABEL_HASH_CHARS]
        verdict, why = health(results)
        if verdict is not None:
            labels[PREFIX + "gpu-health"] = verdict
            conditions += (
                Condition(
                    HEALTH_CONDITION,
                    verdict == "fail",
                    {"fail": "ChecksFailed", "warn": "ChecksWarned"}.get(verdict, "ChecksPassed"),
                    "; ".join(f"{r.check_id} {r.status}: {r.message}" for r in why)
                    or "the latest checks passed",
                ),
            )
        marks.append(NodeMark(node.name, labels, conditions))
    return marks


def _time(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def label_patch(mark: NodeMark, node: dict[str, Any]) -> dict[str, Any]:
    """The metadata patch that sets `mark.labels` and prunes the plumb.dev/ labels owned before."""
    labels = {k: v for k, v in mark.labels.items() if k.startswith(PREFIX)}
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    try:
        owned = json.loads(annotations.get(OWNED_ANNOTATION) or "[]")
    except ValueError:
        owned = []  # a hand-edited annotation: prune nothing rather than guess
    patch: dict[str, Any] = dict(labels)
    for label in owned if isinstance(owned, list) else ():
        if isinstance(label, str) and label.startswith(PREFIX) and label not in labels:
            patch[label] = None  # strategic merge: null removes the key
    return {
        "metadata": {
            "labels": patch,
            "annotations": {OWNED_ANNOTATION: json.dumps(sorted(labels))},
        }
    }


def condition_patch(mark: NodeMark, node: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The status patch for Plumb's conditions; the transition time moves only on a change."""
    current = {c.get("type"): c for c in ((node.get("status") or {}).get("conditions") or ())}
    out = []
    for cond in mark.conditions:
        status = "True" if cond.status else "False"
        old = current.get(cond.type) or {}
        changed = old.get("status") != status
        out.append(
            {
                "type": cond.type,
                "status": status,
                "reason": cond.reason,
                "message": cond.message[:_MESSAGE_MAX],
                "lastHeartbeatTime": _time(now),
                "lastTransitionTime": _time(now)
                if changed
                else old.get("lastTransitionTime", _time(now)),
            }
        )
    return {"status": {"conditions": out}}


class NodeWriter:
    """Applies NodeMarks to Nodes; remembers what it wrote so unchanged nodes cost nothing."""

    def __init__(self, api: client.ApiClient):
        self._core = client.CoreV1Api(api)
        self._written: dict[str, NodeMark] = {}

    def forget(self) -> None:
        """Drop the memory of past writes (on gaining leadership: another replica wrote since)."""
        self._written.clear()

    def pending(self, marks: list[NodeMark]) -> list[NodeMark]:
        """The marks that differ from what was last written."""
        return [m for m in marks if self._written.get(m.name) != m]

    def apply(self, mark: NodeMark) -> None:
        """Write one node's labels, annotation and conditions (blocking: run it in a thread)."""
        node = self._core.read_node(mark.name, _request_timeout=_TIMEOUT_S)
        body = self._core.api_client.sanitize_for_serialization(node)
        self._core.patch_node(
            mark.name,
            label_patch(mark, body),
            _content_type=_STRATEGIC,
            _request_timeout=_TIMEOUT_S,
        )
        self._core.patch_node_status(
            mark.name,
            condition_patch(mark, body, datetime.now(UTC)),
            _content_type=_STRATEGIC,
            _request_timeout=_TIMEOUT_S,
        )
        self._written[mark.name] = mark
        log.info("node marked", extra={"node": mark.name, "labels": mark.labels})
