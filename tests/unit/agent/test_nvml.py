"""The NVML collector: every field on its own, and no exception ever escapes."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from plumb.agent.collect import Sources, nvml
from plumb.agent.simulate.nvml import FakeNvml
from plumb.agent.simulate.profile import load_profile
from plumb.facts import Reading


def _sources(fake) -> Sources:
    return Sources(nvml=fake, host_root=Path("/nonexistent"), library_version=str)


class _Fake(FakeNvml):
    """FakeNvml for the l4 profile that counts init/shutdown and can be bent per test."""

    def __init__(self) -> None:
        super().__init__(load_profile("l4"), "node-a")
        self.shutdowns = 0

    def nvmlShutdown(self):
        self.shutdowns += 1
        super().nvmlShutdown()


@pytest.mark.parametrize(
    "code", [pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED]
)
def test_nvml_init_failure_fails_the_driver_facts_and_lists_no_gpus(code):
    class NoDriver(_Fake):
        def nvmlInit(self):
            raise pynvml.NVMLError(code)

    fake = NoDriver()
    facts = nvml.collect(_sources(fake))
    message = str(pynvml.NVMLError(code))

    assert facts == {f"driver.{n}": Reading.failed(message) for n in nvml.DRIVER_FIELDS}
    assert fake.shutdowns == 0


def test_nvml_is_shut_down_after_collecting():
    fake = _Fake()
    nvml.collect(_sources(fake))
    assert fake.shutdowns == 1


def test_a_failing_shutdown_keeps_the_facts():
    class BadShutdown(_Fake):
        def nvmlShutdown(self):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    assert nvml.collect(_sources(BadShutdown()))["gpus[0].name"] == Reading.ok("NVIDIA L4")


def test_the_cuda_driver_version_is_decoded():
    assert nvml.collect(_sources(_Fake()))["driver.cuda_driver_version"] == Reading.ok("13.0")


def test_a_gpu_whose_handle_fails_keeps_its_index_and_fails_the_rest():
    class LostGpu(_Fake):
        def nvmlDeviceGetHandleByIndex(self, index):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    facts = nvml.collect(_sources(LostGpu()))
    assert facts["gpus[0].index"] == Reading.ok(0)
    assert facts["gpus[0].uuid"] == Reading.failed("GPU is lost")
    assert len([p for p in facts if p.startswith("gpus[0].")]) == len(nvml._GPU_FIELDS)


def test_a_device_count_failure_keeps_the_driver_facts():
    class NoCount(_Fake):
        def nvmlDeviceGetCount(self):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    facts = nvml.collect(_sources(NoCount()))
    assert facts["driver.driver_version"] == Reading.ok("580.173.02")
    assert not any(p.startswith("gpus[") for p in facts)


def test_an_unexpected_exception_fails_only_its_field_and_names_its_type():
    class Buggy(_Fake):
        def nvmlDeviceGetVbiosVersion(self, handle):
            raise RuntimeError("boom")

    facts = nvml.collect(_sources(Buggy()))
    assert facts["gpus[0].vbios_version"] == Reading.failed("RuntimeError: boom")
    assert facts["gpus[0].power_limit_watts"] == Reading.ok(72.0)


def test_bytes_from_older_pynvml_builds_are_decoded():
    class OldPynvml(_Fake):
        def nvmlDeviceGetName(self, handle):
            return super().nvmlDeviceGetName(handle).encode()

        def nvmlSystemGetDriverVersion(self):
            return super().nvmlSystemGetDriverVersion().encode()

    facts = nvml.collect(_sources(OldPynvml()))
    assert facts["gpus[0].name"] == Reading.ok("NVIDIA L4")
    assert facts["driver.driver_version"] == Reading.ok("580.173.02")
    assert facts["gpus[0].pci_bus_id"] == Reading.ok("00000000:18:00.0")  # busId is bytes


def test_an_unknown_architecture_number_reads_unknown():
    class Future(_Fake):
        def nvmlDeviceGetArchitecture(self, device):
            return 99

    assert nvml.collect(_sources(Future()))["gpus[0].architecture"] == Reading.ok("unknown")


def test_architecture_names_come_from_pynvml():
    assert nvml.ARCHITECTURES[pynvml.NVML_DEVICE_ARCH_HOPPER] == "hopper"
    assert nvml.ARCHITECTURES[pynvml.NVML_DEVICE_ARCH_BLACKWELL] == "blackwell"
    assert nvml.ARCHITECTURES[pynvml.NVML_DEVICE_ARCH_ADA] == "ada"


@pytest.mark.parametrize(
    "code", [pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT]
)
def test_nvlink_rejected_at_link_zero_is_not_supported(code):
    class NoLinks(_Fake):
        def nvmlDeviceGetNvLinkState(self, device, link):
            raise pynvml.NVMLError(code)

    facts = nvml.collect(_sources(NoLinks()))
    assert facts["gpus[0].nvlink_links_up"] == Reading.not_supported()
    assert facts["gpus[0].nvlink_links_total"] == Reading.not_supported()


def test_nvlink_counts_present_links_and_those_up():
    class SomeLinks(_Fake):
        def nvmlDeviceGetNvLinkState(self, device, link):
            if link in (0, 1, 2, 5):
                return pynvml.NVML_FEATURE_ENABLED if link != 2 else pynvml.NVML_FEATURE_DISABLED
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    facts = nvml.collect(_sources(SomeLinks()))
    assert facts["gpus[0].nvlink_links_up"] == Reading.ok(3)
    assert facts["gpus[0].nvlink_links_total"] == Reading.ok(4)


def test_an_nvlink_error_past_link_zero_fails_both_counts():
    class FlakyLinks(_Fake):
        def nvmlDeviceGetNvLinkState(self, device, link):
            if link == 3:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
            return pynvml.NVML_FEATURE_ENABLED

    facts = nvml.collect(_sources(FlakyLinks()))
    assert facts["gpus[0].nvlink_links_up"] == Reading.failed("Timeout")
    assert facts["gpus[0].nvlink_links_total"] == Reading.failed("Timeout")


def test_mig_enabled_and_pending_are_read_separately():
    class Mig(_Fake):
        def nvmlDeviceGetMigMode(self, device):
            return [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_DISABLE]

    facts = nvml.collect(_sources(Mig()))
    assert facts["gpus[0].mig_mode_current"] == Reading.ok(True)
    assert facts["gpus[0].mig_mode_pending"] == Reading.ok(False)
