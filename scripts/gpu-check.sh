#!/usr/bin/env bash
# Plumb on a machine with a real NVIDIA GPU, in one command (under 5 minutes):
#   1. capture `nvidia-smi -q -x`, replay it through the importer (plumb-agent --simulate);
#   2. collect the same node from real NVML (plumb-agent --once);
#   3. print every fact where the two differ (python -m plumb.agent.gpucheck compare);
#   4. run the agent's performance checks, written to bench/results/gpu_check_<host>.json.
# Exit 0 when the facts agree, 1 when the capture's facts differ from NVML, 2 when there is
# no GPU to check. Creates .venv (the Makefile's stamp) when it is missing.
set -euo pipefail

root="$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)"
cd "$root"

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu-check: nvidia-smi not found: this machine has no NVIDIA driver (or it is not on PATH)" >&2
  echo "hint: run this on a machine with an NVIDIA GPU and its driver installed" >&2
  exit 2
fi

work="$(mktemp -d -t plumb-gpu-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT

if ! nvidia-smi -q -x >"$work/capture.xml" 2>"$work/nvidia-smi.err"; then
  echo "gpu-check: nvidia-smi -q -x failed: $(head -c 500 "$work/nvidia-smi.err")" >&2
  echo "hint: is the nvidia kernel module loaded, and a GPU visible (nvidia-smi -L)?" >&2
  exit 2
fi
if ! grep -q "<gpu id=" "$work/capture.xml"; then
  echo "gpu-check: nvidia-smi lists no GPU" >&2
  exit 2
fi

if [[ ! -x .venv/bin/plumb-agent ]]; then
  make .venv/.installed
fi
py=.venv/bin/python
agent=.venv/bin/plumb-agent

echo "== replaying the capture through the importer"
timeout 30 "$agent" --simulate "$work/capture.xml" --once --node-name gpu-check >"$work/replayed.json"
echo "== collecting the node from real NVML"
timeout 30 "$agent" --once --node-name gpu-check >"$work/real.json"

status=0
timeout 30 "$py" -m plumb.agent.gpucheck compare "$work/replayed.json" "$work/real.json" || status=$?
if [[ $status -gt 1 ]]; then
  echo "gpu-check: the comparison failed (exit $status)" >&2
  exit "$status"
fi

echo "== performance checks"
host="$(hostname -s | tr -c 'A-Za-z0-9_.-\n' '_')"
timeout 200 "$py" -m plumb.agent.gpucheck perf "bench/results/gpu_check_${host}.json"
exit "$status"
