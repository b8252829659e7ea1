#!/usr/bin/env bash
# Issue 6, end-to-end test 4: `fairlane serve` killed with SIGKILL mid-run and started again
# on the same database. Every accepted page ends done, and each appears exactly once in the
# result with its own text: pages in flight at the kill are requeued, not lost or doubled.
#
#   serve_restart.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 100 --rpm 60000 --tpm 6000000 --max-in-flight 4
alice=$(add_user alice)
limits=(--rpm 60000 --tpm 6000000 --max-in-flight 4 --max-tokens 100)
start_serve "${limits[@]}"

pages=()
for n in $(seq 40); do pages+=("page-$n"); done
id=$(upload "$alice" restart "${pages[@]}")

# Kill once some pages are done and others are still to go (40 pages at 4 in flight and
# 100 ms a call take about a second).
done_pages=$(pages_done "$alice" "$id" 8)
((done_pages >= 8 && done_pages < 40)) || fail "$done_pages pages done when the kill was due"
# Calls made so far, read after the done count: the calls beyond it (in flight, or answered
# but not yet committed) are the only ones the restart may make again.
calls_before=$(curl -sS --max-time 10 "$stand_in_url/stats" | count requests)
kill -KILL "$serve_pid"
wait_exit "$serve_pid" 10

start_serve "${limits[@]}"
# The killed process's lock did not stop the restart. A second serve on the file while this
# one runs is refused at once, naming it: two would dispatch the same lanes, each with the
# whole budget, the second requeueing the first's calls in flight.
second=0
FAIRLANE_ADMIN_KEY=$admin_key timeout 10 "$fairlane" serve --listen 127.0.0.1:0 --db "$work/fairlane.db" \
  --provider-url "$stand_in_url" "${limits[@]}" >"$work/second.out" 2>&1 || second=$?
[[ $second == 1 ]] || fail "a second serve on the same file exited $second: $(cat "$work/second.out")"
grep -q "another fairlane serve (process $serve_pid) dispatches from $work/fairlane.db" "$work/second.out" ||
  fail "the refusal does not name the serve that runs: $(cat "$work/second.out")"
view=$(wait_ended "$alice" "$id" 30)
[[ $(field state <<<"$view") == done ]] || fail "after the restart the job ended as: $view"
[[ $(count done <<<"$view") == 40 ]] || fail "not every page is done: $view"

result=$(curl -sS "$base/v1/jobs/$id/result" -H "Authorization: Bearer $alice")
[[ $(grep -o '"page":' <<<"$result" | wc -l) == 40 ]] || fail "the result lists not 40 pages: $result"
for n in $(seq 40); do
  seen=$(grep -o "\"output\":\"page-$n\"" <<<"$result" | wc -l)
  [[ $seen == 1 ]] || fail "page-$n is in the result $seen times: $result"
done
# At-least-once: only pages not yet committed as done at the kill may be answered again.
# (Calls the stand-in refused with 503 do not count: right after the restart it may still
# be serving the killed process's calls, up to its cap of 4.)
calls=$(curl -sS --max-time 10 "$stand_in_url/stats" | count ok)
repeats_allowed=$((calls_before - done_pages))
((calls >= 40 && calls <= 40 + repeats_allowed)) ||
  fail "the stand-in answered $calls calls with 200 for 40 pages ($calls_before before the kill, $done_pages done)"
echo "1 passed, 0 failed ($calls calls, $calls_before before the kill with $done_pages done)"
