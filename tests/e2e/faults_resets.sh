#!/usr/bin/env bash
# Fault matrix: a stand-in that resets the connection (RST) of 30% of its calls. fairlane
# takes each as a failed attempt and retries after a backoff. Every page ends done or
# failed with its reason; the stand-in's limits hold; GET /v1/jobs/{id} answers within a
# second throughout.
#
#   faults_resets.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

limits=(--rpm 6000 --tpm 6000000 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 20 --reset-rate 0.3 --seed 3
alice=$(add_user alice)
bob=$(add_user bob)
start_serve "${limits[@]}" --max-tokens 50 --max-attempts 8 --backoff-base 0.05 --backoff-max 0.5

run_books 4 "$alice a 30" "$bob b 30"
resets=$(count resets <<<"$stats")
((resets > 0)) || fail "no connection was reset: $stats"
echo "1 passed, 0 failed ($total_done of 60 pages done, $resets connections reset," \
  "$polls polls answered, the slowest in $slowest_ms ms)"
