"""scripts/gpu-check.sh's comparison: a real capture against its own replay agrees, and a
fact that differs is printed on the side it belongs to."""

from __future__ import annotations

import json
from pathlib import Path

from plumb import tree
from plumb.agent.gpucheck import compare, load_facts, main
from plumb.agent.main import make_node
from plumb.agent.settings import AgentSettings

CAPTURE = Path(__file__).parents[2] / "data" / "real" / "qx-l40s.xml"


def once(tmp_path: Path, name: str) -> Path:
    """What `plumb-agent --simulate CAPTURE --once` writes, to a file."""
    settings = AgentSettings(simulate=str(CAPTURE), sim_workdir=tmp_path / f"sim-{name}")
    local = make_node(settings)
    node, collect = local.name, local.collect
    out = tmp_path / f"{name}.json"
    out.write_text(json.dumps({"node_name": node, "facts": tree.nest(collect())}))
    return out


def test_a_capture_agrees_with_its_own_replay(tmp_path: Path, capsys) -> None:
    a, b = once(tmp_path, "a"), once(tmp_path, "b")
    assert compare(load_facts(a), load_facts(b)) == ([], [])
    assert main(["compare", str(a), str(b)]) == 0
    assert "== 0 fact(s) the capture carries differ" in capsys.readouterr().out


def test_a_fact_that_differs_is_printed_where_it_belongs(tmp_path: Path) -> None:
    replayed = load_facts(once(tmp_path, "a"))
    real = dict(replayed)
    # qx-l40s.xml: driver 595.91.07; the capture has no host files (not_supported).
    assert replayed["driver.driver_version"]["value"] == "595.91.07"
    real["driver.driver_version"] = {"status": "ok", "value": "595.91.08"}
    assert replayed["host.kernel"]["status"] == "not_supported"
    real["host.kernel"] = {"status": "ok", "value": "6.8.0-1024-aws"}
    carried, lacking = compare(replayed, real)
    assert carried == ['driver.driver_version: "595.91.07" -> "595.91.08"']
    assert lacking == ['host.kernel: not_supported -> "6.8.0-1024-aws"']
