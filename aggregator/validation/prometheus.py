"""Prometheus checks: cluster-wide, once per run (node "(cluster)"), through its HTTP API.

`ai-service-metrics` (AICR's check of that name) wants samples of each DCGM series in its
parameters for every node of the run: one instant query per series (`/api/v1/query`), grouped
by the labels that can name a node. dcgm-exporter's releases put the node in `Hostname`, its
main in `hostname`, and a scrape config may relabel it to `node` (shared/reference/peers.md
§3.1), so the first of `node_labels` a series carries is its node. Missing series are asked
for again every `poll_s` until `window_s` has passed. An unreachable Prometheus or a refused
query is `error`, not `fail`: nothing was learned about the metrics.

DCGM reports a field it cannot read (unsupported on the GPU, profiling not running, no
permission) as a placeholder value, and an exporter that passes those on gives Prometheus a
series with nothing in it. A sample equal to one of `DCGM_BLANKS` is not counted: a node whose
samples of a series are all placeholders is "present but blank", a failure of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from plumb.aggregator.recipes.check_catalog import CheckDef

__all__ = ["PROMETHEUS", "Prometheus", "run_query_check"]

Verdict = tuple[str, str, dict[str, str]]  # status, message, details
SHOWN = 5  # nodes named per missing series in a message

# DCGM's placeholder values, from NVIDIA/DCGM dcgmlib/dcgm_structs.h (the DCGM_BLANK_VALUES
# block): the BLANK base of each type and BLANK + 1, + 2, + 3 for NOT_FOUND, NOT_SUPPORTED and
# NOT_PERMISSIONED. INT32_BLANK = 0x7ffffff0, INT64_BLANK = 0x7ffffffffffffff0, FP64_BLANK =
# 2**47 (140737488355328.0). Exact values, not DCGM's `>= BLANK` tests: an int64 field (energy
# in mJ) may well pass 0x7ffffff0 for real. Prometheus holds floats, so the four int64 ones
# all arrive as 2**63; PromQL compares them as floats too.
DCGM_BLANKS = (
    *(0x7FFFFFF0 + i for i in range(4)),
    *(0x7FFFFFFFFFFFFFF0 + i for i in range(4)),
    *(2.0**47 + i for i in range(4)),
)
BLANK_REASON = (
    "only DCGM blank values (the field is unsupported on the GPU, or DCGM is not profiling)"
)


@dataclass(frozen=True)
class Prometheus:
    """Where the aggregator asks Prometheus (validation.prometheus_url)."""

    url: str
    timeout_s: float = 10.0


class QueryFailed(Exception):
    """Prometheus could not be reached or refused the query."""


def _names(value: object) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _real(series: str) -> str:
    """`series` without its DCGM placeholder samples (a chain of `!=` filters)."""
    return series + "".join(f" != {float(v)!r}" for v in sorted(set(map(float, DCGM_BLANKS))))


async def _nodes_of(http: httpx.AsyncClient, series: str, labels: list[str]) -> set[str]:
    """The nodes `series` (a PromQL selector) has samples for, each named by the first of
    `labels` it carries."""
    expr = f"group by ({', '.join(labels)}) ({series})"
    try:
        resp = await http.get("/api/v1/query", params={"query": expr})
        body = resp.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise QueryFailed(f"{type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200 or body.get("status") != "success":
        raise QueryFailed(f"{resp.status_code} {body.get('error', resp.reason_phrase)}")
    nodes = set()
    for sample in body["data"]["result"]:
        metric = sample["metric"]
        node = next((metric[k] for k in labels if metric.get(k)), None)
        if node is not None:
            nodes.add(node)
    return nodes


async def ai_service_metrics(prom: Prometheus, check: CheckDef, nodes: Sequence[str]) -> Verdict:
    """Every listed DCGM series has samples for every node, within the poll window."""
    series = _names(check.parameters["series"])
    labels = _names(check.parameters.get("node_labels", "node"))
    window_s = float(check.parameters.get("window_s", 0))
    poll_s = float(check.parameters.get("poll_s", 10))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + window_s
    async with httpx.AsyncClient(base_url=prom.url, timeout=prom.timeout_s) as http:
        while True:
            missing: dict[str, list[str]] = {}
            blank: dict[str, list[str]] = {}
            try:
                for name in series:
                    if not (lacking := set(nodes) - await _nodes_of(http, _real(name), labels)):
                        continue
                    present = await _nodes_of(http, name, labels)
                    if absent := sorted(lacking - present):
                        missing[name] = absent
                    if blanks := sorted(lacking & present):
                        blank[name] = blanks
            except QueryFailed as exc:
                return "error", f"cannot query Prometheus at {prom.url}: {exc}", {}
            if not (missing or blank) or loop.time() + poll_s > deadline:
                break
            await asyncio.sleep(poll_s)
    details = {"prometheus": prom.url, "series": ",".join(series), "nodes": str(len(nodes))}
    if not (missing or blank):
        return "pass", f"{len(series)} DCGM series scraped for all {len(nodes)} nodes", details
    details.update({f"missing.{name}": ",".join(lacking) for name, lacking in missing.items()})
    details.update({f"blank.{name}": ",".join(lacking) for name, lacking in blank.items()})
    parts = [
        f"{why}: " + "; ".join(_named(name, lacking) for name, lacking in found.items())
        for why, found in ((f"no samples within {window_s:g} s", missing), (BLANK_REASON, blank))
        if found
    ]
    return "fail", "; ".join(parts), details


def _named(series: str, nodes: list[str]) -> str:
    return f"{series} for {', '.join(nodes[:SHOWN])}" + ("..." if len(nodes) > SHOWN else "")


PROMETHEUS: dict[str, Callable[[Prometheus, CheckDef, Sequence[str]], Awaitable[Verdict]]] = {
    "ai-service-metrics": ai_service_metrics,
}


async def run_query_check(prom: Prometheus, check: CheckDef, nodes: Sequence[str]) -> Verdict:
    """One Prometheus check for the run's nodes, bounded by its timeout."""
    try:
        async with asyncio.timeout(check.timeout_s):
            return await PROMETHEUS[check.id](prom, check, nodes)
    except TimeoutError:
        return "error", f"no answer from Prometheus within {check.timeout_s:g} s", {}
