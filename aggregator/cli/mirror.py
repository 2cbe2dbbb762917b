"""`plumb mirror list`: the charts and images of a recipe, for air-gapped installs, as YAML to
stdout (Plumb's list, Hauler manifests or a Zarf package) for a pipeline to hand on.

Asks the aggregator's `GET /v1/mirror`; with `--data DIR` lists here, from the shipped recipes
with DIR merged over them, as `plumb recipe --data` resolves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from plumb.aggregator.cli import choices
from plumb.aggregator.cli.app import ServerOpt, api_json, app, err
from plumb.aggregator.cli.recipe import Accelerator, DataDir, Intent, Os, Platform, Service
from plumb.aggregator.errors import EXIT_CODES, PlumbError

mirror_app = typer.Typer(no_args_is_help=True, add_completion=False)
app.add_typer(mirror_app, name="mirror", help="Charts and images of a recipe, for air-gap.")


def _formats() -> tuple[str, ...]:
    from plumb.aggregator.mirror import FORMATS

    return FORMATS


FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help="yaml (Plumb's list), hauler (Charts and Images manifests) or zarf (zarf.yaml)",
        parser=choices.one_of("format", _formats, default="yaml"),
    ),
]


@mirror_app.command("list")
def mirror_list(
    server: ServerOpt = "http://127.0.0.1:8080",
    service: Service = "any",
    accelerator: Accelerator = "any",
    os: Os = "any",
    intent: Intent = "any",
    platform: Platform = "any",
    data: DataDir = None,
    format: FormatOpt = "yaml",
) -> None:
    """The charts (and manifest components' images) the recipe for these criteria installs;
    each chart's own images are left to Hauler's add-images or `zarf dev find-images`."""
    from plumb.aggregator.mirror import text

    criteria = dict(
        service=service, accelerator=accelerator, os=os, intent=intent, platform=platform
    )
    if data:
        docs = _list_here(data, criteria, format)
    else:
        docs = api_json(server, "/v1/mirror", params={**criteria, "format": format})["documents"]
    typer.echo(text(docs, format), nl=False)  # type: ignore[arg-type]


def _list_here(data: Path, criteria: dict[str, str], format: str) -> list[dict[str, Any]]:
    from plumb.aggregator.cli.recipe import load_data
    from plumb.aggregator.mirror import MirrorList, documents
    from plumb.aggregator.recipes import Criteria, resolve

    catalog = load_data(data)
    try:
        listed = MirrorList.of(resolve(catalog, Criteria(**criteria)), catalog)
    except PlumbError as exc:
        err.print(str(exc) + (f"\nhint: {exc.hint}" if exc.hint else ""), markup=False)
        raise typer.Exit(EXIT_CODES[exc.code]) from exc
    return documents(listed, format)  # type: ignore[arg-type]
