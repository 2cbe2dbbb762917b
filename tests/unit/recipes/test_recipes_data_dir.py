"""An external recipe folder (`--data DIR`) merged over the shipped recipes, AICR's way: a
same-named file replaces the shipped one, new files add, registry.yaml merges by component."""

from __future__ import annotations

from pathlib import Path

import pytest

from plumb.aggregator.recipes import Criteria, RecipeError, load_catalog, resolve


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_same_named_overlay_replaces_the_shipped_one(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "overlays/eks.yaml",
        "kind: Overlay\nname: eks\ndescription: EKS without EFA\ncriteria: {service: eks}\n"
        "components:\n  - name: aws-ebs-csi\n",
    )
    names = {
        c["name"] for c in resolve(load_catalog(data=tmp_path), Criteria(service="eks")).components
    }
    assert "aws-ebs-csi" in names and "aws-efa" not in names


def test_registry_entries_merge_by_name_and_new_overlays_add(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "registry.yaml",
        "kind: ComponentRegistry\ncomponents:\n"
        "  - {name: cert-manager, type: helm, description: cert-manager, source:"
        " https://charts.jetstack.io, chart: cert-manager, version: v1.20.4, namespace: cm}\n"
        "  - {name: gatekeeper, type: helm, description: OPA Gatekeeper, source:"
        " https://open-policy-agent.github.io/gatekeeper/charts, chart: gatekeeper,"
        " version: 3.22.2, namespace: gatekeeper-system}\n",
    )
    _write(
        tmp_path,
        "overlays/kind-policy.yaml",
        "kind: Overlay\nname: kind-policy\ndescription: kind with policy\nbase: kind\n"
        "criteria: {service: kind, intent: inference}\ncomponents:\n  - name: gatekeeper\n",
    )
    catalog = load_catalog(data=tmp_path)
    r = resolve(catalog, Criteria(service="kind", intent="inference"))
    assert r.component("cert-manager")["version"] == "v1.20.4"
    assert r.component("cert-manager")["namespace"] == "cm"
    assert r.component("gatekeeper")["version"] == "3.22.2"
    assert "kind-policy" in r.applied
    assert r.component("gpu-operator")["version"] == "v26.7.0"  # shipped entries stay
    assert catalog.data == tmp_path and catalog.digest != load_catalog().digest


def test_bad_data_names_the_users_file_and_key(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "overlays/eks.yaml",
        "kind: Overlay\nname: eks\ndescription: EKS\ncriteria: {service: eks}\n"
        "components:\n  - name: no-such-chart\n",
    )
    with pytest.raises(RecipeError) as caught:
        load_catalog(data=tmp_path)
    assert f"{path.as_posix()}:6: components[0].name: unknown component 'no-such-chart'" in str(
        caught.value
    )


def test_a_criteria_value_without_an_overlay_is_refused_at_load(tmp_path: Path) -> None:
    shipped = (Path(load_catalog().root) / "criteria.yaml").read_text()
    path = _write(
        tmp_path,
        "criteria.yaml",
        shipped.replace("service: [eks, gke, aks, oke, ocp, kind, on-prem]", "service: [eks, lke]"),
    )
    with pytest.raises(RecipeError) as caught:
        load_catalog(data=tmp_path)
    text = str(caught.value)
    assert f"{path.as_posix()}:" in text
    assert "service[1]: service 'lke' changes no recipe; add overlays/lke.yaml" in text


def test_an_overlay_that_changes_nothing_is_refused(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "overlays/kind.yaml",
        "kind: Overlay\nname: kind\ndescription: kind\ncriteria: {service: kind}\n",
    )
    with pytest.raises(RecipeError, match="overlays/kind.yaml:4: criteria: the overlay changes"):
        load_catalog(data=tmp_path)


def test_a_missing_data_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="recipe data folder not found"):
        load_catalog(data=tmp_path / "nope")
