"""`plumb completion SHELL` prints a script that asks `plumb` for completions, and `plumb`
answers such a request with its commands (the names DESIGN.md's CLI line gives)."""

from __future__ import annotations

import pytest
from conftest import run
from typer.testing import CliRunner

from plumb.aggregator.cli import app
from plumb.aggregator.cli.completion import answer_completions

COMMANDS = {
    "demo", "nodes", "node", "drift", "recipe", "query", "validate", "bundle", "verify",
    "snapshot", "watch", "baseline", "nccl", "changes", "diff", "completion",
}  # fmt: skip


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "pwsh"])
def test_each_shells_script_hooks_plumbs_completion(shell):
    script = run("completion", shell)
    assert script.strip() and "plumb" in script and "_PLUMB_COMPLETE" in script


def test_an_unknown_shell_is_refused():
    run("completion", "tcsh", code=2)


def test_the_completion_request_a_script_makes_lists_every_command(monkeypatch):
    monkeypatch.setenv("_PLUMB_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "plumb ")
    monkeypatch.setenv("COMP_CWORD", "1")
    answer_completions()
    result = CliRunner().invoke(app, [], prog_name="plumb")
    assert COMMANDS <= set(result.stdout.split()), result.stdout


def test_completion_reaches_a_commands_options(monkeypatch):
    monkeypatch.setenv("_PLUMB_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "plumb diff --fail")
    monkeypatch.setenv("COMP_CWORD", "2")
    answer_completions()
    result = CliRunner().invoke(app, [], prog_name="plumb")
    assert result.stdout.split() == ["--fail-on-drift"]
