#!/usr/bin/env bash
# Fault matrix: a stand-in that answers 20% of its calls 200 with broken JSON, under a TPM
# that binds. The provider ran (and billed) those calls, so fairlane must count their tokens
# as spent: refunding them would let it send more than the minute allows, and the
# stand-in would refuse calls over its TPM. Every page ends done or failed with its reason;
# GET /v1/jobs/{id} answers within a second throughout.
#
#   faults_malformed.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

# A page costs ceil((60 bytes of prompt + ~4 of text) / 4) + 100 = 116 tokens; 4,000 a
# minute is 34 calls, fewer than 30 pages and their retries (a fifth of the calls).
limits=(--rpm 6000 --tpm 4000 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 20 --malformed-rate 0.2 --seed 9
alice=$(add_user alice)
bob=$(add_user bob)
carol=$(add_user carol)
start_serve "${limits[@]}" --max-tokens 100 --max-attempts 6 --backoff-base 0.05 --backoff-max 0.5

run_books 4 "$alice a 10" "$bob b 10" "$carol c 10"
malformed=$(count malformed <<<"$stats")
((malformed > 0)) || fail "no answer was malformed: $stats"
requests=$(count requests <<<"$stats")
((requests > 34)) || fail "the TPM never bound ($requests calls): $stats"
echo "1 passed, 0 failed ($total_done of 30 pages done, $malformed answers malformed," \
  "$polls polls answered, the slowest in $slowest_ms ms)"
