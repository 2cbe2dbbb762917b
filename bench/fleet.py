"""Fleet simulator: thousands of real agent streams against one real `plumb serve`.

Starts `plumb serve` (SQLite in a temp dir, or --db), then N agents: a few "probe" agents in
this process (polling every 0.2 s, used to time fact changes) and the rest spread over
--workers processes, each an asyncio loop of real `agent.stream.StreamClient`s on loopback.
Facts are collected once per shipped profile and shared by every node of that profile, but for
what is each node's own on a real machine (hostname, boot id, GPU UUIDs and serials; see
bench/nodes.py). The simulator keeps its own agents cheap (content hash once per facts object,
NodeFacts copied from the profile's with the node's own values set, reads of a node in place
rather than on the agent's worker thread, a stop event per agent, each process's fleet frozen
out of the collector's passes) so the two cores go to the aggregator; the steady phase and
each second of a cold ramp or storm report the simulator's CPU.

Phases, each written into one JSON result (bench/results/scale_<mode>_<agents>.json):
  connect   cold start: every agent connects at once to an empty database;
  steady    --window-s of heartbeats (--heartbeat-s) and --change-rate (fraction of nodes
            changing one GPU fact per minute), and with --sensor-churn F every agent sending
            a SensorReport every --sensor-interval-s in which a fraction F of its GPUs moved
            by 1 °C: aggregator CPU (cores) and RSS from /proc,
            wire bytes (plumb_ingest_received_bytes_total and client-side ByteSize),
            store counters (change rows, batches), the aggregator's event-loop lag, and
            the agents' errors in the window (a failed read of facts or sensors included:
            the agent logs it and skips that report);
  latency   --probes driver changes on probe agents: agent notices → /metrics shows it, and
            → /v1/drift?node= shows the new observed version, p50/p99;
  api       GET /v1/nodes and GET /v1/nodes/{name} latency while the fleet streams;
  scrape-while-changing  --scrape-window-s: /metrics scraped back to back and
            /metrics/sensors every --sensors-scrape-s (default 0: back to back too), from a
            process of their own (as Prometheus would, so receiving the pages does not delay
            the probe agents' loop; asking for gzip as it does, or --scrape-encoding identity)
            while probe agents change facts: each page's scrape p50/p99 and bytes, change →
            /metrics, and delta → Ack and the aggregator's event-loop lag without and with
            the scrapers running;
  storm     --storm sigterm|sigkill: the aggregator is stopped with every agent connected
            and restarted on the same database, at once or (--storm-restart after-lost)
            once every agent has seen its stream end; time until the gRPC port accepts TCP,
            until /readyz and until /v1/nodes shows all connected (either of the last two
            may come first), and every error the agents saw, by code.
  cold-ramp --cold-ramp RATE: instead of all at once, agents start at RATE a second on an
            empty database; every error the agents see (by gRPC code, Welcome timeouts),
            the time until all are synced (each node connected in /v1/nodes), the
            messages the aggregator read by then (by type) and its event-loop lag.

Event-loop lag is the change of the aggregator's plumb_event_loop_lag_seconds histogram over
the phase: count, mean, and p99 as the bound of the bucket holding it ("<= 0.01 s"); null
where the aggregator has no such histogram.

--mode full-resend swaps the agents for a client that sends FullFacts every 60 s and nothing
else (NFD's worker), the side-by-side baseline for wire bytes and CPU.

    .venv/bin/python bench/fleet.py --agents 1000 --window-s 120 --storm sigterm
    .venv/bin/python bench/fleet.py --agents 1000 --mode full-resend --window-s 120
    .venv/bin/python bench/fleet.py --agents 2000 --cold-ramp 1000 --window-s 30 --probes 0
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gzip
import http.client
import json
import multiprocessing as mp
import os
import random
import re
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import httpx
from harness import free_port, serve_env, write_result
from nodes import Profile

PROFILES = ["dgx-h100", "hgx-a100", "h200", "l4", "l40s"]
CHANGE_PATH = "gpus[0].ecc_uncorrected_aggregate"  # the steady-state change: an ECC counter
RESEND_S = 60.0  # full-resend mode: NFD's worker re-labels every 60 s
LAG_TICK_S = 0.1  # the simulator's own loop-lag timer, as the aggregator's
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- agent side (any process)


def _cheap_agent_wire() -> None:
    """Build each distinct facts object's hash and NodeFacts once, in this process only.

    Every node of a profile shares one facts dict until it changes, so a fleet of 10,000
    costs the simulator a handful of serialisations instead of 10,000 per storm.
    """
    import plumb.agent.stream as stream
    from plumb import facts as wire
    from plumb.v1 import agent_pb2

    real_digest, real_unflatten = wire.content_digest, wire.unflatten
    digests: dict[int, tuple[object, bytes]] = {}
    messages: dict[int, tuple[object, object]] = {}

    def content_digest(flat):
        hit = digests.get(id(flat))
        if hit is not None and hit[0] is flat:
            return hit[1]
        if len(digests) > 50_000:
            digests.clear()
        digest = real_digest(flat)
        digests[id(flat)] = (flat, digest)
        return digest

    def message(facts):
        hit = messages.get(id(facts))
        if hit is None or hit[0] is not facts:
            if len(messages) > 50_000:
                messages.clear()
            hit = messages[id(facts)] = (facts, real_unflatten(facts))
        return hit[1]

    def full(seq, digest, facts):
        # Built in place: a message given to a constructor is copied again.
        request = agent_pb2.ConnectRequest(
            full_facts=agent_pb2.FullFacts(seq=seq, content_sha256=digest)
        )
        msg = request.full_facts.facts
        own = _OWN.get(id(facts))
        if own is not None and own[0] is facts:  # the profile's message, this node's values
            msg.CopyFrom(message(own[1]))
            for path in own[2]:
                wire._set(msg, path, facts[path])
        else:
            msg.CopyFrom(message(facts))
        return request

    wire.content_digest = content_digest
    stream._full = full


def _clients():
    """The two client kinds, built after the agent modules are imported in this process."""
    import grpc

    import plumb.agent.stream as stream
    from plumb import facts as wire
    from plumb.agent.stream import StreamClient, woken

    class CountingClient(StreamClient):
        """The real StreamClient, counting the serialized bytes it sends, its attempts (each
        Hello), how its sessions failed (gRPC code, Welcome timeout, stream ended), its reads
        of the node that raised (facts or sensors: the agent logs and skips them), when its
        last session began (its Hello) and when it last got a Welcome (its report starts
        right after); and, while `ack_s` is a list, how long each delta waited for its Ack."""

        sent_bytes = 0
        errors: collections.Counter = collections.Counter()  # every client of the process
        error_details: collections.Counter = collections.Counter()
        attempts = 0
        hello_at = 0.0
        welcomed_at = 0.0
        # When its last welcomed stream ended, and when its channel next found the aggregator
        # reachable: where a reconnect's time goes.
        lost_at = 0.0
        reachable_at = 0.0
        ack_s: list[float] | None = None
        by_task: dict[asyncio.Task, StreamClient] = {}  # every client, by its run task

        async def run(self, stop):
            CountingClient.by_task[asyncio.current_task()] = self
            await super().run(stop)

        async def _write(self, call, msg):
            CountingClient.sent_bytes += msg.ByteSize()
            if self.ack_s is not None and msg.WhichOneof("message") == "delta":
                self._delta_sent = (msg.delta.seq, time.perf_counter())
            await super()._write(call, msg)

        async def _read(self, call):
            await super()._read(_AckTimer(call, self))

        async def _session(self, channel, stop):
            self.attempts += 1
            self.hello_at = time.monotonic()
            opened = self.connections
            try:
                await super()._session(channel, stop)
            except grpc.aio.AioRpcError as exc:
                if self.connections > opened:
                    self.lost_at = time.monotonic()
                CountingClient.errors[exc.code().name] += 1
                # Where it ended (before or after Welcome) and what gRPC said: the cause.
                when = "after_welcome" if self.connections > opened else "before_welcome"
                # Core's own words name the failing op (a write, the status read): the cause.
                core = re.sub(r" object at 0x[0-9a-f]+", "", exc.debug_error_string() or "")
                detail = f"{exc.code().name} {when}: {(exc.details() or '')[:70]} | {core[-90:]}"
                CountingClient.error_details[f"{detail} | {self._since_hello()}"] += 1
                raise
            except TimeoutError:  # the only timed wait of a session: Hello -> Welcome
                CountingClient.errors["welcome_timeout"] += 1
                CountingClient.error_details[f"welcome_timeout | {self._since_hello()}"] += 1
                raise
            except ConnectionError:
                if self.connections > opened:
                    self.lost_at = time.monotonic()
                CountingClient.errors["stream_ended"] += 1
                raise

        async def _read_node(self, read):
            # A simulated node's read returns dicts held in memory. The agent's worker
            # thread, there for NVML calls that may stall, costs a real node nothing; here
            # it cost the simulator's one core a thread hand-off per read, 1,300 a second
            # at 10,000 agents, time the storm's reconnects then waited for.
            try:
                return read()
            except Exception:  # the agent logs it (at a level the bench hides) and goes on
                CountingClient.errors["node_read_failed"] += 1
                raise

        def _since_hello(self) -> str:
            """How long after its Hello a session failed, in coarse bounds."""
            took = time.monotonic() - self.hello_at
            bound = next((b for b in (1, 5, 9.5, 10.5, 30) if took < b), None)
            return f"after < {bound} s" if bound else "after >= 30 s"

        async def _report(self, call):
            self.welcomed_at = time.monotonic()  # system-wide clock: the driver compares it
            await super()._report(call)

    class FullResendClient(CountingClient):
        """NFD-style: the whole of the facts every RESEND_S, no deltas, no heartbeats."""

        async def _report(self, call):
            seq = 0
            while True:
                facts = await asyncio.to_thread(self._collect)
                seq += 1
                self._resync.clear()
                await self._send(call, stream._full(seq, wire.content_digest(facts), facts))
                await woken(self._resync, timeout_s=RESEND_S)

    real_reachable = stream._reachable

    async def reachable(channel, stop, timeout_s):
        ok = await real_reachable(channel, stop, timeout_s)
        client = CountingClient.by_task.get(asyncio.current_task())
        if ok and client is not None:
            client.reachable_at = time.monotonic()
        return ok

    stream._reachable = reachable
    return CountingClient, FullResendClient


class _AckTimer:
    """A stream call whose reads time the Ack of the client's last delta (the reporter
    sends one at a time, so one pending delta per client is enough)."""

    def __init__(self, call, client):
        self._call, self._client = call, client

    async def read(self):
        msg = await self._call.read()
        client = self._client
        if client.ack_s is not None and getattr(msg, "WhichOneof", None) is not None:
            pending = getattr(client, "_delta_sent", None)
            if msg.WhichOneof("message") == "ack" and pending and pending[0] == msg.ack.seq:
                client.ack_s.append(time.perf_counter() - pending[1])
                client._delta_sent = None
        return msg


class Node:
    """One simulated node's facts and sensor readings; `change` swaps in a new dict so shared
    dicts stay intact."""

    __slots__ = ("facts", "moving", "noticed", "readings", "reads", "watch")

    def __init__(self, facts, readings=(), moving=frozenset()):
        self.facts = facts
        self.noticed: dict[str, float] = {}
        self.watch: str | None = None  # a driver version whose first sighting is timed
        self.readings = list(readings)  # shared by every node of the profile
        self.moving = moving  # indexes of the GPUs whose temperature moves each read
        self.reads = 0

    def sense(self):
        """The profile's readings, with the moving GPUs 1 °C warmer on every other read."""
        self.reads += 1
        if not self.moving:
            return self.readings
        step = self.reads % 2
        return [
            g._replace(temperature_celsius=g.temperature_celsius + step)
            if g.index in self.moving and g.temperature_celsius is not None
            else g
            for g in self.readings
        ]

    def set(self, path, reading) -> None:
        self.facts = {**self.facts, path: reading}

    def collect(self):
        facts = self.facts
        if self.watch is not None:
            version = facts["driver.driver_version"].value
            if version == self.watch and version not in self.noticed:
                self.noticed[version] = time.monotonic()
        return facts


