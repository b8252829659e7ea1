#!/usr/bin/env bash
# End to end on PostgreSQL (the tests' server, CTest fixture `postgres`): `fairlane user add
# --db postgresql://...` (and postgres://) writes the user to a database of its own, migrated
# on the way, and a taken name is refused; `fairlane serve` on a server that is not there
# fails naming it (tests/e2e/pg_cluster.sh runs a cluster).
#
#   pg_cli.sh FAIRLANE URI_FILE
set -euo pipefail
fairlane=$1
uri_file=$2
stand_in=unused
source "$(dirname "$0")/lib.sh"

pg_database "$uri_file" fairlane_cli_$$

# run EXPECTED-EXIT ARGS...: `fairlane ARGS`, stdout to $work/N.out and stderr to $work/N.err.
calls=0
run() {
  local want=$1 got=0
  shift
  calls=$((calls + 1))
  out=$work/$calls.out
  err=$work/$calls.err
  timeout 60 "$fairlane" "$@" >"$out" 2>"$err" || got=$?
  [[ $got == "$want" ]] ||
    fail "fairlane $* exited $got, not $want; out: $(cat "$out"); err: $(cat "$err")"
}

run 0 user add alice --db "$uri"
grep -qE '^fl_[0-9a-f]{64}$' "$out" || fail "no key printed: $(cat "$out")"
[[ $(sql "$uri" "SELECT name || ':' || weight FROM users") == alice:1 ]] ||
  fail "alice is not in the database: $(sql "$uri" "SELECT name, weight FROM users")"
[[ $(sql "$uri" "SELECT count(*) FROM schema_migrations") -ge 1 ]] || fail "not migrated"
# The key's SHA-256 is stored, never the key.
key=$(cat "$out")
want=$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)
[[ $(sql "$uri" "SELECT encode(key_sha256, 'hex') FROM users WHERE name = 'alice'") == "$want" ]] ||
  fail "the stored digest is not the key's SHA-256"

run 1 user add alice --db "$uri"
grep -q "exists already" "$err" || fail "a taken name: $(cat "$err")"

run 0 user add bob --weight 3 --db "postgres://${uri#postgresql://}"
[[ $(sql "$uri" "SELECT weight FROM users WHERE name = 'bob'") == 3 ]] || fail "bob's weight"

# serve on a server that is not there: status 1, naming the server and the remedy.
run 1 serve --db "postgresql://fairlane@127.0.0.1:1/nowhere" --provider-url http://127.0.0.1:1
grep -q "connecting to PostgreSQL at postgresql://fairlane@127.0.0.1:1/nowhere" "$err" ||
  fail "the server is not named: $(cat "$err")"
grep -q "Check that the server is running" "$err" || fail "no remedy: $(cat "$err")"
echo "ok"
