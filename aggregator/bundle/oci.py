"""``oci://`` output: a bundle pushed to an OCI registry as a Helm chart, by ``helm push``.

An air-gapped site already runs a registry for its images and charts, so a bundle travels
through it as a chart: ``oci://REGISTRY/PATH/NAME:VERSION`` names the chart and its version,
and the bundle's root ``Chart.yaml`` says the same (argocd-helm's is an installable chart; the
other deployers' is a library chart, which Helm refuses to install, since their scripts or
manifests do the deploying). ``helm pull`` gets back exactly the bundle's files, so ``plumb
verify`` (and its signature) still holds; ``--untar`` drops file modes, so there run
``bash deploy.sh`` (or untar the pulled ``.tgz`` with ``tar``, which keeps them). Helm does
the push: it is the client every such site has, and it speaks the registry's auth (``helm
registry login``) and TLS.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from plumb.aggregator.bundle.errors import BundleError
from plumb.aggregator.errors import Unavailable

log = logging.getLogger(__name__)

__all__ = ["CHART_NAME", "CHART_VERSION", "OciRef", "push"]

# A Helm chart name (lower case, digits, '-'), and a SemVer 2 version without build metadata:
# an OCI tag cannot hold '+'.
CHART_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
CHART_VERSION = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$")
_REF = re.compile(r"^oci://(?P<base>[^/\s]+(/[^/\s:]+)*)/(?P<name>[^/\s:]+)(:(?P<version>\S+))?$")
PUSH_TIMEOUT_S = 300.0  # a bundle is tens of KiB; minutes mean a registry that is not answering


@dataclass(frozen=True)
class OciRef:
    """``oci://REGISTRY[/PATH]/NAME:VERSION``: where ``helm push`` puts the chart NAME."""

    base: str  # registry and path, without the scheme or the chart name
    name: str
    version: str

    @classmethod
    def parse(cls, text: str) -> OciRef:
        match = _REF.match(text)
        example = "oci://registry.example.com/gpu/gpu-stack:1.0.0"
        if match is None:
            raise BundleError(
                f"{text!r} is not oci://REGISTRY/NAME:VERSION", hint=f"e.g. {example}"
            )
        if match["version"] is None:
            raise BundleError(
                f"{text!r} has no version tag: the chart's version is the tag",
                hint=f"e.g. {example}",
            )
        if not CHART_NAME.match(match["name"]):
            raise BundleError(
                f"{match['name']!r} is not a Helm chart name",
                hint="lower-case letters, digits and '-', at most 63 characters",
            )
        if not CHART_VERSION.match(match["version"]):
            raise BundleError(
                f"version {match['version']!r} is not SemVer", hint="e.g. 1.0.0 or 1.1.0-rc.1"
            )
        return cls(match["base"], match["name"], match["version"])

    def __str__(self) -> str:
        return f"oci://{self.base}/{self.name}:{self.version}"


def push(data: bytes, ref: OciRef, *, helm: str = "helm", plain_http: bool = False) -> str:
    """Push a bundle ``tar.gz`` whose root ``Chart.yaml`` names ``ref``; the manifest digest.

    ``plain_http`` talks HTTP, for a registry on loopback or a lab network without TLS.
    """
    found = shutil.which(helm)
    if found is None:
        raise BundleError(
            f"helm ({helm}) is not installed: oci:// output is pushed by helm push",
            hint="install helm 3.8 or later, or pass --helm PATH",
        )
    with tempfile.TemporaryDirectory(prefix="plumb-push-") as tmp:
        chart = Path(tmp) / f"{ref.name}-{ref.version}.tgz"
        chart.write_bytes(data)
        args = [found, "push", str(chart), f"oci://{ref.base}"]
        try:
            run = subprocess.run(
                [*args, *(["--plain-http"] if plain_http else [])],
                capture_output=True, text=True, timeout=PUSH_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise Unavailable(f"helm push to {ref} took over {PUSH_TIMEOUT_S:.0f} s") from exc
    output = run.stdout + run.stderr
    if run.returncode != 0:
        raise Unavailable(
            f"helm push to {ref} failed: {output.strip()[-500:]}",
            hint="helm registry login REGISTRY first if it needs credentials; "
            "--plain-http for a registry without TLS",
        )
    digest = re.search(r"Digest:\s*(sha256:[0-9a-f]{64})", output)
    log.info("bundle pushed", extra={"ref": str(ref), "digest": digest and digest[1]})
    return digest[1] if digest else "unknown"
