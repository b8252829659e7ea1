#!/usr/bin/env bash
# End to end: the door's promises (docs/api.md, "Promises"). The provider slows mid-run,
# and a promise that can no longer be kept is revised before it passes; once the jobs have
# ended, their accuracy is published.
#
# fairlane serve and the stand-in both start at 30,240 tokens a minute (120 pages of 252
# tokens), 4 calls in flight of 200 ms each (20 pages a second). A warm-up book of 64 pages
# teaches the estimator what pages use and take (it starts from 800 tokens and 2 s a call,
# and would promise far too much), and leaves about 60 pages of budget. Then eight users
# each upload one book, 87 pages in all, from small to large, so the tokens bind about 3 s
# later: six small books (2 to 5 pages) are done within about 1.5 s, the books of 30 and 38
# pages end once the budget binds. From its 114th call the stand-in halves its TPM and
# doubles its latency, and announces the limit in its headers (the budget still holds about
# 20 pages then, so fairlane learns it before it binds and no call is refused): the pages
# left past the budget go at 1 a second, not 2, so the last book (nothing arrived after it)
# ends late. The change comes at a call, not at a time, so that however slowly this machine
# starts and uploads, it comes after the last book is accepted: the warm-up's 64 calls and
# the 49 pages of the seven books before the last make 113.
# The book of 30 pages ends late too, because the last one arrived ahead of its last page
# in fair order. Each book is polled every 0.25 s until all have ended: every book that
# finished later than its promise by more than max(2 s, 10% of the promised duration)
# showed a revision (eta_revised_at and a reason) in a poll answered before its
# promised_eta_at passed; its event stream carries it too. Every page ends done and the
# stand-in refused no call over its limits. Then GET /v1/queue's promises and /metrics'
# histograms count the nine jobs, with the quantiles and sums of their own times.
#
# The small books come first because a book accepted first is promised its time with the
# queue as it stands: the books after it take their share ahead of its last page. A small
# one so delayed is late by well under 2 s; a large one is promised seconds, long enough
# for the once-a-second check to revise it before its promise passes.
#
#   serve_promises.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

books=8
sizes=(2 2 3 3 4 5 30 38)
pages=87
users=()
for u in $(seq "$books"); do users+=("$(add_user "user$u")"); done
warm=$(add_user warm)

