"""The `plumb` Typer app and what its commands share: consoles, --server, the HTTP client.

Every call to the aggregator goes through `connection()`: the API token (--token-file,
PLUMB_API_TOKEN_FILE or PLUMB_API_TOKEN) and the CA that signed the aggregator's certificate
(--ca-file, PLUMB_CA_FILE) when it serves https.
"""

from __future__ import annotations

import os
import ssl
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console

from plumb.aggregator import __version__
from plumb.aggregator.errors import STATUS

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


_options: dict[str, Path | None] = {"token_file": None, "ca_file": None}


def _print_version(asked: bool) -> None:
    if asked:
        out.print(f"plumb {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _connection_options(
    token_file: Annotated[
        Path | None,
        typer.Option(
            envvar="PLUMB_API_TOKEN_FILE",
            help="file holding the API token (else PLUMB_API_TOKEN); admin calls need one",
        ),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option(envvar="PLUMB_CA_FILE", help="CA certificate to trust for an https server"),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="print it, exit"),
    ] = False,
) -> None:
    """Plumb: the live truth of a GPU cluster's software stack."""
    _options.update(token_file=token_file, ca_file=ca_file)


def connection() -> dict[str, Any]:
    """httpx keyword arguments for calling the aggregator: the token header and the CA."""
    token_file, token = _options["token_file"], os.environ.get("PLUMB_API_TOKEN")
    if token_file is not None and token:
        err.print("give the API token once: --token-file / PLUMB_API_TOKEN_FILE or PLUMB_API_TOKEN")
        raise typer.Exit(STATUS["invalid_input"][2])
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            err.print(f"cannot read the token file {token_file}: {exc.strerror}")
            raise typer.Exit(STATUS["invalid_input"][2]) from exc
    ca_file = _options["ca_file"]
    verify: ssl.SSLContext | bool = True
    if ca_file is not None:
        try:
            verify = ssl.create_default_context(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as exc:
            err.print(f"cannot load the CA file {ca_file}: {exc}\nhint: give a PEM certificate")
            raise typer.Exit(STATUS["invalid_input"][2]) from exc
    return {"headers": {"Authorization": f"Bearer {token}"} if token else {}, "verify": verify}


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
            method, server.rstrip("/") + path, params=params, json=body, timeout=30, **connection()
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
