#!/usr/bin/env bash
# make profile-bench: CPU profiles of every member of a 3-node Grackle on
# loopback (leader and both followers) and of the load generator while each
# workload runs (grackle bench; see docs/PERFORMANCE.md), and their top
# entries. Every profile covers the measured window (the load generator's
# by its --cpuprofile); every process started here is stopped by PID at
# the end.
#
#   make profile-bench                         # DUR=10s WARMUP=2s WORKLOADS=pairs,leases,reads,handoff
#   BENCH_FLAGS="--spread" make profile-bench  # flags for grackle bench
#   GRACKLE=/path/to/other/grackle make profile-bench   # profile another build (before/after)
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10s}
WARMUP=${WARMUP:-2s}
WORKLOADS=${WORKLOADS:-pairs,leases,reads,handoff}
BENCH_FLAGS=${BENCH_FLAGS:-}
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
spids=""
for i in 1 2 3; do
  "$G" server --node-id "p$i" --data-dir "$BASE/data/p$i" --grpc-addr "127.0.0.1:$((24920 + 10*i))" \
    --raft-addr "127.0.0.1:$((24920 + 10*i + 1))" --http-addr "127.0.0.1:$((24920 + 10*i + 2))" --pprof \
    --log-level warn --initial-members "$members" >"$OUT/p$i.log" 2>&1 &
  PIDS+=($!); spids+="${spids:+,}$!"
done
for _ in $(seq 120); do "$G" namespace list --endpoints "$eps" >/dev/null 2>&1 && break; sleep 0.5; done
leader=$("$G" cluster status --endpoints "$eps" -o json | sed -n 's/.*"leader_address": *"\([^"]*\)".*/\1/p' | sed -n 1p)
lport=${leader##*:}
# role NAME PORT: "leader" for the leader's gRPC port, else "follower<i>".
roles=() https=()
n=0
for i in 1 2 3; do
  port=$((24920 + 10*i))
  if [ "$port" = "$lport" ]; then roles+=(leader); else n=$((n + 1)); roles+=("follower$n"); fi
  https+=("127.0.0.1:$((port + 2))")
done
echo "== leader $leader; profiles of every member from /debug/pprof/profile, the load generator's by --cpuprofile"

IFS=, read -r -a ws <<<"$WORKLOADS"
for w in "${ws[@]}"; do
  echo "== $w"
  profs=()
  for k in 0 1 2; do
    ( sleep "$(secs "$WARMUP")"; curl -sf -o "$OUT/$w-${roles[$k]}.pprof" "http://${https[$k]}/debug/pprof/profile?seconds=$(secs "$DUR")" ) &
    profs+=($!)
  done
  # shellcheck disable=SC2086
  "$G" bench "$w" --endpoints "$eps" --duration "$DUR" --warmup "$WARMUP" --server-pids "$spids" \
    --cpuprofile "$OUT/lg" $BENCH_FLAGS | tee -a "$OUT/results.txt"
  wait "${profs[@]}"
  mv "$OUT/lg-$w-1.pprof" "$OUT/$w-loadgen.pprof"
  for r in leader follower1 follower2 loadgen; do
    go tool pprof -top -nodecount=25 "$G" "$OUT/$w-$r.pprof" 2>/dev/null >"$OUT/$w-$r-top.txt"
    go tool pprof -top -cum -nodecount=60 "$G" "$OUT/$w-$r.pprof" 2>/dev/null >"$OUT/$w-$r-cum.txt"
  done
  for r in leader follower1 loadgen; do
    echo "-- $w $r"
    sed -n 4,20p "$OUT/$w-$r-top.txt"
  done
done
stop_all
rm -rf "$BASE/data"
echo "== profiles and top entries in $OUT"
