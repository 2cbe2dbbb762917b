"""NCCL all-reduce between two GPU nodes: `nccl-allreduce-net` (over the network fabric) and
`nccl-allreduce-nvls` (NVLink SHARP, only where the nodes' facts show a fabric that has it).

Two nodes of one twin group (GPU model, GPU count, fabric: validation/stack.py) are chosen
from the run's nodes, so the figure is graded against the mark of that hardware. The
workload is plain batch/v1 and core/v1, no MPI operator: a per-run Ed25519 key in a Secret, a
headless Service giving both pods DNS names (hostname + subdomain), and two one-pod Jobs pinned
to the two nodes (node affinity on metadata.name, so the scheduler still checks their GPUs),
each asking for all of its node's GPUs. Both pods start sshd; the launcher runs the image's
`mpirun` over ssh across both, and the catalog's script and command say exactly what runs.
Two Jobs rather than one Indexed Job: Indexed Jobs need Kubernetes 1.22+, the other checks
ask only for 1.20's APIs, and the nodes are chosen here anyway. The launcher's log is parsed
with plumb.nccltests; its bus bandwidth at the largest size is graded against the check's
minima for that GPU model and fabric. Everything is deleted at the end, also on failure,
timeout or cancellation.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from kubernetes import client

from plumb import nccltests
from plumb.aggregator.recipes import Catalog
from plumb.aggregator.recipes.check_catalog import CheckDef, Minimum
from plumb.aggregator.state.views import gpu_views
from plumb.aggregator.validation.kube import (
    CHECK_LABEL,
    GPU_RESOURCE,
    Kube,
    Verdict,
    delete,
    delete_job,
)
from plumb.aggregator.validation.stack import stack_of
from plumb.facts import Reading

__all__ = ["NCCL_PAIR", "Pair", "RunNodes", "choose_pair", "grade", "manifests", "nccl_pair"]

log = logging.getLogger(__name__)

PAIR_LABEL = "plumb.dev/nccl-pair"  # selects both pods of one run (the Service's selector)
ROLE_LABEL = "plumb.dev/role"
ROLES = ("launcher", "worker")
SSH_MOUNT = "/etc/plumb-ssh"
LOG_TAIL_LINES = 20
# Reads a pod's log: (namespace, pod) -> text. The API's pods/log by default; tests feed a
# captured nccl-tests log, as a control plane without kubelets has no logs to serve.
LogReader = Callable[[str, str], Awaitable[str]]


@dataclass(frozen=True)
class RunNodes:
    """The run's nodes the pair is chosen from: each node's facts, and the catalog reading them."""

    catalog: Catalog
    facts: Mapping[str, Mapping[str, Reading]]


@dataclass(frozen=True)
class Pair:
    """Two twin nodes and what grades them: GPU model, GPUs per node, fabric."""

    nodes: tuple[str, str]
    model: str
    gpus: int
    fabric: str


def _architecture(facts: Mapping[str, Reading], catalog: Catalog) -> str | None:
    first = next(iter(gpu_views(facts)), None)
    row = catalog.identify_gpu(first.text("name"), first.text("pci_device_id")) if first else None
    return row.architecture if row else None


def _domain(facts: Mapping[str, Reading]) -> str | None:
    """The NVLink domain of the node's first GPU (GB200 NVL: cluster uuid and clique)."""
    first = next(iter(gpu_views(facts)), None)
    if first is None or not first.text("fabric_cluster_uuid"):
        return None
    return f"{first.text('fabric_cluster_uuid')}/{first.text('fabric_clique_id') or ''}"


def _words(check: CheckDef, key: str) -> tuple[str, ...]:
    return tuple(str(check.parameters.get(key, "")).split())


def choose_pair(check: CheckDef, nodes: RunNodes) -> Pair | str:
    """Two nodes of one twin group (for NVLS: with an NVLS fabric, in one NVLink domain where
    the facts name one), the first such group by name; else why there are none."""
    fabrics, architectures = _words(check, "fabrics"), _words(check, "architectures")
    groups: dict[tuple, list[str]] = {}
    unfit: list[str] = []
    for name in sorted(nodes.facts):
        facts = nodes.facts[name]
        stack = stack_of(facts, nodes.catalog)
        if stack is None:
            continue
        arch = _architecture(facts, nodes.catalog)
        if fabrics and stack.fabric not in fabrics or architectures and arch not in architectures:
            unfit.append(
                f"{name} ({stack.model}, {arch or 'unknown architecture'}, {stack.fabric})"
            )
            continue
        domain = _domain(facts) if fabrics else None
        groups.setdefault((*stack.group, domain), []).append(name)
    for (model, gpus, fabric, _), names in sorted(groups.items(), key=lambda kv: kv[1][0]):
        if len(names) >= 2:
            return Pair((names[0], names[1]), model, gpus, fabric)
    if unfit and not groups:
        need = f"fabric {' or '.join(fabrics)} on {' or '.join(architectures)} GPUs"
        return f"no node of the run has an NVLS fabric ({need}): " + "; ".join(unfit)
    if not groups:
        return "no GPU node of the run has reported facts"
    alone = "; ".join(f"{names[0]} ({m} x{g}, {f})" for (m, g, f, _), names in groups.items())
    return f"no two nodes of the run are twins (same GPU model, GPU count and fabric): {alone}"


