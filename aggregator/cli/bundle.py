"""`plumb bundle` (ask the aggregator for a bundle, or build it here with `--data DIR` merged
over the shipped recipes) and `plumb verify` (check one, offline)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

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

if TYPE_CHECKING:
    from plumb.aggregator.bundle import OciRef

Many = Annotated[list[str] | None, typer.Option()]
ARCHIVES = {".zip": "zip", ".gz": "tar.gz", ".tgz": "tar.gz"}


@app.command()
def bundle(
    output: Annotated[
        str,
        typer.Option(
            "-o", "--output", help="a folder, a .tar.gz / .zip file, or oci://REGISTRY/NAME:VERSION"
        ),
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
            help="how the bundle deploys (helm, helmfile, argocd, argocd-helm, flux)",
            parser=choices.one_of("deployer", choices.deployers, default="helm"),
        ),
    ] = "helm",
    set: Annotated[
        list[str] | None, typer.Option("--set", help="component:path=value, repeatable")
    ] = None,
    set_json: Annotated[
        list[str] | None,
        typer.Option("--set-json", help="component:path=JSON, deep-merged; repeatable"),
    ] = None,
    set_file: Annotated[
        list[str] | None,
        typer.Option("--set-file", help="component:path=FILE, the file's text; repeatable"),
    ] = None,
    nodes: Annotated[
        int, typer.Option(min=0, help="expected GPU node count, for charts that size by it")
    ] = 0,
    storage_class: Annotated[
        str | None, typer.Option(help="StorageClass for the charts' persistent volumes")
    ] = None,
    dynamic: Annotated[
        list[str] | None,
        typer.Option(
            "--dynamic", help="component:path given at install time, not in the bundle; repeatable"
        ),
    ] = None,
    vendor_charts: Annotated[
        bool,
        typer.Option(
            "--vendor-charts",
            help="carry each chart's .tgz, pulled here with helm, for air-gapped installs",
        ),
    ] = False,
    readiness_hooks: Annotated[
        bool,
        typer.Option("--readiness-hooks", help="wait for each release's workloads before the next"),
    ] = False,
    system_node_selector: Many = None,
    system_toleration: Many = None,
    accelerated_node_selector: Many = None,
    accelerated_toleration: Many = None,
    repo_url: Annotated[
        str | None, typer.Option(help="Git repo of the bundle (argocd, argocd-helm, flux)")
    ] = None,
    repo_branch: str = "main",
    data: DataDir = None,
    sign_key: Annotated[
        Path | None,
        typer.Option(help="Ed25519 private key (PEM or OpenSSH): sign checksums.txt with it"),
    ] = None,
    helm: Annotated[
        str,
        typer.Option(
            envvar="PLUMB_HELM", help="the helm that pushes oci:// output and pulls vendored charts"
        ),
    ] = "helm",
    plain_http: Annotated[
        bool,
        typer.Option(
            "--plain-http", help="oci:// over HTTP (a registry without TLS), to push and to pull"
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="replace the contents of a non-empty output folder"),
    ] = False,
) -> None:
    """A deployable bundle of the recipe for --node, a recipe file, or criteria.

    A folder given as --output must be empty, or --force replaces everything in it (so
    `plumb verify` checks exactly the new bundle). With --sign-key the bundle gets
    checksums.txt.sig, made here: the key never leaves this machine. With --vendor-charts the
    charts are pulled here by helm and the bundle is built here (from the shipped recipes, or
    --data); for a node's recipe, save it with `plumb recipe --node N -o yaml` and give it
    as --recipe. Exit codes: 0 ok, 2 bad option or a non-empty folder, 5 aggregator or chart
    source unreachable.
    """
    oci = _oci_ref(output) if output.startswith("oci://") else None
    target = Path(output)
    folder = oci is None and target.suffix not in ARCHIVES
    fmt = ARCHIVES.get(target.suffix, "tar.gz") if oci is None else "tar.gz"
    key = _load_key(sign_key, private=True) if sign_key else None
    if folder and target.is_dir() and any(target.iterdir()) and not force:
        _bad(
            f"{output} is not empty: a bundle written into it would sit beside stale files\n"
            "hint: give an empty or new folder, or --force to replace its contents"
        )
    body: dict = {
        "deployer": deployer,
        "set": set or [],
        "set_json": set_json or [],
        "set_file": _file_texts(set_file or []),
        "nodes": nodes,
        "storage_class": storage_class,
        "dynamic": dynamic or [],
        "vendor_charts": vendor_charts,
        "readiness_hooks": readiness_hooks,
        "system_node_selector": system_node_selector or [],
        "system_tolerations": system_toleration or [],
        "accelerated_node_selector": accelerated_node_selector or [],
        "accelerated_tolerations": accelerated_toleration or [],
        "repo_url": repo_url,
        "repo_branch": repo_branch,
        "format": "tar.gz" if key else fmt,  # a signed bundle is re-archived here
    }
    if oci is not None:
        body["chart"] = {"name": oci.name, "version": oci.version}
    if node:
        body["node"] = node
    elif recipe:
        body["recipe"] = recipe.read_text(encoding="utf-8")
    else:
        body["criteria"] = dict(
            service=service, accelerator=accelerator, os=os, intent=intent, platform=platform
        )
    if (data or vendor_charts) and node:
        what = "--data" if data else "--vendor-charts"
        err.print(
            f"{what} builds here from recipe files; --node needs the aggregator's facts\n"
            "hint: plumb recipe --node N -o yaml > recipe.yaml, then --recipe recipe.yaml"
        )
        raise typer.Exit(EXIT_CODES["invalid_input"])
    if data or vendor_charts:
        archive, files = _build_here(data, body, helm=helm, plain_http=plain_http)
    else:
        archive, files = _post(server, body)
    if key:
        from plumb.aggregator.bundle import sign_archive

        archive, files = sign_archive(archive, key, fmt), files + 1
    if oci is not None:
        digest = _push(archive, oci, helm, plain_http)
        err.print(f"pushed {plural(files, 'file')} to {oci}", markup=False)
        err.print(f"digest: {digest}", markup=False)
        return
    if folder:
        from plumb.aggregator.bundle import unpack

        if target.is_dir():
            _empty(target)
        unpack(archive, target)
    else:
        target.write_bytes(archive)
    err.print(
        f"wrote {plural(files, 'file')} to {output} ({len(archive) / 1024:.1f} KiB archived)",
        markup=False,
    )


def _oci_ref(text: str) -> OciRef:
    """The ``oci://`` reference of ``-o``; a bad one exits 2 before any request."""
    from plumb.aggregator.bundle import BundleError, OciRef

    try:
        return OciRef.parse(text)
    except BundleError as exc:
        _bad(f"-o {exc}" + (f"\nhint: {exc.hint}" if exc.hint else ""))


