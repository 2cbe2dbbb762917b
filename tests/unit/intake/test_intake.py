"""The intake: the one door into the live state, each change one update with its verdicts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from plumb.aggregator.drift import DriftEngine, Transitions
from plumb.aggregator.drift.evaluation import Evaluator
from plumb.aggregator.intake.intake import Intake, StreamStart
from plumb.aggregator.recipes import ResolutionCache, load_catalog
from plumb.aggregator.settings import RecipeSettings
from plumb.aggregator.state.live import LiveState
from plumb.aggregator.store import NodeUpdate, StoredNode
from plumb.facts import Reading, content_hash
from plumb.sensors import GpuSensors

CATALOG = load_catalog()
RECIPE_DRIVER = "580.173.02"  # recipes/overlays: the EKS H100 driver pin


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


class RecordingWriter:
    """The writer's surface the intake uses; holds what was submitted."""

    def __init__(self, room: bool = True) -> None:
        self.has_room = room
        self.updates: list[NodeUpdate] = []
        self.dropped = 0
        self.done = 0  # nothing is ever written here

    @property
    def submitted(self) -> int:
        return len(self.updates)

    def room_for(self, node: str) -> bool:
        self.dropped += not self.has_room
        return self.has_room

    def submit(self, update: NodeUpdate) -> bool:
        self.updates.append(update)
        return True


def h100(driver: str = RECIPE_DRIVER, gpus: int = 2) -> dict[str, Reading]:
    """An EKS H100 node; with the recipe's driver it matches its recipe."""
    facts: dict[str, object] = {
        "host.cloud_provider": "aws",
        "host.instance_type": "p5.48xlarge",
        "host.os_id": "ubuntu",
        "host.os_version_id": "22.04",
        "host.kernel": "5.15.0-1058-aws",
        "driver.driver_version": driver,
        "driver.cuda_driver_version": "13.0",
    }
    for i in range(gpus):
        facts |= {
            f"gpus[{i}].index": i,
            f"gpus[{i}].name": "NVIDIA H100 80GB HBM3",
            f"gpus[{i}].pci_device_id": "0x2330",
        }
    return {path: Reading.ok(value) for path, value in facts.items()}  # type: ignore[arg-type]


def make(
    writer: RecordingWriter | None = None,
    touched: Callable[[str], None] | None = None,
    sensed: Callable[[str], None] | None = None,
    seen: Callable[[str], None] | None = None,
):
    clock = Clock()
    state = LiveState()
    drift = DriftEngine(CATALOG.drift, clock, xids=CATALOG.xids)
    evaluator = Evaluator(state, ResolutionCache(CATALOG), RecipeSettings(), drift)
    counted: list[Transitions] = []
    writer = writer or RecordingWriter()
    intake = Intake(
        state,
        writer,
        evaluator,
        counted.append,
        touched or (lambda name: None),
        clock,
        seen=seen or (lambda name: None),
        sensed=sensed or (lambda name: None),
        replica="r1",
        write_heartbeats=False,
        keep_history=True,
    )
    return intake, state, evaluator, writer, counted


def report(intake: Intake, facts: dict[str, Reading], seq: int, session: str | None = None):
    start = StreamStart(session, "boot-1", "0.1.0") if session else None
    return intake.report("gpu-1", seq, facts, content_hash(facts), start)


def test_first_facts_connect_the_node_and_are_stored_without_history():
    intake, state, _, writer, _ = make()
    assert report(intake, h100(), 1, session="s1") == len(writer.updates)  # its ticket
    node = state.get("gpu-1")
    assert node is not None and node.connected and node.session_id == "s1"
    (update,) = [u for u in writer.updates if u.facts is not None]
    assert update.connected is True and update.changes == ()
    assert update.facts == h100()


def test_a_fact_change_is_one_update_carrying_the_findings_it_opened():
    intake, _, evaluator, writer, counted = make()
    report(intake, h100(), 1, session="s1")
    writer.updates.clear()
    report(intake, h100(driver="550.163.01"), 2)  # the R550 branch: end of life, below 580
    (update,) = writer.updates
    assert [c.path for c in update.changes] == ["driver.driver_version"]
    assert update.facts == h100(driver="550.163.01")
    opened = {(f.kind, f.component, f.severity) for f in update.opened}
    assert ("constraint", "driver-minimum", "critical") in opened
    assert {f.id for t in counted for f in t.opened} >= {f.id for f in update.opened}
    assert {f.id for f in evaluator.drift.open_findings("gpu-1")} >= {f.id for f in update.opened}