# -- the workload -----------------------------------------------------------------------------


def _ssh_key() -> tuple[str, str]:
    """A fresh Ed25519 key pair (private in OpenSSH PEM, public in authorized_keys form)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, public.decode() + " plumb-nccl\n"


def manifests(
    name: str, check: CheckDef, pair: Pair, keys: tuple[str, str]
) -> tuple[client.V1Secret, client.V1Service, client.V1Job, client.V1Job]:
    """The Secret (ssh key), headless Service and the launcher's and worker's Jobs of one run.

    Parameters: `image`, `script` (run by both pods, branching on PLUMB_ROLE), `command` (the
    nccl-tests command the launcher runs across both), `ssh_port`, `resources` (extra
    `name=count` requests, e.g. RDMA devices), `capabilities`; every upper-case parameter
    is an environment variable of both pods (NCCL_*).
    """
    port = int(check.parameters.get("ssh_port", 2222))
    hosts = [f"{name}-{role}.{name}" for role in ROLES]
    base = {"app.kubernetes.io/managed-by": "plumb", CHECK_LABEL: check.id, PAIR_LABEL: name}
    meta = client.V1ObjectMeta(name=name, labels=base)
    private, public = keys
    secret = client.V1Secret(
        metadata=meta,
        type="Opaque",
        string_data={"id_ed25519": private, "authorized_keys": public},
    )
    service = client.V1Service(
        metadata=meta,
        spec=client.V1ServiceSpec(
            cluster_ip="None",
            selector={PAIR_LABEL: name},
            publish_not_ready_addresses=True,
            ports=[client.V1ServicePort(name="ssh", port=port, target_port=port)],
        ),
    )
    env = {
        "PLUMB_HOSTS": ",".join(f"{h}:{pair.gpus}" for h in hosts),
        "PLUMB_WORKER": hosts[1],
        "PLUMB_GPUS": str(pair.gpus),
        "PLUMB_NP": str(2 * pair.gpus),
        "PLUMB_SSH_PORT": str(port),
        "PLUMB_COMMAND": str(check.parameters["command"]),
        "PLUMB_TIMEOUT_S": f"{check.timeout_s:.0f}",
        **{k: str(v) for k, v in check.parameters.items() if k.isupper()},
    }
    limits = {GPU_RESOURCE: str(pair.gpus)}
    for item in _words(check, "resources"):
        resource, _, count = item.partition("=")
        limits[resource] = count
    jobs = []
    for role, node, host in zip(ROLES, pair.nodes, hosts, strict=True):
        labels = {**base, ROLE_LABEL: role}
        container = client.V1Container(
            name="nccl",
            image=str(check.parameters["image"]),
            command=["bash", "-c", str(check.parameters["script"])],
            env=[client.V1EnvVar(name=k, value=v) for k, v in {"PLUMB_ROLE": role, **env}.items()],
            ports=[client.V1ContainerPort(container_port=port, name="ssh")],
            resources=client.V1ResourceRequirements(limits=limits),
            security_context=client.V1SecurityContext(
                capabilities=client.V1Capabilities(add=list(_words(check, "capabilities")))
            ),
            volume_mounts=[
                client.V1VolumeMount(name="ssh", mount_path=SSH_MOUNT, read_only=True),
                client.V1VolumeMount(name="shm", mount_path="/dev/shm"),
            ],
        )
        on_node = client.V1NodeSelectorTerm(
            match_fields=[
                client.V1NodeSelectorRequirement(key="metadata.name", operator="In", values=[node])
            ]
        )
        pod = client.V1PodSpec(
            restart_policy="Never",
            hostname=host.split(".")[0],
            subdomain=name,
            containers=[container],
            affinity=client.V1Affinity(
                node_affinity=client.V1NodeAffinity(
                    required_during_scheduling_ignored_during_execution=client.V1NodeSelector(
                        node_selector_terms=[on_node]
                    )
                )
            ),
            tolerations=[client.V1Toleration(key=GPU_RESOURCE, operator="Exists")],
            automount_service_account_token=False,
            volumes=[
                client.V1Volume(
                    name="ssh",
                    secret=client.V1SecretVolumeSource(secret_name=name, default_mode=0o400),
                ),
                # NCCL's shared-memory transport needs more than the runtime's 64 MiB /dev/shm.
                client.V1Volume(
                    name="shm", empty_dir=client.V1EmptyDirVolumeSource(medium="Memory")
                ),
            ],
        )
        jobs.append(
            client.V1Job(
                metadata=client.V1ObjectMeta(name=f"{name}-{role}", labels=labels),
                spec=client.V1JobSpec(
                    backoff_limit=0,
                    active_deadline_seconds=max(1, int(check.timeout_s) + 30),
                    template=client.V1PodTemplateSpec(
                        metadata=client.V1ObjectMeta(labels=labels), spec=pod
                    ),
                ),
            )
        )
    return secret, service, jobs[0], jobs[1]


# -- the run ----------------------------------------------------------------------------------


async def nccl_pair(
    kube: Kube, check: CheckDef, nodes: RunNodes | None, *, read_log: LogReader | None = None
) -> Verdict:
    """Run the check's two-node all-reduce and grade it; skipped without two fitting nodes."""
    if not kube.leader():
        return (
            "skip",
            "another replica holds the Lease and runs validation Jobs: ask the leader",
            {},
        )
    if nodes is None:
        return "skip", "the run's nodes are not known to this check", {}
    pair = choose_pair(check, nodes)
    if isinstance(pair, str):
        return "skip", pair, {}
    core, batch = client.CoreV1Api(kube.api), client.BatchV1Api(kube.api)
    ns, name = kube.namespace, f"plumb-{check.id}-{uuid.uuid4().hex[:6]}"
    secret, service, launcher, worker = manifests(name, check, pair, _ssh_key())
    details = {
        "namespace": ns,
        "nodes": ", ".join(pair.nodes),
        "group": f"{pair.model} x{pair.gpus}, {pair.fabric}",
        "jobs": f"{launcher.metadata.name}, {worker.metadata.name}",
    }
    started = time.monotonic()
    try:
        try:
            await asyncio.to_thread(core.create_namespaced_secret, ns, secret)
            await asyncio.to_thread(core.create_namespaced_service, ns, service)
            for job in (worker, launcher):
                await asyncio.to_thread(batch.create_namespaced_job, ns, job)
        except client.ApiException as exc:
            return (
                "error",
                f"cannot create the NCCL workload in {ns}: {exc.status} {exc.reason}",
                details,
            )
        outcome = await _wait(batch, core, ns, name, check.timeout_s, kube.poll_s, details)
        reader = read_log or _pod_log(core)
        text = await _launcher_log(core, ns, name, reader, details)
        if outcome is not None:
            return outcome
        return grade(nccltests.parse(text), check, pair, details)
    finally:
        await asyncio.shield(asyncio.to_thread(_delete, core, batch, ns, name))
        details["cleanup"] = "Jobs and their pods, Service and Secret deleted"
        log.debug("nccl pair deleted", extra={"run": name, "s": time.monotonic() - started})


