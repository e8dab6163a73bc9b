#!/usr/bin/env bash
# Builds the tests' Kubernetes control plane and its companions from their
# published Go modules, caches them, checks them by version, and prints the
# directory, usable as KUBEBUILDER_ASSETS (controller-runtime's envtest
# convention):
#
#   export KUBEBUILDER_ASSETS="$(scripts/test-cluster.sh)"
#
# What it holds (the versions are the go.mod files under
# scripts/test-cluster/, nothing else names them; its README says why these):
#   kube-apiserver kube-controller-manager kube-scheduler kubectl
#                      Kubernetes (k8s.io/kubernetes with its k8s.io/*
#                      staging modules at the matching versions)
#   etcd               the etcd that release is tested with (minor)
#   helm               Helm 3 (helm.sh/helm/v3/cmd/helm)
#   kueue-manager      Kueue's controller manager (sigs.k8s.io/kueue/cmd/kueue)
#   kueue/             Kueue's manifests (config/components: CRDs, RBAC,
#                      webhooks) and chart, from the same module
#   prometheus-operator/
#                      the Prometheus Operator's CRDs (example/
#                      prometheus-operator-crd: PodMonitor, PrometheusRule...)
#   minimum/           the oldest Kubernetes the TrainingJob CRD supports:
#                      its kube-apiserver, with links to etcd and kubectl, so
#                      minimum/ is itself an assets directory
#
# A fresh machine builds everything once (about 10 minutes on 2 cores,
# modules downloaded from the Go module proxy); later runs check each
# binary and print the directory in about a second. A binary is rebuilt
# when its go.mod, go.sum, build flags or Go version changed, or when it
# no longer reports the version its go.mod pins (`go version -m`).
#
# Usage: scripts/test-cluster.sh [--installed]
#   --installed   build nothing: print the directory when everything in it
#                 is built and checked, else say what is missing, exit 1.
# Directory: $GAPTRAIN_TEST_CLUSTER_DIR, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/gaptrain-test-cluster. Builds hold a lock
# there, so concurrent callers wait rather than build twice.
# Needs: go (1.26 or later; GOTOOLCHAIN as the machine sets it), flock,
# sha256sum, and the Go module proxy (or a filled module cache).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
modules="$here/test-cluster"

source "$(dirname "${BASH_SOURCE[0]}")/cached_tool.sh"
parse_installed_flag test-cluster "$@"
dir="${GAPTRAIN_TEST_CLUSTER_DIR:-$(cache_dir gaptrain-test-cluster)}"
mkdir -p "$dir/.stamps"

if ! command -v go >/dev/null 2>&1; then
  echo "test-cluster: go is not on PATH: the control plane is built from Go modules (Go 1.26 or later)" >&2
  exit 1
fi
export CGO_ENABLED=0 GOFLAGS=-mod=readonly

# module_version DIR MODULE: the version DIR's go.mod resolves MODULE to.
module_version() {
  (cd "$modules/$1" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$2")
}

# Kubernetes' own version stamps (hack/lib/version.sh), which /version,
# `kubectl version` and compatibility versions report.
kube_ldflags() {
  local version="$1" minor
  minor="$(cut -d. -f2 <<<"$version")"
  local flags="-s -w"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean"
  done
  echo "$flags"
}

# build_tool NAME MODULE_DIR PACKAGE PINNED_MODULE LDFLAGS OUT: builds
# PACKAGE of the module in MODULE_DIR into OUT unless OUT's stamp is
# current; then checks that OUT embeds PINNED_MODULE at the version the
# go.mod pins.
build_tool() {
  local name="$1" moddir="$2" package="$3" pinned="$4" ldflags="$5" out="$6"
  local version stamp_file stamp
  version="$(module_version "$moddir" "$pinned")"
  stamp_file="$dir/.stamps/${out#"$dir"/}"
  stamp="$( { cat "$modules/$moddir/go.mod" "$modules/$moddir/go.sum"
              echo "$package $ldflags"; go version; } | sha256sum | cut -d' ' -f1)"
  if [[ -x "$out" && -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]] &&
     embeds "$out" "$pinned" "$version"; then
    return 0
  fi
  if [[ $build -eq 0 ]]; then
    missing+=("$name $version")
    return 0
  fi
  echo "test-cluster: building $name ($pinned $version)" >&2
  local start=$SECONDS tmp="$out.tmp.$$"
  mkdir -p "$(dirname "$out")" "$(dirname "$stamp_file")"
  (cd "$modules/$moddir" && go build -trimpath -ldflags "$ldflags" -o "$tmp" "$package")
  if ! embeds "$tmp" "$pinned" "$version"; then
    rm -f "$tmp"
    echo "test-cluster: $name does not embed $pinned $version (go version -m)" >&2
    exit 1
  fi
  mv -f "$tmp" "$out"  # atomic: a concurrent reader never sees half a binary
  echo "$stamp" > "$stamp_file"
  echo "test-cluster: built $name in $((SECONDS - start)) s" >&2
}

