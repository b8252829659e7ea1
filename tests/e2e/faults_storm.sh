#!/usr/bin/env bash
# Fault matrix: a 429 storm with a long Retry-After. From 3 s after its first call the
# stand-in answers every call 429 with Retry-After 8 s, for 6 s. fairlane pauses all dispatch for
# the whole Retry-After at the first 429 (the limit is the account's), so it meets the
# storm at most once per call it had out (4); the pages refused go back to the head of
# their lanes without spending an attempt, and every page ends done. GET /v1/jobs/{id}
# answers within a second throughout, pause included.
#
#   faults_storm.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

limits=(--rpm 6000 --tpm 6000000 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 100 --storm 3:6:8
alice=$(add_user alice)
bob=$(add_user bob)
carol=$(add_user carol)
# One attempt: a page that met the storm and spent an attempt would fail.
start_serve "${limits[@]}" --max-tokens 50 --max-attempts 1

# 180 pages at 4 at a time and 0.1 s each: 4.5 s of work from the first call, which meets
# the storm 3 s in; the pause it causes outlasts it.
a=$(upload_book "$alice" a a 60)
b=$(upload_book "$bob" b b 60)
c=$(upload_book "$carol" c c 60)
start_poller "$alice" "$a"
for job in "$alice $a a" "$bob $b b" "$carol $c c"; do
  read -r key id prefix <<<"$job"
  check_pages "$key" "$id" "$prefix" 60
  ((done_pages == 60)) || fail "$id ended with $failed_pages pages failed"
done
stop_poller
check_limits 4
storm=$(count storm_429 <<<"$stats")
((storm >= 1)) || fail "the run never met the storm: $stats"
((storm <= 4)) || fail "fairlane met the storm $storm times: it did not wait out the Retry-After: $stats"
echo "1 passed, 0 failed (180 pages done, $storm calls met the storm, $polls polls answered, the slowest in $slowest_ms ms)"
