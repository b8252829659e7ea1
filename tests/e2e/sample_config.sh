#!/usr/bin/env bash
# samples/fairlane.toml: every option of `fairlane serve` and `fairlane user add` is in it,
# and both commands accept it as it is (flags on the command line still win).
#
#   sample_config.sh FAIRLANE SAMPLES_FAIRLANE_TOML
set -euo pipefail
fairlane=$1
toml=$2
stand_in=/nonexistent
source "$(dirname "$0")/lib.sh"

for command in "serve" "user add"; do
  # shellcheck disable=SC2086
  for flag in $("$fairlane" $command --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    [[ $flag == --help ]] && continue
    grep -q "^${flag#--} = " "$toml" || fail "$toml has no '${flag#--}' ($command $flag)"
  done
done

key=$("$fairlane" user add alice --config "$toml" --db "$work/fairlane.db")
[[ $key == fl_* ]] || fail "user add with $toml printed: $key"
(cd "$work" && exec "$fairlane" serve --config "$toml" --listen 127.0.0.1:0 --db "$work/fairlane.db" \
  >"$work/serve.out" 2>&1) &
serve_pid=$!
pids+=("$serve_pid")
port=$(port_of "$work/serve.out")
[[ $(curl -sS --max-time 10 "http://127.0.0.1:$port/healthz") == *ok* ]] || fail "serve with $toml does not answer"
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 40
[[ $exited == 0 ]] || fail "serve with $toml exited $exited: $(cat "$work/serve.out")"
echo "1 passed, 0 failed"
