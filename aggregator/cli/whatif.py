"""`plumb whatif`: judge a planned change before rolling it out (POST /v1/whatif); exit 1
when any node would be blocked, so a CI job can gate the rollout on it."""

from __future__ import annotations

from typing import Annotated

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import whatif_tables


@app.command()
def whatif(
    server: ServerOpt = "http://127.0.0.1:8080",
    driver: Annotated[
        str | None, typer.Option(metavar="VERSION", help="driver, e.g. 590.44.01")
    ] = None,
    cuda: Annotated[
        str | None, typer.Option(metavar="VERSION", help="CUDA runtime and toolkit, e.g. 13.0")
    ] = None,
    nccl: Annotated[str | None, typer.Option(metavar="VERSION", help="NCCL, e.g. 2.28.3")] = None,
    gpu_operator: Annotated[
        str | None, typer.Option(metavar="VERSION", help="GPU Operator, e.g. v26.7.0")
    ] = None,
    kernel: Annotated[
        str | None, typer.Option(metavar="VERSION", help="kernel, e.g. 6.8.0-1030-aws")
    ] = None,
    kubernetes: Annotated[
        str | None, typer.Option(metavar="VERSION", help="Kubernetes (kubelet), e.g. 1.34.1")
    ] = None,
    pool: Annotated[
        list[str] | None,
        typer.Option(help="a pool the change targets (repeatable; default: every pool)"),
    ] = None,
    output: OutputOpt = Output.table,
) -> None:
    """What a planned change would do to each node: safe, review or blocked.

    Each targeted node's live facts, with the planned versions in place, go through the rules
    drift runs (CUDA minimum drivers, driver branch lifecycle, known-bad combinations, GPU
    minimum drivers, the recipe's constraints and pins). A critical rule blocks; a warning, or
    anything the rules cannot judge, asks for review.

    Exit codes: 0 nothing blocked, 1 a node would be blocked, 2 bad option or plan, 3 unknown
    pool, 5 aggregator unreachable.
    """
    planned = {
        "driver": driver,
        "cuda": cuda,
        "nccl": nccl,
        "gpu-operator": gpu_operator,
        "kernel": kernel,
        "kubernetes": kubernetes,
    }
    body = {"components": {k: v for k, v in planned.items() if v is not None}, "pools": pool or []}
    answer = api_json(server, "/v1/whatif", method="POST", body=body)
    emit(answer, output, whatif_tables)
    if answer["verdict"] == "blocked":
        raise typer.Exit(1)
