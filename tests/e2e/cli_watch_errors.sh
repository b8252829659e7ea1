#!/usr/bin/env bash
# `fairlane watch` and the answers that are not a stream. A live-events stream answered 502,
# 504, 408 or 503 (a proxy in front of the service, a service at --max-connections) is
# opened again like one that dropped, after at least the answer's Retry-After, and the watch
# follows its job to the end, exit 0. (Until 2026-12-07 the first such answer ended the
# whole watch, exit 1 or 3, while the job still ran.) A job the service does not know (a
# typo among the ids) ends that job's watch only: the others are followed to their end, the
# summary lists every job, and the exit status is the refusal's (6). (Until 2026-12-07 the
# first 404 ended the whole watch, with no summary.)
#
#   cli_watch_errors.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 200 --rpm 60000 --tpm 6000000 --max-in-flight 1
alice=$(add_user alice)
start_serve --rpm 60000 --tpm 6000000 --max-in-flight 1 --max-tokens 100 --heartbeat 1

# A proxy in front of the service: the first live-events requests get the answers listed
# (STATUS or STATUS:RETRY_AFTER), one each, and are closed; every other request is forwarded.
# It writes "events SECONDS STATUS" to proxy.log for each live-events request.
cat >"$work/proxy.py" <<'PY'
import socket, sys, threading, time
backend, log, answers = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
reasons = {408: "Request Timeout", 502: "Bad Gateway", 503: "Service Unavailable",
           504: "Gateway Timeout"}
lock = threading.Lock()
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def serve(conn):
    head = b""
    while b"\r\n\r\n" not in head:
        data = conn.recv(65536)
        if not data:
            conn.close()
            return
        head += data
    path = head.split(b" ")[1].decode()
    answer = None
    if path.endswith("/events"):
        with lock:
            answer = answers.pop(0) if answers else None
            with open(log, "a") as f:
                f.write("events %.3f %s\n" % (time.monotonic(), answer or "forwarded"))
    if answer:
        status, _, retry = answer.partition(":")
        body = b'{"error":{"type":"busy","message":"too many connections (proxy)"}}'
        extra = "Retry-After: %s\r\n" % retry if retry else ""
        conn.sendall(("HTTP/1.1 %s %s\r\nContent-Type: application/json\r\n%sConnection: close\r\n"
                      "Content-Length: %d\r\n\r\n" % (status, reasons[int(status)], extra, len(body))
                      ).encode() + body)
        conn.close()
        return
    up = socket.create_connection(("127.0.0.1", backend))
    up.sendall(head)
    threading.Thread(target=pipe, args=(up, conn), daemon=True).start()
    pipe(conn, up)
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
PY
coproc proxy { exec python3 "$work/proxy.py" "${base##*:}" "$work/proxy.log" "502,504,408,503:12"; }
pids+=("$proxy_PID")
read -r -u "${proxy[0]}" proxy_port

pages=()
for n in $(seq 100); do pages+=("page-$n"); done
id=$(upload "$alice" watched "${pages[@]}")
# Waits of 2, 4, 8 s after the first three, then the 12 s the 503 asked for (more than the
# 10 s the backoff would give): 26 s, within the 60 s allowed.
FAIRLANE_KEY=$alice timeout 60 "$fairlane" watch "$id" --server "http://127.0.0.1:$proxy_port" \
  >"$work/watch.out" 2>"$work/watch.err" || fail "watch through the proxy exited $?: $(cat "$work/watch.err")"
grep -q ": 100/100 done, 0 failed, done" "$work/watch.out" ||
  fail "watch did not follow the job to its end: $(cat "$work/watch.out")"
[[ $(grep -c '^events' "$work/proxy.log") -ge 5 ]] || fail "fewer than 5 stream requests: $(cat "$work/proxy.log")"
gap=$(awk '$1 == "events" { t[++n] = $2 } END { printf "%.1f", t[5] - t[4] }' "$work/proxy.log")
awk -v gap="$gap" 'BEGIN { exit !(gap >= 11.9) }' ||
  fail "the stream was opened again $gap s after a 503 with Retry-After: 12: $(cat "$work/proxy.log")"

# A typo among the ids: the other jobs are followed to their end, the typo is named.
one=$(upload "$alice" one p1 p2)
two=$(upload "$alice" two p1 p2 p3)
got=0
FAIRLANE_KEY=$alice FAIRLANE_URL=$base timeout 60 "$fairlane" watch "$one" job_typo "$two" \
  >"$work/typo.out" 2>"$work/typo.err" || got=$?
[[ $got == 6 ]] || fail "watch with a typo exited $got, not 6: $(cat "$work/typo.out") $(cat "$work/typo.err")"
grep -q "^$one one: 2/2 done, 0 failed, done" "$work/typo.out" || fail "job one not followed: $(cat "$work/typo.out")"
grep -q "^$two two: 3/3 done, 0 failed, done" "$work/typo.out" || fail "job two not followed: $(cat "$work/typo.out")"
grep -q "job_typo.*404" "$work/typo.out" "$work/typo.err" || fail "the typo is not named with its 404: $(cat "$work/typo.out") $(cat "$work/typo.err")"
grep -q "^JOB " "$work/typo.out" || fail "no summary: $(cat "$work/typo.out")"
grep -q "^job_typo  *not found" "$work/typo.out" || fail "the summary does not list the typo: $(cat "$work/typo.out")"
echo "1 passed, 0 failed"
