#!/usr/bin/env bash
# End to end: many PDFs uploaded at once by three users, while others read their jobs. The
# service reads them on its worker threads and hands each back to its loop; past the pending
# cap an upload is answered 503 busy with Retry-After, and the client's retry gets in. Every
# book ends done with every page's text in order. The suite runs this under ThreadSanitizer
# too (label `threads`), where a race in that hand-off ends the service and fails the test.
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

books=12
for b in $(seq "$books"); do "$pdfgen" --pages $((3 + b % 5)) --seed "$b" --out "$work/book$b.pdf"; done

# upload B: book B by user B mod 3, retried on 503 (at most 60 times); writes its job's id.
upload() {
  local b=$1 key=${keys[$(($1 % 3))]} code=""
  for _ in $(seq 60); do
    code=$(curl -sS -o "$work/answer$b" -w '%{http_code}' --max-time 60 -X POST \
      "$base/v1/jobs?name=book$b.pdf" -H "Authorization: Bearer $key" \
      -H 'Content-Type: application/pdf' -H "Idempotency-Key: book-$b" \
      --data-binary "@$work/book$b.pdf") || code=000
    [[ $code == 202 ]] && { field id <"$work/answer$b" >"$work/id$b"; return 0; }
    [[ $code == 503 ]] || { echo "book $b: $code $(cat "$work/answer$b")" >"$work/error$b"; return 0; }
    echo "$b" >>"$work/busy"
    sleep 0.2
  done
  echo "book $b: still 503 after 60 tries: $(cat "$work/answer$b")" >"$work/error$b"
}
uploaders=()
for b in $(seq "$books"); do
  upload "$b" &
  uploaders+=($!)
done
for pid in "${uploaders[@]}"; do wait_exit "$pid" 120; done
for b in $(seq "$books"); do
  [[ -s $work/error$b ]] && fail "$(cat "$work/error$b")"
  [[ -s $work/id$b ]] || fail "book $b got no job id"
done

for b in $(seq "$books"); do
  check_pdf_book "${keys[$((b % 3))]}" "$(cat "$work/id$b")" $((3 + b % 5)) 60
done
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 30
[[ $exited == 0 ]] || fail "serve exited $exited on SIGTERM: $(tail -5 "$work/serve.1.out")"
echo "$(wc -l <"$work/busy" 2>/dev/null || echo 0) uploads were answered 503 busy and retried"
echo "1 passed, 0 failed"
