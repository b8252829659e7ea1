#!/usr/bin/env bash
# End to end: scanned books. An image-only PDF and a mixed one (text, scanned and blank
# pages) under the default --page-input auto, then a text PDF under --page-input image and the
# mixed one again through the anthropic dialect, go through the real binaries. Every result is
# checked page by page against what `fairlane read-pdf` makes of the same file: a text page's
# output is its text, an image page's names the SHA-256 and size of the very image its page
# renders to (the stand-in answers with them), a blank page is done with no output and made no
# call. The stand-in saw every image part, billed by the dialect's rule, and refused nothing.
#
#   serve_scanned.sh FAIRLANE FAIRLANE_PROVIDER_SIM FAIRLANE_PDFGEN
set -euo pipefail
fairlane=$1
stand_in=$2
pdfgen=$3
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 20 --rpm 60000 --tpm 6000000 --max-in-flight 8
alice=$(add_user alice)

"$pdfgen" --pages 5 --seed 3 --scanned --out "$work/scanned.pdf"
"$pdfgen" --pages 6 --seed 4 --kinds tsbtsb --out "$work/mixed.pdf"
"$pdfgen" --pages 3 --seed 5 --out "$work/text.pdf"

# check_job KEY ID FILE MODE: the job ended done, and its result is, page by page, what
# `fairlane read-pdf --page-input MODE` reads from FILE; the job counts its images and blanks.
check_job() {
  local view result
  view=$(wait_ended "$1" "$2" 60)
  [[ $(field state <<<"$view") == done ]] || fail "job $2 ended as: $view"
  result=$(curl -sS --max-time 10 "$base/v1/jobs/$2/result" -H "Authorization: Bearer $1")
  "$fairlane" read-pdf --page-input "$4" <"$3" >"$work/read.out"
  python3 - "$work/read.out" "$view" "$result" <<'PY' || fail "job $2 ($3, $4) is not its pages"
import hashlib, json, sys
raw = open(sys.argv[1], "rb").read()
view, result = json.loads(sys.argv[2]), json.loads(sys.argv[3])
head, _, rest = raw.partition(b"\n")
assert head.startswith(b"ok "), head
expected = []
for _ in range(int(head[3:])):
    line, _, rest = rest.partition(b"\n")
    words = line.decode().split(" ")
    if words[0] == "blank":
        expected.append(("blank", None))
        continue
    n = int(words[-1])
    body, rest = rest[:n], rest[n:]
    if words[0] == "text":
        expected.append(("text", body.decode()))
    else:
        digest = hashlib.sha256(body).hexdigest()
        expected.append(("image", f"image sha256:{digest} {words[2]}x{words[3]}"))
pages = result["pages"]
assert len(pages) == len(expected), (len(pages), len(expected))
for k, (page, (kind, what)) in enumerate(zip(pages, expected), start=1):
    assert page["page"] == k and page["state"] == "done", page
    assert page["kind"] == kind, (k, page["kind"], kind)
    if kind == "blank":
        assert page["output"] == "", page
    elif kind == "text":
        assert page["output"].startswith(what.split("\n")[0]), (k, page["output"][:80])
    else:
        assert what in page["output"], (k, page["output"][:200], what)
counts = view["pages"]
assert counts["images"] == sum(kind == "image" for kind, _ in expected), counts
assert counts["blank"] == sum(kind == "blank" for kind, _ in expected), counts
print(f"{len(pages)} pages as read: {counts['images']} images, {counts['blank']} blank")
PY
}

# post KEY FILE: a PDF upload; prints the job id.
post() {
  local answer
  answer=$(curl -sS --max-time 60 -X POST "$base/v1/jobs?name=$(basename "$2")" \
    -H "Authorization: Bearer $1" -H 'Content-Type: application/pdf' --data-binary "@$2")
  [[ $(field id <<<"$answer") == job_* ]] || fail "the upload of $2 answered: $answer"
  field id <<<"$answer"
}

start_serve --rpm 60000 --tpm 6000000 --max-in-flight 8 --max-tokens 500
scanned=$(post "$alice" "$work/scanned.pdf")
mixed=$(post "$alice" "$work/mixed.pdf")
check_job "$alice" "$scanned" "$work/scanned.pdf" auto
check_job "$alice" "$mixed" "$work/mixed.pdf" auto
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 30

start_serve --rpm 60000 --tpm 6000000 --max-in-flight 8 --max-tokens 500 --page-input image
as_images=$(post "$alice" "$work/text.pdf")
check_job "$alice" "$as_images" "$work/text.pdf" image
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 30

start_serve --rpm 60000 --tpm 6000000 --max-in-flight 8 --max-tokens 500 \
  --provider-dialect anthropic
again=$(post "$alice" "$work/mixed.pdf")
check_job "$alice" "$again" "$work/mixed.pdf" auto

# Images: 5 scanned + 2 of the mixed book + 3 drawn text pages + 2 again; blank pages: none
# of the 4 made a call, so the stand-in saw 5 + 4 + 3 + 4 calls.
stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
[[ $(count image_parts <<<"$stats") == 12 ]] || fail "the stand-in did not see 12 image parts: $stats"
[[ $(count requests <<<"$stats") == 16 ]] || fail "not 16 calls (blank pages make none): $stats"
[[ $(count rejected_429 <<<"$stats") == 0 ]] || fail "the provider refused calls: $stats"
[[ $(count rejected_503 <<<"$stats") == 0 ]] || fail "the provider refused calls: $stats"
echo "1 passed, 0 failed"
