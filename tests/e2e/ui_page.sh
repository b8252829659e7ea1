#!/usr/bin/env bash
# The /ui page in a real browser (Debian's chromium, headless): opened on a running job it
# shows the job's name, state and pages done from the stream's events (the body's
# data-events counts them); opened again once the job has ended it shows every page done
# and marks the body data-ended="done". (Headless chromium dumps the DOM about a second
# after the first event, so one load shows one or two events; that the page follows a
# stream event by event is what the two loads at two moments show together.) A screenshot of the last view is
# saved as a test artifact. The page itself needs the key (HTTP Basic, given in the address).
#
#   ui_page.sh FAIRLANE FAIRLANE_PROVIDER_SIM SAMPLE_BOOK SCREENSHOT
set -euo pipefail
fairlane=$1
stand_in=$2
book=$3
screenshot=$(realpath -m "$4")  # chromium runs in $work
source "$(dirname "$0")/lib.sh"

browser=$(command -v chromium || true)
[[ -n $browser ]] || fail "chromium is not installed: run tools/bootstrap tools/packages/test.txt"

# One call at a time, 0.4 s each: the 25-page book takes about ten seconds.
start_stand_in --latency-ms 400 --rpm 6000 --tpm 6000000 --max-in-flight 1
alice=$(add_user alice)
start_serve --max-in-flight 1 --max-tokens 100 --heartbeat 1
answer=$(curl -sS --max-time 30 -X POST "$base/v1/jobs?name=letters-home.pdf" \
  -H "Authorization: Bearer $alice" -H 'Content-Type: application/pdf' --data-binary "@$book")
id=$(field id <<<"$answer")
[[ $id == job_* ]] || fail "the upload answered: $answer"
total=$(count total <<<"$answer")

# The page itself wants a key (HTTP Basic, the key as the password): without one the
# browser is shown the 401's JSON and no page.
nokey=$(timeout 20 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
  --user-data-dir="$work/profile-nokey" --virtual-time-budget=3000 --dump-dom "$base/ui" \
  2>>"$work/browser.err") || fail "chromium failed: $(tail -5 "$work/browser.err")"
grep -q 'id="view"' <<<"$nokey" && fail "the page opened without a key"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/ui") == 401 ]] || fail "/ui answers without a key"

# show [chromium args...]: the page's DOM after it settled, on stdout. The key goes in the
# address as the user's credentials (a top-level navigation may carry them; the browser
# sends them as HTTP Basic) and after # for the page's script. Headless chromium
# dumps the DOM when its virtual-time budget runs out, which can come before the body of a
# stream that is still arriving; so the checks below load the page again (a few times,
# bounded) until it shows what they wait for.
show() {
  timeout 20 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --user-data-dir="$work/profile" --virtual-time-budget=10000 "$@" \
    "http://alice:$alice@${base#http://}/ui#job=$id&key=$alice" 2>>"$work/browser.err"
}
text_of() { grep -o "<$1 id=\"$2\">[^<]*" | head -1 | sed 's/.*>//'; }

events_of() { grep -o 'data-events="[0-9]*"' | head -1 | grep -o '[0-9]*'; }
for _ in 1 2 3 4 5; do
  running=$(show --dump-dom) || fail "chromium failed: $(tail -5 "$work/browser.err")"
  [[ $(text_of h2 name <<<"$running") == letters-home.pdf && $(events_of <<<"$running") -ge 1 ]] && break
done
[[ $(text_of h2 name <<<"$running") == letters-home.pdf ]] ||
  fail "the page does not name the job: $(grep -o '<section.*' <<<"$running" | head -c 600)"
state=$(text_of dd state <<<"$running")
[[ $state == queued || $state == running || $state == done ]] || fail "the page shows state '$state'"
[[ $(events_of <<<"$running") -ge 1 ]] || fail "the page counted no event"
grep -q "<dd id=\"pages\">[0-9]* of $total done" <<<"$running" ||
  fail "the page shows no pages done of $total: $(text_of dd pages <<<"$running")"

wait_ended "$alice" "$id" 60 >/dev/null
for _ in 1 2 3 4 5; do
  ended=$(show --dump-dom)
  grep -q 'data-ended="done"' <<<"$ended" && break
done
grep -q 'data-ended="done"' <<<"$ended" || fail "the page did not see the job end: $(text_of p status <<<"$ended")"
[[ $(text_of dd pages <<<"$ended") == "$total of $total done" ]] ||
  fail "the page shows '$(text_of dd pages <<<"$ended")' at the end"
[[ $(text_of dd state <<<"$ended") == done ]] || fail "the page's state is not done"

# The last run's picture goes first, so that only this run's can pass.
mkdir -p "$(dirname "$screenshot")"
rm -f "$screenshot"
(cd "$work" && show --screenshot="$screenshot" --window-size=800,600 >/dev/null) ||
  fail "chromium failed to take the screenshot: $(tail -5 "$work/browser.err")"
[[ -s $screenshot ]] || fail "no screenshot at $screenshot"
[[ $(head -c 8 "$screenshot" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
  fail "the screenshot at $screenshot is not a PNG: $(head -c 16 "$screenshot" | od -c | head -2)"
echo "1 passed, 0 failed (screenshot: $screenshot)"