def test_a_full_write_queue_leaves_the_node_as_it_was():
    writer = RecordingWriter()
    intake, state, evaluator, _, _ = make(writer)
    report(intake, h100(), 1, session="s1")
    held = state.get("gpu-1").facts  # type: ignore[union-attr]
    writer.has_room = False
    writer.updates.clear()
    assert report(intake, h100(driver="550.163.01"), 2) is None
    assert state.get("gpu-1").facts is held  # type: ignore[union-attr]
    assert writer.updates == [] and writer.dropped == 1
    assert not evaluator.drift.open_findings("gpu-1")


def test_a_stream_that_ends_disconnects_the_node_only_if_it_last_reported():
    intake, state, _, writer, _ = make()
    report(intake, h100(), 1, session="a")
    intake.disconnected("gpu-1", "b")  # a newer stream that never sent facts ends first
    assert state.get("gpu-1").connected  # type: ignore[union-attr]
    intake.disconnected("gpu-1", "a")
    assert not state.get("gpu-1").connected  # type: ignore[union-attr]
    assert writer.updates[-1].connected is False


def test_cluster_facts_overlay_the_agents_and_are_evaluated_like_them():
    intake, state, _, writer, _ = make()
    report(intake, h100(), 1, session="s1")
    writer.updates.clear()
    intake.cluster_facts("gpu-1", {"host.kubelet_version": Reading.ok("v1.33.5-eks-113cf36")})
    node = state.get("gpu-1")
    assert node.value("host.kubelet_version") == "v1.33.5-eks-113cf36"  # type: ignore[union-attr]
    assert "host.kubelet_version" not in node.reported  # type: ignore[union-attr]
    (update,) = writer.updates
    assert [c.path for c in update.changes] == ["host.kubelet_version"]


def test_facts_are_stored_as_the_agents_own_until_the_cluster_overlays_them():
    intake, _, _, writer, _ = make()
    report(intake, h100(), 1, session="s1")
    assert writer.updates[-1].facts is not None and writer.updates[-1].facts_own is True
    intake.cluster_facts("gpu-1", {"host.kubelet_version": Reading.ok("v1.33.5-eks-113cf36")})
    assert writer.updates[-1].facts_own is False
    intake.cluster_facts("gpu-1", None)  # the Node is gone from the API: the agent's alone
    assert writer.updates[-1].facts == h100() and writer.updates[-1].facts_own is True


def test_accepting_a_baseline_stores_it_and_closes_what_it_settles():
    intake, state, evaluator, writer, _ = make()
    report(intake, h100(gpus=2), 1, session="s1")
    report(intake, h100(gpus=1), 2)
    assert any(f.kind == "baseline" for f in evaluator.drift.open_findings("gpu-1"))
    writer.updates.clear()
    baseline = intake.accept_baseline(state.get("gpu-1"))  # type: ignore[arg-type]
    assert baseline.gpu_count == 1
    (update,) = writer.updates
    assert update.baseline == baseline
    assert any(f.kind == "baseline" for f in update.closed)
    assert not any(f.kind == "baseline" for f in evaluator.drift.open_findings("gpu-1"))


async def test_restored_nodes_are_disconnected_until_evaluated_then_have_their_findings():
    intake, state, evaluator, writer, _ = make()
    stored = StoredNode(
        name="gpu-1",
        connected=True,
        boot_id="boot-1",
        agent_version="0.1.0",
        first_seen_at=datetime(2026, 11, 1, tzinfo=UTC),
        last_report_at=datetime(2026, 11, 28, tzinfo=UTC),
        facts=h100(driver="550.163.01"),
    )
    (node,) = intake.restore([stored], [], {})
    assert not node.connected and "gpu-1" not in evaluator.resolutions
    await intake.evaluate_restored([node])
    assert node.content_hash == content_hash(stored.facts)
    assert any(f.component == "driver-minimum" for f in evaluator.drift.open_findings("gpu-1"))
    assert all(not u.changes for u in writer.updates)  # restoring stores no fact again
    assert state.get("gpu-1") is node


