#!/usr/bin/env bash
# A curl transcript of every endpoint of the authoring API, success and each
# refusal, against the `authoring` example, with the manifest file before and after.
#
# Run from the repository: crates/toolgraft-http/examples/transcript.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."

cargo build -q -p toolgraft-http --example authoring
dir=$(mktemp -d "${TMPDIR:-/tmp}/toolgraft-transcript.XXXXXX")
manifest="$dir/combos.json"
cat > "$manifest" <<'JSON'
{
  "tools": {
    "weather": [
      ["trace", "cache"],
      [{ "name": "batch", "config": { "max_items": 10 } }, "pool"]
    ],
    "translate": [["proxy", "pool"]]
  }
}
JSON
export TOOLGRAFT_TOKEN=transcript-token-0123456789
target=${CARGO_TARGET_DIR:-target}
"$target/debug/examples/authoring" --manifest "$manifest" > "$dir/url" 2> "$dir/log" &
server=$!
trap 'kill $server 2> /dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -s "$dir/url" ] && break; sleep 0.1; done
url=$(head -n 1 "$dir/url")
url=${url%/}

echo "== manifest before ($manifest)"
cat "$manifest"

call() {
    local method=$1 path=$2 body=${3:-}
    local shown=""
    if [ -n "$body" ]; then shown=" -d '$body'"; fi
    echo
    echo "\$ curl -X $method $path$shown"
    local args=(-s -X "$method" -H "Authorization: Bearer $TOOLGRAFT_TOKEN" -w '\nHTTP %{http_code}\n')
    if [ -n "$body" ]; then args+=(-H 'Content-Type: application/json' -d "$body"); fi
    curl "${args[@]}" "$url$path"
}

call GET /tools/weather/extensions
echo; echo '$ curl -X GET /tools | (first two bound names)'
curl -s -H "Authorization: Bearer $TOOLGRAFT_TOKEN" "$url/tools" |
    python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)[:2], indent=1)[:1500])'
echo; echo '$ curl -X GET /tools   (no token)'
curl -s -w '\nHTTP %{http_code}\n' "$url/tools"
echo; echo '$ curl -X GET /tools   (a page on evil.example, its name re-pointed at 127.0.0.1)'
curl -s -w '\nHTTP %{http_code}\n' -H "Authorization: Bearer $TOOLGRAFT_TOKEN" \
    -H 'Host: evil.example' -H 'Origin: http://evil.example' "$url/tools"
call POST /tools/weather/extensions/combos '{"add": [["proxy", "pool"]]}'
call POST /tools/weather/extensions/combos '{"add": [["pool", "proxy"]]}'
call POST /tools/weather/extensions/combos '{"add": [["trace"], ["pool", "pool"]]}'
call POST /tools/weather/extensions/combos '{"add": [["trace", "gzip"]]}'
call POST /tools/weather/extensions/combos '{"add": [[{"name": "trace", "config": {"level": 1}}]]}'
call POST /tools/weather/extensions/combos '{"add": [["proxy", "pool"]]}'
call POST /tools/weather/extensions/combos '{"remove": [["cache"]]}'
call POST /tools/weather_trace/extensions/combos '{"add": [["cache"]]}'
call POST /tools/ghost/extensions/combos '{"add": [["trace"]]}'
call POST /tools/weather/extensions/combos '{"add": [[]]}'
call POST /tools/weather/extensions/combos '{"add": [["trace"]], "drop": 1}'
call POST /tools/weather/extensions/combos '{'
call POST /tools/weather/extensions/combos '{"remove": [["trace", "cache"]], "add": [["trace"]]}'
call PUT /tools/translate/extensions '{"combos": [[{"name": "cache", "config": {"default_ttl_secs": 30}}], ["proxy", "pool"]]}'
call PUT /tools/translate/extensions '{"combos": [["pool", "pool"]]}'
call DELETE /tools/translate/extensions
call DELETE /tools/ghost/extensions

echo
echo "== manifest after"
cat "$manifest"
