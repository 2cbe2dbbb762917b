"""`plumb completion SHELL`: the script that makes a shell complete `plumb` commands and options.

The script asks `plumb` itself (with `_PLUMB_COMPLETE` set) for completions as the user types,
so commands, options and choices added later complete without a new script.
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Annotated

import typer

from plumb.aggregator.cli.app import app


class Shell(StrEnum):
    """Shells Typer writes a completion script for."""

    bash = "bash"
    zsh = "zsh"
    fish = "fish"
    pwsh = "pwsh"


COMPLETE_VAR = "_PLUMB_COMPLETE"  # what click names it for a program called `plumb`


def answer_completions() -> None:
    """Let the shell's completion request through: the app is built without Typer's own
    --install-completion options, which is what would otherwise register the shells."""
    if COMPLETE_VAR in os.environ:
        from typer._completion_classes import completion_init

        completion_init()


@app.command()
def completion(shell: Annotated[Shell, typer.Argument(help="bash, zsh, fish or pwsh")]) -> None:
    """Print the shell's completion script for `plumb`.

    bash: `source <(plumb completion bash)` (or save it under
    /etc/bash_completion.d/); zsh: `plumb completion zsh > "${fpath[1]}/_plumb"`; fish:
    `plumb completion fish > ~/.config/fish/completions/plumb.fish`.
    """
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name="plumb", complete_var=COMPLETE_VAR, shell=shell))