# id(facts) -> (facts, the profile's facts they were made from, the paths set apart from it),
# for the NodeFacts of a node's own facts: `_cheap_agent_wire` copies the profile's message
# and sets those paths instead of building all of it.
_OWN: dict[int, tuple[dict, dict, tuple[str, ...]]] = {}


def _profile_facts(workdir: Path) -> dict[str, Profile]:
    """Each profile, read once and shared by its nodes."""
    return {p: Profile.collect(p, workdir / p) for p in PROFILES}


def _own_facts(name: str, profile: Profile) -> dict:
    """`profile.node_facts(name)`, noted in `_OWN` for `_cheap_agent_wire`."""
    facts = profile.node_facts(name)
    _OWN[id(facts)] = (facts, profile.facts, profile.own)
    return facts


class Fleet:
    """Agents in one process: start, count, change facts at a rate, stop."""

    def __init__(self, spec: dict):
        from plumb import facts as wire
        from plumb.agent.settings import StreamSettings
        from plumb.agent.stream import Identity

        self.spec = spec
        counting, full_resend = _clients()
        self.counting = counting
        cls = full_resend if spec["mode"] == "full-resend" else counting
        # A folder per process: simulations materialise their host files there.
        profiles = _profile_facts(Path(spec["workdir"]) / f"profiles-{spec['seed']}")
        settings = StreamSettings(
            poll_interval_s=spec["poll_interval_s"],
            heartbeat_interval_s=spec["heartbeat_s"],
            sensor_interval_s=spec["sensor_interval_s"],
            **{k: spec[k] for k in ("backoff_max_s", "reconnect_window_s") if spec.get(k)},
        )
        churn = spec["sensor_churn"]  # None: no sensor reports at all, as before the split
        rng = random.Random(spec["seed"])
        self.nodes: dict[str, Node] = {}
        self.clients = []
        for i in spec["indices"]:
            name = f"bench-{i:05d}"
            profile = profiles[PROFILES[i % len(PROFILES)]]
            facts = _own_facts(name, profile)
            wire.content_digest(facts)  # kept per facts object: not paid during a ramp
            moving = frozenset(g.index for g in profile.readings if churn and rng.random() < churn)
            node = self.nodes[name] = Node(facts, profile.readings, moving)
            self.clients.append(
                cls(
                    spec["grpc"],
                    Identity(name, "bench", name),
                    node.collect,
                    settings,
                    sense=node.sense if churn is not None else None,
                )
            )
        self.stop = asyncio.Event()  # the process's own timers
        # An event per agent, as each real agent has its own: a stream waits on it, and with
        # one event shared by 5,000 agents each waiter's removal searched the other 5,000, a
        # storm's reconnects O(n^2) on the simulator's one core.
        self.stops = [asyncio.Event() for _ in self.clients]
        self.tasks: list[asyncio.Task] = []
        self.changes = 0
        self.changing = False
        self.marked = [0] * len(self.clients)
        self.marked_attempts = 0
        self.marked_at = 0.0
        self.marked_errors: collections.Counter = collections.Counter()
        self.marked_details: collections.Counter = collections.Counter()
        self.ramp: asyncio.Task | None = None
        self.lag_s: list[float] = []  # how late this process's loop woke each LAG_TICK_S timer

    async def start(self) -> None:
        """Start the changer, the lag timer, and every agent unless they wait for
        `start_ramp`."""
        if not self.spec.get("ramp_per_s"):
            self.tasks = [
                asyncio.create_task(c.run(stop))
                for c, stop in zip(self.clients, self.stops, strict=True)
            ]
        self.tasks.append(asyncio.create_task(self._changer()))
        self.tasks.append(asyncio.create_task(self._lag()))

    async def _lag(self) -> None:
        """Time this process's own loop: a saturated simulator delays its agents' reads (a
        Welcome, an Ack) as a slow aggregator would."""
        loop = asyncio.get_running_loop()
        while not self.stop.is_set():
            due = loop.time() + LAG_TICK_S
            await asyncio.sleep(LAG_TICK_S)
            self.lag_s.append(loop.time() - due)

    def start_ramp(self) -> None:
        """Start the agents at spec["ramp_per_s"] a second, evenly spaced, in order."""
        self.ramp = asyncio.create_task(self._ramp(self.spec["ramp_per_s"]))

    async def _ramp(self, per_s: float) -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        for i, (client, stop) in enumerate(zip(self.clients, self.stops, strict=True)):
            delay = t0 + i / per_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.tasks.insert(i, asyncio.create_task(client.run(stop)))

    async def _changer(self) -> None:
        """Change CHANGE_PATH on random nodes at change_rate per node per minute, while on."""
        from plumb.facts import Reading

        rng = random.Random(self.spec["seed"])
        names = list(self.nodes)
        per_s = len(names) * self.spec["change_rate"] / 60.0
        due = 0.0
        while not self.stop.is_set():
            await asyncio.sleep(1.0)
            if not self.changing:
                continue
            due += per_s
            while due >= 1.0:
                due -= 1.0
                node = self.nodes[rng.choice(names)]
                old = node.facts.get(CHANGE_PATH)
                node.set(CHANGE_PATH, Reading.ok(int(old.value if old else 0) + 1))
                self.changes += 1

    def welcomed(self) -> int:
        """Agents welcomed since the mark (or since they started): what the driver polls every
        0.2 s while it waits, cheaper than the whole status."""
        return sum(c.connections > m for c, m in zip(self.clients, self.marked, strict=True))

    def lost(self) -> int:
        """Agents whose stream ended since the mark (the storm's kill)."""
        return sum(c.lost_at >= self.marked_at for c in self.clients)

    def status(self) -> dict:
        return {
            "agents": len(self.clients),
            "connected_once": sum(1 for c in self.clients if c.connections > 0),
            "connections": sum(c.connections for c in self.clients),
            "welcomed_since_mark": self.welcomed(),
            "sent_bytes": self.counting.sent_bytes,
            "changes": self.changes,
            "attempts": sum(c.attempts for c in self.clients),
            "errors": dict(self.counting.errors),
            "error_details": dict(self.counting.error_details),
            "loop_lag": {
                "ticks": len(self.lag_s),
                "max_s": round(max(self.lag_s, default=0.0), 3),
                **{f"late_{b}s": sum(1 for x in self.lag_s if x >= b) for b in (1, 5, 10)},
            },
        }

    def since_mark(self) -> dict:
        """Hellos sent since the mark, and for each agent welcomed since, when it sent the
        Hello that got its Welcome and when the Welcome came."""
        welcomed = [c for c, m in zip(self.clients, self.marked, strict=True) if c.connections > m]
        return {
            "attempts": sum(c.attempts for c in self.clients) - self.marked_attempts,
            "hello_at": [c.hello_at for c in welcomed],
            "welcomed_at": [c.welcomed_at for c in welcomed],
            "lost_at": [c.lost_at for c in welcomed],
            "reachable_at": [c.reachable_at for c in welcomed],
            "errors": dict(self.counting.errors - self.marked_errors),
            "error_details": dict(self.counting.error_details - self.marked_details),
        }

    def stragglers(self, limit: int = 5) -> list[dict]:
        """Where the agents without a Welcome since the mark are waiting: each one's chain of
        awaits, innermost last (file:line function)."""
        out = []
        for client, marked, task in zip(self.clients, self.marked, self.tasks, strict=False):
            if client.connections <= marked and len(out) < limit:
                out.append({"node": client._identity.node_name, "awaiting": _await_chain(task)})
        return out

    def mark(self) -> None:
        """Remember each agent's connection count; status counts who got a Welcome since."""
        self.marked = [c.connections for c in self.clients]
        self.marked_attempts = sum(c.attempts for c in self.clients)
        self.marked_at = time.monotonic()
        self.marked_errors = collections.Counter(self.counting.errors)
        self.marked_details = collections.Counter(self.counting.error_details)

    async def close(self) -> None:
        for stop in (self.stop, *self.stops):
            stop.set()
        if self.ramp is not None:
            self.ramp.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def _await_chain(task: asyncio.Task) -> list[str]:
    """The coroutines `task` is suspended in, outermost first, then what the innermost awaits."""
    if task.done():
        return [f"ended: {task.exception()!r}" if not task.cancelled() else "cancelled"]
    chain, awaited = [], task.get_coro()
    while getattr(awaited, "cr_frame", None) is not None:
        frame = awaited.cr_frame
        chain.append(
            f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno} {frame.f_code.co_name}"
        )
        awaited = awaited.cr_await
    if awaited is not None:
        chain.append(repr(awaited)[:200])
    return chain


