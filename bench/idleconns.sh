#!/usr/bin/env bash
# make idle-bench: memory per idle client connection on the leader and on a
# follower of a 3-node Grackle on loopback (grackle bench idle-conns; see
# docs/SCALING.md, "Client connections"). Each measurement runs on a fresh
# cluster: N connections to one member, one call answered on each (on its
# multiplexed stream as the Go client does, or unary only), the member's
# RSS, Go heap and goroutines read before and after (each after a forced
# collection), then one table of the medians per connection. Every process
# it starts listens on 127.0.0.1 only and is stopped by PID at the end
# (also on ^C).
#
#   make idle-bench                          # CONNS=1000,10000 RUNS=2 MEMBERS=leader,follower MODES=mux,unary
#   CONNS=1000 RUNS=1 MEMBERS=leader make idle-bench
#   BEFORE=v1.4.0 make idle-bench            # also measure the build of another revision, interleaved
#   SERVER_FLAGS="--gc-headroom off" make idle-bench
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-1000,10000}
RUNS=${RUNS:-2}
MEMBERS=${MEMBERS:-leader,follower}
MODES=${MODES:-mux,unary}
SETTLE=${SETTLE:-2s}
BEFORE=${BEFORE:-}                    # a git revision to build and measure beside this tree
SERVER_FLAGS=${SERVER_FLAGS:-}        # extra flags for every grackle server
BASE=${BASE:-/tmp/grackle-idle}
OUT=${OUT:-$BASE/results-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT" "$BASE/bin"
echo "== results in $OUT"
RES=$OUT/results.jsonl
# 10,000 connections: each end holds a descriptor per connection.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true
. bench/lib.sh

max=0
for n in ${CONNS//,/ }; do [ "$n" -gt "$max" ] && max=$n; done
# Room for every connection with the port far from nine tenths full (where
# idle connections start giving way to new ones), all from one address.
LIMIT_FLAGS="--max-connections $((2 * max + 1000)) --max-connections-per-address 0"

echo "== building into $BASE/bin"
CGO_ENABLED=0 go build -o "$BASE/bin/grackle" ./cmd/grackle
LABEL=${LABEL:-$(git describe --always --dirty 2>/dev/null || echo this)}
builds=("$LABEL=$BASE/bin/grackle")
if [ -n "$BEFORE" ]; then
  rev=$(git rev-parse --short "$BEFORE^{commit}")
  rm -rf "$BASE/src-$rev" && mkdir -p "$BASE/src-$rev"
  git archive "$rev" | tar -x -C "$BASE/src-$rev"
  (cd "$BASE/src-$rev" && CGO_ENABLED=0 go build -o "$BASE/bin/grackle-$rev" ./cmd/grackle)
  builds=("$rev=$BASE/bin/grackle-$rev" "${builds[@]}")
fi
G=$BASE/bin/grackle # the load generator
{ echo "label(s): ${builds[*]}"; go version; uname -srm; nproc; uptime; } >"$OUT/versions.txt"

# cluster BINARY NAME: a fresh 3-node cluster; endpoints in $EPS, HTTP
# addresses in $HTTPS, PIDs in $SPIDS.
cluster() {
  local bin=$1 name=$2 i members="" eps="" https="" pids=""
  rm -rf "$BASE/data"
  for i in 1 2 3; do
    members+="${members:+,}i$i=127.0.0.1:$((25020 + 10*i + 1))=127.0.0.1:$((25020 + 10*i))"
    eps+="${eps:+,}127.0.0.1:$((25020 + 10*i))"
    https+="${https:+,}127.0.0.1:$((25020 + 10*i + 2))"
  done
  for i in 1 2 3; do
    # shellcheck disable=SC2086
    "$bin" server --node-id "i$i" --data-dir "$BASE/data/i$i" --grpc-addr "127.0.0.1:$((25020 + 10*i))" \
      --raft-addr "127.0.0.1:$((25020 + 10*i + 1))" --http-addr "127.0.0.1:$((25020 + 10*i + 2))" --pprof \
      --log-level warn --initial-members "$members" $LIMIT_FLAGS $SERVER_FLAGS >"$OUT/$name-i$i.log" 2>&1 &
    PIDS+=($!); pids+="${pids:+,}$!"
  done
  for _ in $(seq 120); do "$G" namespace list --endpoints "$eps" >/dev/null 2>&1 && break; sleep 0.5; done
  EPS=$eps HTTPS=$https SPIDS=$pids
}

for run in $(seq "$RUNS"); do
  for n in ${CONNS//,/ }; do
    for member in ${MEMBERS//,/ }; do
      for mode in ${MODES//,/ }; do
        # The builds' order alternates from run to run.
        order=("${builds[@]}")
        if [ $((run % 2)) = 0 ] && [ ${#builds[@]} = 2 ]; then order=("${builds[1]}" "${builds[0]}"); fi
        for b in "${order[@]}"; do
          label=${b%%=*} bin=${b#*=}
          name="run$run-$n-$member-$mode-$label"
          echo "== $name"
          cluster "$bin" "$name"
          unary=false; [ "$mode" = unary ] && unary=true
          "$G" bench idle-conns --endpoints "$EPS" --http-endpoints "$HTTPS" --server-pids "$SPIDS" \
            --member "$member" --conns "$n" --unary="$unary" --label "$label" --settle "$SETTLE" \
            --heap-profile "$OUT/heap-$name.pprof" -o json | tee -a "$RES"
          stop_all
        done
      done
    done
  done
done

echo
echo "== $RES"
"$G" bench idle-conns table "$RES" | tee "$OUT/table.md"
