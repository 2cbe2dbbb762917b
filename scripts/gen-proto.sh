#!/usr/bin/env bash
# Regenerate the committed Python for proto/plumb/v1 with the pinned grpcio-tools.
# Usage: scripts/gen-proto.sh [OUT_DIR]   (default: proto, i.e. in place)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-proto}"
py="${PYTHON:-.venv/bin/python}"
mkdir -p "$out"
"$py" -m grpc_tools.protoc -Iproto --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
    proto/plumb/v1/facts.proto proto/plumb/v1/agent.proto
