"""``--vendor-charts``: each upstream chart's ``.tgz`` carried inside the bundle, for air gaps.

``pull`` fetches the charts of a recipe's ``helm`` components with ``helm pull`` (a chart
repository by ``--repo``, an ``oci://`` registry by reference), on the machine that runs
``plumb bundle``: that is the side of the air gap with the network and with helm, and the
aggregator never fetches a URL an uploaded recipe names. The bundle then carries them as
``NNN-<component>/chart.tgz`` (covered by ``checksums.txt`` and its signature like every
file) and ``charts.yaml``, which says where each came from and its SHA-256, as AICR's
``provenance.yaml`` does.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from plumb.aggregator.bundle.documents import yaml_text
from plumb.aggregator.bundle.errors import BundleError
from plumb.aggregator.bundle.recipe import Recipe, RecipeComponent
from plumb.aggregator.errors import Unavailable

log = logging.getLogger(__name__)

__all__ = ["PULL_TIMEOUT_S", "charts_yaml", "pull"]

PULL_TIMEOUT_S = 300.0  # the largest charts are a few MiB; minutes mean an unreachable source

# progress(done, total, component) before each pull; done counts the charts already pulled.
Progress = Callable[[int, int, RecipeComponent], None]


def pull(
    recipe: Recipe,
    *,
    helm: str = "helm",
    plain_http: bool = False,
    progress: Progress | None = None,
) -> dict[str, bytes]:
    """Each ``helm`` component's chart archive, by component name, pulled at its pinned
    version; Unavailable names the chart that failed and what to do."""
    found = shutil.which(helm)
    if found is None:
        raise BundleError(
            f"helm ({helm}) is not installed: --vendor-charts pulls the charts with helm pull",
            hint="install helm 3.8 or later, or pass --helm PATH",
        )
    wanted = [c for c in recipe.components if c.type == "helm"]
    out: dict[str, bytes] = {}
    for done, comp in enumerate(wanted):
        if progress is not None:
            progress(done, len(wanted), comp)
        out[comp.name] = _pull_one(found, comp, plain_http)
        log.info(
            "chart pulled",
            extra={"component": comp.name, "chart": comp.chart, "bytes": len(out[comp.name])},
        )
    return out


def _pull_one(helm: str, comp: RecipeComponent, plain_http: bool) -> bytes:
    source, chart, version = comp.source or "", comp.chart or "", comp.version or ""
    if source.startswith("oci://"):
        args = [helm, "pull", f"{source}/{chart}", "--version", version]
        args += ["--plain-http"] if plain_http else []
    else:
        args = [helm, "pull", chart, "--repo", source, "--version", version]
    where = f"{chart} {version} from {source} ({comp.name})"
    with tempfile.TemporaryDirectory(prefix="plumb-vendor-") as tmp:
        try:
            run = subprocess.run(
                [*args, "--destination", tmp], capture_output=True, text=True,
                timeout=PULL_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise Unavailable(f"helm pull of {where} took over {PULL_TIMEOUT_S:.0f} s") from exc
        pulled = sorted(Path(tmp).glob("*.tgz"))
        if run.returncode != 0 or len(pulled) != 1:
            raise Unavailable(
                f"helm pull of {where} failed: {(run.stdout + run.stderr).strip()[-500:]}",
                hint="check this machine reaches the source (helm registry login for a "
                "registry that needs it, --plain-http for one without TLS), or mirror the chart "
                "and point the recipe at the mirror with --data",
            )
        return pulled[0].read_bytes()


def charts_yaml(recipe: Recipe, folders: Mapping[str, str], charts: Mapping[str, bytes]) -> str:
    """``charts.yaml``: each vendored chart's file, source, name, version and SHA-256."""
    entries = [
        {
            "component": c.name,
            "file": folders[c.name],
            "source": c.source,
            "chart": c.chart,
            "version": c.version,
            "sha256": hashlib.sha256(charts[c.name]).hexdigest(),
        }
        for c in recipe.components
        if c.name in charts
    ]
    header = "# The upstream charts this bundle carries and where each came from. By Plumb.\n"
    return yaml_text({"charts": sorted(entries, key=lambda e: e["file"])}, header)
