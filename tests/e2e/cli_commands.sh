#!/usr/bin/env bash
# End to end: every `fairlane` client command against a running service, with its exit
# status: enqueue (accepted, busy, a rejected file) and --watch with its non-TTY output and
# summary and rate, result (Markdown, -o, --json; escape sequences kept for a pipe, dropped
# on a terminal), status, cancel, estimate, watch of an unknown job,
# a bad key, no key, an unreachable service; and the order flags > FAIRLANE_URL > --config.
# An upload streams its file after Expect: 100-continue, always with an Idempotency-Key, and
# one whose answer never came says which key sends it again safely.
#
#   cli_commands.sh FAIRLANE FAIRLANE_PROVIDER_SIM FAIRLANE_PDFGEN
set -euo pipefail
fairlane=$1
stand_in=$2
pdfgen=$3
source "$(dirname "$0")/lib.sh"

# One call at a time, 0.2 s each; 120 requests a minute, so a long backlog is busy.
start_stand_in --latency-ms 200 --rpm 6000 --tpm 6000000 --max-in-flight 1
alice=$(add_user alice)
bob=$(add_user bob)
start_serve --rpm 120 --tpm 6000000 --max-in-flight 1 --max-tokens 100 --max-wait 60 \
  --max-job-seconds 600 --price-per-mtok 3 --heartbeat 1
export FAIRLANE_URL=$base

# run EXPECTED-EXIT ARGS...: runs `fairlane ARGS`, its stdout to $out and its stderr to $err,
# which are $work/cli.N.out and .err, N counting the calls (in a file: subshells call too), so
# that lib.sh's scan sees every call's output. A sanitizer's report fails the call whatever
# its status: ASan and UBSan exit 1, which a `run 1` case would take for the command's own.
run() {
  local want=$1 got=0 calls
  shift
  calls=$(($(cat "$work/calls" 2>/dev/null || echo 0) + 1))
  echo "$calls" >"$work/calls"
  out=$work/cli.$calls.out
  err=$work/cli.$calls.err
  timeout 60 "$fairlane" "$@" >"$out" 2>"$err" || got=$?
  if grep -qE "$sanitizer_report" "$err"; then
    fail "fairlane $* exited $got with a sanitizer's report: $(head -40 "$err")"
  fi
  [[ $got == "$want" ]] ||
    fail "fairlane $* exited $got, not $want; out: $(cat "$out"); err: $(cat "$err")"
}
# has out|err PATTERN: the last call's stdout or stderr has a line matching PATTERN.
has() {
  local file=$out
  [[ $1 == err ]] && file=$err
  grep -q -- "$2" "$file" || fail "no '$2' in the $1 of the last command: $(cat "$file")"
}

"$pdfgen" --pages 6 --out "$work/book.pdf"
run 0 enqueue "$work/book.pdf" --watch --key "$alice"
has out "accepted $work/book.pdf as job_"
has out "book.pdf: 6/6 done, 0 failed, done"
has out "DONE/TOTAL"
id=$(grep -o 'job_[0-9a-f]*' "$out" | head -1)
# Non-TTY: one plain line per update, no escape sequences.
if grep -q $'\x1b' "$out"; then fail "the watch wrote escape codes to a pipe"; fi
[[ $(grep -c "^$id book.pdf: " "$out") -ge 2 ]] || fail "fewer than two updates: $(cat "$out")"
# The rate is pages done over the time since the upload: a real one at the end, not 0.0.
has out "book.pdf: 6/6 done, 0 failed, done, [1-9][0-9]*[.][0-9] pages/min"

run 0 result "$id" --key "$alice"
has out "^# book.pdf"
has out "^## Page 6"
has out "^Page 6 of 6"
run 0 result "$id" -o "$work/book.md" --key "$alice"
grep -q '^Page 1 of 6' "$work/book.md" || fail "result -o wrote: $(head -5 "$work/book.md")"
# A write that fails says why (it said "check the folder exists and is writable" whatever
# happened), and a file there is replaced whole or not at all: the result goes to a file of
# its own beside it first, then takes its name.
run 1 result "$id" -o /dev/full --key "$alice"
has err "cannot write /dev/full: No space left on device"
run 1 result "$id" -o "$work/no-such-folder/book.md" --key "$alice"
has err "cannot write $work/no-such-folder/book.md: No such file or directory"
echo "an older result" >"$work/book.md"
run 0 result "$id" -o "$work/book.md" --key "$alice"
grep -q '^Page 1 of 6' "$work/book.md" || fail "result -o over a file wrote: $(head -5 "$work/book.md")"
[[ -z $(find "$work" -maxdepth 1 -name 'book.md.*') ]] || fail "result -o left files behind: $(ls "$work")"
# A symlink is written through, not replaced: /dev/stdout with the output redirected to a
# file is one (replaced, as root, it would become a file made in /dev; a link of the test's
# own stands for it here).
ln -s "$work/book.md" "$work/link.md"
run 0 result "$id" -o "$work/link.md" --key "$alice"
[[ -L "$work/link.md" ]] || fail "result -o replaced a symlink with a file"
run 0 result "$id" --json --key "$alice"
has out '"pages":\[{"page":1,"state":"done"'

