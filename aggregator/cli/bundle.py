"""`plumb bundle` (ask the aggregator for a bundle, or build it here with `--data DIR` merged
over the shipped recipes) and `plumb verify` (check one, offline)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from plumb.aggregator.cli import choices
from plumb.aggregator.cli.app import ServerOpt, app, connection, err, out, refused, unreachable
from plumb.aggregator.cli.recipe import (
    Accelerator,
    DataDir,
    Intent,
    Node,
    Os,
    Platform,
    Service,
    load_data,
)
from plumb.aggregator.cli.render import plural
from plumb.aggregator.errors import EXIT_CODES

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
    deployer: Annotated[
        str,
        typer.Option(
            help="how the bundle deploys (helm, helmfile, argocd, flux …)",
            parser=choices.one_of("deployer", choices.deployers, default="helm"),
        ),
    ] = "helm",
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
    data: DataDir = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="replace the contents of a non-empty output folder"),
    ] = False,
) -> None:
    """A deployable bundle of the recipe for --node, a recipe file, or criteria.

    A folder given as --output must be empty, or --force replaces everything in it (so
    `plumb verify` checks exactly the new bundle). Exit codes: 0 ok, 2 bad option or a
    non-empty folder, 5 aggregator unreachable.
    """
    folder = output.suffix not in ARCHIVES
    if folder and output.is_dir() and any(output.iterdir()) and not force:
        err.print(
            f"{output} is not empty: a bundle written into it would sit beside stale files\n"
            "hint: give an empty or new folder, or --force to replace its contents",
            markup=False,
        )
        raise typer.Exit(EXIT_CODES["invalid_input"])
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
    if data and node:
        err.print("--data builds here from recipe files; --node needs the aggregator's facts")
        raise typer.Exit(EXIT_CODES["invalid_input"])
    archive, files = _build_here(data, body) if data else _post(server, body)
    if folder:
        from plumb.aggregator.bundle import unpack

        if output.is_dir():
            _empty(output)
        unpack(archive, output)
    else:
        output.write_bytes(archive)
    err.print(
        f"wrote {plural(files, 'file')} to {output} ({len(archive) / 1024:.1f} KiB archived)",
        markup=False,
    )


def _empty(folder: Path) -> None:
    """Remove everything inside `folder` (the folder itself stays, with its permissions)."""
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _build_here(data: Path, body: dict) -> tuple[bytes, int]:
    """The bundle the aggregator would build for `body`, built here from the shipped recipes
    with `data` merged over them."""
    from plumb.aggregator.bundle import BundleOptions, Recipe, build, parse_recipe
    from plumb.aggregator.errors import PlumbError
    from plumb.aggregator.recipes import Criteria, resolve

    catalog = load_data(data)
    try:
        options = BundleOptions.parse(
            body["deployer"],
            set=body["set"],
            system_node_selector=body["system_node_selector"],
            system_tolerations=body["system_tolerations"],
            accelerated_node_selector=body["accelerated_node_selector"],
            accelerated_tolerations=body["accelerated_tolerations"],
            repo_url=body["repo_url"],
            repo_branch=body["repo_branch"],
        )
        if "recipe" in body:
            source = parse_recipe(body["recipe"], catalog)
        else:
            source = Recipe.of(resolve(catalog, Criteria(**body["criteria"])))
        bundle = build(source, catalog, options)
    except PlumbError as exc:
        err.print(str(exc) + (f"\nhint: {exc.hint}" if exc.hint else ""), markup=False)
        raise typer.Exit(EXIT_CODES[exc.code]) from exc
    return bundle.archive(body["format"]), len(bundle.files)


def _post(server: str, body: dict) -> tuple[bytes, int]:
    import httpx

    try:
        resp = httpx.post(
            server.rstrip("/") + "/v1/bundles", json=body, timeout=60, **connection(server)
        )
    except httpx.HTTPError as exc:
        raise unreachable(server, exc) from exc
    if resp.status_code >= 400:
        try:
            problem = resp.json()
        except ValueError:
            problem = None
        raise refused(problem, resp.text)
    return resp.content, int(resp.headers["X-Bundle-Files"])


@app.command(name="verify")
def verify_bundle(
    path: Annotated[Path, typer.Argument(help="a bundle folder, .tar.gz or .zip")],
) -> None:
    """Recompute a bundle's checksums; exit 1 naming every changed, missing or extra file."""
    from plumb.aggregator.bundle import BundleError, verify

    try:
        checked, problems = verify(path)
    except BundleError as exc:
        err.print(str(exc), markup=False)
        raise typer.Exit(EXIT_CODES[exc.code]) from exc
    for problem in problems:
        err.print(str(problem), markup=False)
    if problems:
        err.print(f"FAILED: {plural(len(problems), 'problem')} in {path}", markup=False)
        raise typer.Exit(1)
    verb = "matches" if checked == 1 else "match"
    out.print(f"OK: {plural(checked, 'file')} {verb} checksums.txt", markup=False)
