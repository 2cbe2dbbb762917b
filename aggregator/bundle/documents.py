"""Deterministic text for generated files: YAML with sorted values, block style, LF endings."""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["sort_keys", "yaml_text", "yaml_stream"]


def sort_keys(value: Any) -> Any:
    """``value`` with every mapping's keys sorted, so values files never depend on merge order."""
    if isinstance(value, dict):
        return {k: sort_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sort_keys(v) for v in value]
    return value


def yaml_text(document: Any, header: str = "") -> str:
    """One YAML document; key order as given (``apiVersion``, ``kind`` first), ``header`` atop."""
    body = yaml.safe_dump(
        document, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100
    )
    return header + body


def yaml_stream(documents: list[Any], header: str = "") -> str:
    """Several YAML documents separated by ``---``."""
    return header + "---\n".join(yaml_text(d) for d in documents)
