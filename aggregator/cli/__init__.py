"""`plumb`: run the aggregator, and ask a running one about the cluster.

Each command lives in its own module and registers itself on the shared Typer app.
"""

from aggregator.cli import demo, nodes, recipe, serve  # noqa: F401  (registers the commands)
from aggregator.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
