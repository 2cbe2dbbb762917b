"""`plumb drift`: drift findings as a table; exit 1 while any is open and critical (for CI)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from plumb.aggregator.cli import choices
from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import drift_table

_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_time(value: str, now: datetime | None = None) -> datetime:
    """`--since`: a duration back from now (`90s`, `30m`, `6h`, `2d`, `1w`) or an ISO 8601
    time (UTC when it names no zone); BadParameter naming both forms otherwise."""
    if match := _DURATION.match(value.strip()):
        count, unit = match.groups()
        return (now or datetime.now(UTC)) - timedelta(seconds=int(count) * _UNIT_S[unit])
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is neither a duration (90s, 30m, 6h, 2d, 1w) nor an ISO 8601 time "
            "(2026-07-01T03:00:00Z)"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


@app.command()
def drift(
    server: ServerOpt = "http://127.0.0.1:8080",
    node: Annotated[str | None, typer.Option(help="only this node")] = None,
    kind: Annotated[
        str | None,
        typer.Option(
            help="recipe, constraint, baseline, pool or health",
            parser=choices.one_of("kind", choices.kinds),
        ),
    ] = None,
    severity: Annotated[
        str | None,
        typer.Option(
            help="critical, warning or info", parser=choices.one_of("severity", choices.severities)
        ),
    ] = None,
    include_closed: Annotated[
        bool, typer.Option("--include-closed", help="closed findings too, from the history")
    ] = False,
    since: Annotated[
        datetime | None,
        typer.Option(
            help="findings opened since: a duration (30m, 6h, 2d) or an ISO time; "
            "closed ones included",
            metavar="DURATION|TIME",
            parser=since_time,
        ),
    ] = None,
    output: OutputOpt = Output.table,
) -> None:
    """Open drift findings, most severe first; with --include-closed or --since, closed ones
    too, newest first. `-o wide` adds ids and recipe hashes.

    Exit codes: 0 ok, 1 a critical finding is open, 2 bad option, 5 aggregator unreachable.
    """
    params = {k: v for k, v in {"node": node, "kind": kind, "severity": severity}.items() if v}
    if include_closed:
        params["include_closed"] = "true"
    if since is not None:
        params["since"] = since.isoformat()
    closed = include_closed or since is not None
    findings = api_json(server, "/v1/drift", params=params)
    emit(
        findings,
        output,
        lambda found: [drift_table(found, closed=closed)],
        lambda found: [drift_table(found, closed=closed, wide=True)],
    )
    if any(f["severity"] == "critical" and not f.get("closed_at") for f in findings):
        raise typer.Exit(1)
