"""Bundles: package a resolved recipe as Helm, Helmfile, Argo CD or Flux files, reproducibly.

Pure: recipe and facts in, files out; no web or CLI code. ``build`` makes a Bundle, which
writes itself to a folder or a deterministic archive; ``verify`` checks one against its
``checksums.txt``.
"""

from pathlib import Path

from plumb.aggregator.bundle.archive import FORMATS, Format, read_bundle, unpack
from plumb.aggregator.bundle.bundle import Bundle, build
from plumb.aggregator.bundle.checksums import Problem, check
from plumb.aggregator.bundle.errors import BundleError
from plumb.aggregator.bundle.options import DEPLOYERS, BundleOptions, Override, Toleration
from plumb.aggregator.bundle.recipe import Recipe, parse_recipe


def verify(path: Path) -> tuple[int, list[Problem]]:
    """(files checked, problems) of the bundle at ``path``: a folder, ``.tar.gz`` or ``.zip``."""
    digests, listing = read_bundle(path)
    return len(digests), check(digests, listing)


__all__ = [
    "DEPLOYERS",
    "FORMATS",
    "Bundle",
    "BundleError",
    "BundleOptions",
    "Format",
    "Override",
    "Problem",
    "Recipe",
    "Toleration",
    "build",
    "parse_recipe",
    "unpack",
    "verify",
]
