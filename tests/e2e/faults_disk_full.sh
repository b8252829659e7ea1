#!/usr/bin/env bash
# Fault matrix: the database on a tiny tmpfs that fills up while a book is being
# dispatched. Uploads are refused with 507 disk_full naming the problem and the caller's
# remedy, not where the database is (the serve log says that, and the operator's remedy),
# /readyz says not ready, the dispatcher's results wait in memory and are written (once)
# when space returns; then /readyz is ready again and uploads are accepted, without a
# restart. Every accepted page ends done exactly once, and the provider was asked once a
# page. GET /v1/jobs/{id} answers within a second throughout.
#
# It runs in a mount namespace of its own (unshare), so the tmpfs vanishes with it.
#
#   faults_disk_full.sh FAIRLANE FAIRLANE_PROVIDER_SIM
set -euo pipefail
# Without root, a user namespace makes this user root in it. Where neither can be had (no
# root, user namespaces not allowed), the test says SKIPPED and exits 77, which CTest shows
# as skipped (SKIP_RETURN_CODE), rather than failing or passing unseen.
if [[ -z ${FAIRLANE_IN_NAMESPACE:-} ]]; then
  namespace=(unshare --mount --map-root-user)
  ((EUID == 0)) && namespace=(unshare --mount --propagation private)
  if ! "${namespace[@]}" true 2>/dev/null; then
    echo "SKIPPED: mounting a tmpfs needs root or a user namespace, and '${namespace[*]}' failed"
    exit 77
  fi
  exec env FAIRLANE_IN_NAMESPACE=1 "${namespace[@]}" bash "$0" "$@"
fi
fairlane=$1
stand_in=$2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"

disk=$work/disk
mkdir "$disk"
mount -t tmpfs -o size=4m tmpfs "$disk" || fail "cannot mount a tmpfs on $disk"
cleanup_disk() {
  umount -l "$disk" 2>/dev/null || true
  cleanup
}
trap cleanup_disk EXIT
db=$disk/fairlane.db

limits=(--rpm 60000 --tpm 6000000 --max-in-flight 4)
start_stand_in "${limits[@]}" --latency-ms 300
alice=$("$fairlane" user add alice --db "$db")
bob=$("$fairlane" user add bob --db "$db")
FAIRLANE_ADMIN_KEY=admin-secret "$fairlane" serve --listen 127.0.0.1:0 --db "$db" \
  --provider-url "$stand_in_url" "${limits[@]}" --max-tokens 50 --max-wait 3600 >"$work/serve.out" 2>&1 &
serve_pid=$!
pids+=("$serve_pid")
base="http://127.0.0.1:$(port_of "$work/serve.out")"

# Pages of 2 KB, whose results (their text, echoed) need space as they are written.
long=$(printf 'a%.0s' $(seq 2000))
a=$(upload_book "$alice" a "$long" 40)
start_poller "$alice" "$a"

# Fill the disk while alice's book is being dispatched (40 pages, 4 at a time, 0.3 s each).
dd if=/dev/zero of="$disk/ballast" bs=64k status=none 2>/dev/null || true
df -k "$disk" | tail -1 | awk '$4 == 0 { ok = 1 } END { exit !ok }' || fail "the tmpfs is not full: $(df -k "$disk")"

# 100 pages of 2 KB cannot be written.
big=$(printf 'b%.0s' $(seq 2000))
pages=$(for i in $(seq 100); do printf '"%s-%d",' "$big" "$i"; done)
echo "{\"name\":\"big\",\"pages\":[${pages%,}]}" >"$work/big.json"
answer=$(curl -sS --max-time 10 -w '\n%{http_code}' -X POST "$base/v1/jobs" -H "Authorization: Bearer $bob" \
  -H 'Content-Type: application/json' --data-binary @"$work/big.json")
[[ $(tail -1 <<<"$answer") == 507 ]] || fail "an upload to a full disk answered: $answer"
[[ $(field type <<<"$answer") == disk_full ]] || fail "the refusal is not disk_full: $answer"
grep -q "no room left" <<<"$answer" && grep -q "Retry later" <<<"$answer" ||
  fail "the refusal does not name the problem and the remedy: $answer"
grep -qF "$disk" <<<"$answer" && fail "the refusal tells the caller where the database is: $answer"
grep -F "answered 507" "$work/serve.out" | grep -qF "$db" ||
  fail "the serve log does not say where the disk is full: $(cat "$work/serve.out")"
ready=$(curl -sS --max-time 10 -w '\n%{http_code}' "$base/readyz")
[[ $(tail -1 <<<"$ready") == 503 && $(field type <<<"$ready") == not_ready ]] ||
  fail "/readyz while the disk is full answered: $ready"
grep -q "full" <<<"$ready" || fail "/readyz does not say the disk is full: $ready"
# Keep it full until the dispatcher's own writes (dispatches, results) have failed too:
# it says so on stderr at each failed commit.
for _ in $(seq 200); do
  grep -q "recording page transitions.*is full" "$work/serve.out" && break
  sleep 0.05
done
grep -q "recording page transitions.*is full" "$work/serve.out" ||
  fail "the dispatcher never met the full disk: $(cat "$work/serve.out")"
ready=$(curl -sS --max-time 10 -w '\n%{http_code}' "$base/readyz")
[[ $(tail -1 <<<"$ready") == 503 ]] || fail "/readyz while results cannot be written answered: $ready"

# Space returns: ready again within the dispatcher's longest retry delay (10 s), no restart.
rm -f "$disk/ballast"
for _ in $(seq 300); do
  [[ $(curl -sS --max-time 1 -o /dev/null -w '%{http_code}' "$base/readyz") == 200 ]] && break
  sleep 0.05
done
ready=$(curl -sS --max-time 10 -w '\n%{http_code}' "$base/readyz")
[[ $(tail -1 <<<"$ready") == 200 ]] || fail "/readyz after space returned answered: $ready"
b=$(upload_book "$bob" b b 20)

check_pages "$alice" "$a" "$long" 40
((done_pages == 40)) || fail "alice's book ended with $failed_pages pages failed"
check_pages "$bob" "$b" b 20
((done_pages == 20)) || fail "bob's book ended with $failed_pages pages failed"
stop_poller
check_limits 4
ok=$(count ok <<<"$stats")
((ok == 60)) || fail "the stand-in answered $ok calls for 60 pages: a result was lost or a page sent twice: $stats"
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 30
[[ $exited == 0 ]] || fail "serve exited $exited after the disk recovered: $(cat "$work/serve.out")"
failed_commits=$(grep -c "is full" "$work/serve.out" || true)
echo "1 passed, 0 failed (60 pages done once each across a full disk, $failed_commits failed" \
  "commits retried, $polls polls answered, the slowest in $slowest_ms ms)"
