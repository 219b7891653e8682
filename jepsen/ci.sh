#!/usr/bin/env bash
# The fault-injection suite's short run for CI (a few minutes in all):
#  1. a clean build under every nemesis must show no anomaly;
#  2. the same with client mutual TLS, peer TLS and access control on
#     (-secure, shorter), and no call refused by them;
#  3. each build-time fault (stale-read, early-grant, lock-conflict-grant)
#     must be caught;
#  4. the wait-group and barrier faults (wg-early-complete,
#     barrier-early-trip), both on in one short run, must each be caught
#     by its own checker (waitgroup, barrier).
# Needs root, iproute2, iptables and openssl.
set -uo pipefail
cd "$(dirname "$0")/.."
SEED=${JEPSEN_SEED:-20261130}
DUR=${JEPSEN_DURATION:-60s}
J="go run ./jepsen/cmd/jepsen"
$J -nodes 3 -duration "$DUR" -nemesis all -seed "$SEED" -lin-timeout 120s
rc=$?
case $rc in
  0) echo "jepsen-ci: clean run passed" ;;
  3) echo "jepsen-ci: warning: the linearizability search did not finish (verdict unknown); no anomaly found" ;;
  *) echo "jepsen-ci: clean run FAILED (exit $rc)"; exit 1 ;;
esac
$J -nodes 3 -duration "${JEPSEN_SECURE_DURATION:-30s}" -nemesis all -seed "$SEED" -secure -lin-timeout 60s
rc=$?
case $rc in
  0) echo "jepsen-ci: secure clean run passed" ;;
  3) echo "jepsen-ci: warning: secure run: the linearizability search did not finish (verdict unknown); no anomaly found" ;;
  *) echo "jepsen-ci: secure clean run FAILED (exit $rc)"; exit 1 ;;
esac
for fault in stale-read early-grant lock-conflict-grant; do
  $J -nodes 3 -duration 25s -nemesis isolate-leader,pause,partition-majority -seed "$SEED" -fault "$fault" -lin-timeout 60s >/tmp/jepsen-ci-$fault.out 2>&1
  rc=$?
  tail -3 /tmp/jepsen-ci-$fault.out
  if [ $rc = 1 ]; then
    echo "jepsen-ci: fault $fault caught"
  else
    echo "jepsen-ci: fault $fault NOT caught (exit $rc); output in /tmp/jepsen-ci-$fault.out"; exit 1
  fi
done
# Both wait faults in one build and one run (GRACKLE_FAULT takes a list):
# each breaks only its own primitive, and each checker must flag it.
wf=wg-early-complete,barrier-early-trip
$J -nodes 3 -duration 15s -nemesis pause -seed "$SEED" -fault "$wf" -lin-timeout 60s >/tmp/jepsen-ci-waits.out 2>&1
rc=$?
tail -3 /tmp/jepsen-ci-waits.out
for c in waitgroup barrier; do
  if [ $rc = 1 ] && grep -Eq "^jepsen: $c +anomaly" /tmp/jepsen-ci-waits.out; then
    echo "jepsen-ci: fault $wf caught by $c"
  else
    echo "jepsen-ci: fault $wf NOT caught by $c (exit $rc); output in /tmp/jepsen-ci-waits.out"; exit 1
  fi
done
