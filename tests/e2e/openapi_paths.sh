#!/usr/bin/env bash
# schema/openapi.yaml against the real service: every path and method it describes is
# served: answered with something other than the router's "there is no METHOD PATH" 404,
# never with a 5xx, and with a status the spec lists for it and a body its schema accepts
# (tools/openapi_check). The provider is never called: no page is uploaded.
#
#   openapi_paths.sh FAIRLANE OPENAPI_YAML OPENAPI_CHECK
set -euo pipefail
fairlane=$1
spec=$2
check=$3
stand_in=/nonexistent
source "$(dirname "$0")/lib.sh"

stand_in_url=http://127.0.0.1:9
start_serve
alice=$(add_user alice)

checked=0
path=""
while IFS= read -r line; do
  if [[ $line =~ ^\ \ (/[^:]*):$ ]]; then
    template=${BASH_REMATCH[1]}
    path=${template//\{id\}/job_000000000000000000000000}
  elif [[ -n $path && $line =~ ^\ \ \ \ (get|post|delete):$ ]]; then
    method=${BASH_REMATCH[1]^^}
    data=()
    [[ $method == POST ]] && data=(-H 'Content-Type: application/json' -d '{}')
    rm -f "$work/body"
    code=$(curl -sS --max-time 10 -o "$work/body" -w '%{http_code}' -X "$method" "$base$path" \
      -H "Authorization: Bearer $alice" "${data[@]}" || true)
    body=$(cat "$work/body" 2>/dev/null || true)
    [[ $code =~ ^[1-5][0-9][0-9]$ ]] || fail "$method $path got no answer"
    [[ $body == *"there is no $method"* ]] && fail "$method $path is in $spec but not served: $body"
    # A 5xx is the service failing, not serving: nothing here reaches the provider or a disk
    # that could be full.
    ((code < 500)) || fail "$method $path answered $code: $body"
    "$check" "$spec" "$method" "$template" "$code" "$work/body" ||
      fail "$method $path: the $code answer is not what $spec says"
    checked=$((checked + 1))
  elif [[ $line =~ ^[a-z] ]]; then
    path=""
  fi
done <"$spec"
((checked >= 11)) || fail "only $checked operations found in $spec"
echo "1 passed, 0 failed ($checked operations)"
