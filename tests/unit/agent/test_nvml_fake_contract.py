"""FakeNvml is held to pynvml's surface: same names, same parameters, pynvml's errors."""

from __future__ import annotations

import inspect

import pynvml
import pytest

from plumb.agent.simulate.nvml import EventData, FakeHandle, FakeNvml, MemoryInfo, PciInfo
from plumb.agent.simulate.profile import load_profile, shipped_profiles

FAKE_FUNCTIONS = sorted(
    name
    for name, member in inspect.getmembers(FakeNvml, inspect.isfunction)
    if name.startswith("nvml")
)


def test_the_fake_covers_the_nvml_surface_the_collector_uses():
    assert "nvmlInit" in FAKE_FUNCTIONS
    assert len(FAKE_FUNCTIONS) >= 30


@pytest.mark.parametrize("name", FAKE_FUNCTIONS)
def test_each_fake_function_matches_pynvml_signature(name):
    assert callable(getattr(pynvml, name, None)), f"pynvml has no {name}"
    fake = list(inspect.signature(getattr(FakeNvml, name)).parameters.values())[1:]  # no self
    real = list(inspect.signature(getattr(pynvml, name)).parameters.values())
    assert [(p.name, p.kind, p.default) for p in fake] == [
        (p.name, p.kind, p.default) for p in real
    ]


def test_fake_structs_have_pynvml_struct_fields():
    pci = {name for name, _ in pynvml.nvmlPciInfo_t._fields_}
    memory = {name for name, _ in pynvml.c_nvmlMemory_t._fields_}
    event = {name for name, _ in pynvml.c_nvmlEventData_t._fields_}
    assert set(PciInfo.__dataclass_fields__) <= pci
    assert set(MemoryInfo.__dataclass_fields__) <= memory
    assert set(EventData.__dataclass_fields__) == event


def _raised(call) -> BaseException:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


def test_errors_are_pynvml_classes():
    rtx = FakeNvml(load_profile("rtx-4090"), "node-a")
    rtx.nvmlInit()
    handle = rtx.nvmlDeviceGetHandleByIndex(0)
    cases = {
        pynvml.NVMLError_NotSupported: [
            lambda: rtx.nvmlDeviceGetSerial(handle),
            lambda: rtx.nvmlDeviceGetEccMode(handle),
            lambda: rtx.nvmlDeviceGetMigMode(handle),
            lambda: rtx.nvmlDeviceGetNvLinkState(handle, 0),
        ],
        pynvml.NVMLError_InvalidArgument: [
            lambda: rtx.nvmlDeviceGetHandleByIndex(1),
            lambda: rtx.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU_MAX),
            lambda: rtx.nvmlDeviceGetTemperature(FakeHandle(7), pynvml.NVML_TEMPERATURE_GPU),
        ],
    }
    for cls, calls in cases.items():
        for call in calls:
            error = _raised(call)
            assert type(error) is cls
            assert type(error).__module__ == "pynvml"
    rtx.nvmlShutdown()
    assert type(_raised(rtx.nvmlDeviceGetCount)) is pynvml.NVMLError_Uninitialized


def test_an_unloaded_driver_fails_init_with_pynvml_error():
    profile = load_profile("l4")
    unloaded = profile.model_copy(
        update={"driver": profile.driver.model_copy(update={"loaded": False})}
    )
    assert type(_raised(FakeNvml(unloaded, "n").nvmlInit)) is pynvml.NVMLError_DriverNotLoaded


@pytest.mark.parametrize("name", shipped_profiles())
def test_fake_returns_pynvml_shapes(name):
    fake = FakeNvml(load_profile(name), "node-a")
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    pci = fake.nvmlDeviceGetPciInfo(handle)
    assert isinstance(pci.busId, bytes) and pci.pciDeviceId & 0xFFFF == 0x10DE
    assert isinstance(fake.nvmlDeviceGetUUID(handle), str)
    assert isinstance(fake.nvmlDeviceGetCudaComputeCapability(handle), tuple)
    assert len(fake.nvmlDeviceGetRemappedRows(handle)) == 4
    memory = fake.nvmlDeviceGetMemoryInfo(handle)
    assert memory.total == memory.free + memory.used
