"""`plumb`: run the aggregator, and ask a running one about the cluster.

Each command lives in its own module and registers itself on the shared Typer app. A module
imports at its top only what `plumb --help` needs too; what its command alone uses (httpx,
the recipes, bundle or server code) it imports when the command runs, so every command
starts fast (tests/unit/cli/test_cli_imports.py holds the line).
"""

from plumb.aggregator.cli import (  # noqa: F401  (each module registers its commands)
    baseline,
    baselines,
    bundle,
    changes,
    completion,
    demo,
    diff,
    drift,
    gate,
    mirror,
    nccl,
    node,
    nodes,
    recipe,
    serve,
    snapshot,
    uncordon,
    validate,
    watch,
    whatif,
)
from plumb.aggregator.cli.app import app
from plumb.aggregator.cli.completion import answer_completions


def main() -> None:
    answer_completions()
    app()


__all__ = ["app", "main"]
