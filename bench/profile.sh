#!/usr/bin/env bash
# make profile-bench: CPU profiles of the leader of a 3-node Grackle on
# loopback while each workload runs (grackle bench; see
# docs/PERFORMANCE.md), and their top entries. The profile covers the
# measured window; every process started here is stopped by PID at the end.
#
#   make profile-bench                         # DUR=10s WARMUP=2s WORKLOADS=pairs,leases,reads,handoff
#   GRACKLE=/path/to/other/grackle make profile-bench   # profile another build (before/after)
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10s}
WARMUP=${WARMUP:-2s}
WORKLOADS=${WORKLOADS:-pairs,leases,reads,handoff}
BASE=${BASE:-/tmp/grackle-profile}
OUT=${OUT:-$BASE/profiles-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT" "$BASE/bin"
. bench/lib.sh

if [ -z "${GRACKLE:-}" ]; then
  CGO_ENABLED=0 go build -o "$BASE/bin/grackle" ./cmd/grackle
  GRACKLE=$BASE/bin/grackle
fi
G=$GRACKLE
secs() { local d=$1; d=${d%s}; echo "${d%.*}"; }

rm -rf "$BASE/data"
members="" eps=""
for i in 1 2 3; do
  members+="${members:+,}p$i=127.0.0.1:$((24920 + 10*i + 1))=127.0.0.1:$((24920 + 10*i))"
  eps+="${eps:+,}127.0.0.1:$((24920 + 10*i))"
done
for i in 1 2 3; do
  "$G" server --node-id "p$i" --data-dir "$BASE/data/p$i" --grpc-addr "127.0.0.1:$((24920 + 10*i))" \
    --raft-addr "127.0.0.1:$((24920 + 10*i + 1))" --http-addr "127.0.0.1:$((24920 + 10*i + 2))" --pprof \
    --log-level warn --initial-members "$members" >"$OUT/p$i.log" 2>&1 &
  PIDS+=($!)
done
for _ in $(seq 120); do "$G" namespace list --endpoints "$eps" >/dev/null 2>&1 && break; sleep 0.5; done
leader=$("$G" cluster status --endpoints "$eps" -o json | sed -n 's/.*"leader_address": *"\([^"]*\)".*/\1/p' | head -1)
lport=${leader##*:}
http="127.0.0.1:$((lport + 2))"
echo "== leader $leader, profiles from http://$http/debug/pprof/profile"

IFS=, read -r -a ws <<<"$WORKLOADS"
for w in "${ws[@]}"; do
  echo "== $w"
  ( sleep "$(secs "$WARMUP")"; curl -sf -o "$OUT/$w.pprof" "http://$http/debug/pprof/profile?seconds=$(secs "$DUR")" ) &
  prof=$!
  "$G" bench "$w" --endpoints "$eps" --duration "$DUR" --warmup "$WARMUP" | tee -a "$OUT/results.txt"
  wait "$prof"
  go tool pprof -top -nodecount=20 "$G" "$OUT/$w.pprof" 2>/dev/null >"$OUT/$w-top.txt"
  go tool pprof -top -cum -nodecount=40 "$G" "$OUT/$w.pprof" 2>/dev/null >"$OUT/$w-cum.txt"
  sed -n 5,26p "$OUT/$w-top.txt"
done
stop_all
rm -rf "$BASE/data"
echo "== profiles and top entries in $OUT"
