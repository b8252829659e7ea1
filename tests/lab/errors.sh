#!/usr/bin/env bash
# fairlane-lab when something goes wrong around the cases, with stand-ins for `fairlane`:
# - a serve that does not start: the error quotes its log's last lines and names the log,
#   which is kept (until 2026-12-07 the error named a log in a folder then deleted);
# - a service that refuses to add the lab's users: the error gives its status and message
#   (until 2026-12-07: "could not add the lab's users", no more);
# - a report that cannot be written: exit 1 naming the file (until 2026-12-07 exit 0, the
#   report lost), and an --out that cannot be a folder is said before any case runs.
#
#   errors.sh FAIRLANE_LAB
set -euo pipefail
lab=$1
fairlane=unused stand_in=unused
source "$(dirname "$0")/../e2e/lib.sh"

# run_lab EXPECTED-EXIT NAME ARGS...: the lab, its stdout to $work/NAME.out, stderr to .err.
run_lab() {
  local want=$1 name=$2 got=0
  shift 2
  timeout 60 "$lab" --max-users 1 --pages 2 --time-scale 50 "$@" >"$work/$name.out" 2>"$work/$name.err" || got=$?
  [[ $got == "$want" ]] || fail "fairlane-lab $* exited $got, not $want: $(cat "$work/$name.out" "$work/$name.err")"
}

# A fairlane whose serve fails at once, saying why on stderr.
cat >"$work/broken-fairlane" <<'SH'
#!/usr/bin/env bash
echo "fairlane: cannot open the database: the disk is on fire (fake)" >&2
exit 1
SH
chmod +x "$work/broken-fairlane"
run_lab 1 broken --case 4 --fairlane "$work/broken-fairlane" --out "$work/broken-report"
grep -q "fairlane serve did not start.*the disk is on fire (fake)" "$work/broken.out" ||
  fail "the error does not quote the log: $(cat "$work/broken.out")"
log=$(grep -o "/[^ ]*/serve\.log" "$work/broken.out" | head -1)
[[ -n $log && -f $log ]] || fail "the log named ($log) is not there: $(cat "$work/broken.out")"
grep -q "the disk is on fire" "$log" || fail "the log kept is not serve's: $(cat "$log")"
rm -rf "$(dirname "$log")"

# A service that starts, and refuses POST /v1/users.
cat >"$work/refusing-fairlane" <<'PY'
#!/usr/bin/env python3
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = b'{"error":{"type":"forbidden","message":"that is not the admin key (fake)"}}'
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print("listening on http://127.0.0.1:%d" % server.server_address[1], flush=True)
server.serve_forever()
PY
chmod +x "$work/refusing-fairlane"
run_lab 1 refusing --case 4 --fairlane "$work/refusing-fairlane" --out "$work/refusing-report"
grep -q "could not add the lab's users: POST /v1/users answered 403: that is not the admin key (fake)" \
  "$work/refusing.out" || fail "the error does not give the answer: $(cat "$work/refusing.out")"
log=$(grep -o "/[^ ]*/serve\.log" "$work/refusing.out" | head -1)
[[ -n $log && -f $log ]] || fail "the log named ($log) is not there: $(cat "$work/refusing.out")"
rm -rf "$(dirname "$log")"

# A report that cannot be written (report.md is a folder): exit 1, naming it.
mkdir -p "$work/blocked/report.md"
run_lab 1 blocked --case 1 --out "$work/blocked"
grep -q "cannot write $work/blocked/report.md" "$work/blocked.err" ||
  fail "the unwritten report is not named: $(cat "$work/blocked.err")"
# An --out that is a file: said at once, before any case runs.
touch "$work/a-file"
run_lab 1 file --case 1 --out "$work/a-file"
grep -q "cannot make the folder $work/a-file" "$work/file.err" || fail "the bad --out is not named: $(cat "$work/file.err")"
grep -q "running" "$work/file.err" && fail "a case ran before the bad --out was said: $(cat "$work/file.err")"
echo "1 passed, 0 failed"