def worker_main(conn, spec: dict) -> None:
    """A worker process: its share of the fleet, driven by commands over `conn`."""
    from plumb.aggregator import heap
    from plumb.logs import configure_logging

    configure_logging("ERROR")
    _cheap_agent_wire()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        fleet = Fleet(spec)
        heap.freeze_long_lived()
        await fleet.start()
        done = asyncio.Event()

        # What the driver asks of the fleet, answered on the loop where the fleet lives.
        asked = {
            "status": fleet.status,
            "welcomed": fleet.welcomed,
            "lost": fleet.lost,
            "mark": fleet.mark,
            "since_mark": fleet.since_mark,
            "stragglers": fleet.stragglers,
        }

        def serve() -> None:  # commands arrive on a thread; the fleet lives on the loop
            while True:
                cmd = conn.recv()
                if cmd in asked:
                    reply = asyncio.run_coroutine_threadsafe(_call(asked[cmd]), loop).result()
                elif cmd == "ramp":
                    loop.call_soon_threadsafe(fleet.start_ramp)
                    reply = True
                elif cmd in ("changes_on", "changes_off"):
                    fleet.changing = cmd == "changes_on"
                    reply = True
                else:  # stop
                    loop.call_soon_threadsafe(done.set)
                    conn.send(True)
                    return
                conn.send(reply)

        threading.Thread(target=serve, daemon=True).start()
        await done.wait()
        await asyncio.wait_for(fleet.close(), timeout=30)

    # A real agent's heap is one node's. Here thousands of nodes' facts and clients live in
    # one, and every pass of the oldest generation walked them all: 42 % of the simulator's
    # samples in a storm's first 10 s (py-spy --native). So, as the aggregator does for its
    # fleet, they and every later pass's survivors are frozen.
    with heap.freezing():
        asyncio.run(run())


async def _call(read: Callable[[], object]) -> object:
    return read()


class Worker:
    """The parent's handle on one worker process."""

    def __init__(self, ctx, spec: dict):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, spec), daemon=True)
        self.proc.start()
        self._lock = asyncio.Lock()

    async def ask(self, cmd: str, timeout_s: float = 60.0):
        async with self._lock:
            self.conn.send(cmd)
            loop = asyncio.get_running_loop()
            if not await loop.run_in_executor(None, self.conn.poll, timeout_s):
                raise TimeoutError(f"worker did not answer {cmd!r}")
            return self.conn.recv()


# ---------------------------------------------------------------- aggregator side


def listen_drops() -> int:
    """Connections the kernel dropped because a listen queue was full (TcpExt ListenDrops,
    machine-wide): each costs that client a SYN retransmit, a second or more."""
    head, values = (line.split() for line in Path("/proc/net/netstat").read_text().splitlines()[:2])
    return int(values[head.index("ListenDrops")])


def cpu_s(pid: int) -> float:
    """CPU-seconds process `pid` has used (its threads, not its children), from /proc."""
    return _stat_cpu_s(Path(f"/proc/{pid}/stat"))


def simulator_cpu_s(workers: list[Worker]) -> float:
    """CPU-seconds the simulator has used: this process and its agent processes."""
    return cpu_s(os.getpid()) + sum(cpu_s(w.proc.pid) for w in workers)


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU-seconds per thread of process `pid`, summed by thread name (/proc/PID/task):
    `main` is the event loop's thread; Python's other threads (the store's writer, work
    handed to threads) carry the process's name, gRPC's core threads `event_engine`."""
    out: collections.Counter = collections.Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = "main" if task.name == str(pid) else (task / "comm").read_text().strip()
            out[name] += _stat_cpu_s(task / "stat")
        except FileNotFoundError:  # the thread ended meanwhile
            continue
    return dict(out)


def _stat_cpu_s(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


class Aggregator:
    """A `plumb serve` subprocess with CPU/RSS readings from /proc."""

    def __init__(self, db: str, grpc: str, http_port: int, heartbeat_s: float, workdir: Path):
        self.db, self.grpc, self.http_port = db, grpc, http_port
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PLUMB_INGEST__HEARTBEAT_INTERVAL_S": str(heartbeat_s),
            **serve_env(workdir),
        }
        self.proc: asyncio.subprocess.Process | None = None
        self.pid_file: str | None = None  # where to write the pid of each start, for py-spy
        self.cpus: set[int] | None = None  # the CPUs each start is pinned to, if any

    async def start(self) -> float:
        self.proc = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("plumb")),
            "serve",
            "--grpc-listen",
            self.grpc,
            "--http-listen",
            f"127.0.0.1:{self.http_port}",
            "--db",
            self.db,
            "--log-level",
            "ERROR",
            env=self.env,
        )
        if self.cpus:
            os.sched_setaffinity(self.proc.pid, self.cpus)
        if self.pid_file:
            Path(self.pid_file).write_text(f"{self.proc.pid}\n")  # noqa: ASYNC240 (tiny)
        return time.monotonic()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu_s(self) -> float:
        return cpu_s(self.pid)

    def rss_bytes(self, field: str = "VmRSS") -> int:
        """Resident memory now, or (VmHWM) its peak since the process started."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
        return 0

    async def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(sig)
        try:
            await asyncio.wait_for(self.proc.wait(), timeout=timeout_s)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


_SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$", re.M)


def metric_values(text: str, names: set[str]) -> dict[str, float]:
    """Sum of each named series over its labels, from Prometheus text."""
    out: dict[str, float] = {}
    for m in _SAMPLE.finditer(text):
        if m.group(1) in names:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


COUNTERS = {
    "plumb_ingest_received_bytes_total",
    "plumb_ingest_messages_total",
    "plumb_store_written_changes_total",
    "plumb_store_batches_total",
    "plumb_store_dropped_updates_total",
    "plumb_store_pending_updates",
    "plumb_ingest_resyncs_total",
    "plumb_ingest_streams_superseded_total",
    "plumb_ingest_streams_resumed_total",
    "plumb_ingest_streams_closed_by_aggregator_total",
    "plumb_agent_connected",
}


