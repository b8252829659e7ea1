#!/usr/bin/env bash
# Limits against hostile or careless clients, each set by its flag to a small value: headers
# over --max-header-kb get 431, a body over --max-body-mb 413, an upload over --max-pages or
# with a page over --max-page-kb 413 naming the page and the limit; malformed HTTP gets 400;
# a connection past --max-connections gets 503 and is closed at once while those open are
# still served; and slow clients (slowloris: many connections trickling header bytes) are
# closed after --read-timeout while a normal client is still answered. Every answer names the
# limit; nothing refused is queued. Bodies on their way past --max-receiving-mb get 503 from
# their headers. An early answer is heard by a client still sending its body, which is read
# and dropped up to --read-timeout.
#
#   serve_limits.sh FAIRLANE FAIRLANE_PROVIDER_SIM FAIRLANE_PDFGEN
set -euo pipefail
fairlane=$1
stand_in=$2
pdfgen=$3
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 10 --rpm 60000 --tpm 6000000
alice=$(add_user alice)
start_serve --rpm 60000 --tpm 6000000 --max-tokens 100 --max-header-kb 2 --max-body-mb 1 \
  --max-pages 5 --max-page-kb 1 --max-connections 8 --read-timeout 3
port=${base##*:}
auth=(-H "Authorization: Bearer $alice")
json=(-H 'Content-Type: application/json')

# expect STATUS TYPE SAYS CURL-ARGS...: the status, the error type, and a message saying SAYS.
expect() {
  local want=$1 type=$2 says=$3
  shift 3
  local got
  got=$(curl -sS --max-time 30 -o "$work/body" -w '%{http_code}' "$@")
  [[ $got == "$want" ]] || fail "wanted $want $type, got $got: $(cat "$work/body")"
  grep -q "\"type\":\"$type\"" "$work/body" || fail "wanted $type: $(cat "$work/body")"
  grep -q -- "$says" "$work/body" || fail "the answer does not say '$says': $(cat "$work/body")"
}
pages() { printf '{"name":"p","pages":['; printf '"%s",' "$@" | sed 's/,$//'; printf ']}'; }
a_times() { head -c "$1" /dev/zero | tr '\0' a; }

# Headers: 2 KB in all.
expect 431 headers_too_large '2 KB fairlane accepts (--max-header-kb)' "$base/v1/jobs" "${auth[@]}" \
  -H "X-Padding: $(a_times 3000)"
[[ $(curl -sS -o /dev/null -w '%{http_code}' "$base/v1/jobs" "${auth[@]}" -H "X-Padding: $(a_times 1000)") == 200 ]] ||
  fail "headers under the limit were refused"

# The body: 1 MB.
a_times 1500000 >"$work/big.json"
expect 413 payload_too_large '1 MB fairlane accepts (--max-body-mb)' -X POST "$base/v1/jobs" "${auth[@]}" \
  "${json[@]}" --data-binary "@$work/big.json"
# Sent whole before the answer is read (no Expect: 100-continue), the 413 is heard, not
# lost to a reset.
a_times 5000000 >"$work/bigger.json"
out=$(send_whole "$alice" application/json "$work/bigger.json")
[[ $out == "413 payload_too_large" ]] || fail "5 MB sent whole: $out"

# Pages per upload: 5.
expect 413 payload_too_large 'at most 5 are taken at once (--max-pages)' -X POST "$base/v1/jobs" "${auth[@]}" \
  "${json[@]}" -d "$(pages 1 2 3 4 5 6)"
# Bytes per page: 1 KB, for JSON pages and a PDF's.
expect 413 payload_too_large 'page 2 has 1025 bytes of text; a page may have at most 1024 (--max-page-kb)' \
  -X POST "$base/v1/jobs" "${auth[@]}" "${json[@]}" -d "$(pages one "$(a_times 1025)")"
grep -q '"page":2,' "$work/body" || fail "the refusal has no page field: $(cat "$work/body")"
# A PDF's page over it is refused by its reader, which stops there, with the same 413.
"$pdfgen" --pages 2 --out "$work/dense.pdf" >/dev/null
expect 413 payload_too_large 'page 1 has [0-9]* bytes of text; a page may have at most 1024 (--max-page-kb)' \
  -X POST "$base/v1/jobs?name=dense.pdf" "${auth[@]}" -H 'Content-Type: application/pdf' \
  --data-binary "@$work/dense.pdf"
listed=$(curl -sS --max-time 10 "$base/v1/jobs" "${auth[@]}")
grep -q '"jobs":\[\]' <<<"$listed" || fail "a refused upload was enqueued: $listed"
id=$(upload "$alice" fits 1 2 3 4 "$(a_times 1024)")
[[ $(field state <<<"$(wait_ended "$alice" "$id" 20)") == done ]] || fail "the upload at the limits did not end done"

# raw BYTES: sends BYTES on a new connection and prints what comes back until the close.
raw() {
  exec {fd}<>"/dev/tcp/127.0.0.1/$port"
  printf '%b' "$1" >&"$fd"
  timeout 10 cat <&"$fd" || true
  exec {fd}>&-
}
for bad in 'NOT HTTP AT ALL\r\n\r\n' 'GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n' \
  'GET /healthz HTTP/1.1\r\nHost x\r\n\r\n'; do
  answer=$(raw "$bad")
  [[ $answer == "HTTP/1.1 400 Bad Request"* ]] || fail "malformed HTTP ($bad) got: $answer"
  grep -q '"type":"bad_request","message":"the request is not valid HTTP/1.1' <<<"$answer" ||
    fail "the 400 does not say why: $answer"
done

# What a chunked body carries besides its data (each chunk's size line with its extensions,
# the trailer's fields) is held to the read buffer (--max-header-kb and 4 KB, at most 64 KB):
# 431, the connection closed, and the service still up. Before, a trailer field over 64 KB threw out of the read
# and ended the process, and a chunk extension was read without bound (3 GB in 21 s).
chunked="POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $alice\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
one_page='{"name":"tr","pages":["x"]}'
for tail in "0\r\nX-Pad: $(a_times 70000)\r\n\r\n" "5;$(a_times 20000)"; do
  answer=$(raw "${chunked}1b\r\n$one_page\r\n$tail")
  [[ $answer == "HTTP/1.1 431 Request Header Fields Too Large"* ]] ||
    fail "a chunked body's oversized ${tail:0:8}... got: ${answer:0:200}"
  grep -q 'larger than the 2 KB fairlane accepts (--max-header-kb)' <<<"$answer" ||
    fail "the 431 does not name the limit: ${answer:0:300}"
  [[ $(curl -sS --max-time 5 "$base/healthz") == *ok* ]] || fail "the service is down after a chunked body's ${tail:0:8}..."
done
# Within the limit, a trailer is taken.
answer=$(raw "${chunked}1b\r\n$one_page\r\n0\r\nX-Pad: $(a_times 500)\r\n\r\n")
[[ $answer == "HTTP/1.1 202 Accepted"* ]] || fail "a chunked upload with a small trailer got: ${answer:0:300}"

# Slowloris: 6 connections send a request's headers a line every 0.25 s for 10 s. Each is
# closed by the service after the 3 s read timeout: its reader sees the end of the stream
# within 8 s, which it could not if the connection were left open while the client trickles.
trap '' PIPE
for n in 1 2 3 4 5 6; do
  (
    exec 3<>"/dev/tcp/127.0.0.1/$port"
    (
      printf 'GET /healthz HTTP/1.1\r\nHost: x\r\n' >&3 2>/dev/null
      for _ in $(seq 40); do printf 'X-Slow: b\r\n' >&3 2>/dev/null || exit 0; sleep 0.25; done
    ) &
    if timeout 8 cat <&3 >"$work/slow.$n.out"; then echo closed >"$work/slow.$n"; else echo open >"$work/slow.$n"; fi
    kill %1 2>/dev/null || true
  ) &
  pids+=($!)
  slow+=($!)
done
# Meanwhile a normal client is answered, each time within 2.5 s (less than the read timeout).
sleep 0.5
for _ in 1 2 3 4; do
  [[ $(curl -sS --max-time 2.5 "$base/healthz") == *ok* ]] || fail "a normal client was not answered during the slowloris"
  sleep 0.25
done
for pid in "${slow[@]}"; do wait_exit "$pid" 20; done
for n in 1 2 3 4 5 6; do
  [[ $(cat "$work/slow.$n") == closed ]] || fail "slow connection $n was still open after 8 s"
  [[ ! -s $work/slow.$n.out ]] || fail "slow connection $n was answered: $(cat "$work/slow.$n.out")"
done

# trickle.py PORT WAIT HEAD PIECE: connects, waits WAIT s, sends HEAD (\r\n written as
# such), prints the status line of the answer, then sends PIECE every 0.1 s for up to 8 s
# and prints when, from the connection's start, a send failed: "cut off at S" (or "still
# open after 8 s"). An answer that ends its connection (a refusal) is read to its end first.
cat >"$work/trickle.py" <<'PY'
import socket, sys, time
port, wait = int(sys.argv[1]), float(sys.argv[2])
head, piece = (a.replace("\\r\\n", "\r\n").encode() for a in sys.argv[3:5])
start = time.monotonic()
s = socket.create_connection(("127.0.0.1", port), timeout=1)
time.sleep(wait)
s.sendall(head)
answer = s.recv(65536)
print(answer.split(b"\r\n", 1)[0].decode())
try:
    while b" 100 " not in answer.split(b"\r\n", 1)[0]:
        more = s.recv(65536)
        if not more:
            break
        answer += more
except socket.timeout:
    print("the answer's connection was not ended")
    sys.exit(0)
try:
    while time.monotonic() - start < 8:
        s.send(piece)
        time.sleep(0.1)
    print("still open after 8 s")
except OSError:
    print("cut off at %.1f" % (time.monotonic() - start))
PY
# cut_off_by OUT SECONDS: whether trickle.py's OUT says it was cut off within SECONDS.
cut_off_by() { [[ $(sed -n 2p "$1") =~ ^cut\ off\ at\ ([0-9.]+)$ ]] && (( ${BASH_REMATCH[1]%.*} < $2 )); }

# An answer given before the body was read is heard whole (above), and the body that still
# comes is read and dropped, but only until the request's 3 s read timeout: a client that
# keeps sending it, a byte every 0.1 s, is cut off by then, within 8 s.
python3 "$work/trickle.py" "$port" 0 \
  'POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/pdf\r\nContent-Length: 500000\r\n\r\n' \
  '%' >"$work/linger.out"
[[ $(sed -n 1p "$work/linger.out") == "HTTP/1.1 401 Unauthorized" ]] || fail "the lingering client's answer: $(cat "$work/linger.out")"
cut_off_by "$work/linger.out" 8 || fail "a body still coming after an early answer: $(cat "$work/linger.out")"

# One deadline for a whole request, from the connection's start, `Expect: 100-continue` or
# not: headers sent after 2.5 s idle, a 100, then a chunked body trickled, a chunk every
# 0.1 s, is cut off by 5 s from the start (at 3 s; until 2026-12-07 the 100 gave the body a
# read timeout of its own, and it went on to 5.5 s).
python3 "$work/trickle.py" "$port" 2.5 \
  "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $alice\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n" \
  '1\r\n \r\n' >"$work/deadline.out"
[[ $(sed -n 1p "$work/deadline.out") == "HTTP/1.1 100 Continue" ]] || fail "the late request's answer: $(cat "$work/deadline.out")"
cut_off_by "$work/deadline.out" 5 || fail "a request's body after its 100, past the read timeout: $(cat "$work/deadline.out")"

# Connections: 8 open (idle, as a browser's spare ones are); a ninth gets 503 naming the
# limit and is closed at once; the 8 are still served.
held=()
for _ in 1 2 3 4 5 6 7 8; do
  exec {fd}<>"/dev/tcp/127.0.0.1/$port"
  held+=("$fd")
done
ninth=$(raw '')
[[ $ninth == "HTTP/1.1 503 Service Unavailable"* ]] || fail "the ninth connection got: $ninth"
grep -q 'fairlane has 8 connections open, as many as it takes (--max-connections)' <<<"$ninth" ||
  fail "the 503 does not name the limit: $ninth"
for fd in "${held[@]}"; do
  printf 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&"$fd"
done
for fd in "${held[@]}"; do
  answer=$(timeout 10 cat <&"$fd" || true)
  [[ $answer == "HTTP/1.1 200 OK"* ]] || fail "a connection within the limit got: $answer"
  exec {fd}>&-
done
# Once they closed, new connections are taken again.
for _ in $(seq 100); do
  [[ $(curl -sS --max-time 5 "$base/healthz" 2>/dev/null) == *ok* ]] && break
  sleep 0.05
done
[[ $(curl -sS --max-time 5 "$base/healthz") == *ok* ]] || fail "no connection is taken after the others closed"

# Connections kept alive between requests (a browser's, a client pool's) do not lock new
# clients out: with 8 of them resting after a request each, a ninth connection is served,
# and the one that rested longest is closed to make room, as HTTP lets a server close an
# idle persistent connection; the other 7 are still served. Before, the ninth got 503 for
# as long as the 8 rested (the 60 s idle timeout).
cat >"$work/resting.py" <<'PY'
import socket, sys
port = int(sys.argv[1])
ask = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

def answer(s):
    """One whole answer's status line, or 'closed' when the server closed the connection."""
    s.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            return "closed"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += s.recv(4096)
    return head.split(b"\r\n")[0].decode()

resting = []
for _ in range(8):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(ask)
    print("resting", answer(s))
    resting.append(s)
ninth = socket.create_connection(("127.0.0.1", port))
ninth.sendall(ask)
print("ninth", answer(ninth))
for s in resting:
    try:
        s.sendall(ask)
        print("again", answer(s))
    except OSError:
        print("again closed")
PY
python3 "$work/resting.py" "$port" >"$work/resting.out" 2>&1 || fail "resting.py: $(cat "$work/resting.out")"
[[ $(grep -c '^resting HTTP/1.1 200' "$work/resting.out") == 8 ]] || fail "the 8 resting: $(cat "$work/resting.out")"
grep -q '^ninth HTTP/1.1 200' "$work/resting.out" || fail "a ninth connection beside 8 resting ones: $(cat "$work/resting.out")"
[[ $(sed -n 10p "$work/resting.out") == "again closed" ]] ||
  fail "the connection that rested longest was not the one closed: $(cat "$work/resting.out")"
[[ $(grep -c '^again HTTP/1.1 200' "$work/resting.out") == 7 ]] || fail "the other 7: $(cat "$work/resting.out")"

kill -TERM "$serve_pid"
wait_exit "$serve_pid" 40
[[ $exited == 0 ]] || fail "fairlane serve exited $exited: $(cat "$work/serve.1.out")"

# A large answer to a client that reads slowly but steadily is served whole: --write-timeout
# bounds each piece written, not the whole answer. Before, one deadline for the whole write
# cut a result off once it passed (a 48 MB result at 1 MB/s, after the default 30 s). The
# reader takes 64 KB every 16 ms (4 MB/s) through a receive buffer of 64 KB, so that no
# kernel's buffers hold the first 16 MB of the 19 MB result (an answer holds pages up to the
# one past 16 MiB of text: 280 of its 320 pages of 60 KB): its last pieces wait for seconds,
# each well within the timeout of 1 s.
start_stand_in --latency-ms 5 --rpm 600000 --tpm 6000000000
serve_db=$work/slow.db
bob=$(add_user bob)
start_serve --rpm 600000 --tpm 6000000000 --max-tokens 10 --write-timeout 1 --max-header-kb 63
port=${base##*:}
# At the largest --max-header-kb, a trailer field of 64 KB (one Beast cannot hold) is still
# refused, not thrown: the read buffer is at most 64 KB, whatever the limit.
answer=$(raw "${chunked/$alice/$bob}1b\r\n$one_page\r\n0\r\nX-Pad: $(a_times 65600)\r\n\r\n")
[[ $answer == "HTTP/1.1 431 Request Header Fields Too Large"* ]] ||
  fail "a 64 KB trailer field at --max-header-kb 63 got: ${answer:0:200}"
[[ $(curl -sS --max-time 5 "$base/healthz") == *ok* ]] || fail "the service is down after a 64 KB trailer field"
page=$(a_times 60000)
{
  printf '{"name":"long","pages":["%s"' "$page"
  for _ in $(seq 319); do printf ',"%s"' "$page"; done
  printf ']}'
} >"$work/long.json"
answer=$(curl -sS --max-time 60 -X POST "$base/v1/jobs" -H "Authorization: Bearer $bob" \
  -H 'Content-Type: application/json' --data-binary "@$work/long.json")
id=$(field id <<<"$answer")
[[ $id == job_* ]] || fail "the long upload answered: ${answer:0:300}"
[[ $(field state <<<"$(wait_ended "$bob" "$id" 60)") == done ]] || fail "the long job did not end done"
whole=$(curl -sS --max-time 60 -o "$work/first_range" -w '%{size_download}' \
  "$base/v1/jobs/$id/result" -H "Authorization: Bearer $bob")
((whole > 16800000)) || fail "the result's first range has $whole bytes, not the 16.8 MB of 280 pages"
[[ $(tail -c 100 "$work/first_range" | count next_from) == 281 ]] ||
  fail "the first range does not go on at page 281: $(tail -c 100 "$work/first_range")"
cat >"$work/slow_reader.py" <<'PY'
import socket, sys, time
port, path, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.connect(("127.0.0.1", port))
s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n".encode())
got = b""
while b"\r\n\r\n" not in got:
    chunk = s.recv(65536)
    if not chunk: break
    got += chunk
head, _, body = got.partition(b"\r\n\r\n")
size = len(body)
while True:
    time.sleep(0.016)
    chunk = s.recv(65536)
    if not chunk: break
    size += len(chunk)
print(head.split(b"\r\n")[0].decode().split(" ")[1], size)
PY
got=$(timeout 60 python3 "$work/slow_reader.py" "${base##*:}" "/v1/jobs/$id/result" "$bob")
[[ $got == "200 $whole" ]] || fail "the result read at 4 MB/s: $got, not 200 $whole (cut off)"
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 40
[[ $exited == 0 ]] || fail "fairlane serve exited $exited: $(cat "$work/serve.2.out")"

# Bodies on their way: at most --max-receiving-mb (60) at once, of one user's half (30),
# counted from their headers. Bob and Carol each send 20 MB of a 25 MB JSON body and hold
# the rest: 50 MB are on their way. Dave's 25 MB would pass the 60, and Bob's second his
# 30: both are told 503 before sending a byte (they ask with Expect: 100-continue), where
# before they got their 100 and their bodies were taken in beside the others (nothing but
# --max-connections bounded them: 1,000 bodies of up to 100 MB). Once the held bodies'
# connections end, Dave's is let in.
carol=$(add_user carol)
dave=$(add_user dave)
start_serve --max-body-mb 30 --max-receiving-mb 60
port=${base##*:}
cat >"$work/hold_body.py" <<'PY'
import select, socket, sys
port, keys = int(sys.argv[1]), sys.argv[2:]
held = []
for key in keys:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nContent-Length: 26214400\r\n\r\n" % key).encode())
    try:
        s.sendall(b'{"name": "held", "pages": ["' + b"a" * (20 * 1024 * 1024))
    except OSError:
        print("refused: " + s.recv(4096).decode(errors="replace").split("\r\n")[0], flush=True)
        sys.exit(0)
    held.append(s)
print("held", flush=True)
select.select([sys.stdin], [], [], 60)  # until the test closes this pipe, 60 s at most
PY
coproc holding { python3 "$work/hold_body.py" "$port" "$bob" "$carol"; }
holding_pid=$holding_PID  # (bash unsets holding_PID once the coprocess has ended)
pids+=("$holding_pid")
read -r -t 30 held <&"${holding[0]}" || fail "the held bodies were not sent"
[[ $held == held ]] || fail "the held bodies: $held"
wait_metric fairlane_upload_bytes_on_their_way 52428800 "50 MB are not counted on their way"
out=$(ask_to_send "$dave" application/json 26214400)
[[ $out == "HTTP/1.1 503 Service Unavailable"* ]] || fail "Dave's 25 MB beside 50 got: $out"
[[ $out == *"holds at most 60.0 MB at once (--max-receiving-mb)"* ]] ||
  fail "the 503 does not name --max-receiving-mb: $out"
# The size as the HTTP parser reads it: a Content-Length may be a list of equal values.
# (Read from the header's text, it counted as none, and passed.)
out=$(ask_to_send "$dave" application/json "26214400, 26214400")
[[ $out == "HTTP/1.1 503 Service Unavailable"* ]] || fail "Dave's 25 MB as a list got: $out"
out=$(ask_to_send "$bob" application/json 26214400)
[[ $out == *"reading 25.0 MB of your uploads already"* ]] || fail "Bob's second 25 MB got: $out"
exec {holding[1]}>&-
wait "$holding_pid" || true
wait_metric fairlane_upload_bytes_on_their_way 0 "bytes still counted after the connections ended"
out=$(ask_to_send "$dave" application/json 26214400)
[[ $out == "HTTP/1.1 100 Continue"* ]] || fail "Dave's upload once the others ended got: $out"
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 40
echo "1 passed, 0 failed"
