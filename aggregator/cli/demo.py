"""`plumb demo`: the guided tour on this machine."""

from __future__ import annotations

from typing import Annotated

import typer

from plumb.aggregator.cli.app import app, out


@app.command()
def demo(
    once: Annotated[
        bool, typer.Option(help="stop everything after the tour instead of at Ctrl-C (for CI)")
    ] = False,
) -> None:
    """Start an aggregator and six simulated GPU nodes, show a driver upgrade arrive, and keep
    them up until Ctrl-C."""
    from plumb.aggregator.cli.tour import run_demo

    raise typer.Exit(run_demo(out, once=once))
