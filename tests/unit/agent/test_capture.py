"""Real captures replayed: importer -> profile -> FakeNvml -> the real NVML collector.

Every expected value below was written by hand from reading the capture file in
tests/data/real/ (README there gives each file's source), never from the importer's output.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import yaml

from plumb.agent import main as agent_main
from plumb.agent.collect import collect_all, sensors
from plumb.agent.simulate import units
from plumb.agent.simulate.node import Simulation
from plumb.agent.simulate.profile import MAX_FILE_BYTES, ProfileError, read_profile

REAL = Path(__file__).resolve().parents[2] / "data" / "real"
MiB = 1 << 20

# file: what nvidia-smi printed (node-wide, then GPU 0), by hand from the capture.
CAPTURES = {
    "qx-h100.xml": {
        "driver.driver_version": "580.105.08",
        "driver.cuda_driver_version": "13.0",
        "gpus": 8,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:53:00.0",
        "pci_device_id": "0x2330",
        "architecture": "hopper",
        "memory_total_bytes": 81559 * MiB,
        "vbios_version": "96.00.99.00.01",
        "inforom_version": "G520.0200.00.05",
        "serial": "1650000000001",
        "persistence_mode": True,
        "mig_mode_current": False,
        "mig_mode_pending": False,
        "ecc_mode_current": True,
        "ecc_uncorrected_volatile": 0,
        "ecc_uncorrected_aggregate": 0,
        "pcie_link_gen_current": 5,
        "pcie_link_gen_max": 5,
        "pcie_link_width_current": 16,
        "pcie_link_width_max": 16,
        "power_limit_watts": 700.0,
        "clock_sm_max_mhz": 1980,
        "clock_memory_max_mhz": 2619,
        "gsp_firmware_version": "580.105.08",
        "addressing_mode": "hmm",
        "c2c_mode_enabled": False,
        "fabric_state": "completed",
        "fabric_clique_id": 0,
        "fabric_cluster_uuid": "00000000-0000-0000-0000-000000000000",
        "fabric_health": None,  # <summary>N/A</summary>
        "last_uuid": "GPU-00000007-0000-0000-0000-000000000007",
    },
    "qx-b200.xml": {
        "driver.driver_version": "580.105.08",
        "driver.cuda_driver_version": "13.0",
        "gpus": 8,
        "name": "NVIDIA B200",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:8F:00.0",
        "pci_device_id": "0x2901",
        "architecture": "blackwell",
        "memory_total_bytes": 183359 * MiB,
        "vbios_version": "97.00.FA.00.09",
        "inforom_version": "G525.0220.00.03",
        "persistence_mode": False,
        "mig_mode_current": False,
        "ecc_mode_current": True,
        "pcie_link_gen_current": 5,
        "pcie_link_width_current": 16,
        "pcie_link_width_max": 16,
        "power_limit_watts": 1000.0,
        "clock_sm_max_mhz": 1965,
        "clock_memory_max_mhz": 3996,
        "gsp_firmware_version": "580.105.08",
        "addressing_mode": "none",
        "c2c_mode_enabled": False,
        "fabric_state": "completed",
        "fabric_health": "healthy",
        "last_uuid": "GPU-00000007-0000-0000-0000-000000000007",
    },
    "qx-l40s.xml": {
        "driver.driver_version": "595.91.07",
        "driver.cuda_driver_version": "13.2",
        "gpus": 1,
        "name": "NVIDIA L40S",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:30:00.0",
        "pci_device_id": "0x26B9",
        "architecture": "ada",  # "Ada Lovelace"
        "memory_total_bytes": 46068 * MiB,
        "vbios_version": "95.02.66.00.15",
        "inforom_version": "G133.0242.00.03",
        "persistence_mode": True,
        "mig_mode_current": None,  # N/A
        "ecc_mode_current": True,
        "ecc_uncorrected_volatile": 0,
        "retired_pages_pending": None,  # N/A: the L40S remaps rows instead
        "remapped_rows_pending": 0,
        "pcie_link_gen_current": 4,
        "pcie_link_gen_max": 4,
        "pcie_link_width_current": 8,  # the g6e.2xlarge shape's x8
        "pcie_link_width_max": 16,
        "power_limit_watts": 350.0,
        "clock_sm_max_mhz": 2520,
        "clock_memory_max_mhz": 9001,
        "gsp_firmware_version": "595.91.07",
        "addressing_mode": "hmm",
        "c2c_mode_enabled": None,  # N/A
        "fabric_state": None,  # N/A
    },
    "telegraf_a100-sxm4-v12.xml": {
        "driver.driver_version": "535.54.03",
        "driver.cuda_driver_version": "12.2",
        "gpus": 1,  # attached_gpus says 4; the file describes one
        "name": "NVIDIA A100-SXM4-80GB",
        "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298",
        "pci_bus_id": "00000000:01:00.0",
        "pci_device_id": "0x20B2",
        "memory_total_bytes": 81920 * MiB,
        "persistence_mode": False,
        "mig_mode_current": True,
        "mig_mode_pending": True,
        "ecc_mode_current": True,
        "remapped_rows_pending": None,  # <remapped_rows>N/A</remapped_rows>
        "pcie_link_width_current": 16,
        "power_limit_watts": 500.0,
        "clock_sm_max_mhz": 1410,
        "addressing_mode": "none",
        "c2c_mode_enabled": None,  # no <c2c_mode> in this layout
    },
    "telegraf_a10g.xml": {
        "driver.driver_version": "515.105.01",
        "driver.cuda_driver_version": "11.7",
        "gpus": 1,
        "name": "NVIDIA A10G",
        "uuid": "GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94",
        "pci_bus_id": "00000000:00:1E.0",
        "pci_device_id": "0x0000",  # scrubbed to 000000DE by its owner
        "memory_total_bytes": 23028 * MiB,
        "serial": "0000000000000",
        "mig_mode_current": None,
        "ecc_mode_current": True,
        "pcie_link_gen_current": 1,  # idle: the link trains down
        "pcie_link_gen_max": 4,
        "pcie_link_width_current": 8,
        "power_limit_watts": 300.0,  # v11's <power_limit>
        "clock_memory_max_mhz": 6251,
        "addressing_mode": None,  # v11 has no <addressing_mode>
    },
    "mock-nvml-config-h100.yaml": {
        "driver.driver_version": "550.163.01",
        "driver.nvml_version": "12.550.163.01",
        "driver.cuda_driver_version": "12.4",
        "gpus": 8,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-01000100-0000-0000-0000-000000000000",
        "pci_bus_id": "00000000:1A:00.0",  # "0000:1A:00.0" in NVML's 8-digit-domain form
        "pci_device_id": "0x2330",
        "compute_capability": "9.0",
        "memory_total_bytes": 85899345920,
        "vbios_version": "96.00.74.00.09",
        "inforom_version": "H100.0200.00.04",
        "serial": "1562821083900",
        "power_limit_watts": 700.0,
        "clock_sm_max_mhz": 1980,
        "nvlink_links_total": 18,
        "nvlink_links_up": 18,  # four NVSwitches declared
        "gsp_firmware_version": "550.163.01",
        "c2c_mode_enabled": None,  # c2c_enabled: false
        "fabric_state": "completed",  # state: auto, no fake fabric manager
        "fabric_cluster_uuid": "00000000-0000-0000-0000-000000000001",
        "last_uuid": "GPU-01000100-0000-0000-0000-000000000007",
    },
    "mock-nvml-config-b200.yaml": {
        "driver.driver_version": "560.35.03",
        "driver.cuda_driver_version": "12.6",
        "gpus": 8,
        "name": "NVIDIA B200",
        "uuid": "GPU-b2000000-0000-0000-0000-000000000000",
        "serial": "1562849203700",  # the device entry's, over the defaults'
        "pci_device_id": "0x2340",
        "pcie_link_gen_max": 6,
        "power_limit_watts": 1000.0,
        "nvlink_links_total": 18,
        "nvlink_links_up": 0,  # no NVSwitch: the mock resolves no active link
        "fabric_state": None,  # no fabric block
    },
}


def _value(reading):
    return reading.value if reading.status == "ok" else None


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_a_replayed_capture_gives_the_facts_it_holds(name, tmp_path, gpu_fields):
    expected = dict(CAPTURES[name])
    facts = collect_all(Simulation(str(REAL / name), "real-0", tmp_path).sources())

    count = expected.pop("gpus")
    assert {p.split("].")[0] for p in facts if p.startswith("gpus[")} == {
        f"gpus[{i}" for i in range(count)
    }
    if last := expected.pop("last_uuid", None):
        assert facts[f"gpus[{count - 1}].uuid"].value == last
    for path in [p for p in expected if p.startswith("driver.")]:
        assert _value(facts[path]) == expected.pop(path), path
    gpu0 = gpu_fields(facts, 0)
    for field, value in expected.items():
        assert _value(gpu0[field]) == value, field
        if value is None:
            assert gpu0[field].status == "not_supported", field


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_what_a_capture_lacks_is_not_supported_never_made_up(name, tmp_path, gpu_fields):
    facts = collect_all(Simulation(str(REAL / name), "real-0", tmp_path).sources())
    host_side = [p for p in facts if p.startswith(("host.", "cuda.", "nccl."))]
    assert "host.kernel" in host_side and "host.architecture" in host_side
    assert all(facts[p].status == "not_supported" for p in host_side)
    assert facts["driver.kernel_module_flavour"].status == "not_supported"
    if name.endswith(".xml"):  # nvidia-smi -q prints neither
        assert facts["driver.nvml_version"].status == "not_supported"
        assert gpu_fields(facts, 0)["compute_capability"].status == "not_supported"
        assert gpu_fields(facts, 0)["nvlink_links_total"].status == "not_supported"


def test_a_partial_capture_says_how_many_gpus_the_node_has():
    profile = read_profile(REAL / "telegraf_a100-sxm4-v12.xml")
    assert profile.gpus.count == 1
    assert "the node has 4 GPUs, the capture describes 1" in profile.description


def test_captures_are_recognised_by_content_not_name(tmp_path):
    xml = tmp_path / "node.yaml"
    shutil.copy(REAL / "qx-l40s.xml", xml)
    mock = tmp_path / "config.txt"
    shutil.copy(REAL / "mock-nvml-config-h100.yaml", mock)
    assert read_profile(xml).gpu_spec(0).name == "NVIDIA L40S"
    assert read_profile(mock).gpu_spec(0).name == "NVIDIA H100 80GB HBM3"


def test_editing_a_capture_changes_the_node(tmp_path):
    path = tmp_path / "l40s.xml"
    shutil.copy(REAL / "qx-l40s.xml", path)
    sim = Simulation(str(path), "real-0", tmp_path / "work")
    assert collect_all(sim.sources())["gpus[0].pcie_link_width_current"].value == 8

    text = path.read_text()
    text = text.replace(
        "<driver_version>595.91.07</driver_version>", "<driver_version>580.95.05</driver_version>"
    )
    text = text.replace(
        "<current_link_width>8x</current_link_width>", "<current_link_width>4x</current_link_width>"
    )
    text = text.replace("<gpu_temp>29 C</gpu_temp>", "<gpu_temp>[Unknown Error]</gpu_temp>")
    tmp = tmp_path / "l40s.tmp"
    tmp.write_text(text)
    tmp.replace(path)
    facts = collect_all(sim.sources())

    assert facts["driver.driver_version"].value == "580.95.05"
    assert facts["gpus[0].pcie_link_width_current"].value == 4
    # Replayed as NVML's Unknown error: a sensor reading, so absent, and no fact at all.
    assert sensors.read(sim.sources())[0].temperature_celsius is None
    assert not any("temperature" in p for p in facts)


def test_a_broken_capture_edit_keeps_the_last_good_one(tmp_path, caplog):
    path = tmp_path / "l40s.xml"
    shutil.copy(REAL / "qx-l40s.xml", path)
    sim = Simulation(str(path), "real-0", tmp_path / "work")
    before = collect_all(sim.sources())
    path.write_text(
        path.read_text().replace(
            "<max_link_width>16x</max_link_width>", "<max_link_width>wide</max_link_width>"
        )
    )
    with caplog.at_level(logging.WARNING, logger="plumb.agent.simulate.node"):
        assert collect_all(sim.sources()) == before
    (record,) = [r for r in caplog.records if r.name == "plumb.agent.simulate.node"]
    assert "max_link_width" in record.error and "'wide'" in record.error


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"<nvidia_smi_log><driver_version>1</driver_version></nvidia_smi_log>", "no <gpu>"),
        (b"<html><body/></html>", "not nvidia-smi's <nvidia_smi_log>"),
        (b"<nvidia_smi_log><gpu>", "invalid XML"),
        (
            b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]>'
            b"<nvidia_smi_log>&b;</nvidia_smi_log>",
            "refused XML construct",
        ),
    ],
)
def test_a_bad_capture_is_refused_with_the_reason(tmp_path, text, message):
    path = tmp_path / "bad.xml"
    path.write_bytes(text)
    with pytest.raises(ProfileError, match="capture") as caught:
        read_profile(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_a_file_past_the_size_bound_is_refused_unread(tmp_path):
    path = tmp_path / "huge.xml"
    path.write_bytes(b"<" + b" " * MAX_FILE_BYTES)
    with pytest.raises(ProfileError, match="larger than 8 MiB"):
        read_profile(path)


@pytest.mark.parametrize("name", ["qx-h100.xml", "mock-nvml-config-b200.yaml"])
def test_profile_import_prints_a_profile_that_replays_the_same_node(name, tmp_path, capsys):
    assert agent_main.main(["profile", "import", str(REAL / name)]) == 0
    printed = capsys.readouterr().out
    data = yaml.safe_load(printed)
    assert data["host"] is None
    assert "uuid" in data["gpus"]["overrides"][7]  # per-GPU identities, the rest in the template
    edited = tmp_path / "imported.yaml"
    edited.write_text(printed)

    imported = collect_all(Simulation(str(edited), "real-0", tmp_path / "a").sources())
    replayed = collect_all(Simulation(str(REAL / name), "real-0", tmp_path / "b").sources())
    assert imported == replayed


def test_profile_import_of_a_bad_file_exits_2_naming_it(tmp_path, capsys):
    bad = tmp_path / "bad.xml"
    bad.write_text("<nvidia_smi_log/>")
    assert agent_main.main(["profile", "import", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


# -- the value parsers, over the spellings nvidia-smi uses ----------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "N/A",
        "[N/A]",
        "Not Supported",
        "[Not Supported]",
        "Requested functionality has been deprecated",
        " ",
    ],
)
def test_every_missing_spelling_is_missing(text):
    assert units.is_missing(text)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[Unknown Error]", "UNKNOWN"),
        ("GPU is lost", "GPU_IS_LOST"),
        ("Insufficient Permissions", "NO_PERMISSION"),
    ],
)
def test_a_failed_read_names_the_nvml_error(text, error):
    assert units.unread(text) == units.Unread(error)


def test_values_parse_with_their_units():
    assert units.mebibytes("81559 MiB") == 81559
    assert units.mebibytes("80 GiB") == 81920
    assert units.quantity("350.00 W", "W") == 350.0
    assert units.quantity("2520 MHz", "MHz") == 2520
    assert units.link_width("16x") == 16 and units.link_width("x8") == 8
    assert units.enabled("Enabled") is True and units.enabled("Disabled") is False
    assert units.yes_no("No") is False
    assert units.architecture("Ada Lovelace") == "ada"
    assert units.architecture("Hopper") == "hopper"
    assert units.architecture("Quantum Foam") == "unknown"
    assert units.bus_id("0000:1a:00.0") == "00000000:1A:00.0"
    assert units.pci_device_id("26B910DE") == 0x26B9
    assert units.pci_device_id(0x233010DE) == 0x2330
    assert units.cuda_version("13.2") == 13020


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (lambda t: units.quantity(t, "W"), "350 MHz"),
        (units.mebibytes, "81559 parsecs"),
        (units.enabled, "Maybe"),
        (units.bus_id, "not:a:bus"),
        (units.cuda_version, "thirteen"),
    ],
)
def test_a_value_in_the_wrong_form_is_refused_quoting_it(parse, text):
    with pytest.raises(units.ValueProblem, match=repr(text).replace("(", r"\(")):
        parse(text)


def test_a_replayed_capture_reads_the_sensors_it_was_taken_with(tmp_path):
    sim = Simulation(str(REAL / "qx-l40s.xml"), "real-0", tmp_path / "work")
    (gpu,) = sensors.read(sim.sources())
    # qx-l40s.xml: <gpu_temp>29 C, <instant_power_draw>66.16 W, <clocks> <sm_clock>2040 MHz,
    # <mem_clock>9001 MHz, <utilization> 0 % and 0 %.
    assert (gpu.temperature_celsius, gpu.power_draw_watts) == (29, 66.16)
    assert (gpu.sm_clock_mhz, gpu.memory_clock_mhz) == (2040, 9001)
    assert (gpu.gpu_utilization_ratio, gpu.memory_utilization_ratio) == (0.0, 0.0)


def test_a_replayed_mock_nvml_config_reads_its_current_sensors(tmp_path):
    sim = Simulation(str(REAL / "mock-nvml-config-h100.yaml"), "real-0", tmp_path / "work")
    gpu = sensors.read(sim.sources())[0]
    # mock-nvml-config-h100.yaml: temperature_gpu_c 34, current_draw_mw 95000, sm_current
    # 345, memory_current 1593, utilization gpu 0 and memory 0.
    assert (gpu.temperature_celsius, gpu.power_draw_watts) == (34, 95.0)
    assert (gpu.sm_clock_mhz, gpu.memory_clock_mhz) == (345, 1593)
    assert (gpu.gpu_utilization_ratio, gpu.memory_utilization_ratio) == (0.0, 0.0)


def test_a_replayed_capture_reads_its_error_counters_and_clock_events(tmp_path):
    h100 = sensors.read(Simulation(str(REAL / "qx-h100.xml"), "h", tmp_path / "h").sources())
    # qx-h100.xml: <pci><replay_counter> 150 on GPU 0 (00000000:53:00.0), 106 on GPU 7
    # (00000000:CA:00.0); every <ecc_errors> correctable count 0; of <clocks_event_reasons>
    # only clocks_event_reason_gpu_idle is Active. nvidia-smi -q lists no NVLink counters.
    assert (h100[0].pcie_replay_count, h100[7].pcie_replay_count) == (150, 106)
    assert (h100[0].ecc_corrected_volatile, h100[0].ecc_corrected_aggregate) == (0, 0)
    assert h100[0].to_json()["clock_event_reasons"] == ["gpu_idle"]
    assert h100[0].nvlink_crc_flit_errors is None
    # telegraf_a100-sxm4-v12.xml: every clocks_event_reason_* is Not Active.
    a100 = Simulation(str(REAL / "telegraf_a100-sxm4-v12.xml"), "a", tmp_path / "a")
    assert sensors.read(a100.sources())[0].clock_event_reasons == 0
    # telegraf_a10g.xml (layout v11): <clocks_throttle_reasons>, gpu_idle Active.
    a10g = Simulation(str(REAL / "telegraf_a10g.xml"), "g", tmp_path / "g")
    assert sensors.read(a10g.sources())[0].to_json()["clock_event_reasons"] == ["gpu_idle"]


def test_correctable_ecc_is_every_correctable_location_summed(tmp_path):
    text = (REAL / "qx-l40s.xml").read_text()
    volatile, aggregate = text.split("<volatile>", 1)[1].split("<aggregate>", 1)
    volatile = volatile.replace(
        "<sram_correctable>0</sram_correctable>", "<sram_correctable>3</sram_correctable>"
    ).replace("<dram_correctable>0</dram_correctable>", "<dram_correctable>4</dram_correctable>")
    aggregate = aggregate.replace(
        "<dram_correctable>0</dram_correctable>", "<dram_correctable>41</dram_correctable>", 1
    )
    edited = text.split("<volatile>", 1)[0] + "<volatile>" + volatile + "<aggregate>" + aggregate
    edited = edited.replace(
        "<clocks_event_reason_hw_slowdown>Not Active</clocks_event_reason_hw_slowdown>",
        "<clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>",
    )
    path = tmp_path / "l40s.xml"
    path.write_text(edited)
    (gpu,) = sensors.read(Simulation(str(path), "real-0", tmp_path / "work").sources())
    assert (gpu.ecc_corrected_volatile, gpu.ecc_corrected_aggregate) == (3 + 4, 41)
    assert gpu.to_json()["clock_event_reasons"] == ["gpu_idle", "hw_slowdown"]
    # The uncorrectable ones, facts, are untouched: still 0.
    facts = collect_all(Simulation(str(path), "real-1", tmp_path / "w1").sources())
    assert facts["gpus[0].ecc_uncorrected_volatile"].value == 0


def test_a_replayed_mock_nvml_config_reads_its_counters(tmp_path):
    sim = Simulation(str(REAL / "mock-nvml-config-h100.yaml"), "real-0", tmp_path / "work")
    gpu = sensors.read(sim.sources())[0]
    # mock-nvml-config-h100.yaml: pcie.replay_counter 0; ecc single_bit totals 0;
    # clocks_throttle_reasons: gpu_idle true, the rest false; no NVLink error counters.
    assert gpu.pcie_replay_count == 0
    assert (gpu.ecc_corrected_volatile, gpu.ecc_corrected_aggregate) == (0, 0)
    assert gpu.to_json()["clock_event_reasons"] == ["gpu_idle"]
    assert (gpu.nvlink_replay_errors, gpu.nvlink_recovery_errors) == (None, None)
