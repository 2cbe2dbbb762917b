"""The `plumb` command's entry point: the CLI, or which extra to install to get it.

`pip install plumb` is the agent alone, so the CLI's dependencies (typer, httpx, ...) may be
absent; this module imports nothing of them until it has checked, so it can name the missing
module and the extra rather than print a traceback. Also `python -m plumb.aggregator`.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run `plumb`; without the `aggregator` extra, exit 1 saying what to install."""
    try:
        from plumb.aggregator.cli import main as cli_main
    except ModuleNotFoundError as exc:
        if not exc.name or exc.name.partition(".")[0] == "plumb":
            raise
        sys.exit(
            f"plumb: the aggregator and its CLI need the `aggregator` extra ({exc.name} is not "
            "installed)\nhint: pip install 'plumb[aggregator]'"
        )
    cli_main()


if __name__ == "__main__":
    main()
