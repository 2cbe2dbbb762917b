"""`plumb`: run the aggregator, and ask a running one about the cluster.

Each command lives in its own module and registers itself on the shared Typer app.
"""

from plumb.aggregator.cli import (  # noqa: F401  (each module registers its commands)
    bundle,
    demo,
    drift,
    nccl,
    node,
    nodes,
    recipe,
    serve,
    snapshot,
    validate,
    watch,
)
from plumb.aggregator.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
