"""TLS on both listeners with a throwaway CA: agents stream over gRPC TLS, people and the CLI
read over HTTPS; the wrong CA and plaintext are refused on both. An agent told the name its
aggregator's certificate carries checks that name, not the host it dials."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import httpx
import pytest
import trustme
from conftest import BIN, ENV, Aggregator, until


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    """A CA, a certificate it signed for 127.0.0.1, and an unrelated CA."""
    ca, other = trustme.CA(), trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    files = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key", "other-ca")}
    ca.cert_pem.write_to_path(files["ca"])
    other.cert_pem.write_to_path(files["other-ca"])
    cert.private_key_pem.write_to_path(files["key"])
    for i, pem in enumerate(cert.cert_chain_pems):
        pem.write_to_path(files["cert"], append=i > 0)
    return files


@pytest.fixture
def tls_aggregator(tmp_path: Path, pki: dict[str, Path]):
    env = {"PLUMB_TLS__CERT_FILE": str(pki["cert"]), "PLUMB_TLS__KEY_FILE": str(pki["key"])}
    agg = Aggregator(tmp_path, extra_env=env, ca_file=pki["ca"]).start()
    yield agg
    agg.stop()


def test_an_agent_streams_over_tls_and_the_cli_reads_over_https(tls_aggregator, pki, start_agent):
    agg = tls_aggregator
    assert agg.url.startswith("https://")
    start_agent(agg, "tls-node", "l4", "--ca-file", str(pki["ca"]))
    until(lambda: (n := agg.node("tls-node")) and n["connected"], what="the node over TLS")

    nodes = subprocess.run(
        [str(BIN / "plumb"), "nodes", "--server", agg.url, "-o", "json"],
        env=agg.cli_env,  # PLUMB_CA_FILE
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert nodes.returncode == 0, nodes.stderr
    assert '"tls-node"' in nodes.stdout
    untrusting = subprocess.run(
        [str(BIN / "plumb"), "nodes", "--server", agg.url],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert untrusting.returncode == 5 and "CERTIFICATE_VERIFY_FAILED" in untrusting.stderr


def test_the_wrong_ca_and_plaintext_are_refused(tls_aggregator, pki, start_agent, tmp_path):
    agg = tls_aggregator
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(
            agg.url + "/healthz",
            verify=ssl.create_default_context(cafile=str(pki["other-ca"])),
            timeout=5,
        )
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{agg.http_port}/healthz", timeout=5)

    start_agent(agg, "wrong-ca", "l4", "--ca-file", str(pki["other-ca"]))
    start_agent(agg, "plaintext", "l4")
    start_agent(agg, "trusting", "l4", "--ca-file", str(pki["ca"]))
    until(lambda: agg.node("trusting"), what="the agent that trusts the CA")
    for name in ("wrong-ca", "plaintext"):
        until(
            lambda name=name: "UNAVAILABLE" in (tmp_path / f"agent-{name}.log").read_text(),
            what=f"agent {name} to fail its connection",
        )
        assert agg.node(name) is None


SERVICE = "plumb-aggregator.plumb.svc"


def test_an_agent_dialling_another_name_checks_the_one_it_is_told(tmp_path, start_agent):
    # The chart's agents dial a Service of their own and expect the aggregator's main
    # Service name on its certificate: here "localhost" stands for the Service dialled.
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", SERVICE)  # 127.0.0.1: the harness's own HTTPS reads
    files = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(files["ca"])
    cert.private_key_pem.write_to_path(files["key"])
    cert.cert_chain_pems[0].write_to_path(files["cert"])
    env = {"PLUMB_TLS__CERT_FILE": str(files["cert"]), "PLUMB_TLS__KEY_FILE": str(files["key"])}
    agg = Aggregator(tmp_path, extra_env=env, ca_file=files["ca"]).start()
    try:
        dialled = "localhost:" + agg.grpc.rpartition(":")[2]
        tls = ("--aggregator", dialled, "--ca-file", str(files["ca"]))
        start_agent(agg, "told", "l4", *tls, "--tls-server-name", SERVICE)
        start_agent(agg, "untold", "l4", *tls)
        start_agent(agg, "told-wrong", "l4", *tls, "--tls-server-name", "other.plumb.svc")
        until(lambda: (n := agg.node("told")) and n["connected"], what="the told agent")
        for name in ("untold", "told-wrong"):
            until(
                lambda name=name: "UNAVAILABLE" in (tmp_path / f"agent-{name}.log").read_text(),
                what=f"agent {name} to fail its connection",
            )
            assert agg.node(name) is None
    finally:
        agg.stop()


def test_a_certificate_without_its_key_stops_serve(tmp_path, pki):
    serve = subprocess.run(
        [str(BIN / "plumb"), "serve", "--db", f"sqlite:///{tmp_path / 'x.db'}"],
        env={**ENV, "PLUMB_TLS__CERT_FILE": str(pki["cert"])},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert serve.returncode == 2
    assert "PLUMB_TLS__KEY_FILE" in serve.stderr


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--ca-file", "{tmp}/absent.pem"), ("absent.pem", "hint:")),
        (("--tls-server-name", SERVICE), ("tls_server_name", "ca_file")),
    ],
    ids=["unreadable-ca-file", "server-name-without-ca-file"],
)
def test_an_agent_misconfigured_for_tls_stops_and_says_why(tmp_path, flags, said):
    agent = subprocess.run(
        [str(BIN / "plumb-agent"), "--aggregator", "127.0.0.1:9", "--simulate", "l4",
         *(f.format(tmp=tmp_path) for f in flags)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert agent.returncode == 2
    assert all(s in agent.stderr for s in said), agent.stderr
