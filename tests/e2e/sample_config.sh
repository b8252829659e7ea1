#!/usr/bin/env bash
# samples/fairlane.toml: every option of `fairlane serve` and `fairlane user add` is in it,
# and both commands accept it as it is; flags on the command line beat it (--db and
# --weight of user add, --listen, --db and --max-pages of serve).
#
#   sample_config.sh FAIRLANE SAMPLES_FAIRLANE_TOML
set -euo pipefail
fairlane=$(realpath "$1")  # the commands run in $work
toml=$(realpath "$2")
stand_in=/nonexistent
source "$(dirname "$0")/lib.sh"

for command in "serve" "user add"; do
  # shellcheck disable=SC2086
  for flag in $("$fairlane" $command --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    [[ $flag == --help ]] && continue
    grep -q "^${flag#--} = " "$toml" || fail "$toml has no '${flag#--}' ($command $flag)"
  done
done

# Flags on the command line beat the file. Both commands run in $work, where the file's
# db = "fairlane.db" would be: --db names another, and that one alone must be written.
key=$(cd "$work" && "$fairlane" user add alice --config "$toml" --db "$work/flags.db" --weight 3)
[[ $key == fl_* ]] || fail "user add with $toml printed: $key"
[[ -e $work/flags.db ]] || fail "user add did not write the --db database"
[[ ! -e $work/fairlane.db ]] || fail "user add wrote the file's db, not --db's"
# The file names FAIRLANE_ADMIN_KEY as the admin key's variable.
(cd "$work" && FAIRLANE_ADMIN_KEY=$admin_key exec "$fairlane" serve --config "$toml" \
  --listen 127.0.0.1:0 --db "$work/flags.db" --max-pages 2 >"$work/serve.out" 2>&1) &
serve_pid=$!
pids+=("$serve_pid")
port=$(port_of "$work/serve.out")
base=http://127.0.0.1:$port
[[ $port != 8080 ]] || fail "serve listens on the file's port 8080, not --listen's"
[[ $(curl -sS --max-time 10 "$base/healthz") == *ok* ]] || fail "serve with $toml does not answer"
[[ ! -e $work/fairlane.db ]] || fail "serve opened the file's db, not --db's"
# --max-pages 2 beats the file's 10000: three pages are refused naming 2.
refused=$(curl -sS --max-time 10 -w ' %{http_code}' -X POST "$base/v1/jobs" -H "Authorization: Bearer $key" \
  -H 'Content-Type: application/json' -d '{"name": "three", "pages": ["a", "b", "c"]}')
[[ $refused == *'at most 2 are taken'*' 413' ]] || fail "3 pages with --max-pages 2 answered: $refused"
# --weight 3 beat the file's 1: alice's lane, once she has one, has weight 3.
upload "$key" one "a page" >/dev/null
queue=$(curl -sS --max-time 10 "$base/v1/queue" -H "Authorization: Bearer $admin_key")
grep -q '"user":"alice","weight":3,' <<<"$queue" || fail "alice's lane is not of --weight 3: $queue"
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 40
[[ $exited == 0 ]] || fail "serve with $toml exited $exited: $(cat "$work/serve.out")"
echo "1 passed, 0 failed"
