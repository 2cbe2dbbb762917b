"""A headless Chromium driven over the DevTools protocol, for tests that click and type.

`--dump-dom` (test_web_page.py) loads one URL; signing in needs a form filled and submitted
and the cookie kept. Chromium speaks the DevTools protocol on file descriptors 3 (commands
in) and 4 (replies out) with `--remote-debugging-pipe`, NUL-terminated JSON, so no WebSocket
client is needed. The process is stopped by its PID.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import until
from timeouts import scaled

# What every test Chromium runs with: headless, no sandbox (root in CI), and nothing that
# reaches beyond loopback on its own.
HEADLESS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_binary() -> str:
    """Debian's `chromium` on PATH; fails the test saying how to install it."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail(
            "chromium not found on PATH: install Debian's `chromium` package "
            "(apt-get install -y --no-install-recommends chromium); .ci/run does"
        )
    return binary


class CdpError(Exception):
    """A DevTools command failed (during a navigation: the page's context went away)."""


class Browser:
    """One Chromium with one page; `evaluate` runs JavaScript in it."""

    def __init__(self, log: Path):
        binary = chromium_binary()
        self._profile = tempfile.TemporaryDirectory()
        commands_in, self._commands = os.pipe()
        self._replies, replies_out = os.pipe()

        def on_fds_3_and_4() -> None:  # runs in the child before exec
            os.dup2(commands_in, 3)
            os.dup2(replies_out, 4)

        self.proc = subprocess.Popen(
            [
                binary,
                *HEADLESS,
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                "--window-size=1400,900",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log.open("a"),
            stderr=subprocess.STDOUT,
            pass_fds=(3, 4),
            preexec_fn=on_fds_3_and_4,
        )
        os.close(commands_in)
        os.close(replies_out)
        self._buffer = b""
        self._next_id = 0
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]

    def send(self, method: str, *, session: str | None = None, **params: object) -> dict:
        """Send one command and wait for its reply (events in between are dropped)."""
        self._next_id += 1
        message: dict[str, object] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + scaled(30)
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error'].get('message')}")
                return reply["result"]

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            readable, _, _ = select.select([self._replies], [], [], max(left, 0))
            if not readable:
                pytest.fail("Chromium did not answer a DevTools command in time")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                pytest.fail(f"Chromium exited ({self.proc.poll()}) mid-command")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def page(self, method: str, **params: object) -> dict:
        """A command to the page rather than the browser."""
        return self.send(method, session=self._session, **params)

    def open(self, url: str) -> None:
        self.page("Page.navigate", url=url)

    def evaluate(self, expression: str) -> object:
        """The value of `expression` in the page; CdpError while it is being replaced."""
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise CdpError(result["exceptionDetails"].get("text", "exception"))
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float = 15.0) -> object:
        """Poll `expression` until it is truthy (navigations in between are waited out)."""
        return until(lambda: self.evaluate(expression), timeout, what, transient=(CdpError,))

    def type_into(self, selector: str, text: str) -> None:
        """Focus the field and type `text` as keyboard input."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.page("Input.insertText", text=text)

    def click(self, selector: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.page("Page.captureScreenshot")["data"]))
        if os.environ.get("PLUMB_ARTIFACTS"):
            target = Path(os.environ["PLUMB_ARTIFACTS"])
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target / path.name)
        return path

    def close(self) -> None:
        # No waiting for the reply: Chromium may exit before it sends one.
        try:
            os.write(self._commands, b'{"id": 0, "method": "Browser.close"}\0')
        except OSError:
            pass
        try:
            self.proc.wait(timeout=scaled(15))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._commands)
        os.close(self._replies)
        self._profile.cleanup()
