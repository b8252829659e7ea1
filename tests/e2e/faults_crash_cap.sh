#!/usr/bin/env bash
# The in-flight cap holds across crashes: `fairlane serve` is SIGKILLed three times while its
# calls are out at the provider (1 s each, 4 at a time, the stand-in's cap as fairlane's),
# and started again at once. The dead process's calls still run at the provider; the new
# one holds their places under --max-in-flight until they could have ended, so the provider
# never sees more than 4 calls at once and refuses none; every page ends done.
#
#   faults_crash_cap.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

limits=(--rpm 60000 --tpm 6000000 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 1000
alice=$(add_user alice)
start_serve "${limits[@]}" --max-tokens 100 --max-wait 600

pages=()
for n in $(seq 40); do pages+=("page-$n"); done
id=$(upload "$alice" crashes "${pages[@]}")

stat() { curl -sS --max-time 10 "$stand_in_url/stats" | count "$1"; }
for kill in 1 2 3; do
  # Some calls have ended (so the restart knows how long calls take), four are out now.
  done_before=$(stat ok)
  for _ in $(seq 200); do
    (($(stat ok) >= done_before + 2)) && [[ $(stat in_flight) == 4 ]] && break
    sleep 0.05
  done
  [[ $(stat in_flight) == 4 ]] || fail "kill $kill: the stand-in has $(stat in_flight) calls out, not 4"
  kill -KILL "$serve_pid"
  wait_exit "$serve_pid" 10
  start_serve "${limits[@]}" --max-tokens 100 --max-wait 600
done

view=$(wait_ended "$alice" "$id" 60)
[[ $(field state <<<"$view") == done && $(count done <<<"$view") == 40 ]] ||
  fail "the job ended as: $view"
stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
seen=$(count max_in_flight_seen <<<"$stats")
((seen <= 4)) || fail "the provider saw $seen calls at once, over the cap of 4: $stats"
grep -q '"rejected_503":0' <<<"$stats" || fail "the provider refused calls over its cap: $stats"
grep -q '"rejected_429":0' <<<"$stats" || fail "the provider refused calls for its limits: $stats"
echo "1 passed, 0 failed ($(count requests <<<"$stats") calls for 40 pages over 3 kills)"
