"""Verdicts on the real machines of tests/data/real/, replayed through the agent's importer.

Each capture goes the way a node's facts go: the agent's capture replay and collectors
(`Simulation` + `collect_all`, what `plumb-agent --simulate FILE` runs), then the aggregator's
criteria inference, recipe resolution against the shipped recipes/ and the drift engine, which
takes a node's first facts as its baseline. The expected criteria and findings are written by
hand from the capture (README there gives each file's source) and the recipe data, each with
the reason an SRE would give; none is copied from the code's output.

Common to every capture: `nvidia-smi -q -x` and mock-NVML configs carry no host, cloud or
cluster facts, so the service is criteria.yaml's `fallback_service` (on-prem) and the os `any`;
no GPU Operator is seen, so the host image owns the driver (drift.yaml `driver_owner.default`)
and the driver is judged by the recipe's range (base.yaml: `driver.version >= 580`) and the
knowledge tables, never by the operator's 580.173.02 pin; the Kubernetes version is unknown,
so base.yaml's k8s-version constraint is `unknown`, which is reported and never a finding.
"""

from __future__ import annotations

import datetime as dt
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from plumb.agent.collect import collect_all
from plumb.agent.simulate.node import Simulation
from plumb.aggregator.drift import DriftEngine
from plumb.aggregator.recipes import Criteria, Resolution, infer_criteria, load_catalog, resolve
from plumb.facts import Reading

REAL = Path(__file__).resolve().parents[2] / "data" / "real"
CATALOG = load_catalog()
# driver_branches.yaml: R535 ended 2026-06, R570 2026-02; R580 runs to 2028-06, R595 to 2027-03.
AS_OF = dt.date(2026, 12, 1)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def replay(path: Path, work: Path) -> dict[str, Reading]:
    """The node's facts as the agent reports them from the capture at `path`."""
    return collect_all(Simulation(str(path), "real-0", work).sources())


def judge(engine: DriftEngine, facts: dict[str, Reading]) -> tuple[Resolution, list[tuple]]:
    """The node's resolution, and (kind, component, severity) of each open finding."""
    resolution = resolve(CATALOG, infer_criteria(facts, catalog=CATALOG), facts, as_of=AS_OF)
    engine.evaluate("real-0", facts, resolution, {})
    return resolution, sorted((f.kind, f.component, f.severity) for f in engine.open_findings())


def on_prem(accelerator: str) -> Criteria:
    return Criteria(service="on-prem", accelerator=accelerator)


