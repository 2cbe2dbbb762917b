"""Bundle size and generation time for the GKE A100 COS training recipe, per deployer.

Run: ``.venv/bin/python bench/bundle_bench.py``. Writes ``bench/results/bundles.json`` and
prints a summary. Time is the median of ROUNDS builds (plan, values, deployer, checksums),
and separately of archiving the built bundle; the recipe is resolved once, outside the timing.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

from plumb.aggregator.bundle import FORMATS, BundleOptions, Recipe, build
from plumb.aggregator.recipes import Criteria, load_catalog, resolve

ROUNDS = 50
OUT = Path(__file__).resolve().parent / "results" / "bundles.json"
CRITERIA = Criteria(service="gke", accelerator="a100", os="cos", intent="training")
REPO = "https://git.example.com/gpu-stack.git"


def median_ms(action) -> float:
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def main() -> None:
    catalog = load_catalog()
    resolution = resolve(catalog, CRITERIA)
    recipe = Recipe.of(resolution)
    rows = {}
    for deployer in ("helm", "helmfile", "argocd", "argocd-helm", "flux"):
        options = BundleOptions.parse(deployer, repo_url=REPO)
        bundle = build(recipe, catalog, options)
        rows[deployer] = {
            "files": len(bundle.files),
            "kb": round(bundle.size_bytes / 1024, 1),
            "build_ms": median_ms(lambda o=options: build(recipe, catalog, o)),
            **{f"{fmt}_kb": round(len(bundle.archive(fmt)) / 1024, 1) for fmt in FORMATS},
            **{f"{fmt}_ms": median_ms(lambda b=bundle, f=fmt: b.archive(f)) for fmt in FORMATS},
        }
    result = {
        "recipe": CRITERIA.to_dict(),
        "components": len(recipe.deployment_order),
        "rounds": ROUNDS,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "layers": [*resolution.applied, *resolution.mixins],
        "deployers": rows,
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    for name, row in rows.items():
        print(
            f"{name:11} {row['files']:3} files {row['kb']:6.1f} KB  build {row['build_ms']:6.2f} ms"
            f"  tar.gz {row['tar.gz_kb']:5.1f} KB ({row['tar.gz_ms']:.2f} ms)"
            f"  zip {row['zip_kb']:5.1f} KB"
        )


if __name__ == "__main__":
    main()
