#!/usr/bin/env bash
# End to end: hostile PDFs against the reader's limits, now that it renders pages.
#  - A book whose pages are 14400 x 14400 pt (200 in a side), read with every page as an image,
#    is drawn within 1568 px a side, whatever the page's size (its letter-sized text is then a
#    few pixels: a page that large cannot be read at any size a provider takes).
#  - A decompression bomb (2.5 KB that inflates to a 30,000 x 30,000 image, 900 MB) on such a
#    page is refused with 400 naming the time limit (--pdf-timeout 2: the bomb alone takes more
#    than 3 s in a Release build, a small book a twentieth of a second, a third under ASan),
#    and the service goes on: the next upload is taken.
#  - As many bombs as cores do not hold up another user's JSON upload, and hold their
#    user's share of the reading slots: her next PDF is refused from its headers.
#  - A book of 6,000 pages under --page-input image (every page rendered) is refused the same
#    way, by the same limit.
#
#   reader_hostile.sh FAIRLANE FAIRLANE_PROVIDER_SIM FAIRLANE_PDFGEN
set -euo pipefail
fairlane=$1
stand_in=$2
pdfgen=$3
source "$(dirname "$0")/lib.sh"

"$pdfgen" --pages 2 --huge-page --out "$work/huge.pdf"
"$pdfgen" --bomb --huge-page --out "$work/bomb.pdf"
"$pdfgen" --pages 6000 --out "$work/long.pdf"
"$pdfgen" --pages 3 --seed 2 --out "$work/small.pdf"
(($(stat -c %s "$work/bomb.pdf") < 10000)) || fail "the bomb is not small: $(stat -c %s "$work/bomb.pdf") bytes"

# The huge pages, read as the service's child reads them: two images, 1568 px at most a side.
"$fairlane" read-pdf --page-input image <"$work/huge.pdf" >"$work/huge.out"
# (A page's header follows the bytes of the page before it, not always at a line's start.)
grep -ao 'image image/[a-z]* [0-9]* [0-9]* [0-9]*' "$work/huge.out" >"$work/huge.images" || true
[[ $(wc -l <"$work/huge.images") == 2 ]] || fail "the huge pages are not two images: $(head -c 100 "$work/huge.out" | tr -c '[:print:]\n' .)"
while read -r _ _ width height _; do
  ((width <= 1568 && height <= 1568 && width > 0 && height > 0)) ||
    fail "a huge page was drawn $width x $height px"
done <"$work/huge.images"

start_stand_in --latency-ms 5
alice=$(add_user alice)
# post FILE: the upload's answer and status.
post() {
  curl -sS --max-time 60 -w ' %{http_code}' -X POST "$base/v1/jobs?name=$(basename "$1")" \
    -H "Authorization: Bearer $alice" -H 'Content-Type: application/pdf' --data-binary "@$1"
}
# refused_by_time ANSWER SECONDS: a 400 that names the time or the CPU limit (both SECONDS).
refused_by_time() {
  [[ $1 == *'"invalid_document"'*' 400' ]] || fail "not refused with 400: $1"
  [[ $1 == *"took longer than $2 s to read"* || $1 == *'(the reader ended with signal 24)'* ]] ||
    fail "the refusal does not name the time or CPU limit: $1"
}

start_serve --pdf-timeout 2 --max-pages 10000
refused_by_time "$(post "$work/bomb.pdf")" 2
[[ $(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$base/healthz") == 200 ]] ||
  fail "the service is not healthy after the bomb"
small=$(post "$work/small.pdf")
[[ $small == *' 202' ]] || fail "the upload after the bomb was not taken: $small"
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 30

# As many bombs as the machine has cores, each holding its reader for --pdf-timeout, do not
# hold up another user's JSON pages: they are parsed apart from the PDFs' readers. Before,
# the two shared one pool of a thread per core, and the JSON upload waited for the bombs
# (50 s with two bombs that took 51 s each).
bob=$(add_user bob)
start_serve --pdf-timeout 15 --max-pages 10000
bombs=()
for _ in $(seq "$(getconf _NPROCESSORS_ONLN)"); do
  post "$work/bomb.pdf" >"$work/bomb.$RANDOM.answer" &
  bombs+=($!)
done
sleep 1  # their bodies are read; their readers run
json=$(curl -sS --max-time 4 -w ' %{http_code}' -X POST "$base/v1/jobs" -H "Authorization: Bearer $bob" \
  -H 'Content-Type: application/json' -d '{"name":"notes","pages":["one page"]}') ||
  fail "a JSON upload beside the bombs was not answered within 4 s: $json"
[[ $json == *' 202' ]] || fail "a JSON upload beside the bombs answered: $json"
# The bombs hold Alice's share of the reading slots (half of them: one a core): her next PDF
# is refused from its headers, before its body is sent (it asks with Expect:
# 100-continue), where before it got its 100 and was refused once the whole body had come.
# Bob's, beside them, gets its 100.
wait_metric fairlane_documents_reading "$(getconf _NPROCESSORS_ONLN)" "the bombs do not hold their slots"
hers=$(ask_to_send "$alice" application/pdf 5242880)
[[ $hers == "HTTP/1.1 503 Service Unavailable"* ]] || fail "alice's PDF beside her bombs got: $hers"
[[ $hers == *"reading or queueing $(getconf _NPROCESSORS_ONLN) of your documents already"* ]] ||
  fail "the 503 does not name her share: $hers"
his=$(ask_to_send "$bob" application/pdf 5242880)
[[ $his == "HTTP/1.1 100 Continue"* ]] || fail "bob's PDF beside alice's bombs got: $his"
for pid in "${bombs[@]}"; do wait "$pid"; done
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 30

# The huge pages are taken, with room for a slow machine: drawing two of them is well
# under a second alone, but a sanitizer's build beside the other tests once took more.
start_serve --pdf-timeout 20 --max-pages 10000 --page-input image
huge=$(post "$work/huge.pdf")
[[ $huge == *' 202' ]] || fail "the huge-page book was not taken as images: $huge"
[[ $(count images <<<"$huge") == 2 ]] || fail "the huge pages are not two image pages: $huge"
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 30

start_serve --pdf-timeout 1 --max-pages 10000 --page-input image
refused_by_time "$(post "$work/long.pdf")" 1
echo "1 passed, 0 failed"
