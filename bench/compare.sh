#!/usr/bin/env bash
# make compare-bench: every workload of `grackle bench` (pairs, handoff,
# leases, reads, expiry, locks, lockhandoff, waitgroup, barrier; see
# docs/PERFORMANCE.md) against a 3-node Grackle, a 3-node etcd (Debian's
# etcd-server, installed when missing; locks against etcd's
# concurrency.Mutex, barrier against its recipe DoubleBarrier) and a
# 3-server ZooKeeper ensemble (Debian's zookeeper, installed when missing;
# the recipes of bench/zk), on loopback, fsync on, in one invocation,
# interleaved workload by workload (each workload of each run on a fresh
# cluster of each system, one after the other, the order of the three
# rotating from run to run), then one table with Grackle's ratio to each.
# Every process it starts listens on 127.0.0.1 only and is stopped by PID
# at the end (also on ^C).
#
#   make compare-bench                       # DUR=10s WARMUP=2s RUNS=2
#   DUR=3s WARMUP=1s RUNS=1 make compare-bench
#   WORKLOADS=pairs,reads ETCD=0 ZOOKEEPER=0 make compare-bench   # Grackle only
#   DUR=5s WARMUP=1s RUNS=1 WORKLOADS=locks,lockhandoff make compare-bench
#   DUR=5s WARMUP=1s RUNS=1 WORKLOADS=waitgroup,barrier make compare-bench
#   SPREAD_READS=0 make compare-bench        # reads to the leader only
#   ETCD=0 SERVER_FLAGS="--raft-log-store bolt" make compare-bench   # another server setting
#   ZK_TICK=1000 ZK_JIT_WARMUP=0 make compare-bench                  # other ZooKeeper settings
#   CONNS=1 make compare-bench               # only the one-connection shape
#
# Connection shapes: pairs, leases, reads and locks (CONN_WORKLOADS) run
# once per entry of CONNS (default 1,64,1000): with 1, the load
# generator's 64 workers share one connection (Grackle: its multiplexed
# stream; etcd: one client); with N > 1, max(64, N) workers take N
# connections in turn, as N worker processes would (Grackle: N gRPC
# connections; etcd: N clients; ZooKeeper's recipes always give each
# worker a session, and so a connection, of its own). The other workloads
# run with 1. The table shows each shape in rows of its own.
#
# The reads workload spreads its workers over every member on every side
# (--spread): followers serve linearizable reads themselves, Grackle's by
# its follower reads, etcd's by its ReadIndex, ZooKeeper's after a sync.
# Every other workload sends everything to the leader.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10s}
WARMUP=${WARMUP:-2s}
RUNS=${RUNS:-2}
WORKLOADS=${WORKLOADS:-all}
ETCD=${ETCD:-1}
ZOOKEEPER=${ZOOKEEPER:-1}
# ZooKeeper's settings (docs/PERFORMANCE.md, "ZooKeeper"): its default
# tick, which is also the granularity of its session expiry; a JVM heap for
# this 2-core, 24 GiB machine (three servers share it); and an unmeasured
# pass of each workload on every fresh ensemble before the measured one, so
# that the JVM has compiled its hot paths (a cold ensemble runs its first
# seconds at a third of its speed or less).
ZK_TICK=${ZK_TICK:-2000}
ZK_HEAP=${ZK_HEAP:--Xms512m -Xmx1g}
ZK_JIT_WARMUP=${ZK_JIT_WARMUP:-10s}
SPREAD_READS=${SPREAD_READS:-1}
CONNS=${CONNS:-1,64,1000}
CONN_WORKLOADS=${CONN_WORKLOADS:-pairs,leases,reads,locks}
# ZooKeeper runs the shapes up to ZK_MAX_CONNS sessions (its recipes give
# every worker a session whatever the shape).
ZK_MAX_CONNS=${ZK_MAX_CONNS:-1000}
BENCH_FLAGS=${BENCH_FLAGS:-}          # extra flags for every load generator, e.g. "--workers 128"
SERVER_FLAGS=${SERVER_FLAGS:-}        # extra flags for every grackle server, e.g. "--raft-log-store bolt"
BASE=${BASE:-/tmp/grackle-compare}
OUT=${OUT:-$BASE/results-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT" "$BASE/bin"
RES=$OUT/results.jsonl
# 1,000 connections on each side and the servers' own: more descriptors
# than a shell's default 1,024.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true
. bench/lib.sh

echo "== building into $BASE/bin"
CGO_ENABLED=0 go build -o "$BASE/bin/grackle" ./cmd/grackle
G=$BASE/bin/grackle
if [ "$ETCD" = 1 ]; then
  if ! command -v etcd >/dev/null; then
    echo "== installing Debian's etcd-server"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
  fi
  (cd bench/etcd && CGO_ENABLED=0 go build -o "$BASE/bin/etcdbench" .)
  # sed, not head: head exits after one line, and etcd writing its next one
  # would then end the script with SIGPIPE (pipefail).
  etcd --version | sed -n 1p >"$OUT/versions.txt"
fi
ZK_JAR=/usr/share/java/zookeeper.jar
if [ "$ZOOKEEPER" = 1 ]; then
  if [ ! -r "$ZK_JAR" ] || ! command -v java >/dev/null; then
    echo "== installing Debian's zookeeper"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >/dev/null
  fi
  (cd bench/zk && CGO_ENABLED=0 go build -o "$BASE/bin/zkbench" .)
  echo "zookeeper $(dpkg-query -W -f '${Version}' zookeeper 2>/dev/null || echo '(version unknown)'):" \
    "tickTime $ZK_TICK, JVM $ZK_HEAP, JIT warm-up $ZK_JIT_WARMUP per ensemble" >>"$OUT/versions.txt"
  java -version 2>&1 | sed -n 1p >>"$OUT/versions.txt"
fi
go version >>"$OUT/versions.txt"
{ echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  grep -m1 'model name' /proc/cpuinfo || true
  # A virtual machine's idle governor decides what waking a sleeping core
  # costs, and with it much of a round's latency here (docs/PERFORMANCE.md):
  # record it beside the figures it shaped.
  gov=/sys/devices/system/cpu/cpuidle/current_governor poll=/sys/module/haltpoll/parameters/guest_halt_poll_ns
  if [ -r "$gov" ]; then
    idle="cpuidle governor: $(cat "$gov")"
    if [ -r "$poll" ]; then idle+=", guest_halt_poll_ns $(cat "$poll")"; fi
    echo "$idle"
  fi
  uptime; } >>"$OUT/versions.txt"

# grackle_cluster RUN WORKLOAD: a fresh 3-node cluster; its endpoints in
# $EPS, PIDs in $SPIDS; its logs named after the run and the workload.
grackle_cluster() {
  local run=$1 w=$2 i members="" eps="" pids=""
  rm -rf "$BASE/grackle"
  for i in 1 2 3; do
    members+="${members:+,}g$i=127.0.0.1:$((24720 + 10*i + 1))=127.0.0.1:$((24720 + 10*i))"
    eps+="${eps:+,}127.0.0.1:$((24720 + 10*i))"
  done
  for i in 1 2 3; do
    "$G" server --node-id "g$i" --data-dir "$BASE/grackle/g$i" --grpc-addr "127.0.0.1:$((24720 + 10*i))" \
      --raft-addr "127.0.0.1:$((24720 + 10*i + 1))" --http-addr "" --log-level warn --initial-members "$members" $SERVER_FLAGS \
      >"$OUT/grackle-run$run-$w-g$i.log" 2>&1 &
    PIDS+=($!); pids+="${pids:+,}$!"
  done
  for _ in $(seq 120); do "$G" namespace list --endpoints "$eps" >/dev/null 2>&1 && break; sleep 0.5; done
  EPS=$eps SPIDS=$pids
}

# etcd_cluster RUN WORKLOAD: a fresh 3-member etcd, every setting but the
# ports at its default (fsync on), ready (every member's /health says so)
# before it returns, as grackle_cluster waits for its cluster to answer.
etcd_cluster() {
  local run=$1 w=$2 i cluster="" eps="" pids=""
  rm -rf "$BASE/etcd"
  for i in 1 2 3; do
    cluster+="${cluster:+,}e$i=http://127.0.0.1:$((24800 + 10*i + 1))"
    eps+="${eps:+,}127.0.0.1:$((24800 + 10*i))"
  done
  for i in 1 2 3; do
    etcd --name "e$i" --data-dir "$BASE/etcd/e$i" \
      --listen-client-urls "http://127.0.0.1:$((24800 + 10*i))" --advertise-client-urls "http://127.0.0.1:$((24800 + 10*i))" \
      --listen-peer-urls "http://127.0.0.1:$((24800 + 10*i + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((24800 + 10*i + 1))" \
      --initial-cluster "$cluster" --initial-cluster-token "compare-$run" --initial-cluster-state new \
      >"$OUT/etcd-run$run-$w-e$i.log" 2>&1 &
    PIDS+=($!); pids+="${pids:+,}$!"
  done
  if command -v curl >/dev/null; then
    for i in 1 2 3; do
      for _ in $(seq 120); do
        curl -sf "http://127.0.0.1:$((24800 + 10*i))/health" 2>/dev/null | grep -q '"health":"true"' && break
        sleep 0.5
      done
    done
  else
    sleep 3 # no curl: a fixed settle (a new etcd elects within its 1 s election timeout)
  fi
  EPS=$eps SPIDS=$pids
}

# zk_cluster RUN WORKLOAD: a fresh 3-server ZooKeeper ensemble, started as
# Debian's scripts start it (QuorumPeerMain on a config file, the package's
# jars on the classpath) but in the foreground, so that each PID is a
# server's JVM. Each server has its own data directory (its transaction
# log in it, fsynced before it acknowledges: forceSync=yes, the default,
# written down); no limit on connections from one address (the default, 60,
# is below the 64 workers); session timeouts from 2 s (the expiry
# workload's TTL) to 120 s; the four-letter words srvr and ruok only; no
# admin server. Logs at WARN through slf4j-simple, but for two warnings
# every connection of this client would log (it does not ask for
# read-only mode; it may close its socket before the server does), which
# would cost the servers CPU in the leases workload. Ready when every
# server's srvr says leader or follower.
zk_cluster() {
  local run=$1 w=$2 i servers="" eps="" pids="" port
  rm -rf "$BASE/zookeeper"
  for i in 1 2 3; do
    servers+="server.$i=127.0.0.1:$((24900 + 10*i + 1)):$((24900 + 10*i + 2))"$'\n'
    eps+="${eps:+,}127.0.0.1:$((24900 + 10*i))"
  done
  for i in 1 2 3; do
    mkdir -p "$BASE/zookeeper/z$i"
    echo "$i" >"$BASE/zookeeper/z$i/myid"
    printf '%s\n' "tickTime=$ZK_TICK" initLimit=10 syncLimit=5 "dataDir=$BASE/zookeeper/z$i" \
      "clientPort=$((24900 + 10*i))" clientPortAddress=127.0.0.1 forceSync=yes maxClientCnxns=0 \
      minSessionTimeout=2000 maxSessionTimeout=120000 4lw.commands.whitelist=srvr,ruok \
      admin.enableServer=false >"$BASE/zookeeper/z$i.cfg"
    printf '%s' "$servers" >>"$BASE/zookeeper/z$i.cfg"
    # shellcheck disable=SC2086
    java $ZK_HEAP -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
      -Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.ZooKeeperServer=error \
      -Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.NIOServerCnxn=error \
      -cp "$ZK_JAR:/usr/share/java/slf4j-simple.jar" \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$BASE/zookeeper/z$i.cfg" \
      >"$OUT/zookeeper-run$run-$w-z$i.log" 2>&1 &
    PIDS+=($!); pids+="${pids:+,}$!"
  done
  cp "$BASE/zookeeper/z1.cfg" "$OUT/zookeeper-z1.cfg"
  for i in 1 2 3; do
    port=$((24900 + 10*i))
    for _ in $(seq 120); do
      timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf srvr >&3 && cat <&3" 2>/dev/null |
        grep -qE '^Mode: (leader|follower)' && break
      sleep 0.5
    done
  done
  EPS=$eps SPIDS=$pids
}

common=(--duration "$DUR" --warmup "$WARMUP" --runs 1 -o json)
all_w=$WORKLOADS
[ "$all_w" = all ] && all_w=pairs,handoff,leases,reads,expiry,locks,lockhandoff,waitgroup,barrier
IFS=, read -r -a wl <<<"$all_w"
# bench_one LABEL RUN WORKLOAD CONNS CMD...: one workload against $EPS
# with CONNS connections; CMD takes a comma-separated workload list
# (grackle bench all, etcdbench, zkbench).
bench_one() {
  local label=$1 run=$2 w=$3 n=$4
  shift 4
  local flags=(--endpoints "$EPS" --label "$label" --server-pids "$SPIDS" --first-run "$run" "${common[@]}" --conns "$n")
  if [ "$n" -gt 1 ]; then flags+=(--workers "$((n > 64 ? n : 64))"); fi
  if [ "$w" = reads ] && [ "$SPREAD_READS" = 1 ]; then
    # shellcheck disable=SC2086
    "$@" reads --spread "${flags[@]}" $BENCH_FLAGS | tee -a "$RES"
  else
    # shellcheck disable=SC2086
    "$@" "$w" "${flags[@]}" $BENCH_FLAGS | tee -a "$RES"
  fi
}
# zk_jit_warmup WORKLOAD: the workload, unmeasured, for ZK_JIT_WARMUP on
# the fresh ensemble (not expiry: its figure is the expiry tick's, and its
# trials take their TTL whatever the JIT does), with 64 workers.
zk_jit_warmup() {
  local w=$1 spread=()
  if [ "$w" = expiry ] || [ "$ZK_JIT_WARMUP" = 0 ]; then return 0; fi
  if [ "$w" = reads ] && [ "$SPREAD_READS" = 1 ]; then spread=(--spread); fi
  # shellcheck disable=SC2086
  "$BASE/bin/zkbench" "$w" "${spread[@]}" --endpoints "$EPS" --label jit-warmup --duration "$ZK_JIT_WARMUP" \
    --warmup 0s --runs 1 -o json $BENCH_FLAGS >/dev/null
}
# Each workload runs on fresh clusters, one system after the other, and the
# order rotates from run to run (each system goes first, second and third
# in turn): a shared machine's speed drifts over minutes (the same build
# has measured 30 % apart minutes apart), and a ratio of measurements taken
# seconds apart is the one to trust.
for run in $(seq 1 "$RUNS"); do
  case $((run % 3)) in
    1) sides=(grackle etcd zookeeper) ;;
    2) sides=(etcd zookeeper grackle) ;;
    0) sides=(zookeeper grackle etcd) ;;
  esac
  for w in "${wl[@]}"; do
    shapes=(1)
    if [[ ",$CONN_WORKLOADS," == *",$w,"* ]]; then IFS=, read -r -a shapes <<<"$CONNS"; fi
    for n in "${shapes[@]}"; do
      for side in "${sides[@]}"; do
        if [ "$side" = grackle ]; then
          echo "== run $run, $w, $n conns: grackle, 3 nodes"
          grackle_cluster "$run" "$w-c$n"
          bench_one grackle "$run" "$w" "$n" "$G" bench all
          stop_all
        elif [ "$side" = etcd ] && [ "$ETCD" = 1 ]; then
          echo "== run $run, $w, $n conns: etcd, 3 members"
          etcd_cluster "$run" "$w-c$n"
          bench_one etcd "$run" "$w" "$n" "$BASE/bin/etcdbench"
          stop_all
        elif [ "$side" = zookeeper ] && [ "$ZOOKEEPER" = 1 ] && [ "$n" -gt "$ZK_MAX_CONNS" ]; then
          echo "== run $run, $w, $n conns: zookeeper skipped (more than ZK_MAX_CONNS=$ZK_MAX_CONNS sessions)"
        elif [ "$side" = zookeeper ] && [ "$ZOOKEEPER" = 1 ]; then
          echo "== run $run, $w, $n conns: zookeeper, 3 servers"
          zk_cluster "$run" "$w-c$n"
          zk_jit_warmup "$w"
          bench_one zookeeper "$run" "$w" "$n" "$BASE/bin/zkbench"
          stop_all
        fi
      done
    done
  done
done
rm -rf "$BASE/grackle" "$BASE/etcd" "$BASE/zookeeper"
uptime >>"$OUT/versions.txt"
echo "== results: $RES (logs and versions beside it)"
cat "$OUT/versions.txt"
echo
"$G" bench table --subject grackle "$RES" | tee "$OUT/table.md"
