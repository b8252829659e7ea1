# Shared by the fault-matrix tests (tests/e2e/faults_*.sh), sourced after lib.sh: a poller
# that holds the position endpoint to answering within a second throughout a run, and the
# checks every fault ends with.

# start_poller KEY ID...: asks GET /v1/jobs/ID (each id in turn) every 100 ms, or at once
# when the last ask took longer, each with a 1 s limit, until stop_poller. An answer other
# than 200 within the second is a miss.
start_poller() {
  local key=$1
  shift
  local ids=("$@")
  : >"$work/poll.misses"
  : >"$work/poll.count"
  rm -f "$work/poll.stop"
  (
    n=0
    start_us=${EPOCHREALTIME/./}
    while [[ ! -e $work/poll.stop ]]; do
      id=${ids[$((n % ${#ids[@]}))]}
      answer=$(curl -sS -o /dev/null -w '%{http_code} %{time_total}' --max-time 1 \
        "$base/v1/jobs/$id" -H "Authorization: Bearer $key" 2>/dev/null) || true
      [[ $answer == 200\ * ]] || echo "$(date -u +%T.%N) $id answered ${answer:-nothing}" >>"$work/poll.misses"
      echo "${answer#* }" >>"$work/poll.count"
      n=$((n + 1))
      wait_us=$((start_us + n * 100000 - ${EPOCHREALTIME/./}))
      ((wait_us > 0)) && sleep "$(printf '0.%06d' "$wait_us")"
    done
  ) &
  poller=$!
  pids+=("$poller")
}

# stop_poller: ends the poller and fails if any poll missed; sets `polls` and `slowest_ms`
# (the slowest answer).
stop_poller() {
  touch "$work/poll.stop"
  wait_exit "$poller" 10
  polls=$(wc -l <"$work/poll.count")
  slowest_ms=$(sort -g "$work/poll.count" | tail -1 | awk '{ printf "%d", $1 * 1000 }')
  local misses
  misses=$(wc -l <"$work/poll.misses")
  ((polls > 0)) || fail "the position endpoint was never polled"
  ((misses == 0)) ||
    fail "the position endpoint missed $misses of $polls polls (1 s each): $(head -5 "$work/poll.misses")"
}

# check_pages KEY ID PREFIX N: the job has ended and each of its N pages (texts PREFIX-1 ..
# PREFIX-N) is done with its own text or failed with a reason, once. Sets done_pages and
# failed_pages.
check_pages() {
  local key=$1 id=$2 prefix=$3 n=$4
  local view result
  view=$(wait_ended "$key" "$id" 60)
  result=$(curl -sS --max-time 10 "$base/v1/jobs/$id/result" -H "Authorization: Bearer $key")
  done_pages=0
  failed_pages=0
  for i in $(seq "$n"); do
    if grep -q "\"page\":$i,\"state\":\"done\",\"output\":\"$prefix-$i\"" <<<"$result"; then
      done_pages=$((done_pages + 1))
    elif grep -q "\"page\":$i,\"state\":\"failed\",\"error\":\"[^\"]" <<<"$result"; then
      failed_pages=$((failed_pages + 1))
    else
      fail "page $i of $id is neither done with its text nor failed with a reason: $result"
    fi
  done
  [[ $(grep -o '"page":' <<<"$result" | wc -l) == "$n" ]] || fail "$id lists not $n pages: $result"
  [[ $(count done <<<"$view") == "$done_pages" && $(count failed <<<"$view") == "$failed_pages" ]] ||
    fail "the job's counts disagree with its pages ($done_pages done, $failed_pages failed): $view"
}

# check_limits MAX_IN_FLIGHT: the stand-in never refused a call for exceeding its RPM, TPM
# or in-flight cap (injected faults are counted apart), and never held more calls at once
# than MAX_IN_FLIGHT. Sets `stats`.
check_limits() {
  stats=$(curl -sS --max-time 10 "$stand_in_url/stats")
  [[ $(count rejected_429 <<<"$stats") == 0 ]] || fail "the stand-in refused calls over its RPM/TPM: $stats"
  [[ $(count rejected_503 <<<"$stats") == 0 ]] || fail "the stand-in refused calls over its cap: $stats"
  (($(count max_in_flight_seen <<<"$stats") <= $1)) || fail "more than $1 calls in flight: $stats"
}

# upload_book KEY NAME PREFIX N: uploads N pages PREFIX-1 .. PREFIX-N; prints the job id.
upload_book() {
  local pages=()
  for i in $(seq "$4"); do pages+=("$3-$i"); done
  upload "$1" "$2" "${pages[@]}"
}

# run_books MAX_IN_FLIGHT "KEY PREFIX N"...: the common run of a fault test. Uploads each
# book (named and paged by PREFIX), polls the first one's position throughout, checks every
# book's pages and then the stand-in's limits. Sets total_done, plus what stop_poller and
# check_limits set.
run_books() {
  local cap=$1 book key prefix n ids=()
  shift
  for book in "$@"; do
    read -r key prefix n <<<"$book"
    ids+=("$(upload_book "$key" "$prefix" "$prefix" "$n")")
  done
  read -r key _ <<<"$1"
  start_poller "$key" "${ids[0]}"
  total_done=0
  local which=0  # (check_pages counts with a global i)
  for book in "$@"; do
    read -r key prefix n <<<"$book"
    check_pages "$key" "${ids[$which]}" "$prefix" "$n"
    total_done=$((total_done + done_pages))
    which=$((which + 1))
  done
  stop_poller
  check_limits "$cap"
}
