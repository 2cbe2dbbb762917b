"""Two snapshots' stack facts side by side: what `plumb diff A B` prints.

A side is a document as `plumb snapshot` writes it (`{"nodes": [...]}`, YAML or JSON), one
node as `GET /v1/nodes/{name}` answers it, or AICR Snapshots (`kind: Snapshot`, one document
per node, as `aicr snapshot` or `plumb snapshot --format aicr` write them). Each becomes
`{node: {fact path: reading}}`: Plumb's nested facts by their flat paths, AICR's measurements
as `Type.subtype.key` (an item's keys as `Type.subtype[i].key`, each value an `ok` reading).

Only stack facts are compared. Sensor readings (temperature, power draw, clocks, utilisation,
memory used, clock-event reasons, correctable ECC and link error counters: plumb/sensors.py)
move every poll, so a diff of them says nothing about the stack: a node detail's `sensors`
block is never read, and a GPU fact named like a reading (snapshots from before readings
left the facts carried `gpus[i].temperature_celsius`) is skipped.

Two one-node sides are compared with each other whatever their names (node X now against
node Y); otherwise nodes are paired by name, and a node on one side only is one change.
Pure: no I/O; the CLI reads the files and asks the aggregator for live nodes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from plumb import tree
from plumb.aggregator.errors import InvalidInput
from plumb.sensors import READINGS

__all__ = ["Change", "Diff", "diff", "facts_of", "parse"]

Facts = dict[str, dict[str, Any]]  # fact path -> reading JSON ({"status", "value"|"error"})
# Every name a sensor reading goes by: GpuSensors' fields and their wire names.
SENSOR_LEAVES = frozenset(READINGS) | frozenset(wire for wire, _ in READINGS.values())
NODE = "(node)"  # the path of a change that is a whole node present on one side only
_HINT = (
    "give a file `plumb snapshot` wrote (YAML or JSON), an AICR Snapshot, or node:NAME for"
    " a node's live facts"
)


@dataclass(frozen=True)
class Change:
    """One fact that differs: `a` and `b` are its readings (None where the side lacks it)."""

    node: str
    path: str
    kind: Literal["added", "removed", "modified"]
    a: dict[str, Any] | None
    b: dict[str, Any] | None


@dataclass(frozen=True)
class Diff:
    """Every change from side A to side B, ordered by node then path."""

    a: str
    b: str
    changes: tuple[Change, ...]

    def to_dict(self) -> dict[str, Any]:
        kinds = ("added", "removed", "modified")
        return {
            "a": self.a,
            "b": self.b,
            "changes": [asdict(c) for c in self.changes],
            "summary": {k: sum(c.kind == k for c in self.changes) for k in kinds},
        }


def _sensor(path: str) -> bool:
    leaf = path.rsplit(".", 1)[-1].replace("-", "_")
    return leaf in SENSOR_LEAVES and (path.startswith("gpus[") or path.startswith("GPU."))


def _plumb_node(entry: Mapping[str, Any], where: str) -> tuple[str, Facts]:
    name, facts = entry.get("name"), entry.get("facts")
    if not isinstance(name, str) or not isinstance(facts, dict):
        raise InvalidInput(f"{where}: a node needs a `name` and its `facts`", hint=_HINT)
    return name, {p: r for p, r in tree.leaves(facts) if not _sensor(p)}


def _aicr_node(doc: Mapping[str, Any], where: str) -> tuple[str, Facts]:
    """An AICR Snapshot's measurements as ok readings by `Type.subtype.key` path."""
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = metadata.get("source-node") or metadata.get("source") or where
    measurements = doc.get("measurements")
    if not isinstance(measurements, list):
        raise InvalidInput(f"{where}: Snapshot measurements must be a list", hint=_HINT)
    facts: Facts = {}
    for m in measurements:
        if not isinstance(m, dict):
            continue
        for sub in m.get("subtypes") or ():
            if not isinstance(sub, dict):
                continue
            prefix = f"{m.get('type')}.{sub.get('subtype')}"
            rows = [(prefix, sub.get("data"))]
            rows += [(f"{prefix}[{i}]", item.get("data")) for i, item in _items(sub)]
            for base, data in rows:
                for key, value in (data or {}).items() if isinstance(data, dict) else ():
                    path = f"{base}.{key}"
                    if not _sensor(path):
                        facts[path] = {"status": "ok", "value": value}
    return str(name), facts


