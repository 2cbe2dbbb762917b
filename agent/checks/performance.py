"""Performance checks: matmul throughput, device memory and host<->device bandwidth, and
intra-node NCCL all-reduce bus bandwidth, measured for real on the node's GPUs.

Each reports a figure and its unit; the aggregator grades it against a fraction of the GPU's
peak from the catalog. Nothing here invents a number: a check that cannot measure says why
and is skipped: `simulated node`, `no GPU`, `busy` (another process holds a GPU: measuring
then would disturb it and under-report), `no torch` (neither PyTorch nor CuPy is present).
On a simulated node the figures come from the profile's `benchmarks:` and say so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from plumb.agent.checks import nccl_tests
from plumb.agent.checks.model import CheckContext, Outcome

__all__ = ["PERFORMANCE", "UNITS"]

Params = Mapping[str, str]

UNITS = {
    "matmul-bf16": "TFLOPS",
    "matmul-fp16": "TFLOPS",
    "memory-bandwidth": "GB/s",
    "host-device-bandwidth": "GB/s",
    "nccl-allreduce": "GB/s",
}


def _preflight(ctx: CheckContext, check_id: str) -> tuple[Outcome | None, int]:
    """(an outcome that ends the check early, or None) and the node's GPU count."""
    if ctx.simulated:
        figure = ctx.simulated_figures().get(check_id)
        if figure is None:
            return Outcome.skip("simulated node"), 0
        unit = UNITS[check_id]
        return (
            Outcome(
                "pass",
                f"simulated: {figure:g} {unit} as the node's profile states, not measured",
                value=float(figure),
                unit=unit,
                details={"simulated": "true"},
            ),
            0,
        )
    nvml = ctx.nvml()
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return Outcome.skip("no GPU", nvml=str(exc)[:200]), 0
    try:
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            return Outcome.skip("no GPU"), 0
        running = []
        for i in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            running += [f"gpu{i}:{p.pid}" for p in procs]
        if running:
            return Outcome.skip("busy", processes=" ".join(running[:16])), count
    except Exception as exc:
        return Outcome("error", f"NVML failed while checking for GPU processes: {exc}"), 0
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutting down is best effort
            pass
    return None, count


def _torch() -> Any | None:
    try:
        import torch  # noqa: PLC0415 - optional: most agent images ship without it
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _cupy() -> Any | None:
    try:
        import cupy  # noqa: PLC0415 - optional
    except ImportError:
        return None
    try:
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:
        return None


def _per_gpu(count: int, measure: Callable[[int], float], unit: str, what: str) -> Outcome:
    """Measure every GPU; the node's figure is its slowest GPU's."""
    figures = {i: measure(i) for i in range(count)}
    worst = min(figures, key=figures.__getitem__)
    details = {f"gpu{i}": f"{v:.1f}" for i, v in figures.items()}
    msg = f"{what}: slowest GPU {worst} at {figures[worst]:.1f} {unit} over {count} GPUs"
    return Outcome("pass", msg, value=figures[worst], unit=unit, details=details)


def _elapsed_s(torch: Any, device: int, work: Callable[[], None], iters: int) -> float:
    """GPU time of `iters` runs of `work` on `device`, after a warm-up, by CUDA events."""
    for _ in range(3):
        work()
    torch.cuda.synchronize(device)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        work()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def _matmul(dtype_name: str) -> Callable[[CheckContext, Params], Outcome]:
    check_id = f"matmul-{dtype_name}"

    def check(ctx: CheckContext, params: Params) -> Outcome:
        early, count = _preflight(ctx, check_id)
        if early is not None:
            return early
        n, iters = int(params.get("matrix_size", "8192")), int(params.get("iterations", "50"))
        flops = 2 * n**3 * iters
        if (torch := _torch()) is not None:
            dtype = getattr(torch, "bfloat16" if dtype_name == "bf16" else "float16")

            def measure(i: int) -> float:
                with torch.cuda.device(i):
                    a = torch.randn(n, n, device=i, dtype=dtype)
                    b = torch.randn(n, n, device=i, dtype=dtype)
                    c = torch.empty(n, n, device=i, dtype=dtype)
                    seconds = _elapsed_s(torch, i, lambda: torch.matmul(a, b, out=c), iters)
                return flops / seconds / 1e12

            return _per_gpu(count, measure, "TFLOPS", f"{dtype_name} matmul {n}x{n} (PyTorch)")
        if dtype_name == "fp16" and (cupy := _cupy()) is not None:

            def measure_cupy(i: int) -> float:
                with cupy.cuda.Device(i):
                    a = cupy.random.standard_normal((n, n), dtype=cupy.float32).astype("float16")
                    b = cupy.random.standard_normal((n, n), dtype=cupy.float32).astype("float16")
                    cupy.matmul(a, b)
                    start, end = cupy.cuda.Event(), cupy.cuda.Event()
                    start.record()
                    for _ in range(iters):
                        cupy.matmul(a, b)
                    end.record()
                    end.synchronize()
                    return flops / (cupy.cuda.get_elapsed_time(start, end) / 1e3) / 1e12

            return _per_gpu(count, measure_cupy, "TFLOPS", f"fp16 matmul {n}x{n} (CuPy)")
        return Outcome.skip("no torch", needs="PyTorch with CUDA (or CuPy for fp16)")

    return check


