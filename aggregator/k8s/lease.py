"""Leader election among aggregator replicas with a coordination.k8s.io/v1 Lease.

One replica holds the Lease and does the cluster-wide work (node labels and conditions,
validation Jobs); the others serve reads. The algorithm is client-go's leaderelection: a
holder renews every retry period; a candidate takes over only when the record it sees has
not changed for a whole lease duration, timed on its own monotonic clock, so clock skew
between replicas does not matter. Writes carry the resourceVersion they read, so two
candidates cannot both win a takeover.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

log = logging.getLogger(__name__)

# One Lease read or write; a round is abandoned after twice the retry period anyway.
_TIMEOUT_S = 5


@dataclass(frozen=True)
class LeaseTiming:
    """client-go's defaults scaled down: 15 s lease, renewed every 2 s, given up after 10 s."""

    # A dead leader is replaced at most this long after its last renewal.
    lease_duration_s: float = 15.0
    # A leader that cannot renew for this long steps down, before anyone may take over.
    renew_deadline_s: float = 10.0
    # How often the leader renews and candidates retry.
    retry_period_s: float = 2.0


def _micro_time(now: datetime) -> str:
    # MicroTime wants exactly six fractional digits; isoformat() drops them at .000000.
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for one Lease; `is_leader` is set while this replica holds it."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        timing: LeaseTiming = LeaseTiming(),
    ):
        # Typed calls with JSON bodies: no discovery round trips at start-up, and MicroTimes
        # stay the strings the API server wants (the models would re-format them).
        self._leases = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing
        self.is_leader = asyncio.Event()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0

    def _get(self) -> dict[str, Any]:
        """The Lease as the API serves it (JSON, MicroTimes as strings); ApiException 404."""
        response = self._leases.read_namespaced_lease(
            self.name, self.namespace, _preload_content=False, _request_timeout=_TIMEOUT_S
        )
        return json.loads(response.data)

    async def run(self) -> None:
        """Campaign, then renew, until cancelled; releases the Lease when cancelled as leader."""
        try:
            while True:
                try:
                    held = await asyncio.wait_for(
                        asyncio.to_thread(self._try_acquire_or_renew),
                        timeout=self.timing.retry_period_s * 2,
                    )
                except Exception:  # noqa: BLE001 - a failed round is retried; counted by the loop
                    log.warning("lease round failed", exc_info=True, extra={"lease": self.name})
                    held = False
                now = time.monotonic()
                if held:
                    self._last_renew = now
                    if not self.is_leader.is_set():
                        log.info("became leader", extra={"lease": self.name, "id": self.identity})
                        self.is_leader.set()
                elif (
                    self.is_leader.is_set()
                    and now - self._last_renew > self.timing.renew_deadline_s
                ):
                    log.warning("lost leadership", extra={"lease": self.name, "id": self.identity})
                    self.is_leader.clear()
                await asyncio.sleep(self.timing.retry_period_s)
        finally:
            if self.is_leader.is_set():
                self.is_leader.clear()
                await asyncio.shield(asyncio.to_thread(self._release))

    def holder(self) -> str | None:
        """The current holder's identity, as stored (blocking; for tests and status pages)."""
        try:
            lease = self._get()
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return (lease.get("spec") or {}).get("holderIdentity")

    def _try_acquire_or_renew(self) -> bool:
        """One round; True when this replica holds the Lease afterwards."""
        now = datetime.now(UTC)
        duration = max(1, round(self.timing.lease_duration_s))
        try:
            lease = self._get()
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": duration,
                    "acquireTime": _micro_time(now),
                    "renewTime": _micro_time(now),
                    "leaseTransitions": 0,
                },
            }
            return self._write("create", body)
        spec = lease.get("spec") or {}
        record = (
            spec.get("holderIdentity"),
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseTransitions"),
        )
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        holder = spec.get("holderIdentity")
        expired = time.monotonic() - self._observed_at > self.timing.lease_duration_s
        if holder and holder != self.identity and not expired:
            return False
        taking_over = holder != self.identity
        spec = {
            **spec,
            "holderIdentity": self.identity,
            "leaseDurationSeconds": duration,
            "renewTime": _micro_time(now),
        }
        if taking_over:
            spec["acquireTime"] = _micro_time(now)
            spec["leaseTransitions"] = (spec.get("leaseTransitions") or 0) + 1
        return self._write("replace", {**lease, "spec": spec})

    def _write(self, verb: str, body: dict[str, Any]) -> bool:
        try:
            if verb == "create":
                self._leases.create_namespaced_lease(
                    self.namespace, body, _request_timeout=_TIMEOUT_S
                )
            else:
                self._leases.replace_namespaced_lease(
                    self.name, self.namespace, body, _request_timeout=_TIMEOUT_S
                )
        except client.ApiException as exc:
            if exc.status == 409:  # someone else wrote first: they win this round
                return False
            raise
        spec = body["spec"]
        self._observed = (
            spec["holderIdentity"],
            spec["renewTime"],
            spec.get("acquireTime"),
            spec.get("leaseTransitions"),
        )
        self._observed_at = time.monotonic()
        return True

    def _release(self) -> None:
        """Hand the Lease over at once on a clean shutdown: empty holder, 1 s duration."""
        try:
            lease = self._get()
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
            self._leases.replace_namespaced_lease(
                self.name, self.namespace, {**lease, "spec": spec}, _request_timeout=_TIMEOUT_S
            )
        except client.ApiException:
            log.warning("lease release failed", exc_info=True, extra={"lease": self.name})
