#!/usr/bin/env bash
# make secure-bench: what TLS and access control cost. The pairs workload
# (uncontended acquire+release, 64 workers) and handoff (one 1-permit
# semaphore, FIFO hand-off) of `grackle bench` against a 3-node Grackle on
# loopback, fsync on, in one invocation, interleaved run by run over three
# fresh clusters: plain; client mutual TLS + peer TLS; the same plus --acl
# (the bench sends an admin token). Then one table with the ratios against
# plain. Certificates by deploy/gen-certs.sh into a temporary directory
# (removed at the end). Every process it starts listens on 127.0.0.1 only
# and is stopped by PID at the end (also on ^C).
#
#   make secure-bench                        # DUR=10s WARMUP=2s RUNS=2
#   DUR=5s RUNS=3 WORKLOADS=pairs make secure-bench
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10s}
WARMUP=${WARMUP:-2s}
RUNS=${RUNS:-2}
WORKLOADS=${WORKLOADS:-pairs,handoff}
BENCH_FLAGS=${BENCH_FLAGS:-}
PORT0=${PORT0:-$((20000 + RANDOM % 30000))}   # 6 loopback ports from here (random: runs of others on the machine)
BASE=${BASE:-/tmp/grackle-secure-bench-$$}
OUT=${OUT:-$BASE/results-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT" "$BASE/bin"
RES=$OUT/results.jsonl
. bench/lib.sh
CERTS=$(mktemp -d)
trap 'stop_all; rm -rf "$CERTS"' EXIT

echo "== building into $BASE/bin; certificates in $CERTS"
CGO_ENABLED=0 go build -o "$BASE/bin/grackle" ./cmd/grackle
G=$BASE/bin/grackle
bash deploy/gen-certs.sh "$CERTS" g1 g2 g3 >/dev/null
go version >"$OUT/versions.txt"
{ echo "machine: $(nproc) cores, $(uname -sr)"; uptime; } >>"$OUT/versions.txt"
CLIENT_TLS=(--cacert "$CERTS/api-ca.crt" --cert "$CERTS/client.crt" --key "$CERTS/client.key")

# cluster RUN MODE (plain, tls, tls+acl): a fresh 3-node cluster; its
# endpoints in $EPS, PIDs in $SPIDS, the client flags in CFLAGS.
cluster() {
  local run=$1 mode=$2 i members="" eps="" pids="" sec=()
  rm -rf "$BASE/data"
  for i in 1 2 3; do
    members+="${members:+,}g$i=127.0.0.1:$((PORT0 + 10*i + 1))=127.0.0.1:$((PORT0 + 10*i))"
    eps+="${eps:+,}127.0.0.1:$((PORT0 + 10*i))"
  done
  CFLAGS=()
  for i in 1 2 3; do
    sec=()
    if [ "$mode" != plain ]; then
      sec=(--tls-cert-file "$CERTS/g$i-api.crt" --tls-key-file "$CERTS/g$i-api.key" --tls-client-ca-file "$CERTS/api-ca.crt"
        --peer-tls-cert-file "$CERTS/g$i-peer.crt" --peer-tls-key-file "$CERTS/g$i-peer.key" --peer-tls-ca-file "$CERTS/peer-ca.crt")
      CFLAGS=("${CLIENT_TLS[@]}")
    fi
    [ "$mode" = tls+acl ] && sec+=(--acl)
    "$G" server --node-id "g$i" --data-dir "$BASE/data/g$i" --grpc-addr "127.0.0.1:$((PORT0 + 10*i))" \
      --raft-addr "127.0.0.1:$((PORT0 + 10*i + 1))" --http-addr "" --log-level warn --initial-members "$members" \
      "${sec[@]}" >"$OUT/run$run-$mode-g$i.log" 2>&1 &
    PIDS+=($!); pids+="${pids:+,}$!"
  done
  if [ "$mode" = tls+acl ]; then
    local tok=""
    for _ in $(seq 120); do tok=$("$G" acl bootstrap -o id --endpoints "$eps" "${CFLAGS[@]}" 2>/dev/null) && break; sleep 0.5; done
    [ -n "$tok" ] || { echo "acl bootstrap failed" >&2; exit 1; }
    CFLAGS+=(--token "$tok")
  fi
  for _ in $(seq 120); do "$G" namespace list --endpoints "$eps" "${CFLAGS[@]}" >/dev/null 2>&1 && break; sleep 0.5; done
  EPS=$eps SPIDS=$pids
}

common=(--duration "$DUR" --warmup "$WARMUP" --runs 1 -o json)
for run in $(seq 1 "$RUNS"); do
  for mode in plain tls tls+acl; do
    echo "== run $run: $mode, 3 nodes ($(uptime | sed 's/.*load/load/'))"
    cluster "$run" "$mode"
    # shellcheck disable=SC2086
    "$G" bench all "$WORKLOADS" --endpoints "$EPS" "${CFLAGS[@]}" --label "$mode" --server-pids "$SPIDS" --first-run "$run" "${common[@]}" $BENCH_FLAGS | tee -a "$RES"
    stop_all
  done
done
rm -rf "$BASE/data"
uptime >>"$OUT/versions.txt"
echo "== results: $RES (logs and versions beside it)"
cat "$OUT/versions.txt"
echo
"$G" bench table --base plain "$RES" | tee "$OUT/table.md"
rm -rf "$BASE/bin"
