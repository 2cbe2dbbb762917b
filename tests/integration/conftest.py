"""Real processes on loopback: `plumb serve` and `plumb-agent --simulate`, stopped by PID."""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml
from pg_fixture import pg_server, pg_url  # noqa: F401  (fixtures: imported to register them)
from ports import free_port
from prometheus_client.parser import text_string_to_metric_families
from timeouts import scaled

BIN = Path(sys.executable).parent
# Every test aggregator reads anonymously, as the demo does, and knows these two tokens;
# calls that change state send ADMIN_TOKEN (Aggregator.post, cli_env).
ADMIN_TOKEN = "test-admin-token-0123456789"
READ_TOKEN = "test-read-token-0123456789"
PROFILES = Path(__file__).resolve().parents[2] / "agent" / "simulate" / "profiles"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


# What a check may raise while the thing it waits for is not there yet.
TRANSIENT: tuple[type[Exception], ...] = (httpx.HTTPError, KeyError, StopIteration)


def until(
    check: Callable[[], object],
    timeout: float = 15.0,
    what: str = "condition",
    transient: tuple[type[Exception], ...] = TRANSIENT,
) -> object:
    """Poll `check` until it returns something truthy; fail the test at the deadline
    (`timeout` times PLUMB_TEST_TIMEOUT_SCALE)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except transient as exc:
            last_error = exc
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout} s waiting for {what} (last error: {last_error})")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
    timeout = scaled(timeout)
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def scrape(
    aggregator: Aggregator, path: str = "/metrics"
) -> list[tuple[str, dict[str, str], float]]:
    """Every sample on the aggregator's /metrics (or `path`) as (name, labels, value)."""
    text = aggregator.get(path).text
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


@dataclass
class Aggregator:
    """One `plumb serve` process and its addresses."""

    workdir: Path
    grpc: str = field(default_factory=lambda: f"127.0.0.1:{free_port()}")
    http_port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    # The CA file to trust when extra_env turns TLS on (PLUMB_TLS__*): the URL is https then.
    ca_file: Path | None = None
    # Seconds to wait for /readyz; more where start-up waits on other services.
    start_timeout_s: float = 15.0

    @property
    def url(self) -> str:
        scheme = "https" if self.ca_file else "http"
        return f"{scheme}://127.0.0.1:{self.http_port}"

    def access_env(self) -> dict[str, str]:
        """Write the test tokens file; the API access every test aggregator gets: anonymous
        read and those tokens."""
        tokens = self.workdir / "api-tokens"
        tokens.write_text(f"test-admin admin {ADMIN_TOKEN}\ntest-read read {READ_TOKEN}\n")
        return {"PLUMB_API__ANONYMOUS_READ": "true", "PLUMB_API__TOKENS_FILE": str(tokens)}

    @property
    def cli_env(self) -> dict[str, str]:
        """The environment for `plumb` commands against this aggregator, as its admin."""
        ca = {"PLUMB_CA_FILE": str(self.ca_file)} if self.ca_file else {}
        return {**ENV, "PLUMB_API_TOKEN": ADMIN_TOKEN, **ca}

    @property
    def db(self) -> str:
        return f"sqlite:///{self.workdir / 'plumb.db'}"

    def start(self) -> Aggregator:
        log = (self.workdir / "aggregator.log").open("a")
        self.proc = subprocess.Popen(
            [
                str(BIN / "plumb"),
                "serve",
                "--grpc-listen",
                self.grpc,
                "--http-listen",
                f"127.0.0.1:{self.http_port}",
                "--db",
                self.db,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**ENV, **self.access_env(), **self.extra_env},
        )
        try:
            until(
                lambda: self.get("/readyz").status_code == 200,
                timeout=self.start_timeout_s,
                what="aggregator /readyz",
            )
        except BaseException:  # a failed setup leaves no `plumb serve` behind
            stop(self.proc, signal.SIGKILL)
            raise
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        return stop(self.proc, sig)

    def get(self, path: str, **params: object) -> httpx.Response:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(f"aggregator exited with {self.proc.returncode}:\n{self.log()}")
        return httpx.get(self.url + path, params=params, timeout=5, verify=self._verify)

    def post(self, path: str, token: str | None = ADMIN_TOKEN, **kwargs: object) -> httpx.Response:
        """POST as `token` (the admin's by default; None: anonymous)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(
            self.url + path, headers=headers, timeout=10, verify=self._verify, **kwargs
        )

    def delete(self, path: str, token: str | None = ADMIN_TOKEN) -> httpx.Response:
        """DELETE as `token` (the admin's by default; None: anonymous)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.delete(self.url + path, headers=headers, timeout=10, verify=self._verify)

    @property
    def _verify(self) -> ssl.SSLContext | bool:
        return ssl.create_default_context(cafile=str(self.ca_file)) if self.ca_file else True

    def json(self, path: str, **params: object):
        resp = self.get(path, **params)
        resp.raise_for_status()
        return resp.json()

    def node(self, name: str) -> dict | None:
        return next((n for n in self.json("/v1/nodes") if n["name"] == name), None)

    def log(self) -> str:
        return (self.workdir / "aggregator.log").read_text()


@dataclass
class Agent:
    """One simulated node: its `plumb-agent` process and its own editable profile copy."""

    name: str
    profile: Path
    proc: subprocess.Popen

    def edit(self, change: Callable[[dict], None]) -> None:
        spec = yaml.safe_load(self.profile.read_text())
        change(spec)
        tmp = self.profile.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(spec, sort_keys=False))
        tmp.replace(self.profile)  # atomic, as an editor's save would be


@pytest.fixture
def aggregator(tmp_path: Path) -> Iterator[Aggregator]:
    agg = Aggregator(tmp_path).start()
    yield agg
    if agg.proc is not None:
        agg.stop()


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[Callable[..., Agent]]:
    started: list[Agent] = []

    def start(aggregator: Aggregator, name: str, profile: str = "dgx-h100", *args: str) -> Agent:
        copy = tmp_path / f"{name}.yaml"
        shutil.copy(PROFILES / f"{profile}.yaml", copy)
        log = (tmp_path / f"agent-{name}.log").open("a")
        proc = subprocess.Popen(
            [
                str(BIN / "plumb-agent"),
                "--aggregator",
                aggregator.grpc,
                "--node-name",
                name,
                "--simulate",
                str(copy),
                "--poll-interval",
                "0.2",
                *args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=ENV,
        )
        agent = Agent(name, copy, proc)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        stop(agent.proc)
