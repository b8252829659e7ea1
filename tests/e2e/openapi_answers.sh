#!/usr/bin/env bash
# schema/openapi.yaml against the live service: `fairlane serve`, against the provider
# stand-in, answers with what the spec says, status and body. Each answer below is held by
# tools/openapi_check (python3 jsonschema) to the schema the spec gives for its operation and
# status: the job (an upload's 202, GET, the list, a cancel's 202, and once ended), the
# refusals (503 busy, 429 user_queue_full, 422 request_too_large), an accepted estimate, the
# queue (a user's and the admin's view), the result, errors (401, 403, 404), a new user, the
# probes. Then answers with one field wrong or missing must be refused, so that the schemas
# are strict enough to catch a wrong type. The service's own limit (6 requests a minute)
# makes a backlog; the stand-in never binds.
#
#   openapi_answers.sh FAIRLANE FAIRLANE_PROVIDER_SIM OPENAPI_YAML OPENAPI_CHECK
set -euo pipefail
fairlane=$1
stand_in=$2
spec=$3
check=$4
source "$(dirname "$0")/lib.sh"

start_stand_in --latency-ms 10 --rpm 60000 --tpm 6000000
alice=$(add_user alice)
bob=$(add_user bob)
carol=$(add_user carol)
start_serve --rpm 6 --tpm 6000 --max-tokens 100 --max-wait 30 --max-job-seconds 1000 \
  --max-queued-pages-per-user 50

checked=0
# answer METHOD TEMPLATE WANT URL KEY [CURL ARGS...]: asks URL (with KEY, if not empty), wants
# the status WANT, and holds the body to what the spec says for METHOD TEMPLATE WANT. The
# body stays in $work/body.
answer() {
  local method=$1 template=$2 want=$3 url=$4 key=$5
  shift 5
  local auth=()
  [[ -n $key ]] && auth=(-H "Authorization: Bearer $key")
  local code
  code=$(curl -sS --max-time 10 -o "$work/body" -w '%{http_code}' -X "$method" "$url" \
    "${auth[@]}" "$@")
  [[ $code == "$want" ]] || fail "$method $url answered $code, not $want: $(cat "$work/body")"
  "$check" "$spec" "$method" "$template" "$code" "$work/body" ||
    fail "$method $url: the $code answer is not what $spec says"
  checked=$((checked + 1))
}
# refused METHOD TEMPLATE STATUS WHAT PYTHON: the last body, changed by the Python statement
# PYTHON on its JSON `a`, must be refused by the check.
refused() {
  /usr/bin/python3 -c "import json, sys; a = json.load(sys.stdin); $5; print(json.dumps(a))" \
    <"$work/body" >"$work/changed"
  if "$check" "$spec" "$1" "$2" "$3" "$work/changed" 2>"$work/refusal"; then
    fail "the check accepts $1 $2 $3 with $4: $(cat "$work/changed")"
  fi
  checked=$((checked + 1))
}
json_pages() { # NAME COUNT [TEXT]: a JSON upload of COUNT pages
  local pages=() n
  for n in $(seq "$2"); do pages+=("\"${3:-page} $n\""); done
  echo "{\"name\":\"$1\",\"pages\":[$(IFS=,; echo "${pages[*]}")]}"
}
post_json=(-H 'Content-Type: application/json' -d)

# The job: accepted, then as it waits, in the list, its result so far.
answer POST /v1/jobs 202 "$base/v1/jobs" "$alice" "${post_json[@]}" "$(json_pages backlog 12)"
id=$(field id <"$work/body")
refused POST /v1/jobs 202 "position as a string" 'a["position"] = str(a["position"])'
refused POST /v1/jobs 202 "no state" 'del a["state"]'
refused POST /v1/jobs 202 "an unknown state" 'a["state"] = "waiting"'
refused POST /v1/jobs 202 "pages.done missing" 'del a["pages"]["done"]'
refused POST /v1/jobs 202 "created_at not a time" 'a["created_at"] = "yesterday"'
answer GET /v1/jobs/{id} 200 "$base/v1/jobs/$id" "$alice"
refused GET /v1/jobs/{id} 200 "eta_seconds as a string" 'a["eta_seconds"] = "soon"'
answer GET /v1/jobs 200 "$base/v1/jobs" "$alice"
refused GET /v1/jobs 200 "no next_cursor" 'del a["next_cursor"]'
answer GET /v1/jobs/{id}/result 200 "$base/v1/jobs/$id/result" "$alice"

# The door's refusals: alice's 30 more pages would wait a minute behind her backlog, carol's
# 51 pass her queue's limit of 50, bob's page of 30,000 bytes needs more tokens than the
# 6,000 a minute, and his 200 pages alone would take longer than --max-job-seconds.
answer POST /v1/jobs 503 "$base/v1/jobs" "$alice" "${post_json[@]}" "$(json_pages big 30)"
refused POST /v1/jobs 503 "no retry_after_seconds" 'del a["error"]["retry_after_seconds"]'
refused POST /v1/jobs 503 "position as a string" 'a["error"]["position"] = "far"'
answer POST /v1/jobs 429 "$base/v1/jobs" "$carol" "${post_json[@]}" "$(json_pages many 51)"
refused POST /v1/jobs 429 "no limit" 'del a["error"]["limit"]'
long=$(head -c 30000 /dev/zero | tr '\0' 'x')
answer POST /v1/jobs 422 "$base/v1/jobs" "$bob" "${post_json[@]}" "{\"name\":\"long\",\"pages\":[\"$long\"]}"
refused POST /v1/jobs 422 "tokens as a string" 'a["error"]["tokens"] = "many"'
answer POST /v1/jobs 422 "$base/v1/jobs" "$bob" "${post_json[@]}" "$(json_pages shelf 200)"
grep -q '"type":"job_too_large"' "$work/body" || fail "200 pages are not job_too_large: $(cat "$work/body")"
refused POST /v1/jobs 422 "job_too_large without its parts" 'del a["error"]["parts"]'

