"""Validation's side of the agent stream: RunChecks out, CheckResult in, as typed values.

Bounds every field an agent sends, so a broken or hostile agent cannot grow stored results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from plumb.v1 import agent_pb2

__all__ = ["AgentResult", "CheckRequest", "agent_result", "run_checks"]

MAX_MESSAGE_CHARS = 2000
MAX_DETAILS = 64
MAX_DETAIL_CHARS = 256
MAX_ID_CHARS = 128
_STATUSES = frozenset({"pass", "fail", "warn", "skip", "error"})


@dataclass(frozen=True)
class CheckRequest:
    """One check to run on a node."""

    id: str
    timeout_s: float
    parameters: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentResult:
    """One CheckResult as an agent sent it, bounded and checked."""

    request_id: str
    check_id: str
    status: str
    message: str
    value: float | None
    unit: str
    duration_s: float
    details: Mapping[str, str]


def run_checks(request_id: str, checks: list[CheckRequest]) -> agent_pb2.ConnectResponse:
    msg = agent_pb2.RunChecks(request_id=request_id, check_ids=[c.id for c in checks])
    for c in checks:
        msg.checks.add(id=c.id, timeout_s=c.timeout_s, parameters=dict(c.parameters))
    return agent_pb2.ConnectResponse(run_checks=msg)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def agent_result(msg: agent_pb2.CheckResult) -> AgentResult:
    """The typed, bounded form; an unknown status or a non-finite figure becomes `error`."""
    status, message = msg.status, _cut(msg.message, MAX_MESSAGE_CHARS)
    value = msg.value if msg.HasField("value") else None
    if status not in _STATUSES:
        status, message = "error", f"agent sent an unknown status {_cut(status, 32)!r}"
    if value is not None and not math.isfinite(value):
        status, message, value = "error", "agent sent a non-finite figure", None
    details = {
        _cut(k, MAX_ID_CHARS): _cut(v, MAX_DETAIL_CHARS)
        for k, v in sorted(msg.details.items())[:MAX_DETAILS]
    }
    duration = msg.duration_s if math.isfinite(msg.duration_s) and msg.duration_s >= 0 else 0.0
    return AgentResult(
        request_id=_cut(msg.request_id, MAX_ID_CHARS),
        check_id=_cut(msg.check_id, MAX_ID_CHARS),
        status=status,
        message=message,
        value=value,
        unit=_cut(msg.unit, 32),
        duration_s=duration,
        details=details,
    )
