#!/usr/bin/env bash
# End to end with the real binaries on 127.0.0.1: the provider stand-in, `fairlane user
# add`, `fairlane serve`, and curl as the client. An upload of JSON pages ends done with
# the pages' texts as results; keys are checked; the stand-in never refuses; /metrics
# counts the pages and times the calls; SIGTERM ends the service with status 0. Every wait is bounded; both processes are always stopped.
#
#   serve_basic.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 20 --rpm 6000 --tpm 600000 --max-in-flight 4

alice=$(add_user alice)
bob=$(add_user bob)
[[ $alice == fl_* ]] || fail "user add printed '$alice', not a key"

start_serve --rpm 6000 --tpm 600000 --max-in-flight 4 --max-tokens 100 --price-per-mtok 3

id=$(upload "$alice" e2e one two three)

view=$(wait_ended "$alice" "$id" 20)
[[ $(field state <<<"$view") == done ]] || fail "the job ended as: $view"
# Its cost is its tokens at $3 a million.
tokens=$(( $(count input_tokens <<<"$view") + $(count output_tokens <<<"$view") ))
cost=$(grep -o '"cost_usd":[^,}]*' <<<"$view" | cut -d: -f2)
awk -v c="$cost" -v t="$tokens" 'BEGIN { exit !(t > 0 && c > 0 && (c - t * 3e-6) ^ 2 < 1e-12) }' ||
  fail "the cost $cost is not $tokens tokens at \$3 a million: $view"

result=$(curl -sS "$base/v1/jobs/$id/result" -H "Authorization: Bearer $alice")
for text in one two three; do
  grep -q "\"output\":\"$text\"" <<<"$result" || fail "no output '$text' in $result"
done

[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/v1/jobs/$id" -H "Authorization: Bearer $bob") == 404 ]] ||
  fail "bob can see alice's job"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/v1/jobs/$id") == 401 ]] || fail "no key was let in"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/metrics") == 401 ]] || fail "/metrics let no key in"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/metrics" -H "Authorization: Bearer $alice") == 403 ]] ||
  fail "/metrics let a user's key in"

stats=$(curl -sS "$stand_in_url/stats")
grep -q '"rejected_429":0' <<<"$stats" || fail "the stand-in refused calls: $stats"
grep -q '"rejected_503":0' <<<"$stats" || fail "the stand-in refused calls: $stats"

metrics=$(curl -sS "$base/metrics" -H "Authorization: Bearer $admin_key")
grep -qx 'fairlane_pages_done_total 3' <<<"$metrics" || fail "/metrics does not count 3 done: $metrics"
grep -qx 'fairlane_call_latency_seconds_count 3' <<<"$metrics" ||
  fail "/metrics does not time 3 calls: $metrics"

kill -TERM "$serve_pid"
wait_exit "$serve_pid" 40
[[ $exited == 0 ]] || fail "fairlane serve exited $exited on SIGTERM: $(cat "$work/serve.1.out")"
echo "1 passed, 0 failed"
