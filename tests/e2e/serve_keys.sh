#!/usr/bin/env bash
# Keys never reach a log, nor the database in clear. `fairlane user add` prints the new key on
# stdout only; `fairlane serve` then takes requests with good keys (every user endpoint, the
# admin's, /ui with Basic credentials) and bad ones (unknown keys, a user's key on the admin's
# endpoints, malformed and oversized requests carrying a key), and the CLI is run with a bad
# key; afterwards no key, good or bad, appears in any output but the one that prints it, nor
# in the database files (which hold SHA-256 digests). A short admin key is warned about
# without being shown.
#
#   serve_keys.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 10 --rpm 60000 --tpm 6000000
alice=$("$fairlane" user add alice --db "$work/fairlane.db" 2>"$work/user-add.err")
bob=$("$fairlane" user add bob --db "$work/fairlane.db" 2>>"$work/user-add.err")
[[ $alice =~ ^fl_[0-9a-f]{64}$ ]] || fail "alice's key is not fl_ and 256 random bits in hex: $alice"
[[ $alice != "$bob" ]] || fail "two users got the same key"
admin_key=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
start_serve --rpm 60000 --tpm 6000000 --max-tokens 100 --max-header-kb 4 --read-timeout 5
grep -q 'warning: the admin key' "$work/serve.1.out" && fail "a 48-digit admin key was warned about"

bad_user=fl_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
bad_admin=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
# status URL KEY [CURL ARGS...]: the HTTP status of a request with a Bearer key.
status() {
  local url=$1 key=$2
  shift 2
  curl -sS --max-time 10 -o "$work/body" -w '%{http_code}' "$url" -H "Authorization: Bearer $key" "$@"
}
want() { [[ $1 == "$2" ]] || fail "$3: wanted $2, got $1: $(cat "$work/body")"; }

# Good keys, everywhere they open something.
id=$(upload "$alice" book one two three)
want "$(status "$base/v1/jobs/$id" "$alice")" 200 "alice's view"
want "$(status "$base/v1/jobs" "$alice")" 200 "alice's list"
want "$(status "$base/v1/estimate?pages=3" "$alice")" 200 "alice's estimate"
want "$(status "$base/v1/queue" "$alice")" 200 "alice's queue"
wait_ended "$alice" "$id" 20 >/dev/null
want "$(status "$base/v1/jobs/$id/result" "$alice")" 200 "alice's result"
# The job has ended: its stream is 204 (nothing to follow), its cancel 200 (nothing to do).
want "$(status "$base/v1/jobs/$id/events" "$alice" -N)" 204 "alice's events"
want "$(status "$base/v1/jobs/$id" "$alice" -X DELETE)" 200 "alice's cancel"
want "$(status "$base/v1/queue" "$admin_key")" 200 "the admin's queue"
grep -q '"users":\[' "$work/body" || fail "the admin's queue has no lanes: $(cat "$work/body")"
want "$(status "$base/metrics" "$admin_key")" 200 "the admin's metrics"
want "$(status "$base/v1/users" "$admin_key" -H 'Content-Type: application/json' -d '{"name":"carol"}')" 201 "adding carol"
carol=$(field key <"$work/body")
[[ $carol =~ ^fl_[0-9a-f]{64}$ ]] || fail "carol's key: $carol"
want "$(curl -sS --max-time 10 -o "$work/body" -w '%{http_code}' -u "me:$carol" "$base/ui")" 200 "the page with Basic"

# Bad keys and keys where they do not belong.
want "$(status "$base/v1/jobs" "$bad_user")" 401 "an unknown key"
want "$(status "$base/v1/jobs" "$bad_admin")" 401 "another unknown key"
want "$(status "$base/metrics" "$bad_admin")" 401 "an unknown key on /metrics"
want "$(status "$base/metrics" "$bob")" 403 "bob on /metrics"
want "$(status "$base/v1/users" "$bob" -H 'Content-Type: application/json' -d '{"name":"eve"}')" 403 "bob adding a user"
want "$(status "$base/v1/jobs" "$admin_key")" 403 "the admin key on jobs"
want "$(status "$base/v1/jobs/$id" "$bob")" 404 "bob on alice's job"
want "$(status "$base/v1/jobs/$id/result" "$bob")" 404 "bob on alice's result"
want "$(status "$base/v1/jobs/$id/events" "$bob")" 404 "bob on alice's events"
want "$(status "$base/v1/jobs/$id" "$bob" -X DELETE)" 404 "bob cancelling alice's job"
want "$(curl -sS --max-time 10 -o "$work/body" -w '%{http_code}' -u "me:$bad_user" "$base/ui")" 401 "the page with a bad key"
want "$(status "$base/v1/jobs" "$bad_user" -H "X-Padding: $(head -c 5000 /dev/zero | tr '\0' a)")" 431 "oversized headers"
want "$(status "$base/v1/jobs/$bad_user?key=$bad_user" "$alice")" 404 "a key in the path"
want "$(status "$base/v1/jobs" "$alice" -H 'Content-Type: application/json' -d "{\"name\":\"$bad_user\",\"pages\":[")" 400 "broken JSON"
exec {fd}<>"/dev/tcp/127.0.0.1/${base##*:}"
printf 'GET /v1/jobs HTTP/1.1\r\nAuthorization: Bearer %s\r\nContent-Length: x\r\n\r\n' "$bad_user" >&"$fd"
timeout 10 cat <&"$fd" >/dev/null || true
exec {fd}>&-
# The CLI with a bad key, and with a user's key on the admin's view.
FAIRLANE_URL=$base "$fairlane" status --key "$bad_user" >"$work/cli.out" 2>"$work/cli.err" && fail "status with a bad key exited 0"
FAIRLANE_URL=$base "$fairlane" watch "$id" --key "$bad_admin" >>"$work/cli.out" 2>>"$work/cli.err" || true
FAIRLANE_URL=$base "$fairlane" status --key "$alice" >>"$work/cli.out" 2>>"$work/cli.err"

kill -TERM "$serve_pid"
wait_exit "$serve_pid" 40
[[ $exited == 0 ]] || fail "fairlane serve exited $exited: $(cat "$work/serve.1.out")"
# A short admin key: the warning says how long it is, never what it is.
long_admin_key=$admin_key
admin_key=admin-secret
start_serve --rpm 60000 --tpm 6000000
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 40
grep -q 'warning: the admin key in FAIRLANE_ADMIN_KEY has 12 characters; use at least 32' "$work/serve.2.out" ||
  fail "no warning about a 12-character admin key: $(cat "$work/serve.2.out")"

logs=("$work"/serve.*.out "$work/stand-in.out" "$work/user-add.err" "$work/cli.out" "$work/cli.err")
[[ -s $work/serve.1.out && -s $work/cli.err ]] || fail "the logs checked are empty"
# The search finds a key where one is: in what `user add` printed.
echo "$alice" >"$work/printed"
grep -qF -- "${alice:3:16}" "$work/printed" || fail "the search for keys finds nothing"
for key in "$alice" "$bob" "$carol" "$bad_user" "$bad_admin" "$long_admin_key" "$admin_key"; do
  secret=${key#fl_}
  for log in "${logs[@]}"; do
    grep -qF -- "${secret:0:16}" "$log" && fail "a key is in $log: $(grep -F -- "${secret:0:16}" "$log" | head -3)"
  done
  for db in "$work"/fairlane.db*; do
    grep -qaF -- "${secret:0:16}" "$db" && fail "a key is in clear in $db"
  done
done
echo "1 passed, 0 failed"