def _push(data: bytes, ref: OciRef, helm: str, plain_http: bool) -> str:
    """Push the bundle with helm; the manifest digest, or exit by the error's code."""
    from plumb.aggregator.bundle import push
    from plumb.aggregator.errors import PlumbError

    try:
        return push(data, ref, helm=helm, plain_http=plain_http)
    except PlumbError as exc:
        err.print(str(exc) + (f"\nhint: {exc.hint}" if exc.hint else ""), markup=False)
        raise typer.Exit(EXIT_CODES[exc.code]) from exc


def _file_texts(pairs: list[str]) -> dict[str, str]:
    """``component:path`` -> the text of FILE, for each ``--set-file component:path=FILE``.

    The CLI reads the files, so the aggregator never opens a path a request names.
    """
    texts: dict[str, str] = {}
    for pair in pairs:
        target, eq, name = pair.partition("=")
        if not eq or not name:
            _bad(f"--set-file {pair!r}: expected component:path=FILE")
        try:
            texts[target] = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            _bad(f"--set-file {pair!r}: cannot read {name} as UTF-8 text: {exc}")
    return texts


def _load_key(path: Path, *, private: bool):
    """The Ed25519 key in the file at ``path``; a bad one exits 2 saying why."""
    from plumb.aggregator.bundle import BundleError, private_key, public_key

    try:
        data = path.read_bytes()
    except OSError as exc:
        _bad(f"cannot read key {path}: {exc.strerror}")
    try:
        return private_key(data) if private else public_key(data)
    except BundleError as exc:
        _bad(f"{path}: {exc}" + (f"\nhint: {exc.hint}" if exc.hint else ""))


