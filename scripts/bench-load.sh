#!/usr/bin/env bash
# The load generator's benchmark (docs/benchmarks.md, "Load generator"):
# sluice load and wrk against the same trivial loopback server.
#
#   1. wrk, closed loop, as fast as it goes: the server's ceiling here.
#   2. sluice load at 20,000 req/s for DURATION: does it keep its schedule?
#   3. wrk held near 20,000 req/s (50 connections, 2 ms apart), then sluice
#      load offered exactly the rate wrk measured: the two throughputs, and
#      the server's own count for each, side by side.
#   4. sluice load above the ceiling (-max-outstanding 50, like wrk's 50
#      connections): its throughput against wrk's in step 1.
#
# Needs wrk (apt-get install -y wrk). Usage: scripts/bench-load.sh [DURATION_S]
set -euo pipefail
cd "$(dirname "$0")/.."
D=${1:-10}
PORT=${PORT:-18080}
URL="http://127.0.0.1:$PORT/"
command -v wrk >/dev/null || { echo "wrk is not installed: apt-get install -y wrk" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; rm -rf "$tmp"' EXIT
(cd cmd/sluice && go build -o "$tmp/sluice" . && go build -o "$tmp/hello" ./internal/load/testdata/hello)
"$tmp/hello" -addr "127.0.0.1:$PORT" & srv=$!
sleep 0.5
count() { curl -s "http://127.0.0.1:$PORT/count"; }
served() { # requests the server counted while "$@" ran, per second
	local a b; a=$(count); "$@" >"$tmp/out" 2>&1; b=$(count)
	echo "scale=1; ($b - $a) / $D" | bc
}
wrkrate() { awk '/^Requests\/sec:/ {print $2}' "$tmp/out"; }
loadline() { grep -E '^(offered|throughput|schedule) ' "$tmp/out"; }

grep -m1 'model name' /proc/cpuinfo; nproc; uptime
echo "== 1. wrk -t2 -c50 -d${D}s (closed loop, flat out)"
s=$(served wrk -t2 -c50 -d${D}s "$URL"); w1=$(wrkrate)
echo "wrk: $w1 req/s; server counted $s/s"

echo "== 2. sluice load -rate 20000 -duration ${D}s -connections 50"
s=$(served "$tmp/sluice" load -rate 20000 -duration ${D}s -connections 50 "$URL")
loadline; echo "server counted $s/s"

echo "== 3. wrk held near 20,000/s (-c50, 2 ms between requests per connection)"
echo 'function delay() return 2 end' >"$tmp/delay.lua"
s=$(served wrk -t2 -c50 -d${D}s -s "$tmp/delay.lua" "$URL"); w3=$(wrkrate)
echo "wrk: $w3 req/s; server counted $s/s"
echo "   sluice load -rate $w3 -duration ${D}s -connections 50"
s=$(served "$tmp/sluice" load -rate "$w3" -duration ${D}s -connections 50 "$URL")
t3=$(awk '/^throughput/ {print $2}' "$tmp/out" | tr -d '/s')
loadline; echo "server counted $s/s"
echo "ratio sluice load / wrk: $(echo "scale=4; $t3 / $w3" | bc)"

echo "== 4. sluice load above the ceiling: -rate 100000 -max-outstanding 50 -connections 50"
s=$(served "$tmp/sluice" load -rate 100000 -duration ${D}s -connections 50 -max-outstanding 50 "$URL")
t4=$(awk '/^throughput/ {print $2}' "$tmp/out" | tr -d '/s')
loadline; echo "server counted $s/s"
echo "ratio sluice load / wrk (step 1): $(echo "scale=4; $t4 / $w1" | bc)"
