"""Flat facts as nested JSON, and back to (path, reading) rows: the form people and the API see.

`nest` gives `GET /v1/nodes/{name}` its `facts` tree (and `plumb-agent --once` its output);
`leaves` walks such a tree back into rows for the tables and pages that list every fact.
"""

from __future__ import annotations

from collections.abc import Mapping

from plumb.facts import PATH_SEGMENT, FactsError, Reading

__all__ = ["leaves", "nest"]


def nest(flat: Mapping[str, Reading]) -> dict:
    """``flat`` as nested JSON (``{"gpus": [{"uuid": {"status": "ok", ...}}]}``) for people."""
    root: dict = {}
    for path in sorted(flat, key=_path_sort_key):
        node: dict | list = root
        segments = path.split(".")
        for depth, segment in enumerate(segments):
            match = PATH_SEGMENT.fullmatch(segment)
            assert match is not None, path
            name, index = match.group(1), match.group(2)
            last = depth == len(segments) - 1
            if index is None:
                if last:
                    node[name] = flat[path].to_json()  # type: ignore[index]
                else:
                    node = node.setdefault(name, {})  # type: ignore[union-attr]
                continue
            items = node.setdefault(name, [])  # type: ignore[union-attr]
            while len(items) <= int(index):
                items.append({})
            node = items[int(index)]
            if last:
                raise FactsError(f"fact path names a message, not a leaf: {path}")
    return root


def leaves(tree: Mapping, skip: tuple[str, ...] = ()) -> list[tuple[str, dict]]:
    """(path, reading JSON) of every leaf of a `nest`ed tree, in its order; `skip` top keys."""
    out: list[tuple[str, dict]] = []

    def walk(node: Mapping, prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            if not prefix and key in skip:
                continue
            if isinstance(value, dict) and "status" in value:
                out.append((path, value))
            elif isinstance(value, dict):
                walk(value, path + ".")
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    walk(item, f"{path}[{i}].")

    walk(tree, "")
    return out


def _path_sort_key(path: str) -> list[tuple[str, int]]:
    """Sort ``gpus[10]`` after ``gpus[9]``."""
    return [
        (m.group(1), int(m.group(2) or -1))
        for m in map(PATH_SEGMENT.fullmatch, path.split("."))
        if m is not None
    ]
