#!/usr/bin/env bash
# tools/sim/futures on a small Poisson stream, four futures a book: it runs, and its
# frontier has the shape that makes it a bound. Along the sweep of lambda both shares fall
# (for each book, a larger lambda never picks a promise with more futures late, nor more
# within +-15%), and at lambda 0, where each book's promise is the one that puts most of
# its futures within +-15%, no fewer are within than with the door's own promises.
#
#   futures.sh FAIRLANE_SIM
set -euo pipefail
sim=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/stream.json" <<'JSON'
{
  "name": "futures test", "seed": 4,
  "provider": {"rpm": 1500, "tpm": 300000, "max_in_flight": 200,
               "latency_s": {"kind": "lognormal", "median": 2.0, "p90": 3.5},
               "output_tokens": {"kind": "fixed", "value": 240}},
  "fairlane": {"rpm": 1500, "tpm": 300000, "max_in_flight": 200, "max_tokens": 240,
               "max_wait_s": 120},
  "poisson": [{"users": 20, "rate_per_s": 0.15, "from_s": 0, "until_s": 120, "pages": 30,
               "input_tokens": 560}]
}
JSON
out=$("$root/tools/sim/futures" "$work/stream.json" --seed 2 --futures 4 --sim "$sim" --jobs 2)
echo "$out"
grep -q "4 futures each" <<<"$out" || { echo "FAIL: no header"; exit 1; }
door_within=$(sed -n 's/.*futures: .*, \([0-9.]*\)% within.*/\1/p' <<<"$out")
[[ -n $door_within ]] || { echo "FAIL: no figures for the door's promises"; exit 1; }
awk -v door="$door_within" -F'|' '
  /^\| [0-9.]+ \|/ {
    within = $3 + 0; late = $4 + 0; rows++
    if (rows == 1 && within < door) { print "FAIL: lambda 0 puts fewer within than the door"; bad = 1 }
    if (rows > 1 && (within > last_within || late > last_late)) {
      print "FAIL: the sweep rises at lambda " $2; bad = 1
    }
    last_within = within; last_late = late
  }
  END {
    if (rows < 5) { print "FAIL: " rows " rows in the frontier"; bad = 1 }
    exit bad
  }' <<<"$out"
echo "futures: the frontier falls along lambda and dominates the door's promises"
