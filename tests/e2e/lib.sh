# Shared by the end-to-end tests (sourced, not run): a scratch directory and the processes
# started are always cleaned up; every wait is bounded; failures say what was seen.
# Expects $fairlane and $stand_in to name the binaries.
work=$(mktemp -d)
pids=()
# What a sanitizer's report starts with (grep -E).
sanitizer_report='ERROR: (AddressSanitizer|LeakSanitizer)|WARNING: ThreadSanitizer|runtime error:'
# A sanitizer's report in any process's output fails the test, even one that otherwise passed.
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  local reports
  reports=$(grep -rlE --include='*.out' --include='*.err' --include='*.log' \
    "$sanitizer_report" "$work" || true)
  if [[ -n $reports ]]; then
    for file in $reports; do echo "FAIL: a sanitizer reported in $file:" >&2; head -40 "$file" >&2; done
    status=1
  fi
  [[ -n ${KEEP_WORK:-} ]] && echo "kept $work" >&2 || rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The port a server printed ("listening on http://127.0.0.1:PORT"), waiting up to 10 s.
port_of() {
  for _ in $(seq 200); do
    if grep -q '^listening on' "$1" 2>/dev/null; then grep -m1 '^listening on' "$1" | grep -o '[0-9]*$'; return; fi
    sleep 0.05
  done
  fail "no 'listening on' line in $1: $(cat "$1" 2>/dev/null)"
}
# The first string or number field of that name in the JSON on stdin.
field() { grep -o "\"$1\":\"[^\"]*\"" | head -1 | cut -d'"' -f4; }
count() { grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2; }

# start_stand_in ARGS...: the provider stand-in on a free port; sets stand_in_url.
start_stand_in() {
  "$stand_in" --listen 127.0.0.1:0 "$@" >"$work/stand-in.out" 2>&1 &
  pids+=($!)
  stand_in_url="http://127.0.0.1:$(port_of "$work/stand-in.out")"
}

# start_serve ARGS...: `fairlane serve` on a free port against the stand-in; sets base and
# serve_pid. Its output goes to $work/serve.N.out, N counting the starts. The admin key is
# $admin_key (POST /v1/users, /metrics). The database is $work/fairlane.db, or $serve_db when
# set (a PostgreSQL URI, say); add_user writes there too.
admin_key=admin-secret
serve_starts=0
start_serve() {
  serve_starts=$((serve_starts + 1))
  local out="$work/serve.$serve_starts.out"
  FAIRLANE_ADMIN_KEY=$admin_key "$fairlane" serve --listen 127.0.0.1:0 --db "${serve_db:-$work/fairlane.db}" \
    --provider-url "$stand_in_url" "$@" >"$out" 2>&1 &
  serve_pid=$!
  pids+=("$serve_pid")
  base="http://127.0.0.1:$(port_of "$out")"
}

# wait_exit PID SECONDS: waits up to SECONDS for a child process to exit and sets `exited`
# to its exit status, or fails. (Not in $(...): a subshell cannot wait for this shell's
# children.)
wait_exit() {
  for _ in $(seq $(($2 * 20))); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$1" 2>/dev/null && fail "process $1 is still running after $2 s"
  exited=0
  wait "$1" || exited=$?
}

# wait_ready BASE WHAT: waits up to 10 s until BASE/readyz says 200, or fails saying the
# instance is not ready WHAT ("after the cuts").
wait_ready() {
  local ready=""
  for _ in $(seq 100); do
    ready=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "$1/readyz" || true)
    [[ $ready == 200 ]] && return
    sleep 0.1
  done
  fail "$1 is not ready $2: $(curl -sS --max-time 5 "$1/readyz")"
}

add_user() { "$fairlane" user add "$1" --db "${serve_db:-$work/fairlane.db}"; }

# metric NAME: what serve's /metrics says of NAME now (a metric without labels), or nothing.
metric() {
  curl -sS --max-time 5 -H "Authorization: Bearer $admin_key" "$base/metrics" |
    awk -v name="$1" '$1 == name { print $2 }'
}

# ask_to_send KEY TYPE LENGTH: a POST /v1/jobs of TYPE with Content-Length LENGTH, and Expect:
# 100-continue and no body sent; prints the answer, lines ending in \n: a 100 Continue, or
# the refusal up to the server's close (3 s at most).
ask_to_send() {
  python3 - "${base##*:}" "$1" "$2" "$3" <<'PY'
import socket, sys
port, key, kind, length = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
s = socket.create_connection(("127.0.0.1", port), timeout=3)
s.sendall(("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\n"
           "Expect: 100-continue\r\nContent-Length: %s\r\n\r\n" % (key, kind, length)).encode())
data = b""
try:
    while b"\r\n\r\n" not in data or b" 100 " not in data.split(b"\r\n")[0]:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except (socket.timeout, ConnectionResetError):
    pass
print(data.decode(errors="replace").replace("\r\n", "\n"))
PY
}

