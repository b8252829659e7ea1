#!/usr/bin/env bash
# The crash test on PostgreSQL (the tests' server, CTest fixture `postgres`): a database of
# its own, created fresh, `fairlane-crashtest --db URI ARGS...` on it, then dropped.
#
#   pg_short.sh URI_FILE CRASHTEST ARGS...
set -euo pipefail
uri_file=$1
crashtest=$2
shift 2

fail() { echo "FAIL: $*" >&2; exit 1; }
server=$(cat "$uri_file") || fail "no URI in $uri_file: did pg.server_start fail?"
[[ -n $server ]] || fail "no URI in $uri_file: did pg.server_start fail?"
psql_bin=$(pg_config --bindir)/psql
db=fairlane_crashtest_$$
uri=${server%/*}/$db
sql() { "$psql_bin" -X -q -A -t -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
sql "$server" "DROP DATABASE IF EXISTS $db WITH (FORCE)"
sql "$server" "CREATE DATABASE $db"
drop_db() {
  local status=$?
  sql "$server" "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
  exit "$status"
}
trap drop_db EXIT

"$crashtest" --db "$uri" "$@"
