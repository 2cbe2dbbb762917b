"""XIDs on the agent: the kernel log parser, the NVML event path against the fake, the kmsg
fallback on a fake host root, and the bounded per-GPU facts.

The kernel log lines are written by hand in the form NVIDIA's XID documentation gives
(`NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.`), inside /dev/kmsg
records as the kernel documents them (Documentation/ABI/testing/dev-kmsg:
`priority,sequence,microseconds since boot,flags;message`, continuation lines indented).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pynvml
import pytest
import yaml
from timeouts import scaled

from plumb.agent.collect import collect_all
from plumb.agent.collect.xid import MAX_CODES, KmsgXid, XidLog, XidWatcher, bus_key, parse_kmsg
from plumb.agent.simulate.node import Simulation
from plumb.agent.simulate.nvml import FakeNvml
from plumb.agent.simulate.profile import ProfileError, load_profile, validate_profile
from plumb.facts import Reading

BOOT = 1764580000  # /proc/stat btime of the fake host: 2025-12-01 09:06:40 UTC

# Hand-written /dev/kmsg records: a driver load, a GPU's attach line and its continuation
# lines, XIDs on two GPUs, their echo lines, malformed records and an NVSwitch SXid.
KMSG = (Path(__file__).parent / "data" / "kmsg-xids.txt").read_text()


def test_the_parser_reads_code_gpu_and_time_of_each_xid_line():
    lines = KMSG.splitlines()
    assert parse_kmsg(lines[4]) == KmsgXid(
        "0000:3b:00",
        79,
        5210.334511,
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off"
        " the bus.",
    )
    found = [x for line in lines if (x := parse_kmsg(line))]
    assert [(x.bus, x.code) for x in found] == [
        ("0000:3b:00", 79),
        ("0000:18:00", 13),
        ("0000:18:00", 13),
        ("0000:18:00", 31),
    ]


@pytest.mark.parametrize(
    "record",
    [
        "",
        " SUBSYSTEM=pci",  # a continuation line
        "6,1022,4113002400,-;NVRM: GPU at PCI:0000:3b:00: GPU-9f1c3e1a",
        "4,1028,6300000000,-;NVRM: Xid (PCI:0000:18:00): DBE, no code",
        "4,abc,1,-;NVRM: Xid (PCI:0000:18:00): 48, bad sequence",
        "4,1029,1,-;nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal",
        "NVRM: Xid (PCI:0000:18:00): 48, no record prefix",
        "4,1030,1,-;NVRM: Xid (PCI:zz:18:00): 48, bad address",
    ],
)
def test_noise_and_malformed_records_are_no_xid(record):
    assert parse_kmsg(record) is None


def test_older_line_forms_still_parse():
    # Drivers before R418 wrote no "PCI:" and no pid; the address may carry a function.
    old = parse_kmsg("4,7,1000000,-;NVRM: Xid (0000:03:00): 43, Ch 00000010")
    assert old is not None and (old.bus, old.code, old.since_boot_s) == ("0000:03:00", 43, 1.0)
    fn = parse_kmsg("4,8,2000000,c;NVRM: Xid (PCI:0000:3B:00.0): 119, pid=1, name=x, Timeout")
    assert fn is not None and (fn.bus, fn.code) == ("0000:3b:00", 119)


def test_nvml_and_kernel_spellings_of_a_bus_id_meet():
    assert bus_key("00000000:3B:00.0") == bus_key("0000:3b:00") == "0000:3b:00"
    assert bus_key("not a bus") is None


def test_the_log_keeps_counts_per_code_sorted_and_bounded():
    log = XidLog()
    log.source = "nvml"
    for i in range(MAX_CODES + 4):  # codes 1..20, each seen a second later than the last
        log.record("0000:3b:00", i + 1, 1000.0 + i)
    log.record("0000:3b:00", 20, 2000.0)
    facts = log.readings("00000000:3B:00.0")
    assert facts["xid_count"] == Reading.ok(MAX_CODES + 5)  # every XID counts, kept or not
    codes = [facts[f"xids[{j}].code"].value for j in range(MAX_CODES)]
    assert codes == list(range(5, 21))  # the four seen first went
    assert f"xids[{MAX_CODES}].code" not in facts
    assert facts[f"xids[{MAX_CODES - 1}].count"] == Reading.ok(2)
    assert facts[f"xids[{MAX_CODES - 1}].last_seen_unix_s"] == Reading.ok(2000)
    assert log.readings("00000000:18:00.0") == {"xid_count": Reading.ok(0)}


def test_a_log_that_never_started_gives_no_facts_and_one_without_a_source_says_why():
    log = XidLog()
    assert log.readings("00000000:18:00.0") == {}
    log.problem = "no XID source: NVML events: Not Supported; /dev/kmsg: Permission denied"
    assert log.readings("00000000:18:00.0") == {"xid_count": Reading.failed(log.problem)}


def wait_for(check: Callable[[], object], timeout_s: float = 5.0) -> object:
    """Poll `check` until it is truthy; fail at the (suite-scaled) deadline."""
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.01)
    pytest.fail("timed out waiting for the watcher")


@pytest.fixture
def watched(profile_copy, tmp_path):
    """A simulated DGX H100 whose profile `edit` changes, and a started XID watcher on its
    NVML and the host root `root` (default: an empty one): (simulation, log, watcher, path)."""
    made = []

    def make(edit=None, root: Path | None = None, uptime_s: float | None = None):
        log = XidLog()
        path = profile_copy("dgx-h100", edit)
        sim = Simulation(str(path), "gpu-node-1", tmp_path / "work", log)
        nvml, root = sim.sources().nvml, root or tmp_path / "empty-root"
        if uptime_s is None:
            watcher = XidWatcher(nvml, root, log)
        else:
            watcher = XidWatcher(nvml, root, log, uptime=lambda: uptime_s)
        made.append(watcher)
        watcher.start()
        return sim, log, watcher, path

    yield make
    for watcher in made:
        watcher.stop()


def gpu_xids(facts: dict[str, Reading], index: int) -> dict[str, object]:
    prefix = f"gpus[{index}]."
    return {
        p.removeprefix(prefix): r.value if r.status == "ok" else r
        for p, r in facts.items()
        if p.startswith(prefix) and "xid" in p
    }


def test_nvml_events_of_the_fake_become_the_gpus_facts(watched, write_yaml):
    def schedule(d):
        d["xids"] = [{"gpu": 3, "code": 79}, {"gpu": 0, "code": 13}, {"gpu": 0, "code": 13}]

    sim, log, _, path = watched(schedule)
    assert log.source == "nvml"
    facts = wait_for(
        lambda: (f := collect_all(sim.sources()))["gpus[0].xid_count"].value == 2 and f
    )
    facts = wait_for(lambda: (f := collect_all(sim.sources()))["gpus[3].xid_count"].value and f)
    gpu3 = gpu_xids(facts, 3)
    assert gpu3.keys() == {"xid_count", "xids[0].code", "xids[0].count", "xids[0].last_seen_unix_s"}
    assert (gpu3["xid_count"], gpu3["xids[0].code"], gpu3["xids[0].count"]) == (1, 79, 1)
    assert abs(gpu3["xids[0].last_seen_unix_s"] - time.time()) < 600  # stamped on arrival
    assert gpu_xids(facts, 0)["xids[0].count"] == 2
    assert gpu_xids(facts, 5) == {"xid_count": 0}

    # An XID edited into the running node's profile comes at once; those delivered stay so.
    data = yaml.safe_load(path.read_text())
    data["xids"].append({"gpu": 5, "code": 48, "after_s": 0})
    write_yaml(path, data)
    facts = wait_for(lambda: (f := collect_all(sim.sources()))["gpus[5].xid_count"].value and f)
    assert gpu_xids(facts, 5)["xids[0].code"] == 48
    assert facts["gpus[3].xid_count"].value == 1 and facts["gpus[0].xid_count"].value == 2


def test_an_xid_not_yet_due_times_out_as_nvml_does():
    data = load_profile("l4").model_dump()
    data["xids"] = [{"gpu": 0, "code": 79, "after_s": 3600}]
    nvml = FakeNvml(validate_profile(data, Path("l4.yaml")), "n")
    nvml.nvmlInit()
    events = nvml.nvmlEventSetCreate()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, events)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait_v2(events, 10)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # the fake delivers XIDs only
        nvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeAll, events)
    nvml.nvmlEventSetFree(events)


def test_a_profile_xid_on_a_missing_gpu_is_refused_naming_the_field():
    data = load_profile("l4").model_dump()
    data["xids"] = [{"gpu": 1, "code": 79}]
    with pytest.raises(ProfileError, match=r"xids\.0\.gpu: no GPU 1 \(count is 1\)"):
        validate_profile(data, Path("l4.yaml"))


def fake_host(root: Path) -> Path:
    (root / "dev").mkdir(parents=True)
    (root / "proc").mkdir()
    (root / "dev" / "kmsg").write_text(KMSG)
    (root / "proc" / "stat").write_text(f"cpu  1 2 3 4\nbtime {BOOT}\nprocesses 4242\n")
    return root


def without_events(d):
    # GPU 3 at the kernel log's 3b:00; GPU 0 keeps its derived 18:00. NVML has no events.
    d["gpus"]["template"]["errors"] = {"nvmlDeviceRegisterEvents": "NOT_SUPPORTED"}
    d["gpus"]["overrides"] = {3: {"pci_bus_id": "00000000:3B:00.0"}}


def test_without_nvml_events_the_kernel_log_gives_xids_since_boot(watched, tmp_path):
    sim, log, _, _ = watched(without_events, fake_host(tmp_path / "host"))
    assert log.source == "kmsg"
    facts = wait_for(lambda: (f := collect_all(sim.sources()))["gpus[0].xid_count"].value and f)
    assert gpu_xids(facts, 3) == {
        "xid_count": 1,
        "xids[0].code": 79,
        "xids[0].count": 1,
        "xids[0].last_seen_unix_s": BOOT + 5210,  # 5210.334511 s after boot
    }
    assert gpu_xids(facts, 0) == {
        "xid_count": 3,
        "xids[0].code": 13,
        "xids[0].count": 2,
        "xids[0].last_seen_unix_s": BOOT + 6120,
        "xids[1].code": 31,
        "xids[1].count": 1,
        "xids[1].last_seen_unix_s": BOOT + 6200,
    }
    assert gpu_xids(facts, 1) == {"xid_count": 0}


def test_with_nvml_events_the_kernel_logs_earlier_xids_count_once(watched, tmp_path):
    # The agent (re)starts 6150 s after boot: the log's 79 and two 13s came before it, its 31
    # at 6200 s is NVML's to report (the profile delivers it), so nothing counts twice.
    def events(d):
        d["gpus"]["overrides"] = {3: {"pci_bus_id": "00000000:3B:00.0"}}
        d["xids"] = [{"gpu": 0, "code": 31}]

    sim, log, _, _ = watched(events, fake_host(tmp_path / "host"), uptime_s=6150.0)
    assert log.source == "nvml"
    facts = wait_for(
        lambda: (f := collect_all(sim.sources()))["gpus[0].xid_count"].value == 3 and f
    )
    gpu0 = gpu_xids(facts, 0)
    assert (gpu0["xids[0].code"], gpu0["xids[0].count"]) == (13, 2)
    assert gpu0["xids[0].last_seen_unix_s"] == BOOT + 6120
    assert (gpu0["xids[1].code"], gpu0["xids[1].count"]) == (31, 1)
    assert gpu_xids(facts, 3)["xids[0].last_seen_unix_s"] == BOOT + 5210


def test_lines_appended_to_the_kernel_log_are_read_as_they_come(watched, tmp_path):
    root = fake_host(tmp_path / "host")
    sim, _, _, _ = watched(without_events, root)
    wait_for(lambda: collect_all(sim.sources())["gpus[3].xid_count"].value == 1)
    with (root / "dev" / "kmsg").open("a") as kmsg:
        kmsg.write("4,1030,7000000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen")
        kmsg.flush()  # half a record: nothing yet
        kmsg.write(" off the bus.\n")
    wait_for(lambda: collect_all(sim.sources())["gpus[3].xids[0].count"].value == 2)


def test_with_neither_source_every_gpu_says_why(watched, tmp_path):
    sim, log, watcher, _ = watched(without_events, tmp_path / "no-kmsg")
    assert log.source is None
    facts = collect_all(sim.sources())
    reading = facts["gpus[0].xid_count"]
    assert reading.status == "error"
    assert "NVML events: Not Supported" in reading.error
    assert "dev/kmsg: No such file or directory" in reading.error
    assert not [p for p in facts if ".xids[" in p]
