#!/bin/sh
# Seed 003's slowdown on real sockets (docs/benchmarks.md): `sluice origin`
# runs scenarios/seed003-slowdown.yaml time-scaled (7 workers; 1 s, then 2 s
# per request at 60 s; x TIMESCALE), `sluice load` sends the scenario's 5 rps
# with its 2.5 s timeout (scaled alike), and the run covers 90-180 s, the slow
# origin after 30 s to adapt. Targets, one run each, the origin restarted for
# each: the origin directly, `sluice proxy` with the adaptive limit, nginx
# limit_conn (the seed's static proxy: 5 in flight), nginx limit_req (a rate
# limit at the offered rate).
#
#   sh cmd/sluice/internal/proxy/benchrig/overload.sh [TIMESCALE] [ALGORITHM] [INITIAL_LIMIT]
#
# ALGORITHM defaults to the proxy's default, little. INITIAL_LIMIT defaults
# to 5 for aimd (the seed's AIMD started at 5) and to the algorithm's own
# for the others, as a config that names none gets.
set -eu
TS=${1:-0.2}
ALG=${2:-little}
INIT=${3:-}
if [ -z "$INIT" ] && [ "$ALG" = aimd ]; then INIT=5; fi
INIT_FIELD=${INIT:+", initial_limit: $INIT"}
cd "$(dirname "$0")/../../../../.."
DIR=$(mktemp -d)
trap 'kill $(cat "$DIR"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$DIR"' EXIT
go build -o "$DIR/sluice" ./cmd/sluice
SCEN=scenarios/seed003-slowdown.yaml
ms() { awk -v s="$1" -v t="$TS" 'BEGIN { printf "%dms", s * 1000 * t }'; }

# The policy: the recommended adaptive limit, told the clients' timeout (a
# success slower than it failed for the client), with a queue of one
# request for a short wait, newest first.
cat >"$DIR/sluice.yaml" <<YAML
listen: 127.0.0.1:18201
admin: {listen: 127.0.0.1:19201}
log: {level: warn}
reload: {poll: 0s}
routes:
  - {name: origin, upstream: "http://127.0.0.1:18200", timeout: $(ms 4), policy: adaptive}
policies:
  - name: adaptive
    max_wait: $(ms 0.25)
    max_waiting_per_key: 64
    concurrency:
      adaptive: {algorithm: $ALG, timeout: $(ms 2.5)$INIT_FIELD}
      discipline: lifo
      max_queue: 1
YAML
cat >"$DIR/nginx.conf" <<NGINX
worker_processes 1;
pid $DIR/nginx.pid.file;
error_log $DIR/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $DIR; proxy_temp_path $DIR; fastcgi_temp_path $DIR; uwsgi_temp_path $DIR; scgi_temp_path $DIR;
  # One zone key for all requests (\$server_port: an empty key is not counted).
  limit_conn_zone \$server_port zone=inflight:1m;
  limit_req_zone \$server_port zone=rate:1m rate=$(awk -v t="$TS" 'BEGIN { printf "%d", 5 / t }')r/s;
  limit_conn_status 503;
  limit_req_status 503;
  upstream up { server 127.0.0.1:18200; keepalive 32; }
  server {
    listen 127.0.0.1:18202;
    location / { limit_conn inflight 5; proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:18203;
    location / { limit_req zone=rate burst=10 nodelay; proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
"$DIR/sluice" proxy -config "$DIR/sluice.yaml" 2>"$DIR/proxy.log" & echo $! >"$DIR/proxy.pid"
nginx -c "$DIR/nginx.conf" -g 'daemon off;' & echo $! >"$DIR/nginx.pid"
sleep 1
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg), timescale $TS, algorithm $ALG, initial limit ${INIT:-the algorithm's}"
for t in direct:18200 sluice-adaptive:18201 nginx-limit_conn-5:18202 nginx-limit_req:18203; do
  name=${t%%:*}; port=${t#*:}
  "$DIR/sluice" origin -addr 127.0.0.1:18200 -timescale "$TS" "$SCEN" >"$DIR/origin.log" 2>&1 & echo $! >"$DIR/origin.pid"
  sleep 0.3
  echo "## $name"
  "$DIR/sluice" load -scenario "$SCEN" -timescale "$TS" -duration 3m "http://127.0.0.1:$port/" | sed -n '1,7p'
  kill "$(cat "$DIR/origin.pid")"; rm "$DIR/origin.pid"; sleep 0.3
done
