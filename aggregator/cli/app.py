"""The `plumb` Typer app and what its commands share: global options, consoles, the HTTP client.

Global options (--server, --token-file, --ca-file) may come before or after the command: the
group moves them to the front before parsing. Every call to the aggregator goes through
`api_json` or `connection()`: the API token (--token-file, PLUMB_API_TOKEN_FILE or
PLUMB_API_TOKEN) and the CA that signed the aggregator's certificate (--ca-file, PLUMB_CA_FILE)
when it serves https.

This module is imported by every command, `--help` included, so it imports only what they
all need; httpx and ssl load with the first request.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer
from rich.console import Console
from typer.core import TyperGroup

from plumb.aggregator import __version__
from plumb.aggregator.errors import EXIT_CODES

if TYPE_CHECKING:
    import ssl

DEFAULT_SERVER = "http://127.0.0.1:8080"
# Options of the `plumb` group that a command line may also give after the command.
GLOBAL_OPTIONS = ("--server", "--token-file", "--ca-file")


def hoist_globals(args: list[str]) -> list[str]:
    """`args` with every global option (and its value) moved before the command, in order."""
    hoisted: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg in GLOBAL_OPTIONS and i + 1 < len(args):
            hoisted += args[i : i + 2]
            i += 2
            continue
        if arg.partition("=")[0] in GLOBAL_OPTIONS:
            hoisted.append(arg)
        else:
            rest.append(arg)
        i += 1
    return hoisted + rest


class _Group(TyperGroup):
    """The `plumb` group: global options are accepted anywhere on the command line."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_globals(args))


app = typer.Typer(
    cls=_Group,
    help="Plumb: the live truth of a GPU cluster's software stack.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)


class Output(StrEnum):
    """How a command prints its result: `table` for people (plain columns when piped),
    `wide` with more columns, or the API's document as YAML or JSON."""

    table = "table"
    wide = "wide"
    yaml = "yaml"
    json = "json"


_options: dict[str, Any] = {"server": DEFAULT_SERVER, "token_file": None, "ca_file": None}


def _print_version(asked: bool) -> None:
    if asked:
        out.print(f"plumb {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _global_options(
    server: Annotated[
        str,
        typer.Option("--server", envvar="PLUMB_SERVER", help="aggregator HTTP URL"),
    ] = DEFAULT_SERVER,
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
    """Plumb: the live truth of a GPU cluster's software stack.

    --server, --token-file and --ca-file may also follow the command.
    """
    _options.update(server=server, token_file=token_file, ca_file=ca_file)


def _global_server(value: str) -> str:
    """A command's --server: the group's, since the group takes every --server given."""
    return _options["server"]


# Every command that calls the aggregator takes this; its value is the global --server.
ServerOpt = Annotated[
    str,
    typer.Option(
        "--server",
        callback=_global_server,
        help="aggregator HTTP URL (env PLUMB_SERVER); also before the command",
    ),
]
OutputOpt = Annotated[
    Output, typer.Option("-o", "--output", help="table, wide (more columns), yaml or json")
]


def connection(server: str | None = None) -> dict[str, Any]:
    """httpx keyword arguments for calling the aggregator: the token header and the CA.

    For a plain-http `server` there is no TLS to verify, so httpx is told not to load the
    system CA bundle (a tenth of a second of CPU on every command otherwise).
    """
    token_file, token = _options["token_file"], os.environ.get("PLUMB_API_TOKEN")
    if token_file is not None and token:
        err.print("give the API token once: --token-file / PLUMB_API_TOKEN_FILE or PLUMB_API_TOKEN")
        raise typer.Exit(EXIT_CODES["invalid_input"])
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            err.print(f"cannot read the token file {token_file}: {exc.strerror}")
            raise typer.Exit(EXIT_CODES["invalid_input"]) from exc
    ca_file = _options["ca_file"]
    verify: ssl.SSLContext | bool = not (server or "").startswith("http://")
    if ca_file is not None:
        import ssl

        try:
            verify = ssl.create_default_context(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as exc:
            err.print(f"cannot load the CA file {ca_file}: {exc}\nhint: give a PEM certificate")
            raise typer.Exit(EXIT_CODES["invalid_input"]) from exc
    return {"headers": {"Authorization": f"Bearer {token}"} if token else {}, "verify": verify}


def unreachable(server: str, exc: Exception) -> typer.Exit:
    """Say the aggregator cannot be reached (and how to point at one); the exit to raise."""
    err.print(
        f"cannot reach the aggregator at {server}: {exc}\n"
        "hint: start one with `plumb serve`, or pass --server / PLUMB_SERVER",
        markup=False,
    )
    return typer.Exit(EXIT_CODES["unavailable"])


def refused(body: Any, text: str) -> typer.Exit:
    """Print the server's `{code, message, hint}` answer; the exit (by its code) to raise."""
    body = body if isinstance(body, dict) else {}
    hint = f"\nhint: {body['hint']}" if body.get("hint") else ""
    err.print(f"{body.get('message', text)}{hint}", markup=False)
    return typer.Exit(EXIT_CODES.get(body.get("code", "internal"), EXIT_CODES["internal"]))


def api_json(
    server: str,
    path: str,
    *,
    method: str = "GET",
    params: dict | None = None,
    body: dict | None = None,
) -> Any:
    """Call a JSON API path; exit with the error's status when the server says no."""
    import httpx

    try:
        resp = httpx.request(
            method,
            server.rstrip("/") + path,
            params=params,
            json=body,
            timeout=30,
            **connection(server),
        )
    except httpx.HTTPError as exc:
        raise unreachable(server, exc) from exc
    if resp.status_code >= 400:
        try:
            problem = resp.json()
        except ValueError:
            problem = None
        raise refused(problem, resp.text)
    return resp.json()
