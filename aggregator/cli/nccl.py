"""`plumb nccl FILE`: read a nccl-tests log (any launcher, text or -J JSON) and judge each run.

Runs locally, no aggregator needed; POST /v1/benchmarks attaches the same runs to nodes.
Exit code 0 when every run is ok; 1 when any failed or is incomplete (CI can gate on it);
2 for a file that cannot be read or holds no run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, app, err
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import nccl_table
from plumb.aggregator.errors import EXIT_CODES


@app.command()
def nccl(
    file: Annotated[Path, typer.Argument(help="nccl-tests output, or its -J JSON report")],
    output: OutputOpt = Output.table,
) -> None:
    """Each nccl-tests run in FILE: collective, ranks, nodes, busbw at the largest size, status.

    Exit codes: 0 every run ok, 1 a run failed or is incomplete, 2 unreadable or no run.
    """
    from plumb import nccltests

    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        err.print(f"cannot read {file}: {exc.strerror or exc}")
        raise typer.Exit(EXIT_CODES["invalid_input"]) from exc
    runs = [nccltests.summary(r) for r in nccltests.parse(text)]
    if not runs:
        err.print(f"no nccl-tests run in {file}\nhint: give the stdout of an *_perf binary")
        raise typer.Exit(EXIT_CODES["invalid_input"])
    emit(runs, output, lambda r: [nccl_table(r, file.name)])
    if any(r["status"] != "ok" for r in runs):
        raise typer.Exit(1)
