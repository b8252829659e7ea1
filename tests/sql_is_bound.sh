#!/usr/bin/env bash
# Every SQL statement fairlane runs is a constant, its values bound as parameters: no SQL is
# ever built from strings, so no input can become SQL. Fails, naming the line, when
#  1. something other than a string literal or a src/store/queries.hpp or pg_queries.hpp
#     constant (Sql::..., PgSql::...) is handed to SQLite or PostgreSQL to run or prepare
#     (sqlite3_exec, sqlite3_prepare*, Database::exec, Statement::prepare, PQexec*, PQsendQuery*,
#     PQprepare,
#     pg::Connection::exec and query, PgStore's read and write), outside the wrappers that
#     pass those on; or
#  2. a string with SQL in it is formatted (fmt::format, std::format, *printf) or
#     concatenated with `+`.
# The exceptions: a migration's own SQL, compiled in from schema/sql, is run with the
# integer of its version (PRAGMA user_version cannot take a bound parameter); schema/pg's is
# run as it is; and the notifications' LISTENs (LISTEN takes an identifier, not a parameter)
# are built from the channel names quoted by PQescapeIdentifier.
#
#   sql_is_bound.sh SRC_DIR
set -euo pipefail
src=$1
failures=0
bad() {
  echo "FAIL: $1" >&2
  failures=$((failures + 1))
}
keywords='SELECT|INSERT|UPDATE|DELETE|REPLACE|PRAGMA|CREATE|DROP|ALTER|WHERE|VALUES|ATTACH|BEGIN|COMMIT'

# 1. What reaches SQLite.
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  code=${rest#*:}
  arg=$(sed -E 's/.*(sqlite3_exec|sqlite3_prepare(_v[23])?)\(\s*[^,]+,\s*([^,)]+).*/\3/; t
                s/.*(PQexec|PQexecParams|PQsendQuery|PQsendQueryParams|PQprepare)\(\s*[^,]+,\s*([^,)]+).*/\2/; t
                s/.*Statement::prepare\(\s*[^,]+,\s*([^,)]+).*/\1/; t
                s/.*(\.|->)(exec|query)\(\s*([^,)]+).*/\3/' <<<"$code")
  case $arg in
    \"* | Sql::* | PgSql::* | "std::string_view "*) continue ;; # a literal, a constant, a declaration
  esac
  case ${file#"$src"/}:$arg in
    # The wrappers, handing on what their callers gave (PQprepare's first argument after the
    # connection is the statement's name); the migrations' compiled-in SQL; the store
    # preparing each Sql:: constant in turn.
    "store/sqlite.cpp:std::string(sql" | "store/sqlite.cpp:sql.data(" | \
      "store/migrations.cpp:sql.c_str(" | "store/store.cpp:sql" | \
      "store/pg.cpp:std::string(sql" | "store/pg.cpp:text.c_str(" | \
      "store/pg.cpp:name.c_str(" | "store/pg_migrations.cpp:migration.sql" | \
      "store/pg_notifications.cpp:listens.c_str(" | "store/pg_store.cpp:sql") continue ;;
  esac
  bad "$file:$line gives the database SQL that is not a constant ($arg): put the statement in src/store/queries.hpp (pg_queries.hpp) and bind its values"
done < <(grep -rnE '((sqlite3_exec|sqlite3_prepare(_v[23])?|PQexec(Params)?|PQsendQuery(Params)?|PQprepare|Statement::prepare|(\.|->)exec)\(|(\.|->)query\([^)])' "$src" \
  --include='*.cpp' --include='*.hpp')

# PgStore's own wrappers (read and write, which connect again when the connection broke)
# hand on what their callers give them: each call gives them a PgSql:: constant.
while IFS= read -r hit; do
  line=${hit%%:*}
  arg=$(sed -E 's/.*[^A-Za-z_:.>](read|write)\(\s*([^,)]*).*/\2/' <<<"${hit#*:}")
  case $arg in PgSql::*) continue ;; esac
  bad "$src/store/pg_store.cpp:$line hands PgStore SQL that is not a constant ($arg): put the statement in src/store/pg_queries.hpp and bind its values"
done < <(grep -nE '(^|[^A-Za-z_:.>])(read|write)\(' "$src/store/pg_store.cpp")

# 2. SQL formatted or concatenated: each formatting call is read whole, to its semicolon.
while IFS= read -r file; do
  awk -v file="$file" -v keywords="$keywords" '
    function check(text, at) {
      if (text ~ ("\"[^\"]*(" keywords ")[^\"]*\"") && text !~ /PRAGMA user_version = \{\}/)
        printf "%s:%d formats SQL: %s\n", file, at, text
    }
    /(fmt::format|std::format|s?n?printf)\(/ { collecting = 1; start = FNR; text = "" }
    collecting { text = text $0; if ($0 ~ /;[[:space:]]*(\/\/.*)?$/) { check(text, start); collecting = 0 } }
    !collecting && ($0 ~ ("\"[^\"]*(" keywords ")[^\"]*\"[[:space:]]*\\+") ||
                    $0 ~ ("\\+[[:space:]]*\"[^\"]*(" keywords ")")) {
      printf "%s:%d concatenates SQL: %s\n", file, FNR, $0
    }
  ' "$file"
done < <(find "$src" -name '*.cpp' -o -name '*.hpp' | sort) >"${TMPDIR:-/tmp}/sql_is_bound.$$"
while IFS= read -r finding; do bad "$finding"; done <"${TMPDIR:-/tmp}/sql_is_bound.$$"
rm -f "${TMPDIR:-/tmp}/sql_is_bound.$$"

# The check must see the store's statements at all.
grep -q 'Sql::insert_job' "$src/store/store.cpp" || bad "src/store/store.cpp does not prepare Sql::insert_job: is $src the source?"
((failures == 0)) || exit 1
echo "1 passed, 0 failed"
