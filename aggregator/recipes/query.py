"""Selecting one value out of a resolved recipe, for `/v1/query` and `plumb query`."""

from __future__ import annotations

from typing import Any

from plumb.aggregator.errors import InvalidInput, NotFound

__all__ = ["select"]


def select(document: dict[str, Any], selector: str) -> Any:
    """The value at a dotted path; list items of `components` are addressed by name."""
    value: Any = document
    for part in selector.split("."):
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, dict) and v.get("name") == part), None)
            if value is None:
                raise NotFound(f"selector {selector!r}: no entry named {part!r}")
        elif isinstance(value, dict):
            if part not in value:
                raise NotFound(
                    f"selector {selector!r}: no key {part!r}",
                    hint=f"keys here: {', '.join(sorted(value))}",
                )
            value = value[part]
        else:
            raise InvalidInput(f"selector {selector!r}: {part!r} is below a plain value")
    return value