LOOP_LAG = "plumb_event_loop_lag_seconds"  # how late the aggregator's loop woke a 0.1 s timer
REPLY = "plumb_ingest_reply_seconds"  # a message read to its Welcome, Ack (or Resync) written
WELCOME = 'type="hello"'  # REPLY's Hellos: read to Welcome written
_LE = re.compile(r'le="([^"]+)"')


def histogram(text: str, name: str, where: str = "") -> dict | None:
    """Histogram `name` from Prometheus text, summed over labels (over the series whose labels
    hold `where`): cumulative count per bucket bound (`le`, +Inf as inf), `count` and `sum`;
    None where the page has no such histogram (or series).

    Only the family's own block is read (the format keeps a family's lines together), so a
    16 MB page costs one `find`.
    """
    start = text.find(f"\n{name}_")
    if start < 0:
        return None
    end = text.find("\n# ", start)
    buckets: dict[float, float] = {}
    totals = {"count": 0.0, "sum": 0.0}
    for m in _SAMPLE.finditer(text, start + 1, len(text) if end < 0 else end):
        series, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if where not in labels:
            continue
        if series == f"{name}_bucket" and (le := _LE.search(labels)):
            bound = float(le.group(1))  # float("+Inf") is inf
            buckets[bound] = buckets.get(bound, 0.0) + value
        elif series in (f"{name}_count", f"{name}_sum"):
            totals[series.rsplit("_", 1)[1]] += value
    return {"buckets": buckets, **totals} if buckets else None


def observed_between(
    before: dict | None, after: dict | None, *, since_start: bool = False
) -> dict | None:
    """What a histogram (LOOP_LAG, REPLY) observed between two readings: count, mean and the
    buckets holding the median and the 99th percentile; None where either reading lacks it
    (an older aggregator) or the histogram went back (a restart). With `since_start`, a
    `before` without it (a new process, or a labelled series not observed yet) counts as
    nothing observed."""
    if before is None and since_start:
        before = {"buckets": {}, "count": 0.0, "sum": 0.0}
    if before is None or after is None:
        return None
    count = after["count"] - before["count"]
    if count < 0:
        return None
    if count == 0:
        return {"count": 0, "mean_s": None, "p50": None, "p99": None}
    bounds = sorted(after["buckets"])
    finite = [b for b in bounds if b != float("inf")]

    def bucket(q: float) -> str:
        found = next(
            b for b in bounds if after["buckets"][b] - before["buckets"].get(b, 0.0) >= q * count
        )
        return f"<= {found:g} s" if found != float("inf") else f"> {finite[-1]:g} s"

    return {
        "count": int(count),
        "mean_s": round((after["sum"] - before["sum"]) / count, 4),
        "p50": bucket(0.5),
        "p99": bucket(0.99),
    }


class Scrape(NamedTuple):
    """What the bench reads from one /metrics scrape."""

    values: dict[str, float]  # COUNTERS, each summed over its labels
    seconds: float
    bytes: int
    loop_lag: dict | None  # histogram(LOOP_LAG)
    messages: dict[str, int]  # messages the aggregator's servicer has read, by type
    welcome: dict | None  # histogram(REPLY, WELCOME): each Hello read to its Welcome written


_MESSAGES = re.compile(r'^plumb_ingest_messages_total\{type="(\w+)"\} ([0-9.eE+]+)$', re.M)


async def scrape(http: httpx.AsyncClient) -> Scrape:
    """One /metrics scrape: COUNTERS, its time and size, the loop-lag histogram and the
    messages read by type."""
    t = time.perf_counter()
    r = await http.get("/metrics")
    seconds, text = time.perf_counter() - t, r.text
    return Scrape(
        metric_values(text, COUNTERS),
        seconds,
        len(r.content),
        histogram(text, LOOP_LAG),
        {kind: int(float(n)) for kind, n in _MESSAGES.findall(text)},
        histogram(text, REPLY, WELCOME),
    )


async def scrape_sensors(http: httpx.AsyncClient) -> tuple[float, int] | None:
    """One /metrics/sensors scrape: seconds and bytes; None where the aggregator has no such
    page (before the sensor gauges moved off /metrics)."""
    t = time.perf_counter()
    r = await http.get("/metrics/sensors")
    if r.status_code == 404:
        return None
    r.raise_for_status()
    return time.perf_counter() - t, len(r.content)


async def wait_connected(http, n: int, timeout_s: float, since: float, welcomed=None) -> dict:
    """Poll /v1/nodes until n nodes are connected; seconds from `since`, and the poll costs.

    With `welcomed` (an async count of agents that got a Welcome since the storm), that
    count is watched first, so the aggregator is not slowed by a 10,000-node list every
    second while agents are still on their way; its time is `welcomed_s`.
    """
    deadline = time.monotonic() + timeout_s
    polls, best = [], 0
    welcomed_s = count = None
    if welcomed is not None:
        while time.monotonic() < deadline:
            if (count := await welcomed()) >= n:
                welcomed_s = round(time.monotonic() - since, 2)
                break
            await asyncio.sleep(0.2)
    # Past the deadline one poll still runs, so a timed-out phase says how far it got.
    while not polls or time.monotonic() < deadline:
        t = time.perf_counter()
        try:
            r = await http.get("/v1/nodes")
            polls.append(time.perf_counter() - t)
            if r.status_code == 200:
                best = sum(1 for x in r.json() if x["connected"])
                if best >= n:
                    return {
                        "seconds": round(time.monotonic() - since, 2),
                        "connected": best,
                        "nodes_polls": len(polls),
                        "nodes_poll_ms_max": round(max(polls) * 1000, 1),
                        "welcomed_s": welcomed_s,
                    }
        except httpx.HTTPError:
            polls.append(time.perf_counter() - t)
        # A 10,000-node list costs the aggregator real time: keep the poller under ~1/3 duty.
        await asyncio.sleep(max(0.5, 2 * polls[-1]))
    # welcomed_s too: every agent may have had its Welcome while the list still lagged.
    return {
        "seconds": None,
        "connected": best,
        "welcomed": count,
        "welcomed_s": welcomed_s,
        "timed_out_s": timeout_s,
    }


async def wait_ready(http, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if (await http.get("/readyz")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError("aggregator never became ready")


def pct(xs: list[float]) -> dict:
    ms = sorted(x * 1000 for x in xs)
    if not ms:
        return {}
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1),
        "max_ms": round(ms[-1], 1),
    }


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


# ---------------------------------------------------------------- the phases


async def steady(args, agg: Aggregator, http, workers: list[Worker], local: Fleet) -> dict:
    """Settle, then measure CPU, RSS, wire bytes and store writes over the window."""
    await asyncio.sleep(args.settle_s)
    for w in workers:
        await w.ask("changes_on")
    local.changing = True
    s0 = await scrape(http)
    m0 = s0.values
    statuses0 = [await w.ask("status") for w in workers] + [local.status()]
    cpu0, sim0, t0 = agg.cpu_s(), simulator_cpu_s(workers), time.monotonic()
    rss = []
    while (elapsed := time.monotonic() - t0) < args.window_s:
        rss.append(agg.rss_bytes())
        await asyncio.sleep(min(5.0, args.window_s - elapsed))
    cpu1, sim1, t1 = agg.cpu_s(), simulator_cpu_s(workers), time.monotonic()
    statuses1 = [await w.ask("status") for w in workers] + [local.status()]
    m1, scrape_s, scrape_bytes, lag1, _, _ = await scrape(http)
    sensors_scrape = await scrape_sensors(http)
    for w in workers:
        await w.ask("changes_off")
    local.changing = False
    window = t1 - t0
    d = {k: m1.get(k, 0.0) - m0.get(k, 0.0) for k in COUNTERS}
    changes = sum(s["changes"] for s in statuses1) - sum(s["changes"] for s in statuses0)
    # Client bytes are per process: the first status of each process is its baseline.
    client_bytes = sum(s["sent_bytes"] for s in statuses1) - sum(s["sent_bytes"] for s in statuses0)
    node_hours = args.agents * window / 3600
    errors = collections.Counter(_summed(s["errors"] for s in statuses1))
    errors.subtract(_summed(s["errors"] for s in statuses0))
    return {
        "window_s": round(window, 1),
        "load_avg_after": loadavg(),
        "aggregator_cpu_cores": round((cpu1 - cpu0) / window, 3),
        # The load generator's headroom: near 1.0 on its core, it is what is measured.
        "simulator_cpu_cores": round((sim1 - sim0) / window, 3),
        "aggregator_rss_mib_max": round(max(rss) / 2**20, 1),
        "aggregator_rss_mib_last": round(rss[-1] / 2**20, 1),
        "messages": int(d["plumb_ingest_messages_total"]),
        "fact_changes_made": changes,
        "wire_bytes_per_node_hour": round(d["plumb_ingest_received_bytes_total"] / node_hours),
        "client_bytes_per_node_hour": round(client_bytes / node_hours),
        "store_change_rows": int(d["plumb_store_written_changes_total"]),
        "store_change_rows_per_s": round(d["plumb_store_written_changes_total"] / window, 2),
        "store_batches_per_s": round(d["plumb_store_batches_total"] / window, 2),
        "store_rows_per_change": round(d["plumb_store_written_changes_total"] / changes, 2)
        if changes
        else None,
        "store_dropped_updates_total": int(m1.get("plumb_store_dropped_updates_total", 0)),
        "resyncs_in_window": int(d["plumb_ingest_resyncs_total"]),
        "agent_errors_in_window": {k: n for k, n in sorted(errors.items()) if n},
        "metrics_scrape_ms": round(scrape_s * 1000, 1),
        "metrics_bytes": scrape_bytes,
        "metrics_sensors_scrape_ms": round(sensors_scrape[0] * 1000, 1) if sensors_scrape else None,
        "metrics_sensors_bytes": sensors_scrape[1] if sensors_scrape else None,
        "event_loop_lag": observed_between(s0.loop_lag, lag1),
    }


