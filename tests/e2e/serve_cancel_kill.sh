#!/usr/bin/env bash
# A cancel is kept through a crash: `fairlane serve` is SIGKILLed right after the 202 of
# DELETE /v1/jobs/{id}, then started again on the same database. The 202 shows the job as
# it is after the cancel (nothing queued), the job ends cancelled after the restart, and
# the provider gets no call for its pages after the kill.
#
#   serve_cancel_kill.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 300 --rpm 60000 --tpm 6000000 --max-in-flight 2
alice=$(add_user alice)
limits=(--rpm 60000 --tpm 6000000 --max-in-flight 2 --max-tokens 100)
start_serve "${limits[@]}"

pages=()
for n in $(seq 30); do pages+=("page-$n"); done
id=$(upload "$alice" cancelled "${pages[@]}")

# Cancel once a few pages are done and most are still queued (2 at a time, 300 ms each).
done_pages=$(pages_done "$alice" "$id" 2)
((done_pages >= 2)) || fail "no page was done within 4 s"
answer=$(curl -sS --max-time 10 -w '\n%{http_code}' -X DELETE "$base/v1/jobs/$id" \
  -H "Authorization: Bearer $alice")
kill -KILL "$serve_pid"
code=${answer##*$'\n'}
body=${answer%$'\n'*}
[[ $code == 202 ]] || fail "the cancel answered $code: $body"
[[ $(count queued <<<"$body") == 0 ]] || fail "the cancel's 202 still shows pages queued: $body"
cancelled=$(count cancelled <<<"$body")
((cancelled >= 20)) || fail "the cancel's 202 shows $cancelled pages cancelled: $body"
wait_exit "$serve_pid" 10
calls_at_kill=$(curl -sS --max-time 10 "$stand_in_url/stats" | count requests)

start_serve "${limits[@]}"
view=$(wait_ended "$alice" "$id" 20)
[[ $(field state <<<"$view") == cancelled ]] || fail "after the restart the job ended as: $view"
# The pages in flight at the kill were never answered: the restart cancels them too.
in_flight=$(count in_flight <<<"$body")
[[ $(count cancelled <<<"$view") == $((cancelled + in_flight)) ]] ||
  fail "the restart shows other pages cancelled than the 202's $cancelled and $in_flight in flight: $view"
# Give a resumed job the time to send a few pages (it must not).
sleep 1
calls=$(curl -sS --max-time 10 "$stand_in_url/stats" | count requests)
[[ $calls == "$calls_at_kill" ]] ||
  fail "the provider got $((calls - calls_at_kill)) calls after the kill for a cancelled job"
echo "1 passed, 0 failed ($cancelled pages cancelled, $calls calls)"
