#!/usr/bin/env bash
# Regenerates *.capture: the exact bytes each library writes on its
# connection (see README.md). Needs node, npm, go and redis-server; reaches
# the npm registry and the Go module proxy. Not run by the tests.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; redis-cli -s "$work/redis.sock" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
redis-server --port 0 --unixsocket "$work/redis.sock" --save '' --appendonly no --daemonize yes \
  --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work"
for _ in $(seq 50); do [ -S "$work/redis.sock" ] && break; sleep 0.1; done
cp "$here/package.json" "$here"/*.cjs "$here"/*.mjs "$work/"
(cd "$work" && npm install --no-audit --no-fund --silent)
(cd "$here/redisrate" && go build -o "$work/redisrate" .)
port=${CAPTURE_PORT:-17391}
run() { # name, command...
  local name=$1; shift
  node "$work/proxy.cjs" "$port" "$work/redis.sock" "$here/$name.capture" >/dev/null &
  local pid=$!
  sleep 0.5
  "$@"
  sleep 0.3
  kill "$pid"; wait "$pid" 2>/dev/null || true
}
run redis-rate "$work/redisrate" "127.0.0.1:$port" "$work/redis.sock"
run rlflex node "$work/rlflex.cjs" "$port" "$work/redis.sock"
run rate-limit-redis node "$work/rlr.mjs" "$port" "$work/redis.sock"
