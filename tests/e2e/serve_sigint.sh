#!/usr/bin/env bash
# End to end: SIGINT (Ctrl-C) stops `fairlane serve` as SIGTERM does: no new calls, the
# call in flight is given --stop-deadline to finish and its result is kept, serve exits 0,
# and the pages not sent stay queued for the next start, which does them; idle, it exits 0
# at once.
#
#   serve_sigint.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

# One call at a time, 2 s each: the signal comes while the first is out.
start_stand_in --latency-ms 2000 --rpm 6000 --tpm 600000 --max-in-flight 1
alice=$(add_user alice)
limits=(--rpm 6000 --tpm 600000 --max-in-flight 1 --max-tokens 100)
start_serve "${limits[@]}" --stop-deadline 20
id=$(upload "$alice" book p1 p2 p3)
for _ in $(seq 100); do
  [[ $(curl -sS --max-time 10 "$base/v1/jobs/$id" -H "Authorization: Bearer $alice" | count in_flight) == 1 ]] && break
  sleep 0.05
done
view=$(curl -sS --max-time 10 "$base/v1/jobs/$id" -H "Authorization: Bearer $alice")
[[ $(count in_flight <<<"$view") == 1 && $(count done <<<"$view") == 0 ]] ||
  fail "no call was out before the signal: $view"

# (A background job of a script ignores SIGINT unless the program handles it: serve must.)
kill -INT "$serve_pid"
sleep 0.5
kill -0 "$serve_pid" 2>/dev/null || fail "serve ended at once on SIGINT, not waiting for its call"
wait_exit "$serve_pid" 20
[[ $exited == 0 ]] || fail "fairlane serve exited $exited on SIGINT: $(cat "$work/serve.1.out")"
stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
[[ $(count requests <<<"$stats") == 1 ]] || fail "calls were made after SIGINT: $stats"

# The call's result was kept; the two pages never sent wait for the next start.
start_serve "${limits[@]}"
view=$(curl -sS --max-time 10 "$base/v1/jobs/$id" -H "Authorization: Bearer $alice")
(($(count done <<<"$view") >= 1)) || fail "the call in flight at SIGINT was not kept: $view"
view=$(wait_ended "$alice" "$id" 30)
[[ $(field state <<<"$view") == done && $(count done <<<"$view") == 3 ]] ||
  fail "the job did not end done after the restart: $view"
[[ $(count requests <<<"$(curl -sS --max-time 10 "$stand_in_url/stats")") == 3 ]] ||
  fail "the restart did not send each remaining page once: $(curl -sS "$stand_in_url/stats")"
# With nothing in flight, SIGINT ends it at once, as well.
kill -INT "$serve_pid"
wait_exit "$serve_pid" 10
[[ $exited == 0 ]] || fail "fairlane serve exited $exited on SIGINT when idle: $(cat "$work/serve.2.out")"
echo "1 passed, 0 failed"
