"""Names from a request never become paths outside a bundle or outside the served files."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import PurePosixPath

import httpx
import pytest
import yaml
from conftest import until

pytestmark = pytest.mark.integration

EVIL = ["../../../tmp/evil", "/etc/passwd", "gpu-operator/../../x", "..%2F..%2Fetc", "..\\..\\x"]


def post(aggregator, **body) -> httpx.Response:
    return httpx.post(aggregator.url + "/v1/bundles", json=body, timeout=60)


def entry_names(data: bytes, fmt: str) -> list[str]:
    if fmt == "zip":
        return zipfile.ZipFile(io.BytesIO(data)).namelist()
    return tarfile.open(fileobj=io.BytesIO(data)).getnames()


def test_bundles_refuse_names_that_would_leave_the_bundle(aggregator, start_agent):
    start_agent(aggregator, "traversal-node", "hgx-a100")
    until(lambda: aggregator.node("traversal-node"), what="node traversal-node")
    good = post(aggregator, node="traversal-node")
    assert good.status_code == 200, good.text
    member = next(n for n in entry_names(good.content, "tar.gz") if n.endswith("/recipe.yaml"))
    recipe = yaml.safe_load(
        tarfile.open(fileobj=io.BytesIO(good.content)).extractfile(member).read()
    )
    recipe.pop("content_hash")

    for name in EVIL:
        # A component's name becomes a folder of the bundle: refused by its pattern.
        doc = {**recipe, "components": [{**recipe["components"][0], "name": name}]}
        resp = post(aggregator, recipe=doc)
        assert resp.status_code == 400, (name, resp.text)
        assert "components.0.name" in resp.json()["message"]
        # A node name only looks a node up.
        resp = post(aggregator, node=name)
        assert resp.status_code == 404 and "no node named" in resp.json()["message"]
        # --set names a component, never a file.
        resp = post(aggregator, node="traversal-node", set=[f"{name}:driver.version=1"])
        assert resp.status_code == 400, (name, resp.text)


def test_every_bundle_entry_stays_under_its_one_folder(aggregator, start_agent):
    start_agent(aggregator, "entries-node", "hgx-a100")
    until(lambda: aggregator.node("entries-node"), what="node entries-node")
    for fmt in ("tar.gz", "zip"):
        resp = post(aggregator, node="entries-node", format=fmt)
        assert resp.status_code == 200, resp.text
        names = entry_names(resp.content, fmt)
        assert len({PurePosixPath(n).parts[0] for n in names}) == 1
        for name in names:
            assert not name.startswith("/") and ".." not in PurePosixPath(name).parts, name
        disposition = resp.headers["Content-Disposition"]
        assert "/" not in disposition and ".." not in disposition


URL_PATHS = [
    "/static/..%2F..%2Fsettings.py",
    "/static/%2e%2e%2fserver.py",
    "/static/../api/app.py",
    "/static/%2E%2E/%2E%2E/pyproject.toml",
    "/v1/nodes/..%2F..%2Fetc%2Fpasswd",
    "/v1/nodes/%2e%2e/history",
]


def test_encoded_traversal_in_a_url_reaches_no_file(aggregator):
    for path in URL_PATHS:
        resp = httpx.get(aggregator.url + path, timeout=10)
        assert resp.status_code == 404, (path, resp.text)
        assert "import" not in resp.text and "root:" not in resp.text, path
