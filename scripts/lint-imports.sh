#!/usr/bin/env bash
# Run import-linter on the installed `plumb` namespace. The build backend maps agent/,
# aggregator/ and proto/plumb/ into one `plumb` package; import-linter reads a package from
# one folder, so it reads a copy laid out as installed.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
cp -r proto/plumb "$tree/plumb"
cp -r agent "$tree/plumb/agent"
cp -r aggregator "$tree/plumb/aggregator"
PYTHONPATH="$tree" "${LINT_IMPORTS:-.venv/bin/lint-imports}" --no-cache "$@"
