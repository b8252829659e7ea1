#!/usr/bin/env bash
# End to end: SIGTERM while an accepted upload's 202 waits out its promise window. Bob's
# upload trickles in (its body at 4 KB/s), so Alice's, accepted meanwhile, is committed and
# its 202 held for --promise-window (3 s) to count his. serve is stopped then. Alice still
# gets her 202 (her job was committed: a client cut off would send it again), serve exits
# 0, Bob's upload, never read whole, is not stored, and after a restart Alice's job is there
# once and done.
#
#   serve_stop_held.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 10 --rpm 60000 --tpm 6000000
alice=$(add_user alice)
bob=$(add_user bob)
limits=(--rpm 60000 --tpm 6000000 --max-tokens 100)
start_serve "${limits[@]}" --promise-window 3 --stop-deadline 5

# Bob's 40 KB of pages, sent at 4 KB/s: on its way for about 10 s.
pages=$(for n in $(seq 40); do printf '"%s",' "$(head -c 1000 /dev/zero | tr '\0' 'b')"; done)
printf '{"name":"slow","pages":[%s]}' "${pages%,}" >"$work/slow.json"
curl -sS --max-time 30 --limit-rate 4k -o "$work/bob.body" -w '%{http_code}' -X POST \
  "$base/v1/jobs" -H "Authorization: Bearer $bob" -H 'Content-Type: application/json' \
  --data-binary "@$work/slow.json" >"$work/bob.code" 2>/dev/null &
bob_curl=$!
pids+=("$bob_curl")
sleep 0.5  # his headers are in: he is on his way

curl -sS --max-time 30 -o "$work/alice.body" -w '%{http_code}' -X POST "$base/v1/jobs" \
  -H "Authorization: Bearer $alice" -H 'Content-Type: application/json' \
  -d '{"name":"held","pages":["one","two"]}' >"$work/alice.code" &
alice_curl=$!
pids+=("$alice_curl")
# Committed (her job is listed) while her answer waits: then the stop.
for _ in $(seq 100); do
  [[ $(curl -sS --max-time 5 "$base/v1/jobs" -H "Authorization: Bearer $alice") == *'"id":"job_'* ]] && break
  sleep 0.05
done
[[ $(curl -sS --max-time 5 "$base/v1/jobs" -H "Authorization: Bearer $alice") == *'"id":"job_'* ]] ||
  fail "alice's upload was not committed"
[[ -s $work/alice.code ]] && fail "alice was answered before her window ended: $(cat "$work/alice.code")"
kill -TERM "$serve_pid"

wait "$alice_curl" || true
[[ $(cat "$work/alice.code") == 202 ]] ||
  fail "alice's committed upload was answered '$(cat "$work/alice.code")': $(cat "$work/alice.body" 2>/dev/null)"
id=$(field id <"$work/alice.body")
[[ $id == job_* ]] || fail "alice's 202 names no job: $(cat "$work/alice.body")"
wait_exit "$serve_pid" 20
((exited == 0)) || fail "serve exited $exited after SIGTERM"
wait "$bob_curl" || true
[[ $(cat "$work/bob.code") != 202 ]] || fail "bob's upload, cut off, was accepted"

# After a restart: Alice's job once, and done; nothing of Bob's.
start_serve "${limits[@]}"
view=$(wait_ended "$alice" "$id" 30)
[[ $(field state <<<"$view") == done ]] || fail "alice's job ended as: $view"
[[ $(curl -sS --max-time 5 "$base/v1/jobs" -H "Authorization: Bearer $alice" | grep -o '"id":"job_' | wc -l) == 1 ]] ||
  fail "alice has not exactly one job"
[[ $(curl -sS --max-time 5 "$base/v1/jobs" -H "Authorization: Bearer $bob") != *'"id":"job_'* ]] ||
  fail "bob's cut-off upload was stored"
echo "1 passed, 0 failed"
