#!/usr/bin/env bash
# A leader cut off from PostgreSQL without a word (docs/postgresql.md, "A server that goes
# silent"): a network partition, or the database's host powered off, sends no reset, so a
# statement sent just before waits for an answer that never comes. One `fairlane serve` leads
# on a PostgreSQL server of its own, listening on an address of a private network namespace
# (unshare -n); mid-book every packet to or from that address starts to vanish, as in a
# partition. While it is cut off:
#   - the instance notices within a bounded time and stops dispatching (its log says so);
#   - it answers HTTP (/healthz) throughout 20 s of tries to connect again.
# Then the server is reachable again, and:
#   - the instance leads again, and every page is done, exactly once and in order;
#   - /readyz says ready again;
#   - the stand-in answered no 429 and never saw more calls at once than the cap.
# Needs the right to make a network namespace with a veth pair (root, or CAP_SYS_ADMIN), ip
# and PostgreSQL's server; without them, skipped.
#
#   pg_partition.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
skip() {
  echo "SKIP: $*"
  exit 77
}
if [[ -z ${FAIRLANE_IN_NETNS:-} ]]; then
  # What it needs, each tried: network and PID namespaces with a veth pair (the right to make
  # them, iproute2's ip, a kernel with veth), and PostgreSQL's server.
  command -v ip >/dev/null || skip "no ip command (Debian's iproute2)"
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || skip "no PostgreSQL server (Debian's postgresql)"
  unshare -n -p -f ip link add fl0 type veth peer name fl1 2>/dev/null ||
    skip "cannot make network and PID namespaces with a veth pair in them (unshare -n -p; root or CAP_SYS_ADMIN, and veth)"
  # In a PID namespace too, whose processes (the server, detached by pg_ctl, among them) all
  # end when the script does, even killed by CTest's timeout.
  exec unshare -n -p -f --kill-child env FAIRLANE_IN_NETNS=1 bash "$0" "$@"
fi
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)

# In the namespace: loopback for HTTP and the stand-in, and the server's own address. The
# partition moves that address off this host behind a veth pair whose far end drops what it
# gets: the connections stay, and their packets (a connect's SYN too) vanish without a word.
db_host=10.77.0.1
echo 0 >/proc/sys/net/ipv4/ip_forward # the far end drops what is not its own (a new namespace's default)
ip link set lo up
ip addr add "$db_host/32" dev lo
ip link add fl0 type veth peer name fl1
ip link set fl0 up
ip link set fl1 up
far_end=$(ip -o link show fl0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
cut_off() {
  ip addr del "$db_host/32" dev lo
  ip route add "$db_host/32" dev fl1
  ip neigh replace "$db_host" lladdr "$far_end" dev fl1 nud permanent
}
reconnect() {
  ip route del "$db_host/32" dev fl1
  ip neigh del "$db_host" dev fl1
  ip addr add "$db_host/32" dev lo
}

stop_pg_server() {
  local status=$?
  set +e
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  "$root/tools/pg/server" stop "$work/pg" >/dev/null
  (exit "$status")
  cleanup
}
trap stop_pg_server EXIT
FAIRLANE_PG_HOST=$db_host "$root/tools/pg/server" start "$work/pg" >/dev/null
serve_db=$(cat "$work/pg/uri")

cap=2
start_stand_in --latency-ms 200 --rpm 60000 --tpm 6000000 --max-in-flight "$cap"
ann=$(add_user ann)
start_serve --instance node1 --lease-s 2 --rpm 60000 --tpm 6000000 --max-in-flight "$cap" \
  --max-tokens 100 --max-wait 600
log=$work/serve.1.out
queue() { curl -sS --max-time 30 "$base/v1/queue" -H "Authorization: Bearer $admin_key"; }
for _ in $(seq 100); do [[ $(queue | field role) == leader ]] && break; sleep 0.1; done
[[ $(queue | field role) == leader ]] || fail "the instance does not lead: $(queue)"

pages=40
names=()
for k in $(seq "$pages"); do names+=("p$k"); done
job=$(upload "$ann" book "${names[@]}")
done_before=$(pages_done "$ann" "$job" 5)
((done_before >= 5)) || fail "only $done_before pages done before the cut"

cut_off
cut_at=$(date +%s.%N)
# Bounded: without a limit of its own, a statement on the lost connection would wait for as
# long as the partition lasts.
stepped_down=""
for _ in $(seq 600); do
  grep -q 'stops dispatching' "$log" && { stepped_down=$(date +%s.%N); break; }
  sleep 0.1
done
[[ -n $stepped_down ]] ||
  fail "60 s after the cut the instance has not stopped dispatching: $(tail -5 "$log")"
echo "cut off, stopped within $(awk "BEGIN { printf \"%.1f\", $stepped_down - $cut_at }") s: $(grep -m1 'stops dispatching' "$log")"
# Cut off for 20 s more, while the instance tries to connect again: it answers HTTP all along.
# (How fast is printed, not judged: docs/performance.md.)
probes=$work/probes
: >"$probes"
until_at=$(awk "BEGIN { printf \"%.3f\", $(date +%s.%N) + 20 }")
while awk "BEGIN { exit !($(date +%s.%N) < $until_at) }"; do
  probe=$(curl -sS --max-time 30 -o /dev/null -w '%{http_code} %{time_total}' "$base/healthz" || true)
  [[ $probe == 200\ * ]] || fail "cut off from the database, the instance answered /healthz: '$probe'"
  echo "${probe#* }" >>"$probes"
  sleep 0.05
done
echo "/healthz while cut off: $(sort -n "$probes" | awk '{ t[NR] = $1 } END {
  printf "%d probes, median %.1f ms, max %.1f ms", NR, 1000 * t[int((NR + 1) / 2)], 1000 * t[NR] }')"

# What failed while cut off is said once, and then once a minute, not at every try.
unread=$(grep -c 'lanes could not be read' "$log" || true)
((unread <= 2)) || fail "cut off for 20 s, the log says $unread times the lanes could not be read"

reconnect
view=$(wait_ended "$ann" "$job" 90)
[[ $(field state <<<"$view") == done ]] || fail "the book ended as: $view"
result=$(curl -sS --max-time 10 "$base/v1/jobs/$job/result" -H "Authorization: Bearer $ann")
want=$(for k in $(seq "$pages"); do printf '"output":"p%s"\n' "$k"; done)
got=$(grep -o '"output":"[^"]*"' <<<"$result")
[[ $got == "$want" ]] || fail "the result is not its pages once each, in order: ${result:0:600}"
[[ $(queue | field role) == leader ]] || fail "the instance does not lead again: $(queue)"
wait_ready "$base" "after the partition"

stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
[[ $(count rejected_429 <<<"$stats") == 0 ]] || fail "the provider sent 429s: $stats"
(($(count max_in_flight_seen <<<"$stats") <= cap)) || fail "more than $cap calls at once: $stats"
echo "1 passed, 0 failed ($(count requests <<<"$stats") calls for $pages pages)"
