#!/usr/bin/env bash
# Side-by-side W2 (contended hand-off: 1 permit, 8 workers, 1 ms hold) on
# Grackle and on etcd 3.4 (shared/peers' recipe), 3 nodes and 1 node, in
# one invocation, plus Grackle's lease-expiry lateness. Every process it
# starts listens on 127.0.0.1 only and is stopped at the end (also on ^C).
#
#   bash bench/compare.sh              # DUR=10s RUNS=2 ETCD=1 by default
#   ETCD=0 DUR=5s RUNS=1 bash bench/compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10s}
WARMUP=${WARMUP:-2s}
RUNS=${RUNS:-2}
ETCD=${ETCD:-1}
PEERS=${PEERS:-../shared/peers}
BASE=${BASE:-/tmp/grackle-bench}
OUT=$BASE/results-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
RES=$OUT/results.txt
PIDS=()
stop_all() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done; PIDS=(); sleep 0.3; }
trap stop_all EXIT INT TERM

echo "== building"
CGO_ENABLED=0 go build -o "$BASE/bin/grackle" ./cmd/grackle
G=$BASE/bin/grackle
if [ "$ETCD" = 1 ]; then
  command -v etcd >/dev/null || { apt-get update -qq && apt-get install -y -qq etcd-server etcd-client >/dev/null; }
  (cd "$PEERS" && go build -o "$BASE/bin/" ./etcdsem ./restable)
fi

grackle_cluster() { # N -> endpoints in $EPS (no subshell: PIDS must stay in this shell)
  local n=$1 i members="" eps=""
  rm -rf "$BASE/g$n"
  for i in $(seq 1 "$n"); do
    members+="${members:+,}g$i=127.0.0.1:$((24720 + 10*i + 1))=127.0.0.1:$((24720 + 10*i))"
    eps+="${eps:+,}127.0.0.1:$((24720 + 10*i))"
  done
  for i in $(seq 1 "$n"); do
    local extra=()
    [ "$n" -gt 1 ] && extra=(--initial-members "$members")
    "$G" server --node-id "g$i" --data-dir "$BASE/g$n/g$i" --grpc-addr "127.0.0.1:$((24720 + 10*i))" \
      --raft-addr "127.0.0.1:$((24720 + 10*i + 1))" --http-addr "" --log-level warn "${extra[@]}" >"$OUT/grackle-$n-g$i.log" 2>&1 &
    PIDS+=($!)
  done
  for _ in $(seq 120); do "$G" namespace list --endpoints "$eps" >/dev/null 2>&1 && break; sleep 0.5; done
  EPS=$eps
}

etcd_cluster() { # N -> endpoints in $EPS
  local n=$1 i cluster="" eps=""
  rm -rf "$BASE/e$n"
  for i in $(seq 1 "$n"); do
    cluster+="${cluster:+,}e$i=http://127.0.0.1:$((24800 + 10*i + 1))"
    eps+="${eps:+,}127.0.0.1:$((24800 + 10*i))"
  done
  for i in $(seq 1 "$n"); do
    etcd --name "e$i" --data-dir "$BASE/e$n/e$i" \
      --listen-client-urls "http://127.0.0.1:$((24800 + 10*i))" --advertise-client-urls "http://127.0.0.1:$((24800 + 10*i))" \
      --listen-peer-urls "http://127.0.0.1:$((24800 + 10*i + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((24800 + 10*i + 1))" \
      --initial-cluster "$cluster" --initial-cluster-token "bench-$n" --initial-cluster-state new >"$OUT/etcd-$n-e$i.log" 2>&1 &
    PIDS+=($!)
  done
  for _ in $(seq 60); do ETCDCTL_API=3 etcdctl --endpoints "$eps" endpoint health >/dev/null 2>&1 && break; sleep 0.5; done
  EPS=$eps
}

for n in 3 1; do
  echo "== grackle $n node(s)"
  grackle_cluster "$n"; eps=$EPS
  "$G" bench handoff --endpoints "$eps" --label "grackle-${n}node" --duration "$DUR" --warmup "$WARMUP" --repeat "$RUNS" | tee -a "$RES"
  "$G" bench expiry --endpoints "$eps" --label "grackle-${n}node" --trials 40 --ttl 2 | tee -a "$RES"
  stop_all
  if [ "$ETCD" = 1 ]; then
    echo "== etcd $n node(s)"
    etcd_cluster "$n"; eps=$EPS
    "$BASE/bin/etcdsem" -endpoints "$eps" -label "etcd-${n}node" -workload w2 -duration "$DUR" -warmup "$WARMUP" -repeat "$RUNS" | tee -a "$RES"
    stop_all
  fi
done
echo "== results in $RES"
if [ "$ETCD" = 1 ]; then "$BASE/bin/restable" "$RES" || true; fi
