"""`plumb bundle` (ask the aggregator for a bundle) and `plumb verify` (check one, offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import httpx
import typer

from plumb.aggregator.bundle import DEPLOYERS, BundleError, unpack, verify
from plumb.aggregator.cli.app import ServerOpt, app, connection, err, out
from plumb.aggregator.cli.recipe import Accelerator, Intent, Node, Os, Platform, Service
from plumb.aggregator.errors import STATUS

Many = Annotated[list[str] | None, typer.Option()]
ARCHIVES = {".zip": "zip", ".gz": "tar.gz", ".tgz": "tar.gz"}


@app.command()
def bundle(
    output: Annotated[
        Path, typer.Option("-o", "--output", help="a folder, or a .tar.gz / .zip file")
    ],
    server: ServerOpt = "http://127.0.0.1:8080",
    node: Node = None,
    recipe: Annotated[Path | None, typer.Option(help="a recipe.yaml to bundle as is")] = None,
    service: Service = "any",
    accelerator: Accelerator = "any",
    os: Os = "any",
    intent: Intent = "any",
    platform: Platform = "any",
    deployer: Annotated[str, typer.Option(help=", ".join(DEPLOYERS))] = "helm",
    set: Annotated[
        list[str] | None, typer.Option("--set", help="component:path=value, repeatable")
    ] = None,
    system_node_selector: Many = None,
    system_toleration: Many = None,
    accelerated_node_selector: Many = None,
    accelerated_toleration: Many = None,
    repo_url: Annotated[
        str | None, typer.Option(help="Git repo of the bundle (argocd, flux)")
    ] = None,
    repo_branch: str = "main",
) -> None:
    """A deployable bundle of the recipe for --node, a recipe file, or criteria."""
    body: dict = {
        "deployer": deployer,
        "set": set or [],
        "system_node_selector": system_node_selector or [],
        "system_tolerations": system_toleration or [],
        "accelerated_node_selector": accelerated_node_selector or [],
        "accelerated_tolerations": accelerated_toleration or [],
        "repo_url": repo_url,
        "repo_branch": repo_branch,
        "format": ARCHIVES.get(output.suffix, "tar.gz"),
    }
    if node:
        body["node"] = node
    elif recipe:
        body["recipe"] = recipe.read_text(encoding="utf-8")
    else:
        body["criteria"] = dict(
            service=service, accelerator=accelerator, os=os, intent=intent, platform=platform
        )
    data, files = _post(server, body)
    if output.suffix in ARCHIVES:
        output.write_bytes(data)
    else:
        unpack(data, output)
    err.print(f"wrote {files} files to {output} ({len(data) / 1024:.1f} KiB archived)")


def _post(server: str, body: dict) -> tuple[bytes, int]:
    try:
        resp = httpx.post(server.rstrip("/") + "/v1/bundles", json=body, timeout=60, **connection())
    except httpx.HTTPError as exc:
        err.print(f"cannot reach the aggregator at {server}: {exc}")
        raise typer.Exit(STATUS["unavailable"][2]) from exc
    if resp.status_code >= 400:
        problem = resp.json()
        hint = f"\nhint: {problem['hint']}" if problem.get("hint") else ""
        err.print(f"{problem.get('message', resp.text)}{hint}", markup=False)
        raise typer.Exit(STATUS.get(problem.get("code", "internal"), STATUS["internal"])[2])
    return resp.content, int(resp.headers["X-Bundle-Files"])


@app.command(name="verify")
def verify_bundle(
    path: Annotated[Path, typer.Argument(help="a bundle folder, .tar.gz or .zip")],
) -> None:
    """Recompute a bundle's checksums; exit 1 naming every changed, missing or extra file."""
    try:
        checked, problems = verify(path)
    except BundleError as exc:
        err.print(str(exc), markup=False)
        raise typer.Exit(STATUS[exc.code][2]) from exc
    for problem in problems:
        err.print(str(problem), markup=False)
    if problems:
        err.print(f"FAILED: {len(problems)} problem(s) in {path}")
        raise typer.Exit(1)
    out.print(f"OK: {checked} files match checksums.txt")
