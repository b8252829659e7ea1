#!/usr/bin/env bash
# The provider halves its token limit and doubles its latency mid-run. fairlane serve is
# configured with the stand-in's original limits, 30,240 tokens a minute (120 pages of 252
# tokens), which bind: the 145 pages uploaded at once need more. From the 91st call, while
# fairlane is still spending the first minute's budget (about 40 pages of it are left), the
# stand-in enforces, and its rate-limit headers announce, 15,120 a minute and 400 ms a
# call. The change comes at a call, not at a time, so it is mid-run on a machine of any
# pace. fairlane follows the announced limit (DESIGN.md section 3): its tokens bucket
# refills at the new rate, so when the budget binds again the stand-in refuses no call for
# exceeding its limits, and every page ends done. A fairlane that only lowered its level to
# the headers' remaining, refilling at the configured rate, drew a 429 for about every
# call of the last dozen pages.
#
#   serve_limit_change.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

pages=145
limits=(--rpm 6000 --tpm 30240 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 200 --output-tokens 20 \
  --change "call=91:tpm=15120,latency-ms=400"
alice=$(add_user alice)
# 920 bytes of prompt: 232 input tokens a page (with its text), plus the 20 of output.
start_serve "${limits[@]}" --max-tokens 20 --max-wait 600 \
  --prompt "$(head -c 920 /dev/zero | tr '\0' p)"
id=$(upload_book "$alice" lc lc "$pages")

# The change comes mid-run: some pages are done when it is applied, not all.
for _ in $(seq 300); do
  [[ $(curl -sS --max-time 10 "$stand_in_url/stats" | count changes_applied) == 1 ]] && break
  sleep 0.05
done
stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
[[ $(count changes_applied <<<"$stats") == 1 ]] || fail "the stand-in never changed its limits: $stats"
done_at_change=$(curl -sS --max-time 10 "$base/v1/jobs/$id" -H "Authorization: Bearer $alice" | count done)
((done_at_change > 0 && done_at_change < pages)) ||
  fail "the change was not mid-run: $done_at_change of $pages pages were done when it came"

check_pages "$alice" "$id" lc "$pages"
stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
rejected=$(count rejected_429 <<<"$stats")
((rejected == 0)) ||
  fail "the stand-in refused $rejected calls over its halved TPM ($done_pages of $pages pages done): $stats"
((done_pages == pages)) || fail "$failed_pages of $pages pages failed"
check_limits 4
[[ $(count tokens_per_minute <<<"$stats") == 15120 ]] || fail "the stand-in's TPM is not 15120: $stats"
tokens=$(($(count input_tokens <<<"$stats") + $(count output_tokens <<<"$stats")))
((tokens > 30240)) || fail "the TPM never bound ($tokens tokens): $stats"
echo "1 passed, 0 failed ($pages pages done, $done_at_change of them before the limit halved," \
  "$tokens tokens, 0 calls refused over the stand-in's limits)"
