"""One nested mapping laid over another: how profiles and mock-NVML configs give each GPU its
overrides on top of the shared template or defaults."""

from __future__ import annotations

from typing import Any

__all__ = ["overlay"]


def overlay(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`base` with `over`'s keys: nested mappings merged key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = overlay(out[key], value)
        else:
            out[key] = value
    return out
