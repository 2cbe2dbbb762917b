"""Criteria: what a recipe is asked for, given by a request or inferred from live facts.

Service, accelerator and os come from the node (provider id or instance type, the GPU's
NVML name or PCI id through the GPU catalog, os-release ``ID``); intent and platform come
from configuration or the request. Anything that cannot be told stays ``any``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cache

from plumb.aggregator.errors import InvalidInput
from plumb.aggregator.recipes.catalog import CRITERIA_KEYS, Catalog, load_catalog
from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.state.views import gpu_views
from plumb.facts import Reading

__all__ = ["Criteria", "CriteriaError", "check_criteria", "infer_criteria"]


class CriteriaError(InvalidInput):
    """A criteria value the catalog does not know; the message names the allowed values."""


@dataclass(frozen=True, order=True)
class Criteria:
    """One query: each dimension a value or ``any``; ``nodes`` 0 means any size."""

    service: str = "any"
    accelerator: str = "any"
    os: str = "any"
    intent: str = "any"
    platform: str = "any"
    nodes: int = 0

    def to_dict(self) -> dict[str, str | int]:
        """The criteria as a plain dict."""
        return asdict(self)


def check_criteria(catalog: Catalog, criteria: Criteria) -> None:
    """Raise CriteriaError naming the allowed values when a criteria value is unknown, says
    why when it is one the recipes refuse, and refuses a node count no overlay depends on."""
    allowed = catalog.allowed_values()
    for key in CRITERIA_KEYS:
        value = getattr(criteria, key)
        if value in allowed[key]:
            continue
        choices = ", ".join(allowed[key])
        why = catalog.criteria.refused.get(key, {}).get(value)  # type: ignore[call-overload]
        if why:
            raise CriteriaError(
                f"{key} {value!r} is not supported: {why}; supported: {choices}",
                hint=f"one of {choices}",
            )
        raise CriteriaError(
            f"unknown {key} {value!r}; allowed: {choices}", hint=f"one of {choices}"
        )
    if criteria.nodes < 0:
        raise CriteriaError(f"nodes must be >= 0, got {criteria.nodes}")
    sizes = sorted({o.criteria.nodes for o in catalog.overlays.values() if o.criteria.nodes})
    if criteria.nodes and not any(size <= criteria.nodes for size in sizes):
        pinned = ", ".join(map(str, sizes)) or "none"
        raise CriteriaError(
            f"nodes {criteria.nodes} changes no recipe: no overlay applies from that cluster"
            f" size (overlays pin nodes: {pinned})",
            hint="leave nodes out (or 0)" + (f", or give at least {sizes[0]}" if sizes else ""),
        )


@cache
def _default_catalog() -> Catalog:
    return load_catalog()


def infer_criteria(
    facts: Mapping[str, Reading],
    *,
    intent: str = "any",
    platform: str = "any",
    catalog: Catalog | None = None,
    view: NodeView | None = None,
) -> Criteria:
    """The criteria a node's facts imply (``catalog`` defaults to the repository's recipes);
    ``view`` is the facts' NodeView where the caller built it already."""
    catalog = catalog or _default_catalog()
    table = catalog.criteria
    view = view or NodeView.from_facts(facts)
    provider = (view.one("cloud.provider") or "").lower()
    service = table.service_by_provider.get(provider)
    if service is None:
        instance = view.one("cloud.instance_type") or ""
        prefixes = sorted(table.service_by_instance_prefix.items(), key=lambda kv: -len(kv[0]))
        service = next((svc for pre, svc in prefixes if instance.startswith(pre)), None)
    os_id = (view.one("os.id") or "").lower()
    return Criteria(
        service=service or table.fallback_service,
        accelerator=_accelerator(catalog, facts),
        os=table.os_by_id.get(os_id, "any"),
        intent=intent,
        platform=platform,
    )


def _accelerator(catalog: Catalog, facts: Mapping[str, Reading]) -> str:
    """The accelerator most of the node's GPUs are; ``any`` when none is recognised."""

    found = Counter(
        row.accelerator
        for g in gpu_views(facts)
        if (row := catalog.identify_gpu(g.text("name"), g.text("pci_device_id")))
    )
    if not found:
        return "any"
    return min(found.items(), key=lambda kv: (-kv[1], kv[0]))[0]