def memory_bandwidth(ctx: CheckContext, params: Params) -> Outcome:
    """Device-to-device copy within each GPU: bytes read plus bytes written per second."""
    early, count = _preflight(ctx, "memory-bandwidth")
    if early is not None:
        return early
    size, iters = int(params.get("bytes", str(1 << 30))), int(params.get("iterations", "20"))
    if (torch := _torch()) is None:
        return Outcome.skip("no torch", needs="PyTorch with CUDA")

    def measure(i: int) -> float:
        with torch.cuda.device(i):
            src = torch.empty(size, dtype=torch.uint8, device=i)
            dst = torch.empty_like(src)
            seconds = _elapsed_s(torch, i, lambda: dst.copy_(src), iters)
        return 2 * size * iters / seconds / 1e9

    return _per_gpu(count, measure, "GB/s", "device memory copy")


def host_device_bandwidth(ctx: CheckContext, params: Params) -> Outcome:
    """Pinned host memory to each GPU and back; the figure is the slower direction."""
    early, count = _preflight(ctx, "host-device-bandwidth")
    if early is not None:
        return early
    size, iters = int(params.get("bytes", str(256 << 20))), int(params.get("iterations", "20"))
    if (torch := _torch()) is None:
        return Outcome.skip("no torch", needs="PyTorch with CUDA")
    directions: dict[str, str] = {}

    def measure(i: int) -> float:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        with torch.cuda.device(i):
            dev = torch.empty(size, dtype=torch.uint8, device=i)
            h2d = _elapsed_s(torch, i, lambda: dev.copy_(host, non_blocking=True), iters)
            d2h = _elapsed_s(torch, i, lambda: host.copy_(dev, non_blocking=True), iters)
        h2d_gbps, d2h_gbps = size * iters / h2d / 1e9, size * iters / d2h / 1e9
        directions[f"gpu{i}"] = f"h2d {h2d_gbps:.1f} d2h {d2h_gbps:.1f}"
        return min(h2d_gbps, d2h_gbps)

    out = _per_gpu(count, measure, "GB/s", "pinned host<->device copy")
    return Outcome(out.status, out.message, out.value, out.unit, {**out.details, **directions})


def nccl_allreduce(ctx: CheckContext, params: Params) -> Outcome:
    """All-reduce bus bandwidth across the node's GPUs at the largest message size."""
    early, count = _preflight(ctx, "nccl-allreduce")
    if early is not None:
        return early
    if count < 2:
        return Outcome.skip("single GPU: an intra-node all-reduce needs two or more")
    timeout_s = float(params.get("timeout_s", "300"))
    if (binary := nccl_tests.find_binary()) is not None:
        run = nccl_tests.run(binary, count, params.get("max_bytes", "4G"), timeout_s)
        figure, largest = run.busbw_gbps, run.largest
        if run.status == "failed":
            return Outcome("fail", f"all_reduce_perf failed: {'; '.join(run.reasons)}")
        if figure is None or largest is None or run.status != "ok":
            return Outcome("error", f"all_reduce_perf did not finish: {'; '.join(run.reasons)}")
        details = {
            "source": "nccl-tests",
            "largest_bytes": str(largest.size_bytes),
            "avg_busbw_gbps": f"{run.avg_busbw_gbps}",
        }
        msg = f"nccl-tests busbw {figure:.1f} GB/s at {largest.size_bytes} B on {count} GPUs"
        return Outcome("pass", msg, value=figure, unit="GB/s", details=details)
    if (torch := _torch()) is None:
        return Outcome.skip("no torch", needs="nccl-tests (all_reduce_perf) or PyTorch")
    size = int(params.get("bytes", str(1 << 30)))
    iters = int(params.get("iterations", "20"))
    tensors = [torch.ones(size // 4, dtype=torch.float32, device=i) for i in range(count)]

    def sync() -> None:
        for i in range(count):
            torch.cuda.synchronize(i)

    for _ in range(3):
        torch.cuda.nccl.all_reduce(tensors)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        torch.cuda.nccl.all_reduce(tensors)
    sync()
    seconds = (time.perf_counter() - start) / iters
    del tensors
    busbw = size / seconds / 1e9 * 2 * (count - 1) / count
    msg = f"PyTorch NCCL all-reduce busbw {busbw:.1f} GB/s at {size} B on {count} GPUs"
    details = {"source": "torch.cuda.nccl", "largest_bytes": str(size)}
    return Outcome("pass", msg, value=busbw, unit="GB/s", details=details)


PERFORMANCE = {
    "matmul-bf16": _matmul("bf16"),
    "matmul-fp16": _matmul("fp16"),
    "memory-bandwidth": memory_bandwidth,
    "host-device-bandwidth": host_device_bandwidth,
    "nccl-allreduce": nccl_allreduce,
}
