#!/usr/bin/env bash
# Fault matrix: a stand-in that resets the connection (RST) of 30% of its calls. fairlane
# takes each as a failed attempt and retries after a backoff. Every page ends done: with 12
# attempts a page fails only when all 12 of its calls are reset (0.3^12, 5e-7 a page). A
# build that never retried would fail some: fewer than the stand-in's 30% (curl itself sends
# a call again once when a reused connection dies before any answer), but with
# --max-attempts 1 13 to 15 of the 120 pages failed in three runs, so all 120 done without
# retries is about 0.88^120, 2e-7. The stand-in's limits hold; GET /v1/jobs/{id} answers within a second
# throughout.
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
attempts=12
start_serve "${limits[@]}" --max-tokens 50 --max-attempts "$attempts" --backoff-base 0.05 --backoff-max 0.5

run_books 4 "$alice a 60" "$bob b 60"
resets=$(count resets <<<"$stats")
((resets > 0)) || fail "no connection was reset: $stats"
((total_done == 120)) || fail "only $total_done of 120 pages done with $attempts attempts each ($resets resets)"
echo "1 passed, 0 failed ($total_done of 120 pages done, $resets connections reset," \
  "$polls polls answered, the slowest in $slowest_ms ms)"