async def latency(args, http, local: Fleet) -> dict:
    """Driver changes on probe agents, timed from the agent's collector to /metrics and drift."""
    from plumb.facts import Reading

    to_metrics, to_drift, failed = [], [], 0
    names = list(local.nodes)
    for k in range(args.probes):
        name = names[k % len(names)]
        node = local.nodes[name]
        version = f"999.{k}.{random.randrange(10**6)}"
        needle = f'driver_version="{version}"'
        node.watch = version
        node.set("driver.driver_version", Reading.ok(version))
        seen: dict[str, float] = {}

        async def poll_metrics(needle=needle, seen=seen) -> None:
            while "m" not in seen:
                r = await http.get("/metrics")
                if needle in r.text:
                    seen["m"] = time.monotonic()
                await asyncio.sleep(0.01)

        async def poll_drift(name=name, version=version, seen=seen) -> None:
            while "d" not in seen:
                r = await http.get("/v1/drift", params={"node": name})
                if any(f["observed"] == version for f in r.json()):
                    seen["d"] = time.monotonic()
                await asyncio.sleep(0.01)

        try:
            await asyncio.wait_for(asyncio.gather(poll_metrics(), poll_drift()), timeout=30)
        except (TimeoutError, httpx.HTTPError):
            failed += 1
            continue
        start = node.noticed[version]
        to_metrics.append(seen["m"] - start)
        to_drift.append(seen["d"] - start)
    return {"to_metrics": pct(to_metrics), "to_drift": pct(to_drift), "failed": failed}


async def api_latency(args, http) -> dict:
    lists, details = [], []
    for _ in range(args.api_list):
        t = time.perf_counter()
        r = await http.get("/v1/nodes")
        r.raise_for_status()
        lists.append(time.perf_counter() - t)
    for _ in range(args.api_detail):
        name = f"bench-{random.randrange(args.agents):05d}"
        t = time.perf_counter()
        r = await http.get(f"/v1/nodes/{name}")
        r.raise_for_status()
        details.append(time.perf_counter() - t)
    return {"nodes_list": pct(lists), "node_detail": pct(details)}


def scraper_main(conn, base: str, sensors_every_s: float, encoding: str) -> None:
    """The scrape phase's Prometheus, a process of its own: /metrics scraped back to back
    and /metrics/sensors every `sensors_every_s` (0: back to back), each page on a thread and
    a kept-alive connection of its own, driven over `conn`, each request with
    `Accept-Encoding: {encoding}` (Prometheus asks for gzip).

    Pages are read with the standard library's http.client, which reads a body in one
    buffered call: a 19 MB /metrics page of 10,000 nodes took it 8 ms on an idle core, where
    httpx's async client took 72 ms to assemble it (Prometheus reads in Go, at a cost closer
    to the former). And a page on its own thread is not timed while another page's body
    is being assembled, as Prometheus scrapes each target's pages apart.

    Commands: ("lag",) scrapes /metrics once and answers ("lag", (the loop lag histogram, the
    reply time histogram)); ("start",) starts the scrapers; ("watch", needle) makes the first
    /metrics page holding `needle` answer ("seen", needle, time.monotonic() as its last byte
    came, and as it was decoded); ("stop",) stops the scrapers and answers ("done", each
    page's figures, a last "lag" reading). A page's seconds run from the request to the last
    byte of its body; a gzip body is then decoded, apart ("decode"), before `needle` is
    looked for.
    """
    address = httpx.URL(base)
    stop = threading.Event()
    sending = threading.Lock()  # a Connection is not safe to send on from two threads
    needle = [b""]  # what the main thread last asked to watch for, read by the metrics thread
    # Per page: seconds, bytes on the wire, seconds decoding, bytes decoded.
    pages: dict[str, tuple[list[float], list[int], list[float], list[int]]] = {
        "metrics": ([], [], [], []),
        "sensors": ([], [], [], []),
    }

    def send(msg: tuple) -> None:
        with sending:
            conn.send(msg)

    def client() -> http.client.HTTPConnection:
        return http.client.HTTPConnection(address.host, address.port, timeout=120)

    def get(
        http_conn: http.client.HTTPConnection, path: str, page: str | None = None
    ) -> tuple[bytes, float] | None:
        """The page's body, decoded, and time.monotonic() (system-wide: the parent compares
        it) as its last byte came, its figures added to `pages[page]` where given; None where the
        aggregator has no such page (404). A connection the server closed while idle (its
        keep-alive timeout) is opened again, once."""
        headers = {"Accept-Encoding": encoding}
        t = time.perf_counter()
        try:
            http_conn.request("GET", path, headers=headers)
            response = http_conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            http_conn.close()
            http_conn.request("GET", path, headers=headers)
            response = http_conn.getresponse()
        body = response.read()
        received, came = time.perf_counter(), time.monotonic()
        if response.status == 404:
            return None
        if response.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status}")
        gzipped = response.getheader("Content-Encoding") == "gzip"
        wire, body = len(body), gzip.decompress(body) if gzipped else body
        if page is not None:
            seconds, sizes, decoding, decoded = pages[page]
            seconds.append(received - t)
            sizes.append(wire)
            if gzipped:
                decoding.append(time.perf_counter() - received)
                decoded.append(len(body))
        return body, came

    def lag(http_conn) -> tuple[dict | None, dict | None]:
        text = get(http_conn, "/metrics")[0].decode()
        return histogram(text, LOOP_LAG), histogram(text, REPLY)

    def metrics() -> None:
        http_conn = client()
        while not stop.is_set():
            body, came = get(http_conn, "/metrics", "metrics")
            decoded = time.monotonic()
            watched = needle[0]
            if watched and watched in body:
                send(("seen", watched, came, decoded))
                if needle[0] is watched:
                    needle[0] = b""

    def sensors() -> None:
        http_conn = client()
        while not stop.is_set():
            started = time.monotonic()
            if get(http_conn, "/metrics/sensors", "sensors") is None:
                return
            stop.wait(started + sensors_every_s - time.monotonic())  # start to start

    commands = client()
    send(("ready",))
    threads: list[threading.Thread] = []
    while True:
        cmd = conn.recv()
        if cmd[0] == "lag":
            send(("lag", lag(commands)))
        elif cmd[0] == "start":
            threads = [threading.Thread(target=f, daemon=True) for f in (metrics, sensors)]
            for thread in threads:
                thread.start()
        elif cmd[0] == "watch":
            needle[0] = cmd[1]
        else:  # stop
            stop.set()
            for thread in threads:
                thread.join()
            send(("done", pages, lag(commands)))
            return