def test_a_removed_node_leaves_the_live_state_its_recipe_and_the_store():
    intake, state, evaluator, writer, _ = make()
    report(intake, h100(driver="550.163.01"), 1, session="s1")
    assert evaluator.drift.open_findings("gpu-1")
    intake.disconnected("gpu-1", "s1")
    intake.remove(state.get("gpu-1"))  # type: ignore[arg-type]
    assert state.get("gpu-1") is None and "gpu-1" not in evaluator.resolutions
    assert evaluator.drift.open_findings("gpu-1") == []
    removal = writer.updates[-1]
    assert removal.node == "gpu-1" and removal.removed and removal.keep_history
    assert removal.closed and all(f.closed_at is not None for f in removal.closed)


def test_only_nodes_silent_longer_than_the_expiry_are_removed():
    intake, state, _, _, _ = make()
    report(intake, h100(), 1, session="s1")
    intake.disconnected("gpu-1", "s1")
    last = state.get("gpu-1").last_report_at  # type: ignore[union-attr]
    assert intake.expire(last + timedelta(hours=1), timedelta(days=7)) == []
    assert intake.expire(last + timedelta(days=8), timedelta(days=7)) == ["gpu-1"]
    assert state.get("gpu-1") is None


def test_every_change_of_what_a_node_shows_touches_it_after_the_change():
    state_of: list[LiveState] = []
    told, seen = [], []

    def tell(how: str):
        def told_of(name: str) -> None:
            # Each must see the change already made: metrics render the node right then.
            told.append((how, name))
            seen.append(_shown(state_of[0], name))

        return told_of

    intake, state, _, _, _ = make(touched=tell("touched"), sensed=tell("sensed"), seen=tell("seen"))
    state_of.append(state)
    report(intake, h100(), 1, session="s1")
    intake.heartbeat("gpu-1")
    intake.sensors("gpu-1", "s1", ())
    intake.heartbeat("gpu-1", "s1", (GpuSensors(0, temperature_celsius=40),))
    intake.disconnected("gpu-1", "s1")
    intake.remove(state.get("gpu-1"))  # type: ignore[arg-type]
    # A heartbeat moves the report time alone, new readings only the sensor gauges: each
    # tells just what shows it; a report standing in for a heartbeat tells both, once each.
    assert [how for how, _ in told] == [
        "touched",
        "seen",
        "sensed",
        "sensed",
        "seen",
        "touched",
        "touched",
    ]
    assert {name for _, name in told} == {"gpu-1"}
    first, beat, sensed, readings, beat_with, down, gone = seen
    assert first[0] is True and first[1] is not None  # connected, with its report time
    assert beat[1] > first[1]
    assert sensed[2] is not None
    assert readings[2] is not None and readings[2] is not sensed[2]
    assert beat_with[1] > beat[1]
    assert down[0] is False and down[2] is None  # readings go with the stream
    assert gone is None


def _shown(state: LiveState, name: str):
    node = state.get(name)
    return None if node is None else (node.connected, node.last_report_at, node.sensors)


def test_pool_driver_versions_follow_changes_and_removals():
    intake, _, evaluator, _, _ = make()
    pool = "eks/h100/ubuntu/any/any"  # what h100() resolves to
    for i, driver in enumerate([RECIPE_DRIVER, RECIPE_DRIVER, "570.86.15"]):
        facts = h100(driver)
        intake.report(f"gpu-{i}", 1, facts, content_hash(facts), StreamStart(f"s{i}", "b", "v"))
    assert evaluator.pool_driver_versions() == {pool: 2}
    facts = h100(RECIPE_DRIVER)  # the odd one out is upgraded
    intake.report("gpu-2", 2, facts, content_hash(facts), None)
    assert evaluator.pool_driver_versions() == {pool: 1}
    facts = h100("580.95.05")
    intake.report("gpu-1", 2, facts, content_hash(facts), None)
    assert evaluator.pool_driver_versions() == {pool: 2}
    evaluator.forget("gpu-1")
    assert evaluator.pool_driver_versions() == {pool: 1}
