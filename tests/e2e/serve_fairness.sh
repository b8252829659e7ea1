#!/usr/bin/env bash
# Issue 6, end-to-end test 1: three users upload at once, one of them five books, the others
# one each. Every page ends done; the stand-in (with the service's own limits) refuses
# nothing and never sees more calls at once than the cap; each light user's book finishes
# before the heavy user's second book.
#
#   serve_fairness.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"

limits=(--rpm 6000 --tpm 600000 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 300
heavy=$(add_user heavy)
light1=$(add_user light1)
light2=$(add_user light2)
# The door must let all 140 pages in: until calls settle it assumes 2 s a call.
start_serve "${limits[@]}" --max-tokens 100 --max-wait 600

pages=()
for n in $(seq 20); do pages+=("page-$n"); done
# All seven uploads at once (books of 20 pages), each answer into its own file. The heavy
# user's first book may start before the others land (about 13 pages a second: 4 in flight,
# 300 ms a call); then the three lanes take turns, so the light books end when the heavy user
# has sent 20 pages more than that head start, and its second book needs 40. The test holds
# while the uploads land within about 1.5 s of each other. Takes about 11 s.
for b in 1 2 3 4 5; do upload "$heavy" "heavy-$b" "${pages[@]}" >"$work/heavy-$b.id" & done
upload "$light1" light1 "${pages[@]}" >"$work/light1.id" &
upload "$light2" light2 "${pages[@]}" >"$work/light2.id" &
for job in 1 2 3 4 5 6 7; do wait -n || fail "an upload failed"; done

finished() { # KEY NAME: when the job ended, after checking it is done with 20 pages
  local view
  view=$(wait_ended "$1" "$(cat "$work/$2.id")" 90)
  [[ $(field state <<<"$view") == done && $(count done <<<"$view") == 20 ]] ||
    fail "$2 ended as: $view"
  field finished_at <<<"$view"
}
heavy_ends=()
for b in 1 2 3 4 5; do heavy_ends+=("$(finished "$heavy" "heavy-$b")"); done
# The heavy user's books in the order they finished; the second of them is the bar.
second=$(printf '%s\n' "${heavy_ends[@]}" | sort | sed -n 2p)
for light in light1 light2; do
  key=$light1
  [[ $light == light2 ]] && key=$light2
  ended=$(finished "$key" "$light")
  [[ $ended < $second ]] || fail "$light's book ended at $ended, after heavy's second at $second"
done

stats=$(curl -sS "$stand_in_url/stats")
grep -q '"rejected_429":0' <<<"$stats" || fail "the stand-in refused calls: $stats"
grep -q '"rejected_503":0' <<<"$stats" || fail "the stand-in refused calls: $stats"
seen=$(count max_in_flight_seen <<<"$stats")
[[ -n $seen ]] && ((seen <= 4)) || fail "the stand-in saw $seen calls at once, over 4: $stats"
echo "1 passed, 0 failed"
