"""What-if over the real HTTP app, on a real agent's live facts: POST /v1/whatif with a read
token, its errors, and `plumb whatif`'s exit code for a CI gate.

The node replays dgx-h100.yaml: driver 580.173.02 with fabric manager 580.173.02, CUDA
runtime 12.9 (cuda_driver.yaml: driver >= 575.51.03, 525.60.13 under minor-version
compatibility). R570 ended 2026-02 (driver_branches.yaml) and the recipe wants >= 580
(overlays/base.yaml); R595 is a production branch to 2027-03.
"""

from __future__ import annotations

import subprocess

from conftest import BIN, READ_TOKEN, until


def _pool(aggregator) -> str:
    return until(lambda: (n := aggregator.node("h100-1")) and n["pool"], what="h100-1's pool")


def test_whatif_blocks_an_old_driver_and_passes_a_compatible_one(aggregator, start_agent):
    start_agent(aggregator, "h100-1", "dgx-h100")
    pool = _pool(aggregator)

    def ask(driver: str) -> dict:
        resp = aggregator.post(
            "/v1/whatif",
            token=READ_TOKEN,
            json={"components": {"driver": driver}, "pools": [pool]},
        )
        assert resp.status_code == 200, resp.text
        return resp.json()

    old = ask("570.195.03")
    assert old["verdict"] == "blocked" and old["plan"] == {"driver": "570.195.03"}
    ((answered_pool, (node,)),) = [(p["pool"], p["nodes"]) for p in old["pools"]]
    assert answered_pool == pool and node["node"] == "h100-1" and node["verdict"] == "blocked"
    assert node["changes"] == [
        {"component": "driver", "current": "580.173.02", "planned": "570.195.03"}
    ]
    verdicts = {d["rule"]: d["verdict"] for d in node["decisions"]}
    assert verdicts == {
        "driver-branch-eol": "blocked",
        "constraint:driver-minimum": "blocked",
        "cuda-runtime-driver": "review",  # 570.195.03 < 575.51.03 but >= 525.60.13
    }
    cuda = next(d for d in node["decisions"] if d["rule"] == "cuda-runtime-driver")
    assert "CUDA runtime 12.9" in cuda["reason"] and "575.51.03" in cuda["fix"]
    assert cuda["source"].startswith("https://docs.nvidia.com/cuda/")

    new = ask("595.45.04")
    assert new["verdict"] == "safe"
    assert new["pools"][0]["nodes"][0]["decisions"] == []  # fabric manager moves with it

    # The live node is untouched: still on its driver, no finding opened by asking.
    assert aggregator.node("h100-1")["driver_version"] == "580.173.02"
    assert aggregator.json("/v1/drift", node="h100-1") == []

    gate = [str(BIN / "plumb"), "whatif", "--pool", pool, "--server", aggregator.url]
    blocked = subprocess.run([*gate, "--driver", "570.195.03"], capture_output=True, text=True)
    assert blocked.returncode == 1, blocked.stderr
    assert blocked.stdout.startswith("what-if driver 570.195.03: blocked\n")
    passed = subprocess.run([*gate, "--driver", "595.45.04"], capture_output=True, text=True)
    assert passed.returncode == 0, passed.stderr


def test_whatif_refuses_a_bad_plan_in_the_error_shape(aggregator, start_agent):
    start_agent(aggregator, "h100-1", "dgx-h100")
    pool = _pool(aggregator)
    cases = [
        ({"components": {"firmware": "1.0"}}, 400, "invalid_input", "unknown component"),
        ({"components": {"driver": "latest"}}, 400, "invalid_input", "is not a version"),
        ({"components": {}}, 400, "invalid_input", "names no component"),
        (
            {"components": {"driver": "595.45.04"}, "pools": ["gke/l4/cos/any/any"]},
            404,
            "not_found",
            "no node is in pool 'gke/l4/cos/any/any'",
        ),
    ]
    for body, status, code, said in cases:
        resp = aggregator.post("/v1/whatif", token=READ_TOKEN, json=body)
        problem = resp.json()
        assert (resp.status_code, problem["code"]) == (status, code), problem
        assert said in problem["message"] and problem["hint"]
    unknown_pool = aggregator.post(
        "/v1/whatif", token=READ_TOKEN, json={"components": {"nccl": "2.28.3"}, "pools": ["x"]}
    ).json()
    assert pool in unknown_pool["hint"]  # the hint lists the pools there are
