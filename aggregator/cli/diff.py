"""`plumb diff A B`: the stack facts that differ between two snapshots, or a snapshot and a
node's live facts, or two nodes (aggregator/snapshot_diff.py says what is compared)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app, err
from plumb.aggregator.cli.output import emit
from plumb.aggregator.errors import EXIT_CODES, PlumbError

LIVE = "node:"  # a side naming a live node, fetched from the aggregator

Side = Annotated[
    str,
    typer.Argument(
        metavar="SNAPSHOT|node:NAME",
        help="a file `plumb snapshot` (or `aicr snapshot`) wrote, or node:NAME for its live facts",
    ),
]


def _side(server: str, side: str) -> dict[str, Any]:
    """`{node: facts}` of one side; exit 2 (3 for an unknown node) naming what is wrong."""
    from plumb.aggregator import snapshot_diff

    try:
        if side.startswith(LIVE):
            body = api_json(server, "/v1/snapshot", params={"node": side[len(LIVE) :]})
            return snapshot_diff.facts_of([body], side)
        try:
            text = Path(side).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            err.print(f"cannot read {side}: {exc}", markup=False)
            raise typer.Exit(EXIT_CODES["invalid_input"]) from exc
        return snapshot_diff.facts_of(snapshot_diff.parse(text, side), side)
    except PlumbError as exc:
        hint = f"\nhint: {exc.hint}" if exc.hint else ""
        err.print(f"{exc}{hint}", markup=False)
        raise typer.Exit(EXIT_CODES[exc.code]) from exc


@app.command()
def diff(
    a: Side,
    b: Side,
    server: ServerOpt = "http://127.0.0.1:8080",
    fail_on_drift: Annotated[
        bool, typer.Option("--fail-on-drift", help="exit 1 when any fact differs")
    ] = False,
    output: OutputOpt = Output.table,
) -> None:
    """The stack facts that differ from A to B (sensor readings are not compared).

    Each side is a snapshot file (Plumb's or AICR's, YAML or JSON) or node:NAME for a node's
    live facts. Two one-node sides are compared whatever their names; otherwise nodes pair
    by name. Exit codes: 0 (with --fail-on-drift: no difference), 1 facts differ and
    --fail-on-drift, 2 a side is not a snapshot, 3 no such node, 5 aggregator unreachable.
    """
    from plumb.aggregator import snapshot_diff
    from plumb.aggregator.cli.render import diff_table

    result = snapshot_diff.diff(_side(server, a), _side(server, b), a_name=a, b_name=b)
    emit(result.to_dict(), output, lambda d: [diff_table(d)])
    if fail_on_drift and result.changes:
        raise typer.Exit(1)