# The provider's output as the stand-in echoes it: with escape sequences (colours, a window
# title, a bell). To a pipe the bytes are kept; to a terminal (a pty from script(1)) they go.
printf '{"name":"escapes","pages":["red \\u001b[31mRED\\u001b[0m \\u001b]0;title\\u0007bell\\u0007 end"]}' \
  >"$work/escapes.json"
run 0 enqueue --pages-json "$work/escapes.json" --watch --key "$alice"
# One page, done within a second of the watch's start: still a real rate.
has out "escapes: 1/1 done, 0 failed, done, [1-9][0-9]*[.][0-9] pages/min"
escapes=$(grep -o 'job_[0-9a-f]*' "$out" | head -1)
run 0 result "$escapes" --key "$alice"
grep -q $'red \x1b\\[31mRED\x1b\\[0m \x1b]0;title\abell\a end' "$out" ||
  fail "result to a pipe changed the bytes: $(od -c "$out" | head)"
timeout 60 script -qec "$(printf '%q ' "$fairlane" result "$escapes" --key "$alice")" /dev/null \
  >"$work/tty.out" 2>&1 || fail "result on a terminal failed: $(cat "$work/tty.out")"
grep -q 'red RED bell end' "$work/tty.out" || fail "result on a terminal wrote: $(od -c "$work/tty.out" | head)"
if grep -q $'[\x1b\a]' "$work/tty.out"; then fail "result wrote escape codes to a terminal: $(od -c "$work/tty.out")"; fi

run 0 status --key "$alice"
has out "^service: "
has out "^$id  book.pdf .* done .* 6/6"
grep -q '^user  *weight' "$out" && fail "a user's status shows the lanes: $(cat "$out")"
# The admin sees every lane with work by user (none is left now), and has no jobs.
run 0 status --key "$admin_key"
has out "^service: "
has out "^user  *weight  *queued  *tokens  *in flight"

run 0 estimate --pages 3 --key "$bob"
has out "3 pages would be accepted now: position"
# 3,000 pages at 120 a minute take 25 minutes alone, over the 600 s a job may: no wait
# helps, so the refusal says to split it (422, exit 4), not to try again.
run 4 estimate --pages 3000 --key "$bob"
has err "split it into [0-9]* jobs of at most [0-9]* pages"
pages=$(for n in $(seq 3000); do printf '"p%d",' "$n"; done)
echo "{\"name\":\"huge\",\"pages\":[${pages%,}]}" >"$work/huge.json"
run 4 enqueue --pages-json "$work/huge.json" --key "$bob"
has err "split it into"

echo "not a PDF at all" >"$work/fake.pdf"
run 4 enqueue "$work/fake.pdf" --key "$bob"
has err "could not be read"

# Cancel: twenty pages queue behind the one call in flight; cancel takes the rest out.
run 0 enqueue --pages-json <(echo '{"name":"long","pages":['"$(for n in $(seq 20); do printf '"q%d",' "$n"; done | sed 's/,$//')"']}') --key "$bob"
long=$(grep -o 'job_[0-9a-f]*' "$out" | head -1)
run 0 cancel "$long" --key "$bob"
has out "cancelled $long: its [1-9][0-9]* queued pages will not be sent"
view=$(wait_ended "$bob" "$long" 20)
[[ $(field state <<<"$view") == cancelled ]] || fail "the cancelled job ended as: $view"
[[ $(grep -o 'its [0-9]* queued' "$out" | grep -o '[0-9]*') == $(count cancelled <<<"$view") ]] ||
  fail "cancel's count is not the pages cancelled: $(cat "$out") against $view"
# Cancelled again, once it has ended: nothing to cancel, said as such.
run 0 cancel "$long" --key "$bob"
has out "$long has already ended (cancelled): nothing to cancel"
run 7 watch "$long" --key "$bob"
has out "cancelled"

run 6 result job_000000000000000000000000 --key "$alice"
has err "you have no job"
run 6 cancel "$id" --key "$bob"
run 6 watch job_000000000000000000000000 --key "$alice"
run 5 status --key fl_wrong
has err "not known"
run 5 watch "$id" --key fl_wrong
run 2 enqueue "$work/book.pdf" "$work/book.pdf" --idempotency-key same --key "$alice"
# An empty or blank key would not be sent at all (libcurl drops a header with nothing after
# its colon), so an upload sent again with it could be taken twice; one the service would
# refuse (over 255 bytes, a control character) is refused before anything is sent.
for bad in "" "   " "$(head -c 256 /dev/zero | tr '\0' k)" $'tab\there'; do
  run 2 enqueue "$work/book.pdf" --idempotency-key "$bad" --key "$alice"
  has err "--idempotency-key is 1 to 255 bytes of UTF-8 text"
