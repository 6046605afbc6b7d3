#!/usr/bin/env bash
# Builds kube-apiserver and etcd (and kubectl, where the machine has none; the kubelet, for the
# node tier) for one Kubernetes version from the Go module proxy, into
# ~/.cache/tessera-k8s/<version>/bin. A second call finds
# the binaries there and returns at once; after a `rm -rf` of that folder, Go's build cache still
# makes the rebuild quick.
#
# k8s.io/kubernetes replaces its staging modules (k8s.io/api, k8s.io/apimachinery, ...) with
# ./staging paths, which only exist in its own tree, and requires them at v0.0.0. A wrapper module
# that requires it must therefore replace each one with the published v0.<minor>.<patch>.
# etcd is built from the same module graph: go.etcd.io/etcd/server/v3 at the version Kubernetes
# pins is a main package, and the two binaries share most of the build cache.
#
# Usage: scripts/kube-real/build.sh v1.37.2 [--kubectl] [--kubelet]
set -euo pipefail
version=${1:?usage: build.sh vX.Y.Z [--kubectl] [--kubelet]}
shift
cache=${TESSERA_K8S_CACHE:-$HOME/.cache/tessera-k8s}/$version
bin=$cache/bin
staging=v0.${version#v1.}
need=(kube-apiserver etcd)
for extra in "$@"; do
  case $extra in
    --kubectl) need+=(kubectl) ;;
    --kubelet) need+=(kubelet) ;;
    *) echo "kube-real: unknown option $extra" >&2; exit 2 ;;
  esac
done
missing=()
for b in "${need[@]}"; do [ -x "$bin/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "kube-real: $version binaries cached in $bin"
  exit 0
fi
command -v go >/dev/null || { echo "kube-real: go is required to build kube-apiserver" >&2; exit 1; }
mkdir -p "$cache/mod" "$bin"
cd "$cache/mod"
start=$(date +%s)
mod_file=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
[ -f "$mod_file" ] || { echo "kube-real: no go.mod for k8s.io/kubernetes@$version" >&2; exit 1; }
go_line=$(grep -m1 '^go ' "$mod_file")
{
  echo "module tessera.test/kube-real"
  echo
  echo "$go_line"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging"'#p' "$mod_file"
  echo ")"
} > go.mod
cat > tools.go <<'GO'
//go:build tools

// Names the mains this module builds, so that `go mod tidy` keeps their dependencies.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
echo "package tools" > doc.go
GOFLAGS=-mod=mod go mod tidy
pkgs=()
for b in "${missing[@]}"; do
  case $b in
    kube-apiserver) pkgs+=(k8s.io/kubernetes/cmd/kube-apiserver) ;;
    kubectl) pkgs+=(k8s.io/kubernetes/cmd/kubectl) ;;
    kubelet) pkgs+=(k8s.io/kubernetes/cmd/kubelet) ;;
    etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;;
  esac
done
# Without these the binaries report v0.0.0-master, and the kubelet registers its node so.
minor=${version#v1.}
minor=${minor%%.*}
vpkg=k8s.io/component-base/version
ldflags="-X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor"
for p in "${pkgs[@]}"; do
  name=$(basename "$p")
  [ "$name" = v3 ] && name=etcd
  # -trimpath and no VCS stamping keep the build independent of where the cache lives.
  CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$bin/$name" "$p"
done
echo "kube-real: built ${missing[*]} for $version in $(( $(date +%s) - start )) s"