limits=(--rpm 6000 --tpm 30240 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 200 --output-tokens 20 \
  --change "call=114:tpm=15120,latency-ms=400"
started_ms=$((${EPOCHREALTIME/./} / 1000))
# 920 bytes of prompt: 232 input tokens a page (with its text), plus the 20 of output.
start_serve "${limits[@]}" --max-tokens 20 --max-wait 600 \
  --prompt "$(head -c 920 /dev/zero | tr '\0' p)"
warm_id=$(upload_book "$warm" warm w 64)
wait_ended "$warm" "$warm_id" 10 >/dev/null
ids=()
for u in $(seq "$books"); do
  ids+=("$(upload_book "${users[$((u - 1))]}" "book$u" "b$u" "${sizes[$((u - 1))]}")")
done
stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
[[ $(count changes_applied <<<"$stats") == 0 ]] ||
  fail "the stand-in changed its limits before the books were all accepted: $stats"

# The live events of the last book: its revision is pushed there too.
curl -sSN --max-time 50 "$base/v1/jobs/${ids[7]}/events" -H "Authorization: Bearer ${users[7]}" \
  >"$work/events" 2>"$work/events.err" &
events_pid=$!
pids+=("$events_pid")

# Every 0.25 s one curl asks for the eight books; each answer is a line
# "WALL_MS_ANSWERED ID JOB_OBJECT" of $work/polls. Bounded: 180 rounds, about 50 s.
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
((ended == books)) || fail "only $ended of $books books ended: $(tail -n "$books" "$work/polls")"
run_ms=$((${EPOCHREALTIME/./} / 1000 - started_ms))

# Every page done, with its own text; the stand-in refused nothing over its limits.
total_done=0
for u in $(seq "$books"); do
  check_pages "${users[$((u - 1))]}" "${ids[$((u - 1))]}" "b$u" "${sizes[$((u - 1))]}"
  total_done=$((total_done + done_pages))
done
((total_done == pages)) || fail "$total_done of $pages pages done"
check_limits 4
[[ $(count changes_applied <<<"$stats") == 1 ]] || fail "the stand-in never changed its limits: $stats"

# Per book, from the polls, in ms since the epoch: "ID CREATED PROMISED FINISHED
# FIRST_REVISION_SEEN REVISED_TO" (- for none seen); then "reason ID TEXT" for each
# reason seen.
python3 - "$work/polls" >"$work/promises" <<'EOF'
import datetime, json, sys

def ms(text):
    if not text:
        return None
    return round(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)

jobs, reasons = {}, []
for line in open(sys.argv[1]):
    when, job_id, body = line.split(" ", 2)
    job = json.loads(body)
    seen = jobs.setdefault(job_id, {"first_revised": None, "revised_to": None})
    seen["created"] = ms(job.get("created_at"))
    seen["promised"] = ms(job.get("promised_eta_at"))
    seen["finished"] = ms(job.get("finished_at"))
    reason = job.get("eta_revised_reason")
    if job.get("eta_revised_at") and reason and seen["first_revised"] is None:
        seen["first_revised"] = int(when)
        seen["revised_to"] = ms(job["eta_revised_at"])
    if reason and (job_id, reason) not in reasons:
        reasons.append((job_id, reason))
for job_id, s in jobs.items():
    print(job_id, *("-" if s[k] is None else s[k]
                    for k in ("created", "promised", "finished", "first_revised", "revised_to")))
for job_id, reason in reasons:
    print("reason", job_id, reason)
EOF

# What each book was promised and did: the figures, and what any failure shows.
report="" n=0
while read -r id created promised finished first_revised revised_to; do
  [[ $id == reason ]] && continue
  [[ $id == "${ids[$n]}" ]] || fail "the polls list $id where ${ids[$n]} was expected"
  [[ $created != - && $promised != - && $finished != - ]] ||
    fail "book $id lacks created_at, promised_eta_at or finished_at: $(grep " $id " "$work/polls" | tail -1)"
  report+="  book $((n + 1)) (${sizes[$n]} pages), accepted $((created - started_ms)) ms after the"
  report+=" stand-in's start: promised in $((promised - created)) ms, done in $((finished - created)) ms"
  [[ $first_revised == - ]] ||
    report+=", revision seen $((first_revised - created)) ms in (to $((revised_to - created)) ms)"
  report+=$'\n'
  n=$((n + 1))
done <"$work/promises"
((n == books)) || fail "the polls show $n books, not $books"
report+="  reasons: "$'\n'$(grep '^reason' "$work/promises" | cut -d' ' -f3- | sort | uniq -c || true)
late=0 in_time=0 n=0 last_late=0
while read -r id created promised finished first_revised revised_to; do
  [[ $id == reason ]] && continue
  n=$((n + 1))
  promised_ms=$((promised - created))
  slack_ms=$((promised_ms / 10 > 2000 ? promised_ms / 10 : 2000))
  ((finished > promised + slack_ms)) || continue
  late=$((late + 1))
  ((n == books)) && last_late=1
  [[ $first_revised != - ]] ||
    fail "book $n finished $((finished - promised)) ms after its promise and no revision was ever seen:"$'\n'"$report"
  ((first_revised < promised)) ||
    fail "book $n finished $((finished - promised)) ms after its promise, and its revision was first" \
      "seen $((first_revised - promised)) ms after the promise had passed:"$'\n'"$report"
  in_time=$((in_time + 1))
done <"$work/promises"
# Only the slowing can make the last book late: no work arrived after it.
((last_late == 1)) || fail "the provider's slowing did not make the last book late: the test proves nothing:"$'\n'"$report"

wait_exit "$events_pid" 10
[[ $exited == 0 ]] || fail "the last book's event stream did not end with it: $(cat "$work/events.err")"
grep -q '^data: .*"eta_revised_at":"2.*"eta_revised_reason":"[^"]' "$work/events" ||
  fail "the last book was revised, but no event of its stream shows it: $(tail -3 "$work/events")"

# The accuracy published, of the nine jobs (the warm-up's too). Each is counted by the
# once-a-second check that sees it ended: this waits up to 5 s for all.
jobs=$((books + 1))
queue=""
for _ in $(seq 50); do
  queue=$(curl -sS --max-time 10 "$base/v1/queue" -H "Authorization: Bearer ${users[0]}")
  [[ $(grep -o '"promises":{[^}]*}' <<<"$queue" | count finished) == "$jobs" ]] && break
  sleep 0.1
done
promises=$(grep -o '"promises":{[^}]*}' <<<"$queue" || true)
[[ $(count finished <<<"$promises") == "$jobs" ]] ||
  fail "GET /v1/queue's promises do not count the $jobs jobs: ${promises:-$queue}"
number='-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?'
for q in actual_over_promised_p50 actual_over_promised_p90 lateness_p50_seconds lateness_p90_seconds; do
  grep -qE "\"$q\":$number[,}]" <<<"$promises" || fail "promises.$q is not a number: $promises"
done
metrics=$(curl -sS --max-time 10 "$base/metrics" -H "Authorization: Bearer $admin_key")
value() { grep "^$1 " | awk '{ print $2 }'; }  # NAME: the sample's value, from /metrics on stdin
for h in fairlane_eta_actual_over_promised fairlane_eta_lateness_seconds; do
  [[ $(value "${h}_count" <<<"$metrics") == "$jobs" ]] ||
    fail "${h}_count is '$(value "${h}_count" <<<"$metrics")', not the $jobs jobs: $(grep "^$h" <<<"$metrics")"
  [[ $(value "${h}_bucket{le=\"+Inf\"}" <<<"$metrics") == "$jobs" ]] ||
    fail "${h}'s +Inf bucket does not count the $jobs jobs: $(grep "^$h" <<<"$metrics")"
done
# The quantiles and sums are those of the jobs' own times (to the ms the job objects give):
# the p50 is the median of nine, the p90 between the eighth and the ninth.
curl -sS --max-time 10 "$base/v1/jobs/$warm_id" -H "Authorization: Bearer $warm" >"$work/warm.json"
grep -v '^reason' "$work/promises" >"$work/books"
echo "$metrics" >"$work/metrics"
accuracy=$(python3 - "$work/books" "$work/warm.json" "$promises" "$work/metrics" <<'EOF'
import datetime, json, sys

def ms(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000

times = [tuple(int(v) for v in line.split()[1:4]) for line in open(sys.argv[1])]
warm = json.load(open(sys.argv[2]))
times.append((ms(warm["created_at"]), ms(warm["promised_eta_at"]), ms(warm["finished_at"])))
ratio = sorted((f - c) / (p - c) for c, p, f in times)
late = sorted((f - p) / 1000 for c, p, f in times)
promises = json.loads("{" + sys.argv[3] + "}")["promises"]
metrics = dict(line.rsplit(" ", 1) for line in open(sys.argv[4]).read().splitlines()
               if line and not line.startswith("#"))
problems = []
def near(name, got, want, tolerance):
    if abs(got - want) > tolerance:
        problems.append(f"{name} is {got}, the jobs' own times give {want:.4f}")
# Each time is rounded to the ms: a ratio of a promise of 200 ms may be off by 0.01.
for values, p50, p90 in ((ratio, "actual_over_promised_p50", "actual_over_promised_p90"),
                         (late, "lateness_p50_seconds", "lateness_p90_seconds")):
    near(f"promises.{p50}", promises[p50], values[4], 0.02 * max(1, abs(values[4])))
    if not values[7] - 0.02 <= promises[p90] <= values[8] + 0.02:
        problems.append(f"promises.{p90} is {promises[p90]}, not between {values[7]:.4f} "
                        f"and {values[8]:.4f}")
near("fairlane_eta_actual_over_promised_sum", float(metrics["fairlane_eta_actual_over_promised_sum"]),
     sum(ratio), 0.02 * len(ratio))
near("fairlane_eta_lateness_seconds_sum", float(metrics["fairlane_eta_lateness_seconds_sum"]),
     sum(late), 0.01 * len(late))
print("; ".join(problems) if problems else
      f"actual/promised p50 {ratio[4]:.2f}, max {ratio[8]:.2f}; lateness p50 {late[4]:.2f} s, max {late[8]:.2f} s")
EOF
) || true
[[ $accuracy == actual/promised* ]] || fail "the published accuracy is not the jobs': $accuracy ($promises)"

echo "$report"
echo "1 passed, 0 failed ($late of $books books finished late, $in_time of them revised before" \
  "their promise passed; $total_done pages done in $run_ms ms; of the $jobs jobs, $accuracy)"
