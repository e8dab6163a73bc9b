#!/usr/bin/env bash
# Rewrites deploy/crd/gaptrain.io_trainingjobs.yaml, the TrainingJob
# CustomResourceDefinition, from the manifest's field tables
# (services/api/training_job.h), and its copy in the Helm chart
# (helm/gaptrain/crds/). Run it after changing a field:
# //operator/crd:trainingjob_crd_test fails until the committed file matches,
# //helm:gaptrain_chart_test until the chart's copy does.
# Builds only the small generator, not the services or LibTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! bazel build //operator/crd:gaptrain-crd >"$log" 2>&1; then
  grep -v linux-sandbox "$log" >&2
  exit 1
fi
"$(bazel info bazel-bin 2>/dev/null)/operator/crd/gaptrain-crd" \
  -o deploy/crd/gaptrain.io_trainingjobs.yaml
cp deploy/crd/gaptrain.io_trainingjobs.yaml helm/gaptrain/crds/gaptrain.io_trainingjobs.yaml
echo "wrote deploy/crd/gaptrain.io_trainingjobs.yaml and helm/gaptrain/crds/gaptrain.io_trainingjobs.yaml"
