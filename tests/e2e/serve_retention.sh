#!/usr/bin/env bash
# Retention (docs/operations.md): `fairlane prune` and `serve --retain` delete the jobs that
# finished longer ago than they keep, and nothing else. A pruned job answers 404, like one that
# never was, its result too; its Idempotency-Key takes a new upload; its id as a list cursor
# answers 400. Jobs are aged by moving their finish back in the database, so that the test
# needs no days to pass.
#
# On PostgreSQL (the tests' server, a database of its own) with --postgresql URI_FILE.
#
#   serve_retention.sh FAIRLANE FAIRLANE_PROVIDER_SIM [PDFGEN | --postgresql URI_FILE]
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
db=$work/fairlane.db
if [[ ${3:-} == --postgresql ]]; then
  pg_database "$4" fairlane_retention_$$
  serve_db=$uri
  db=$uri
fi

start_stand_in --latency-ms 20 --rpm 60000 --tpm 6000000 --max-in-flight 8
alice=$(add_user alice)
start_serve --rpm 60000 --tpm 6000000 --max-in-flight 8 --max-tokens 100

# status KEY PATH: the HTTP status of a GET.
status() {
  curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$base$2" -H "Authorization: Bearer $1"
}
# upload_with_key NAME KEY: a one-page upload with an Idempotency-Key; prints the answer.
upload_with_key() {
  curl -sS --max-time 30 -X POST "$base/v1/jobs" -H "Authorization: Bearer $alice" \
    -H 'Content-Type: application/json' -H "Idempotency-Key: $2" \
    -d "{\"name\":\"$1\",\"pages\":[\"only page\"]}"
}
# age ID DAYS: moves the job's finish (and creation) DAYS back.
age() {
  local shift
  shift=$(awk "BEGIN { printf \"%d\", $2 * 86400000 }")
  local update="UPDATE jobs SET finished_at = finished_at - $shift, created_at = created_at - $shift
                WHERE public_id = '$1' AND finished_at IS NOT NULL RETURNING id"
  local aged
  if [[ $db == postgresql://* ]]; then
    aged=$(sql "$uri" "$update")
  else
    aged=$(/usr/bin/python3 -c "import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
print(len(c.execute(sys.argv[2]).fetchall()))" "$db" "$update")
    [[ $aged == 1 ]] || aged=""
  fi
  [[ -n $aged ]] || fail "job $1 could not be aged"
}

old=$(field id <<<"$(upload_with_key old.txt key-old)")
[[ $old == job_* ]] || fail "the upload with a key was not accepted"
mid=$(upload "$alice" mid.txt "a" "b" "c")
newest=$(upload "$alice" newest.txt "d")
for id in "$old" "$mid" "$newest"; do wait_ended "$alice" "$id" 30 >/dev/null; done
age "$old" 3
age "$mid" 1.5

# A dry run counts, and deletes nothing.
counted=$("$fairlane" prune --db "$db" --older-than 1d --dry-run)
[[ $counted == "jobs due to be pruned: 2, pages: 4;"* ]] || fail "the dry run said: $counted"
[[ $(status "$alice" "/v1/jobs/$old") == 200 ]] || fail "the dry run deleted a job"
# Too short a retention is refused, naming the floor; too long, or not a time, too.
for bad in "30m:at least 1h" "365000d:at most 36500d" "1e400:not a length of time" \
  "5x:unit not recognized"; do
  if refused=$("$fairlane" prune --db "$db" --older-than "${bad%%:*}" 2>&1); then
    fail "prune took --older-than ${bad%%:*}: $refused"
  fi
  [[ $refused == *"${bad#*:}"* ]] || fail "prune --older-than ${bad%%:*} said: $refused"
done

# prune beside the running service: the job finished 3 days ago goes, the others stay.
pruned=$("$fairlane" prune --db "$db" --older-than 2d)
[[ $pruned == "jobs pruned: 1, pages: 1;"* ]] || fail "prune said: $pruned"
[[ $(status "$alice" "/v1/jobs/$old") == 404 ]] || fail "the pruned job is still there"
[[ $(status "$alice" "/v1/jobs/$old/result") == 404 ]] || fail "the pruned job's result is still there"
[[ $(status "$alice" "/v1/jobs?cursor=$old") == 400 ]] || fail "a pruned job's cursor was taken"
[[ $(status "$alice" "/v1/jobs/$mid") == 200 ]] || fail "prune deleted a job it keeps"
# The pruned job's key is free: the same upload makes a new job.
again=$(upload_with_key old.txt key-old)
[[ $(field id <<<"$again") == job_* && $(field id <<<"$again") != "$old" ]] ||
  fail "the pruned job's key answered: $again"
wait_ended "$alice" "$(field id <<<"$again")" 30 >/dev/null

# serve --retain 1d, started again: its first look prunes the job finished 1.5 days ago.
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 30
start_serve --rpm 60000 --tpm 6000000 --max-in-flight 8 --max-tokens 100 --retain 1d
for _ in $(seq 200); do
  [[ $(status "$alice" "/v1/jobs/$mid") == 404 ]] && break
  sleep 0.05
done
[[ $(status "$alice" "/v1/jobs/$mid") == 404 ]] || fail "serve --retain 1d kept the job finished 1.5 days ago"
[[ $(status "$alice" "/v1/jobs/$newest") == 200 ]] || fail "serve --retain 1d pruned a recent job"
grep -q "retention: jobs pruned: 1, pages: 3" "$work/serve.2.out" ||
  fail "serve did not say what it pruned: $(cat "$work/serve.2.out")"
metrics=$(curl -sS --max-time 10 "$base/metrics" -H "Authorization: Bearer $admin_key")
grep -qx "fairlane_pruned_jobs_total 1" <<<"$metrics" &&
  grep -qx "fairlane_pruned_pages_total 3" <<<"$metrics" ||
  fail "/metrics does not count what serve pruned: $(grep pruned <<<"$metrics")"
# What is left is whole, and the service goes on taking work.
listed=$(curl -sS --max-time 10 "$base/v1/jobs" -H "Authorization: Bearer $alice")
[[ $(grep -o '"id":"job_' <<<"$listed" | wc -l) == 2 ]] || fail "the list after pruning: $listed"
last=$(upload "$alice" after.txt "e" "f")
[[ $(field state <<<"$(wait_ended "$alice" "$last" 30)") == done ]] || fail "a job after pruning did not end done"
echo "1 passed, 0 failed"