async def _wait(
    batch: client.BatchV1Api,
    core: client.CoreV1Api,
    ns: str,
    name: str,
    timeout_s: float,
    poll_s: float,
    details: dict[str, str],
) -> Verdict | None:
    """None once the launcher's Job completed; else the failure (a Job failed, or time ran out)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pods = await asyncio.to_thread(
            core.list_namespaced_pod, ns, label_selector=f"{PAIR_LABEL}={name}"
        )
        waiting = {}
        for pod in pods.items:
            role = (pod.metadata.labels or {}).get(ROLE_LABEL, "?")
            if pod.spec.node_name:
                details[f"{role}_node"] = pod.spec.node_name
            else:
                cond = next(
                    (c for c in pod.status.conditions or () if c.type == "PodScheduled"), None
                )
                waiting[role] = (cond.message or cond.reason) if cond else "not yet considered"
        for role in ROLES:
            job = await asyncio.to_thread(batch.read_namespaced_job_status, f"{name}-{role}", ns)
            for cond in (job.status.conditions if job.status else None) or ():
                if cond.status != "True":
                    continue
                if cond.type == "Complete" and role == "launcher":
                    return None
                if cond.type == "Failed":
                    where = details.get(f"{role}_node", "its node")
                    why = f"the {role}'s Job failed on {where}: {cond.reason}: {cond.message}"
                    return "fail", why, details
        if time.monotonic() >= deadline:
            if waiting:
                unscheduled = "; ".join(f"{r}: {w}" for r, w in sorted(waiting.items()))
                details["scheduler"] = unscheduled
                why = f"not both pods were scheduled within {timeout_s:g} s: {unscheduled}"
                return "fail", why, details
            return "fail", f"the all-reduce did not finish within {timeout_s:g} s", details
        await asyncio.sleep(poll_s)


def _pod_log(core: client.CoreV1Api) -> LogReader:
    async def read(ns: str, pod: str) -> str:
        return await asyncio.to_thread(core.read_namespaced_pod_log, pod, ns, container="nccl")

    return read


async def _launcher_log(
    core: client.CoreV1Api, ns: str, name: str, read: LogReader, details: dict[str, str]
) -> str:
    """The launcher pod's log ("" when there is no pod or no log yet); its tail in details."""
    pods = await asyncio.to_thread(
        core.list_namespaced_pod, ns, label_selector=f"{PAIR_LABEL}={name},{ROLE_LABEL}=launcher"
    )
    if not pods.items:
        return ""
    try:
        text = await read(ns, pods.items[0].metadata.name)
    except client.ApiException as exc:
        details["log"] = f"not readable: {exc.status} {exc.reason}"
        return ""
    details["log_tail"] = "\n".join(text.splitlines()[-LOG_TAIL_LINES:])
    return text