# send_whole KEY TYPE FILE: a POST /v1/jobs of TYPE with FILE as its body, sent whole before
# the answer is read, with no Expect: 100-continue, as Python's http.client (and requests) do;
# KEY may be empty for none. Prints the status and the error's type, or the error the client
# met instead of an answer (a reset, a broken pipe).
send_whole() {
  python3 - "${base##*:}" "$1" "$2" "$3" <<'PY'
import http.client, json, sys
port, key, kind, path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
headers = {"Content-Type": kind}
if key:
    headers["Authorization"] = "Bearer " + key
connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
try:
    connection.request("POST", "/v1/jobs", body=open(path, "rb").read(), headers=headers)
    answer = connection.getresponse()
    body = answer.read()
    print(answer.status, json.loads(body).get("error", {}).get("type", ""))
except OSError as error:
    print("no answer:", repr(error))
PY
}

# wait_metric NAME VALUE WHAT: until /metrics says VALUE of NAME, 10 s at most, or fails
# saying WHAT.
wait_metric() {
  for _ in $(seq 100); do
    [[ $(metric "$1") == "$2" ]] && return 0
    sleep 0.1
  done
  fail "$3: $1 is $(metric "$1"), not $2"
}

# upload KEY NAME PAGE...: a JSON upload; prints the job id or fails with the answer.
upload() {
  local key=$1 name=$2
  shift 2
  local pages
  pages=$(printf '"%s",' "$@")
  local answer
  answer=$(curl -sS --max-time 30 -X POST "$base/v1/jobs" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -d "{\"name\":\"$name\",\"pages\":[${pages%,}]}")
  local id
  id=$(field id <<<"$answer")
  [[ $id == job_* ]] || fail "the upload of $name answered: $answer"
  echo "$id"
}

# pages_done KEY ID AT_LEAST: waits up to 4 s until the job has AT_LEAST pages done; prints
# how many it has then (the caller checks what it needs of that number).
pages_done() {
  local done_pages=0
  for _ in $(seq 200); do
    done_pages=$(curl -sS --max-time 10 "$base/v1/jobs/$2" -H "Authorization: Bearer $1" | count done)
    ((done_pages >= $3)) && break
    sleep 0.02
  done
  echo "${done_pages:-0}"
}

# wait_ended KEY ID SECONDS: waits until the job is done, failed or cancelled; prints it.
wait_ended() {
  local view="" state=""
  for _ in $(seq $(($3 * 20))); do
    view=$(curl -sS --max-time 10 "$base/v1/jobs/$2" -H "Authorization: Bearer $1" || true)
    state=$(field state <<<"$view")
    [[ $state == done || $state == failed || $state == cancelled ]] && { echo "$view"; return; }
    sleep 0.05
  done
  fail "job $2 has not ended after $3 s: $view"
}

# check_pdf_book KEY ID PAGES SECONDS: a book of pdfgen's ends done within SECONDS, and page
# K's output starts "Page K of PAGES" (the stand-in answers with the page's text).
check_pdf_book() {
  local view result k
  view=$(wait_ended "$1" "$2" "$4")
  [[ $(field state <<<"$view") == done ]] || fail "job $2 ended as: $view"
  result=$(curl -sS --max-time 10 "$base/v1/jobs/$2/result" -H "Authorization: Bearer $1")
  for k in $(seq "$3"); do
    grep -q "\"page\":$k,\"state\":\"done\",\"output\":\"Page $k of $3" <<<"$result" ||
      fail "page $k of job $2 is not 'Page $k of $3' in: ${result:0:600}"
  done
}

# pg_database URI_FILE NAME: a fresh database NAME on the tests' PostgreSQL server (CTest
# fixture `postgres`, whose URI is in URI_FILE), dropped on exit after every process started
# is killed. Sets `server` (the server's URI), `uri` (the new database's) and sql URI QUERY.
pg_database() {
  server=$(cat "$1") || fail "no URI in $1: did pg.server_start fail?"
  [[ -n $server ]] || fail "no URI in $1: did pg.server_start fail?"
  psql_bin=$(pg_config --bindir)/psql
  pg_db=$2
  uri=${server%/*}/$pg_db
  sql "$server" "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)"
  sql "$server" "CREATE DATABASE $pg_db"
  trap drop_pg_database EXIT
}
sql() { "$psql_bin" -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
drop_pg_database() {
  local status=$?
  set +e
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  sql "$server" "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)"
  (exit "$status")
  cleanup
}
