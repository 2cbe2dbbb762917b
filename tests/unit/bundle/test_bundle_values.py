"""--set-json, --set-file, --nodes and --storage-class: where each lands and what it refuses."""

from __future__ import annotations

import pytest
import yaml

from plumb.aggregator.bundle import BundleError, BundleOptions

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def values(bundle, component: str) -> dict:
    path = next(p for p in bundle.files if p.endswith(f"-{component}/values.yaml"))
    return yaml.safe_load(bundle.files[path])


def test_set_json_deep_merges_a_map_into_the_map_there(make_bundle):
    # The recipe's toolkit operand sets env RUNTIME_CONFIG_SOURCE=file (recipes/registry.yaml).
    bundle = make_bundle(set_json=['gpu-operator:toolkit={"env": {"CONTAINERD_SOCKET": "/x"}}'])
    assert values(bundle, "gpu-operator")["toolkit"]["env"] == {
        "RUNTIME_CONFIG_SOURCE": "file",
        "CONTAINERD_SOCKET": "/x",
    }


def test_set_json_replaces_a_list_whole(make_bundle):
    bundle = make_bundle(
        accelerated_tolerations=["nvidia.com/gpu:NoSchedule"],
        set_json=['gpu-operator:daemonsets.tolerations=[{"operator": "Exists"}]'],
    )
    assert values(bundle, "gpu-operator")["daemonsets"]["tolerations"] == [{"operator": "Exists"}]


def test_set_json_may_add_a_last_key_and_any_json_type(make_bundle):
    bundle = make_bundle(
        set_json=[
            'gpu-operator:toolkit.extra={"a": [1, 2.5, true, null]}',
            "gpu-operator:toolkit.count=3",
        ]
    )
    toolkit = values(bundle, "gpu-operator")["toolkit"]
    assert toolkit["extra"] == {"a": [1, 2.5, True, None]} and toolkit["count"] == 3


def test_set_json_on_an_operand_lands_in_its_parent_chart(make_bundle):
    bundle = make_bundle(set_json=['container-toolkit:env={"A": "b"}'])
    assert values(bundle, "gpu-operator")["toolkit"]["env"] == {
        "RUNTIME_CONFIG_SOURCE": "file",
        "A": "b",
    }


def test_set_json_through_a_map_that_does_not_exist_is_rejected_naming_the_keys(make_bundle):
    with pytest.raises(BundleError, match="gpu-operator has no map 'toolkitt'") as info:
        make_bundle(set_json=['gpu-operator:toolkitt.env={"A": "b"}'])
    assert "toolkit" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu-operator:mig={strategy: single}", "the value is not JSON"),
        ("gpu-operator:mig=", "the value is not JSON"),
        ('gpu-operator={"a": 1}', "expected component:path=value"),
        ("gpu-operator:a..b=1", "empty key"),
        ("gpu-operator:mig=" + "[" * 100_000, "nests too deeply"),
    ],
)
def test_bad_set_json_is_rejected_saying_why(text, message):
    with pytest.raises(BundleError, match=message):
        BundleOptions.parse(set_json=[text])


def test_set_file_puts_the_file_text_at_the_path(make_bundle):
    text = "[plugins]\n  enabled = true\n"
    bundle = make_bundle(set_file={"gpu-operator:toolkit.config": text})
    assert values(bundle, "gpu-operator")["toolkit"]["config"] == text


def test_overrides_apply_in_helms_order_json_then_set_then_file(make_bundle):
    # Helm merges --set-json, then --set, then --set-file: the later flag wins a shared path.
    bundle = make_bundle(
        set_json=['gpu-operator:mig={"strategy": "mixed"}'],
        set=["gpu-operator:mig.strategy=single"],
    )
    assert values(bundle, "gpu-operator")["mig"]["strategy"] == "single"
    bundle = make_bundle(
        set=["gpu-operator:mig.strategy=single"], set_file={"gpu-operator:mig.strategy": "none"}
    )
    assert values(bundle, "gpu-operator")["mig"]["strategy"] == "none"


def test_set_file_on_a_component_not_in_the_recipe_is_rejected(make_bundle):
    with pytest.raises(BundleError, match="--set-file aws-efa:config=<file, 2 bytes>: component"):
        make_bundle(set_file={"aws-efa:config": "x\n"})


def test_nodes_go_to_the_node_count_paths_as_a_number(make_bundle):
    # recipes/registry.yaml: nodewright-operator takes estimatedNodeCount, as in AICR's registry.
    assert values(make_bundle(nodes=16), "nodewright-operator")["estimatedNodeCount"] == 16
    assert "estimatedNodeCount" not in values(make_bundle(), "nodewright-operator")
    assert "estimatedNodeCount" not in values(make_bundle(nodes=16), "gpu-operator")


def test_storage_class_goes_to_the_storage_class_paths(make_bundle):
    got = values(make_bundle(storage_class="premium-rwo"), "kube-prometheus-stack")
    spec = got["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert spec == {"storageClassName": "premium-rwo"}
    assert "storageSpec" not in (
        values(make_bundle(), "kube-prometheus-stack").get("prometheus", {}).get("prometheusSpec")
        or {}
    )


@pytest.mark.parametrize("name", ["Premium_RWO", "-gp3", "a" * 254, ""])
def test_a_storage_class_that_is_no_kubernetes_name_is_rejected(name):
    with pytest.raises(BundleError, match="is not a StorageClass name"):
        BundleOptions.parse(storage_class=name)


def test_negative_nodes_are_rejected():
    with pytest.raises(BundleError, match="nodes must be 0"):
        BundleOptions.parse(nodes=-1)


def test_the_readme_lists_every_override(make_bundle):
    bundle = make_bundle(
        set=["gpu-operator:mig.strategy=single"],
        set_json=['gpu-operator:toolkit={"env": {"B": "2", "A": "1"}}'],
        set_file={"gpu-operator:toolkit.config": "héllo\n"},
        nodes=4,
        storage_class="gp3",
    )
    readme = bundle.files["README.md"].decode()
    assert (
        '- `--set-json gpu-operator:toolkit={"env":{"A":"1","B":"2"}}`\n'
        "- `--set gpu-operator:mig.strategy=single`\n"
        "- `--set-file gpu-operator:toolkit.config=<file, 7 bytes>`\n"
        "- `--nodes 4`\n"
        "- `--storage-class gp3`\n"
    ) in readme
