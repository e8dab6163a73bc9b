#!/usr/bin/env bash
# The learning library on a GPU, without Bazel: for a machine with a CUDA
# build of PyTorch (its LibTorch), CMake and a C++ compiler, but no Bazel or
# gRPC. Builds bench/gpu/CMakeLists.txt (services/learn's model code,
# model_test, device_test, bench/gpu/compute_bench), then runs the CUDA
# tests (CudaMatchesCpu, ChooseDevice), the rest of model_test, and the
# compute benchmark (ms per ComputeGradient, CPU against CUDA).
#
#   scripts/gpu-check.sh [BUILD_DIR]     (default /tmp/gaptrain-gpu-check)
#
# It probes first and builds what it can: without GoogleTest the tests are
# skipped (said so) and the benchmark still checks CUDA against the CPU.
# GoogleTest comes from $GTEST_SOURCE_DIR, .gpu-deps/googletest (git-ignored:
# `mkdir -p .gpu-deps && cp -r /usr/src/googletest .gpu-deps/` on a machine
# that has it, to carry it to one that has not) or /usr/src/googletest,
# else from an installed package. PYTHON (python3), JOBS (16) and
# BENCH_ARGS (compute_bench's flags) may be set. Logs go to $OUT if set
# (else BUILD_DIR/logs). Exit status: non-zero if the build, a test or the
# CUDA check failed. Nothing in the Bazel build uses this script.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-/tmp/gaptrain-gpu-check}
logs=${OUT:-$build/logs}
mkdir -p "$build" "$logs"
py=${PYTHON:-python3}
jobs=${JOBS:-16}
status=0

section() { printf '\n=== %s\n' "$*"; }

section "machine"
nvidia-smi 2>&1 | head -20 || echo "no nvidia-smi"
nvcc --version 2>&1 | tail -2 || echo "no nvcc"
cmake --version | head -1
c++ --version | head -1
$py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
  "available", torch.cuda.is_available(), "cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)' ||
  { echo "gpu-check: $py has no torch"; exit 1; }

section "probe"
torch_prefix=$($py -c 'import torch; print(torch.utils.cmake_prefix_path)')
torch_dir=$($py -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$($py -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
echo "torch cmake prefix: $torch_prefix"
gtest_src=""
for d in "${GTEST_SOURCE_DIR:-}" .gpu-deps/googletest /usr/src/googletest; do
  if [[ -n "$d" && -f "$d/CMakeLists.txt" ]]; then gtest_src=$(cd "$d" && pwd); break; fi
done
if [[ -n "$gtest_src" ]]; then
  echo "GoogleTest sources: $gtest_src"
elif [[ -d /usr/include/gtest ]]; then
  echo "GoogleTest: no sources; headers in /usr/include/gtest (find_package will try)"
else
  echo "GoogleTest: none found: model_test and device_test will be SKIPPED"
fi
[[ -d "$torch_dir/include/fmt" ]] && echo "fmt headers in torch/include (not needed)"

section "configure and build"
# Newer LibTorch headers refuse C++17 (#error ... C++20 or later).
std=17
grep -rqs "C++20 or later" "$torch_dir/include/c10/macros" "$torch_dir/include/c10/util" && std=20
echo "C++$std"
# Keep going past a target that fails, so the others still build.
if command -v make >/dev/null; then
  generator=("Unix Makefiles") keep_going=(-k)
elif command -v ninja >/dev/null; then
  generator=(Ninja) keep_going=(-k 0)
else
  echo "gpu-check: neither make nor ninja"; exit 1
fi
echo "generator: ${generator[*]}"
attempt() {  # how, then cmake arguments: configure, then build all it can
  local log=$logs/build-$1.log
  shift
  rm -rf "$build/cmake"
  cmake -S bench/gpu -B "$build/cmake" -G "${generator[0]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=$std \
    -DGTEST_SOURCE_DIR="$gtest_src" "$@" 2>&1 | tee "$log" || return 1
  local start=$SECONDS
  cmake --build "$build/cmake" -j"$jobs" -- "${keep_going[@]}" 2>&1 | tee -a "$log"
  local rc=$?
  echo "build took $((SECONDS - start)) s, exit status $rc (log: $log)"
  [[ $rc == 0 ]] || status=1
  # A LibTorch that links at all links the benchmark.
  [[ -x "$build/cmake/compute_bench" ]]
}
# find_package(Torch) first; if its CUDA probing or the link fails,
# LibTorch by hand (include and lib folders of the torch package).
if ! attempt find_package -DCMAKE_PREFIX_PATH="$torch_prefix"; then
  echo "gpu-check: no compute_bench with find_package(Torch); again with LibTorch by hand"
  status=0
  attempt by_hand -DGPU_CHECK_TORCH_DIR="$torch_dir" \
    -DTORCH_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$abi" ||
    echo "gpu-check: build FAILED; running what did build"
fi

# model_test finds its TorchScript files as Bazel's runfiles:
# $TEST_SRCDIR/$TEST_WORKSPACE/services/learn/testdata.
runfiles=$build/runfiles
td=$runfiles/gaptrain/services/learn/testdata
mkdir -p "$td"
cp services/learn/testdata/make_scripted_model.py "$td/"
for spec in "tiny_convnet.pt 10" "tiny_convnet_7_classes.pt 7" "no_params.pt noparams"; do
  set -- $spec
  $py services/learn/testdata/make_scripted_model.py "$td/$1" "$2" 2>&1 | grep -v Warning
done

run_test() {  # name, gtest filter, log name
  local bin=$build/cmake/$1
  if [[ ! -x "$bin" ]]; then
    echo "SKIPPED $1 ($3): not built (no GoogleTest, or its build failed)"
    return
  fi
  section "$1 --gtest_filter=$2"
  if TEST_SRCDIR=$runfiles TEST_WORKSPACE=gaptrain timeout 300 "$bin" --gtest_filter="$2" 2>&1 |
      tee "$logs/$3.log"; then
    echo "PASSED $1 ($3)"
  else
    echo "FAILED $1 ($3)"
    status=1
  fi
}
run_test model_test 'ModelDeviceTest.*' cuda_tests
run_test device_test '*' device_test
run_test model_test '-ModelDeviceTest.*' model_test_rest

section "compute_bench"
if [[ -x "$build/cmake/compute_bench" ]]; then
  timeout 400 "$build/cmake/compute_bench" ${BENCH_ARGS:-} 2>&1 | tee "$logs/compute_bench.log" ||
    { echo "FAILED compute_bench"; status=1; }
else
  echo "SKIPPED compute_bench: not built"
  status=1
fi

section "done: exit status $status (logs in $logs)"
exit $status
