"""Load and validate everything under ``recipes/`` into one immutable Catalog.

Loading is all or nothing: every problem in every file is collected, each as
``file:line: key: message``, and raised together as one RecipeError, so the aggregator refuses
to start rather than serve half a catalog. Line numbers come from YAML node marks.

An external data folder (``--data DIR``, as AICR's) is merged over the shipped tree: a file at
the same path (``overlays/eks.yaml``, ``criteria.yaml``, ``knowledge/gpus.yaml``) replaces the
shipped one, new files add, and ``registry.yaml`` merges by component name. Its problems are
reported under the folder's own path, so they name the user's file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

import plumb.aggregator as aggregator_package
from plumb.aggregator.errors import PlumbError
from plumb.aggregator.recipes import schema
from plumb.aggregator.recipes.check_catalog import CheckFile, Checks
from plumb.aggregator.recipes.drift_rules import DriftRules
from plumb.aggregator.recipes.node import normalize_pci_device_id
from plumb.aggregator.untrusted import SAFE_LOADER

__all__ = ["Catalog", "RecipeError", "default_root", "load_catalog"]

M = TypeVar("M", bound=BaseModel)
Loc = tuple[str | int, ...]
CRITERIA_KEYS = ("service", "accelerator", "os", "intent", "platform")


class RecipeError(PlumbError):
    """The recipe data is broken; the message lists every problem as ``file:line: key: why``."""

    code = "internal"


def default_root() -> Path:
    """The shipped ``recipes/``: beside the ``plumb.aggregator`` package in either layout.

    A wheel installs the top-level recipes/ as the ``plumb.recipes`` package data, so it is
    ``plumb/recipes`` beside ``plumb/aggregator``; a checkout (and its editable install) has
    ``recipes/`` beside ``aggregator/``. PLUMB_RECIPES__DIR overrides both.
    """
    return Path(aggregator_package.__file__).resolve().parents[1] / "recipes"


@dataclass(frozen=True)
class Catalog:
    """Every recipe file, validated and indexed; never mutated after loading."""

    root: Path
    digest: str
    criteria: schema.CriteriaValues
    registry: Mapping[str, schema.RegistryComponent]
    overlays: Mapping[str, schema.Overlay]
    mixins: Mapping[str, schema.Mixin]
    cuda_driver: Mapping[str, schema.CudaDriverRow]
    branches: Mapping[str, schema.DriverBranchRow]
    gpus: tuple[schema.GpuRow, ...]
    known_bad: tuple[schema.KnownBadRow, ...]
    drift: DriftRules
    component_images: tuple[schema.ComponentImageRow, ...] = ()
    # Registry components no image row covers, with why (component_images.yaml `undetected`).
    undetected_components: Mapping[str, str] = field(default_factory=dict)
    checks: Checks = field(default_factory=lambda: Checks({}, {}))
    xids: Mapping[int, schema.XidRow] = field(default_factory=dict)
    data: Path | None = None  # the external data folder merged over ``root``, if any
    _by_name: dict[str, schema.GpuRow] = field(default_factory=dict, init=False, repr=False)
    _by_pci: dict[str, schema.GpuRow] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for row in self.gpus:
            self._by_name.update({n.lower(): row for n in row.nvml_names})
            self._by_pci.update({p: row for p in row.pci_device_ids})

    def identify_gpu(self, name: str | None, pci_device_id: str | None) -> schema.GpuRow | None:
        """The GPU catalog row for a PCI device id, else for an NVML product name.

        The id comes first: it names the silicon and board, while names vary with driver
        releases and cloud SKUs; rows list only ids that are certain, and names cover the rest.
        """
        if pci_device_id and (row := self._by_pci.get(normalize_pci_device_id(pci_device_id))):
            return row
        if name:
            return self._by_name.get(name.strip().lower())
        return None

    def gpu_identity(self, name: str | None, pci_device_id: str | None) -> tuple[str, str] | None:
        """(model, accelerator) of a GPU, for NodeView."""
        row = self.identify_gpu(name, pci_device_id)
        return (row.model, row.accelerator) if row else None

    def allowed_values(self) -> dict[str, tuple[str, ...]]:
        """Allowed value of each criteria key, ``any`` first."""
        accelerators = sorted({row.accelerator for row in self.gpus})
        values = {
            "service": self.criteria.service,
            "accelerator": tuple(accelerators),
            "os": self.criteria.os,
            "intent": self.criteria.intent,
            "platform": self.criteria.platform,
        }
        return {k: ("any", *sorted(v)) for k, v in values.items()}

    def chain(self, name: str) -> tuple[str, ...]:
        """Overlay names from the root (``base``) down to ``name``."""
        out: list[str] = []
        current: str | None = name
        while current is not None:
            out.append(current)
            current = self.overlays[current].base
        return tuple(reversed(out))


def load_catalog(root: Path | None = None, data: Path | None = None) -> Catalog:
    """Load and validate the recipes under ``root`` (default: the shipped ``recipes/``),
    with the folder ``data`` merged over them when given."""
    return _Loader(root or default_root(), data).load()


@dataclass
class _Doc:
    rel: str
    lines: dict[Loc, int]

    def line(self, loc: Iterable[str | int]) -> int:
        """The line of the deepest part of ``loc`` that the file has."""
        key = tuple(loc)
        while key and key not in self.lines:
            key = key[:-1]
        return self.lines.get(key, 1)


def _dotted(loc: Iterable[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


class _Loader:
    def __init__(self, root: Path, data: Path | None = None):
        self.root = root
        self.data = data
        self.problems: list[str] = []
        self.sha = hashlib.sha256()

    def locate(self, rel: str) -> tuple[Path, str]:
        """Where ``rel`` is read from, and the name problems give it: the data folder's file
        (by its own path) when it has one, else the shipped one (by ``rel``)."""
        if self.data is not None and (self.data / rel).is_file():
            return self.data / rel, (self.data / rel).as_posix()
        return self.root / rel, rel

    def problem(self, doc: _Doc, loc: Loc, message: str) -> None:
        self.problems.append(f"{doc.rel}:{doc.line(loc)}: {_dotted(loc)}: {message}")

    def read(self, rel: str, model: type[M]) -> tuple[M, _Doc] | None:
        """``rel`` (a path under the recipe tree) validated as ``model``, after the data folder."""
        return self.read_at(*self.locate(rel), model)

    def read_at(self, path: Path, rel: str, model: type[M]) -> tuple[M, _Doc] | None:
        if not path.is_file():
            self.problems.append(f"{rel}:1: (file): missing")
            return None
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            self.problems.append(
                f"{rel}:1: (file): not UTF-8 text (bad byte at offset {exc.start}); "
                "save it as UTF-8"
            )
            return None
        except OSError as exc:
            self.problems.append(f"{rel}:1: (file): cannot read: {exc.strerror or exc}")
            return None
        self.sha.update(rel.encode() + b"\0" + text.encode() + b"\0")
        doc = _Doc(rel, {})
        try:
            # The node tree gives each key its line; the data is built from a tree of its own,
            # as building it merges `<<:` keys into the tree it is built from.
            node = yaml.compose(text, Loader=SAFE_LOADER)
            data = yaml.load(text, Loader=SAFE_LOADER)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else 1
            problem = getattr(exc, "problem", None) or str(exc)
            self.problems.append(f"{rel}:{line}: (document): invalid YAML: {problem}")
            return None
        if node is not None:
            self._index(doc, node, ())
        try:
            return model.model_validate(data), doc
        except ValidationError as exc:
            for err in exc.errors():
                self.problem(doc, tuple(err["loc"]), err["msg"])
            return None

    def _index(self, doc: _Doc, node: yaml.Node, loc: Loc) -> None:
        doc.lines.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key, value in node.value:
                sub = (*loc, key.value)
                if key.value in seen:
                    doc.lines[sub] = key.start_mark.line + 1
                    self.problem(doc, sub, "duplicate key")
                seen.add(key.value)
                doc.lines[sub] = key.start_mark.line + 1
                self._index(doc, value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._index(doc, item, (*loc, i))

    def read_dir(self, folder: str, model: type[M]) -> list[tuple[M, _Doc]]:
        roots = [self.root] if self.data is None else [self.root, self.data]
        names = sorted({p.name for r in roots for p in (r / folder).glob("*.yaml")})
        if not names:
            self.problems.append(f"{folder}/:1: (directory): no .yaml files")
        return [loaded for n in names if (loaded := self.read(f"{folder}/{n}", model)) is not None]

    def read_registry(self) -> list[tuple[schema.RegistryComponent, _Doc, int]] | None:
        """Every registry entry with where it is written: the shipped registry's, then the
        data folder's, which replace same-named shipped entries and add the rest."""
        layers = [self.read_at(self.root / "registry.yaml", "registry.yaml", schema.Registry)]
        if self.data is not None and (self.data / "registry.yaml").is_file():
            path = self.data / "registry.yaml"
            layers.append(self.read_at(path, path.as_posix(), schema.Registry))
        if None in layers:
            return None
        merged: dict[str, tuple[schema.RegistryComponent, _Doc, int]] = {}
        for registry, doc in [x for x in layers if x is not None]:
            seen: set[str] = set()
            for i, comp in enumerate(registry.components):
                if comp.name in seen:
                    self.problem(
                        doc, ("components", i, "name"), f"duplicate component {comp.name!r}"
                    )
                seen.add(comp.name)
                merged.pop(comp.name, None)
                merged[comp.name] = (comp, doc, i)
        return list(merged.values())

    def load(self) -> Catalog:
        if not self.root.is_dir():
            raise RecipeError(f"recipe directory not found: {self.root}")
        if self.data is not None and not self.data.is_dir():
            raise RecipeError(f"recipe data folder not found: {self.data}")
        criteria = self.read("criteria.yaml", schema.CriteriaValues)
        registry = self.read_registry()
        overlays = self.read_dir("overlays", schema.Overlay)
        mixins = self.read_dir("mixins", schema.Mixin)
        cuda = self.read("knowledge/cuda_driver.yaml", schema.CudaDriverTable)
        branches = self.read("knowledge/driver_branches.yaml", schema.DriverBranchTable)
        gpus = self.read("knowledge/gpus.yaml", schema.GpuTable)
        known_bad = self.read("knowledge/known_bad.yaml", schema.KnownBadTable)
        images = self.read("knowledge/component_images.yaml", schema.ComponentImageTable)
        xids = self.read("knowledge/xids.yaml", schema.XidTable)
        drift = self.read("drift.yaml", DriftRules)
        check_files = self.read_dir("checks", CheckFile)
        checks = self.check_checks(check_files)
        loaded = (criteria, registry, cuda, branches, gpus, known_bad, images, xids, drift)
        if None in loaded or self.problems:
            raise self.error()
        assert criteria and registry and cuda and branches and gpus and known_bad and images
        assert xids and drift
        components = self.check_registry(registry)
        gpu_rows = gpus[0].rows
        allowed = {
            "service": {"any", *criteria[0].service},
            "accelerator": {"any", *(r.accelerator for r in gpu_rows)},
            "os": {"any", *criteria[0].os},
            "intent": {"any", *criteria[0].intent},
            "platform": {"any", *criteria[0].platform},
        }
        mixin_map = self.unique(mixins, "mixin")
        overlay_map = self.unique(overlays, "overlay")
        for mixin, doc in mixins:
            self.check_patches(doc, mixin.components, components)
            deployed = {c.name for c in mixin.components}
            for i, name in enumerate(mixin.health.operators if mixin.health else ()):
                if name not in deployed:
                    why = f"operator {name!r} is not one of this mixin's components"
                    self.problem(doc, ("health", "operators", i), why)
        self.check_overlays(overlays, overlay_map, mixin_map, components, allowed)
        self.check_refused(criteria[1], criteria[0], allowed)
        self.check_value_overlays(criteria, gpus, overlay_map)
        self.check_cycles(registry, overlays + mixins)
        self.check_minima(check_files, gpu_rows, drift[0])
        self.check_unique_rows(gpus[1], "gpu", [(r.model,) for r in gpu_rows])
        self.check_unique_rows(
            gpus[1], "nvml name", [tuple(n.lower() for n in r.nvml_names) for r in gpu_rows]
        )
        self.check_unique_rows(gpus[1], "pci device id", [r.pci_device_ids for r in gpu_rows])
        self.check_unique_rows(cuda[1], "cuda", [(r.cuda,) for r in cuda[0].rows])
        self.check_unique_rows(branches[1], "branch", [(r.branch,) for r in branches[0].rows])
        self.check_unique_rows(known_bad[1], "name", [(r.name,) for r in known_bad[0].rows])
        self.check_unique_rows(images[1], "component", [(r.component,) for r in images[0].rows])
        self.check_unique_rows(xids[1], "xid", [(str(r.code),) for r in xids[0].rows])
        listed = {r.component for r in images[0].rows}
        for key, table in (("rows", images[0].rows), ("undetected", images[0].undetected)):
            for i, row in enumerate(table):
                loc = (key, i, "component")
                if row.component not in components:
                    self.problem(images[1], loc, f"unknown component {row.component!r}")
                if key == "undetected" and row.component in listed:
                    self.problem(images[1], loc, f"{row.component!r} is listed twice")
                listed.add(row.component)
        if self.problems:
            raise self.error()
        return Catalog(
            root=self.root,
            digest=self.sha.hexdigest(),
            criteria=criteria[0],
            registry=components,
            overlays={name: o for name, (o, _) in overlay_map.items()},
            mixins={name: m for name, (m, _) in mixin_map.items()},
            cuda_driver={r.cuda: r for r in cuda[0].rows},
            branches={r.branch: r for r in branches[0].rows},
            gpus=gpu_rows,
            known_bad=known_bad[0].rows,
            drift=drift[0],
            component_images=images[0].rows,
            undetected_components={r.component: r.reason for r in images[0].undetected},
            checks=checks,
            xids={r.code: r for r in xids[0].rows},
            data=self.data,
        )

    def error(self) -> RecipeError:
        shown = "\n  ".join(self.problems)
        where = f"{self.root}" + (f" with {self.data} merged" if self.data else "")
        return RecipeError(f"{len(self.problems)} problem(s) in recipes at {where}:\n  {shown}")

    def unique(self, docs: list[tuple[M, _Doc]], what: str) -> dict[str, tuple[M, _Doc]]:
        out: dict[str, tuple[M, _Doc]] = {}
        for item, doc in docs:
            name = item.name  # type: ignore[attr-defined]
            if Path(doc.rel).stem != name:
                self.problem(doc, ("name",), f"{what} {name!r} must live in {name}.yaml")
            if name in out:
                self.problem(doc, ("name",), f"duplicate {what} {name!r}")
            out[name] = (item, doc)
        return out

    def check_registry(
        self, entries: list[tuple[schema.RegistryComponent, _Doc, int]]
    ) -> dict[str, schema.RegistryComponent]:
        out = {comp.name: comp for comp, _, _ in entries}
        for comp, doc, i in entries:
            for j, dep in enumerate(comp.dependencies):
                if dep not in out:
                    loc = ("components", i, "dependencies", j)
                    self.problem(doc, loc, f"unknown component {dep!r}")
            parent = out.get(comp.operand_of or "")
            if comp.operand_of and (parent is None or parent.type == "operand"):
                loc = ("components", i, "operand_of")
                self.problem(doc, loc, f"unknown component {comp.operand_of!r}")
        return out

    def check_patches(
        self,
        doc: _Doc,
        patches: tuple[schema.ComponentPatch, ...],
        components: Mapping[str, schema.RegistryComponent],
    ) -> None:
        for i, patch in enumerate(patches):
            if patch.name not in components:
                self.problem(doc, ("components", i, "name"), f"unknown component {patch.name!r}")
            for j, dep in enumerate(patch.dependencies or ()):
                if dep not in components:
                    loc = ("components", i, "dependencies", j)
                    self.problem(doc, loc, f"unknown component {dep!r}")

    def check_overlays(
        self,
        overlays: list[tuple[schema.Overlay, _Doc]],
        by_name: Mapping[str, tuple[schema.Overlay, _Doc]],
        mixins: Mapping[str, Any],
        components: Mapping[str, schema.RegistryComponent],
        allowed: Mapping[str, set[str]],
    ) -> None:
        if "base" not in by_name:
            self.problems.append("overlays/base.yaml:1: name: the root overlay 'base' is missing")
        for overlay, doc in overlays:
            self.check_patches(doc, overlay.components, components)
            for i, mixin in enumerate(overlay.mixins):
                if mixin not in mixins:
                    self.problem(doc, ("mixins", i), f"unknown mixin {mixin!r}")
            for key in CRITERIA_KEYS:
                value = getattr(overlay.criteria, key)
                if value not in allowed[key]:
                    choices = ", ".join(sorted(allowed[key]))
                    loc = ("criteria", key)
                    self.problem(doc, loc, f"unknown {key} {value!r}; allowed: {choices}")
            if (overlay.name == "base") != (overlay.base is None):
                self.problem(doc, ("base",), "only the overlay 'base' has no parent")
                continue
            if overlay.base is None:
                continue
            parent = by_name.get(overlay.base)
            if parent is None:
                self.problem(doc, ("base",), f"unknown overlay parent {overlay.base!r}")
                continue
            for key in CRITERIA_KEYS:
                mine, theirs = getattr(overlay.criteria, key), getattr(parent[0].criteria, key)
                if theirs != "any" and mine != theirs:
                    loc = ("criteria", key)
                    msg = f"{key} {mine!r} does not narrow parent {overlay.base!r} ({theirs!r})"
                    self.problem(doc, loc, msg)
            seen = {overlay.name}
            current = parent[0]
            while current.base is not None and current.base in by_name:
                if current.name in seen:
                    self.problem(doc, ("base",), f"overlay parent cycle through {current.name!r}")
                    break
                seen.add(current.name)
                current = by_name[current.base][0]

    def check_cycles(
        self,
        registry: list[tuple[schema.RegistryComponent, _Doc, int]],
        layers: list[tuple[Any, _Doc]],
    ) -> None:
        """Reject any dependency cycle over the union of every declared edge."""
        edges: dict[str, set[str]] = {}
        where: dict[tuple[str, str], tuple[_Doc, Loc]] = {}
        for comp, doc, i in registry:
            for j, dep in enumerate(comp.dependencies):
                edges.setdefault(comp.name, set()).add(dep)
                where.setdefault((comp.name, dep), (doc, ("components", i, "dependencies", j)))
        for layer, doc in layers:
            for i, patch in enumerate(layer.components):
                for j, dep in enumerate(patch.dependencies or ()):
                    edges.setdefault(patch.name, set()).add(dep)
                    where.setdefault((patch.name, dep), (doc, ("components", i, "dependencies", j)))
        state: dict[str, int] = {}
        for start in sorted(edges):
            cycle = _find_cycle(start, edges, state, [])
            if cycle:
                doc, loc = where[(cycle[-2], cycle[-1])]
                self.problem(doc, loc, "dependency cycle: " + " -> ".join(cycle))
                return

    def check_checks(self, files: list[tuple[CheckFile, _Doc]]) -> Checks:
        """Merge the check files; a check id may appear once across all of them."""
        by_id: dict[str, Any] = {}
        lanes: dict[int, float] = {}
        for checks, doc in files:
            lanes.update(checks.pcie_lane_gbps)
            for i, check in enumerate(checks.checks):
                if check.id in by_id:
                    self.problem(doc, ("checks", i, "id"), f"duplicate check {check.id!r}")
                by_id[check.id] = check
        for checks, doc in files:
            for i, check in enumerate(checks.checks):
                if check.threshold and check.threshold.peak == "pcie_link" and not lanes:
                    loc = ("checks", i, "threshold", "peak")
                    self.problem(doc, loc, "pcie_link needs a pcie_lane_gbps table")
        return Checks(by_id, lanes)

    def check_minima(
        self,
        files: list[tuple[CheckFile, _Doc]],
        gpus: tuple[schema.GpuRow, ...],
        drift: DriftRules,
    ) -> None:
        """A check's minima name a GPU catalog model and a twin fabric, so a typo is refused
        rather than leaving the check ungraded."""
        models = {r.model for r in gpus}
        fabrics = {f.name for f in drift.twins.fabrics} | {drift.twins.default_fabric}
        for checks, doc in files:
            for i, check in enumerate(checks.checks):
                for j, m in enumerate(check.minima):
                    loc = ("checks", i, "minima", j)
                    if m.model not in models:
                        self.problem(doc, (*loc, "model"), f"unknown GPU model {m.model!r}")
                    if m.fabric not in fabrics:
                        why = f"unknown fabric {m.fabric!r}; twin fabrics are {sorted(fabrics)}"
                        self.problem(doc, (*loc, "fabric"), why)

    def check_refused(
        self, doc: _Doc, criteria: schema.CriteriaValues, allowed: Mapping[str, set[str]]
    ) -> None:
        """A refused value is not also an allowed one."""
        for key, values in criteria.refused.items():
            for value in sorted(set(values) & allowed[key]):
                self.problem(doc, ("refused", key, value), f"{key} {value!r} is also allowed")

    def check_value_overlays(
        self,
        criteria: tuple[schema.CriteriaValues, _Doc],
        gpus: tuple[schema.GpuTable, _Doc],
        overlays: Mapping[str, tuple[schema.Overlay, _Doc]],
    ) -> None:
        """Every value the criteria accept is backed by an overlay that changes something, so
        no accepted value silently resolves to the recipe of ``any``.

        Service, accelerator, os and platform each need an overlay pinning that key alone
        (so asking for the value alone changes the recipe); an intent, which AICR's overlays
        pin only together with a service, needs some overlay pinning it.
        """
        backed: dict[str, set[str]] = {k: set() for k in CRITERIA_KEYS}
        for overlay, doc in overlays.values():
            pinned = specificity_keys(overlay.criteria)
            if not (overlay.components or overlay.constraints or overlay.mixins):
                if pinned:
                    self.problem(
                        doc,
                        ("criteria",),
                        "the overlay changes nothing: give it "
                        "components, constraints or mixins, or remove it",
                    )
                continue
            for key in pinned:
                if pinned == {key} or key == "intent":
                    backed[key].add(getattr(overlay.criteria, key))
        values, doc = criteria
        for key in ("service", "os", "intent", "platform"):
            for i, value in enumerate(getattr(values, key)):
                if value not in backed[key]:
                    hint = (
                        "an overlay pinning it"
                        if key == "intent"
                        else f"overlays/{value}.yaml with criteria {{{key}: {value}}}"
                    )
                    self.problem(
                        doc,
                        (key, i),
                        f"{key} {value!r} changes no recipe; add {hint} or move it to refused",
                    )
        rows, gdoc = gpus[0].rows, gpus[1]
        for i, row in enumerate(rows):
            if row.accelerator not in backed["accelerator"]:
                backed["accelerator"].add(row.accelerator)  # one problem per accelerator
                loc = ("rows", i, "accelerator")
                self.problem(
                    gdoc,
                    loc,
                    f"accelerator {row.accelerator!r} has no overlay; add overlays/"
                    f"{row.accelerator}.yaml with criteria {{accelerator: {row.accelerator}}}",
                )

    def check_unique_rows(self, doc: _Doc, what: str, keys: list[tuple[str, ...]]) -> None:
        seen: set[str] = set()
        for i, row_keys in enumerate(keys):
            for key in row_keys:
                if key in seen:
                    self.problem(doc, ("rows", i), f"duplicate {what} {key!r}")
                seen.add(key)


def specificity_keys(spec: schema.CriteriaSpec) -> set[str]:
    """The criteria keys an overlay pins (not ``any``)."""
    return {k for k in CRITERIA_KEYS if getattr(spec, k) != "any"}


def _find_cycle(
    node: str, edges: Mapping[str, set[str]], state: dict[str, int], path: list[str]
) -> list[str] | None:
    """A cycle reachable from ``node`` as a closed path, by depth-first search (1 = on path)."""
    if state.get(node) == 1:
        return [*path[path.index(node) :], node]
    if state.get(node) == 2:
        return None
    state[node] = 1
    path.append(node)
    for dep in sorted(edges.get(node, ())):
        cycle = _find_cycle(dep, edges, state, path)
        if cycle:
            return cycle
    path.pop()
    state[node] = 2
    return None
