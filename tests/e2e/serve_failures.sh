#!/usr/bin/env bash
# Issue 6, end-to-end test 5: a stand-in that answers a fifth of its calls with 500. Every
# page ends done (with its text) or failed (with a reason); the job's counts add up to its
# pages; nothing is lost. Backoff is shortened so retries take milliseconds, not seconds.
#
#   serve_failures.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 10 --rpm 60000 --tpm 6000000 --max-in-flight 8 --fail-rate 0.2 --seed 7
alice=$(add_user alice)
# Two attempts: with a fifth failing, about one page in twenty-five fails for good.
start_serve --rpm 60000 --tpm 6000000 --max-in-flight 8 --max-tokens 100 --max-attempts 2 \
  --backoff-base 0.02 --backoff-max 0.2

pages=()
for n in $(seq 100); do pages+=("page-$n"); done
id=$(upload "$alice" flaky "${pages[@]}")
view=$(wait_ended "$alice" "$id" 60)

done_pages=$(count done <<<"$view")
failed_pages=$(count failed <<<"$view")
((done_pages + failed_pages == 100)) || fail "pages neither done nor failed: $view"
((done_pages > 0)) || fail "no page got through: $view"

result=$(curl -sS "$base/v1/jobs/$id/result" -H "Authorization: Bearer $alice")
[[ $(grep -o '"page":' <<<"$result" | wc -l) == 100 ]] || fail "the result lists not 100 pages: $result"
[[ $(grep -o '"state":"done","output":"page-[0-9]*"' <<<"$result" | wc -l) == "$done_pages" ]] ||
  fail "done pages without their text: $result"
[[ $(grep -o '"state":"failed","error":"[^"]\+"' <<<"$result" | wc -l) == "$failed_pages" ]] ||
  fail "failed pages without a reason: $result"

stats=$(curl -sS "$stand_in_url/stats")
grep -q '"rejected_429":0' <<<"$stats" || fail "the stand-in refused calls: $stats"
echo "1 passed, 0 failed ($done_pages done, $failed_pages failed)"
