"""A real capture replayed by `plumb-agent --simulate` reaches a real `plumb serve` unchanged,
and gets its verdicts there.

Expected values are written by hand from tests/data/real/qx-l40s.xml (an AWS g6e.2xlarge).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from conftest import BIN, ENV, stop, until

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "real" / "qx-l40s.xml"


def findings(aggregator) -> set[tuple[str, str, str]]:
    return {(f["kind"], f["component"], f["severity"]) for f in aggregator.json("/v1/drift")}


def edit(capture: Path, old: str, new: str) -> None:
    text = capture.read_text()
    assert old in text, old
    capture.write_text(text.replace(old, new))


def test_a_replayed_capture_reaches_the_aggregator_as_captured(aggregator, tmp_path):
    capture = tmp_path / "g6e.xml"
    shutil.copy(CAPTURE, capture)
    once = subprocess.run(
        [str(BIN / "plumb-agent"), "--simulate", str(capture), "--node-name", "g6e", "--once"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )
    assert once.returncode == 0, once.stderr
    printed = json.loads(once.stdout)["facts"]

    log = (tmp_path / "agent.log").open("a")
    agent = subprocess.Popen(
        [
            str(BIN / "plumb-agent"),
            "--aggregator",
            aggregator.grpc,
            "--node-name",
            "g6e",
            "--simulate",
            str(capture),
            "--poll-interval",
            "0.2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=ENV,
    )
    try:
        until(lambda: aggregator.node("g6e"), what="the replayed node")
        facts = aggregator.json("/v1/nodes/g6e")["facts"]
        assert facts == printed  # what --once prints is what the aggregator holds

        def value(reading):
            return reading["value"] if reading["status"] == "ok" else reading["status"]

        assert value(facts["driver"]["driver_version"]) == "595.91.07"
        assert value(facts["driver"]["cuda_driver_version"]) == "13.2"
        assert value(facts["driver"]["nvml_version"]) == "not_supported"
        assert len(facts["gpus"]) == 1
        gpu = {name: value(reading) for name, reading in facts["gpus"][0].items()}
        assert (
            gpu
            | {
                "name": "NVIDIA L40S",
                "uuid": "GPU-00000000-0000-0000-0000-000000000000",
                "pci_bus_id": "00000000:30:00.0",
                "pci_device_id": "0x26B9",
                "architecture": "ada",
                "memory_total_bytes": 46068 << 20,
                "vbios_version": "95.02.66.00.15",
                "inforom_version": "G133.0242.00.03",
                "serial": "1650000000001",
                "persistence_mode": True,
                "mig_mode_current": "not_supported",
                "ecc_mode_current": True,
                "ecc_uncorrected_volatile": 0,
                "pcie_link_gen_current": 4,
                "pcie_link_gen_max": 4,
                "pcie_link_width_current": 8,
                "pcie_link_width_max": 16,
                "power_limit_watts": 350.0,
                "clock_sm_max_mhz": 2520,
                "clock_memory_max_mhz": 9001,
                "gsp_firmware_version": "595.91.07",
                "addressing_mode": "hmm",
                "fabric_state": "not_supported",
            }
            == gpu
        )
        assert {value(r) for r in facts["host"].values()} == {"not_supported"}

        # The g6e's verdicts (tests/unit/drift/test_captures.py gives the reasons): R595 is
        # inside the recipe's range and the host image owns the driver, x8 is the shape's slot.
        assert findings(aggregator) == set()

        # Editing the capture changes the node: 580.95.05 is still inside the recipe's range, so
        # only the move from its baseline shows, a warning.
        edit(
            capture,
            "<driver_version>595.91.07</driver_version>",
            "<driver_version>580.95.05</driver_version>",
        )
        until(
            lambda: aggregator.node("g6e")["driver_version"] == "580.95.05",
            what="the edited driver version",
        )
        until(
            lambda: findings(aggregator) == {("baseline", "driver.driver_version", "warning")},
            what="the baseline finding of the edited driver",
        )
        # The link training down from the node's own x8 to x4 is a fault.
        edit(
            capture,
            "<current_link_width>8x</current_link_width>",
            "<current_link_width>4x</current_link_width>",
        )
        until(
            lambda: (
                findings(aggregator)
                == {
                    ("baseline", "driver.driver_version", "warning"),
                    ("health", "gpu0/pcie-width", "warning"),
                }
            ),
            what="the PCIe width finding",
        )
    finally:
        stop(agent)
