#!/usr/bin/env bash
# Fault matrix: a stand-in that answers 30% of its calls with 500, under an RPM that binds.
# Every accepted page ends done with its own text or failed with its reason; the stand-in
# never refuses a call for exceeding its limits (fairlane counts a failed call's request,
# as the provider does); GET /v1/jobs/{id} answers within a second throughout.
#
#   faults_server_errors.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

# 60 requests a minute: the first minute's 60 cannot cover 45 pages and their retries.
limits=(--rpm 60 --tpm 600000 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 20 --fail-rate 0.3 --seed 11
alice=$(add_user alice)
bob=$(add_user bob)
start_serve "${limits[@]}" --max-tokens 50 --max-attempts 8 --backoff-base 0.05 --backoff-max 0.5

run_books 4 "$alice a 25" "$bob b 20"
failed_500=$(count failed_500 <<<"$stats")
((failed_500 > 0)) || fail "the stand-in injected no 500s: $stats"
requests=$(count requests <<<"$stats")
((requests > 60)) || fail "the RPM never bound ($requests requests): $stats"
echo "1 passed, 0 failed ($total_done of 45 pages done, $failed_500 answered 500," \
  "$requests requests, $polls polls answered, the slowest in $slowest_ms ms)"
