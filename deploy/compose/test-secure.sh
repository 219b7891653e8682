#!/usr/bin/env bash
# The TLS + ACL compose cluster end to end: certificates by openssl
# (deploy/gen-certs.sh), 3 nodes with client mutual TLS, peer TLS and
# --acl; bootstrap, a token per role, the refusals; torn down on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
P=grackle-sec$$
F=deploy/compose/docker-compose.3-secure.yml
C=deploy/compose/certs
. deploy/compose/lib.sh

bash deploy/gen-certs.sh "$C" n1 n2 n3 >/dev/null
export GRACKLE_ENDPOINTS=127.0.0.1:7420,127.0.0.1:7430,127.0.0.1:7440
export GRACKLE_CACERT=$C/api-ca.crt GRACKLE_CERT=$C/client.crt GRACKLE_KEY=$C/client.key
say "starting 3 nodes with mutual TLS, peer TLS and --acl"
dc up -d
retry_quiet "$G" cluster status
say "bootstrap"
ROOT=$("$G" acl bootstrap -o id)
export GRACKLE_TOKEN=$ROOT
"$G" namespace create third_parties
W=$("$G" acl token create --role write --namespace third_parties -o id)
GRACKLE_TOKEN=$W "$G" semaphore create third_parties partner_1 --permits 2
say "a write token may not delete the namespace"
if out=$(GRACKLE_TOKEN=$W "$G" namespace delete third_parties 2>&1); then echo "write token deleted a namespace"; exit 1; fi
grep -q PermissionDenied <<<"$out"
say "no token: Unauthenticated"
if out=$(GRACKLE_TOKEN= "$G" semaphore get third_parties partner_1 2>&1); then echo "call without a token succeeded"; exit 1; fi
grep -q Unauthenticated <<<"$out"
say "plaintext against TLS fails at once and says so"
if out=$(GRACKLE_CACERT= GRACKLE_CERT= GRACKLE_KEY= "$G" cluster status 2>&1); then echo "plaintext succeeded"; exit 1; fi
grep -q "the server expects TLS" <<<"$out"
say "the leader's container stops; writes resume (peer TLS between the others)"
L=$("$G" cluster status -o json | sed -n 's/.*"leader_id": *"\([^"]*\)".*/\1/p' | head -1)
dc stop "$L" >/dev/null
retry_quiet "$G" semaphore create third_parties partner_2 --permits 1
say "ok"
