#!/usr/bin/env bash
# schema/openapi.yaml against the real service: every path and method it describes is
# served (answered with something other than the router's "there is no METHOD PATH" 404).
# The provider is never called: no page is uploaded.
#
#   openapi_paths.sh FAIRLANE OPENAPI_YAML
set -euo pipefail
fairlane=$1
spec=$2
stand_in=/nonexistent
source "$(dirname "$0")/lib.sh"

stand_in_url=http://127.0.0.1:9
start_serve
alice=$(add_user alice)

checked=0
path=""
while IFS= read -r line; do
  if [[ $line =~ ^\ \ (/[^:]*):$ ]]; then
    path=${BASH_REMATCH[1]//\{id\}/job_000000000000000000000000}
  elif [[ -n $path && $line =~ ^\ \ \ \ (get|post|delete):$ ]]; then
    method=${BASH_REMATCH[1]^^}
    data=()
    [[ $method == POST ]] && data=(-H 'Content-Type: application/json' -d '{}')
    body=$(curl -sS --max-time 10 -X "$method" "$base$path" -H "Authorization: Bearer $alice" \
      "${data[@]}" || true)
    [[ -n $body ]] || fail "$method $path got no answer"
    [[ $body == *"there is no $method"* ]] && fail "$method $path is in $spec but not served: $body"
    checked=$((checked + 1))
  elif [[ $line =~ ^[a-z] ]]; then
    path=""
  fi
done <"$spec"
((checked >= 11)) || fail "only $checked operations found in $spec"
echo "1 passed, 0 failed ($checked operations)"