# capture: (criteria, overlays applied, constraint statuses, open findings), by hand.
EXPECTED = {
    # 8x H100 80GB HBM3 (PCI 0x2330: gpus.yaml's H100 SXM5 row), 580.105.08 / CUDA 13.0: R580
    # is long-term to 2028-06, >= 580 and CUDA 13.0's 580.65.06, above the H100's 525. Every
    # GPU's fabric is Completed/Success: fabric manager ran and trained the NVSwitches, so its
    # version missing from nvidia-smi's output is no fault. PCIe gen 5 x16, ECC clean, no
    # pending remaps. A healthy HGX H100: no findings.
    "qx-h100.xml": (
        on_prem("h100"),
        ("base", "h100", "on-prem"),
        {"driver-minimum": "pass", "k8s-version": "unknown"},
        [],
    ),
    # 8x B200 (PCI 0x2901), the same driver 580.105.08 / 13.0, above the B200's 570.26; fabric
    # Completed with health Healthy. b200.yaml wants the open kernel modules, which nvidia-smi
    # does not print: unknown, not failed. No findings.
    "qx-b200.xml": (
        on_prem("b200"),
        ("base", "b200", "on-prem"),
        {"driver-minimum": "pass", "k8s-version": "unknown", "kernel-module-open": "unknown"},
        [],
    ),
    # 1x L40S (PCI 0x26B9) of an AWS g6e.2xlarge, 595.91.07 / 13.2: newer than the operator's
    # pin, but R595 is a production branch supported to 2027-03, >= 580 and CUDA 13.2's
    # 595.45.04; with the host owning the driver there is nothing to page about. PCIe gen 4 x8
    # of x16 is this shape's slot from its first boot, so it is the node's own baseline. No
    # NVLink, no fabric (N/A). No findings.
    "qx-l40s.xml": (
        on_prem("l40s"),
        ("base", "l40s", "on-prem"),
        {"driver-minimum": "pass", "k8s-version": "unknown"},
        [],
    ),
    # 1 of 4 A100-SXM4-80GB (PCI 0x20B2) with MIG on, 535.54.03 / CUDA 12.2, as of 2026-12-01:
    "telegraf_a100-sxm4-v12.xml": (
        on_prem("a100"),
        ("base", "a100", "on-prem"),
        {"driver-minimum": "fail", "k8s-version": "unknown"},
        [
            # R535 ended 2026-06: no more security or kernel-compatibility fixes.
            ("constraint", "driver-branch-eol", "critical"),
            # 535 is below the recipe's R580 floor (base.yaml driver-minimum, critical).
            ("constraint", "driver-minimum", "critical"),
            # Not here: a fabric-manager finding (A100s report no fabric state and the 4-GPU
            # HGX A100 board has no NVSwitch), or the R570 MIG known-bad row (another branch).
        ],
    ),
    # 1x A10G of an AWS g5 (its PCI id scrubbed to 0x0000, so the NVML name identifies it),
    # 515.105.01 / CUDA 11.7:
    "telegraf_a10g.xml": (
        on_prem("a10g"),
        ("base", "a10g", "on-prem"),
        {"driver-minimum": "fail", "k8s-version": "unknown"},
        [
            # R515 is not in driver_branches.yaml, but it predates R535, a long-term branch
            # that itself ended 2026-06: it is long past its end of life.
            ("constraint", "driver-branch-eol", "critical"),
            # 515 is below the recipe's R580 floor.
            ("constraint", "driver-minimum", "critical"),
            # Not here: PCIe gen 1 of 4 (an idle link trains down; the rule reads the max gen)
            # and x8 (the g5 slot, its baseline).
        ],
    ),
    # NVIDIA's mock HGX H100 board: 8x H100, 4 NVSwitches, fabric `auto` (trained, as the
    # importer replays it), no fabric manager package, 550.163.01 / CUDA 12.4:
    "mock-nvml-config-h100.yaml": (
        on_prem("h100"),
        ("base", "h100", "on-prem"),
        {"driver-minimum": "fail", "k8s-version": "unknown"},
        [
            # R550 is past end of life (driver_branches.yaml: eol past).
            ("constraint", "driver-branch-eol", "critical"),
            # 550 is below the recipe's R580 floor.
            ("constraint", "driver-minimum", "critical"),
            # Not here: fabric manager, since every GPU's fabric is trained; 18 of 18 NVLinks
            # are up.
        ],
    ),
    # NVIDIA's mock standalone B200 ("negative-control profile -- no NVSwitch, no
    # fabricmanager"): 8x NVIDIA B200 under the mock's PCI id 0x2340, which no B200 has (the
    # real one is 0x2901, qx-b200.xml), so the NVML name identifies it; 560.35.03 / CUDA 12.6:
    "mock-nvml-config-b200.yaml": (
        on_prem("b200"),
        ("base", "b200", "on-prem"),
        {"driver-minimum": "fail", "k8s-version": "unknown", "kernel-module-open": "unknown"},
        [
            # R560 is a new-feature branch past end of life.
            ("constraint", "driver-branch-eol", "critical"),
            # 560 is below the recipe's R580 floor.
            ("constraint", "driver-minimum", "critical"),
            # The B200 needs >= 570.26 (gpus.yaml, CUDA 12.8's first driver): it does not run.
            ("constraint", "gpu-minimum-driver", "critical"),
            # Not here: fabric manager (no fabric reported), and 0 of 18 NVLinks up, which is
            # the board's own baseline with no NVSwitch, not a link that went down.
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_replayed_capture_gets_the_verdicts_an_sre_would_give(name, tmp_path):
    criteria, applied, constraints, expected = EXPECTED[name]
    resolution, found = judge(
        DriftEngine(CATALOG.drift, Clock(), xids=CATALOG.xids), replay(REAL / name, tmp_path)
    )
    assert resolution.criteria == criteria
    assert resolution.applied == applied
    assert {c["name"]: c["status"] for c in resolution.constraints} == constraints
    assert resolution.driver_owner is not None and resolution.driver_owner.owner == "host"
    assert resolution.warnings == ()  # every GPU is in the catalog: none resolves as `any`
    assert found == expected


def test_every_machine_capture_has_its_verdicts():
    captures = {p.name for p in REAL.iterdir() if p.suffix in (".xml", ".yaml")}
    assert captures == set(EXPECTED)


def test_the_l40s_on_an_operator_owned_driver_is_ahead_of_its_recipe_and_only_warns(tmp_path):
    # Where the GPU Operator runs and owns the driver, 595.91.07 differs from its 580.173.02
    # pin: ahead of the recipe, inside every range and minimum, so a warning with both
    # remedies (roll back, or move the recipe), never a page.
    facts = replay(REAL / "qx-l40s.xml", tmp_path)
    facts["cluster.components.gpu_operator.version"] = Reading.ok("v26.7.0")
    engine = DriftEngine(CATALOG.drift, Clock(), xids=CATALOG.xids)
    resolution, found = judge(engine, facts)
    assert resolution.driver_owner is not None and resolution.driver_owner.owner == "operator"
    assert found == [("recipe", "driver", "warning")]
    (finding,) = engine.open_findings()
    assert (finding.expected, finding.observed) == ("580.173.02", "595.91.07")
    assert "ahead of its recipe" in finding.remediation


def edit(path: Path, *changes: tuple[str, str]) -> None:
    """Edit the capture in place, as a user editing it to simulate an upgrade or a fault."""
    text = path.read_text()
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)


def test_an_l40s_whose_link_drops_below_its_own_x8_gets_a_health_warning(tmp_path):
    # The g6e's x8 is its baseline and quiet; the same slot training down to x4 is a fault.
    capture = tmp_path / "l40s.xml"
    shutil.copy(REAL / "qx-l40s.xml", capture)
    engine = DriftEngine(CATALOG.drift, Clock(), xids=CATALOG.xids)
    assert judge(engine, replay(capture, tmp_path / "work"))[1] == []
    edit(
        capture,
        (
            "<current_link_width>8x</current_link_width>",
            "<current_link_width>4x</current_link_width>",
        ),
    )
    assert judge(engine, replay(capture, tmp_path / "work"))[1] == [
        ("health", "gpu0/pcie-width", "warning"),
    ]
    (finding,) = engine.open_findings()
    assert (finding.expected, finding.observed) == ("8 (baseline)", "4")


def test_an_h100_moved_to_an_old_driver_past_end_of_life_is_critical(tmp_path):
    # The healthy HGX H100 rolled back to 535.54.03 (CUDA 12.2): R535 ended 2026-06 and 535 is
    # below the recipe's R580 floor, both critical; the driver and CUDA version moved from the
    # node's baseline, warnings to accept or roll back.
    capture = tmp_path / "h100.xml"
    shutil.copy(REAL / "qx-h100.xml", capture)
    engine = DriftEngine(CATALOG.drift, Clock(), xids=CATALOG.xids)
    assert judge(engine, replay(capture, tmp_path / "work"))[1] == []
    edit(
        capture,
        (
            "<driver_version>580.105.08</driver_version>",
            "<driver_version>535.54.03</driver_version>",
        ),
        ("<cuda_version>13.0</cuda_version>", "<cuda_version>12.2</cuda_version>"),
    )
    assert judge(engine, replay(capture, tmp_path / "work"))[1] == [
        ("baseline", "driver.cuda_driver_version", "warning"),
        ("baseline", "driver.driver_version", "warning"),
        ("constraint", "driver-branch-eol", "critical"),
        ("constraint", "driver-minimum", "critical"),
    ]
