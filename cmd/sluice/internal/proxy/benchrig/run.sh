#!/bin/sh
# The proxy benchmark (docs/benchmarks.md, "sluice proxy"): throughput and
# latency of a trivial upstream reached (a) directly, (b) through a bare
# httputil.ReverseProxy, (c) through `sluice proxy` with no policy, (d) with
# a per-IP token bucket and the adaptive limit, (e) through nginx. Every
# target runs as its own process on loopback; the rounds interleave the
# targets so that a change in the machine's load hits them all.
#
#   sh cmd/sluice/internal/proxy/benchrig/run.sh [ROUNDS] [SECONDS] [CONNECTIONS]
set -eu
ROUNDS=${1:-3}
SECS=${2:-5}
CONNS=${3:-64}
cd "$(dirname "$0")/../../../../.."   # the repository root
DIR=$(mktemp -d)
trap 'kill $(cat "$DIR"/*.pid 2>/dev/null) 2>/dev/null; rm -rf "$DIR"' EXIT
go build -o "$DIR/sluice" ./cmd/sluice
go build -o "$DIR/benchrig" ./cmd/sluice/internal/proxy/benchrig

"$DIR/benchrig" upstream -addr 127.0.0.1:18001 & echo $! >"$DIR/up.pid"
"$DIR/benchrig" rp -addr 127.0.0.1:18002 -upstream http://127.0.0.1:18001 & echo $! >"$DIR/rp.pid"
cat >"$DIR/c.yaml" <<YAML
listen: 127.0.0.1:18003
admin: {listen: 127.0.0.1:19003}
log: {level: warn}
routes:
  - {name: all, upstream: "http://127.0.0.1:18001"}
YAML
cat >"$DIR/d.yaml" <<YAML
listen: 127.0.0.1:18004
admin: {listen: 127.0.0.1:19004}
log: {level: warn}
routes:
  - {name: all, upstream: "http://127.0.0.1:18001", policy: protect}
policies:
  - name: protect
    key: client_ip
    rate: {rate: 1000000, burst: 1000000, per_key: true}   # never refuses here: the cost is measured, not the limit
    max_wait: 5s
    max_waiting_per_key: 1024   # every wrk connection is one client, 127.0.0.1
    concurrency:
      adaptive: {initial_limit: 64}
      max_queue: 1024
      max_wait: 5s
YAML
"$DIR/sluice" proxy -config "$DIR/c.yaml" 2>"$DIR/c.log" & echo $! >"$DIR/c.pid"
"$DIR/sluice" proxy -config "$DIR/d.yaml" 2>"$DIR/d.log" & echo $! >"$DIR/d.pid"
cat >"$DIR/nginx.conf" <<NGINX
worker_processes auto;
pid $DIR/nginx.pid.file;
error_log $DIR/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $DIR; proxy_temp_path $DIR; fastcgi_temp_path $DIR; uwsgi_temp_path $DIR; scgi_temp_path $DIR;
  upstream up { server 127.0.0.1:18001; keepalive 256; }
  server {
    listen 127.0.0.1:18005;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
nginx -c "$DIR/nginx.conf" -g 'daemon off;' & echo $! >"$DIR/nginx.pid"
sleep 1

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# wrk -t2 -c$CONNS -d${SECS}s --latency, $ROUNDS interleaved rounds"
printf 'round target rps p50_ms p99_ms non2xx\n'
for r in $(seq "$ROUNDS"); do
  for t in ${TARGETS:-a:18001 b:18002 c:18003 d:18004 e:18005}; do
    name=${t%%:*}; port=${t#*:}
    wrk -t2 -c"$CONNS" -d"${SECS}s" --latency "http://127.0.0.1:$port/" >"$DIR/wrk.out"
    awk -v r="$r" -v n="$name" '
      function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
      /Requests\/sec/ { rps = $2 }
      $1 == "50%" { p50 = ms($2) }
      $1 == "99%" { p99 = ms($2) }
      /Non-2xx/ { bad = $NF }
      END { printf "%s %s %.0f %.3f %.3f %d\n", r, n, rps, p50, p99, bad }' "$DIR/wrk.out"
  done
done
