"""Deployers: each turns the ordered releases of a recipe into the files of one deploy tool.

A deployer returns its files (path → text), the README section that says how to apply them,
and which files are executable. ``DEPLOYERS`` maps the names a request may use.
"""

from __future__ import annotations

from collections.abc import Callable

from plumb.aggregator.bundle.deployers import argocd, argocd_helm, flux, helm, helmfile
from plumb.aggregator.bundle.deployers.output import Output
from plumb.aggregator.bundle.options import BundleOptions
from plumb.aggregator.bundle.plan import Release

__all__ = ["DEPLOYERS", "Output"]

Deployer = Callable[[list[Release], BundleOptions], Output]

DEPLOYERS: dict[str, Deployer] = {
    "argocd": argocd.render,
    "argocd-helm": argocd_helm.render,
    "flux": flux.render,
    "helm": helm.render,
    "helmfile": helmfile.render,
}
