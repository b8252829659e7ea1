#!/usr/bin/env bash
# Out of file descriptors, the service says so once, waits, and takes connections again.
# `fairlane serve` is held to 96 open files (prlimit) and 200 connections are opened to it:
# past the limit, accepting fails with EMFILE while the connections wait in the backlog.
# Before, the accept loop tried again at once, forever, spinning the io thread (which also
# dispatches) at full CPU and saying nothing; now the log names the limit and its remedy
# once, the loop tries again every 100 ms, and once the connections close, /healthz answers
# and the log says accepting works again.
#
#   serve_file_limit.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

# UBSan checks an object's dynamic type by asking, through a pipe, whether its memory can be
# read: with no descriptor left, it takes boost's error categories for bad objects ("invalid
# vptr", its memory "cannot be printed") and ends the process; it cannot even read its
# suppressions then. Under it this test cannot run; it runs under ThreadSanitizer (tools/test
# runs it there too) and in a plain build.
if [[ ${FAIRLANE_SANITIZE:-} == *undefined* ]]; then
  echo "SKIP: UBSan cannot check types with no file descriptor left"
  exit 77
fi

start_stand_in
start_serve
out="$work/serve.1.out"
port=${base##*:}
prlimit --pid "$serve_pid" --nofile=96:96

# hold.py: opens 200 connections, holds them until the log says accepting failed (10 s at
# most), 1 s more, then closes them all.
cat >"$work/hold.py" <<'PY'
import socket, sys, time
port, log = int(sys.argv[1]), sys.argv[2]
held = []
for _ in range(200):
    held.append(socket.create_connection(("127.0.0.1", port), timeout=3))
deadline = time.time() + 10
while time.time() < deadline and "accepting connections failed" not in open(log).read():
    time.sleep(0.05)
time.sleep(1)
for s in held:
    s.close()
PY
/usr/bin/python3 "$work/hold.py" "$port" "$out"

grep -q "accepting connections failed (Too many open files): raise the open-file limit" "$out" ||
  fail "the service did not say that it ran out of descriptors: $(tail -5 "$out")"
said=$(grep -c "accepting connections failed" "$out")
[[ $said == 1 ]] || fail "the failure was said $said times, not once"

# The backlog drains: the service answers again.
healthy=""
for _ in $(seq 100); do
  if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$base/healthz") == 200 ]]; then
    healthy=yes
    break
  fi
  sleep 0.1
done
[[ -n $healthy ]] || fail "the service did not answer /healthz once the connections closed"
grep -q "accepting connections again" "$out" || fail "the service did not say it recovered"
echo "PASS"
