#!/usr/bin/env bash
# Issue 6, end-to-end test 2: the door. Behind a backlog a large upload gets 503 busy with
# its position, estimated and maximum wait, and Retry-After, while a small one still gets
# in; /v1/estimate says beforehand what the door then does. The wait is what the queue adds
# to the job's own time; a job too long alone is 422 job_too_large, never busy. The
# service's own limit (6 requests a minute) makes the backlog; the stand-in never binds.
#
#   serve_door.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 10 --rpm 60000 --tpm 6000000
alice=$(add_user alice)
bob=$(add_user bob)
start_serve --rpm 6 --tpm 6000000 --max-tokens 100 --max-wait 30 --max-job-seconds 1000

# Twelve pages: six go at once, six wait about ten seconds each: a minute's backlog.
pages=()
for n in $(seq 12); do pages+=("page-$n"); done
upload "$alice" backlog "${pages[@]}" >/dev/null

# status_of URL KEY [curl args...]: the HTTP status; the body goes to $work/body, the
# headers to $work/headers.
status_of() {
  local url=$1 key=$2
  shift 2
  curl -sS -o "$work/body" -D "$work/headers" -w '%{http_code}' "$url" \
    -H "Authorization: Bearer $key" "$@"
}

big=()
for n in $(seq 30); do big+=("\"more-$n\""); done
big_json="{\"name\":\"big\",\"pages\":[$(IFS=,; echo "${big[*]}")]}"

# A 30-page book of Alice's would wait the minute of her backlog on top of its own 300 s,
# more than 30 s: the estimate says busy (a 200: the estimate itself succeeded, and a 503
# would have proxies retry it), and so does the door.
[[ $(status_of "$base/v1/estimate?pages=30&tokens_per_page=120" "$alice") == 200 ]] ||
  fail "the estimate for 30 pages did not answer 200: $(cat "$work/body")"
grep -q '"accepted":false' "$work/body" || fail "the estimate accepted 30 pages: $(cat "$work/body")"
grep -q '"reason":"busy"' "$work/body" || fail "the estimate's refusal is not busy: $(cat "$work/body")"
grep -qi '^retry-after:' "$work/headers" && fail "the estimate's 200 has a Retry-After"
[[ $(status_of "$base/v1/jobs" "$alice" -X POST -H 'Content-Type: application/json' \
  -d "$big_json") == 503 ]] || fail "the 30-page upload was let in: $(cat "$work/body")"
body=$(cat "$work/body")
grep -q '"type":"busy"' <<<"$body" || fail "the refusal is not busy: $body"
position=$(count position <<<"$body")
[[ -n $position && $position -ge 1 ]] || fail "the refusal has no position: $body"
number() { grep -o "\"$1\":[-+0-9.eE]*" | head -1 | cut -d: -f2; }
wait_s=$(number estimated_wait_seconds <<<"$body")
awk -v w="$wait_s" 'BEGIN { exit !(w > 30 && w < 200) }' ||
  fail "a refused wait of '$wait_s' s is not the backlog's minute or so: $body"
awk -v w="$(number max_wait_seconds <<<"$body")" 'BEGIN { exit !(w == 30) }' ||
  fail "the refusal has no max_wait_seconds of 30: $body"
grep -qi '^retry-after: [0-9]' "$work/headers" || fail "no Retry-After: $(cat "$work/headers")"

# One page from a user with an empty lane gets a turn soon: estimate and door agree.
[[ $(status_of "$base/v1/estimate?pages=1&tokens_per_page=120" "$bob") == 200 ]] ||
  fail "the estimate for bob's page refused: $(cat "$work/body")"
grep -q '"accepted":true' "$work/body" || fail "the estimate did not accept: $(cat "$work/body")"
[[ $(status_of "$base/v1/jobs" "$bob" -X POST -H 'Content-Type: application/json' \
  -d '{"name":"small","pages":["one"]}') == 202 ]] ||
  fail "bob's page was refused: $(cat "$work/body")"

# 200 pages alone take 2,000 s at 6 a minute, more than --max-job-seconds: no wait can help,
# so not busy but job_too_large, naming the parts that fit.
[[ $(status_of "$base/v1/estimate?pages=200&tokens_per_page=120" "$bob") == 200 ]] ||
  fail "the estimate for 200 pages did not answer 200: $(cat "$work/body")"
grep -q '"reason":"job_too_large"' "$work/body" ||
  fail "200 pages alone are not job_too_large: $(cat "$work/body")"
pages_200=()
for n in $(seq 200); do pages_200+=("\"long-$n\""); done
[[ $(status_of "$base/v1/jobs" "$bob" -X POST -H 'Content-Type: application/json' \
  -d "{\"name\":\"long\",\"pages\":[$(IFS=,; echo "${pages_200[*]}")]}") == 422 ]] ||
  fail "the 200-page upload was not refused 422: $(cat "$work/body")"
body=$(cat "$work/body")
grep -q '"type":"job_too_large"' <<<"$body" || fail "the 422 is not job_too_large: $body"
grep -q 'split it into' <<<"$body" || fail "the 422 does not say how to split: $body"
parts=$(count parts <<<"$body")
[[ -n $parts && $parts -ge 2 ]] || fail "the 422 names no parts: $body"
grep -qi '^retry-after:' "$work/headers" && fail "the 422 has a Retry-After"
echo "1 passed, 0 failed"
