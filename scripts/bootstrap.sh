#!/usr/bin/env bash
# Installs every Debian package gaptrain needs to build, test and run
# (and, with --image, to build its container image: docs/image.md).
# Idempotent: a no-op when all are present. Without root (and without sudo)
# it names what is missing and the command that installs it.
set -euo pipefail

PACKAGES=(
  # Build
  bazel-bootstrap g++ protobuf-compiler protobuf-compiler-grpc
  # Libraries
  libgrpc++-dev libprotobuf-dev libtorch-dev prometheus-cpp-dev libspdlog-dev
  libfmt-dev libyaml-cpp-dev libboost-dev nlohmann-json3-dev libssl-dev
  zlib1g-dev
  # Fast BLAS for LibTorch (reference BLAS makes an MLP step ~17x slower)
  libopenblas0-pthread
  # Plots of `gaptrain simulate`
  gnuplot-nox
  # Tests and benchmarks (python3-torch scripts the TorchScript test model)
  libgtest-dev libgmock-dev libbenchmark-dev python3-torch
  # The Python trainer SDK (python/) and its tests
  python3-grpcio python3-protobuf python3-yaml
  # The torchvision example (examples/torchvision/); the virtual environment
  # of today's PyTorch the SDK is also tested with (scripts/python-venv.sh)
  python3-torchvision python3-venv
  # The image-folder example's S3 dataset (examples/image_folder) and its test
  python3-boto3
  # A real Prometheus server scrapes /metrics in tests; openssl makes TLS
  # test certificates
  prometheus openssl
  # tests/network_fault_test cuts links between a job's services
  iptables
)

# The container image (scripts/build-image.sh, //image:image_test):
# with --image. podman and containerd load the archive in the test, as
# users' runtimes and `kind load image-archive` do; podman (with runc)
# builds examples/python/Dockerfile on it and runs a job in the result.
if [[ "${1:-}" == --image ]]; then
  PACKAGES+=(mmdebstrap umoci jq podman runc containerd)
fi

# Wanted but not needed: clang and its libFuzzer runtime for the fuzz
# targets' short runs in scripts/test.sh (docs/fuzzing.md), which are
# skipped with a message without them. Installed when possible; a failure
# to install them does not fail the bootstrap.
OPTIONAL=(clang libclang-rt-14-dev)

installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done
optional_missing=()
for p in "${OPTIONAL[@]}"; do
  installed "$p" || optional_missing+=("$p")
done

if [[ ${#optional_missing[@]} -gt 0 && $(id -u) -eq 0 ]]; then
  echo "bootstrap: installing optional ${optional_missing[*]} (fuzzing)" >&2
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
           "${optional_missing[@]}" >/dev/null; }; then
    echo "bootstrap: could not install ${optional_missing[*]}; the fuzz runs will be skipped" >&2
  fi
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "bootstrap: installing ${#missing[@]} Debian packages: ${missing[*]}" >&2
if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "bootstrap: missing packages and no root access. Run as root:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! "${SUDO[@]}" apt-get update -q >/dev/null; then
  echo "bootstrap: 'apt-get update' failed; check the Debian package sources" >&2
  exit 1
fi
if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
  echo "bootstrap: 'apt-get install ${missing[*]}' failed" >&2
  exit 1
fi
echo "bootstrap: done" >&2
