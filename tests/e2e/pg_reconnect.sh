#!/usr/bin/env bash
# A cluster whose connections to PostgreSQL are cut, as a restart of the server, a failover
# or a proxy's idle timeout cuts them (docs/postgresql.md, "Connections that break"): two
# `fairlane serve` instances on one database of the tests' server (CTest fixture `postgres`),
# three books uploaded, and every connection of every instance terminated by the server three
# times while pages are dispatched. Then:
#   - every page is done, exactly once and in order in its book's result;
#   - an upload through each instance is accepted after the cuts, and ends done too;
#   - both instances are ready (/readyz 200) and agree on one leader;
#   - the stand-in answered no 429 and never saw more calls at once than the cap.
#
#   pg_reconnect.sh FAIRLANE FAIRLANE_PROVIDER_SIM URI_FILE
set -euo pipefail
fairlane=$1
stand_in=$2
uri_file=$3
source "$(dirname "$0")/lib.sh"

pg_database "$uri_file" fairlane_reconnect_$$

cap=4
start_stand_in --latency-ms 100 --rpm 60000 --tpm 6000000 --max-in-flight "$cap"
ann=$("$fairlane" user add ann --db "$uri")
bob=$("$fairlane" user add bob --db "$uri")

declare -A url
start_instance() {
  local out="$work/instance$1.out"
  FAIRLANE_ADMIN_KEY=$admin_key "$fairlane" serve --listen 127.0.0.1:0 --db "$uri" \
    --provider-url "$stand_in_url" --instance "node$1" --lease-s 2 \
    --rpm 60000 --tpm 6000000 --max-in-flight "$cap" --max-tokens 100 --max-wait 600 \
    >"$out" 2>&1 &
  pids+=($!)
  url[$1]="http://127.0.0.1:$(port_of "$out")"
}
queue() { curl -sS --max-time 5 "${url[$1]}/v1/queue" -H "Authorization: Bearer $admin_key"; }
book() {
  local pages=()
  for k in $(seq "$4"); do pages+=("$3-p$k"); done
  base=${url[$2]} upload "$1" "$3" "${pages[@]}"
}
declare -A owner pages_of
done_pages() {
  local sum=0 n
  for j in "${!owner[@]}"; do
    n=$(curl -sS --max-time 5 "${url[1]}/v1/jobs/$j" -H "Authorization: Bearer ${owner[$j]}" |
      count done || true)
    sum=$((sum + ${n:-0}))
  done
  echo "$sum"
}
# wait_done AT_LEAST: up to 30 s until the books have AT_LEAST pages done in all.
wait_done() {
  local d=0
  for _ in $(seq 300); do
    d=$(done_pages)
    ((d >= $1)) && return
    sleep 0.1
  done
  fail "only $d pages done after 30 s (waiting for $1)"
}
# cut_connections: the server terminates every connection the instances hold (not psql's own),
# and this waits up to 10 s until none of them is left.
cut_connections() {
  local victims
  victims=$(sql "$uri" "SELECT string_agg(pid::text, ',') FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid()")
  [[ -n $victims ]] || fail "the instances hold no connection to cut"
  sql "$uri" "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
              WHERE pid IN ($victims)" >/dev/null
  for _ in $(seq 100); do
    [[ $(sql "$uri" "SELECT count(*) FROM pg_stat_activity WHERE pid IN ($victims)") == 0 ]] &&
      { echo "cut $(tr ',' '\n' <<<"$victims" | wc -l) connections"; return; }
    sleep 0.1
  done
  fail "connections $victims are still there 10 s after they were terminated"
}

start_instance 1
for _ in $(seq 100); do [[ $(queue 1 | field role) == leader ]] && break; sleep 0.1; done
[[ $(queue 1 | field role) == leader ]] || fail "the first instance does not lead: $(queue 1)"
start_instance 2

for b in 1 2; do
  j=$(book "$ann" 1 "ann$b" 30)
  owner[$j]=$ann pages_of[$j]=30
done
j=$(book "$bob" 2 bob1 30)
owner[$j]=$bob pages_of[$j]=30

wait_done 10
cut_connections
wait_done 30
cut_connections
# Uploads after the cuts, through each instance.
j=$(book "$ann" 2 ann3 10)
owner[$j]=$ann pages_of[$j]=10
j=$(book "$bob" 1 bob2 10)
owner[$j]=$bob pages_of[$j]=10
wait_done 55
cut_connections

for j in "${!owner[@]}"; do
  view=$(base=${url[1]} wait_ended "${owner[$j]}" "$j" 60)
  [[ $(field state <<<"$view") == done ]] || fail "job $j ended as: $view"
  result=$(curl -sS --max-time 10 "${url[2]}/v1/jobs/$j/result" -H "Authorization: Bearer ${owner[$j]}")
  name=$(field name <<<"$view")
  want=$(for k in $(seq "${pages_of[$j]}"); do printf '"output":"%s-p%s"\n' "$name" "$k"; done)
  got=$(grep -o '"output":"[^"]*"' <<<"$result")
  [[ $got == "$want" ]] || fail "the result of $name is not its pages once each, in order: $result"
done

for n in 1 2; do wait_ready "${url[$n]}" "after the cuts"; done
leader1=$(queue 1 | field leader)
leader2=$(queue 2 | field leader)
[[ -n $leader1 && $leader1 == "$leader2" ]] ||
  fail "the instances do not agree on a leader: $(queue 1) $(queue 2)"

stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
[[ $(count rejected_429 <<<"$stats") == 0 ]] || fail "the provider sent 429s: $stats"
(($(count max_in_flight_seen <<<"$stats") <= cap)) || fail "more than $cap calls at once: $stats"
echo "1 passed, 0 failed ($(count requests <<<"$stats") calls for 110 pages, leader $leader1)"
