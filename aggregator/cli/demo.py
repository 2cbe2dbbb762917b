"""`plumb demo`: the guided tour on this machine."""

from __future__ import annotations

from typing import Annotated

import typer

from plumb.aggregator.cli.app import app, out


@app.command()
def demo(
    keep: Annotated[bool, typer.Option(help="keep running until Ctrl-C after the tour")] = False,
) -> None:
    """Start an aggregator and six simulated GPU nodes, and show a driver upgrade arrive."""
    from plumb.aggregator.cli.tour import run_demo

    raise typer.Exit(run_demo(out, keep=keep))
