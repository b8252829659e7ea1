#!/usr/bin/env bash
# A cluster end to end (DESIGN.md section 10, issue 17), on the tests' PostgreSQL server
# (CTest fixture `postgres`): three `fairlane serve` instances on one database and one
# stand-in provider. A heavy user uploads 4 books of 40 pages through the first instance, two
# light users a book of 20 pages each through the two others. The leader is SIGKILLed mid-run,
# started again (it comes back as a follower), and the leader of the moment is SIGKILLed once
# more. Then:
#   - every page is done, exactly once and in order in its book's result;
#   - the stand-in answered no 429 and no 503, and never saw more calls at once than the cap;
#   - both light books finished before the heavy user's last;
#   - each takeover happened within --lease-s of the kill (plus a second of polling here);
#   - GET /v1/queue names the instance, its role and the leader, the same leader everywhere.
#
#   pg_cluster.sh FAIRLANE FAIRLANE_PROVIDER_SIM URI_FILE
set -euo pipefail
fairlane=$1
stand_in=$2
uri_file=$3
source "$(dirname "$0")/lib.sh"

pg_database "$uri_file" fairlane_cluster_$$

cap=4
lease_s=2
start_stand_in --latency-ms 150 --rpm 60000 --tpm 6000000 --max-in-flight "$cap"
heavy=$("$fairlane" user add heavy --db "$uri")
light1=$("$fairlane" user add light1 --db "$uri")
light2=$("$fairlane" user add light2 --db "$uri")

# start_instance N: instance N on a free port; sets url[N] and pid[N].
declare -A url pid
starts=0
start_instance() {
  starts=$((starts + 1))
  local out="$work/instance$1.$starts.out"
  FAIRLANE_ADMIN_KEY=$admin_key "$fairlane" serve --listen 127.0.0.1:0 --db "$uri" \
    --provider-url "$stand_in_url" --instance "node$1" --lease-s "$lease_s" \
    --rpm 60000 --tpm 6000000 --max-in-flight "$cap" --max-tokens 100 --max-wait 600 \
    --stop-deadline 5 >"$out" 2>&1 &
  pid[$1]=$!
  pids+=("${pid[$1]}")
  url[$1]="http://127.0.0.1:$(port_of "$out")"
}
queue() { curl -sS --max-time 5 "${url[$1]}/v1/queue" -H "Authorization: Bearer $admin_key"; }
# The leader as instance N sees it ("" while none is known).
leader_seen_by() { queue "$1" | field leader; }
# wait_leader N... : waits up to 10 s until every instance named agrees on one leader that
# is one of them; prints its number.
wait_leader() {
  local leader=""
  for _ in $(seq 100); do
    local agreed=yes first=""
    for n in "$@"; do
      local seen
      seen=$(leader_seen_by "$n" 2>/dev/null || true)
      [[ -z $first ]] && first=$seen
      [[ -n $seen && $seen == "$first" ]] || agreed=no
    done
    if [[ $agreed == yes && -n $first ]]; then
      for n in "$@"; do [[ $first == "node$n" ]] && leader=$n; done
      [[ -n $leader ]] && { echo "$leader"; return; }
    fi
    sleep 0.1
  done
  fail "instances $* agree on no leader among them: $(for n in "$@"; do queue "$n"; echo; done)"
}
# book KEY INSTANCE NAME PAGES: uploads pages NAME-p1..NAME-pPAGES; prints the job id.
book() {
  local pages=()
  for k in $(seq "$4"); do pages+=("$3-p$k"); done
  base=${url[$2]} upload "$1" "$3" "${pages[@]}"
}
done_of() { curl -sS --max-time 5 "${url[$1]}/v1/jobs/$3" -H "Authorization: Bearer $2" | count done; }
# total_done INSTANCE: pages done over every book.
total_done() {
  local sum=0 n
  for j in "${!owner[@]}"; do
    n=$(done_of "$1" "${owner[$j]}" "$j")
    sum=$((sum + ${n:-0}))
  done
  echo "$sum"
}
# wait_done INSTANCE AT_LEAST: up to 30 s until the books have AT_LEAST pages done in all.
wait_done() {
  local d=0
  for _ in $(seq 300); do
    d=$(total_done "$1")
    ((d >= $2)) && return
    sleep 0.1
  done
  fail "only $d pages done after 30 s (waiting for $2)"
}

