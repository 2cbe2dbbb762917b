"""Every kind of bad input gets 400 (or 413) in the API's `{code, message, hint, request_id}`
shape.

Against a real `plumb serve`: uploaded YAML that is an alias bomb or nests too deep, JSON that
does not parse, a chunked body over the limit, a timestamp without a time zone, a recipe that
names a manifest folder outside the recipe data. None of it is a 5xx; the server serves on.
"""

from __future__ import annotations

from itertools import pairwise

import httpx
import pytest
from conftest import READ_TOKEN

pytestmark = pytest.mark.integration

READ = {"Authorization": f"Bearer {READ_TOKEN}"}
# 9 levels of 9 aliases: 387 million strings once expanded, from under 500 bytes.
BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in pairwise("abcdefghi")
)


def shaped(resp: httpx.Response, status: int, code: str) -> dict:
    """The body, once it is the API's error shape with this status and code."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json", resp.text
    body = resp.json()
    assert set(body) == {"code", "message", "hint", "request_id"}, body
    assert body["code"] == code and body["message"], body
    assert body["request_id"] == resp.headers["x-request-id"], body
    return body


def post(aggregator, path: str, json=None, content=None) -> httpx.Response:
    """POST as the read token; `content` is sent as JSON text."""
    headers = {**READ, "content-type": "application/json"}
    return httpx.post(
        aggregator.url + path, json=json, content=content, headers=headers, timeout=10
    )


def test_a_yaml_alias_bomb_as_a_recipe_is_refused_and_the_server_serves_on(aggregator):
    assert len(BOMB) < 500
    body = shaped(post(aggregator, "/v1/bundles", json={"recipe": BOMB}), 413, "too_large")
    assert "aliases" in body["message"]
    # The same document as JSON (the aliases already expanded by the client would be 9**9
    # strings; a few levels of it are enough to pass the node limit).
    wide: list = ["lol"] * 60
    for _ in range(3):
        wide = [wide] * 60
    shaped(post(aggregator, "/v1/bundles", json={"recipe": {"a": wide}}), 413, "too_large")
    assert aggregator.get("/healthz").status_code == 200


def test_deeply_nested_yaml_and_json_recipes_are_400(aggregator):
    deep_yaml = "criteria: " + "[" * 5000 + "]" * 5000
    shaped(post(aggregator, "/v1/bundles", json={"recipe": deep_yaml}), 400, "invalid_input")
    deep_json = '{"recipe": ' + '{"a": ' * 900 + "1" + "}" * 900 + "}"
    shaped(post(aggregator, "/v1/bundles", content=deep_json), 400, "invalid_input")


def test_malformed_json_is_400_in_the_api_shape(aggregator):
    for body in (b'{"criteria": ', b"\xff\xfe", b"[1, 2"):
        shaped(post(aggregator, "/v1/recipe", content=body), 400, "invalid_input")


def test_a_chunked_body_over_the_limit_is_413_in_the_api_shape(aggregator):
    def chunks():
        for _ in range(3):
            yield b" " * (512 * 1024)  # 1.5 MiB in all, over the 1 MiB default

    shaped(post(aggregator, "/v1/recipe", content=chunks()), 413, "too_large")


def test_a_timestamp_without_a_time_zone_is_400(aggregator):
    naive = "2026-01-01T00:00:00"
    for path in ("/v1/nodes/any-node/history", "/v1/drift"):
        body = shaped(aggregator.get(path, since=naive), 400, "invalid_input")
        assert "since" in body["message"]
    # With a zone it is a lookup like any other.
    resp = aggregator.get("/v1/drift", since=naive + "Z")
    assert resp.status_code == 200, resp.text


def test_a_recipe_naming_a_manifest_folder_outside_the_data_is_400(aggregator):
    criteria = {"service": "eks", "accelerator": "h100", "intent": "training"}
    recipe = post(aggregator, "/v1/recipe", json={"criteria": criteria}).json()
    recipe.pop("content_hash")
    for source in ("../../../etc", "/etc", "no-such-folder"):
        recipe["components"] = [
            {**c, "type": "manifest", "source": source} if c["name"] == "cert-manager" else c
            for c in recipe["components"]
        ]
        body = shaped(
            post(aggregator, "/v1/bundles", json={"recipe": recipe}), 400, "invalid_input"
        )
        assert "manifest source" in body["message"] and "/recipes" not in body["message"]


def test_unknown_routes_and_methods_answer_in_the_api_shape(aggregator):
    shaped(aggregator.get("/v1/no-such-route"), 404, "not_found")
    shaped(httpx.delete(aggregator.url + "/v1/nodes", timeout=10), 405, "invalid_input")
