"""`plumb validate`: start a validation run, follow it with a progress bar, print the result.

Exit code 0 when every check passed, warned or was skipped; 1 when any failed or errored
(or the run is still going without --wait): CI can gate on it.
"""

from __future__ import annotations

import json
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from plumb.aggregator.cli import choices
from plumb.aggregator.cli.app import ServerOpt, api_json, app, connection, err, out
from plumb.aggregator.cli.output import show
from plumb.aggregator.cli.render import plural, validation_table


class Format(StrEnum):
    table = "table"
    json = "json"
    ctrf = "ctrf"
    junit = "junit"


def _fetch(server: str, run_id: str, fmt: Format) -> str:
    import httpx

    resp = httpx.get(
        f"{server.rstrip('/')}/v1/validations/{run_id}",
        params={"format": fmt.value},
        timeout=30,
        **connection(server),
    )
    resp.raise_for_status()
    return resp.text


def _waiting(waits: list[dict]) -> str:
    """The first check waiting for GPUs and what holds them, and how many others wait."""
    first = waits[0]
    where = "" if first["node"] == "(cluster)" else f" on {first['node']}"
    text = f"{first['checks'][0]}{where} waits for GPUs held by {'; '.join(first['held_by'])}"
    return text + (f" (+{len(waits) - 1} waiting)" if len(waits) > 1 else "")


@app.command()
def validate(
    server: ServerOpt = "http://127.0.0.1:8080",
    phase: Annotated[
        list[str] | None,
        typer.Option(
            help="deployment, conformance, performance (repeatable)",
            parser=choices.one_of("phase", choices.phases),
        ),
    ] = None,
    node: Annotated[list[str] | None, typer.Option(help="only this node (repeatable)")] = None,
    check: Annotated[list[str] | None, typer.Option(help="only this check id (repeatable)")] = None,
    wait: Annotated[bool, typer.Option(help="follow the run until it finishes")] = True,
    timeout: Annotated[float | None, typer.Option(help="the run's global deadline, s")] = None,
    output: Annotated[
        Format, typer.Option("-o", "--output", help="table, json, ctrf or junit")
    ] = Format.table,
    report: Annotated[
        Path | None, typer.Option(help="also write the CTRF (.json) or JUnit (.xml) report here")
    ] = None,
) -> None:
    """Validate the cluster: node checks run on every agent in parallel."""
    body = {"phases": phase or [], "nodes": node or [], "checks": check or []}
    if timeout is not None:
        body["timeout_s"] = timeout
    started = api_json(server, "/v1/validations", method="POST", body=body)
    run_id = started["id"]
    nodes, checks = plural(started["nodes"], "node"), plural(len(started["checks"]), "check")
    err.print(f"validation {run_id}: {nodes}, {checks}", markup=False)
    run = api_json(server, f"/v1/validations/{run_id}")
    if wait:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(
            TextColumn("[bold]validating"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("run", total=run["progress"]["total"], status="")
            while run["state"] != "finished":
                p = run["progress"]
                status = f"fail {p['fail']} error {p['error']} warn {p['warn']}"
                if p["waiting_for_gpus"]:
                    status += f" · {_waiting(p['waiting_for_gpus'])}"
                bar.update(task, completed=p["done"], status=status)
                time.sleep(0.25)
                run = api_json(server, f"/v1/validations/{run_id}")
            bar.update(task, completed=run["progress"]["total"])
    if report is not None:
        fmt = Format.junit if report.suffix == ".xml" else Format.ctrf
        report.write_text(_fetch(server, run_id, fmt))
        err.print(f"{fmt.value} report written to {report}")
    if output is Format.json:
        out.print_json(json.dumps(run))
    elif output in (Format.ctrf, Format.junit):
        typer.echo(_fetch(server, run_id, output))  # raw: rich would wrap long lines
    else:
        show([validation_table(run)])
    if run["state"] != "finished" or run["result"] != "passed":
        raise typer.Exit(1)
