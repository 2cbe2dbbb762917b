"""Matching, layering, merge, deployment order, exclusion, determinism, caching, inference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plumb.aggregator.recipes import (
    Criteria,
    CriteriaError,
    ResolutionCache,
    infer_criteria,
    resolve,
)
from plumb.aggregator.recipes.merge import Layer, merge
from plumb.aggregator.recipes.resolve import FALLBACK_WARNING
from plumb.aggregator.recipes.schema import ComponentPatch, Constraint

GKE_A100 = Criteria(service="gke", accelerator="a100", os="cos", intent="training")


def test_gke_a100_cos_training_layers_three_overlays_above_base_to_twelve_components(catalog):
    r = resolve(catalog, GKE_A100)
    chain = catalog.chain("a100-gke-cos-training")
    assert len(chain) - 1 >= 3 and set(chain) <= set(r.applied)
    assert r.applied[0] == "base"
    assert len(r.deployment_order) >= 12
    driver = r.component("gpu-operator")["values"]["driver"]
    assert driver["enabled"] is False  # GKE COS preinstalls the driver
    assert r.component("driver") is None and r.warnings == ()


def test_deployment_order_puts_dependencies_first(catalog):
    r = resolve(catalog, GKE_A100)
    position = {name: i for i, name in enumerate(r.deployment_order)}
    for name in r.deployment_order:
        for dep in r.component(name)["dependencies"]:
            assert position[dep] < position[name]


def test_a_query_any_matches_only_any_overlays(catalog):
    r = resolve(catalog, Criteria(service="eks"))
    assert "h100" not in r.applied and "eks-training" not in r.applied
    assert r.applied == ("base", "eks")


def test_unknown_criteria_fall_back_to_base_with_a_warning(catalog):
    r = resolve(catalog, Criteria())
    assert r.applied == ("base",) and FALLBACK_WARNING in r.warnings


def test_later_overlays_override_earlier_constraints_by_name(catalog):
    r = resolve(catalog, Criteria(service="eks", accelerator="h100", intent="training"))
    k8s = next(c for c in r.constraints if c["name"] == "k8s-version")
    assert k8s["check"] == "k8s.version >= 1.32.4" and k8s["from"] == "h100-eks-training"


def test_failing_constraints_exclude_an_overlay_with_the_reason(catalog, make_facts, as_of):
    facts = make_facts(os_version="22.04", kernel="5.15.0-1050-aws")
    criteria = Criteria(service="eks", accelerator="h100", os="ubuntu", intent="training")
    r = resolve(catalog, criteria, facts, as_of=as_of)
    reasons = dict(r.excluded)
    assert (
        "h100-eks-ubuntu-training" in reasons
        and "os.version = 22.04" in reasons["h100-eks-ubuntu-training"]
    )
    assert r.applied[-1] == "h100-eks-training"


def test_unknown_criteria_values_name_the_allowed_ones(catalog):
    with pytest.raises(CriteriaError, match=r"unknown accelerator 'x100'; allowed: any, a10, a100"):
        resolve(catalog, Criteria(accelerator="x100"))


def test_infer_criteria_from_facts(catalog, make_facts):
    assert infer_criteria(make_facts(), intent="training", catalog=catalog) == Criteria(
        service="eks", accelerator="h100", os="ubuntu", intent="training"
    )
    l4 = make_facts(
        gpu=None, pci="0x27B810DE", provider=None, instance_type="g2-standard-8", os_id="cos"
    )
    assert infer_criteria(l4, catalog=catalog) == Criteria(
        service="gke", accelerator="l4", os="cos"
    )
    odd = make_facts(gpu="NVIDIA Quantum Widget", pci="0xffff", provider=None, instance_type=None)
    assert infer_criteria(odd, catalog=catalog) == Criteria(
        service="on-prem", accelerator="any", os="ubuntu"
    )
    kind = make_facts(provider="kind")
    assert infer_criteria(kind, catalog=catalog).service == "kind"


def test_cache_resolves_a_pool_once(catalog, make_facts, as_of):
    cache = ResolutionCache(catalog, maxsize=4)
    criteria = infer_criteria(make_facts(), intent="training", catalog=catalog)
    first = cache.resolve(criteria, make_facts(), as_of=as_of)
    for i in range(20):
        facts = make_facts() | {
            "host.hostname": make_facts()["host.hostname"].__class__.ok(f"n{i}")
        }
        assert cache.resolve(criteria, facts, as_of=as_of) is first
    assert (cache.hits, cache.misses) == (20, 1)
    changed = cache.resolve(criteria, make_facts(driver="570.195.03"), as_of=as_of)
    assert changed.content_hash != first.content_hash and cache.misses == 2
    assert first.to_dict() == resolve(catalog, criteria, make_facts(), as_of=as_of).to_dict()


# Values whose keys keep one shape in every layer: "m*" keys hold mappings, "s*" scalars.
scalars = st.one_of(st.integers(-3, 3), st.booleans(), st.sampled_from(["a", "b"]))
values = st.recursive(
    st.dictionaries(st.sampled_from(["s1", "s2", "s3"]), scalars, max_size=3),
    lambda inner: st.dictionaries(st.sampled_from(["m1", "m2"]), inner, max_size=2).flatmap(
        lambda maps: st.dictionaries(st.sampled_from(["s1", "s2"]), scalars, max_size=2).map(
            lambda s: {**s, **maps}
        )
    ),
    max_leaves=8,
)
patches = st.builds(
    ComponentPatch,
    name=st.sampled_from(["gpu-operator", "nfd", "cert-manager"]),
    version=st.none() | st.sampled_from(["1.0", "2.0"]),
    enabled=st.none() | st.booleans(),
    values=st.none() | values,
    dependencies=st.none()
    | st.lists(st.sampled_from(["nfd", "cert-manager"]), max_size=2).map(tuple),
)
constraints = st.builds(
    Constraint,
    name=st.sampled_from(["k8s", "kernel"]),
    fact=st.just("k8s.version"),
    value=st.sampled_from([">= 1.30", ">= 1.32"]),
)
layers = st.builds(
    Layer.of, st.lists(patches, max_size=3).map(tuple), st.lists(constraints, max_size=2).map(tuple)
)


@given(layers, layers, layers)
def test_merge_is_associative(a, b, c):
    assert merge(merge(a, b), c) == merge(a, merge(b, c))


def test_merge_deep_merges_values_and_replaces_dependencies():
    a = Layer.of((ComponentPatch(name="nfd", values={"m": {"x": 1}}, dependencies=("a",)),), ())
    b = Layer.of((ComponentPatch(name="nfd", values={"m": {"y": 2}}, dependencies=("b",)),), ())
    merged = merge(a, b).components["nfd"]
    assert merged.values == {"m": {"x": 1, "y": 2}} and merged.dependencies == ("b",)


criteria_values = st.builds(
    Criteria,
    service=st.sampled_from(["any", "eks", "gke", "aks", "oke", "kind", "on-prem"]),
    accelerator=st.sampled_from(["any", "h100", "a100", "gb200", "l4", "l40s"]),
    os=st.sampled_from(["any", "ubuntu", "cos"]),
    intent=st.sampled_from(["any", "training", "inference"]),
    platform=st.sampled_from(["any", "kubeflow", "dynamo"]),
)


@given(
    criteria_values,
    st.sampled_from(["580.173.02", "550.54.15", "575.57.08"]),
    st.sampled_from(["22.04", "24.04"]),
    st.booleans(),
)
def test_resolution_is_deterministic(
    catalog, make_facts, as_of, criteria, driver, os_version, with_facts
):
    facts = make_facts(driver=driver, os_version=os_version) if with_facts else None
    one = resolve(catalog, criteria, facts, as_of=as_of)
    two = resolve(
        catalog,
        criteria,
        dict(reversed(list((facts or {}).items()))) if facts else None,
        as_of=as_of,
    )
    assert one.canonical_json == two.canonical_json and one.content_hash == two.content_hash
    assert one.content_hash == two.to_dict()["content_hash"]
