"""The `xid` check graded by the XID table: the node lists the XIDs it saw, this decides.

The agent reports each XID in the check's window as a detail `gpuI.xidN` (its count) and
fails; here each code takes its severity from recipes/knowledge/xids.yaml: a critical code
fails the check, a warning one (or a code the table lacks) warns, and one usually caused by
the application passes, named with its meaning, so an SRE sees it without being paged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from plumb.aggregator.recipes.schema import XidRow
from plumb.aggregator.validation.model import CheckResult, Status

__all__ = ["grade_xids"]

_DETAIL = re.compile(r"^gpu(\d+)\.xid(\d+)$")
_STATUS: dict[str, Status] = {"critical": "fail", "warning": "warn", "info": "pass"}
_RANK: dict[Status, int] = {"pass": 0, "warn": 1, "fail": 2}


def grade_xids(result: CheckResult, table: Mapping[int, XidRow]) -> CheckResult:
    """`result` with its status, message and remediation from the XID table; a result
    that lists no XID (a pass, a skip, an error) is returned as it is."""
    seen = sorted(
        (int(m[1]), int(m[2]), count)
        for key, count in result.details.items()
        if (m := _DETAIL.match(key))
    )
    if result.status != "fail" or not seen:
        return result
    status: Status = "pass"
    shown, actions = [], {}
    for gpu, code, count in seen:
        row = table.get(code)
        verdict: Status = _STATUS[row.severity] if row else "warn"
        status = max(status, verdict, key=_RANK.__getitem__)
        meaning = row.meaning if row else "not in the XID table"
        level = row.severity if row else "unknown"
        shown.append(f"GPU {gpu}: XID {code} x{count} ({level}: {meaning})")
        actions[code] = (
            f"XID {code}: {row.action} ({row.source})"
            if row
            else f"XID {code}: {result.remediation}"
        )
    window = result.details.get("window_s")
    within = f" in the last {float(window) / 3600:g} h" if window else ""
    return replace(
        result,
        status=status,
        message=f"XIDs{within}: " + "; ".join(shown),
        remediation="; ".join(actions[c] for c in sorted(actions)),
    )