# An estimate that the door accepts: bob's lane is empty. (A refused estimate is a 200 with
# accepted false; the refusals' numbers are checked above, through the upload.)
answer GET /v1/estimate 200 "$base/v1/estimate?pages=1&tokens_per_page=120" "$bob"
grep -q '"accepted":true' "$work/body" || fail "bob's estimate did not accept: $(cat "$work/body")"
refused GET /v1/estimate 200 "position as a string" 'a["position"] = "1"'
refused GET /v1/estimate 200 "accepted false without a reason" 'a["accepted"] = False'
refused GET /v1/estimate 200 "a busy refusal without its numbers" \
  'a.update(accepted=False, reason="busy", message="wait"); del a["position"]'
# And one it refuses, as it does alice's 30 pages: 200, accepted false, busy's numbers.
answer GET /v1/estimate 200 "$base/v1/estimate?pages=30&tokens_per_page=120" "$alice"
grep -q '"accepted":false' "$work/body" || fail "alice's estimate accepted: $(cat "$work/body")"
grep -q '"reason":"busy"' "$work/body" || fail "alice's estimate is not busy: $(cat "$work/body")"
refused GET /v1/estimate 200 "busy without retry_after_seconds" 'del a["retry_after_seconds"]'

# The queue, as a user and as the admin (with every lane).
answer GET /v1/queue 200 "$base/v1/queue" "$alice"
refused GET /v1/queue 200 "mu as a string" 'a["mu"] = "fast"'
refused GET /v1/queue 200 "an unknown binding" 'a["binding"] = "money"'
answer GET /v1/queue 200 "$base/v1/queue" "$admin_key"
grep -q '"users":\[{' "$work/body" || fail "the admin's queue shows no lane: $(cat "$work/body")"
refused GET /v1/queue 200 "a lane's weight as a string" 'a["users"][0]["weight"] = "1"'

# Errors: no key, the admin's key on jobs, a job that is not there; a new user; the probes.
answer GET /v1/jobs 401 "$base/v1/jobs" ""
refused GET /v1/jobs 401 "no message" 'del a["error"]["message"]'
answer GET /v1/jobs 403 "$base/v1/jobs" "$admin_key"
answer GET /v1/jobs/{id} 404 "$base/v1/jobs/job_000000000000000000000000" "$alice"
refused GET /v1/jobs/{id} 404 "the error as a string" 'a["error"] = "not_found"'
answer POST /v1/users 201 "$base/v1/users" "$admin_key" "${post_json[@]}" '{"name":"dave","weight":2}'
answer GET /healthz 200 "$base/healthz" ""
answer GET /readyz 200 "$base/readyz" ""

# The cancel, then the job once it has ended: no position, no ETA (null, which the spec's
# nullable allows).
answer DELETE /v1/jobs/{id} 202 "$base/v1/jobs/$id" "$alice"
grep -q '"queued":0' "$work/body" || fail "the cancel's 202 shows pages queued: $(cat "$work/body")"
view=$(wait_ended "$alice" "$id" 30)
[[ $(field state <<<"$view") == cancelled ]] || fail "the cancelled job ended as: $view"
answer GET /v1/jobs/{id} 200 "$base/v1/jobs/$id" "$alice"
grep -q '"position":null' "$work/body" || fail "an ended job has a position: $(cat "$work/body")"
refused GET /v1/jobs/{id} 200 "an ended job's finished_at a number" 'a["finished_at"] = 1'
# Its cancel again: 200, the job unchanged; its events: 204, no body.
answer DELETE /v1/jobs/{id} 200 "$base/v1/jobs/$id" "$alice"
code=$(curl -sS --max-time 10 -o "$work/body" -w '%{http_code}' "$base/v1/jobs/$id/events" \
  -H "Authorization: Bearer $alice")
[[ $code == 204 && ! -s $work/body ]] || fail "an ended job's events answered $code: $(cat "$work/body")"

# The job store failing: another process holds the database's write lock for longer than
# serve's busy timeout (5 s), so an upload the door lets through is answered 503 busy by the
# store, without the door's numbers. The spec's 503 takes that too (Unavailable), but not a
# door's busy that lost them.
/usr/bin/python3 -c "import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute('BEGIN EXCLUSIVE')
print('locked', flush=True)
time.sleep(60)" "$work/fairlane.db" >"$work/locker.out" 2>&1 &
locker=$!
pids+=("$locker")
for _ in $(seq 100); do grep -q locked "$work/locker.out" && break; sleep 0.05; done
grep -q locked "$work/locker.out" || fail "the database could not be locked: $(cat "$work/locker.out")"
answer POST /v1/jobs 503 "$base/v1/jobs" "$bob" "${post_json[@]}" "$(json_pages late 1)" \
  --max-time 60
grep -q '"type":"busy"' "$work/body" || fail "the store's failure is not busy: $(cat "$work/body")"
grep -q '"position"' "$work/body" && fail "the store's busy has a place: $(cat "$work/body")"
refused POST /v1/jobs 503 "an unknown type" 'a["error"]["type"] = "sleeping"'
refused POST /v1/jobs 503 "a place as a string" 'a["error"]["position"] = "far"'
kill "$locker"

echo "1 passed, 0 failed ($checked answers checked)"
