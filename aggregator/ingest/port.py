"""The agents' gRPC port: opened first at start-up, holding streams until ingest is built.

After a restart (a SIGKILL storm, a rollout) every agent reconnects at once, and until the
port listens each one sees "connection refused" and probes again up to 2 s later. Importing
the aggregator, loading the catalog and the stored nodes took 13 s at 10,000 nodes before
the port opened. So `plumb serve` calls `listen` before importing the rest (this module needs
only gRPC, the protos and the settings), and `Gate` holds each stream that arrives meanwhile
until the servicer is ready: a held stream costs an idle coroutine, and is served (Hello,
Welcome) on the connection it came on as soon as the stored nodes are loaded, so nothing is
answered from a half-loaded state. A stream held past `ingest.start_hold_s`, short of the
agent's Welcome timeout, is refused UNAVAILABLE with a retry hint the agent waits out.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from dataclasses import dataclass

import grpc

from plumb.aggregator.errors import InvalidInput, Unavailable
from plumb.aggregator.ingest.limits import RETRY_AFTER_KEY
from plumb.aggregator.settings import AggregatorSettings, TlsSettings
from plumb.v1 import agent_pb2_grpc

log = logging.getLogger(__name__)

__all__ = ["Gate", "Port", "check_exposure", "listen"]

# Seconds a stream refused while the aggregator is still starting waits before its next Hello:
# start-up left is unknown, and a held stream already waited start_hold_s.
STARTING_RETRY_S = 2


class Gate(agent_pb2_grpc.AgentServiceServicer):
    """Holds each stream until `ready` has the servicer that serves it, then hands it on."""

    def __init__(self, ready: asyncio.Future, hold_s: float):
        self._ready = ready
        self._hold_s = hold_s

    async def Connect(self, request_iterator, context: grpc.aio.ServicerContext) -> None:  # noqa: N802
        if not self._ready.done():
            try:
                async with asyncio.timeout(self._hold_s):
                    await asyncio.shield(self._ready)
            except TimeoutError:
                log.info("stream refused while starting", extra={"hint_s": STARTING_RETRY_S})
                context.set_trailing_metadata(((RETRY_AFTER_KEY, str(STARTING_RETRY_S)),))
                await context.abort(
                    grpc.StatusCode.UNAVAILABLE,
                    f"the aggregator is starting (loading its stored nodes); "
                    f"retry in {STARTING_RETRY_S} s",
                )
        await self._ready.result().Connect(request_iterator, context)


@dataclass(frozen=True)
class Port:
    """The started gRPC server, the port it bound (for a listen address ending :0) and the
    future its gate waits on: set it to the servicer."""

    server: grpc.aio.Server
    number: int
    ready: asyncio.Future


async def listen(settings: AggregatorSettings) -> Port:
    """Bind and start the agents' port with a `Gate` in front of a servicer to come.

    Refuses an exposed unauthenticated address and unreadable TLS files before binding, and
    a taken address with Unavailable."""
    check_exposure(settings.auth.mode, settings.grpc_listen, settings.insecure_agents)
    credentials = _grpc_credentials(settings.tls)
    server = grpc.aio.server(
        options=[
            # Ingest enforces max_message_bytes with a clear status and a log line; the
            # transport's own, silent limit only stops what is far beyond it.
            ("grpc.max_receive_message_length", 4 * settings.ingest.max_message_bytes),
            ("grpc.max_send_message_length", settings.ingest.max_message_bytes),
            # gRPC shares a port between processes by default: a second `plumb serve` on the
            # same address would silently take half the agents instead of failing.
            ("grpc.so_reuseport", 0),
            # Hold a storm's streams until they are taken, rather than gRPC ending them.
            ("grpc.server.max_pending_requests", settings.ingest.max_pending_streams),
            ("grpc.server.max_pending_requests_hard_limit", settings.ingest.max_pending_streams),
            # No bandwidth probe: it answered each agent's report with a PING and tuned windows
            # that a few small messages a minute never fill. At 10,000 agents it was a fifth of
            # the aggregator's CPU. A message larger than the window still flows: the reader
            # opens the stream's window to the size of the message it waits for.
            ("grpc.http2.bdp_probe", 0),
        ]
    )
    ready = asyncio.get_running_loop().create_future()
    agent_pb2_grpc.add_AgentServiceServicer_to_server(
        Gate(ready, settings.ingest.start_hold_s), server
    )
    try:
        if credentials is None:
            number = server.add_insecure_port(settings.grpc_listen)
        else:
            number = server.add_secure_port(settings.grpc_listen, credentials)
    except RuntimeError as exc:
        raise Unavailable(
            f"cannot listen for agents on {settings.grpc_listen}",
            hint="is another `plumb serve` running? pick a free --grpc-listen address",
        ) from exc
    await server.start()
    return Port(server, number, ready)


def check_exposure(mode: str, grpc_listen: str, insecure_agents: bool) -> None:
    """Refuse to serve unauthenticated agents beyond loopback unless explicitly allowed.

    With mode `none` any peer that reaches the port may report for any node, so a
    non-loopback `grpc_listen` needs `insecure_agents`; raises InvalidInput with a hint.
    """
    if mode != "none" or insecure_agents or _loopback(grpc_listen):
        return
    raise InvalidInput(
        f"agents are not authenticated (auth mode none) and --grpc-listen {grpc_listen} is "
        "not a loopback address: any host that reaches it could report for any node",
        hint="listen on 127.0.0.1, set PLUMB_AUTH__MODE=token (or kubernetes), or pass "
        "--insecure-agents on a trusted network",
    )


def _loopback(listen: str) -> bool:
    if listen.startswith("unix:"):
        return True  # a socket file: only this host's processes reach it
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # "" (every address), or a host name, which may resolve anywhere


def _grpc_credentials(tls: TlsSettings) -> grpc.ServerCredentials | None:
    """Server credentials from the configured certificate and key; None without TLS."""
    if tls.cert_file is None or tls.key_file is None:
        return None
    try:
        pair = (tls.key_file.read_bytes(), tls.cert_file.read_bytes())
    except OSError as exc:
        raise Unavailable(
            f"cannot read the TLS certificate or key: {exc}",
            hint="check PLUMB_TLS__CERT_FILE and PLUMB_TLS__KEY_FILE (PEM files)",
        ) from exc
    return grpc.ssl_server_credentials([pair])
