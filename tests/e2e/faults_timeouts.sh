#!/usr/bin/env bash
# Fault matrix: a stand-in that never answers 20% of its calls. fairlane gives each call
# --call-timeout (1 s), then spends an attempt and retries after a backoff; its in-flight
# cap is never exceeded at the stand-in (a call given up on leaves it when fairlane closes
# the connection). Every page ends done: with 10 attempts a page fails only when all 10 of
# its calls hang (0.2^10, 1e-7 a page), while a build that never retried would fail about 8
# of the 40 (all 40 done without retries: 0.8^40, 1e-4). GET /v1/jobs/{id} answers within a
# second throughout, while calls hang.
#
#   faults_timeouts.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

limits=(--rpm 6000 --tpm 6000000 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 20 --timeout-rate 0.2 --seed 5
alice=$(add_user alice)
bob=$(add_user bob)
attempts=10
start_serve "${limits[@]}" --max-tokens 50 --call-timeout 1 --max-attempts "$attempts" \
  --backoff-base 0.05 --backoff-max 0.5

run_books 4 "$alice a 20" "$bob b 20"
hung=$(count timeouts <<<"$stats")
((hung > 0)) || fail "no call hung: $stats"
((total_done == 40)) || fail "only $total_done of 40 pages done with $attempts attempts each ($hung calls hung)"
grep -q '"in_flight":0' <<<"$stats" || fail "calls fairlane gave up on still hold the stand-in: $stats"
echo "1 passed, 0 failed ($total_done of 40 pages done, $hung calls never answered," \
  "$polls polls answered, the slowest in $slowest_ms ms)"
