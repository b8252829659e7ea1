#!/usr/bin/env bash
# `fairlane watch` rides out a restart of the service: killed mid-book and back 14 s later
# on the same address, the watch keeps trying (2 s, doubling to 10 s) and follows the job
# to its end, exit 0. (It gave up after five tries 2 s apart, about 10 s, exit 1 saying the
# service could not be reached.)
#
#   cli_watch_restart.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 200 --rpm 60000 --tpm 6000000 --max-in-flight 1
alice=$(add_user alice)
limits=(--rpm 60000 --tpm 6000000 --max-in-flight 1 --max-tokens 100 --heartbeat 1)
start_serve "${limits[@]}"
port=${base##*:}
pages=()
for n in $(seq 30); do pages+=("page-$n"); done
id=$(upload "$alice" watched "${pages[@]}")

FAIRLANE_URL=$base FAIRLANE_KEY=$alice "$fairlane" watch "$id" >"$work/watch.out" 2>"$work/watch.err" &
watch_pid=$!
pids+=("$watch_pid")
# Once the watch has heard from the service (it fails at once on one it never reached).
for _ in $(seq 100); do grep -q "$id" "$work/watch.out" && break; sleep 0.1; done
grep -q "$id" "$work/watch.out" || fail "watch showed nothing within 10 s: $(cat "$work/watch.err")"
pages_done "$alice" "$id" 2 >/dev/null
kill -KILL "$serve_pid"
wait_exit "$serve_pid" 10
sleep 14
kill -0 "$watch_pid" 2>/dev/null || fail "watch gave up while the service was away: $(cat "$work/watch.err")"

# Back on the same address and database.
FAIRLANE_ADMIN_KEY=$admin_key "$fairlane" serve --listen "127.0.0.1:$port" --db "$work/fairlane.db" \
  --provider-url "$stand_in_url" "${limits[@]}" >"$work/serve.again.out" 2>&1 &
pids+=($!)
port_of "$work/serve.again.out" >/dev/null
wait_exit "$watch_pid" 60
[[ $exited == 0 ]] || fail "watch exited $exited: $(cat "$work/watch.out") $(cat "$work/watch.err")"
grep -q ": 30/30 done, 0 failed, done" "$work/watch.out" || fail "watch did not see the job done: $(cat "$work/watch.out")"
echo "1 passed, 0 failed"
