#!/usr/bin/env bash
# Fault matrix: a provider whose answers carry text no database takes as it is. The stand-in
# answers 30% of its calls, in turn, 200 with a NUL (\u0000) in the page's text, or 500 with
# a body that is no JSON, holds a NUL byte and ends in a UTF-8 sequence cut short.
# PostgreSQL's text holds neither a NUL nor a broken sequence, so such a result or error
# recorded as it came would be refused, with every page transition in its batch, at each
# retry. On SQLite and on PostgreSQL alike every page ends done, with its text; where the
# answer held a NUL, the result holds U+FFFD (the replacement character) in its place.
#
# The client's text is held to the same: a file name in Latin-1 is kept with U+FFFD for its
# byte, an Idempotency-Key that is not UTF-8 is refused (400), and a job id or a list cursor
# holding a byte that is not UTF-8 names no job (404, 400), on both stores, where PostgreSQL
# answered each with 500 before.
#
#   faults_hostile_text.sh FAIRLANE FAIRLANE_PROVIDER_SIM URI_FILE FAIRLANE_PDFGEN
set -euo pipefail
fairlane=$1
stand_in=$2
pdfgen=$4
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

pg_database "$3" fairlane_hostile_$$
replacement=$'\xef\xbf\xbd'  # U+FFFD in UTF-8, as the JSON result writes it

# run_on DATABASE: the books on a database of their own; sets `replaced` (the pages whose
# result holds U+FFFD) and `hostile` (the stand-in's hostile answers).
run_on() {
  serve_db=$1
  limits=(--rpm 60000 --tpm 6000000 --max-in-flight 4)
  start_stand_in "${limits[@]}" --latency-ms 20 --hostile-text-rate 0.3 --seed 5
  local alice bob
  alice=$(add_user alice)
  bob=$(add_user bob)
  start_serve "${limits[@]}" --max-tokens 100 --max-attempts 10 --backoff-base 0.05 \
    --backoff-max 0.2
  local pages=() i
  for i in $(seq 15); do pages+=("p-$i"); done
  local a b
  a=$(upload "$alice" a "${pages[@]}")
  b=$(upload "$bob" b "${pages[@]}")
  replaced=0
  local job key view result
  for job in "$alice $a" "$bob $b"; do
    read -r key id <<<"$job"
    view=$(wait_ended "$key" "$id" 60)
    [[ $(field state <<<"$view") == done && $(count done <<<"$view") == 15 ]] ||
      fail "$serve_db: job $id ended as: $view"
    result=$(curl -sS --max-time 10 "$base/v1/jobs/$id/result" -H "Authorization: Bearer $key")
    for i in $(seq 15); do
      if grep -qF "\"page\":$i,\"state\":\"done\",\"output\":\"p-$i${replacement} after a NUL\"" <<<"$result"; then
        replaced=$((replaced + 1))
      elif ! grep -qF "\"page\":$i,\"state\":\"done\",\"output\":\"p-$i\"" <<<"$result"; then
        fail "$serve_db: page $i of $id is not done with its text: $result"
      fi
    done
    grep -qF '\u0000' <<<"$result" && fail "$serve_db: a NUL is in the result of $id: $result"
  done
  # From the client: a file name in Latin-1 is kept with U+FFFD for its byte; an
  # Idempotency-Key that is not UTF-8 is refused, naming the rule.
  local latin1=$'caf\xe9.pdf' answer
  "$pdfgen" --pages 2 --out "$work/book.pdf" >/dev/null
  cp "$work/book.pdf" "$work/$latin1"
  answer=$(curl -sS --max-time 30 -X POST "$base/v1/jobs" -H "Authorization: Bearer $alice" \
    -F "file=@$work/$latin1")
  [[ $(field name <<<"$answer") == "caf${replacement}.pdf" ]] ||
    fail "$serve_db: a Latin-1 file name answered: $answer"
  answer=$(curl -sS --max-time 30 -X POST "$base/v1/jobs" -H "Authorization: Bearer $alice" \
    -H 'Content-Type: application/json' -H $'Idempotency-Key: key-\xff' -d '{"pages":["x"]}')
  grep -q '"type":"invalid_request","message":"an Idempotency-Key is 1 to 255 bytes of UTF-8 text' \
    <<<"$answer" || fail "$serve_db: an Idempotency-Key of a byte 0xff answered: $answer"
  # A job id or a cursor with a byte that is no UTF-8: no job, and no 500.
  local status
  status=$(curl -sS --max-time 10 -o "$work/answer" -w '%{http_code}' "$base/v1/jobs/job_%FF" \
    -H "Authorization: Bearer $alice")
  [[ $status == 404 ]] || fail "$serve_db: GET /v1/jobs/job_%FF answered $status: $(cat "$work/answer")"
  status=$(curl -sS --max-time 10 -o "$work/answer" -w '%{http_code}' "$base/v1/jobs?cursor=%FF" \
    -H "Authorization: Bearer $alice")
  [[ $status == 400 ]] || fail "$serve_db: GET /v1/jobs?cursor=%FF answered $status: $(cat "$work/answer")"
  check_limits 4
  hostile=$(count hostile_text <<<"$stats")
  ((hostile >= 2)) || fail "$serve_db: the stand-in answered with hostile text $hostile times: $stats"
  ((replaced >= 1)) || fail "$serve_db: no result holds the replacement character"
  kill -TERM "$serve_pid"
  wait_exit "$serve_pid" 10
  kill -KILL "${pids[0]}"
  wait "${pids[0]}" 2>/dev/null || true
  pids=()
}

run_on "$work/fairlane.db"
echo "SQLite: 30 of 30 pages done, $replaced with U+FFFD for a NUL, $hostile hostile answers"
run_on "$uri"
echo "PostgreSQL: 30 of 30 pages done, $replaced with U+FFFD for a NUL, $hostile hostile answers"
echo "1 passed, 0 failed"
