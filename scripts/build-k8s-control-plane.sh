#!/usr/bin/env bash
# Build kube-apiserver, kube-controller-manager and kube-scheduler from Debian bookworm's
# `kubernetes` source package, offline, with Debian's Go, and cache the three binaries
# outside the repository under ${PLUMB_CACHE:-$HOME/.cache/plumb}/k8s/<debian-source-version>/.
# A cached build is reused. Also makes sure `etcd` is installed (the tests need it).
# Prints the directory holding the binaries on stdout; everything else goes to stderr.
# See docs: /work/shared/reference/infra.md §1b. Needs root (apt-get) only when something is missing.
set -euo pipefail

CACHE_ROOT="${PLUMB_CACHE:-$HOME/.cache/plumb}/k8s"
BINS=(kube-apiserver kube-controller-manager kube-scheduler)

log() { echo "build-k8s-control-plane: $*" >&2; }

complete() { # complete DIR -> all three binaries present and executable
  local b
  for b in "${BINS[@]}"; do [[ -x "$1/$b" ]] || return 1; done
}

apt_install() { # apt_install PKG... (only the missing ones)
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
  fi
}

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/parts" "$W/lists/partial" "$W/home"
# Isolated deb-src list pointing at the machine's own Debian archive; the system apt config
# is not touched.
URI=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
URI=${URI:-http://deb.debian.org/debian}
cat >"$W/parts/src.sources" <<EOF
Types: deb-src
URIs: $URI
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
A=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$W/parts" -o "Dir::State::Lists=$W/lists")

VERSION=""
if apt-get "${A[@]}" update >/dev/null 2>&1; then
  VERSION=$(apt-cache "${A[@]}" showsrc kubernetes 2>/dev/null | awk '/^Version:/{print $2; exit}')
fi
if [[ -z "$VERSION" ]]; then
  # Archive unreachable: reuse the newest complete cached build, if any.
  while IFS= read -r d; do
    if complete "$d"; then
      log "apt source index unavailable; reusing cached $d"
      command -v etcd >/dev/null || apt_install etcd-server
      echo "$d"
      exit 0
    fi
  done < <(find "$CACHE_ROOT" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | sort -rV)
  log "cannot resolve the kubernetes source version and nothing is cached"
  exit 1
fi

OUT="$CACHE_ROOT/$VERSION"
command -v etcd >/dev/null || apt_install etcd-server
if complete "$OUT"; then
  log "cached: $OUT"
  echo "$OUT"
  exit 0
fi

apt_install golang-go rsync etcd-server
log "downloading kubernetes $VERSION source"
(cd "$W" && apt-get "${A[@]}" source --download-only kubernetes >/dev/null 2>&1)
cd "$W"
tar xzf kubernetes_*.orig.tar.gz
tar xJf kubernetes_*.debian.tar.xz
SRC=$(find . -maxdepth 1 -type d -name 'kubernetes-*' | head -1)
[[ -n "$SRC" ]] || { log "unpacked source directory not found"; exit 1; }
cd "$SRC"
if [[ -f ../debian/patches/series ]]; then
  while read -r p; do
    [[ -z "$p" || "$p" == \#* ]] && continue
    patch -p1 --quiet <"../debian/patches/$p" >&2
  done <../debian/patches/series
fi
log "building ${BINS[*]} (about 4-5 min on 2 cores)"
start=$SECONDS
CGO_ENABLED=0 GOPROXY=off GOFLAGS=-mod=vendor HOME="$W/home" GOCACHE="$W/gocache" \
  make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler" >&2
log "built in $((SECONDS - start)) s"
# The Go build cache (~1.4 GB) lives under the source tree and $W; drop it now.
rm -rf _output/local/go/cache "${W:?}/gocache" "${W:?}/home"

mkdir -p "$OUT.tmp"
for b in "${BINS[@]}"; do cp "_output/bin/$b" "$OUT.tmp/$b"; done
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "$OUT"
