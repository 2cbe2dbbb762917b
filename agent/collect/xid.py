"""XIDs: the driver's error events, per GPU, as `gpus[i].xid_count` and `gpus[i].xids[j].*`.

A watcher thread waits on NVML's XID event (`nvmlEventSetWait_v2`, which blocks in the
driver, so it never runs on the event loop). Where NVML has no events for a GPU (NotSupported,
an old library) it reads the kernel log instead: `/dev/kmsg` under the host root, from the
start of the ring buffer, so those XIDs count since boot. With NVML events, the kernel log's
records from before the events were registered (where it is readable) are counted first, so
an agent restart does not forget, and an open finding does not close on, an XID of this
boot. Both feed one `XidLog`, keyed by PCI address, which the NVML collector turns into each
GPU's facts. The log keeps per GPU a
count per code and when it was last seen, for at most `MAX_CODES` codes, so a GPU that
reports the same XID in a loop changes two numbers, not the length of its facts.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pynvml

from plumb.facts import Reading

__all__ = ["MAX_CODES", "KmsgXid", "XidLog", "XidWatcher", "bus_key", "parse_kmsg"]

log = logging.getLogger(__name__)

MAX_CODES = 16  # distinct codes kept per GPU; the oldest seen goes first
_WAIT_MS = 1000  # each NVML wait and kmsg poll: stop() is honoured within a second
_XID_EVENT = pynvml.nvmlEventTypeXidCriticalError
_READ_BYTES = 8192  # a kmsg record is at most 1 KiB of text plus its escapes

# A /dev/kmsg record: "priority,sequence,microseconds since boot,flags[,…];message".
_KMSG = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$")
# The driver's line, NVIDIA's XID documentation: "NVRM: Xid (PCI:0000:3b:00): 79, pid=…".
# Old drivers leave out "PCI:"; the address is domain:bus:device (a function is rare).
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?\):"
    r" (\d{1,5})\b"
)
# NVML's bus id ("00000000:3B:00.0") or the kernel's ("0000:3b:00").
_BUS = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?$")


def bus_key(bus_id: str) -> str | None:
    """One spelling of a PCI address for NVML's and the kernel's forms: "0000:3b:00"."""
    m = _BUS.match(bus_id.strip())
    if m is None:
        return None
    return f"{int(m[1], 16):04x}:{int(m[2], 16):02x}:{int(m[3], 16):02x}"


@dataclass(frozen=True)
class KmsgXid:
    """One XID line of the kernel log."""

    bus: str  # bus_key form
    code: int
    since_boot_s: float
    message: str


def parse_kmsg(record: str) -> KmsgXid | None:
    """The XID in one /dev/kmsg record, or None for any other record (or a malformed one)."""
    m = _KMSG.match(record)
    if m is None:
        return None
    xid = _XID.search(m[4])
    if xid is None:
        return None
    bus = f"{int(xid[1], 16):04x}:{int(xid[2], 16):02x}:{int(xid[3], 16):02x}"
    return KmsgXid(bus, int(xid[4]), int(m[3]) / 1e6, m[4].strip())


@dataclass
class _Seen:
    count: int
    last_s: float


class XidLog:
    """What the watcher saw, per GPU (PCI address) and code; safe to share between threads.

    `source` is "nvml" or "kmsg" once watching; `problem` says why nothing is watched.
    A log that never started gives no facts at all (`plumb-agent --once`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gpus: dict[str, dict[int, _Seen]] = {}
        self._totals: dict[str, int] = {}
        self.source: str | None = None
        self.problem: str | None = None

    def record(self, bus: str, code: int, at_s: float) -> None:
        """One XID `code` on the GPU at `bus` (bus_key form) at `at_s` (Unix seconds)."""
        with self._lock:
            codes = self._gpus.setdefault(bus, {})
            seen = codes.get(code)
            if seen is None:
                if len(codes) >= MAX_CODES:
                    del codes[min(codes, key=lambda c: codes[c].last_s)]
                seen = codes[code] = _Seen(0, at_s)
            seen.count += 1
            seen.last_s = max(seen.last_s, at_s)
            self._totals[bus] = self._totals.get(bus, 0) + 1

    def readings(self, bus_id: str) -> dict[str, Reading]:
        """The XID facts of the GPU NVML calls `bus_id`, relative to that GPU's path."""
        if self.source is None:
            return {} if self.problem is None else {"xid_count": Reading.failed(self.problem)}
        bus = bus_key(bus_id) or bus_id
        with self._lock:
            codes = sorted(self._gpus.get(bus, {}).items())
            out = {"xid_count": Reading.ok(self._totals.get(bus, 0))}
            for j, (code, seen) in enumerate(codes):
                out[f"xids[{j}].code"] = Reading.ok(code)
                out[f"xids[{j}].count"] = Reading.ok(seen.count)
                out[f"xids[{j}].last_seen_unix_s"] = Reading.ok(int(seen.last_s))
        return out


class XidWatcher:
    """Feeds an XidLog from NVML's XID events, or from the kernel log where there are none."""

    def __init__(
        self,
        nvml: Any,
        host_root: Path,
        xids: XidLog,
        clock: Callable[[], float] = time.time,
        uptime: Callable[[], float] = time.monotonic,
    ) -> None:
        self._nvml = nvml
        self._uptime = uptime  # seconds since boot, the kernel log's clock
        self._kmsg = Path(host_root) / "dev" / "kmsg"
        self._stat = Path(host_root) / "proc" / "stat"
        self._xids = xids
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Pick the source and start watching in a thread; blocks on NVML, so call it off
        the event loop. Without any source, `XidLog.problem` says why."""
        events = self._nvml_events()
        if isinstance(events, tuple):
            registered_s, backlog = self._uptime(), self._open_kmsg()
            self._xids.source = "nvml"

            def target() -> None:
                if isinstance(backlog, int):  # unreadable: XIDs count from now on
                    self._read_kmsg(backlog, before_s=registered_s)
                self._wait_nvml(*events)

        else:
            fd = self._open_kmsg()
            if isinstance(fd, str):
                self._xids.problem = f"no XID source: NVML events: {events}; {fd}"
                log.warning("xids not watched", extra={"reason": self._xids.problem})
                return
            self._xids.source = "kmsg"

            def target() -> None:
                self._read_kmsg(fd)

        log.info("watching xids", extra={"source": self._xids.source})
        self._thread = threading.Thread(target=target, name="xid-watcher", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop watching; the thread notices within a second."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- NVML --------------------------------------------------------------------------------

    def _nvml_events(self) -> tuple[Any, dict[Any, str]] | str:
        """(event set, handle key -> bus) with every GPU registered, or why not."""
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:  # no driver: the kernel log may still tell
            return _message(exc)
        event_set = None
        try:
            event_set = nvml.nvmlEventSetCreate()
            buses: dict[Any, str] = {}
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                bus = bus_key(_text(nvml.nvmlDeviceGetPciInfo(handle).busId))
                nvml.nvmlDeviceRegisterEvents(handle, _XID_EVENT, event_set)
                buses[_handle_key(handle)] = bus or f"index {index}"
            return event_set, buses
        except Exception as exc:  # NotSupported, FunctionNotFound, a GPU already lost
            if event_set is not None:
                _quietly(lambda: nvml.nvmlEventSetFree(event_set))
            _quietly(nvml.nvmlShutdown)
            return _message(exc)

    def _wait_nvml(self, event_set: Any, buses: dict[Any, str]) -> None:
        nvml = self._nvml
        try:
            while not self._stop.is_set():
                try:
                    data = nvml.nvmlEventSetWait_v2(event_set, _WAIT_MS)
                except pynvml.NVMLError_Timeout:
                    continue
                except Exception as exc:  # keep watching: the next wait may succeed
                    log.warning("xid wait failed", extra={"error": _message(exc)})
                    self._stop.wait(_WAIT_MS / 1000)
                    continue
                if not data.eventType & _XID_EVENT:
                    continue
                bus = buses.get(_handle_key(data.device))
                if bus is None:
                    log.debug("xid on an unknown device", extra={"xid": data.eventData})
                    continue
                self._xids.record(bus, int(data.eventData), self._clock())
                log.warning("xid", extra={"pci_bus_id": bus, "xid": int(data.eventData)})
        finally:
            _quietly(lambda: nvml.nvmlEventSetFree(event_set))
            _quietly(nvml.nvmlShutdown)

    # -- the kernel log ----------------------------------------------------------------------

    def _open_kmsg(self) -> int | str:
        try:
            return os.open(self._kmsg, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:  # absent in a container without /dev, or no CAP_SYSLOG
            return f"{self._kmsg}: {exc.strerror or exc}"

    def _read_kmsg(self, fd: int, before_s: float | None = None) -> None:
        """Every record from the start of the ring buffer, then new ones as they come; with
        `before_s` (seconds since boot), only those logged before it, and no waiting.

        /dev/kmsg gives one record per read and EAGAIN when none is left (EPIPE when records
        were overwritten before they were read); a plain file (a copy of the log, a test's
        host root) gives chunks of lines and then end of file, and is re-read as it grows."""
        boot_s = self._boot_time_s()
        pending = b""
        try:
            while not self._stop.is_set():
                try:
                    chunk = os.read(fd, _READ_BYTES)
                except BlockingIOError:
                    if before_s is not None:
                        return  # the backlog is read
                    select.select([fd], [], [], _WAIT_MS / 1000)
                    continue
                except BrokenPipeError:
                    continue  # records lost to the ring buffer; the next read goes on
                if not chunk:
                    if before_s is not None:
                        return
                    self._stop.wait(_WAIT_MS / 1000)
                    continue
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    found = parse_kmsg(line.decode(errors="replace"))
                    if found is None:
                        continue
                    if before_s is not None and found.since_boot_s >= before_s:
                        return  # NVML's events report it and those after it
                    self._xids.record(found.bus, found.code, boot_s + found.since_boot_s)
        finally:
            os.close(fd)

    def _boot_time_s(self) -> float:
        """When the host booted (Unix seconds): /proc/stat's btime, else from this clock."""
        try:
            for line in self._stat.read_text().splitlines():
                if line.startswith("btime "):
                    return float(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return self._clock() - time.monotonic()


def _handle_key(handle: Any) -> Any:
    """What identifies a device handle: a ctypes pointer by its address (each call returns a
    new pointer object), any other handle (the fake's) by its value."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return handle


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _message(exc: BaseException) -> str:
    if isinstance(exc, pynvml.NVMLError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _quietly(call: Callable[[], object]) -> None:
    try:
        call()
    except Exception as exc:  # cleanup must never mask what ended the watch
        log.debug("xid cleanup failed", extra={"error": _message(exc)})
