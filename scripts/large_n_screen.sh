#!/bin/bash
# The screen of issue 42 ("Sixty-four workers as good as one"): every
# candidate at N = 64 (or $WORKERS), one seed, on Fashion-MNIST with the baseline job
# examples/sim/large-n/fashion-mnist.yaml (GA+DANA, lr 0.05, momentum 0.9,
# warm-up 5 epochs, 30 epochs), then the table (scripts/large_n_table.py).
# docs/results.md ("Large N") shows what it printed and what each
# candidate is.
#
# Usage: scripts/large_n_screen.sh [OUT_DIR] [SEEDS]
#   OUT_DIR defaults to results/large-n/screen, SEEDS to 1 ("1, 2, 3": each
#   candidate with three seeds). $GAPTRAIN_BIN: the gaptrain binary
#   [bazel-bin/cli/gaptrain, which must be an opt build]. $CANDIDATES: a
#   regular expression; only the candidates whose names match run.
#   $WORKERS: the N of a candidate that does not name its own ["64"]; the
#   sweep of docs/results.md runs WORKERS="1, 16, 32, 128" into another
#   OUT_DIR and gives the table both directories' runs.
#
# Candidates marked "(patch)" change the engine: they run only with a
# binary built from examples/sim/large-n/prototypes.patch, which switches
# each on with an environment variable (EXP_LOOKAHEAD, EXP_DC, EXP_DCF,
# EXP_DCC, EXP_CSCALE); without the patch they are skipped. Apply it to a
# scratch checkout, never to a commit:
#   git apply examples/sim/large-n/prototypes.patch
#   bazel build -c opt //cli:gaptrain
#   GAPTRAIN_PROTOTYPES=1 scripts/large_n_screen.sh
#   git apply -R examples/sim/large-n/prototypes.patch
# Each run takes about a minute on an idle core (N = 64, 14,070 pushes).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-results/large-n/screen}
SEED=${2:-1}
BIN=${GAPTRAIN_BIN:-bazel-bin/cli/gaptrain}
BASE=examples/sim/large-n/fashion-mnist.yaml
[ -x "$BIN" ] || { echo "build it first: bazel build -c opt //cli:gaptrain" >&2; exit 1; }
mkdir -p "$OUT"

# run NAME 'ENV ...' 'SED EXPRESSIONS' : one simulation of the baseline at
# N = $WORKERS (and the sweep's learning rates or momenta the sed adds).
LABELS=()
run() {
  local name=$1 env=$2 edit=$3
  [[ -z "${CANDIDATES:-}" || $name =~ $CANDIDATES ]] || return 0
  if [ -n "$env" ] && [ -z "${GAPTRAIN_PROTOTYPES:-}" ]; then
    echo "skip $name (needs the prototypes patch)" >&2
    return
  fi
  local job="$OUT/$name.yaml"
  sed -e "s#^    workers: .*#    workers: [${WORKERS:-64}]#" -e "s#^    seeds: .*#    seeds: [$SEED]#" \
      -e "s#^    output: .*#    output: $OUT/$name#" ${edit:+-e "$edit"} "$BASE" > "$job"
  env $env "$BIN" simulate -f "$job" --parallel 2 > "$OUT/$name.log" 2>&1
  LABELS+=("$name=$OUT/$name")
}

run baseline "" ""
run warmup-0 "" "s#warmupEpochs: 5 #warmupEpochs: 0 #"
run warmup-1 "" "s#warmupEpochs: 5 #warmupEpochs: 1 #"
run warmup-15 "" "s#warmupEpochs: 5 #warmupEpochs: 15 #"
run weight-decay-unpenalised "" "s#gapPrecision: fp32}#gapPrecision: fp32, penalizeWeightDecay: false}#"
run low-momentum "" "s#^    seeds: .*#    seeds: [$SEED]\n    learningRates: [0.1, 0.25]\n    momentum: [0, 0.5]#"
run grouped-4 "" "s#batchSize: 128#batchSize: 512#;s#^    workers: .*#    workers: [16]#;s#^    seeds: .*#    seeds: [$SEED]\n    learningRates: [0.1, 0.2]#"
run epochs-60 "" "s#epochs: 30#epochs: 60#"
run late-decay-75-90 "" "s#atFractions: \[0.5, 0.75\]#atFractions: [0.75, 0.9]#;s#^    workers: .*#    workers: [1, 64]#"
run late-decay-85-95 "" "s#atFractions: \[0.5, 0.75\]#atFractions: [0.85, 0.95]#;s#^    workers: .*#    workers: [1, 64]#"
run late-decay-90-97 "" "s#atFractions: \[0.5, 0.75\]#atFractions: [0.9, 0.97]#;s#^    workers: .*#    workers: [1, 64]#"
run epochs-60-late-decay-85-95 "" "s#epochs: 30#epochs: 60#;s#atFractions: \[0.5, 0.75\]#atFractions: [0.85, 0.95]#;s#^    workers: .*#    workers: [1, 64]#"
run epochs-90-late-decay-85-95 "" "s#epochs: 30#epochs: 90#;s#atFractions: \[0.5, 0.75\]#atFractions: [0.85, 0.95]#;s#^    workers: .*#    workers: [1, 64]#"
run round-look-ahead "EXP_LOOKAHEAD=1" ""
run round-look-ahead-at-N1-16 "EXP_LOOKAHEAD=1" "s#^    workers: .*#    workers: [1, 16]#"
run dana-dc "EXP_DCC=2" "s#rule: gap-aware-dana#rule: dana-zero#"
run ga-dana-dc-2 "EXP_DCC=2" ""
run ga-dana-dc-128 "EXP_DCC=128" ""
run ga-dana-dc-adaptive-2 "EXP_DC=2" ""
run ga-dana-dc-fisher-32 "EXP_DCF=32" ""
run ga-dana-dc-fisher-32-at-N1 "EXP_DCF=32" "s#^    workers: .*#    workers: [1]#"
run ga-dana-dc-fisher-128 "EXP_DCF=128" ""
run ga-dana-dc-fisher-512 "EXP_DCF=512" ""
run ga-dana-dc-fisher-2048 "EXP_DCF=2048" ""
run gap-scale-2 "EXP_CSCALE=2" ""
run gap-scale-0.5 "EXP_CSCALE=0.5" ""

/usr/bin/python3 scripts/large_n_table.py "${LABELS[@]}"
