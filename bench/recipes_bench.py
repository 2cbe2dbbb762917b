"""Recipe resolution cost: per uncached request, and for 10,000 nodes in 20 pools via the cache.

Run: ``.venv/bin/python bench/recipes_bench.py``. Writes ``bench/results/recipes.json`` and
prints a summary. Each simulated node has its own hostname and GPU UUIDs, so the cache must
key on what recipes read, not on the whole facts dict.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import statistics
import time
from itertools import product
from pathlib import Path

from plumb.aggregator.recipes import ResolutionCache, infer_criteria, load_catalog, resolve
from plumb.facts import Reading

AS_OF = dt.date(2026, 9, 1)
NODES = 10_000
UNCACHED_ROUNDS = 50
OUT = Path(__file__).resolve().parent / "results" / "recipes.json"

# 5 hardware/cloud shapes x 4 drivers = 20 pools.
SHAPES = [
    ("aws", "p5.48xlarge", "NVIDIA H100 80GB HBM3", "0x2330", "ubuntu", "24.04", "training"),
    ("gcp", "a2-ultragpu-8g", "NVIDIA A100-SXM4-80GB", "0x20b2", "cos", "121", "training"),
    ("azure", "Standard_ND96isr_H100_v5", "NVIDIA H100 80GB HBM3", "0x2330", "ubuntu", "24.04",
     "inference"),
    ("gcp", "g2-standard-8", "NVIDIA L4", "0x27b8", "cos", "121", "inference"),
    ("aws", "p6e-gb200.36xlarge", "NVIDIA GB200", "0x2941", "ubuntu", "24.04", "training"),
]  # fmt: skip
DRIVERS = ["580.173.02", "570.195.03", "550.54.15", "595.91.07"]


def node_facts(node: int, pool: int) -> tuple[dict[str, Reading], str]:
    """Flat facts of simulated node ``node`` in ``pool``, and the pool's intent."""
    shape, driver = list(product(SHAPES, DRIVERS))[pool]
    provider, instance, gpu, pci, os_id, os_version, intent = shape
    facts = {
        "host.hostname": Reading.ok(f"gpu-node-{node:05d}"),
        "host.cloud_provider": Reading.ok(provider),
        "host.instance_type": Reading.ok(instance),
        "host.os_id": Reading.ok(os_id),
        "host.os_version_id": Reading.ok(os_version),
        "host.kernel": Reading.ok("6.8.0-1030-aws"),
        "host.kubelet_version": Reading.ok("v1.34.1"),
        "driver.driver_version": Reading.ok(driver),
        "driver.fabric_manager_version": Reading.ok(driver),
        "driver.kernel_module_flavour": Reading.ok("open"),
        "cuda.runtimes[0].version": Reading.ok("12.8"),
        "nccl.libraries[0].version": Reading.ok("2.27.7"),
    }
    for i in range(8):
        facts[f"gpus[{i}].name"] = Reading.ok(gpu)
        facts[f"gpus[{i}].pci_device_id"] = Reading.ok(pci)
        facts[f"gpus[{i}].uuid"] = Reading.ok(f"GPU-{node:05d}-{i}")
        facts[f"gpus[{i}].ecc_uncorrected_aggregate"] = Reading.ok((node + i) % 40)
    return facts, intent


def main() -> None:
    start = time.perf_counter()
    catalog = load_catalog()
    load_s = time.perf_counter() - start

    pools = [node_facts(0, p) for p in range(len(SHAPES) * len(DRIVERS))]
    inputs = [(infer_criteria(f, intent=i, catalog=catalog), f) for f, i in pools]
    uncached = []
    for _ in range(UNCACHED_ROUNDS):
        for criteria, facts in inputs:
            t0 = time.perf_counter()
            resolve(catalog, criteria, facts, as_of=AS_OF)
            uncached.append(time.perf_counter() - t0)

    fleet = [node_facts(n, n % len(pools)) for n in range(NODES)]
    cache = ResolutionCache(catalog)
    t0 = time.perf_counter()
    hashes = set()
    for facts, intent in fleet:
        criteria = infer_criteria(facts, intent=intent, catalog=catalog)
        hashes.add(cache.resolve(criteria, facts, as_of=AS_OF).content_hash)
    fleet_s = time.perf_counter() - t0

    uncached_ms = sorted(s * 1000 for s in uncached)
    result = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "catalog_load_ms": round(load_s * 1000, 2),
        "uncached": {
            "requests": len(uncached_ms),
            "mean_ms": round(statistics.fmean(uncached_ms), 3),
            "p50_ms": round(uncached_ms[len(uncached_ms) // 2], 3),
            "p95_ms": round(uncached_ms[int(len(uncached_ms) * 0.95)], 3),
        },
        "fleet": {
            "nodes": NODES,
            "pools": len(pools),
            "total_s": round(fleet_s, 3),
            "per_node_us": round(fleet_s / NODES * 1e6, 1),
            "resolutions": cache.misses,
            "cache_hits": cache.hits,
            "distinct_recipes": len(hashes),
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    u, f = result["uncached"], result["fleet"]
    print(f"catalog load: {result['catalog_load_ms']} ms")
    print(f"uncached resolve: mean {u['mean_ms']} ms, p50 {u['p50_ms']} ms, p95 {u['p95_ms']} ms")
    print(
        f"{f['nodes']} nodes / {f['pools']} pools: {f['total_s']} s total, "
        f"{f['per_node_us']} us/node, {f['resolutions']} resolutions, {f['cache_hits']} hits"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