class Scrapers:
    """The parent's handle on the scraper process."""

    def __init__(self, ctx, base: str, sensors_every_s: float, encoding: str):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=scraper_main, args=(child, base, sensors_every_s, encoding), daemon=True
        )
        self.proc.start()

    def send(self, *cmd) -> None:
        self.conn.send(cmd)

    async def answer(self, kind: str, timeout_s: float, needle: bytes | None = None) -> tuple:
        """The next message of `kind` (for "seen", of `needle`), skipping any other (a
        "seen" of a needle given up on); TimeoutError past `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            if not await loop.run_in_executor(None, self.conn.poll, left):
                break
            msg = self.conn.recv()
            if msg[0] == kind and (needle is None or msg[1] == needle):
                return msg
        raise TimeoutError(f"scraper process sent no {kind!r}")

    def close(self) -> None:
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()


async def scrape_while_changing(args, agg: Aggregator, base: str, local: Fleet) -> dict:
    """/metrics scraped back to back (as Prometheus with several replicas, or a dashboard,
    would) and /metrics/sensors every --sensors-scrape-s while the fleet changes, from a
    process of their own so that receiving the pages does not delay this process's probe
    agents: each page's scrape time and size; driver changes on probe agents timed from the
    agent's collector to the end of the first /metrics scrape that shows them; delta → Ack on
    the probe agents, which change a fact every 0.5 s, first for a third of --scrape-window-s
    without scrapes, then with the scrapers running; and the aggregator's loop lag in each
    part."""
    from plumb.facts import Reading

    scrapers = Scrapers(mp.get_context("spawn"), base, args.sensors_scrape_s, args.scrape_encoding)
    try:
        await scrapers.answer("ready", 120)
        stop = asyncio.Event()
        probes = list(local.nodes.values())

        async def change_probes() -> None:
            while not stop.is_set():
                for node in probes:
                    old = node.facts.get(CHANGE_PATH)
                    node.set(CHANGE_PATH, Reading.ok(int(old.value if old else 0) + 1))
                await asyncio.sleep(0.5)

        def timed_acks() -> list[float]:
            out: list[float] = []
            for c in local.clients:
                c.ack_s = out
            return out

        scrapers.send("lag")
        lag0, reply0 = (await scrapers.answer("lag", 120))[1]
        changer = asyncio.create_task(change_probes())
        quiet = timed_acks()
        await asyncio.sleep(args.scrape_window_s / 3)
        busy = timed_acks()
        scrapers.send("lag")  # its scrape is the scraping part's first
        lag1, reply1 = (await scrapers.answer("lag", 120))[1]
        cpu0, t0 = agg.cpu_s(), time.monotonic()
        scrapers.send("start")
        to_metrics, to_decoded, failed = [], [], 0
        names = list(local.nodes)
        k = 0
        while time.monotonic() - t0 < args.scrape_window_s * 2 / 3:
            name = names[k % len(names)]
            node = local.nodes[name]
            version = f"998.{k}.{random.randrange(10**6)}"
            needle = f'driver_version="{version}"'.encode()
            scrapers.send("watch", needle)  # before the change: a pipe is faster than a poll
            node.watch = version
            node.set("driver.driver_version", Reading.ok(version))
            try:
                _, _, came, decoded = await scrapers.answer("seen", 30, needle)
                to_metrics.append(came - node.noticed[version])
                to_decoded.append(decoded - node.noticed[version])
            except (TimeoutError, KeyError):
                failed += 1
            k += 1
            await asyncio.sleep(random.uniform(0.1, 0.5))  # changes land anywhere in a scrape
        stop.set()
        cpu1, t1 = agg.cpu_s(), time.monotonic()
        scrapers.send("stop")
        _, pages, (lag2, reply2) = await scrapers.answer("done", 300)
        await changer
        for c in local.clients:
            c.ack_s = None
        (scrapes, sizes, decoding, decoded) = pages["metrics"]
        (sensor_scrapes, sensor_sizes, sensor_decoding, sensor_decoded) = pages["sensors"]
        return {
            "note": "scrapers ran in a process of their own (a thread and an http.client "
            "connection per page, on the simulator's CPUs), as Prometheus would; the probe "
            "agents' loop only times; the loop lag without scrapes holds the one /metrics "
            "scrape that reads its start",
            "window_s": round(t1 - t0, 1),
            "sensors_scrape_s": args.sensors_scrape_s,
            "accept_encoding": args.scrape_encoding,
            # Request to the body's last byte; bytes as sent; a gzip body's decoding apart.
            "scrape": {**pct(scrapes), "bytes_max": max(sizes, default=0)},
            "scrape_decode": {**pct(decoding), "bytes_max": max(decoded)} if decoded else None,
            "scrape_sensors": {**pct(sensor_scrapes), "bytes_max": max(sensor_sizes, default=0)}
            if sensor_scrapes
            else None,
            "scrape_sensors_decode": {
                **pct(sensor_decoding),
                "bytes_max": max(sensor_decoded),
            }
            if sensor_decoded
            else None,
            # To the last byte of the first page that shows it; and to that page decoded.
            "change_to_metrics": pct(to_metrics),
            "change_to_metrics_decoded": pct(to_decoded),
            "change_to_metrics_failed": failed,
            "delta_to_ack_without_scrapes": pct(quiet),
            "delta_to_ack_while_scraping": pct(busy),
            "event_loop_lag_without_scrapes": observed_between(lag0, lag1),
            "event_loop_lag_while_scraping": observed_between(lag1, lag2),
            # The aggregator's side of the Acks above: read to reply written, every stream.
            "reply_without_scrapes": observed_between(reply0, reply1),
            "reply_while_scraping": observed_between(reply1, reply2),
            "aggregator_cpu_cores_while_scraping": round((cpu1 - cpu0) / (t1 - t0), 3),
            "load_avg_after": loadavg(),
        }
    finally:
        scrapers.close()


def _summed(counts) -> dict[str, int]:
    total: collections.Counter = collections.Counter()
    for c in counts:
        total.update(c)
    return dict(sorted(total.items()))


async def wait_port(addr: str, timeout_s: float = 120.0) -> float:
    """When `addr` (HOST:PORT) first accepts a TCP connection, polled every 20 ms."""
    host, _, port = addr.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection(host, int(port))
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        return time.monotonic()
    raise TimeoutError(f"{addr} never accepted a connection")


async def cold_ramp(args, agg: Aggregator, http, workers, local: Fleet) -> dict:
    """Start every agent at --cold-ramp a second on an empty database; count what the agents
    see go wrong and time until every node is connected (synced: its FullFacts applied)."""
    for w in workers:  # each answers once its fleet is built and waiting for the ramp
        await w.ask("status", timeout_s=300)

    s0 = await scrape(http)
    cpu0, threads0, t0 = agg.cpu_s(), thread_cpu_s(agg.pid), time.monotonic()
    busy: list[tuple[float, float]] = []  # each second of the ramp: cores used by each side
    sampler = asyncio.create_task(sample_busy(agg, workers, busy))
    for w in workers:
        await w.ask("ramp")
    local.start_ramp()
    done = await wait_connected(
        http, args.agents, args.connect_timeout_s, t0, welcomed_count(workers, local)
    )
    sampler.cancel()
    cpu1, threads1 = agg.cpu_s(), thread_cpu_s(agg.pid)
    statuses = [await w.ask("status") for w in workers] + [local.status()]
    s1 = await scrape(http)
    m = s1.values
    errors = _summed(s["errors"] for s in statuses)
    return {
        "rate_per_s": args.cold_ramp,
        "ramp_s": round(args.agents / args.cold_ramp, 2),
        "all_synced_s": done["seconds"],
        "all_welcomed_s": done.get("welcomed_s"),
        "connected": done["connected"],
        "agent_errors": errors,
        "agent_errors_total": sum(errors.values()),
        "agent_error_details": _summed(s["error_details"] for s in statuses),
        "hellos": sum(s["attempts"] for s in statuses),
        "hellos_read_by_aggregator": s1.messages.get("hello", 0),
        # Every message the ramp's streams sent that the aggregator read by its end, by type.
        "messages_read_by_aggregator": {
            kind: n - s0.messages.get(kind, 0) for kind, n in sorted(s1.messages.items())
        },
        # The aggregator's part of a Hello's wait, beside the agents' own timing of it.
        "aggregator_hello_to_welcome": observed_between(s0.welcome, s1.welcome, since_start=True),
        "simulator_loop_lag": [s["loop_lag"] for s in statuses],
        "aggregator_cpu_s": round(cpu1 - cpu0, 1),
        "aggregator_cpu_s_by_thread": {
            k: round(v - threads0.get(k, 0.0), 1) for k, v in threads1.items()
        },
        "aggregator_rss_mib_after": round(agg.rss_bytes() / 2**20, 1),
        # What a memory limit must hold: the peak since start, the ramp's included.
        "aggregator_rss_mib_peak": round(agg.rss_bytes("VmHWM") / 2**20, 1),
        "store_dropped_updates_total": int(m.get("plumb_store_dropped_updates_total", 0)),
        "streams_closed_by_aggregator": int(
            m.get("plumb_ingest_streams_closed_by_aggregator_total", 0)
        ),
        "listen_drops_machine_wide": listen_drops(),
        "event_loop_lag": observed_between(s0.loop_lag, s1.loop_lag),
        # Second by second from the ramp's start: the cores each side used; where the
        # aggregator was not saturated, the ramp or the simulator held the syncs back.
        "per_second": [{"aggregator_cores": a, "simulator_cores": b} for a, b in busy],
        "load_avg_after": loadavg(),
    }


def welcomed_count(workers, local: Fleet):
    """An async count of the agents welcomed since the mark (or since they started)."""

    async def welcomed() -> int:
        return sum([await w.ask("welcomed") for w in workers]) + local.welcomed()

    return welcomed


async def wait_lost(n: int, workers, local: Fleet, timeout_s: float) -> None:
    """Until all `n` agents have seen their stream end since the mark."""
    deadline = time.monotonic() + timeout_s
    while sum([await w.ask("lost") for w in workers]) + local.lost() < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every agent saw its stream end within {timeout_s} s")
        await asyncio.sleep(0.2)


async def storm(args, agg: Aggregator, http, workers, local: Fleet) -> dict:
    """Stop the aggregator with every agent connected; restart it on the same DB."""
    sig = signal.SIGKILL if args.storm == "sigkill" else signal.SIGTERM
    for w in workers:
        await w.ask("mark")
    local.mark()

    drops0 = listen_drops()
    t_kill = time.monotonic()
    await agg.stop(sig)
    t_down = time.monotonic()
    if args.storm_restart == "after-lost":
        # Real agents, each on its own node, see a killed aggregator's connections close at
        # once; the simulated ones, thousands to a core, take seconds. Restarting once all
        # have seen it meets the restart as a real fleet does: every agent probing the port.
        await wait_lost(args.agents, workers, local, args.storm_timeout_s)
    t_lost = time.monotonic()
    t_start = await agg.start()
    sim0 = simulator_cpu_s(workers)
    busy: list[tuple[float, float]] = []  # each second after the restart: cores used by each side
    sampler = asyncio.create_task(sample_busy(agg, workers, busy, agg_cpu0=0.0))
    t_port = await wait_port(agg.grpc)

    async def restored() -> tuple[float, float, dict[str, float]]:
        await wait_ready(http)
        return time.monotonic(), agg.cpu_s(), thread_cpu_s(agg.pid)

    # Agents are welcomed while the stored nodes are evaluated: either may end first.
    ready = asyncio.create_task(restored())
    done = await wait_connected(
        http, args.agents, args.storm_timeout_s, t_start, welcomed_count(workers, local)
    )
    cpu1, threads1 = agg.cpu_s(), thread_cpu_s(agg.pid)
    t_ready, cpu0, threads0 = await ready
    sampler.cancel()
    sim1 = simulator_cpu_s(workers)
    after = await scrape(http)
    m = after.values
    statuses = [await w.ask("status") for w in workers]
    # When each agent got its Welcome, from the restart, and how many Hellos that took.
    since = [await w.ask("since_mark") for w in workers] + [local.since_mark()]
    welcome_s = sorted(t - t_start for s in since for t in s["welcomed_at"])
    # Each welcomed agent's Hello, from the restart, and its wait from that Hello to Welcome:
    # late Hellos are the agents' side, long waits the aggregator's.
    hello_s = sorted(t - t_start for s in since for t in s["hello_at"])
    waits = sorted(
        w - h for s in since for h, w in zip(s["hello_at"], s["welcomed_at"], strict=True)
    )

    def between(first: str, then: str, origin: float | None = None) -> dict | None:
        """Quantiles over the welcomed agents of `then` - `first` (a key of since_mark, or
        `origin` when given), where both were noted (a time after the kill)."""
        return _quantiles(
            sorted(
                b - (origin if origin is not None else a)
                for s in since
                for a, b in zip(s[first], s[then], strict=True)
                if min(a, b) >= t_kill
            )
        )

    # Agents still without a Welcome when the wait gave up, and what each was waiting on.
    stragglers = (
        [s for w in workers for s in await w.ask("stragglers")] + local.stragglers()
        if done["seconds"] is None
        else []
    )
    return {
        "signal": args.storm,
        "stop_s": round(t_down - t_kill, 2),
        "restart": args.storm_restart,
        "kill_to_restart_s": round(t_lost - t_kill, 2),
        "restart_to_port_open_s": round(t_port - t_start, 2),
        "restart_to_ready_s": round(t_ready - t_start, 2),
        "restart_to_all_connected_s": done["seconds"],
        "restart_to_all_welcomed_s": done.get("welcomed_s"),
        "kill_to_all_connected_s": round(done["seconds"] + (t_start - t_kill), 2)
        if done["seconds"] is not None
        else None,
        "connected": done["connected"],
        # The new process's CPU from its start to all connected (load, resync and what of
        # the restore's evaluation ran meanwhile), and to ready (load and restore). Unlike
        # the seconds above they hardly depend on what else the machine runs.
        "aggregator_cpu_s_restart_to_all_connected": round(cpu1, 1),
        "aggregator_cpu_s_restart_to_ready": round(cpu0, 1),
        # The same by thread name.
        "aggregator_cpu_s_by_thread": {
            "restart_to_all_connected": {k: round(v, 1) for k, v in threads1.items()},
            "restart_to_ready": {k: round(v, 1) for k, v in threads0.items()},
        },
        # The agents' side of the same interval (this process and the agent processes).
        "simulator_cpu_s_restart_to_all_connected": round(sim1 - sim0, 1),
        "aggregator_rss_mib_after": round(agg.rss_bytes() / 2**20, 1),
        # The peak since the restart: loading, evaluating and resyncing the stored fleet.
        "aggregator_rss_mib_peak": round(agg.rss_bytes("VmHWM") / 2**20, 1),
        "store_dropped_updates_total": int(m.get("plumb_store_dropped_updates_total", 0)),
        "resyncs_total": int(m.get("plumb_ingest_resyncs_total", 0)),
        # Streams whose Hello named the facts held: no FullFacts, no syncing slot.
        "streams_resumed_total": int(m.get("plumb_ingest_streams_resumed_total", 0)),
        "agent_connections_total": sum(s["connections"] for s in statuses),
        "stragglers": stragglers,
        "hellos_since_kill": sum(s["attempts"] for s in since),
        # Every agent loses its stream to the kill once (UNAVAILABLE, or its write failing:
        # INTERNAL); anything beyond one per agent is the restart's.
        "agent_errors_since_kill": _summed(s["errors"] for s in since),
        "agent_error_details_since_kill": _summed(s["error_details"] for s in since),
        "welcome_after_restart_s": _quantiles(welcome_s),
        "hello_to_welcome_s": _quantiles(waits),
        # An agent's reconnect in steps, each over the agents welcomed since: its stream's
        # loss seen (from the kill), its channel connected again (from the restart), and its
        # Hello after the drawn delay.
        "reconnect_steps_s": {
            "kill_to_lost": between("lost_at", "lost_at", t_kill),
            "restart_to_reachable": between("reachable_at", "reachable_at", t_start),
            "reachable_to_hello": between("reachable_at", "hello_at"),
        },
        # The same wait on the restarted aggregator's side: from its read of the Hello to its
        # Welcome written. Far below the agents' own timing, the rest is theirs (their loop,
        # gRPC delivering the Hello and the Welcome).
        "aggregator_hello_to_welcome": observed_between(None, after.welcome, since_start=True),
        # Second by second from the restart: Welcomes, and the cores each side used; which
        # side was saturated while the fleet came back.
        "per_second": [
            {
                "hellos": sum(1 for t in hello_s if i <= t < i + 1),
                "welcomed": sum(1 for t in welcome_s if i <= t < i + 1),
                "aggregator_cores": a,
                "simulator_cores": b,
            }
            for i, (a, b) in enumerate(busy)
        ],
        "listen_drops": listen_drops() - drops0,
        "load_avg_after": loadavg(),
    }


async def sample_busy(
    agg: Aggregator,
    workers: list[Worker],
    into: list[tuple[float, float]],
    agg_cpu0: float | None = None,
) -> None:
    """Until cancelled, append each second's cores used by the aggregator and the simulator
    to `into`: which side was saturated. `agg_cpu0`: the aggregator's CPU to count from
    (0.0: from its start), else its CPU now."""
    last = (
        time.monotonic(),
        agg.cpu_s() if agg_cpu0 is None else agg_cpu0,
        simulator_cpu_s(workers),
    )
    while True:
        await asyncio.sleep(1.0)
        now = (time.monotonic(), agg.cpu_s(), simulator_cpu_s(workers))
        span = now[0] - last[0]
        into.append((round((now[1] - last[1]) / span, 2), round((now[2] - last[2]) / span, 2)))
        last = now


def _quantiles(sorted_s: list[float]) -> dict[str, float] | None:
    """p10, p50, p90, p99 and max of sorted seconds; None for none."""
    if not sorted_s:
        return None
    return {
        q: round(sorted_s[min(len(sorted_s) - 1, int(len(sorted_s) * f))], 2)
        for q, f in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))
    }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, default=100)
    p.add_argument("--workers", type=int, default=None, help="agent processes (default: auto)")
    p.add_argument("--mode", choices=["delta", "full-resend"], default="delta")
    p.add_argument("--change-rate", type=float, default=0.01, help="nodes changing per minute")
    p.add_argument("--heartbeat-s", type=float, default=30.0)
    p.add_argument("--poll-interval", type=float, default=10.0, help="fleet agents' poll")
    p.add_argument("--probe-agents", type=int, default=10, help="in-process, poll 0.2 s")
    p.add_argument(
        "--sensor-churn",
        type=float,
        default=None,
        metavar="FRACTION",
        help="send sensor reports, this fraction of GPUs 1 °C warmer or cooler each time "
        "(default: no sensor reports)",
    )
    p.add_argument(
        "--sensor-interval-s", type=float, default=30.0, help="agents' (default 30, theirs)"
    )
    p.add_argument("--settle-s", type=float, default=10.0)
    p.add_argument("--window-s", type=float, default=120.0)
    p.add_argument("--probes", type=int, default=20)
    p.add_argument("--api-list", type=int, default=10)
    p.add_argument("--api-detail", type=int, default=100)
    p.add_argument(
        "--scrape-window-s",
        type=float,
        default=0.0,
        help="scrape-while-changing phase: /metrics back to back for 2/3 of this, after a "
        "third without scrapes (default 0: skipped)",
    )
    p.add_argument(
        "--sensors-scrape-s",
        type=float,
        default=0.0,
        help="scrape-while-changing phase: /metrics/sensors every this many seconds, start to "
        "start, as a Prometheus job with that interval (default 0: back to back)",
    )
    p.add_argument(
        "--scrape-encoding",
        choices=["gzip", "identity"],
        default="gzip",
        help="scrape-while-changing phase: the scrapers' Accept-Encoding (default gzip, as "
        "Prometheus asks)",
    )
    p.add_argument("--storm", choices=["none", "sigterm", "sigkill"], default="none")
    p.add_argument(
        "--storm-restart",
        choices=["at-once", "after-lost"],
        default="at-once",
        help="restart the aggregator at once, or once every agent has seen its stream end "
        "(real agents see it at once; simulated ones take seconds)",
    )
    p.add_argument(
        "--cold-ramp",
        type=float,
        default=None,
        metavar="RATE",
        help="start the agents at RATE a second and report the cold-ramp phase "
        "(default: all at once)",
    )
    p.add_argument("--backoff-max-s", type=float, default=None, help="agents' (default 30)")
    p.add_argument("--reconnect-window-s", type=float, default=None, help="agents' (default 10)")
    p.add_argument("--connect-timeout-s", type=float, default=300.0)
    p.add_argument("--storm-timeout-s", type=float, default=180.0)
    p.add_argument("--db", default=None, help="database URL (default: SQLite in a temp dir)")
    p.add_argument("--pid-file", default=None, help="write the aggregator's pid here")
    p.add_argument(
        "--aggregator-cpu",
        type=int,
        default=None,
        help="pin the aggregator to this CPU and the simulator to the others, as in a "
        "cluster where agents run on their own nodes",
    )
    p.add_argument("--name", default=None, help="result file name (default: scale_<mode>_<n>)")
    args = p.parse_args()
    from plumb.logs import configure_logging

    configure_logging("ERROR")
    _cheap_agent_wire()
    workdir = Path(tempfile.mkdtemp(prefix="plumb-fleet-"))
    db = args.db or f"sqlite:///{workdir}/fleet.db"
    grpc_addr, http_port = f"127.0.0.1:{free_port()}", free_port()
    n_probe = min(args.probe_agents, args.agents)
    n_fleet = args.agents - n_probe
    n_workers = args.workers if args.workers is not None else (2 if n_fleet > 2000 else 1)
    n_workers = min(n_workers, n_fleet) if n_fleet else 0
    result: dict = {
        "benchmark": "fleet",
        "mode": args.mode,
        "agents": args.agents,
        "agent_processes": n_workers,
        "probe_agents": n_probe,
        "heartbeat_s": args.heartbeat_s,
        "change_rate_per_node_per_min": args.change_rate,
        "fleet_poll_interval_s": args.poll_interval,
        "sensor_churn": args.sensor_churn,
        "sensor_interval_s": args.sensor_interval_s if args.sensor_churn is not None else None,
        "agent_backoff_max_s": args.backoff_max_s or 30.0,
        "agent_reconnect_window_s": args.reconnect_window_s or 10.0,
        "db": "sqlite" if args.db is None else args.db.split(":", 1)[0],
        "load_avg_before": loadavg(),
        "aggregator_cpu": args.aggregator_cpu,  # None: it shares every CPU with the simulator
    }
    agg = Aggregator(db, grpc_addr, http_port, args.heartbeat_s, workdir)
    agg.pid_file = args.pid_file
    if args.aggregator_cpu is not None:
        others = os.sched_getaffinity(0) - {args.aggregator_cpu}
        if not others:
            raise SystemExit(f"--aggregator-cpu {args.aggregator_cpu} leaves no CPU for agents")
        agg.cpus = {args.aggregator_cpu}
        os.sched_setaffinity(0, others)  # the agent processes inherit it
    base = f"http://127.0.0.1:{http_port}"
    ctx = mp.get_context("spawn")
    workers: list[Worker] = []
    local: Fleet | None = None
    try:
        await agg.start()
        async with httpx.AsyncClient(base_url=base, timeout=120) as http:
            await wait_ready(http)
            common = {
                "mode": args.mode,
                "grpc": grpc_addr,
                "heartbeat_s": args.heartbeat_s,
                "change_rate": args.change_rate,
                "backoff_max_s": args.backoff_max_s,
                "reconnect_window_s": args.reconnect_window_s,
                "sensor_churn": args.sensor_churn,
                "sensor_interval_s": args.sensor_interval_s,
                "workdir": str(workdir),
            }
            ramp = {"ramp_per_s": args.cold_ramp / args.agents} if args.cold_ramp else {}
            local = Fleet(
                {
                    **common,
                    "indices": range(n_probe),
                    "poll_interval_s": 0.2,
                    "seed": 0,
                    **{k: v * n_probe for k, v in ramp.items()},
                }
            )
            share = [list(range(n_probe + w, args.agents, n_workers)) for w in range(n_workers)]
            t0 = time.monotonic()
            cpu0 = agg.cpu_s()
            for w in range(n_workers):
                spec = {
                    **common,
                    "indices": share[w],
                    "poll_interval_s": args.poll_interval,
                    "seed": w + 1,
                    **{k: v * len(share[w]) for k, v in ramp.items()},
                }
                workers.append(Worker(ctx, spec))
            await local.start()
            if args.cold_ramp:
                result["cold_ramp"] = await cold_ramp(args, agg, http, workers, local)
                print("cold_ramp", json.dumps(result["cold_ramp"]), flush=True)
            done = await wait_connected(http, args.agents, args.connect_timeout_s, since=t0)
            m = (await scrape(http)).values
            result["connect"] = {
                **done,
                "aggregator_cpu_s": round(agg.cpu_s() - cpu0, 1),
                "store_dropped_updates_total": int(m.get("plumb_store_dropped_updates_total", 0)),
                "streams_closed_by_aggregator": int(
                    m.get("plumb_ingest_streams_closed_by_aggregator_total", 0)
                ),
                "note": "includes spawning agent processes and collecting profile facts",
            }
            print("connect", json.dumps(result["connect"]), flush=True)
            if done["seconds"] is None:
                raise SystemExit("fleet never fully connected")
            result["steady"] = await steady(args, agg, http, workers, local)
            print("steady", json.dumps(result["steady"]), flush=True)
            if args.probes:
                result["latency"] = await latency(args, http, local)
                print("latency", json.dumps(result["latency"]), flush=True)
            if args.api_list or args.api_detail:
                result["api"] = await api_latency(args, http)
                print("api", json.dumps(result["api"]), flush=True)
            if args.scrape_window_s:
                result["scrape_while_changing"] = await scrape_while_changing(
                    args, agg, base, local
                )
                print("scrape_while_changing", json.dumps(result["scrape_while_changing"]))
            if args.storm != "none":
                result["storm"] = await storm(args, agg, http, workers, local)
                print("storm", json.dumps(result["storm"]), flush=True)
            if db.startswith("sqlite:///"):
                result["sqlite"] = sqlite_stats(db.removeprefix("sqlite:///"))
    finally:
        for w in workers:
            try:
                await w.ask("stop", timeout_s=10)
            except (TimeoutError, OSError, EOFError):
                pass
        if local is not None:
            await asyncio.wait_for(local.close(), timeout=30)
        for w in workers:
            w.proc.join(timeout=30)
            if w.proc.is_alive():
                w.proc.kill()
        await agg.stop()
    result["load_avg_after"] = loadavg()
    name = args.name or f"scale_{args.mode.replace('-', '_')}_{args.agents}"
    print("wrote", write_result(name, result))


def sqlite_stats(path: str) -> dict:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
        rows = {t: con.execute(f'select count(*) from "{t}"').fetchone()[0] for t in tables}
    finally:
        con.close()
    return {"file_mib": round(os.path.getsize(path) / 2**20, 1), "rows": rows}


if __name__ == "__main__":
    asyncio.run(main())
