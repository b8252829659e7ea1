#!/usr/bin/env bash
# End to end: the live events of a job (GET /v1/jobs/{id}/events, Server-Sent Events).
# A stream opened on a queued job shows it move, page by page, with heartbeats between
# changes, and ends by itself after the event that shows the job done; a stream on an ended
# job is that one event; another user gets 404; SIGTERM ends the streams still open; a
# stream that ended leaves its connection open for the next request; a client that leaves
# gives its stream's slot back at once.
#
#   serve_events.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

# One call at a time, 0.8 s each: a change about every 0.8 s, heartbeats every 0.2 s between.
start_stand_in --latency-ms 800 --rpm 6000 --tpm 600000 --max-in-flight 1
alice=$(add_user alice)
bob=$(add_user bob)
start_serve --rpm 6000 --tpm 600000 --max-in-flight 1 --max-tokens 100 --heartbeat 0.2 \
  --stop-deadline 1

id=$(upload "$alice" book p1 p2 p3 p4)
curl -sSN --max-time 60 "$base/v1/jobs/$id/events" -H "Authorization: Bearer $alice" \
  >"$work/events" 2>"$work/events.err" &
curl_pid=$!
wait_exit "$curl_pid" 70
[[ $exited == 0 ]] || fail "the stream did not end by itself (curl exit $exited): $(cat "$work/events.err")"

grep -qx 'retry: 2000' "$work/events" || fail "no retry line: $(cat "$work/events")"
grep -qx ': heartbeat' "$work/events" || fail "no heartbeat between changes: $(cat "$work/events")"
events=$(grep -c '^event: job$' "$work/events")
[[ $events -ge 3 ]] || fail "only $events events for a job of 4 pages: $(cat "$work/events")"
[[ $(grep -c '^data: ' "$work/events") == "$events" ]] || fail "events without data: $(cat "$work/events")"
# Pages done only grow, and the last event shows the job done with its 4 pages.
previous=0
while read -r line; do
  done_count=$(sed 's/.*"done":\([0-9]*\).*/\1/' <<<"$line")
  [[ $done_count -ge $previous ]] || fail "pages done went back from $previous to $done_count"
  previous=$done_count
done < <(grep '^data: ' "$work/events")
last=$(grep '^data: ' "$work/events" | tail -1)
[[ $(field state <<<"$last") == done ]] || fail "the last event is not the job done: $last"
grep -q '"done":4' <<<"$last" || fail "the last event does not count 4 pages done: $last"
# Two events in a row never repeat the same job object.
[[ -z $(grep '^data: ' "$work/events" | uniq -d) ]] || fail "an event repeats the one before it"

# The job has ended: a new stream is 204 No Content, which tells an EventSource client
# to stop reconnecting.
once=$(curl -sSN --max-time 10 -w '%{http_code}' "$base/v1/jobs/$id/events" \
  -H "Authorization: Bearer $alice")
[[ $once == 204 ]] || fail "a stream of an ended job answered: $once"

code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$base/v1/jobs/$id/events" \
  -H "Authorization: Bearer $bob")
[[ $code == 404 ]] || fail "bob's stream of alice's job answered $code"

kill -TERM "$serve_pid"
wait_exit "$serve_pid" 20
[[ $exited == 0 ]] || fail "fairlane serve exited $exited on SIGTERM: $(cat "$work/serve.$serve_starts.out")"

# Calls of 3 s and a heartbeat of 30 s: the event that ends a stream comes with the change,
# not with a heartbeat.
start_stand_in --latency-ms 3000 --rpm 6000 --tpm 600000 --max-in-flight 1
start_serve --rpm 6000 --tpm 600000 --max-in-flight 1 --max-tokens 100 --heartbeat 30 \
  --stop-deadline 20
one=$(upload "$alice" one-page p1)
# The job is asked again after its stream, on the same connection: the stream's end leaves
# it open for the next request.
curl -sSN --max-time 60 "$base/v1/jobs/$one/events" "$base/v1/jobs/$one" \
  -H "Authorization: Bearer $alice" -w '\nconnects %{num_connects}\n' >"$work/one" 2>&1 &
one_pid=$!
wait_ended "$alice" "$one" 30 >/dev/null
wait_exit "$one_pid" 3
[[ $exited == 0 ]] || fail "the stream did not end with its job: $(cat "$work/one")"
grep -q '"state":"done"' "$work/one" || fail "the stream's last event is not done: $(cat "$work/one")"
[[ $(grep -c '^connects ' "$work/one") == 2 ]] || fail "not two answers: $(cat "$work/one")"
[[ $(grep '^connects ' "$work/one" | tail -1) == "connects 0" ]] ||
  fail "the request after the stream needed a new connection: $(cat "$work/one")"

