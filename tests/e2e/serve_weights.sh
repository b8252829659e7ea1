#!/usr/bin/env bash
# End to end: fair-share weights. One user of weight 2 is added with `fairlane user add
# --weight 2`, one with POST /v1/users {"weight": 2}, one of weight 1 with neither, and
# each uploads a book of 40 pages of equal cost. Twice, on a database of its own each:
#
# 1. The admin's GET /v1/queue shows each lane's weight, and the door's estimate puts the
#    same pages further ahead for the weight-1 user than for a weight-2 user. Asked while
#    dispatch stands still: the stand-in answers the first calls 429 with Retry-After 10 s,
#    so fairlane pauses, and the three lanes keep the 40 pages each that the comparison
#    assumes however long the uploads take.
# 2. While the three are backlogged, each weight-2 user gets about twice the pages of the
#    weight-1 user: counted from the moment all three books are queued to the moment the
#    first weight-2 book ends (a build that ignored weights would give the three the same).
#    In plain fair order (--order fair), whose shares the weights are: the default order
#    lets a book whose promise is at risk take the turns of newer work, which on a loaded
#    machine moves the shares (a run under the address sanitizer saw 33 pages against 23).
#    Without the pause: promises it made late would be helped ahead of fair order (the
#    PromiseOrder), which is not what this measures.
#
#   serve_weights.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

# Two calls at once, 100 ms each: about 20 pages a second.
limits=(--rpm 60000 --tpm 6000000 --max-in-flight 2)
pages=()
for n in $(seq 40); do pages+=("page-$n"); done
declare -A key
serve_order=()  # --order, when the part asks for one

# three_books STAND_IN_ARGS...: the stand-in, the three users (on $serve_db), serve, and the
# three books uploaded at once; sets key[user] and $work/USER.id.
three_books() {
  start_stand_in "${limits[@]}" --latency-ms 100 "$@"
  key[cli2]=$("$fairlane" user add cli2 --weight 2 --db "$serve_db")
  key[one]=$(add_user one)
  start_serve "${limits[@]}" --max-tokens 100 --max-wait 600 "${serve_order[@]}"
  local added
  added=$(curl -sS --max-time 10 -X POST "$base/v1/users" -H "Authorization: Bearer $admin_key" \
    -H 'Content-Type: application/json' -d '{"name": "api2", "weight": 2}')
  key[api2]=$(field key <<<"$added")
  [[ ${key[api2]} == fl_* && $(count weight <<<"$added") == 2 ]] || fail "POST /v1/users answered: $added"
  local user
  for user in cli2 api2 one; do upload "${key[$user]}" "$user" "${pages[@]}" >"$work/$user.id" & done
  for _ in 1 2 3; do wait -n || fail "an upload failed"; done
}
stop_both() {
  kill -KILL "${pids[@]}"
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}

# 1. The queue and the door, dispatch paused.
serve_db=$work/positions.db
three_books --storm 0:1:10
queue=$(curl -sS --max-time 10 "$base/v1/queue" -H "Authorization: Bearer $admin_key")
for lane in cli2:2 api2:2 one:1; do
  grep -q "\"user\":\"${lane%:*}\",\"weight\":${lane#*:}," <<<"$queue" ||
    fail "the queue shows no lane of ${lane%:*} with weight ${lane#*:}: $queue"
done
# The door: 20 pages more, of the cost of those queued, wait behind half of the weight-1
# lane for a weight-2 user (and all of the other weight-2 lane and its own), and behind all
# of both weight-2 lanes for the weight-1 user (about 100 and 120 with 40 pages a lane);
# without weights both would be the same. Positions, not ETAs: an ETA also moves with the
# rate measured between the two asks.
per_page=$(grep -o '"user":"one","weight":1,"queued":[0-9]*,"queued_tokens":[0-9]*' <<<"$queue" |
  awk -F'[:,]' '{ print int($8 / $6) }')
position() {
  curl -sS --max-time 10 "$base/v1/estimate?pages=20&tokens_per_page=$per_page" \
    -H "Authorization: Bearer $1" | count position
}
position2=$(position "${key[cli2]}")
position1=$(position "${key[one]}")
paused=$(curl -sS --max-time 10 "$base/metrics" -H "Authorization: Bearer $admin_key" |
  grep '^fairlane_dispatch_paused ' | awk '{ print $2 }')
[[ $paused == 1 ]] || fail "dispatch was not paused by the stand-in's 429 when the positions were asked"
((position2 > 0 && 10 * position2 < 9 * position1)) ||
  fail "20 pages more would be at position $position2 for a weight-2 user, $position1 for the weight-1 user"
stop_both

# 2. The shares, on a database of their own, in plain fair order.
serve_db=$work/shares.db
serve_order=(--order fair)
three_books
done_of() { # USER: the pages done of USER's book
  curl -sS --max-time 10 "$base/v1/jobs/$(cat "$work/$1.id")" -H "Authorization: Bearer ${key[$1]}" |
    count "done"
}
declare -A start
for user in cli2 api2 one; do start[$user]=$(done_of "$user"); done
# Until the first weight-2 book ends, all three lanes have pages queued.
for _ in $(seq 1200); do
  cli2_done=$(done_of cli2)
  api2_done=$(done_of api2)
  ((cli2_done == 40 || api2_done == 40)) && break
  sleep 0.05
done
one_done=$(done_of one)
((cli2_done == 40 || api2_done == 40)) || fail "no weight-2 book ended within 60 s"
got_one=$((one_done - start[one]))
for user in cli2 api2; do
  [[ $user == cli2 ]] && now=$cli2_done || now=$api2_done
  got=$((now - start[$user]))
  # About twice: between 1.3 and 2.7 times, with two pages of slack. The counts are read by
  # one request after another while 20 pages a second are done, and runs on this machine
  # gave the weight-1 user 15 to 23 pages against 33 to 39: the ignored weights this is
  # to catch would give it as many as the others.
  ((10 * got >= 13 * got_one - 20 && 10 * got <= 27 * got_one + 20 && got >= 10)) ||
    fail "$user (weight 2) got $got pages while one (weight 1) got $got_one"
done
echo "1 passed, 0 failed (weight 2: $((cli2_done - start[cli2])) and $((api2_done - start[api2])) pages," \
  "weight 1: $got_one; positions $position2 and $position1)"