def _items(sub: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    items = sub.get("items")
    for i, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, dict):
            yield i, item


def facts_of(docs: Iterable[Any], where: str) -> dict[str, Facts]:
    """`{node: facts}` of the documents of one side; InvalidInput naming what is not one."""
    nodes: dict[str, Facts] = {}
    for i, doc in enumerate(docs):
        here = where if i == 0 else f"{where} (document {i + 1})"
        if isinstance(doc, dict) and doc.get("kind") == "Snapshot":
            found = [_aicr_node(doc, here)]
        elif isinstance(doc, dict) and isinstance(doc.get("nodes"), list):
            found = [_plumb_node(n, f"{here} nodes[{j}]") for j, n in enumerate(doc["nodes"])]
        elif isinstance(doc, dict) and "facts" in doc:
            found = [_plumb_node(doc, here)]
        elif doc is None:
            continue
        else:
            raise InvalidInput(f"{here} is not a snapshot", hint=_HINT)
        for name, facts in found:
            if name in nodes:
                raise InvalidInput(f"{here}: node {name!r} appears twice", hint=_HINT)
            nodes[name] = facts
    if not nodes:
        raise InvalidInput(f"{where} holds no node", hint=_HINT)
    return nodes


def _changes(node: str, a: Facts, b: Facts) -> Iterator[Change]:
    for path in sorted(a.keys() | b.keys(), key=_order):
        old, new = a.get(path), b.get(path)
        if old == new:
            continue
        kind = "added" if old is None else "removed" if new is None else "modified"
        yield Change(node, path, kind, old, new)


def _order(path: str) -> list[Any]:
    """`gpus[10]` after `gpus[9]`: indexes compare as numbers."""
    return [int(p) if p.isdigit() else p for p in path.replace("]", "[").split("[")]


def diff(a: Mapping[str, Facts], b: Mapping[str, Facts], *, a_name: str, b_name: str) -> Diff:
    """The changes from `a` to `b` (each `{node: facts}`, as facts_of gives them)."""
    if len(a) == 1 and len(b) == 1:
        (na, fa), (nb, fb) = next(iter(a.items())), next(iter(b.items()))
        node = na if na == nb else f"{na} → {nb}"
        return Diff(a_name, b_name, tuple(_changes(node, fa, fb)))
    changes: list[Change] = []
    present = {"status": "ok", "value": "present"}
    for node in sorted(a.keys() | b.keys()):
        if node not in b:
            changes.append(Change(node, NODE, "removed", present, None))
        elif node not in a:
            changes.append(Change(node, NODE, "added", None, present))
        else:
            changes += _changes(node, a[node], b[node])
    return Diff(a_name, b_name, tuple(changes))


def parse(text: str, where: str) -> list[Any]:
    """The documents of a snapshot file: JSON, or YAML (several `---` documents allowed), read
    within bounds big enough for a whole fleet's snapshot."""
    from plumb.aggregator.untrusted import Limits, check_tree, load_yaml_all

    # A 10,000-node snapshot is ~180 MB of JSON and ~10 million YAML nodes.
    limits = Limits(max_bytes=1 << 30, max_depth=64, max_nodes=50_000_000)
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(f"{where}: not valid JSON: {exc}", hint=_HINT) from exc
        check_tree(data, limits)
        return data if isinstance(data, list) else [data]
    try:
        return load_yaml_all(text, limits)
    except InvalidInput as exc:
        raise type(exc)(f"{where}: {exc}", hint=_HINT) from exc
