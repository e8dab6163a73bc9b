#!/usr/bin/env bash
# Runs every test: installs what is missing, `bazel test //...`, then prints
# "N passed, N failed, N skipped" counted over GoogleTest cases (a target
# that fails to build, crashes or times out counts as one failure; a
# skipped case, GTEST_SKIP, is listed with its reason and counted apart, not
# as passed), plus scripts/check_layering.py as one test and each fuzz
# target's short run (scripts/fuzz.sh) as one test. Exits non-zero on any
# failure. With CI=true, a test that misses a tool fails instead of
# skipping (services/testing/missing_requirement.h), and so do the fuzz
# runs without clang.
# Extra arguments go to `bazel test`.
set -uo pipefail
cd "$(dirname "$0")/.."

# The container image test builds a Debian root file system from Debian's
# mirror (about a minute cold, cached after; root) and starts every binary
# in it (docs/image.md). It runs here and in CI, so the image cannot rot;
# GAPTRAIN_IMAGE_TEST=0 leaves it out (said so, and counted as skipped).
targets_extra=()
image_test_left_out=0
if [[ "${GAPTRAIN_IMAGE_TEST:-1}" != 0 ]]; then
  scripts/bootstrap.sh --image || exit 1
  targets_extra+=(//image:image_test)
else
  scripts/bootstrap.sh || exit 1
  image_test_left_out=1
  echo "test.sh: //image:image_test left out (GAPTRAIN_IMAGE_TEST=0; docs/image.md)"
fi

# use_tool VARIABLE SCRIPT WHAT: unless VARIABLE is set, exports it as what
# SCRIPT prints (a tool it builds once into a cache and finds after); when
# SCRIPT fails, WHAT skips (fails with CI=true).
use_tool() {
  local variable=$1 script=$2 what=$3 value start=$SECONDS
  [[ -n "${!variable:-}" ]] && return
  if value="$("$script")"; then
    export "$variable=$value"
    echo "test.sh: $variable=$value ($((SECONDS - start)) s)"
  else
    echo "test.sh: $script failed; $what will skip (fail with CI=true)"
    unset "$variable"
  fi
}

# The real Kubernetes control plane, Helm and Kueue the operator's tests
# run against (operator/envtest), built from their Go modules (about 10
# minutes on a fresh machine, a second after) and found as
# controller-runtime's envtest finds them.
use_tool KUBEBUILDER_ASSETS scripts/test-cluster.sh "the control-plane tests"
# The Python SDK's tests run with Debian's PyTorch and again with today's
# from PyPI, in a virtual environment (about a minute on a fresh machine).
use_tool GAPTRAIN_CURRENT_TORCH_PYTHON scripts/python-venv.sh \
  //python:python_sdk_current_torch_test
# The S3-compatible server the data tests read objects from: rclone's
# `serve s3`, built from its Go module (about 3 minutes on a fresh machine).
use_tool GAPTRAIN_RCLONE scripts/s3-server.sh "the object-store tests"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The full output goes to $log too (parsed below).
bazel test //... "${targets_extra[@]}" --keep_going --test_summary=short "$@" 2>&1 | tee "$log"
bazel_rc=${PIPESTATUS[0]}

testlogs=$(bazel info bazel-testlogs 2>/dev/null)
passed=0
failed=0
skipped=0
skipped_cases=()
targets=0
# Summary lines look like: "//services/engine:update_engine_test   (cached) PASSED in 0.4s"
while IFS='|' read -r target status; do
  targets=$((targets + 1))
  xml="$testlogs/${target#//}"
  xml="${xml/://}/test.xml"
  if [[ "$status" == PASSED || "$status" == FAILED ]] && [[ -f "$xml" ]]; then
    # <testsuites tests="12" failures="1" disabled="0" errors="0" ...>
    header=$(grep -m1 -o '<testsuites [^>]*>' "$xml")
    tests=$(sed -n 's/.* tests="\([0-9]*\)".*/\1/p' <<<"$header")
    fails=$(sed -n 's/.* failures="\([0-9]*\)".*/\1/p' <<<"$header")
    errors=$(sed -n 's/.* errors="\([0-9]*\)".*/\1/p' <<<"$header")
    disabled=$(sed -n 's/.* disabled="\([0-9]*\)".*/\1/p' <<<"$header")
    bad=$(( ${fails:-0} + ${errors:-0} ))
    # <testcase name="X" ... classname="Suite" ... result="skipped"> <skipped message="why"/>
    skips=$(grep -c 'result="skipped"' "$xml")
    while IFS= read -r line; do
      skipped_cases+=("$target $line")
    done < <(grep 'result="skipped"' "$xml" |
             sed -E 's#.*<testcase name="([^"]*)".*classname="([^"]*)".*#\2.\1#')
    good=$(( ${tests:-0} - ${disabled:-0} - bad - skips ))
    skipped=$((skipped + skips))
    # A target that failed without a failing case (crash after the cases ran).
    if [[ "$status" == FAILED && $bad -eq 0 ]]; then bad=1; fi
    passed=$((passed + good))
    failed=$((failed + bad))
  else
    failed=$((failed + 1))  # FAILED TO BUILD, NO STATUS, TIMEOUT, ...
  fi
done < <(sed -n -E 's#^(//[^ ]+)[[:space:]]+(\(cached\)[[:space:]]+)?(PASSED|FAILED TO BUILD|FAILED|NO STATUS|TIMEOUT|FLAKY|INCOMPLETE|SKIPPED)( in .*)?$#\1|\3#p' "$log")

# The include graph of services/ against its layering (issue 15): counted as
# one test.
targets=$((targets + 1))
if python3 scripts/check_layering.py; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

# The libFuzzer targets, a few seconds each over their committed corpus
# (issue 20, docs/fuzzing.md): each run counted as one test. Skipped, with
# a message, where clang's fuzzer runtime is missing.
while IFS= read -r line; do
  echo "$line"
  case "$line" in
    "fuzz //"*": PASSED"*) targets=$((targets + 1)); passed=$((passed + 1)) ;;
    "fuzz //"*": FAILED"*) targets=$((targets + 1)); failed=$((failed + 1)) ;;
    "fuzz: FAILED"*) failed=$((failed + 1)) ;;
    "fuzz: skipped"*)
      if [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; then
        failed=$((failed + 1))
      else
        skipped=$((skipped + 1)); skipped_cases+=("$line")
      fi ;;
  esac
done < <(scripts/fuzz.sh --seconds 4)

if [[ $image_test_left_out -eq 1 ]]; then
  skipped=$((skipped + 1)); skipped_cases+=("//image:image_test (GAPTRAIN_IMAGE_TEST=0)")
fi

echo
if [[ ${#skipped_cases[@]} -gt 0 ]]; then
  echo "skipped (not passed; the logs say why):"
  printf '  %s\n' "${skipped_cases[@]}"
fi
echo "test targets: $targets"
echo "$passed passed, $failed failed, $skipped skipped"
if [[ $failed -gt 0 || $bazel_rc -ne 0 || $targets -eq 0 ]]; then
  exit 1
fi
