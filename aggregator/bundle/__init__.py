"""Bundles: package a resolved recipe as Helm, Helmfile, Argo CD or Flux files, reproducibly.

Pure: recipe and facts in, files out; no web or CLI code. ``build`` makes a Bundle, which
writes itself to a folder or a deterministic archive; ``sign_archive`` adds an Ed25519
signature of its ``checksums.txt``; ``push`` puts one in an OCI registry as a Helm chart;
``verify`` checks one against its checksums and signature and says how far it can be trusted;
``pull`` fetches a recipe's charts with helm, for a bundle that carries them.
"""

from plumb.aggregator.bundle.archive import FORMATS, Format, unpack
from plumb.aggregator.bundle.bundle import Bundle, build
from plumb.aggregator.bundle.checksums import CHECKSUMS, SIGNATURE, Problem, check
from plumb.aggregator.bundle.errors import BundleError
from plumb.aggregator.bundle.oci import OciRef, push
from plumb.aggregator.bundle.options import (
    DEPLOYERS,
    BundleOptions,
    Dynamic,
    Override,
    Toleration,
)
from plumb.aggregator.bundle.recipe import Recipe, parse_recipe
from plumb.aggregator.bundle.signature import private_key, public_key, sign_archive
from plumb.aggregator.bundle.trust import TRUST_LEVELS, TrustLevel, Verdict, verify
from plumb.aggregator.bundle.vendor import pull

__all__ = [
    "CHECKSUMS",
    "DEPLOYERS",
    "FORMATS",
    "SIGNATURE",
    "TRUST_LEVELS",
    "Bundle",
    "BundleError",
    "BundleOptions",
    "Dynamic",
    "Format",
    "OciRef",
    "Override",
    "Problem",
    "Recipe",
    "Toleration",
    "TrustLevel",
    "Verdict",
    "build",
    "check",
    "parse_recipe",
    "private_key",
    "public_key",
    "pull",
    "push",
    "sign_archive",
    "unpack",
    "verify",
]
