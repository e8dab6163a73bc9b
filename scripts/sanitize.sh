#!/usr/bin/env bash
# Runs the unit tests under the sanitizers (docs/fuzzing.md, "Sanitizers"):
#   asan  every LibTorch-free test of services/, operator/ and cli/ under
#         AddressSanitizer + UndefinedBehaviorSanitizer (--config=asan);
#   tsan  the concurrency tests (threads, gRPC, Asio, the controller's
#         queues) under ThreadSanitizer (--config=tsan).
# LibTorch is compiled without sanitizers and its OpenMP runtime trips both,
# so tests that link it are left out (docs/fuzzing.md says which).
#
#   scripts/sanitize.sh [asan|tsan|all] [extra bazel test arguments]
#
# Cold, each configuration rebuilds what its tests need (about 10-20 min
# on 2 cores for asan); not part of scripts/test.sh for that reason.
set -uo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
shift || true

TSAN_TESTS=(
  //services/net:http_server_test
  //services/net:http_client_test
  //services/net:metrics_endpoint_test
  //services/base:process_test
  //services/engine:helping_pool_test
  //services/engine:update_engine_test
  //services/worker:shard_calls_test
  //services/master:master_service_test
  //services/coordinator:coordinator_service_test
  //services/coordinator:membership_feed_test
  //services/coordinator:tick_timer_test
  //operator/kube:reflector_test
  //operator/kube:client_test
  //operator/controller:work_queue_test
  //operator/controller:informer_test
  //operator/controller:leader_election_test
  //operator/controller:controller_test
)

rc=0
if [[ "$which" == asan || "$which" == all ]]; then
  mapfile -t asan_tests < <(bazel query \
    'tests(//services/... + //operator/... + //cli/...) except rdeps(//..., //third_party:torch)' \
    2>/dev/null)
  bazel test --config=asan --keep_going "${asan_tests[@]}" "$@" || rc=1
fi
if [[ "$which" == tsan || "$which" == all ]]; then
  # Races inside the uninstrumented system libraries (bazel/tsan.supp);
  # the path must be absolute, the tests run elsewhere.
  bazel test --config=tsan --keep_going \
    --test_env=TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions="$PWD/bazel/tsan.supp" \
    "${TSAN_TESTS[@]}" "$@" || rc=1
fi
exit $rc
