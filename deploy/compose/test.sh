#!/usr/bin/env bash
# Builds nothing itself (make compose-test builds the image and the CLI):
# starts the 3-node compose cluster, drives the README tour through the
# CLI, stops the leader's container, checks that writes resume on the
# others, and tears it all down (also on failure).
set -euo pipefail
cd "$(dirname "$0")/../.."
P=grackle-ci$$
F=deploy/compose/docker-compose.3.yml
EP=127.0.0.1:7420,127.0.0.1:7430,127.0.0.1:7440
. deploy/compose/lib.sh

say "starting 3 nodes"
dc up -d
all_healthy() { # every container's health check (grackle health: /readyz) passes
  local n=0
  for c in $(dc ps -q); do
    [ "$(docker inspect -f '{{.State.Health.Status}}' "$c")" = healthy ] || return 1
    n=$((n + 1))
  done
  [ "$n" = 3 ]
}
retry all_healthy || { echo "not every node became ready"; exit 1; }
say "all 3 nodes ready"
$G namespace list --endpoints "$EP" >/dev/null
$G version
for c in $(dc ps -q); do
  [ "$(docker inspect -f '{{.Config.User}}' "$c")" = 65532:65532 ] || { echo "container $c does not run as 65532"; exit 1; }
done

say "the README tour"
$G namespace create third_parties --endpoints "$EP" >/dev/null
$G semaphore create third_parties partner_1 --permits 20 --endpoints "$EP" >/dev/null
LEASE=$($G lease create third_parties --process-id host-123/pid-4567 --ttl 60 -o id --endpoints "$EP")
TOKEN=$($G semaphore acquire third_parties partner_1 --lease "$LEASE" --weight 3 --wait 10s -o id --endpoints "$EP")
HOLDS=$($G semaphore get third_parties partner_1 -o template='{{.semaphore.active_holds}}' --endpoints "$EP")
[ "$HOLDS" = 3 ] || { echo "active_holds $HOLDS, want 3"; exit 1; }

say "grackle run from the host (members advertise n1:7420...: the client goes through the endpoints)"
OUT=$($G run --endpoints "$EP" --namespace third_parties --semaphore partner_1 --weight 2 --wait 10s -- \
  sh -c 'echo "lease=$GRACKLE_LEASE_ID token=$GRACKLE_FENCING_TOKEN"')
echo "$OUT"
case "$OUT" in *"lease=ls_"*"token="[0-9]*) ;; *) echo "grackle run did not run the command"; exit 1 ;; esac

say "stopping the leader's container"
LEADER=$($G cluster status -o id --endpoints "$EP")
echo "leader: $LEADER"
dc kill "$LEADER" >/dev/null
ALIVE=$(echo "$EP" | tr ',' '\n' | awk -v l="$LEADER" '{ if ("n" NR != l) print }' | paste -sd, -)

say "writes resume on $ALIVE"
retry $G semaphore release third_parties partner_1 --lease "$LEASE" --endpoints "$ALIVE" >/dev/null
L2=$(retry $G lease create third_parties --process-id host-999/pid-1 --ttl 60 -o id --endpoints "$ALIVE")
T2=$($G semaphore acquire third_parties partner_1 --lease "$L2" --weight 5 --wait 10s -o id --endpoints "$ALIVE")
[ "$T2" -gt "$TOKEN" ] || { echo "fencing token $T2 not above $TOKEN"; exit 1; }
NEW=$($G cluster status -o id --endpoints "$ALIVE")
[ "$NEW" != "$LEADER" ] || { echo "leader did not change"; exit 1; }
echo "new leader: $NEW; token $TOKEN -> $T2"
say "compose test passed"
