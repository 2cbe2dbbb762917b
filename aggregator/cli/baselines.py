"""`plumb baselines`: what each group of twins measures, learned from the fleet (GET
/v1/baselines)."""

from __future__ import annotations

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import baselines_table


@app.command()
def baselines(
    server: ServerOpt = "http://127.0.0.1:8080",
    output: OutputOpt = Output.table,
) -> None:
    """Each group of twins (GPU model, GPU count, fabric) and check: how many nodes measured
    it, their median and spread (median absolute deviation). A node well under its twins'
    median has a `straggler` finding (`plumb drift`).

    Exit codes: 0 ok, 5 aggregator unreachable.
    """
    found = api_json(server, "/v1/baselines")
    emit(found, output, lambda rows: [baselines_table(rows)])
