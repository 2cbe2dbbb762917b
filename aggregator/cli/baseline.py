"""`plumb baseline accept NODE`: take a node's current stack as its accepted baseline."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import plural

baseline_app = typer.Typer(
    help="A node's accepted baseline: what baseline drift compares it with.",
    no_args_is_help=True,
)
app.add_typer(baseline_app, name="baseline")


@baseline_app.command()
def accept(
    node: Annotated[str, typer.Argument(help="the node's name, as `plumb nodes` lists it")],
    server: ServerOpt = "http://127.0.0.1:8080",
    output: OutputOpt = Output.table,
) -> None:
    """Accept NODE's current stack as its baseline (admin token); its baseline findings close.

    JSON and YAML give the baseline stored. Exit codes: 0 ok, 3 no such node, 4 or 6 not an
    admin token, 5 aggregator unreachable.
    """
    body = api_json(server, f"/v1/nodes/{quote(node, safe='')}/baseline", method="POST")
    emit(body, output, lambda b: [_accepted(b)])


def _accepted(body: dict) -> str:
    """`accepted the baseline of node X at <UTC time>: N facts, N GPUs`."""
    from rich.markup import escape

    from plumb.aggregator.present import clock

    facts = plural(len(body["facts"]), "fact")
    gpus = plural(body["gpu_count"], "GPU")
    at = clock(body["accepted_at"])
    return escape(f"accepted the baseline of node {body['node']} at {at}: {facts}, {gpus}")
