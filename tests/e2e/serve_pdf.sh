#!/usr/bin/env bash
# End to end: books uploaded as PDFs, raw (application/pdf, ?name=) and as the `file` part
# of a multipart form (named after the file), are split into pages by the service and end
# done with every page's text, in order, in the result. A retried upload with the same
# Idempotency-Key gets the first job back.
#
#   serve_pdf.sh FAIRLANE FAIRLANE_PROVIDER_SIM FAIRLANE_PDFGEN
set -euo pipefail
fairlane=$1
stand_in=$2
pdfgen=$3
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 20 --rpm 60000 --tpm 6000000 --max-in-flight 8
alice=$(add_user alice)
start_serve --rpm 60000 --tpm 6000000 --max-in-flight 8 --max-tokens 2000

"$pdfgen" --pages 12 --seed 1 --out "$work/raw.pdf"
"$pdfgen" --pages 7 --seed 2 --out "$work/My Book.pdf"

# post ARGS...: an upload; prints the answer, fails unless it is 202.
post() {
  local code
  code=$(curl -sS -o "$work/answer" -w '%{http_code}' --max-time 30 -X POST "$@" \
    -H "Authorization: Bearer $alice")
  [[ $code == 202 ]] || fail "the upload answered $code: $(cat "$work/answer")"
  cat "$work/answer"
}
raw=$(post "$base/v1/jobs?name=raw-book.pdf&max_tokens=500" -H 'Content-Type: application/pdf' \
  -H 'Idempotency-Key: raw-1' --data-binary "@$work/raw.pdf")
form=$(post "$base/v1/jobs" -F "file=@$work/My Book.pdf;type=application/pdf")
again=$(post "$base/v1/jobs?name=raw-book.pdf" -H 'Content-Type: application/pdf' \
  -H 'Idempotency-Key: raw-1' --data-binary "@$work/raw.pdf")

[[ $(field name <<<"$raw") == raw-book.pdf ]] || fail "the raw upload is not named by ?name=: $raw"
[[ $(field name <<<"$form") == "My Book.pdf" ]] || fail "the form upload is not named by its file: $form"
[[ $(count total <<<"$raw") == 12 ]] || fail "the raw book is not 12 pages: $raw"
[[ $(count total <<<"$form") == 7 ]] || fail "the form book is not 7 pages: $form"
[[ $(field id <<<"$again") == $(field id <<<"$raw") ]] || fail "the retried upload made a new job: $again"

for pair in "$(field id <<<"$raw") 12" "$(field id <<<"$form") 7"; do
  read -r id pages <<<"$pair"
  check_pdf_book "$alice" "$id" "$pages" 30
done
listed=$(curl -sS --max-time 10 "$base/v1/jobs" -H "Authorization: Bearer $alice")
[[ $(grep -o '"id":"job_' <<<"$listed" | wc -l) == 2 ]] || fail "not two jobs: $listed"
echo "1 passed, 0 failed"