def _delete(core: client.CoreV1Api, batch: client.BatchV1Api, ns: str, name: str) -> None:
    """Delete every object of the run, each on its own: one failing leaves the others to go."""
    for job in (f"{name}-launcher", f"{name}-worker"):
        delete_job(batch, core, ns, job)
    delete(core.delete_namespaced_service, name, ns)
    delete(core.delete_namespaced_secret, name, ns)


# -- the grade --------------------------------------------------------------------------------


def _minimum(check: CheckDef, pair: Pair) -> Minimum | None:
    return next(
        (
            m
            for m in check.minima
            if m.model == pair.model and m.fabric == pair.fabric and m.gpus in (None, pair.gpus)
        ),
        None,
    )


def grade(
    runs: tuple[nccltests.NcclRun, ...], check: CheckDef, pair: Pair, details: dict[str, str]
) -> Verdict:
    """The launcher log's all-reduce, graded: busbw at the largest size against the check's
    minimum for the pair's GPU model, GPUs per node and fabric; no minimum is a warning."""
    if not runs:
        return "fail", "the launcher's log holds no nccl-tests output", details
    run = runs[-1]
    if run.nccl_version:
        details["nccl_version"] = run.nccl_version
    if run.status != "ok":
        return "fail", f"the nccl-tests run is {run.status}: {'; '.join(run.reasons)}", details
    if run.collective not in ("all_reduce", None):
        why = f"the command ran {run.collective}, not all_reduce: fix the check's `command`"
        return "fail", why, details
    expected = 2 * pair.gpus
    if run.ranks is not None and run.ranks != expected:
        why = f"the all-reduce ran {run.ranks} ranks, not {expected} ({pair.gpus} on each node)"
        return "fail", why, details
    busbw, largest = run.busbw_gbps, run.largest
    if busbw is None or largest is None:
        return "fail", "the all-reduce's largest size has no bus bandwidth", details
    details["busbw_gbps"] = f"{busbw:g}"
    details["largest_bytes"] = str(largest.size_bytes)
    shown = f"{busbw:g} GB/s bus bandwidth at {largest.size_bytes} B across {', '.join(pair.nodes)}"
    minimum = _minimum(check, pair)
    if minimum is None:
        why = f"no minimum known for {pair.model} x{pair.gpus} on {pair.fabric}: not graded"
        return "warn", f"{shown}; {why}", details
    details["minimum_gbps"] = f"{minimum.value:g}"
    details["minimum_source"] = minimum.source
    if busbw >= minimum.value:
        return (
            "pass",
            f"{shown}, minimum {minimum.value:g} for {pair.model} on {pair.fabric}",
            details,
        )
    return (
        "fail",
        f"{shown}: below the minimum {minimum.value:g} for {pair.model} on {pair.fabric}",
        details,
    )


NCCL_PAIR: dict[str, Callable[..., Awaitable[Verdict]]] = {
    "nccl-allreduce-net": nccl_pair,
    "nccl-allreduce-nvls": nccl_pair,
}