def _bad(message: str) -> NoReturn:
    err.print(message, markup=False)
    raise typer.Exit(EXIT_CODES["invalid_input"])


def _empty(folder: Path) -> None:
    """Remove everything inside `folder` (the folder itself stays, with its permissions)."""
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _build_here(data: Path | None, body: dict, *, helm: str, plain_http: bool) -> tuple[bytes, int]:
    """The bundle the aggregator would build for `body`, built here from the shipped recipes
    (with `data` merged over them), and with the charts pulled here for --vendor-charts."""
    from plumb.aggregator.api.bundles import BundleIn
    from plumb.aggregator.bundle import Recipe, build, parse_recipe, pull
    from plumb.aggregator.errors import PlumbError
    from plumb.aggregator.recipes import Criteria, resolve

    catalog = load_data(data)
    try:
        options = BundleIn.model_validate(body).options()
        if "recipe" in body:
            source = parse_recipe(body["recipe"], catalog)
        else:
            source = Recipe.of(resolve(catalog, Criteria(**body["criteria"])))
        charts = None
        if options.vendor_charts:
            charts = pull(source, helm=helm, plain_http=plain_http, progress=_pulling)
            err.print(f"pulled {plural(len(charts), 'chart')}", markup=False)
        bundle = build(source, catalog, options, charts=charts)
    except PlumbError as exc:
        err.print(str(exc) + (f"\nhint: {exc.hint}" if exc.hint else ""), markup=False)
        raise typer.Exit(EXIT_CODES[exc.code]) from exc
    return bundle.archive(body["format"]), len(bundle.files)


def _pulling(done: int, total: int, component) -> None:
    err.print(
        f"pulling chart {done + 1}/{total}: {component.chart} {component.version} from "
        f"{component.source} ({component.name})",
        markup=False,
    )


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
    key: Annotated[
        Path | None,
        typer.Option(help="the signer's Ed25519 public key: checksums.txt.sig must be its"),
    ] = None,
    min_trust_level: Annotated[
        str,
        typer.Option(
            help="fail below this level: unverified (checksums only) or verified (signed, --key)",
            parser=choices.one_of("trust level", choices.trust_levels, default="unverified"),
        ),
    ] = "unverified",
) -> None:
    """Recompute a bundle's checksums (and, with --key, check its signature); exit 1 naming
    every changed, missing or extra file, or a signature that is missing or not the key's.

    Checksums alone prove no tampering: whoever edits a file can recompute them. Only a
    signature checked against the signer's key makes a bundle verified, so
    --min-trust-level verified needs --key (exit 2 without it).
    """
    from plumb.aggregator.bundle import BundleError, verify

    if min_trust_level == "verified" and key is None:
        _bad(
            "--min-trust-level verified needs --key: only a signature checked against the "
            "signer's public key makes a bundle verified"
        )
    public = _load_key(key, private=False) if key else None
    try:
        verdict = verify(path, public)
    except BundleError as exc:
        err.print(str(exc), markup=False)
        raise typer.Exit(EXIT_CODES[exc.code]) from exc
    for problem in verdict.problems:
        err.print(str(problem), markup=False)
    if verdict.problems:
        err.print(f"FAILED: {plural(len(verdict.problems), 'problem')} in {path}", markup=False)
        raise typer.Exit(1)
    verb = "matches" if verdict.checked == 1 else "match"
    if verdict.trust == "verified":
        how = "verified (signed by the given key)"
    elif verdict.signed:
        how = "unverified (signed; no --key to check it)"
    else:
        how = "unverified (checksums only: unsigned)"
    out.print(f"OK: {plural(verdict.checked, 'file')} {verb} checksums.txt", markup=False)
    out.print(f"trust level: {how}", markup=False)
