"""API tokens, scopes and rate limits on a real `plumb serve`, over real HTTP, and the CLI's
token options."""

from __future__ import annotations

import subprocess
import time

import httpx
from conftest import ADMIN_TOKEN, BIN, ENV, READ_TOKEN, Aggregator, until

NO_ANONYMOUS = {"PLUMB_API__ANONYMOUS_READ": "false"}


def _get(agg: Aggregator, path: str, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(agg.url + path, headers=headers, timeout=5)


def test_without_anonymous_read_every_query_needs_a_token_but_probes_and_metrics(tmp_path):
    agg = Aggregator(tmp_path, extra_env=NO_ANONYMOUS).start()
    try:
        for path in ("/v1/nodes", "/v1/drift", "/v1/snapshot", "/ui/fleet"):
            resp = _get(agg, path)
            assert resp.status_code == 401, (path, resp.text)
            assert resp.headers["www-authenticate"] == 'Bearer realm="plumb"'
            body = resp.json()
            assert body["code"] == "unauthenticated" and "PLUMB_API_TOKEN" in body["hint"]
            assert _get(agg, path, "Bearer-but-unknown-0123456789").status_code == 401
            assert _get(agg, path, READ_TOKEN).status_code == 200
        for path in ("/healthz", "/readyz", "/metrics", "/metrics/sensors"):
            assert _get(agg, path).status_code == 200, path
        # A browser asking for the page is sent to the sign-in form instead.
        page = _get(agg, "/")
        assert page.status_code == 303 and page.headers["location"] == "/login?next=/"
        assert _get(agg, "/", READ_TOKEN).status_code == 200
    finally:
        agg.stop()


def test_metrics_need_the_read_scope_when_not_public(tmp_path):
    env = {**NO_ANONYMOUS, "PLUMB_API__PUBLIC_METRICS": "false"}
    agg = Aggregator(tmp_path, extra_env=env).start()
    try:
        for path in ("/metrics", "/metrics/sensors"):
            assert _get(agg, path).status_code == 401, path
            assert "# TYPE plumb_" in _get(agg, path, READ_TOKEN).text, path
        assert _get(agg, "/readyz").status_code == 200
    finally:
        agg.stop()


def test_validations_and_baselines_need_admin_and_tokens_are_never_logged(aggregator, start_agent):
    start_agent(aggregator, "scoped", "l4")
    until(lambda: aggregator.node("scoped"), what="the node")
    for path, body in (
        ("/v1/validations", {"phases": ["deployment"]}),
        ("/v1/nodes/scoped/baseline", None),
    ):
        anonymous = aggregator.post(path, token=None, json=body)
        assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthenticated"
        reader = aggregator.post(path, token=READ_TOKEN, json=body)
        assert reader.status_code == 403, reader.text
        assert reader.json() == {
            "code": "forbidden",
            "message": "token 'test-read' has the read scope; this call needs admin",
            "hint": "use a token with the admin scope",
            "request_id": reader.headers["x-request-id"],
        }
        assert aggregator.post(path, json=body).status_code in (200, 202)
    assert aggregator.json("/v1/validations")  # the admin's run, and only that one
    assert len(aggregator.json("/v1/validations")) == 1
    log = aggregator.log()
    assert "token=test-read" in log and "token=test-admin" in log
    assert ADMIN_TOKEN not in log and READ_TOKEN not in log


def test_a_bad_tokens_file_stops_serve_naming_the_line_not_the_token(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("ops admin 0123456789abcdef0123\nci reader fedcba9876543210fedc\n")
    agg = Aggregator(tmp_path)
    serve = subprocess.run(
        [str(BIN / "plumb"), "serve", "--grpc-listen", agg.grpc, "--http-listen",
         f"127.0.0.1:{agg.http_port}", "--db", agg.db],
        env={**ENV, "PLUMB_API__TOKENS_FILE": str(tokens)},
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert serve.returncode == 2, serve.stderr
    said = " ".join(serve.stderr.split())  # the console wraps long lines
    assert f"{tokens}:2: token 'ci' has unknown scope 'reader'" in said
    assert "0123456789abcdef" not in serve.stderr and "fedcba98" not in serve.stderr


def test_the_cli_sends_the_token_from_a_file_or_the_environment(tmp_path):
    agg = Aggregator(tmp_path, extra_env=NO_ANONYMOUS).start()
    token_file = tmp_path / "token"
    token_file.write_text(READ_TOKEN + "\n")

    def plumb(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN / "plumb"), *args], env={**ENV, **env}, capture_output=True, text=True,
            timeout=30,
        )  # fmt: skip

    try:
        nodes = ["nodes", "--server", agg.url, "-o", "json"]
        refused = plumb(*nodes)
        assert refused.returncode == 6, refused.stderr
        assert "needs a token" in refused.stderr and "hint:" in refused.stderr
        assert plumb("--token-file", str(token_file), *nodes).returncode == 0
        assert plumb(*nodes, PLUMB_API_TOKEN_FILE=str(token_file)).returncode == 0
        assert plumb(*nodes, PLUMB_API_TOKEN=READ_TOKEN).returncode == 0
        both = plumb(*nodes, PLUMB_API_TOKEN=READ_TOKEN, PLUMB_API_TOKEN_FILE=str(token_file))
        assert both.returncode == 2 and "give the API token once" in both.stderr
        admin_call = ["validate", "--server", agg.url, "--phase", "deployment"]
        forbidden = plumb(*admin_call, PLUMB_API_TOKEN=READ_TOKEN)
        assert forbidden.returncode == 4 and "needs admin" in forbidden.stderr
    finally:
        agg.stop()


def test_a_caller_over_its_rate_gets_429_with_retry_after_then_recovers(tmp_path):
    env = {"PLUMB_API__RATE_PER_S": "1", "PLUMB_API__BURST": "5"}
    agg = Aggregator(tmp_path, extra_env=env).start()
    try:
        with httpx.Client(base_url=agg.url, timeout=5) as client:
            codes = [client.get("/v1/nodes").status_code for _ in range(5)]
            limited = client.get("/v1/nodes")
            # Probes and scrapes are not charged, and another caller has its own bucket.
            assert client.get("/metrics").status_code == 200
            assert client.get("/readyz").status_code == 200
            other = client.get("/v1/nodes", headers={"Authorization": f"Bearer {READ_TOKEN}"})
        assert codes == [200] * 5
        assert limited.status_code == 429, limited.text
        assert limited.json()["code"] == "rate_limited" and limited.json()["hint"]
        retry_after = int(limited.headers["retry-after"])
        assert 1 <= retry_after <= 2
        assert other.status_code == 200
        time.sleep(retry_after)
        assert httpx.get(agg.url + "/v1/nodes", timeout=5).status_code == 200
    finally:
        agg.stop()


def _forwarded_codes(agg: Aggregator, count: int) -> list[int]:
    """Status of `count` anonymous requests from loopback, each naming a new client address."""
    with httpx.Client(base_url=agg.url, timeout=5) as client:
        return [
            client.get(
                "/v1/nodes", headers={"X-Forwarded-For": f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}"}
            ).status_code
            for i in range(count)
        ]


# One request per 1000 s after the burst: no refill lands within a test.
SLOW = {"PLUMB_API__RATE_PER_S": "0.001", "PLUMB_API__BURST": "5"}


def test_a_new_forwarded_for_per_request_does_not_escape_the_rate_limit(tmp_path):
    env = SLOW
    agg = Aggregator(tmp_path, extra_env=env).start()
    try:
        codes = _forwarded_codes(agg, 300)
    finally:
        agg.stop()
    # One bucket, loopback's: the burst passes, nothing after it.
    assert codes == [200] * 5 + [429] * 295, codes


def test_forwarded_for_counts_from_a_configured_proxy(tmp_path):
    env = {**SLOW, "PLUMB_API__TRUSTED_PROXIES": '["127.0.0.1"]'}
    agg = Aggregator(tmp_path, extra_env=env).start()
    try:
        codes = _forwarded_codes(agg, 20)
    finally:
        agg.stop()
    assert codes == [200] * 20  # each forwarded client has its own full bucket
