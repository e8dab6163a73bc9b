#!/usr/bin/env bash
# Builds the libFuzzer targets (bazel/fuzz.bzl) with --config=fuzz (clang,
# libFuzzer, ASan, UBSan) and runs each for a while over its committed
# corpus. New inputs go to a scratch folder, never into the corpus; a crash
# is saved under $FUZZ_OUT (default /tmp/gaptrain-fuzz) and printed.
#
#   scripts/fuzz.sh [--seconds N] [//pkg:name_fuzzer ...]
#
# Default: every *_fuzzer target, 5 seconds each (what scripts/test.sh
# runs), from a fixed seed (FUZZ_SEED, default 1; 0 picks a random one for
# exploring), so that the same tree explores the same inputs on every run
# of scripts/test.sh: a crash found by chance stays reproducible and does
# not turn CI red at random. One line per target: "fuzz //pkg:name: PASSED (N inputs)" or
# "fuzz //pkg:name: FAILED ...". Without clang's fuzzer runtime it prints
# "fuzz: skipped: ..." and exits 0. Exits 1 when a target fails.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=5
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

if ! command -v clang >/dev/null 2>&1 || ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: skipped: clang is not installed (Debian: apt-get install clang libclang-rt-14-dev)"
  exit 0
fi
runtime="$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a"
if [[ ! -f "$runtime" ]]; then
  echo "fuzz: skipped: clang's libFuzzer runtime is missing ($runtime; Debian: libclang-rt-14-dev)"
  exit 0
fi

if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(bazel query 'attr(name, "_fuzzer$", kind("cc_binary", //...))' 2>/dev/null)
fi
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "fuzz: FAILED: no *_fuzzer targets found"
  exit 1
fi

build_log=$(mktemp)
trap 'rm -f "$build_log"' EXIT
if ! bazel build --config=fuzz "${targets[@]}" >"$build_log" 2>&1; then
  grep -v -e linux-sandbox -e "Cannot export local symbol" "$build_log" | tail -30
  for target in "${targets[@]}"; do echo "fuzz $target: FAILED (build)"; done
  exit 1
fi
bin=$(bazel info --config=fuzz bazel-bin 2>/dev/null)

out=${FUZZ_OUT:-/tmp/gaptrain-fuzz}
mkdir -p "$out"
failed=0
for target in "${targets[@]}"; do
  package=${target#//}
  package=${package%%:*}
  name=${target##*:}
  scratch=$(mktemp -d)
  log="$out/$name.log"
  # TEST_TMPDIR: where targets that need files write them.
  TEST_TMPDIR="$scratch" "$bin/$package/$name" -max_total_time="$seconds" -timeout=25 \
    -seed="${FUZZ_SEED:-1}" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/$name-" \
    "$scratch" "$package/${name}_corpus" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [[ $rc -eq 0 ]]; then
    echo "fuzz $target: PASSED (${runs:-0} inputs in ${seconds}s)"
  else
    failed=$((failed + 1))
    echo "fuzz $target: FAILED (exit $rc; log $log; crash inputs $out/$name-*)"
    grep -E "fuzz contract broken|ERROR: |SUMMARY|runtime error" "$log" | head -5
  fi
  rm -rf "$scratch"
done
[[ $failed -eq 0 ]]
