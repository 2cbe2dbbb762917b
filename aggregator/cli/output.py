"""How `plumb` commands print a result: rich tables for people, plain JSON or YAML for scripts.

JSON and YAML bypass rich entirely, so piped output is exactly the document (no wrapping, no
escape codes); tables go through the shared console, which colours only on a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import typer
import yaml

from plumb.aggregator.cli.app import Output, out

__all__ = ["emit"]


def emit(data: Any, output: Output, tables: Callable[[Any], Iterable[Any]]) -> None:
    """Print `data` as JSON, YAML, or the renderables `tables(data)` returns."""
    if output is Output.json:
        typer.echo(json.dumps(data, indent=2))
    elif output is Output.yaml:
        typer.echo(yaml.safe_dump(data, sort_keys=False), nl=False)
    else:
        for renderable in tables(data):
            out.print(renderable)
