#!/usr/bin/env bash
# Fault matrix: the provider is down when fairlane starts. serve points at a port where
# nothing listens; books are uploaded (and accepted); 4 s later the stand-in starts on that
# port. An unreachable provider is the provider's outage, not the pages' fault: fairlane
# pauses dispatch and tries again later, spending no page's attempts, so every page ends
# done once it is back. GET /v1/jobs/{id} answers within a second throughout.
#
#   faults_down_at_start.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

# A free port: the stand-in takes one, says which, and goes.
"$stand_in" --listen 127.0.0.1:0 >"$work/probe.out" 2>&1 &
probe=$!
pids+=("$probe")
port=$(port_of "$work/probe.out")
kill -TERM "$probe"
wait_exit "$probe" 10
stand_in_url="http://127.0.0.1:$port"
curl -sS --max-time 2 "$stand_in_url/stats" >/dev/null 2>&1 && fail "something listens on $port"

limits=(--rpm 6000 --tpm 6000000 --max-in-flight 4)
alice=$(add_user alice)
bob=$(add_user bob)
# Backoffs short enough that five attempts per page would all be spent in the outage.
start_serve "${limits[@]}" --max-tokens 50 --max-attempts 5 --backoff-base 0.1 --backoff-max 1
a=$(upload_book "$alice" a a 20)
b=$(upload_book "$bob" b b 20)
start_poller "$alice" "$a"
sleep 4
view=$(curl -sS --max-time 10 "$base/v1/jobs/$a" -H "Authorization: Bearer $alice")
[[ $(count done <<<"$view") == 0 && $(count failed <<<"$view") == 0 ]] ||
  fail "with the provider down, pages ended: $view"

"$stand_in" --listen "127.0.0.1:$port" "${limits[@]}" --latency-ms 100 >"$work/stand-in.out" 2>&1 &
pids+=($!)
port_of "$work/stand-in.out" >/dev/null
for job in "$alice $a a" "$bob $b b"; do
  read -r key id prefix <<<"$job"
  check_pages "$key" "$id" "$prefix" 20
  ((done_pages == 20)) || fail "$id ended with $failed_pages pages failed after the outage"
done
stop_poller
check_limits 4
# Once it answered, calls went out four at a time again.
[[ $(count max_in_flight_seen <<<"$stats") == 4 ]] || fail "dispatch stayed slow after the outage: $stats"
echo "1 passed, 0 failed (40 pages done after a 4 s outage, $polls polls answered, the slowest in $slowest_ms ms)"
