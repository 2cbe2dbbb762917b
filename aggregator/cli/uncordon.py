"""`plumb uncordon NODE`: undo Plumb's cordon of a node (remediation.cordon)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app
from plumb.aggregator.cli.output import emit


@app.command()
def uncordon(
    node: Annotated[str, typer.Argument(help="the Node's name, as `kubectl get nodes` lists it")],
    server: ServerOpt = "http://127.0.0.1:8080",
    output: OutputOpt = Output.table,
) -> None:
    """Make NODE schedulable again after Plumb cordoned it (admin token). Its open findings
    count as seen: Plumb cordons it again only for a new one. A node Plumb did not cordon is
    refused; `kubectl uncordon` is for those.

    Exit codes: 0 ok, 3 no such Node, 4 or 6 not an admin token, 5 aggregator unreachable or
    without a Kubernetes side, 8 not cordoned by Plumb.
    """
    body = api_json(server, f"/v1/nodes/{quote(node, safe='')}/uncordon", method="POST")
    emit(body, output, lambda b: [_done(b)])


def _done(body: dict) -> str:
    """`uncordoned node X (cordoned by Plumb at T for health gpu3/xid-79 (critical))`."""
    from rich.markup import escape

    from plumb.aggregator.present import clock

    why = ", ".join(body["findings"]) or "findings not recorded"
    at = clock(body["cordoned_at"]) if body["cordoned_at"] else "an unknown time"
    state = "" if body["was_unschedulable"] else " (it was already schedulable)"
    return escape(f"uncordoned node {body['node']}{state}: Plumb cordoned it at {at} for {why}")
