"""`plumb mirror list`: the charts and images of a recipe, for air-gapped installs, as YAML to
stdout (Plumb's list, Hauler manifests, a Zarf package or an oc-mirror ImageSetConfiguration)
for a pipeline to hand on.

The recipe comes as `plumb recipe` takes it: criteria flags, an AICR criteria file
(`--criteria`), a saved AICR snapshot (`--snapshot`) or a node's live facts (`--node`). Asks the
aggregator's `/v1/mirror`; with `--data DIR` lists here, from the shipped recipes with DIR
merged over them, as `plumb recipe --data` resolves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from plumb.aggregator.cli import choices
from plumb.aggregator.cli.app import ServerOpt, api_json, app, err
from plumb.aggregator.cli.recipe import (
    Accelerator,
    CriteriaFile,
    DataDir,
    Intent,
    Node,
    Os,
    Platform,
    Service,
    SnapshotFile,
    criteria_of,
    document_of,
    resolve_here,
)
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
        help="yaml (Plumb's list), hauler (Charts and Images manifests), zarf (zarf.yaml) or"
        " oc-mirror (an ImageSetConfiguration: OLM catalogs, charts, images)",
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
    node: Node = None,
    criteria_file: CriteriaFile = None,
    snapshot: SnapshotFile = None,
    data: DataDir = None,
    format: FormatOpt = "yaml",
) -> None:
    """The charts (and manifest components' images) the recipe installs: the recipe for these
    criteria, an AICR criteria file, a saved AICR snapshot, or --node's live facts. Each
    chart's own images are left to Hauler's add-images or `zarf dev find-images`."""
    from plumb.aggregator.mirror import text

    flags = dict(service=service, accelerator=accelerator, os=os, intent=intent, platform=platform)
    criteria = criteria_of(flags, node, criteria_file, snapshot, data, "lists")
    if data:
        docs = _list_here(data, snapshot, criteria, format)
    elif node:
        docs = _ask(server, {"node": node}, format)
    elif snapshot:
        # YAML timestamps and the like become text: the body is JSON.
        doc = json.loads(json.dumps(document_of(snapshot), default=str))
        docs = _ask(server, {"snapshot": doc, "criteria": criteria}, format)
    else:
        docs = api_json(server, "/v1/mirror", params={**criteria, "format": format})["documents"]
    typer.echo(text(docs, format), nl=False)  # type: ignore[arg-type]


def _ask(server: str, body: dict[str, Any], format: str) -> list[dict[str, Any]]:
    """`POST /v1/mirror`: the recipe route's body, for a node or a snapshot."""
    answer = api_json(server, "/v1/mirror", method="POST", params={"format": format}, body=body)
    return answer["documents"]


def _list_here(
    data: Path, snapshot: Path | None, criteria: dict[str, Any], format: str
) -> list[dict[str, Any]]:
    from plumb.aggregator.bundle import Recipe
    from plumb.aggregator.cli.recipe import load_data
    from plumb.aggregator.mirror import MirrorList, documents

    resolved = resolve_here(data, snapshot, criteria)
    catalog = load_data(data)
    try:
        listed = MirrorList.of(Recipe.model_validate({**resolved, "document": resolved}), catalog)
    except PlumbError as exc:
        err.print(str(exc) + (f"\nhint: {exc.hint}" if exc.hint else ""), markup=False)
        raise typer.Exit(EXIT_CODES[exc.code]) from exc
    return documents(listed, format)  # type: ignore[arg-type]
