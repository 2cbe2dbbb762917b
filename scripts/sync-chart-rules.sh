#!/usr/bin/env bash
# Copy deploy/prometheus/rules.yml (the one source of truth) into the Helm chart, which cannot
# read files outside itself. tests/unit/deploy/test_chart_rules.py fails while the two differ.
# With --check: change nothing, exit 1 when the copy is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=deploy/prometheus/rules.yml
DST=deploy/helm/plumb/files/rules.yml
if [[ "${1:-}" == "--check" ]]; then
  cmp -s "$SRC" "$DST" || { echo "$DST differs from $SRC: run scripts/sync-chart-rules.sh" >&2; exit 1; }
  exit 0
fi
mkdir -p "$(dirname "$DST")"
cp "$SRC" "$DST"
echo "$DST"
