"""The `plumb` Typer app and what its commands share: consoles, --server, the HTTP client."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console

from aggregator.errors import STATUS

app = typer.Typer(
    help="Plumb: the live truth of a GPU cluster's software stack.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)


class Output(StrEnum):
    """How a command prints its result."""

    table = "table"
    yaml = "yaml"
    json = "json"


OutputOpt = Annotated[Output, typer.Option("-o", "--output", help="table, yaml or json")]
ServerOpt = Annotated[
    str, typer.Option("--server", envvar="PLUMB_SERVER", help="aggregator HTTP URL")
]


def api_json(
    server: str,
    path: str,
    *,
    method: str = "GET",
    params: dict | None = None,
    body: dict | None = None,
) -> Any:
    """Call a JSON API path; exit with the error's status when the server says no."""
    try:
        resp = httpx.request(
            method, server.rstrip("/") + path, params=params, json=body, timeout=30
        )
    except httpx.HTTPError as exc:
        err.print(
            f"cannot reach the aggregator at {server}: {exc}\n"
            "hint: start one with `plumb serve`, or pass --server / PLUMB_SERVER"
        )
        raise typer.Exit(STATUS["unavailable"][2]) from exc
    if resp.status_code >= 400:
        body = resp.json()
        err.print(
            f"{body.get('message', resp.text)}"
            + (f"\nhint: {body['hint']}" if body.get("hint") else "")
        )
        raise typer.Exit(STATUS.get(body.get("code", "internal"), STATUS["internal"])[2])
    return resp.json()
