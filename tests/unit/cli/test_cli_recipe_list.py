"""`plumb recipe list` and `--data DIR` on `plumb recipe` / `plumb bundle`: local, no server."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from typer.testing import CliRunner

from plumb.aggregator.cli import app

EKS_WITHOUT_EFA = (
    "kind: Overlay\nname: eks\ndescription: EKS without EFA\ncriteria: {service: eks}\n"
    "components:\n  - name: aws-ebs-csi\n"
)


def _run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_recipe_list_shows_every_overlay_its_criteria_and_that_it_resolves() -> None:
    result = _run("recipe", "list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1].split() == ["OVERLAY", "CRITERIA", "MIXINS", "RESOLVES", "COMPONENTS"]
    slurm = next(line for line in lines if line.startswith("slurm "))
    # base's 11 charts (aicr.md §3.4: every non-OCP recipe) and Slinky's 3
    assert slurm.split() == ["slurm", "platform=slurm", "platform-slurm", "yes", "14"]
    assert "\x1b[" not in result.output  # plain when piped


def test_recipe_list_as_json_names_criteria_and_mixins() -> None:
    result = _run("recipe", "list", "-o", "json")
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert rows["h100-eks-ubuntu-training"]["criteria"] == {
        "service": "eks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
    }
    assert rows["h100-eks-ubuntu-training"]["mixins"] == ["os-ubuntu"]
    assert all(row["resolves"] for row in rows.values())
    assert rows["base"]["criteria"] == {} and rows["base"]["base"] is None


def test_recipe_with_data_resolves_here_with_the_folder_merged(tmp_path: Path) -> None:
    (tmp_path / "overlays").mkdir()
    (tmp_path / "overlays/eks.yaml").write_text(EKS_WITHOUT_EFA)
    result = _run("recipe", "--service", "eks", "--data", str(tmp_path), "-o", "json")
    assert result.exit_code == 0, result.output
    names = {c["name"] for c in json.loads(result.output)["components"]}
    assert "aws-ebs-csi" in names and "aws-efa" not in names


def test_recipe_with_bad_data_exits_2_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "overlays").mkdir()
    path = tmp_path / "overlays/eks.yaml"
    path.write_text(EKS_WITHOUT_EFA.replace("aws-ebs-csi", "nope"))
    result = _run("recipe", "list", "--data", str(tmp_path))
    assert result.exit_code == 2
    assert f"{path.as_posix()}:6: components[0].name: unknown component 'nope'" in result.output


def test_bundle_with_data_builds_here_from_the_merged_recipe(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "overlays").mkdir(parents=True)
    (data / "overlays/eks.yaml").write_text(EKS_WITHOUT_EFA)
    out = tmp_path / "b.tar.gz"
    result = _run("bundle", "-o", str(out), "--service", "eks", "--data", str(data))
    assert result.exit_code == 0, result.output
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert any("aws-ebs-csi" in n for n in names)
    assert not any("aws-efa" in n for n in names)
