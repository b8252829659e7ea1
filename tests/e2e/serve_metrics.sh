#!/usr/bin/env bash
# End to end: the gauges and outcome counters of /metrics while they move. A stand-in that
# answers every call 429 (Retry-After: 1 s) for 3 s from its first call and 500 to 40% of
# the calls: while the storm lasts fairlane_dispatch_paused is 1; pages that failed an
# attempt wait out a backoff of up to 4 s, counted by fairlane_pages_held;
# fairlane_store_ok stays 1. Once
# the job is done both gauges are 0 again, and fairlane_call_outcomes_total counts what the
# stand-in counted: ok for every page, rate_limited for each 429 of the storm, server_error
# for each 500.
#
#   serve_metrics.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

limits=(--rpm 6000 --tpm 6000000 --max-in-flight 2)
start_stand_in "${limits[@]}" --latency-ms 50 --storm 0:3:1 --fail-rate 0.4 --seed 2
alice=$(add_user alice)
start_serve "${limits[@]}" --max-tokens 50 --max-attempts 20 --backoff-base 4 --backoff-max 4
id=$(upload "$alice" book p1 p2 p3 p4 p5 p6 p7 p8 p9 p10)

metrics() { curl -sS --max-time 10 "$base/metrics" -H "Authorization: Bearer $admin_key"; }
value() { grep "^$1 " | awk '{ print $2 }'; }  # NAME: the sample's value, from /metrics on stdin
paused_seen=0 held_seen=0 store_bad=0 state=""
for _ in $(seq 600); do
  now=$(metrics)
  [[ $(value fairlane_dispatch_paused <<<"$now") == 1 ]] && paused_seen=$((paused_seen + 1))
  (($(value fairlane_pages_held <<<"$now") > 0)) && held_seen=$((held_seen + 1))
  [[ $(value fairlane_store_ok <<<"$now") == 1 ]] || store_bad=$((store_bad + 1))
  state=$(curl -sS --max-time 10 "$base/v1/jobs/$id" -H "Authorization: Bearer $alice" | field state)
  [[ $state == done || $state == failed ]] && break
  sleep 0.1
done
[[ $state == done ]] || fail "the job is '$state' after 60 s: $(curl -sS "$base/v1/jobs/$id" -H "Authorization: Bearer $alice")"
((paused_seen > 0)) || fail "fairlane_dispatch_paused was never 1 during the storm"
((held_seen > 0)) || fail "fairlane_pages_held was never above 0 with pages in their backoff"
((store_bad == 0)) || fail "fairlane_store_ok was not 1 in $store_bad polls"

final=$(metrics)
stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
storm=$(count storm_429 <<<"$stats")
errors=$(count failed_500 <<<"$stats")
((storm > 0 && errors > 0)) || fail "the stand-in made no storm 429 or no 500: $stats"
[[ $(value fairlane_dispatch_paused <<<"$final") == 0 ]] || fail "dispatch is still paused: $final"
[[ $(value fairlane_pages_held <<<"$final") == 0 ]] || fail "pages are still held: $final"
[[ $(value fairlane_store_ok <<<"$final") == 1 ]] || fail "fairlane_store_ok is not 1: $final"
outcome() { value "fairlane_call_outcomes_total{outcome=\"$1\"}" <<<"$final"; }
[[ $(outcome ok) == 10 ]] || fail "outcome ok is '$(outcome ok)', not the 10 pages done: $final"
[[ $(outcome rate_limited) == "$storm" ]] ||
  fail "outcome rate_limited is '$(outcome rate_limited)', the stand-in answered $storm 429s: $final"
[[ $(outcome server_error) == "$errors" ]] ||
  fail "outcome server_error is '$(outcome server_error)', the stand-in answered $errors 500s: $final"
[[ $(value 'fairlane_provider_throttled_total{status="429"}' <<<"$final") == "$storm" ]] ||
  fail "the 429s counted are not the stand-in's $storm: $final"
echo "1 passed, 0 failed (paused in $paused_seen polls, pages held in $held_seen;" \
  "$storm storm 429s, $errors 500s)"
