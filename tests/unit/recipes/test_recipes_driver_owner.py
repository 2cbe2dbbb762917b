"""Driver ownership per pool: who installs the driver decides whether the recipe's pin applies.

The GPU Operator labels a node `nvidia.com/gpu.deploy.driver=pre-installed` when its driver
container finds a host driver, and users label `=false` to keep it off a node (GPU Operator
docs); component discovery reports the operator as `cluster.components.gpu_operator.version`.
"""

from __future__ import annotations

from plumb.aggregator.recipes import Criteria, ResolutionCache, resolve
from plumb.facts import Reading

EKS_H100 = Criteria(service="eks", accelerator="h100", os="ubuntu")
OPERATOR = {"cluster.components.gpu_operator.version": Reading.ok("v26.7.0")}


def label(name: str, value: str) -> dict[str, Reading]:
    return {
        "cluster.labels[0].name": Reading.ok(name),
        "cluster.labels[0].value": Reading.ok(value),
    }


def owner(catalog, facts, criteria=EKS_H100, as_of=None, **kwargs) -> dict:
    return resolve(catalog, criteria, facts, as_of=as_of, **kwargs).to_dict()["driver_owner"]


def test_without_a_gpu_operator_the_host_owns_the_driver(catalog, make_facts, as_of):
    assert owner(catalog, make_facts(), as_of=as_of)["owner"] == "host"


def test_where_the_gpu_operator_runs_it_owns_the_driver(catalog, make_facts, as_of):
    got = owner(catalog, make_facts() | OPERATOR, as_of=as_of)
    assert (got["owner"], got["source"]) == ("operator", "facts")


def test_a_pre_installed_or_disabled_driver_label_gives_it_to_the_host(catalog, make_facts, as_of):
    for value in ("pre-installed", "false"):
        facts = make_facts() | OPERATOR | label("nvidia.com/gpu.deploy.driver", value)
        got = owner(catalog, facts, as_of=as_of)
        assert (got["owner"], got["source"]) == ("host", "facts")
        assert f"nvidia.com/gpu.deploy.driver={value}" in got["reason"]


def test_a_recipe_that_deploys_no_driver_gives_it_to_the_host(catalog, make_facts, as_of):
    # gke-cos disables the operator's driver: GKE's installer owns it.
    gke = Criteria(service="gke", accelerator="a100", os="cos")
    got = owner(catalog, make_facts(os_id="cos") | OPERATOR, gke, as_of=as_of)
    assert (got["owner"], got["source"]) == ("host", "recipe")


def test_configuration_overrides_the_facts_per_pool(catalog, make_facts, as_of):
    facts = make_facts() | OPERATOR
    got = owner(catalog, facts, as_of=as_of, driver_owners={"eks/h100/*": "host"})
    assert (got["owner"], got["source"]) == ("host", "configured")
    other = owner(catalog, facts, as_of=as_of, driver_owners={"gke/*": "host"})
    assert other["owner"] == "operator"
    cache = ResolutionCache(catalog, driver_owners={"eks/h100/ubuntu/any/any": "host"})
    assert cache.resolve(EKS_H100, facts, as_of=as_of).driver_owner.owner == "host"


def test_a_recipe_without_facts_says_the_operator_deploys_its_driver(catalog):
    got = resolve(catalog, EKS_H100).to_dict()["driver_owner"]
    assert (got["owner"], got["source"]) == ("operator", "recipe")


def test_on_openshift_the_cluster_policy_deploys_the_driver(catalog):
    # The ocp overlay turns the GPU Operator's Helm chart off; its ClusterPolicy
    # (gpu-operator-ocp) has the operator build the driver with the Driver Toolkit.
    got = resolve(catalog, Criteria(service="ocp", accelerator="h100")).to_dict()["driver_owner"]
    assert (got["owner"], got["source"]) == ("operator", "recipe")
