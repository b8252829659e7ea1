#!/usr/bin/env bash
# End to end: the limits the PDF reader runs under. `fairlane read-pdf` reads a book of
# 6,000 pages (more than a second of CPU) whole without a limit; with --cpu-seconds 1 the
# CPU limit ends it (SIGXCPU, status 152) before it has answered all of them. Through serve, --pdf-timeout 1
# (a second of wall time and of CPU) refuses the same upload with 400 invalid_document naming
# the limit that ended it. (The memory limit, --memory-mb, is not set in ASan and TSan builds,
# whose shadow memory needs terabytes of address space, and those are the builds that run
# this: it is not tested here.)
#
#   reader_limits.sh FAIRLANE FAIRLANE_PROVIDER_SIM FAIRLANE_PDFGEN
set -euo pipefail
fairlane=$1
stand_in=$2
pdfgen=$3
source "$(dirname "$0")/lib.sh"

"$pdfgen" --pages 6000 --out "$work/big.pdf"
read_pdf() { "$fairlane" read-pdf --max-pages 100000 --max-page-bytes 100000 "$@" <"$work/big.pdf"; }

# Without a limit: read whole, and it took more than the second allowed below.
TIMEFORMAT=%U
{ time read_pdf --cpu-seconds 0 >"$work/whole.out" 2>"$work/whole.err"; } 2>"$work/whole.cpu"
[[ $(head -1 "$work/whole.out") == "ok 6000" ]] ||
  fail "read-pdf without limits answered: $(head -c 200 "$work/whole.out") $(cat "$work/whole.err")"
cpu=$(cat "$work/whole.cpu")
awk -v s="$cpu" 'BEGIN { exit !(s >= 1.2) }' ||
  fail "the book took only $cpu s of CPU: too little to show a limit of 1 s"

# With --cpu-seconds 1: ended by SIGXCPU (128 + 24), its answer cut short (it writes each page
# as it is read, so the pages before the limit have gone out; the parent takes none of them).
status=0
read_pdf --cpu-seconds 1 >"$work/limited.out" 2>"$work/limited.err" || status=$?
((status == 152)) || fail "read-pdf --cpu-seconds 1 exited $status, not 152 (SIGXCPU): $(head -c 200 "$work/limited.out")"
sent=$(grep -c '^text ' "$work/limited.out" || true)
((sent < 6000)) || fail "read-pdf answered all 6000 pages despite its CPU limit"

# Through serve: the refusal names the limit, the wall's or the CPU's (both 1 s here).
start_stand_in --latency-ms 5
alice=$(add_user alice)
start_serve --pdf-timeout 1 --max-pages 10000 --max-page-kb 100
answer=$(curl -sS --max-time 60 -w ' %{http_code}' -X POST "$base/v1/jobs?name=big.pdf" \
  -H "Authorization: Bearer $alice" -H 'Content-Type: application/pdf' --data-binary "@$work/big.pdf")
[[ $answer == *'"invalid_document"'*' 400' ]] || fail "the big PDF with --pdf-timeout 1 answered: $answer"
[[ $answer == *'took longer than 1 s to read'* || $answer == *'limits on time and memory (the reader ended with signal 24)'* ]] ||
  fail "the refusal does not name the time or CPU limit: $answer"

echo "1 passed, 0 failed (the book took $cpu s of CPU unlimited)"
