"""`plumb baselines` over a hand-written GET /v1/baselines answer."""

from __future__ import annotations

import json

from conftest import FakeApi, run

H100 = {
    "model": "H100 SXM5", "gpus": 8, "fabric": "nvswitch", "check": "nccl-allreduce",
    "unit": "GB/s", "twins": 5, "median": 455.0, "spread": 5.0,
}  # fmt: skip
MATMUL = {**H100, "check": "matmul-bf16", "unit": "TFLOPS", "median": 702.5, "spread": 3.25}


def test_baselines_print_one_plain_line_per_group_and_check_when_piped(api: FakeApi) -> None:
    api.answers["/v1/baselines"] = [H100, MATMUL]
    assert run("baselines").splitlines() == [
        "2 baselines learned from the fleet",
        "MODEL       TOPOLOGY   FABRIC     FIGURE           TWINS   MEDIAN         SPREAD",
        "H100 SXM5   8 GPUs     nvswitch   nccl-allreduce   5       455 GB/s       ±5 GB/s",
        "H100 SXM5   8 GPUs     nvswitch   matmul-bf16      5       702.5 TFLOPS   ±3.25 TFLOPS",
    ]
    assert api.calls == [("/v1/baselines", {})]


def test_baselines_as_json_are_the_api_answer(api: FakeApi) -> None:
    api.answers["/v1/baselines"] = [H100]
    assert json.loads(run("baselines", "-o", "json")) == [H100]


def test_no_baselines_yet_says_why(api: FakeApi) -> None:
    api.answers["/v1/baselines"] = []
    assert "none yet" in run("baselines")
