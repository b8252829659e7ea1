#!/usr/bin/env bash
# End to end: uploads sent together are promised together (docs/api.md, "Promises";
# docs/architecture.md, "Uploads that come together").
#
# fairlane serve and the stand-in at 4 calls in flight of 200 ms: 20 pages a second, the
# requests and tokens far from binding. A warm-up book of 60 pages teaches the estimator
# what a call takes. Then six users send a book of 20 pages each at once, each body sent
# slowly (curl --limit-rate, about 0.6 s a body) so that all six are on their way together.
# Fair order shares the provider among them and they end together, about 6 s later. Were
# each promised as the door answers it, the first accepted would be told about a second;
# with the promise window (the default 0.25 s) each 202 counts the books that came with it,
# so none ends later than its promise by more than max(1 s, 25%). Every page ends done, and
# the stand-in refused nothing over its limits.
#
#   serve_together.sh FAIRLANE FAIRLANE_PROVIDER_SIM [SERVE_ARGS...]
set -euo pipefail
fairlane=$1
stand_in=$2
shift 2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

books=6
per_book=20
users=()
for u in $(seq "$books"); do users+=("$(add_user "user$u")"); done
warm=$(add_user warm)

limits=(--rpm 6000 --tpm 600000 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 200 --output-tokens 20
start_serve "${limits[@]}" --max-tokens 20 --max-wait 600 "$@"
warm_id=$(upload_book "$warm" warm w 60)
wait_ended "$warm" "$warm_id" 20 >/dev/null

# Six uploads at once, from one curl (--parallel, every transfer started together), each
# body of about 60 KB (its JSON padded with spaces) sent at 100 KB a second.
padding=$(head -c 60000 /dev/zero | tr '\0' ' ')
together=(-sS --parallel --parallel-immediate --parallel-max "$books")
for u in $(seq "$books"); do
  pages=()
  for i in $(seq "$per_book"); do pages+=("\"b$u-$i\""); done
  echo "{\"name\":\"book$u\",$padding\"pages\":[$(IFS=,; echo "${pages[*]}")]}" >"$work/body.$u"
  ((u > 1)) && together+=(--next)
  together+=(--max-time 30 --limit-rate 100K -X POST "$base/v1/jobs" -o "$work/answer.$u"
    -H "Authorization: Bearer ${users[$((u - 1))]}" -H 'Content-Type: application/json'
    --data-binary "@$work/body.$u")
done
curl "${together[@]}" 2>"$work/answers.err" || fail "the uploads failed: $(cat "$work/answers.err")"
ids=()
for u in $(seq "$books"); do
  id=$(field id <"$work/answer.$u")
  [[ $id == job_* ]] || fail "book $u was answered: $(cat "$work/answer.$u")"
  ids+=("$id")
done

: >"$work/views"
for u in $(seq "$books"); do
  wait_ended "${users[$((u - 1))]}" "${ids[$((u - 1))]}" 60 >>"$work/views"
  echo >>"$work/views"
  check_pages "${users[$((u - 1))]}" "${ids[$((u - 1))]}" "b$u" "$per_book"
done
check_limits 4

# Each book's time against its promise, in seconds from its acceptance; and the 202 said
# what the job keeps.
python3 - "$work" "$books" <<'PY'
import datetime, json, sys

work, books = sys.argv[1], int(sys.argv[2])

def at(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

late = []
for line in open(f"{work}/views"):
    if not line.strip():
        continue
    job = json.loads(line)
    n = int(job["name"].removeprefix("book"))
    answer = json.load(open(f"{work}/answer.{n}"))
    if answer["promised_eta_at"] != job["promised_eta_at"]:
        sys.exit(f"FAIL: book {n}'s 202 promised {answer['promised_eta_at']}, "
                 f"the job keeps {job['promised_eta_at']}")
    promised = at(job["promised_eta_at"]) - at(job["created_at"])
    took = at(job["finished_at"]) - at(job["created_at"])
    print(f"book {n}: promised {promised:.2f} s, took {took:.2f} s")
    if took > promised + max(1.0, 0.25 * promised):
        late.append(f"book {n} promised {promised:.2f} s, took {took:.2f} s")
if late:
    sys.exit("FAIL: books sent together ended later than promised: " + "; ".join(late))
PY
echo "ok: $books books sent together, each ended within its promise"