# embeds BINARY MODULE VERSION: BINARY was built with MODULE at VERSION
# (the build information Go embeds; `go version -m`).
embeds() {
  go version -m "$1" 2>/dev/null |
    awk -v m="$2" -v v="$3" '($1 == "mod" || $1 == "dep" || $1 == "=>") && $2 == m && $3 == v {found = 1}
                             END {exit !found}'
}

# expect_output NAME TEXT COMMAND...: COMMAND's output holds TEXT (the
# version a binary reports itself, from the build's version stamps).
expect_output() {
  local name="$1" text="$2"
  shift 2
  local output
  output="$("$@" 2>&1 || true)"
  if ! grep -qF -- "$text" <<<"$output"; then
    echo "test-cluster: $name reports '$(head -1 <<<"$output")', not '$text'" >&2
    exit 1
  fi
}

missing=()
exec 9>"$dir/.lock"
flock 9

kube="$(module_version kubernetes k8s.io/kubernetes)"
for tool in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  build_tool "$tool" kubernetes "k8s.io/kubernetes/cmd/$tool" k8s.io/kubernetes \
    "$(kube_ldflags "$kube")" "$dir/$tool"
done

minimum="$(module_version kubernetes-minimum k8s.io/kubernetes)"
build_tool "kube-apiserver (minimum)" kubernetes-minimum k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes "$(kube_ldflags "$minimum")" "$dir/minimum/kube-apiserver"

etcd="$(module_version etcd go.etcd.io/etcd/server/v3)"
build_tool etcd etcd go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 \
  "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$etcd" "$dir/etcd"

# Helm reports, and lints against, the Kubernetes version of its client
# libraries (its Makefile's k8sVersionMajor/Minor).
helm="$(module_version helm helm.sh/helm/v3)"
helm_kube_minor="$(module_version helm k8s.io/client-go | cut -d. -f2)"
helm_flags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm"
helm_flags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  helm_flags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$helm_kube_minor"
done
build_tool helm helm helm.sh/helm/v3/cmd/helm helm.sh/helm/v3 "$helm_flags" "$dir/helm"

kueue="$(module_version kueue sigs.k8s.io/kueue)"
build_tool kueue-manager kueue sigs.k8s.io/kueue/cmd/kueue sigs.k8s.io/kueue \
  "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$kueue" "$dir/kueue-manager"

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "test-cluster: not built in $dir: ${missing[*]} (run scripts/test-cluster.sh)" >&2
  exit 1
fi

# copy_manifests NAME MODULE_DIR MODULE SUBDIR...: SUBDIRs of the module
# (at the version MODULE_DIR's go.mod pins) into $dir/NAME, once per version.
copy_manifests() {
  local name="$1" moddir="$2" module="$3"
  shift 3
  local version src tmp="$dir/$name.tmp.$$"
  version="$(module_version "$moddir" "$module")"
  [[ "$(cat "$dir/$name/.version" 2>/dev/null)" == "$version" ]] && return 0
  if [[ $build -eq 0 ]]; then
    echo "test-cluster: $module $version's manifests are not in $dir/$name (run scripts/test-cluster.sh)" >&2
    exit 1
  fi
  src="$(cd "$modules/$moddir" && go mod download -json "$module" |
         sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
  if [[ -z "$src" ]]; then
    echo "test-cluster: cannot download $module $version" >&2
    exit 1
  fi
  rm -rf "$tmp"
  mkdir -p "$tmp"
  for subdir in "$@"; do
    mkdir -p "$tmp/$(dirname "$subdir")"
    cp -r "$src/$subdir" "$tmp/$subdir"
  done
  chmod -R u+w "$tmp"  # the module cache is read-only
  echo "$version" > "$tmp/.version"
  rm -rf "${dir:?}/$name"
  mv "$tmp" "$dir/$name"
}

# Kueue's manifests, from the module its manager was built from; the
# Prometheus Operator's CRDs (a cluster's PodMonitor and PrometheusRule
# kinds, which the chart creates when its monitoring is on).
copy_manifests kueue kueue sigs.k8s.io/kueue config/components charts
copy_manifests prometheus-operator prometheus-operator \
  github.com/prometheus-operator/prometheus-operator example/prometheus-operator-crd

ln -sfn ../etcd "$dir/minimum/etcd"
ln -sfn ../kubectl "$dir/minimum/kubectl"

# Each binary says the version it was built as.
expect_output kube-apiserver "Kubernetes $kube" "$dir/kube-apiserver" --version
expect_output kube-controller-manager "Kubernetes $kube" "$dir/kube-controller-manager" --version
expect_output kube-scheduler "Kubernetes $kube" "$dir/kube-scheduler" --version
expect_output kubectl "Client Version: $kube" "$dir/kubectl" version --client
expect_output "kube-apiserver (minimum)" "Kubernetes $minimum" "$dir/minimum/kube-apiserver" --version
expect_output etcd "etcd Version: ${etcd#v}" "$dir/etcd" --version
expect_output helm "$helm" "$dir/helm" version --template '{{.Version}}'
echo "$dir"