# A request sent while a stream runs on its connection (pipelined) is answered after the
# stream's end: the read kept pending to see a close takes its bytes, and gives them back.
two=$(upload "$alice" two-pages p1 p2)
cat >"$work/pipelined.py" <<'PY'
import socket, sys
port, job, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=30)
head = f"Host: x\r\nAuthorization: Bearer {key}\r\n"
s.sendall(f"GET /v1/jobs/{job}/events HTTP/1.1\r\n{head}\r\n".encode())
got = b""
while b"event: job" not in got:
    got += s.recv(65536)
s.sendall(f"GET /v1/jobs/{job} HTTP/1.1\r\n{head}Connection: close\r\n\r\n".encode())
while True:
    chunk = s.recv(65536)
    if not chunk: break
    got += chunk
sys.stdout.write(got.decode(errors="replace"))
PY
timeout 60 python3 "$work/pipelined.py" "${base##*:}" "$two" "$alice" >"$work/pipelined" ||
  fail "the pipelined request was not answered: $(cat "$work/pipelined")"
grep -q '"state":"done"' "$work/pipelined" || fail "the stream did not run to its end: $(cat "$work/pipelined")"
[[ $(grep -c '^HTTP/1.1 200' "$work/pipelined") == 2 ]] ||
  fail "not the stream and the job: $(cat "$work/pipelined")"
tail -1 "$work/pipelined" | grep -q "\"id\":\"$two\"" ||
  fail "the job is not the last answer: $(tail -c 300 "$work/pipelined")"

# A stream still open when the service stops ends at once, while the service itself waits
# for its call in flight (up to --stop-deadline).
long=$(upload "$alice" long a b c)
curl -sSN --max-time 60 "$base/v1/jobs/$long/events" -H "Authorization: Bearer $alice" \
  >"$work/long" 2>&1 &
long_pid=$!
for _ in $(seq 100); do grep -q '"in_flight":1' "$work/long" && break; sleep 0.05; done
grep -q '"in_flight":1' "$work/long" || fail "no call in flight seen: $(cat "$work/long")"
kill -TERM "$serve_pid"
wait_exit "$long_pid" 2
kill -0 "$serve_pid" 2>/dev/null || fail "the service had ended before the stream: the test proves nothing"
wait_exit "$serve_pid" 20
[[ $exited == 0 ]] || fail "fairlane serve exited $exited on SIGTERM: $(cat "$work/serve.$serve_starts.out")"

# A client that leaves gives its stream's slot back when it closes, not at the next write
# that fails: with heartbeats an hour apart, 16 streams opened and left, a 17th is a stream,
# where while the 16 were open it was 429.
start_stand_in --latency-ms 3000 --rpm 6000 --tpm 600000 --max-in-flight 1
start_serve --rpm 6000 --tpm 600000 --max-in-flight 1 --max-tokens 100 --heartbeat 3600 \
  --max-wait 3600 --stop-deadline 1
slow=$(upload "$alice" slow a b c d e f g h)
stream_of() {
  curl -sSN --max-time "$1" "$base/v1/jobs/$slow/events" -H "Authorization: Bearer $alice" \
    -o "$2" -w '%{http_code}' || true
}
left=()
for i in $(seq 16); do
  curl -sSN --max-time 60 "$base/v1/jobs/$slow/events" -H "Authorization: Bearer $alice" \
    >"$work/left.$i" 2>&1 &
  left+=($!)
done
for i in $(seq 16); do
  for _ in $(seq 100); do grep -q '^event: job$' "$work/left.$i" && break; sleep 0.05; done
  grep -q '^event: job$' "$work/left.$i" || fail "stream $i did not open: $(cat "$work/left.$i")"
done
code=$(stream_of 5 "$work/seventeenth")
[[ $code == 429 ]] || fail "a 17th stream beside 16 open answered $code, not 429"
kill "${left[@]}"
for pid in "${left[@]}"; do wait_exit "$pid" 5; done
# The 16 have gone: a stream opened now stays open (curl ends it after a second).
for _ in $(seq 20); do
  code=$(stream_of 1 "$work/seventeenth")
  [[ $code == 200 ]] && break
  sleep 0.1
done
[[ $code == 200 ]] || fail "16 streams left, a 17th still answered $code: their slots were kept"
grep -q '^event: job$' "$work/seventeenth" || fail "the 17th stream had no event: $(cat "$work/seventeenth")"
[[ $(field state <"$work/seventeenth") == queued || $(field state <"$work/seventeenth") == running ]] ||
  fail "the job had ended, so its streams would have ended anyway: the test proves nothing"
echo "1 passed, 0 failed"
