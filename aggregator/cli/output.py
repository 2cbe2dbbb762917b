"""How `plumb` commands print a result: tables for people, plain JSON or YAML for scripts.

On a terminal a table is a rich table (colour, cells wrapped to its width); anywhere else it
is plain aligned columns with every value whole: no escape codes, no wrapping, no `…`. JSON
and YAML bypass rich entirely, so piped output is exactly the document.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import typer

from plumb.aggregator.cli.app import Output, out
from plumb.aggregator.cli.render import Sheet, plain

__all__ = ["emit", "show"]


def emit(
    data: Any,
    output: Output,
    tables: Callable[[Any], Iterable[Any]],
    wide: Callable[[Any], Iterable[Any]] | None = None,
) -> None:
    """Print `data` as JSON, YAML, or the tables `tables(data)` returns (`wide(data)` for
    `-o wide` where the command has more columns to show)."""
    if output is Output.json:
        typer.echo(json.dumps(data, indent=2))
    elif output is Output.yaml:
        import yaml

        typer.echo(yaml.safe_dump(data, sort_keys=False), nl=False)
    else:
        show((wide if output is Output.wide and wide else tables)(data))


def show(renderables: Iterable[Any]) -> None:
    """Print tables and markup lines: rich on a terminal, plain text otherwise (a blank line
    between two tables, where rich would draw their borders)."""
    previous = None
    for renderable in renderables:
        if out.is_terminal:
            out.print(renderable)
            continue
        if isinstance(previous, Sheet):
            typer.echo("")
        typer.echo(renderable.plain() if isinstance(renderable, Sheet) else plain(renderable))
        previous = renderable
