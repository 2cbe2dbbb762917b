"""deploy.sh and undeploy.sh pass ``bash -n`` and shellcheck, and --dry-run only prints."""

from __future__ import annotations

import shutil
import subprocess

import pytest

SCRIPTS = ("deploy.sh", "undeploy.sh")


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_parse_with_bash_n(make_bundle, tmp_path, recipe, script):
    make_bundle(recipe, "helm").write(tmp_path)
    subprocess.run(["bash", "-n", str(tmp_path / script)], check=True)


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_pass_shellcheck(make_bundle, tmp_path, recipe, script):
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (Debian: apt-get install -y shellcheck)")
    make_bundle(recipe, "helm").write(tmp_path)
    run = subprocess.run(
        ["shellcheck", "--severity=style", str(tmp_path / script)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout


def test_dry_run_prints_every_helm_command_and_runs_none(make_bundle, recipes, tmp_path):
    bundle = make_bundle("gke-a100-cos-training", "helm")
    bundle.write(tmp_path)
    env = {"PATH": "/usr/bin:/bin"}  # no helm on this PATH: a real call would fail
    run = subprocess.run(
        [str(tmp_path / "deploy.sh"), "--dry-run"], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    installs = [line for line in run.stdout.splitlines() if line.startswith("+ helm upgrade")]
    assert [line.split()[4] for line in installs] == list(
        recipes["gke-a100-cos-training"].deployment_order
    )
    assert "--version v26.7.0" in next(line for line in installs if " gpu-operator " in line)
    undo = subprocess.run(
        [str(tmp_path / "undeploy.sh"), "--dry-run"], capture_output=True, text=True, env=env
    )
    assert undo.returncode == 0 and undo.stdout.count("+ helm uninstall") == len(installs)


def test_unknown_script_option_exits_2(make_bundle, tmp_path):
    make_bundle("eks-h100-training", "helm").write(tmp_path)
    run = subprocess.run([str(tmp_path / "deploy.sh"), "--bogus"], capture_output=True, text=True)
    assert run.returncode == 2 and "unknown option" in run.stderr
