"""How long `plumb` takes to first output: the median of --runs runs of each command.

Each run starts the console script as a user's shell would and times, from the spawn, the
first byte on stdout or stderr (what a person waits for) and the exit. Commands: `--help`,
`--version`, `nodes` and `watch` against an unreachable server (the error is the first
output), and `nodes`, `drift`, `recipe --service eks --accelerator h100` (a criteria check
reading recipes/) against a real `plumb serve` on loopback. Runs are interleaved across
commands so the machine's load (recorded before and after) falls on all of them alike.

--before REV also times the same commands on the code at git revision REV, laid out as the
wheel installs it (scripts/lint-imports.sh does the same), imported ahead of the checkout's.
Result: bench/results/cli_startup.json.

    .venv/bin/python bench/cli_startup.py [--runs 15] [--before f00c6c3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from harness import start_serve, write_result

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = "import sys; sys.argv[0] = 'plumb'; from plumb.aggregator.__main__ import main; main()"
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens
TARGET_S = 0.4


def commands(server: str) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "--version": ["--version"],
        "nodes (unreachable)": ["nodes", "--server", UNREACHABLE],
        "watch (unreachable)": ["watch", "--iterations", "1", "--server", UNREACHABLE],
        "nodes": ["nodes", "--server", server],
        "drift": ["drift", "--server", server],
        "recipe --service eks --accelerator h100": [
            *("recipe", "--service", "eks", "--accelerator", "h100", "--server", server)
        ],
    }


def time_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(seconds to the first output byte, seconds to exit, CPU seconds) of one run. CPU time
    (user + system) moves far less with the machine's load than wall time does."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = None
    with selectors.DefaultSelector() as sel:
        for stream in (proc.stdout, proc.stderr):
            sel.register(stream, selectors.EVENT_READ)
        while sel.get_map():
            for key, _ in sel.select():
                chunk = os.read(key.fd, 65536)
                if chunk and first is None:
                    first = time.perf_counter() - start
                if not chunk:
                    sel.unregister(key.fileobj)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped here; Popen must not wait for it again
    wall = time.perf_counter() - start
    return first if first is not None else float("nan"), wall, usage.ru_utime + usage.ru_stime


def before_tree(rev: str, into: Path) -> Path:
    """The installed layout (plumb/, plumb/agent, plumb/aggregator, plumb/recipes) of `rev`."""
    archive = into / "src.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev], stdout=f, check=True)
    src = into / "src"
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    tree = into / "tree"
    shutil.copytree(src / "proto" / "plumb", tree / "plumb")
    for part in ("agent", "aggregator", "recipes"):
        shutil.copytree(src / part, tree / "plumb" / part)
    return tree


def measure(label_argv: dict[str, list[str]], env: dict[str, str], runs: int) -> dict:
    samples: dict[str, list[tuple[float, float, float]]] = {label: [] for label in label_argv}
    for _ in range(runs):
        for label, argv in label_argv.items():
            samples[label].append(time_once(argv, env))
    return {
        label: {
            "first_output_median_s": round(statistics.median(s[0] for s in got), 3),
            "first_output_min_s": round(min(s[0] for s in got), 3),
            "exit_median_s": round(statistics.median(s[1] for s in got), 3),
            "cpu_median_s": round(statistics.median(s[2] for s in got), 3),
        }
        for label, got in samples.items()
    }


async def _serve(workdir: Path):
    return await start_serve(workdir, f"sqlite:///{workdir / 'plumb.db'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--before", metavar="REV", help="also time the code at this revision")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLUMB_")}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        loop = asyncio.new_event_loop()
        proc, _, base = loop.run_until_complete(_serve(workdir))
        try:
            load_before = [round(x, 2) for x in os.getloadavg()]
            # Both sides start the same way: the console script's import and call, in -c.
            cmds = {
                label: [sys.executable, "-c", LAUNCHER, *argv]
                for label, argv in commands(base).items()
            }
            result: dict = {"runs": args.runs, "target_s": TARGET_S, "load_avg_before": load_before}
            result["now"] = measure(cmds, env, args.runs)
            if args.before:
                tree = before_tree(args.before, workdir)
                result["before"] = {
                    "rev": args.before,
                    **measure(cmds, {**env, "PYTHONPATH": str(tree)}, args.runs),
                }
        finally:
            proc.terminate()
            loop.run_until_complete(proc.wait())
            loop.close()
    result["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    path = write_result("cli_startup", result)
    for label, fig in result["now"].items():
        was = result.get("before", {}).get(label, {})
        line = f"{label:42} first output {fig['first_output_median_s']:.3f} s"
        line += f", CPU {fig['cpu_median_s']:.3f} s"
        if was:
            line += f" (was {was['first_output_median_s']:.3f} s, CPU {was['cpu_median_s']:.3f} s)"
        print(line)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