done

# More jobs than the 16 live streams a user may hold: watch takes them a few at a time.
ids=()
for n in $(seq 18); do
  echo "{\"name\":\"one-$n\",\"pages\":[\"p$n\"]}" >"$work/one-$n.json"
  run 0 enqueue --pages-json "$work/one-$n.json" --key "$alice"
  ids+=("$(grep -o 'job_[0-9a-f]*' "$out" | head -1)")
done
run 0 watch "${ids[@]}" --key "$alice"
[[ $(grep -c ': 1/1 done, 0 failed, done' "$out") == 18 ]] ||
  fail "watch did not see all 18 jobs done: $(cat "$out") $(cat "$err")"
# A user with more jobs than status lists (50) is told there are more.
carol=$(add_user carol)
for n in $(seq 51); do upload "$carol" "c$n" "p$n" >/dev/null; done
run 0 status --key "$carol"
[[ $(grep -c ' c[0-9]* ' "$out") == 50 ]] || fail "status did not list the newest 50: $(cat "$out")"
has out "(your newest 50 jobs; there are more)"
run 0 status --key "$bob"
! grep -q "there are more" "$out" || fail "status said there are more of bob's few jobs: $(cat "$out")"
(unset FAIRLANE_KEY; run 5 status)
run 1 status --key "$alice" --server http://127.0.0.1:9
has err "could not reach the service at http://127.0.0.1:9"
# Of several files, the one the failure met and those never sent are named.
run 1 enqueue "$work/book.pdf" "$work/fake.pdf" --key "$alice" --server http://127.0.0.1:9
has err "$work/book.pdf: could not reach the service at http://127.0.0.1:9"
has err "not sent: $work/fake.pdf"
# An empty file's whole body (0 bytes) is "sent" before any connection: a service never
# reached cannot have accepted it (until 2026-12-07 the command said it may have).
: >"$work/empty.pdf"
run 1 enqueue "$work/empty.pdf" --key "$alice" --server http://127.0.0.1:9
has err "$work/empty.pdf: could not reach the service at http://127.0.0.1:9"
! grep -q "may have been accepted\|idempotency-key" "$err" || fail "an upload never sent may have been accepted: $(cat "$err")"
# A watch rides out a service that went away (e2e.cli_watch_restart), not one never heard
# from: a wrong address fails at once, well within `run`'s 60 s.
run 1 watch "$id" --key "$alice" --server http://127.0.0.1:9
has err "could not reach the service at http://127.0.0.1:9"

# --server on the command line beats FAIRLANE_URL, which beats the config file, which is
# read when nothing else says.
echo 'server = "http://127.0.0.1:9"' >"$work/wrong.toml"
echo "server = \"$base\"" >"$work/right.toml"
FAIRLANE_URL=http://127.0.0.1:9 run 0 status --key "$alice" --server "$base"
run 0 status --key "$alice" --config "$work/wrong.toml"
(
  unset FAIRLANE_URL
  run 0 status --key "$alice" --config "$work/right.toml"
  run 1 status --key "$alice" --config "$work/wrong.toml"
  has err "could not reach the service at http://127.0.0.1:9"
)

# What an upload sends, seen by a stand-in for the service (fake.py MODE): "refuse" answers
# 413 from the headers and counts the body's bytes that come within a second; "vanish" reads
# the whole request and closes without an answer; "gateway" reads it and answers a proxy's
# 504, in HTML. Each writes the request's headers to $work/fake.headers, and the body's
# bytes it saw to $work/fake.bytes.
cat >"$work/fake.py" <<'PY'
import socket, sys
mode, work = sys.argv[1], sys.argv[2]
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
conn.settimeout(10)
data = b""
while b"\r\n\r\n" not in data:
    data += conn.recv(65536)
head, body = data.split(b"\r\n\r\n", 1)
open(work + "/fake.headers", "wb").write(head)
length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
if mode == "refuse":
    answer = b'{"error":{"type":"payload_too_large","message":"too large (fake)"}}'
    conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))
    conn.shutdown(socket.SHUT_WR)
    conn.settimeout(1)
    try:
        while True:
            more = conn.recv(65536)
            if not more:
                break
            body += more
    except socket.timeout:
        pass
