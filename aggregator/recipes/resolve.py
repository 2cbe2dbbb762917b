"""Resolve criteria (and optionally a node's facts) to a recipe: the core of the package.

Steps, after AICR's model: collect every overlay whose criteria match (asymmetric: an
overlay's ``any`` matches every query, a query's ``any`` matches only ``any``); with facts,
exclude overlays whose own or mixins' constraints fail, and their descendants; keep the
maximal leaves, order them by specificity, merge ``base`` then each leaf's chain root to leaf
(each overlay once), then the mixins; fill registry defaults; order deployment by a
topological sort of dependencies (alphabetical among equals); run the knowledge rules.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import heapq
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Any

from plumb.aggregator.recipes.catalog import CRITERIA_KEYS, Catalog, RecipeError
from plumb.aggregator.recipes.checks import evaluate
from plumb.aggregator.recipes.criteria import Criteria, check_criteria
from plumb.aggregator.recipes.knowledge import Finding, findings
from plumb.aggregator.recipes.merge import Layer, deep_merge, merge
from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.recipes.schema import Check, CriteriaSpec, Overlay
from plumb.facts import Reading

__all__ = ["Resolution", "resolve"]

FALLBACK_WARNING = "no environment-specific overlays matched, using base configuration only"
# Who owns the driver per pool, as configured (RecipeSettings.driver_owner): pool name or
# glob (`eks/l40s/*`) -> "operator" | "host"; the first that matches wins.
DriverOwners = Mapping[str, str]


@dataclass(frozen=True)
class DriverOwner:
    """Who installs the node's driver, and why Plumb thinks so.

    ``operator``: the GPU Operator's driver container; drift compares the driver with the
    recipe's pin. ``host``: the node image (EKS accelerated AMIs, GKE's installer, bare
    metal); the recipe judges the driver by its constraints and the knowledge minimums only.
    """

    owner: str
    reason: str
    source: str  # configured | recipe | facts | default

    def to_dict(self) -> dict[str, str]:
        """The owner as a plain dict."""
        return asdict(self)


def pool_key(criteria: Criteria) -> str:
    """The name of the pool of nodes with these criteria: `eks/h100/ubuntu/any/any`."""
    return "/".join(getattr(criteria, k) for k in CRITERIA_KEYS)


@dataclass(frozen=True)
class Resolution:
    """A resolved recipe; ``to_dict()`` is its canonical form and ``content_hash`` its digest."""

    criteria: Criteria
    catalog_digest: str
    as_of: dt.date | None
    applied: tuple[str, ...]
    excluded: tuple[tuple[str, str], ...]
    mixins: tuple[str, ...]
    components: tuple[Mapping[str, Any], ...]
    deployment_order: tuple[str, ...]
    constraints: tuple[Mapping[str, Any], ...]
    findings: tuple[Finding, ...]
    warnings: tuple[str, ...]
    facts: Mapping[str, tuple[str, ...]] | None = field(default=None)
    driver_owner: DriverOwner | None = None

    def body(self) -> dict[str, Any]:
        """Everything hashed: no timestamps, only inputs and what follows from them."""
        return {
            "criteria": self.criteria.to_dict(),
            "catalog": self.catalog_digest,
            "as_of": self.as_of.isoformat() if self.as_of else None,
            "overlays": {
                "applied": list(self.applied),
                "excluded": [{"name": n, "reason": r} for n, r in self.excluded],
            },
            "mixins": list(self.mixins),
            "components": [dict(c) for c in self.components],
            "deployment_order": list(self.deployment_order),
            "constraints": [dict(c) for c in self.constraints],
            "findings": [f.to_dict() for f in self.findings],
            "warnings": list(self.warnings),
            "driver_owner": self.driver_owner.to_dict() if self.driver_owner else None,
            "facts": {k: list(v) for k, v in self.facts.items()}
            if self.facts is not None
            else None,
        }

    @cached_property
    def canonical_json(self) -> str:
        """The body as canonical JSON: sorted keys, no whitespace, UTF-8."""
        return json.dumps(self.body(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @cached_property
    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON."""
        return hashlib.sha256(self.canonical_json.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The body plus its content hash."""
        return {**json.loads(self.canonical_json), "content_hash": self.content_hash}

    @property
    def unknown_gpus(self) -> tuple[str, ...]:
        """``NAME (PCI device ID)`` of each GPU of the node the catalog does not know."""
        return tuple((self.facts or {}).get("gpu.unknown", ()))

    def component(self, name: str) -> Mapping[str, Any] | None:
        """The resolved component ``name``, if the recipe has it."""
        return next((c for c in self.components if c["name"] == name), None)


def matches(spec: CriteriaSpec, query: Criteria) -> bool:
    """Asymmetric match of an overlay's criteria against a query."""
    for key in CRITERIA_KEYS:
        want = getattr(spec, key)
        if want != "any" and want != getattr(query, key):
            return False
    return spec.nodes == 0 or query.nodes >= spec.nodes


def specificity(spec: CriteriaSpec) -> int:
    """How many criteria an overlay pins."""
    return sum(getattr(spec, k) != "any" for k in CRITERIA_KEYS) + (spec.nodes > 0)


def resolve(
    catalog: Catalog,
    criteria: Criteria,
    facts: Mapping[str, Reading] | None = None,
    *,
    as_of: dt.date | None = None,
    driver_owners: DriverOwners | None = None,
) -> Resolution:
    """The recipe for ``criteria``; with ``facts``, snapshot-aware and with findings.

    ``as_of`` (default today) dates the driver-lifecycle rule; it is part of the output, so
    the same inputs, date included, always give the same bytes. ``driver_owners`` is the
    configured driver ownership per pool.
    """
    check_criteria(catalog, criteria)
    view = NodeView.from_facts(facts, catalog.gpu_identity) if facts is not None else None
    return resolve_view(catalog, criteria, view, as_of=as_of, driver_owners=driver_owners)


def resolve_view(
    catalog: Catalog,
    criteria: Criteria,
    view: NodeView | None,
    *,
    as_of: dt.date | None = None,
    driver_owners: DriverOwners | None = None,
) -> Resolution:
    """``resolve`` over an already built NodeView (the cache builds it once for its key)."""
    day = (as_of or dt.date.today()) if view is not None else None
    matched = {n for n, o in catalog.overlays.items() if matches(o.criteria, criteria)}
    excluded = _excluded(catalog, matched, view)
    kept = matched - set(excluded)
    ancestors = {a for n in kept for a in catalog.chain(n)[:-1]}
    leaves = sorted(kept - ancestors, key=lambda n: (specificity(catalog.overlays[n].criteria), n))
    applied: list[str] = ["base"]
    for leaf in leaves:
        applied += [n for n in catalog.chain(leaf) if n not in applied]
    mixins: list[str] = []
    for name in applied:
        mixins += [m for m in catalog.overlays[name].mixins if m not in mixins]

    layer, origin = Layer(), {}
    for name, source in [(n, catalog.overlays[n]) for n in applied] + [
        (f"mixin:{m}", catalog.mixins[m]) for m in mixins
    ]:
        layer = merge(layer, Layer.of(source.components, source.constraints))
        origin.update({c.name: name for c in source.constraints})

    warnings: list[str] = []
    if all(specificity(catalog.overlays[n].criteria) == 0 for n in applied):
        warnings.append(FALLBACK_WARNING)
    components = _components(catalog, layer, warnings)
    if view is not None:
        warnings += [
            f"unknown GPU {gpu}: not in the GPU catalog, so no accelerator overlay applies"
            for gpu in view.get("gpu.unknown")
        ]
    owner = _driver_owner(catalog, criteria, layer, view, driver_owners or {})
    return Resolution(
        criteria=criteria,
        catalog_digest=catalog.digest,
        as_of=day,
        applied=tuple(applied),
        excluded=tuple(sorted(excluded.items())),
        mixins=tuple(mixins),
        components=tuple(components[n] for n in sorted(components)),
        deployment_order=_deployment_order(components),
        constraints=tuple(
            _constraint_result(c, origin[name], view)
            for name, c in sorted(layer.constraints.items())
        ),
        findings=findings(catalog, view, day) if view is not None and day else (),
        warnings=tuple(warnings),
        facts=dict(view.values) if view is not None else None,
        driver_owner=owner,
    )


def _driver_owner(
    catalog: Catalog,
    criteria: Criteria,
    layer: Layer,
    view: NodeView | None,
    configured: DriverOwners,
) -> DriverOwner:
    """Configuration for the pool first, then a recipe that deploys no driver, then the
    facts (drift.yaml ``driver_owner``)."""
    pool = pool_key(criteria)
    for pattern, owner in configured.items():
        if fnmatchcase(pool, pattern):
            return DriverOwner(owner, f"configured for pools {pattern!r}", "configured")
    rules = catalog.drift.driver_owner
    if not any(all(_deploys(layer, n) for n in group) for group in rules.deployed_by):
        return DriverOwner(
            "host", "the recipe deploys no driver through the GPU Operator", "recipe"
        )
    if view is None:
        return DriverOwner(
            "operator", "the recipe deploys the driver through the GPU Operator", "recipe"
        )
    for rule in rules.rules:
        if evaluate(rule.when, view).status == "pass":
            return DriverOwner(rule.owner, rule.reason, "facts")
    return DriverOwner(rules.default, rules.default_reason, "default")


def _deploys(layer: Layer, component: str) -> bool:
    patch = layer.components.get(component)
    return patch is not None and patch.enabled is not False


def _failure(catalog: Catalog, overlay: Overlay, view: NodeView) -> str | None:
    """Why ``overlay`` cannot apply to the node, or None when nothing fails."""
    sources = [("", c) for c in overlay.constraints] + [
        (f"mixin {m} ", c) for m in overlay.mixins for c in catalog.mixins[m].constraints
    ]
    for where, constraint in sources:
        outcome = evaluate(constraint, view)
        if outcome.status == "fail":
            return f"{where}constraint {constraint.name} failed: {outcome.detail}"
    return None


def _excluded(catalog: Catalog, matched: set[str], view: NodeView | None) -> dict[str, str]:
    """Matched overlays excluded by the node's facts, with the reason; base never is."""
    if view is None:
        return {}
    own = {
        n: why
        for n in matched - {"base"}
        if (why := _failure(catalog, catalog.overlays[n], view)) is not None
    }
    out = dict(own)
    for name in matched - set(own):
        failed = next((a for a in catalog.chain(name)[:-1] if a in own), None)
        if failed is not None:
            out[name] = f"parent {failed} excluded"
    return out


def _components(catalog: Catalog, layer: Layer, warnings: list[str]) -> dict[str, dict[str, Any]]:
    """Registry defaults under the merged patches; operands folded into their chart's values."""
    out: dict[str, dict[str, Any]] = {}
    operands = []
    for name, patch in layer.components.items():
        reg = catalog.registry[name]
        if reg.type == "operand":
            operands.append((reg, patch))
            continue
        if patch.enabled is False:
            continue
        out[name] = {
            "name": name,
            "type": reg.type,
            "source": reg.source,
            "chart": reg.chart,
            "version": patch.version or reg.version,
            "namespace": patch.namespace or reg.namespace,
            "dependencies": sorted(
                patch.dependencies if patch.dependencies is not None else reg.dependencies
            ),
            "values": deep_merge({}, patch.values or {}),
        }
    for reg, patch in sorted(operands, key=lambda rp: rp[0].name):
        parent = out.get(reg.operand_of or "")
        if parent is None:
            if patch.enabled is not False:  # one an overlay turned off is no surprise
                warnings.append(
                    f"{reg.name} is a setting of {reg.operand_of}, which is not deployed"
                )
            continue
        enabled = patch.enabled is not False
        version = patch.version or reg.version
        setting: dict[str, Any] = {"enabled": enabled, **({"version": version} if enabled else {})}
        parent["values"] = deep_merge(parent["values"], {reg.values_key: setting})
        if enabled:
            out[reg.name] = {
                "name": reg.name,
                "type": "operand",
                "operand_of": reg.operand_of,
                "version": version,
                "values": deep_merge({}, patch.values or {}),
            }
    for comp in out.values():
        missing = [d for d in comp.get("dependencies", ()) if d not in out]
        for dep in missing:
            warnings.append(f"{comp['name']} depends on {dep}, which this recipe does not deploy")
        if missing:
            comp["dependencies"] = [d for d in comp["dependencies"] if d in out]
    return out


def _deployment_order(components: Mapping[str, Mapping[str, Any]]) -> tuple[str, ...]:
    """Kahn's topological sort of the deployable components, alphabetical among equals."""
    deployable = {n: c for n, c in components.items() if c["type"] != "operand"}
    waiting = {n: set(c["dependencies"]) for n, c in deployable.items()}
    ready = [n for n, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        name = heapq.heappop(ready)
        order.append(name)
        for other, deps in waiting.items():
            if name in deps:
                deps.discard(name)
                if not deps:
                    heapq.heappush(ready, other)
    if len(order) != len(deployable):
        stuck = sorted(set(deployable) - set(order))
        raise RecipeError(f"dependency cycle among components: {', '.join(stuck)}")
    return tuple(order)


def render(check: Check) -> str:
    """A check as one line of text: ``k8s.version >= 1.30``, ``(a and b)``."""
    if check.fact is not None:
        prefix = "any " if check.quantifier == "any" else ""
        return f"{prefix}{check.fact} {check.value}"
    parts, joiner = (check.all_of, " and ") if check.all_of is not None else (check.any_of, " or ")
    return "(" + joiner.join(render(c) for c in parts or ()) + ")"


def _constraint_result(constraint: Any, origin: str, view: NodeView | None) -> dict[str, Any]:
    outcome = evaluate(constraint, view) if view is not None else None
    return {
        "name": constraint.name,
        "check": render(constraint),
        "severity": constraint.severity,
        "remediation": constraint.remediation,
        "from": origin,
        "status": outcome.status if outcome else "not_evaluated",
        "detail": outcome.detail if outcome else None,
    }
