"""The web page behind auth, over the real app: the sign-in form, its cookie, redirects, CSRF,
and the trusted auth-proxy header."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from plumb.aggregator.api import create_app
from plumb.aggregator.errors import NotFound
from plumb.aggregator.settings import AggregatorSettings, ApiSettings

ADMIN, READ = "admin-token-0123456789", "read-token-0123456789"
PROXY = "10.9.8.7"  # the auth proxy's address, in api.trusted_proxies


class FakeCore:
    """An empty fleet: what the pages and DELETE /v1/nodes/{name} ask of the Core."""

    def __init__(self, settings: AggregatorSettings):
        self.settings = settings

    def node_rows(self, **_: object) -> list:
        return []

    def open_findings(self, **_: object) -> list:
        return []

    async def changes(self, *_: object, **__: object) -> list:
        return []

    def node(self, name: str):
        raise NotFound(f"no node named {name!r}")

    remove_node = node


@pytest.fixture
def make_app(tmp_path: Path) -> Callable:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ops admin {ADMIN}\nci read {READ}\n")

    def make(**api: object):
        api = {"tokens_file": tokens, "rate_per_s": 1000, "burst": 1000, **api}
        return create_app(FakeCore(AggregatorSettings(api=api)))  # type: ignore[arg-type]

    return make


def client(app, base_url: str = "http://plumb.test", peer: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(peer, 50000))
    return httpx.AsyncClient(transport=transport, base_url=base_url)


async def sign_in(http: httpx.AsyncClient, token: str, next_path: str = "/") -> httpx.Response:
    return await http.post("/login", data={"token": token, "next": next_path})


def csrf_of(html: str) -> str:
    start = html.index('<meta name="plumb-csrf" content="') + len(
        '<meta name="plumb-csrf" content="'
    )
    return html[start : html.index('"', start)]


async def test_pages_send_a_browser_to_the_form_and_fragments_answer_401(make_app):
    async with client(make_app()) as http:
        page = await http.get("/")
        assert page.status_code == 303 and page.headers["location"] == "/login?next=/"
        node = await http.get("/nodes/gpu-7")
        assert node.headers["location"] == "/login?next=/nodes/gpu-7"
        fragment = await http.get("/ui/fleet")
        assert fragment.status_code == 401 and fragment.json()["code"] == "unauthenticated"
        api = await http.get("/v1/nodes")
        assert api.status_code == 401 and api.headers["www-authenticate"] == 'Bearer realm="plumb"'
        form = await http.get("/login", params={"next": "/nodes/gpu-7"})
        assert form.status_code == 200 and 'name="token"' in form.text
        assert 'name="next" value="/nodes/gpu-7"' in form.text
        assert (await http.get("/static/style.css")).status_code == 200  # the form's styles


async def test_a_token_buys_an_httponly_strict_expiring_cookie_without_the_token(make_app):
    async with client(make_app(session_lifetime_s=600)) as http:
        resp = await sign_in(http, READ, "/nodes/gpu-7")
        assert resp.status_code == 303 and resp.headers["location"] == "/nodes/gpu-7"
        cookie = resp.headers["set-cookie"]
        attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")[1:]}
        assert attributes == {"httponly", "samesite", "max-age", "path"}
        assert "SameSite=strict" in cookie and "Max-Age=600" in cookie and "Path=/" in cookie
        assert cookie.startswith("plumb_session=") and READ not in cookie
        page = await http.get("/")
        assert page.status_code == 200 and "Fleet" in page.text
        assert "ci · read" in page.text and 'id="logout"' in page.text
        assert (await http.get("/ui/fleet")).status_code == 200
        assert (await http.get("/v1/nodes")).status_code == 200  # the API takes it too


async def test_over_tls_the_cookie_is_secure(make_app):
    async with client(make_app(), base_url="https://plumb.test") as http:
        cookie = (await sign_in(http, READ)).headers["set-cookie"]
        assert "; secure" in cookie.lower()


async def test_a_wrong_token_shows_the_form_again_with_an_error(make_app):
    async with client(make_app()) as http:
        resp = await sign_in(http, "not-a-token-of-this-aggregator", "/nodes/x")
        assert resp.status_code == 401 and "set-cookie" not in resp.headers
        assert 'id="login-error"' in resp.text and "That token is not known." in resp.text
        assert 'name="next" value="/nodes/x"' in resp.text
        assert (await http.get("/")).status_code == 303


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil", "x"])
async def test_sign_in_never_sends_the_browser_to_another_site(make_app, target):
    async with client(make_app()) as http:
        assert (await sign_in(http, READ, target)).headers["location"] == "/"


async def test_a_sign_in_posted_from_another_site_is_refused(make_app):
    async with client(make_app()) as http:
        resp = await http.post(
            "/login", data={"token": READ}, headers={"Origin": "https://evil.example"}
        )
        assert resp.status_code == 403 and "set-cookie" not in resp.headers
        same = await http.post(
            "/login", data={"token": READ}, headers={"Origin": "http://plumb.test"}
        )
        assert same.status_code == 303


async def test_state_changes_with_the_cookie_need_its_csrf_secret_and_admin_scope(make_app):
    async with client(make_app()) as http:
        await sign_in(http, ADMIN)
        csrf = csrf_of((await http.get("/")).text)
        bare = await http.delete("/v1/nodes/gpu-7")
        assert bare.status_code == 403 and "X-Plumb-CSRF" in bare.json()["message"]
        wrong = await http.delete("/v1/nodes/gpu-7", headers={"X-Plumb-CSRF": "guess"})
        assert wrong.status_code == 403
        foreign = await http.delete(
            "/v1/nodes/gpu-7", headers={"X-Plumb-CSRF": csrf, "Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        good = await http.delete("/v1/nodes/gpu-7", headers={"X-Plumb-CSRF": csrf})
        assert good.status_code == 404  # past every check: the node is not known
    async with client(make_app()) as http:
        await sign_in(http, READ)
        csrf = csrf_of((await http.get("/")).text)
        read = await http.delete("/v1/nodes/gpu-7", headers={"X-Plumb-CSRF": csrf})
        assert read.status_code == 403 and "'ci' has the read scope" in read.json()["message"]


async def test_bearer_calls_need_no_csrf_header(make_app):
    async with client(make_app()) as http:
        resp = await http.delete("/v1/nodes/gpu-7", headers={"Authorization": f"Bearer {ADMIN}"})
        assert resp.status_code == 404


async def test_logout_needs_the_csrf_secret_and_drops_the_cookie(make_app):
    async with client(make_app()) as http:
        await sign_in(http, READ)
        csrf = csrf_of((await http.get("/")).text)
        refused = await http.post("/logout", data={"csrf": "guess"})
        assert refused.status_code == 403 and (await http.get("/")).status_code == 200
        out = await http.post("/logout", data={"csrf": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/login"
        assert 'plumb_session=""' in out.headers["set-cookie"]
        assert (await http.get("/")).status_code == 303


async def test_a_forged_cookie_is_no_session(make_app):
    async with client(make_app()) as http:
        http.cookies.set("plumb_session", "eyJuIjoib3BzIiwicyI6ImFkbWluIn0.AAAA")
        assert (await http.get("/")).status_code == 303


async def test_the_proxy_s_user_header_counts_only_from_a_trusted_proxy(make_app):
    app = make_app(auth_proxy_header="X-Auth-Request-User", trusted_proxies=[PROXY])
    user = {"X-Auth-Request-User": "alice@example.com", "X-Forwarded-For": "192.0.2.10"}
    async with client(app, peer=PROXY) as http:
        page = await http.get("/", headers=user)
        assert page.status_code == 200 and "proxy:alice@example.com · read" in page.text
        assert 'id="logout"' not in page.text  # the proxy signs its users out
        admin = await http.delete("/v1/nodes/gpu-7", headers={**user, "X-Plumb-CSRF": "1"})
        assert admin.status_code == 403 and "read scope" in admin.json()["message"]
        no_csrf = await http.delete("/v1/nodes/gpu-7", headers=user)
        assert no_csrf.status_code == 403 and "X-Plumb-CSRF" in no_csrf.json()["message"]
    async with client(app, peer="10.1.2.3") as http:
        assert (await http.get("/", headers=user)).status_code == 303
        assert (await http.get("/v1/nodes", headers=user)).status_code == 401


async def test_the_proxy_scope_is_configurable(make_app):
    app = make_app(
        auth_proxy_header="X-Forwarded-User", auth_proxy_scope="admin", trusted_proxies=[PROXY]
    )
    headers = {"X-Forwarded-User": "ops-lead", "X-Plumb-CSRF": "1"}
    async with client(app, peer=PROXY) as http:
        assert (await http.delete("/v1/nodes/gpu-7", headers=headers)).status_code == 404


def test_the_proxy_header_without_trusted_proxies_is_refused_at_start():
    with pytest.raises(ValidationError, match="needs api.trusted_proxies"):
        ApiSettings(auth_proxy_header="X-Auth-Request-User")
