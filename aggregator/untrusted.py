"""Documents from outside (YAML text, parsed JSON), read within limits on size, depth and count.

PyYAML builds an alias once and shares it, so a 500-byte "billion laughs" loads in
microseconds and explodes later, in whatever walks it (a JSON dump, a render, a hash). The
bounds therefore count the document as it would be expanded: every alias as the whole of
what it names. YAML is read in three passes, each bounded by the one before: the event
stream (iterative, so nesting cannot overflow the stack) checks size, depth and node count;
the node graph then counts what aliases expand to; only a bounded graph is turned into
Python objects. libyaml does the parsing where it is installed.

`check_tree` applies the same expanded count and depth to data another parser (JSON) made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from plumb.aggregator.errors import InvalidInput, TooLarge

__all__ = ["DEFAULT", "SAFE_LOADER", "Limits", "check_tree", "load_yaml", "load_yaml_all"]

# The safe loader, libyaml's where PyYAML has it (its wheels do): ~8x the pure-Python one's
# speed (the recipe catalog: 0.41 -> 0.05 s).
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
_HINT = "a recipe or criteria document is a few kilobytes, a few levels deep"


@dataclass(frozen=True)
class Limits:
    """How big a document from outside may be."""

    # The HTTP API's default body limit; a resolved recipe is ~20 kB.
    max_bytes: int = 1 << 20
    # A resolved recipe nests ~8 levels (components, values, Helm values); 64 is generous
    # and far below the ~1000 frames Python's recursion allows a serialiser.
    max_depth: int = 64
    # Scalars, mappings and sequences with aliases expanded; a recipe has a few thousand.
    max_nodes: int = 200_000


DEFAULT = Limits()


def load_yaml(text: str, limits: Limits = DEFAULT) -> Any:
    """The one YAML document in `text`; InvalidInput (or TooLarge) says which bound it broke."""
    docs = load_yaml_all(text, limits)
    if len(docs) > 1:
        raise InvalidInput("expected one YAML document, found several", hint=_HINT)
    return docs[0] if docs else None


def load_yaml_all(text: str, limits: Limits = DEFAULT) -> list[Any]:
    """Every YAML document in `text`, bounded together as one."""
    if len(text) > limits.max_bytes or len(text.encode()) > limits.max_bytes:
        raise TooLarge(f"YAML document exceeds {limits.max_bytes} bytes", hint=_HINT)
    try:
        _check_events(text, limits)
        loader = SAFE_LOADER(text)
        try:
            budget = [limits.max_nodes]
            out = []
            while loader.check_node():
                node = loader.get_node()
                _expanded(node, 1, limits, budget, set())
                out.append(loader.construct_document(node))
            return out
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise InvalidInput(f"does not parse as YAML: {exc}", hint=_HINT) from exc


def check_tree(data: Any, limits: Limits = DEFAULT) -> None:
    """Refuse parsed data (say, from JSON) deeper than max_depth or larger than max_nodes."""
    _tree(data, 1, limits, [limits.max_nodes], set())


def _check_events(text: str, limits: Limits) -> None:
    depth = count = 0
    for event in yaml.parse(text, Loader=SAFE_LOADER):
        count += 1
        if count > limits.max_nodes:
            raise TooLarge(f"YAML document has more than {limits.max_nodes} nodes", hint=_HINT)
        if isinstance(event, _OPEN):
            depth += 1
            if depth > limits.max_depth:
                raise InvalidInput(
                    f"YAML document nests deeper than {limits.max_depth} levels", hint=_HINT
                )
        elif isinstance(event, _CLOSE):
            depth -= 1


def _expanded(
    node: yaml.Node, depth: int, limits: Limits, budget: list[int], path: set[int]
) -> None:
    """Spend `budget` on the node and all it holds, aliases expanded; check depth on the way.

    A node reached again through an alias is charged again, as a serialiser would write it
    again, so the work done here is bounded by `max_nodes` too.
    """
    budget[0] -= 1
    if budget[0] < 0:
        raise TooLarge(
            f"YAML document expands to more than {limits.max_nodes} nodes (aliases)", hint=_HINT
        )
    if isinstance(node, yaml.ScalarNode):
        return
    if depth > limits.max_depth:
        raise InvalidInput(
            f"YAML document nests deeper than {limits.max_depth} levels once aliases expand",
            hint=_HINT,
        )
    key = id(node)
    if key in path:
        raise InvalidInput("YAML document refers to itself through an alias", hint=_HINT)
    children = (
        [n for pair in node.value for n in pair]
        if isinstance(node, yaml.MappingNode)
        else node.value
    )
    path.add(key)
    try:
        for child in children:
            _expanded(child, depth + 1, limits, budget, path)
    finally:
        path.discard(key)


def _tree(data: Any, depth: int, limits: Limits, budget: list[int], path: set[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise TooLarge(f"document has more than {limits.max_nodes} nodes", hint=_HINT)
    if isinstance(data, Mapping):
        children = [*data.keys(), *data.values()]
    elif isinstance(data, list | tuple):
        children = list(data)
    else:
        return
    if depth > limits.max_depth:
        raise InvalidInput(f"document nests deeper than {limits.max_depth} levels", hint=_HINT)
    key = id(data)
    if key in path:
        raise InvalidInput("document refers to itself", hint=_HINT)
    path.add(key)
    try:
        for child in children:
            _tree(child, depth + 1, limits, budget, path)
    finally:
        path.discard(key)
