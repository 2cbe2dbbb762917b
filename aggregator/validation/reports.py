"""A validation run as JSON (the API's shape), CTRF JSON, and JUnit XML.

CTRF (ctrf.io) is what AICR emits; JUnit is what CI systems read. Both name a test
`<node>/<check>`. Mapping of statuses: pass -> passed; fail and error -> failed (an error is
no pass: the run exits non-zero, unlike AICR's `other`); skip -> skipped; warn -> other;
not yet in -> pending.

Messages, names and details come from agents, so any text: JSON escapes what it must, and
JUnit writes each character XML 1.0 cannot hold (most C0 controls, U+FFFE/U+FFFF) as a
visible `\\xNN` / `\\uNNNN`, so the report always parses.
"""

from __future__ import annotations

import re
import uuid
import xml.etree.ElementTree as ET
from datetime import datetime

from plumb.aggregator import __version__
from plumb.aggregator.validation.model import CheckResult, GpuWait, Stack, ValidationRun

__all__ = ["ctrf", "junit", "result_json", "run_json", "stack_json", "wait_json"]

_CTRF_STATUS = {
    "pass": "passed",
    "fail": "failed",
    "error": "failed",
    "skip": "skipped",
    "warn": "other",
}


# What XML 1.0 cannot carry, even escaped (its `Char` production); surrogates never reach
# here (protobuf strings are valid UTF-8).
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text: str) -> str:
    """`text` with every character XML cannot hold written as its escape."""
    return _NOT_XML.sub(
        lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 256 else f"\\u{ord(m[0]):04x}", text
    )


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def result_json(r: CheckResult) -> dict:
    return {
        "node": r.node,
        "check": r.check_id,
        "phase": r.phase,
        "severity": r.severity,
        "status": r.status,
        "message": r.message,
        "value": r.value,
        "unit": r.unit or None,
        "threshold": r.threshold,
        "peak": r.peak,
        "ratio_to_peak": round(r.ratio_to_peak, 4) if r.ratio_to_peak is not None else None,
        "duration_s": round(r.duration_s, 4),
        "details": dict(r.details),
        "remediation": r.remediation if r.status in ("fail", "warn", "error") else None,
        "finished_at": _iso(r.finished_at),
        "stack": stack_json(r.stack) if r.stack is not None else None,
    }


def wait_json(w: GpuWait) -> dict:
    """Checks not started yet because other GPU-exclusive checks hold their nodes' GPUs."""
    return {
        "node": w.target,
        "checks": list(w.checks),
        "gpus_of": list(w.nodes),
        "held_by": list(w.held_by),
        "since": _iso(w.since),
    }


def stack_json(s: Stack) -> dict:
    """What the node ran when it measured: its stack hash and twin group."""
    return {"hash": s.hash, "model": s.model, "gpus": s.gpus, "fabric": s.fabric}


def run_json(run: ValidationRun, *, results: bool = True) -> dict:
    """The run: what was asked, progress, and (optionally) every result so far."""
    counts = run.counts()
    body = {
        "id": run.id,
        "state": run.state,
        "result": run.result,
        "created_at": _iso(run.created_at),
        "finished_at": _iso(run.finished_at),
        "phases": list(run.phases),
        "checks": [c.id for c in run.checks],
        "nodes": list(run.nodes),
        "deadline_s": run.deadline_s,
        "progress": {
            "total": run.total,
            "done": run.total - counts["pending"],
            **counts,
            "waiting_for_gpus": [wait_json(w) for w in run.waiting.values()],
        },
    }
    if results:
        body["results"] = [result_json(r) for r in run.ordered()]
    return body


def _ms(t: datetime | None) -> int:
    return int(t.timestamp() * 1000) if t else 0


def _pending(run: ValidationRun) -> list[tuple[str, str, str]]:
    return [
        (node, c.id, c.phase)
        for c in run.checks
        for node in run.targets(c)
        if (node, c.id) not in run.results
    ]


def ctrf(run: ValidationRun) -> dict:
    """The run as a CTRF report."""
    tests = [
        {
            "name": f"{r.node}/{r.check_id}",
            "status": _CTRF_STATUS[r.status],
            "duration": int(r.duration_s * 1000),
            "message": r.message,
            "suite": [r.phase, r.node],
            "rawStatus": r.status,
            "extra": {
                "value": r.value,
                "unit": r.unit or None,
                "threshold": r.threshold,
                "ratio_to_peak": r.ratio_to_peak,
                "severity": r.severity,
            },
        }
        for r in run.ordered()
    ]
    tests += [
        {"name": f"{node}/{check}", "status": "pending", "duration": 0, "suite": [phase, node]}
        for node, check, phase in _pending(run)
    ]
    counts = run.counts()
    return {
        "reportFormat": "CTRF",
        "specVersion": "0.0.0",
        "reportId": str(uuid.UUID(run.id)),
        "timestamp": _iso(run.created_at),
        "generatedBy": "plumb",
        "results": {
            "tool": {"name": "plumb", "version": __version__},
            "summary": {
                "tests": run.total,
                "passed": counts["pass"],
                "failed": counts["fail"] + counts["error"],
                "skipped": counts["skip"],
                "pending": counts["pending"],
                "other": counts["warn"],
                "start": _ms(run.created_at),
                "stop": _ms(run.finished_at),
            },
            "tests": tests,
        },
    }


def junit(run: ValidationRun) -> str:
    """The run as JUnit XML: a testsuite per node, a testcase per check."""
    suites = ET.Element("testsuites", name=_x(f"plumb validation {run.id}"))
    by_node: dict[str, list[CheckResult]] = {}
    for r in run.ordered():
        by_node.setdefault(r.node, []).append(r)
    pending = _pending(run)
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for node in run.suites:
        results = by_node.get(node, [])
        suite = ET.SubElement(suites, "testsuite", name=_x(node))
        n = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        time_s = 0.0
        for r in results:
            n["tests"] += 1
            time_s += r.duration_s
            case = ET.SubElement(
                suite, "testcase", name=_x(r.check_id), classname=_x(f"{r.phase}.{node}")
            )
            case.set("time", f"{r.duration_s:.3f}")
            if r.status == "fail":
                n["failures"] += 1
                failure = ET.SubElement(case, "failure", message=_x(r.message), type=r.severity)
                failure.text = _x(r.remediation)
            elif r.status == "error":
                n["errors"] += 1
                ET.SubElement(case, "error", message=_x(r.message))
            elif r.status == "skip":
                n["skipped"] += 1
                ET.SubElement(case, "skipped", message=_x(r.message))
            else:
                ET.SubElement(case, "system-out").text = _x(f"{r.status}: {r.message}")
        for pnode, check, phase in pending:
            if pnode != node:
                continue
            n["tests"] += 1
            n["skipped"] += 1
            case = ET.SubElement(suite, "testcase", name=_x(check), classname=_x(f"{phase}.{node}"))
            ET.SubElement(case, "skipped", message="pending: the run has not finished")
        for key, value in n.items():
            suite.set(key, str(value))
            total[key] += value
        suite.set("time", f"{time_s:.3f}")
    for key, value in total.items():
        suites.set(key, str(value))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)
