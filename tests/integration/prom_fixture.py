"""A real Prometheus (Debian's `prometheus` package) on loopback, scraping the test's aggregator.

It scrapes and evaluates every second and loads deploy/prometheus/rules.yml with one change:
every alert's `for:` is rewritten to 0s, so an alert fires on the first evaluation that sees its
condition instead of after the production 1 to 30 minutes. Everything else (expressions, labels,
annotations) is the shipped file, byte for byte. The process is stopped by its PID.

Prometheus applies a new scrape target on a ~5 s tick, so the first scrape comes about 5-6 s
after start; the fixture waits for it (target `up`) before handing over, and tests poll for up to
30 s, never sleep (shared/reference/infra.md §2).

A missing `prometheus` binary fails the test with the package to install: CI installs it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from conftest import ENV, Aggregator, free_port, stop, until

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
FOR_LINE = re.compile(r"^(\s*)for:\s*\S+\s*$", re.MULTILINE)


def rules_without_for(text: str) -> str:
    """The rule file with every `for:` set to 0s; fail if that leaves any other duration."""
    rewritten = FOR_LINE.sub(r"\1for: 0s", text)
    for group in yaml.safe_load(rewritten)["groups"]:
        for rule in group["rules"]:
            assert rule.get("for", "0s") == "0s", f"{rule} kept its `for:`"
    return rewritten


@dataclass
class Prometheus:
    workdir: Path
    port: int
    proc: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params: object):
        if self.proc.poll() is not None:
            pytest.fail(f"prometheus exited with {self.proc.returncode}:\n{self.log()}")
        resp = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=5)
        resp.raise_for_status()
        body = resp.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """Instant query: [{"metric": {...}, "value": [ts, "v"]}, ...]."""
        return self.api("query", query=expr)["result"]

    def alerts(self, name: str, state: str = "firing", **labels: str) -> list[dict]:
        """Alerts of /api/v1/alerts named `name` in `state` whose labels include `labels`."""
        return [
            a
            for a in self.api("alerts")["alerts"]
            if a["labels"].get("alertname") == name
            and a["state"] == state
            and all(a["labels"].get(k) == v for k, v in labels.items())
        ]

    def log(self) -> str:
        return (self.workdir / "prometheus.log").read_text()


def start_prometheus(workdir: Path, jobs: Mapping[str, str]) -> Prometheus:
    """Prometheus scraping each job's one target (job name -> host:port, or host:port/path
    for another path than /metrics), once all are up."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail(
            "prometheus not found on PATH: install Debian's `prometheus` package "
            "(apt-get install -y --no-install-recommends prometheus); .ci/run does"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "rules.yml").write_text(rules_without_for(RULES.read_text()))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yml"],  # relative to the config file's directory
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [{"targets": [target.partition("/")[0]]}],
                "metrics_path": "/" + (target.partition("/")[2] or "metrics"),
            }
            for job, target in jobs.items()
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=(workdir / "prometheus.log").open("a"),
        stderr=subprocess.STDOUT,
        env=ENV,
    )
    prom = Prometheus(workdir, port, proc)
    try:
        until(
            lambda: httpx.get(f"{prom.url}/-/ready", timeout=2).status_code == 200,
            timeout=30,
            what="prometheus /-/ready",
        )
        for job in jobs:
            until(
                lambda job=job: prom.query(f'up{{job="{job}"}} == 1'),
                timeout=30,
                what=f"the first successful scrape of {job}",
            )
    except BaseException:
        stop(proc)
        print(prom.log())
        raise
    return prom


@pytest.fixture
def prometheus(aggregator: Aggregator, tmp_path: Path) -> Iterator[Prometheus]:
    prom = start_prometheus(
        tmp_path / "prometheus",
        {
            "plumb": f"127.0.0.1:{aggregator.http_port}",
            "plumb-sensors": f"127.0.0.1:{aggregator.http_port}/metrics/sensors",
        },
    )
    yield prom
    stop(prom.proc)
