"""`plumb-agent`: collect this node's GPU stack facts and stream them to the aggregator."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import socket
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pynvml
import yaml
from pydantic import ValidationError

from plumb import facts as wire
from plumb import tree
from plumb.agent import __version__
from plumb.agent.checks import CheckContext, CheckRunner
from plumb.agent.checks.conformance import pci_scan
from plumb.agent.collect import Sources, collect_all, real_sources, sensors
from plumb.agent.collect.xid import XidLog, XidWatcher
from plumb.agent.settings import AgentSettings
from plumb.agent.simulate.node import Simulation
from plumb.agent.simulate.profile import ProfileError, profile_data, validate_profile
from plumb.agent.stream import Collect, Identity, Sense, StreamClient
from plumb.logs import LOG_FORMATS, configure_logging

log = logging.getLogger(__name__)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="plumb-agent",
        description="Stream this node's GPU software stack facts to the Plumb aggregator.",
        epilog="Every flag can also be set as an env var: --node-name is PLUMB_NODE_NAME.",
    )
    p.add_argument("--aggregator", metavar="HOST:PORT", help="aggregator gRPC address")
    p.add_argument("--node-name", help="node to report as (default: the host name)")
    p.add_argument(
        "--simulate",
        metavar="FILE",
        help="simulate a node: a profile name or file, an nvidia-smi -q -x capture or a "
        "mock-NVML config",
    )
    p.add_argument("--once", action="store_true", help="print the facts as JSON and exit")
    p.add_argument("--poll-interval", type=float, metavar="S", help="seconds between polls")
    p.add_argument("--heartbeat-interval", type=float, metavar="S", help="seconds per heartbeat")
    p.add_argument(
        "--sensor-interval", type=float, metavar="S", help="seconds between sensor reports"
    )
    p.add_argument("--host-root", type=Path, help="where the host's / is mounted")
    p.add_argument(
        "--token-file", type=Path, help="credential for the aggregator, re-read per connection"
    )
    p.add_argument("--ca-file", type=Path, help="CA certificate of the aggregator: stream over TLS")
    p.add_argument(
        "--tls-server-name",
        metavar="NAME",
        help="name the aggregator's certificate carries, when not the host in --aggregator",
    )
    p.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")
    p.add_argument("--log-format", choices=LOG_FORMATS, help="text (default) or json lines")
    p.add_argument("--version", action="version", version=f"plumb-agent {__version__}")
    return p.parse_args(argv)


def build_settings(args: argparse.Namespace) -> AgentSettings:
    """Env vars first, flags over them."""
    base = AgentSettings()
    top = {
        k: v
        for k, v in {
            "aggregator": args.aggregator,
            "node_name": args.node_name,
            "simulate": args.simulate,
            "host_root": args.host_root,
            "token_file": args.token_file,
            "ca_file": args.ca_file,
            "tls_server_name": args.tls_server_name,
            "log_level": args.log_level,
            "log_format": args.log_format,
        }.items()
        if v is not None
    }
    stream = {
        k: v
        for k, v in {
            "poll_interval_s": args.poll_interval,
            "heartbeat_interval_s": args.heartbeat_interval,
            "sensor_interval_s": args.sensor_interval,
        }.items()
        if v is not None
    }
    merged = base.model_dump() | top
    merged["stream"] = base.stream.model_dump() | stream
    return AgentSettings.model_validate(merged)


@dataclass(frozen=True)
class LocalNode:
    """The node this agent reports for: simulated or this host."""

    name: str
    collect: Collect  # its stack facts
    sense: Sense  # its GPUs' sensor readings
    checks: CheckContext  # what its checks read
    xids: XidWatcher  # the XID watcher whose log `collect` reads (not started: `run` starts it)


def make_node(settings: AgentSettings) -> LocalNode:
    """The node this agent reports for: simulated or this host."""
    xids = XidLog()
    if settings.simulate:
        node = settings.node_name or f"sim-{Path(settings.simulate).stem}"
        workdir = settings.sim_workdir or Path(tempfile.mkdtemp(prefix=f"plumb-sim-{node}-"))
        sim = Simulation(settings.simulate, node, workdir, xids)
        sources = sim.sources()
        watcher = XidWatcher(sources.nvml, sources.host_root, xids)

        def collect() -> dict[str, wire.Reading]:
            return collect_all(sim.sources())

        # Every read goes through `sim`, so checks follow the profile as edited, and an invalid
        # edit leaves them on the last good one, as the facts are.
        ctx = CheckContext(
            collect=collect,
            nvml=lambda: sim.sources().nvml,
            # A simulated host has no PCI bus: it holds what its profile says.
            pci_gpu_count=lambda: sim.profile().gpus.count,
            simulated=True,
            simulated_figures=lambda: sim.profile().benchmarks,
        )
        return LocalNode(node, collect, lambda: sensors.read(sim.sources()), ctx, watcher)
    sources: Sources = real_sources(settings.host_root, tuple(settings.library_dirs), xids)

    def collect_host() -> dict[str, wire.Reading]:
        return collect_all(sources)

    ctx = CheckContext(
        collect=collect_host,
        nvml=lambda: pynvml,
        pci_gpu_count=lambda: pci_scan(settings.host_root / "sys"),
    )
    watcher = XidWatcher(pynvml, settings.host_root, xids)
    name = settings.node_name or socket.gethostname()
    return LocalNode(name, collect_host, lambda: sensors.read(sources), ctx, watcher)


def channel_credentials(settings: AgentSettings) -> grpc.ChannelCredentials | None:
    """TLS credentials trusting `ca_file`; None streams in plaintext."""
    if settings.ca_file is None:
        return None
    return grpc.ssl_channel_credentials(root_certificates=settings.ca_file.read_bytes())


async def run(
    settings: AgentSettings,
    local: LocalNode,
    credentials: grpc.ChannelCredentials | None = None,
) -> None:
    """Stream until SIGTERM or SIGINT, watching XIDs meanwhile."""
    await asyncio.to_thread(local.xids.start)  # NVML can stall for seconds on a sick GPU
    try:
        await _stream(settings, local, credentials)
    finally:
        await asyncio.to_thread(local.xids.stop)


async def _stream(
    settings: AgentSettings, local: LocalNode, credentials: grpc.ChannelCredentials | None
) -> None:
    node = local.name
    facts = await asyncio.to_thread(local.collect)
    boot = facts.get("host.boot_id")
    identity = Identity(
        node_name=node,
        agent_version=__version__,
        boot_id=str(boot.value) if boot and boot.status == "ok" else "",
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    client = StreamClient(
        settings.aggregator,
        identity,
        local.collect,
        settings.stream,
        CheckRunner(local.checks),
        settings.read_token,
        credentials=credentials,
        server_name=settings.tls_server_name,
        sense=local.sense,
    )
    log.info("agent started", extra={"node": node, "aggregator": settings.aggregator})
    await client.run(stop)
    log.info("agent stopped", extra={"node": node})


def profile_command(argv: Sequence[str]) -> int:
    """`plumb-agent profile import FILE`: the Plumb profile equivalent to a capture (or a
    profile), as YAML on stdout, for users who want to edit one."""
    p = argparse.ArgumentParser(
        prog="plumb-agent profile", description="Work with simulated-node profiles."
    )
    sub = p.add_subparsers(dest="action", required=True)
    imp = sub.add_parser(
        "import",
        help="print the profile for an nvidia-smi -q -x capture or a mock-NVML config",
    )
    imp.add_argument("file", type=Path, help="capture or profile (recognised by content)")
    args = p.parse_args(argv)
    try:
        data = profile_data(args.file)
        validate_profile(data, args.file)  # print only what --simulate would accept
    except ProfileError as exc:
        print(f"plumb-agent: {exc}", file=sys.stderr)
        return 2
    print(f"# Imported from {args.file.name} by plumb-agent profile import.")
    sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["profile"]:
        return profile_command(argv[1:])
    args = parse_args(argv)
    try:
        settings = build_settings(args)
    except ValidationError as exc:
        print(f"plumb-agent: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        local = make_node(settings)
        if args.once:
            local.xids.start()  # the XID facts too, as the streaming agent reports them
            try:
                facts = local.collect()
            finally:
                local.xids.stop()
            json.dump({"node_name": local.name, "facts": tree.nest(facts)}, sys.stdout, indent=2)
            print()
            return 0
    except ProfileError as exc:
        print(f"plumb-agent: {exc}", file=sys.stderr)
        return 2
    try:
        credentials = channel_credentials(settings)
    except OSError as exc:
        print(
            f"plumb-agent: cannot read the CA file {settings.ca_file}: {exc.strerror}\n"
            "hint: point --ca-file / PLUMB_CA_FILE at the PEM CA that signed the aggregator's "
            "certificate",
            file=sys.stderr,
        )
        return 2
    asyncio.run(run(settings, local, credentials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
