"""`plumb watch`: the fleet and its open findings, redrawn in place until Ctrl-C."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from plumb.aggregator.cli.app import ServerOpt, app, connection, out
from plumb.aggregator.cli.output import show
from plumb.aggregator.cli.render import watch_view
from plumb.aggregator.errors import EXIT_CODES

if TYPE_CHECKING:
    import httpx

_TIMEOUT_S = 5.0  # a frame never waits longer than this for the aggregator


class _Refused(Exception):
    """The aggregator answered, with an error (a bad token, a limit, an outage behind it)."""


class _Watcher:
    """Fetches frames; remembers when the aggregator last answered, and whether it did now."""

    def __init__(self, server: str, client: httpx.Client):
        self.server, self.client = server, client
        self.last_ok: datetime | None = None
        self.failing = False

    def _get(self, path: str):
        resp = self.client.get(f"{self.server}{path}", timeout=_TIMEOUT_S)
        if resp.status_code >= 400:
            try:
                message = resp.json().get("message") or resp.text
            except ValueError:
                message = resp.text
            raise _Refused(f"the aggregator answered {resp.status_code}: {message}")
        return resp.json()

    def frame(self) -> list:
        """One view; an unreachable or refusing aggregator is an error state, not an exit."""
        import httpx

        try:
            rows, findings = self._get("/v1/nodes"), self._get("/v1/drift")
        except (_Refused, httpx.HTTPError) as exc:
            self.failing = True
            problem = str(exc) or type(exc).__name__
            if not isinstance(exc, _Refused):
                problem = f"cannot reach the aggregator: {problem}"
            return watch_view(self.server, [], [], problem, self.last_ok)
        self.failing, self.last_ok = False, datetime.now(UTC)
        return watch_view(self.server, rows, findings, None)


@app.command()
def watch(
    server: ServerOpt = "http://127.0.0.1:8080",
    interval: Annotated[
        float, typer.Option("--interval", "-n", min=0.1, help="seconds between refreshes")
    ] = 2.0,
    iterations: Annotated[
        int, typer.Option(min=0, help="stop after this many refreshes (0: until Ctrl-C)")
    ] = 0,
) -> None:
    """A live view of the fleet, down and most drifted nodes first, and the open findings.

    While the aggregator cannot be reached (or refuses the call) the view says so in red and
    keeps retrying. In a pipe each refresh prints as plain text. Ctrl-C exits with status 0;
    with --iterations, the exit is 5 when the last refresh got no answer.
    """
    stop = _CtrlC()
    import httpx

    server = server.rstrip("/")
    try:
        with httpx.Client(**connection(server)) as client:
            watcher = _Watcher(server, client)
            if out.is_terminal:
                _live(watcher, interval, iterations, stop)
            else:
                _printed(watcher, interval, iterations, stop)
    except KeyboardInterrupt:  # a second Ctrl-C, while a frame was still being fetched
        return
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if iterations and watcher.failing:
        raise typer.Exit(EXIT_CODES["unavailable"])


class _CtrlC:
    """Ctrl-C as a flag the watch reads between frames: a KeyboardInterrupt raised inside the
    HTTP client could leave its connection pool's lock held and hang its close (and the
    handler takes no lock either). A second Ctrl-C interrupts at once."""

    def __init__(self) -> None:
        self.pressed = False
        signal.signal(signal.SIGINT, self._press)

    def _press(self, signum: int, frame: object) -> None:
        self.pressed = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, less once Ctrl-C is pressed; whether it was."""
        deadline = time.monotonic() + seconds
        while not self.pressed and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))
        return self.pressed


def _live(watcher: _Watcher, interval: float, iterations: int, stop: _CtrlC) -> None:
    """Redraw one frame in place on the terminal."""
    from rich.console import Group
    from rich.live import Live

    with Live(Group(*watcher.frame()), console=out, auto_refresh=False) as live:
        done = 1
        while (not iterations or done < iterations) and not stop.wait(interval):
            live.update(Group(*watcher.frame()), refresh=True)
            done += 1


def _printed(watcher: _Watcher, interval: float, iterations: int, stop: _CtrlC) -> None:
    """Print each frame in turn, a blank line apart (a pipe cannot redraw)."""
    done = 0
    while True:
        show(watcher.frame())
        done += 1
        if (iterations and done >= iterations) or stop.pressed:
            return
        typer.echo("")
        if stop.wait(interval):
            return