start_instance 1
[[ $(wait_leader 1) == 1 ]] || fail "the first instance does not lead"
start_instance 2
start_instance 3
[[ $(wait_leader 1 2 3) == 1 ]] || fail "the first instance lost the lead to a newcomer"
[[ $(queue 2 | field role) == follower && $(queue 3 | field role) == follower ]] ||
  fail "the newcomers are not followers: $(queue 2) $(queue 3)"
[[ $(queue 2 | field instance) == node2 ]] || fail "instance 2 does not name itself: $(queue 2)"
# (Read whole before grep: grep -q leaving early would fail curl's write under pipefail.)
metrics() { curl -sS --max-time 5 "${url[$1]}/metrics" -H "Authorization: Bearer $admin_key"; }
follower_metrics=$(metrics 2)
grep -qx 'fairlane_leader 0' <<<"$follower_metrics" || fail "a follower's fairlane_leader is not 0"
leader_metrics=$(metrics 1)
grep -qx 'fairlane_leader 1' <<<"$leader_metrics" || fail "the leader's fairlane_leader is not 1"

declare -A owner pages_of
heavy_jobs=()
for b in 1 2 3 4; do
  j=$(book "$heavy" 1 "heavy$b" 40)
  owner[$j]=$heavy pages_of[$j]=40 heavy_jobs+=("$j")
done
l1=$(book "$light1" 2 light1 20)
owner[$l1]=$light1 pages_of[$l1]=20
l2=$(book "$light2" 3 light2 20)
owner[$l2]=$light2 pages_of[$l2]=20
total=200

# The first kill: the leader, mid-run.
wait_done 2 30
killed_at=$(date +%s%3N)
kill -KILL "${pid[1]}"
wait_exit "${pid[1]}" 10
second=$(wait_leader 2 3)
took=$(($(date +%s%3N) - killed_at))
echo "node$second leads $took ms after the first kill"
((took < (lease_s + 1) * 1000)) || fail "the takeover took $took ms (lease $lease_s s)"

# The first leader comes back, as a follower.
start_instance 1
[[ $(wait_leader 1 2 3) == "$second" ]] || fail "the restarted instance took the lead back"
[[ $(queue 1 | field role) == follower ]] || fail "the restarted instance: $(queue 1)"

# The second kill: the leader of the moment.
wait_done 1 110
killed_at=$(date +%s%3N)
kill -KILL "${pid[$second]}"
wait_exit "${pid[$second]}" 10
survivors=()
for n in 1 2 3; do [[ $n != "$second" ]] && survivors+=("$n"); done
third=$(wait_leader "${survivors[@]}")
took=$(($(date +%s%3N) - killed_at))
echo "node$third leads $took ms after the second kill"
((took < (lease_s + 1) * 1000)) || fail "the takeover took $took ms (lease $lease_s s)"

# Everything ends, and every page is in its result once, in order.
for j in "${!owner[@]}"; do
  view=$(base=${url[$third]} wait_ended "${owner[$j]}" "$j" 60)
  [[ $(field state <<<"$view") == done ]] || fail "job $j ended as: $view"
  result=$(curl -sS --max-time 10 "${url[$third]}/v1/jobs/$j/result" \
    -H "Authorization: Bearer ${owner[$j]}")
  name=$(field name <<<"$view")
  want=$(for k in $(seq "${pages_of[$j]}"); do printf '"output":"%s-p%s"\n' "$name" "$k"; done)
  got=$(grep -o '"output":"[^"]*"' <<<"$result")
  [[ $got == "$want" ]] || fail "the result of $name is not its pages once each, in order: $result"
done

stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
[[ $(count rejected_429 <<<"$stats") == 0 ]] || fail "the provider sent 429s: $stats"
[[ $(count rejected_503 <<<"$stats") == 0 ]] || fail "the provider sent 503s: $stats"
(($(count max_in_flight_seen <<<"$stats") <= cap)) || fail "more than $cap calls at once: $stats"

finished() {
  curl -sS --max-time 5 "${url[$third]}/v1/jobs/$2" -H "Authorization: Bearer $1" |
    field finished_at
}
last_heavy=""
for j in "${heavy_jobs[@]}"; do
  f=$(finished "$heavy" "$j")
  [[ $f > $last_heavy ]] && last_heavy=$f
done
for pair in "$light1 $l1" "$light2 $l2"; do
  read -r key j <<<"$pair"
  f=$(finished "$key" "$j")
  [[ $f < $last_heavy ]] || fail "a light book finished at $f, not before the heavy user's last ($last_heavy)"
done
echo "1 passed, 0 failed ($(count requests <<<"$stats") calls for $total pages, leaders node1, node$second, node$third)"
