#!/usr/bin/env bash
# End to end with the real binaries on 127.0.0.1: the provider stand-in, `fairlane user
# add`, `fairlane serve`, and curl as the client. An upload of JSON pages ends done with
# the pages' texts as results; keys are checked; the stand-in never refuses; SIGTERM ends
# the service with status 0. Every wait is bounded; both processes are always stopped.
#
#   serve_basic.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The port a server printed ("listening on http://127.0.0.1:PORT"), waiting up to 10 s.
port_of() {
  for _ in $(seq 200); do
    if grep -q '^listening on' "$1" 2>/dev/null; then grep -o '[0-9]*$' "$1"; return; fi
    sleep 0.05
  done
  fail "no 'listening on' line in $1: $(cat "$1" 2>/dev/null)"
}
field() { grep -o "\"$1\":\"[^\"]*\"" | head -1 | cut -d'"' -f4; }

"$stand_in" --listen 127.0.0.1:0 --latency-ms 20 --rpm 6000 --tpm 600000 --max-in-flight 4 \
  >"$work/stand-in.out" 2>&1 &
pids+=($!)
stand_in_port=$(port_of "$work/stand-in.out")

alice=$("$fairlane" user add alice --db "$work/fairlane.db")
bob=$("$fairlane" user add bob --db "$work/fairlane.db")
[[ $alice == fl_* ]] || fail "user add printed '$alice', not a key"

FAIRLANE_ADMIN_KEY=admin-secret "$fairlane" serve --listen 127.0.0.1:0 --db "$work/fairlane.db" \
  --provider-url "http://127.0.0.1:$stand_in_port" --rpm 6000 --tpm 600000 --max-in-flight 4 \
  --max-tokens 100 >"$work/serve.out" 2>&1 &
serve_pid=$!
pids+=("$serve_pid")
base="http://127.0.0.1:$(port_of "$work/serve.out")"

job=$(curl -sS -X POST "$base/v1/jobs" -H "Authorization: Bearer $alice" \
  -H 'Content-Type: application/json' -d '{"name":"e2e","pages":["one","two","three"]}')
id=$(field id <<<"$job")
[[ $id == job_* ]] || fail "the upload answered: $job"

state=""
for _ in $(seq 400); do
  state=$(curl -sS "$base/v1/jobs/$id" -H "Authorization: Bearer $alice" | field state)
  [[ $state == done ]] && break
  sleep 0.05
done
[[ $state == done ]] || fail "the job is '$state' after 20 s"

result=$(curl -sS "$base/v1/jobs/$id/result" -H "Authorization: Bearer $alice")
for text in one two three; do
  grep -q "\"output\":\"$text\"" <<<"$result" || fail "no output '$text' in $result"
done

[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/v1/jobs/$id" -H "Authorization: Bearer $bob") == 404 ]] ||
  fail "bob can see alice's job"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/v1/jobs/$id") == 401 ]] || fail "no key was let in"

stats=$(curl -sS "http://127.0.0.1:$stand_in_port/stats")
grep -q '"rejected_429":0' <<<"$stats" || fail "the stand-in refused calls: $stats"
grep -q '"rejected_503":0' <<<"$stats" || fail "the stand-in refused calls: $stats"

kill -TERM "$serve_pid"
status=0
wait "$serve_pid" || status=$?
[[ $status == 0 ]] || fail "fairlane serve exited $status on SIGTERM: $(cat "$work/serve.out")"
echo "1 passed, 0 failed"
