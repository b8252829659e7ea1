#!/usr/bin/env bash
# End to end: many PDFs uploaded at once by three users, while a reader lists and reads their
# jobs throughout (every answer 200). The service reads PDFs on its worker threads and hands
# each back to its loop; past the pending-documents cap (RouterConfig::max_pending_documents:
# twice the hardware threads, as serve has no flag for it) an upload is answered 503 busy with
# Retry-After: 5, and the client's retry gets in. At least one upload must meet the cap: twice
# the cap and four more are sent at once, and a read (a child process each) takes longer than
# they take to land (on 2 cores, 12 uploads against a cap of 4 met it about 30 times). The
# router's unit test checks the cap exactly. Every book ends done with every page's text in
# order. The suite runs this under ThreadSanitizer too (label `tsan`), where a race in that
# hand-off ends the service and fails the test.
#
#   serve_pdf_concurrent.sh FAIRLANE FAIRLANE_PROVIDER_SIM FAIRLANE_PDFGEN
set -euo pipefail
fairlane=$1
stand_in=$2
pdfgen=$3
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 5 --rpm 600000 --tpm 60000000 --max-in-flight 32
keys=("$(add_user ann)" "$(add_user bob)" "$(add_user cy)")
start_serve --rpm 600000 --tpm 60000000 --max-in-flight 32 --max-tokens 2000

cap=$((2 * $(getconf _NPROCESSORS_ONLN)))
books=$((2 * cap + 4))
((books >= 12)) || books=12
# Twelve different PDFs; book B is file B mod 12 (pages_of B pages), uploaded under its own key.
for f in $(seq 12); do "$pdfgen" --pages $((3 + f % 5)) --seed "$f" --out "$work/file$f.pdf"; done
file_of() { echo $((($1 - 1) % 12 + 1)); }
pages_of() { echo $((3 + $(file_of "$1") % 5)); }

# upload B: book B by user B mod 3, retried on 503 (at most 60 times); writes its job's id.
# Every 503 must be busy with Retry-After: 5.
upload() {
  local b=$1 key=${keys[$(($1 % 3))]} code=""
  for _ in $(seq 60); do
    code=$(curl -sS -o "$work/answer$b" -D "$work/headers$b" -w '%{http_code}' --max-time 60 \
      -X POST "$base/v1/jobs?name=book$b.pdf" -H "Authorization: Bearer $key" \
      -H 'Content-Type: application/pdf' -H "Idempotency-Key: book-$b" \
      --data-binary "@$work/file$(file_of "$b").pdf") || code=000
    [[ $code == 202 ]] && { field id <"$work/answer$b" >"$work/id$b"; return 0; }
    [[ $code == 503 ]] || { echo "book $b: $code $(cat "$work/answer$b")" >"$work/error$b"; return 0; }
    if ! grep -qi $'^Retry-After: 5\r$' "$work/headers$b" ||
      [[ $(field type <"$work/answer$b") != busy ]]; then
      echo "book $b: a 503 not busy with Retry-After: 5: $(cat "$work/headers$b" "$work/answer$b")" \
        >"$work/error$b"
      return 0
    fi
    echo "$b" >>"$work/busy"
    sleep 0.2
  done
  echo "book $b: still 503 after 60 tries: $(cat "$work/answer$b")" >"$work/error$b"
}

# The reader: each user's job list, and every job in it, until the uploads end. An answer
# other than 200 is a miss.
: >"$work/reads"
: >"$work/read.misses"
(
  while [[ ! -e $work/uploaded ]]; do
    for key in "${keys[@]}"; do
      list=$(curl -sS --max-time 10 -w '\n%{http_code}' "$base/v1/jobs" -H "Authorization: Bearer $key") || list=000
      echo list >>"$work/reads"
      [[ ${list##*$'\n'} == 200 ]] || echo "GET /v1/jobs: ${list: -300}" >>"$work/read.misses"
      for id in $(grep -o '"id":"job_[0-9a-f]*"' <<<"$list" | cut -d'"' -f4); do
        code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$base/v1/jobs/$id" \
          -H "Authorization: Bearer $key") || code=000
        echo job >>"$work/reads"
        [[ $code == 200 ]] || echo "GET /v1/jobs/$id: $code" >>"$work/read.misses"
      done
    done
  done
) &
reader=$!
pids+=("$reader")

uploaders=()
for b in $(seq "$books"); do
  upload "$b" &
  uploaders+=($!)
done
for pid in "${uploaders[@]}"; do wait_exit "$pid" 120; done
touch "$work/uploaded"
wait_exit "$reader" 30
for b in $(seq "$books"); do
  [[ -s $work/error$b ]] && fail "$(cat "$work/error$b")"
  [[ -s $work/id$b ]] || fail "book $b got no job id"
done
busy=$(wc -l <"$work/busy" 2>/dev/null || echo 0)
((busy > 0)) || fail "none of $books PDFs sent at once met the cap of $cap pending documents"
[[ ! -s $work/read.misses ]] || fail "the reader was refused: $(head -5 "$work/read.misses")"
job_reads=$(grep -c job "$work/reads" || true)
((job_reads > 0)) || fail "the reader read no job while the uploads went on: $(wc -l <"$work/reads") lists"

for b in $(seq "$books"); do
  check_pdf_book "${keys[$((b % 3))]}" "$(cat "$work/id$b")" "$(pages_of "$b")" 60
done
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 30
[[ $exited == 0 ]] || fail "serve exited $exited on SIGTERM: $(tail -5 "$work/serve.1.out")"
echo "$busy uploads of $books were answered 503 busy and retried (a cap of $cap);" \
  "the reader made $(wc -l <"$work/reads") reads meanwhile"
echo "1 passed, 0 failed"
