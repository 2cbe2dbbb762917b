"""Loading recipes: the repository's data is valid, and broken files fail naming file and key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from plumb.aggregator.recipes import RecipeError, load_catalog
from plumb.aggregator.recipes.catalog import default_root


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    root = tmp_path / "recipes"
    shutil.copytree(default_root(), root)
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def load_error(root: Path) -> str:
    with pytest.raises(RecipeError) as caught:
        load_catalog(root)
    return str(caught.value)


def test_the_repository_catalog_loads_with_every_required_component(catalog):
    required = {
        "gpu-operator", "driver", "container-toolkit", "device-plugin", "dcgm-exporter", "nfd",
        "network-operator", "cert-manager", "kube-prometheus-stack", "nvsentinel", "dra-driver",
        "kai-scheduler", "kubeflow-trainer", "dynamo-platform", "aws-efa", "aws-ebs-csi",
    }  # fmt: skip
    assert required <= set(catalog.registry)
    assert {"eks", "gke", "aks", "oke", "kind", "on-prem"} <= set(catalog.overlays)
    assert {"h100", "h200", "b200", "gb200", "a100", "l40s", "l4"} <= set(catalog.overlays)


def test_every_knowledge_row_names_its_source(catalog):
    rows = [
        *catalog.cuda_driver.values(),
        *catalog.branches.values(),
        *catalog.gpus,
        *catalog.known_bad,
    ]
    assert rows and all(len(r.source) >= 8 for r in rows)


def test_default_root_is_the_repository_recipes_dir():
    assert (default_root() / "registry.yaml").is_file()


def test_bad_yaml_names_file_and_line(recipes):
    edit(recipes / "overlays" / "eks.yaml", "criteria: {service: eks}", "criteria: {service: eks")
    message = load_error(recipes)
    assert "overlays/eks.yaml:" in message and "invalid YAML" in message


def test_unknown_key_names_file_line_and_key(recipes):
    edit(recipes / "overlays" / "gke-cos.yaml", "    enabled: false", "    enabeld: false")
    message = load_error(recipes)
    line = next(
        i + 1
        for i, text in enumerate((recipes / "overlays" / "gke-cos.yaml").read_text().splitlines())
        if "enabeld" in text
    )
    assert f"overlays/gke-cos.yaml:{line}: components[0].enabeld: Extra inputs" in message


def test_unknown_component_names_file_and_key(recipes):
    edit(recipes / "overlays" / "eks.yaml", "name: aws-efa", "name: aws-efaa")
    message = load_error(recipes)
    assert "overlays/eks.yaml:" in message
    assert "components[1].name: unknown component 'aws-efaa'" in message


def test_unknown_dependency_names_file_and_key(recipes):
    edit(recipes / "registry.yaml", "dependencies: [nfd]", "dependencies: [nfdd]")
    assert "registry.yaml:" in (message := load_error(recipes))
    assert "components[0].dependencies[0]: unknown component 'nfdd'" in message


def test_dependency_cycle_names_the_cycle(recipes):
    edit(
        recipes / "overlays" / "eks.yaml",
        "  - name: aws-efa\n",
        "  - name: aws-efa\n  - name: nfd\n    dependencies: [gpu-operator]\n",
    )
    message = load_error(recipes)
    assert "overlays/eks.yaml:" in message
    assert "dependency cycle: gpu-operator -> nfd -> gpu-operator" in message


def test_unknown_overlay_parent_is_named(recipes):
    edit(recipes / "overlays" / "eks-training.yaml", "base: eks", "base: ekss")
    assert "overlays/eks-training.yaml:4: base: unknown overlay parent 'ekss'" in load_error(
        recipes
    )


def test_unknown_criteria_value_lists_the_allowed_ones(recipes):
    edit(recipes / "overlays" / "eks.yaml", "service: eks", "service: eksx")
    message = load_error(recipes)
    assert "criteria.service: unknown service 'eksx'; allowed:" in message and "gke" in message


def test_a_child_must_narrow_its_parent_criteria(recipes):
    edit(recipes / "overlays" / "gke-cos.yaml", "os: cos", "os: ubuntu")
    message = load_error(recipes)
    assert "gke-cos-training.yaml" in message and "does not narrow parent 'gke-cos'" in message


def test_unknown_fact_in_a_constraint_is_rejected(recipes):
    edit(recipes / "overlays" / "aks.yaml", "fact: k8s.version", "fact: k8s.versoin")
    assert "overlays/aks.yaml:" in (message := load_error(recipes))
    assert "constraints[0].fact" in message and "unknown fact 'k8s.versoin'" in message


def test_knowledge_row_without_source_is_rejected(recipes):
    path = recipes / "knowledge" / "known_bad.yaml"
    edit(
        path, "    source: https://cos.googlesource.com", "    sauce: https://cos.googlesource.com"
    )
    message = load_error(recipes)
    assert "knowledge/known_bad.yaml:" in message and "rows[0].source: Field required" in message


def test_every_problem_is_reported_at_once(recipes):
    edit(recipes / "overlays" / "eks.yaml", "criteria: {service: eks}", "criteria: {service: 1")
    edit(recipes / "overlays" / "aks.yaml", "fact: k8s.version", "fact: k8s.versoin")
    message = load_error(recipes)
    assert "eks.yaml" in message and "aks.yaml" in message


def test_a_value_of_the_wrong_type_names_file_line_and_key(recipes):
    edit(recipes / "registry.yaml", "dependencies: [nfd]", "dependencies: 7")
    message = load_error(recipes)
    assert "registry.yaml:" in message
    assert "components[0].dependencies: Input should be a valid tuple" in message


def test_a_file_that_is_not_utf8_names_the_file(recipes):
    path = recipes / "knowledge" / "gpus.yaml"
    path.write_bytes(path.read_bytes() + "# caf\xe9\n".encode("latin-1"))
    message = load_error(recipes)
    assert "knowledge/gpus.yaml:1: (file): not UTF-8 text" in message
    assert "save it as UTF-8" in message


def test_a_knowledge_text_with_an_unknown_placeholder_names_file_key_and_the_names(recipes):
    path = recipes / "drift.yaml"
    edit(path, "upgrade the driver to >= {min_driver}", "upgrade the driver to >= {minimum}")
    message = load_error(recipes)
    assert "drift.yaml:" in message
    assert "knowledge.cases.gpu_below_minimum: Value error, remediation: unknown placeholder" in (
        message
    )
    assert "{minimum}" in message and "{min_driver}" in message  # what it may use instead


def test_a_rowless_knowledge_case_without_a_source_is_rejected(recipes):
    path = recipes / "drift.yaml"
    edit(path, "      source: https://github.com/NVIDIA/gpu-operator/issues/544\n", "")
    message = load_error(recipes)
    assert "knowledge.cases.fabric_manager_mismatch: Value error, source:" in message


def test_a_knowledge_case_that_cites_its_row_takes_no_source_of_its_own(recipes):
    path = recipes / "drift.yaml"
    edit(
        path,
        "      remediation: move to a supported production or long-term branch\n",
        "      remediation: move to a supported production or long-term branch\n"
        "      source: somewhere\n",
    )
    message = load_error(recipes)
    assert "knowledge.cases.branch_past_eol: Value error, source:" in message


def test_a_platform_health_operator_must_be_one_of_the_mixins_components(recipes):
    edit(recipes / "mixins" / "platform-nim.yaml", "operators: [k8s-nim-operator]",
         "operators: [kubeflow-trainer]")  # fmt: skip
    message = load_error(recipes)
    assert "platform-nim.yaml" in message
    assert "mixins/platform-nim.yaml:17: health.operators[0]:" in message
    assert "operator 'kubeflow-trainer' is not one of this mixin's components" in message


def test_every_platform_mixin_says_what_its_health_check_wants(catalog):
    platforms = {"kubeflow", "dynamo", "nim", "slurm"}
    for platform in platforms:
        health = catalog.mixins[f"platform-{platform}"].health
        assert health is not None and health.operators and health.crds, platform