else:
    while len(body) < length:
        body += conn.recv(65536)
    if mode == "gateway":
        answer = b"<html><body>504 Gateway Time-out</body></html>"
        conn.sendall(b"HTTP/1.1 504 Gateway Time-out\r\nContent-Type: text/html\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))
open(work + "/fake.bytes", "w").write(str(len(body)))
conn.close()
PY
fake() {
  coproc fake_server { python3 "$work/fake.py" "$1" "$work"; }
  fake_pid=$fake_server_PID
  pids+=("$fake_pid")
  read -r -u "${fake_server[0]}" fake_port
}
head -c 3000000 /dev/urandom >"$work/3mb.pdf"
# A 3 MB PDF waits for its 100 Continue: refused from its headers, not a byte of it is sent
# (it was read whole into memory and sent, whatever the answer). Every upload carries an
# Idempotency-Key, made up when none is given.
fake refuse
run 4 enqueue "$work/3mb.pdf" --key "$alice" --server "http://127.0.0.1:$fake_port"
has err "too large (fake)"
wait_exit "$fake_pid" 10
grep -qi '^Expect: 100-continue' "$work/fake.headers" || fail "no Expect: 100-continue: $(cat "$work/fake.headers")"
[[ $(cat "$work/fake.bytes") == 0 ]] || fail "$(cat "$work/fake.bytes") bytes of a refused body were sent"
grep -qiE '^Idempotency-Key: [0-9a-f]{32}' "$work/fake.headers" || fail "no Idempotency-Key made up: $(cat "$work/fake.headers")"
# Sent whole, and no answer: it may have been accepted, so the key to send it again with
# is given, the one it was sent with.
fake vanish
run 1 enqueue "$work/book.pdf" "$work/3mb.pdf" --key "$alice" --server "http://127.0.0.1:$fake_port"
wait_exit "$fake_pid" 10
has err "not sent: $work/3mb.pdf"
[[ $(cat "$work/fake.bytes") == $(stat -c %s "$work/book.pdf") ]] || fail "the whole PDF was not sent: $(cat "$work/fake.bytes")"
key=$(grep -i '^Idempotency-Key:' "$work/fake.headers" | cut -d' ' -f2 | tr -d '\r')
has err "may have been accepted"
has err "send it again with --idempotency-key $key: if it was accepted"
# A proxy's 504 (or 502, 408) after the whole body went: the service behind it may have
# taken it (reading a PDF can outlast a proxy's timeout), so the key is given as well. It
# was not: the key was random, and sending the file again made a second job.
fake gateway
run 1 enqueue "$work/book.pdf" --key "$alice" --server "http://127.0.0.1:$fake_port"
wait_exit "$fake_pid" 10
gateway_key=$(grep -i '^Idempotency-Key:' "$work/fake.headers" | cut -d' ' -f2 | tr -d '\r')
has err "504"
has err "send it again with --idempotency-key $gateway_key: if it was accepted"
# And sent again with it, the service gives the first job, not a second one.
run 0 enqueue "$work/book.pdf" --key "$alice" --idempotency-key "$key"
first=$(grep -o 'job_[0-9a-f]*' "$out" | head -1)
run 0 enqueue "$work/book.pdf" --key "$alice" --idempotency-key "$key"
[[ $(grep -o 'job_[0-9a-f]*' "$out" | head -1) == "$first" ]] || fail "the same key gave another job: $(cat "$out")"

# A result of more pages than the service answers at once (1,000) is asked a range at a
# time, and comes out whole: 1,001 pages, cancelled before any was sent.
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 20
start_serve --rpm 60000 --tpm 60000000 --max-in-flight 1 --max-tokens 100 --max-wait 3600 \
  --max-job-seconds 0
export FAIRLANE_URL=$base
python3 -c 'import json; print(json.dumps({"name": "long", "pages": ["p"] * 1001}))' \
  >"$work/long.json"
big=$(curl -sS --max-time 30 -X POST "$base/v1/jobs" -H "Authorization: Bearer $alice" \
  -H 'Content-Type: application/json' --data-binary @"$work/long.json" | field id)
[[ $big == job_* ]] || fail "the 1,001-page upload was not accepted"
run 0 cancel "$big" --key "$alice"
first_range=$(curl -sS --max-time 30 "$base/v1/jobs/$big/result" -H "Authorization: Bearer $alice")
[[ $(count next_from <<<"$first_range") == 1001 ]] ||
  fail "the first range does not go on at page 1001: ${first_range:0:200}...${first_range: -200}"
run 0 result "$big" --json --key "$alice"
[[ $(grep -o '"page":[0-9]*' "$out" | wc -l) == 1001 ]] ||
  fail "the result has $(grep -o '"page":[0-9]*' "$out" | wc -l) pages of 1001"
has out '"page":1001,"state":"cancelled"'
has out '"next_from":null'
run 0 result "$big" --key "$alice"
[[ $(grep -c '^## Page ' "$out") == 1001 ]] || fail "the Markdown has $(grep -c '^## Page ' "$out") pages of 1001"
echo "1 passed, 0 failed"
