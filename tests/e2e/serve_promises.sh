#!/usr/bin/env bash
# End to end: the door's promises (docs/api.md, "Promises"). The provider slows mid-run:
# eight users each upload a book of 18 pages (144 pages of 252 tokens) 1.5 s after the
# stand-in's start, promised at its original limits, 30,240 tokens a minute (120 pages),
# which bind within seconds: the 144 pages need more. 6 s after its start the stand-in
# halves its TPM and doubles its latency (400 ms a call), and announces that in its
# headers; fairlane follows, so the books finish later than promised. Each job is polled
# every 0.25 s until all have ended: every book that finished later than its promise by
# more than max(2 s, 10% of the promised duration) showed a revision (eta_revised_at and a
# reason) in a poll answered before its promised_eta_at passed, every page ends done and
# the stand-in refused no call over its limits. Then the accuracy is published: GET
# /v1/queue's promises count the eight jobs, with numbers for the quantiles, and /metrics
# has both histograms counting them.
#
#   serve_promises.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

books=8
pages=18
users=()
for u in $(seq "$books"); do users+=("$(add_user "user$u")"); done

limits=(--rpm 6000 --tpm 30240 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 200 --output-tokens 20 \
  --change "6000:tpm=15120,latency-ms=400"
started_ms=$((${EPOCHREALTIME/./} / 1000))
# 920 bytes of prompt: 232 input tokens a page (with its text), plus the 20 of output.
start_serve "${limits[@]}" --max-tokens 20 --max-wait 600 \
  --prompt "$(head -c 920 /dev/zero | tr '\0' p)"
while ((${EPOCHREALTIME/./} / 1000 < started_ms + 1500)); do sleep 0.02; done
ids=()
for u in $(seq "$books"); do ids+=("$(upload_book "${users[$((u - 1))]}" "book$u" "b$u" "$pages")"); done
stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
[[ $(count changes_applied <<<"$stats") == 0 ]] ||
  fail "the stand-in changed its limits before the uploads were all accepted: $stats"

# One stream of live events, on the first book: the revision is pushed there too.
curl -sSN --max-time 50 "$base/v1/jobs/${ids[0]}/events" -H "Authorization: Bearer ${users[0]}" \
  >"$work/events" 2>"$work/events.err" &
events_pid=$!
pids+=("$events_pid")

# Every 0.25 s, one curl asks for the eight jobs; each answer is written as a line
# "WALL_MS_WHEN_ANSWERED ID JOB_OBJECT" to $work/polls. Bounded: 45 s.
ask=()
for u in $(seq "$books"); do
  ((u > 1)) && ask+=(--next)
  ask+=(-sS --max-time 5 -w '\n' -H "Authorization: Bearer ${users[$((u - 1))]}"
    "$base/v1/jobs/${ids[$((u - 1))]}")
done
: >"$work/polls"
ended=0
for _ in $(seq 180); do
  answers=$(curl "${ask[@]}" || true)
  answered_ms=$((${EPOCHREALTIME/./} / 1000))
  n=0
  while IFS= read -r line; do
    [[ -n $line ]] && echo "$answered_ms ${ids[$n]} $line" >>"$work/polls"
    n=$((n + 1))
  done <<<"$answers"
  ended=$(grep -cE '"state":"(done|failed|cancelled)"' <<<"$answers" || true)
  ((ended == books)) && break
  sleep 0.25
done
((ended == books)) || fail "only $ended of $books books ended within 45 s: $(tail -n "$books" "$work/polls")"
run_ms=$((${EPOCHREALTIME/./} / 1000 - started_ms))

# Every page done, with its own text; the stand-in refused nothing over its limits.
total_done=0
for u in $(seq "$books"); do
  check_pages "${users[$((u - 1))]}" "${ids[$((u - 1))]}" "b$u" "$pages"
  total_done=$((total_done + done_pages))
done
((total_done == books * pages)) || fail "$total_done of $((books * pages)) pages done"
check_limits 4
[[ $(count changes_applied <<<"$stats") == 1 ]] || fail "the stand-in never changed its limits: $stats"

# Per job, from the polls: "ID CREATED_MS PROMISED_MS FINISHED_MS FIRST_REVISED_SEEN_MS
# REVISED_ETA_MS" (- for none seen), then a line "reason ID TEXT" for each reason seen.
python3 - "$work/polls" >"$work/promises" <<'EOF'
import datetime, json, sys

def ms(text):
    if not text:
        return None
    t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round(t.timestamp() * 1000)

jobs, order, reasons = {}, [], []
for line in open(sys.argv[1]):
    when, job_id, body = line.split(" ", 2)
    job = json.loads(body)
    if job_id not in jobs:
        order.append(job_id)
        jobs[job_id] = {"first_revised": None, "revised_eta": None}
    seen = jobs[job_id]
    seen["created"] = ms(job.get("created_at"))
    seen["promised"] = ms(job.get("promised_eta_at"))
    seen["finished"] = ms(job.get("finished_at"))
    reason = job.get("eta_revised_reason")
    if job.get("eta_revised_at") and reason and seen["first_revised"] is None:
        seen["first_revised"] = int(when)
        seen["revised_eta"] = ms(job["eta_revised_at"])
    if reason and (job_id, reason) not in reasons:
        reasons.append((job_id, reason))
dash = lambda v: "-" if v is None else str(v)
for job_id in order:
    s = jobs[job_id]
    print(job_id, *(dash(s[k]) for k in ("created", "promised", "finished", "first_revised", "revised_eta")))
for job_id, reason in reasons:
    print("reason", job_id, reason)
EOF

# What each job was promised and did, for the figures and for any failure's message.
report=""
while read -r id created promised finished first_revised revised_eta; do
  [[ $id == reason ]] && continue
  [[ $created != - && $promised != - && $finished != - ]] ||
    fail "job $id lacks created_at, promised_eta_at or finished_at: $(grep " $id " "$work/polls" | tail -1)"
  report+="  $id: promised in $((promised - created)) ms, finished in $((finished - created)) ms"
  [[ $first_revised == - ]] ||
    report+=", revision first seen $((first_revised - created)) ms in (to $((revised_eta - created)) ms)"
  report+=$'\n'
done <"$work/promises"
report+=$(grep '^reason' "$work/promises" || true)
late=0 in_time=0
while read -r id created promised finished first_revised revised_eta; do
  [[ $id == reason ]] && continue
  promised_ms=$((promised - created))
  slack_ms=$((promised_ms / 10 > 2000 ? promised_ms / 10 : 2000))
  ((finished > promised + slack_ms)) || continue
  late=$((late + 1))
  [[ $first_revised != - ]] ||
    fail "job $id finished $((finished - promised)) ms after its promise and no revision was ever seen:"$'\n'"$report"
  ((first_revised < promised)) ||
    fail "job $id finished $((finished - promised)) ms late, but its revision was first seen" \
      "$((first_revised - promised)) ms after the promise had passed:"$'\n'"$report"
  in_time=$((in_time + 1))
done <"$work/promises"
# The run proves something only when the change made books late.
((late > 0)) || fail "no book finished late: the provider's slowing did not bite:"$'\n'"$report"
reasons_seen=$(grep '^reason' "$work/promises" | cut -d' ' -f3- | sort -u || true)

# The stream of the first book ended with it, and carried its revision if it had one.
wait_exit "$events_pid" 10
[[ $exited == 0 ]] || fail "the first book's event stream did not end with it: $(cat "$work/events.err")"
if [[ $(head -1 "$work/promises" | cut -d' ' -f5) != - ]]; then
  grep '^data: ' "$work/events" | grep -q '"eta_revised_at":"' ||
    fail "the first book was revised, but no event of its stream shows it: $(tail -3 "$work/events")"
fi

# The accuracy published: each job is counted by the once-a-second check that sees it
# ended, so this waits up to 5 s for all eight.
queue=""
for _ in $(seq 50); do
  queue=$(curl -sS --max-time 10 "$base/v1/queue" -H "Authorization: Bearer ${users[0]}")
  [[ $(grep -o '"promises":{[^}]*}' <<<"$queue" | count finished) == "$books" ]] && break
  sleep 0.1
done
promises=$(grep -o '"promises":{[^}]*}' <<<"$queue" || true)
[[ $(count finished <<<"$promises") == "$books" ]] ||
  fail "GET /v1/queue's promises do not count the $books jobs: ${promises:-$queue}"
number='-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?'
for q in actual_over_promised_p50 actual_over_promised_p90 lateness_p50_seconds lateness_p90_seconds; do
  grep -qE "\"$q\":$number[,}]" <<<"$promises" || fail "promises.$q is not a number: $promises"
done
metrics=$(curl -sS --max-time 10 "$base/metrics" -H "Authorization: Bearer $admin_key")
value() { grep "^$1 " | awk '{ print $2 }'; }  # NAME: the sample's value, from /metrics on stdin
for h in fairlane_eta_actual_over_promised fairlane_eta_lateness_seconds; do
  [[ $(value "${h}_count" <<<"$metrics") == "$books" ]] ||
    fail "${h}_count is '$(value "${h}_count" <<<"$metrics")', not the $books jobs: $(grep "^$h" <<<"$metrics")"
done

echo "$report" | grep -v '^reason'
echo "reasons seen: ${reasons_seen:-none}"
echo "1 passed, 0 failed ($late of $books books finished late, $in_time of them revised before" \
  "their promise passed; $total_done pages done in $run_ms ms; $promises)"
