"""`plumb serve`: gRPC ingest and the HTTP API in one process, on one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

import grpc
import uvicorn

from plumb.aggregator.api import create_app
from plumb.aggregator.core import open_core
from plumb.aggregator.errors import Unavailable
from plumb.aggregator.settings import AggregatorSettings, TlsSettings
from plumb.v1 import agent_pb2_grpc

log = logging.getLogger(__name__)

# Streams get this long to finish on shutdown before they are cancelled.
_GRACE_S = 5.0


class _EmbeddedUvicorn(uvicorn.Server):
    """Uvicorn without its own signal handling: `serve` owns SIGTERM and the shutdown order."""

    def capture_signals(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


async def _serve_http(http: uvicorn.Server) -> None:
    """Uvicorn exits the process when it cannot bind; turn that into this task ending."""
    try:
        await http.serve()
    except SystemExit:
        pass  # uvicorn has logged why; serve() sees `started` is False


async def _cancel(task: asyncio.Task | None) -> None:
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def split_listen(addr: str) -> tuple[str, int]:
    """'HOST:PORT' (or '[::1]:PORT') as (host, port)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


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


async def serve(settings: AggregatorSettings) -> None:
    """Run until SIGTERM or SIGINT, then close streams, flush writes and stop.

    The ports open as soon as the stored nodes are loaded; their evaluation follows in the
    background (`Core.restore`), and /readyz reports `restored: false` until it is done.
    """
    core = await open_core(settings)
    # Credentials first: a bad tokens file or certificate stops start-up before anything runs.
    app = create_app(core)
    credentials = _grpc_credentials(settings.tls)
    writer_task = asyncio.create_task(core.writer.run(), name="store-writer")
    tail_task = asyncio.create_task(core.replicas.run(), name="replica-tail")

    server = grpc.aio.server(
        options=[
            # Ingest enforces max_message_bytes with a clear status and a log line; the
            # transport's own, silent limit only stops what is far beyond it.
            ("grpc.max_receive_message_length", 4 * settings.ingest.max_message_bytes),
            ("grpc.max_send_message_length", settings.ingest.max_message_bytes),
            # gRPC shares a port between processes by default: a second `plumb serve` on the
            # same address would silently take half the agents instead of failing.
            ("grpc.so_reuseport", 0),
        ]
    )
    agent_pb2_grpc.add_AgentServiceServicer_to_server(core.ingest, server)
    try:
        if credentials is None:
            server.add_insecure_port(settings.grpc_listen)
        else:
            server.add_secure_port(settings.grpc_listen, credentials)
    except RuntimeError as exc:
        raise Unavailable(
            f"cannot listen for agents on {settings.grpc_listen}",
            hint="is another `plumb serve` running? pick a free --grpc-listen address",
        ) from exc
    await server.start()
    # Nodes, components and the Lease (aggregator/k8s/cluster.py); None for the demo.
    cluster_task = (
        asyncio.create_task(core.cluster.run(), name="kubernetes") if core.cluster else None
    )

    host, port = split_listen(settings.http_listen)
    http = _EmbeddedUvicorn(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            # X-Forwarded-* only from the configured proxies; uvicorn trusts loopback otherwise.
            proxy_headers=bool(settings.api.trusted_proxies),
            forwarded_allow_ips=settings.api.trusted_proxies,
            ssl_certfile=settings.tls.cert_file,
            ssl_keyfile=settings.tls.key_file,
        )
    )
    http_task = asyncio.create_task(_serve_http(http), name="http")
    # After the ports open: reconnecting agents resync while restored nodes are evaluated.
    restore_task = asyncio.create_task(core.restore(), name="restore")

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "aggregator started",
        extra={
            "grpc": settings.grpc_listen,
            "http": settings.http_listen,
            "tls": settings.tls.enabled,
        },
    )
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({stopped, http_task}, return_when=asyncio.FIRST_COMPLETED)
    restore_task.cancel()
    await asyncio.gather(restore_task, return_exceptions=True)
    if http_task.done() and not http.started:
        await _cancel(cluster_task)
        await server.stop(0)
        raise Unavailable(
            f"cannot serve HTTP on {settings.http_listen}",
            hint="is the port taken? pick a free --http-listen address",
        )

    log.info("aggregator stopping")
    await _cancel(cluster_task)  # first: releasing the Lease lets another replica lead at once
    core.ingest.close_all()
    await server.stop(_GRACE_S)
    http.should_exit = True
    await http_task
    await core.writer.flush(timeout_s=_GRACE_S * 2)
    tail_task.cancel()
    writer_task.cancel()
    await asyncio.gather(tail_task, writer_task, return_exceptions=True)
    core.store.close()
    log.info("aggregator stopped")
