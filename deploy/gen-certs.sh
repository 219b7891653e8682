#!/usr/bin/env bash
# Makes the certificates of a TLS deployment with openssl, in OUT (default
# deploy/compose/certs, which git ignores: private keys are never
# committed):
#   api-ca.crt/.key      CA of the client API: signs the nodes' API
#                        certificates and the clients' (mutual TLS)
#   peer-ca.crt/.key     CA of the peers: signs only node peer certificates
#   NODE-api.crt/.key    API certificate of each node
#   NODE-peer.crt/.key   peer certificate of each node (Raft, forwarding)
#   client.crt/.key      a client certificate (CLI --cert/--key)
#   NODE/                what node NODE needs and nothing more: its own
#                        NODE-api and NODE-peer certificates and keys, and
#                        the two CA certificates (never a CA key); mount
#                        only this directory into the node's container
# Usage: deploy/gen-certs.sh [OUT] [NODE[=SAN,...]...]   (default nodes: n1 n2 n3)
# Each node certificate names the node (DNS:NODE), its Kubernetes peer
# names (NODE.grackle-peers, NODE.grackle-peers.*.svc.cluster.local when
# NODE is grackle-N), localhost and 127.0.0.1; add names to every node's
# with EXTRA_SANS="DNS:grackle.example.com,IP:10.0.0.1", and to one node's
# with NODE=SANS (n1=IP:10.0.0.11 n2=IP:10.0.0.12: each node's own address).
set -euo pipefail
OUT=${1:-deploy/compose/certs}
shift || true
NODES=("$@")
[ ${#NODES[@]} -gt 0 ] || NODES=(n1 n2 n3)
NAMES=()
DAYS=${DAYS:-365}
mkdir -p "$OUT"
cd "$OUT"

ca() { # name
  [ -f "$1.crt" ] && return
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.crt" \
    -days "$DAYS" -subj "/CN=grackle $1" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}
leaf() { # ca name sans
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n' "$3" >"$2.ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$2.key" -out "$2.csr" -subj "/CN=$2" 2>/dev/null
  openssl x509 -req -in "$2.csr" -CA "$1.crt" -CAkey "$1.key" -CAcreateserial -out "$2.crt" -days "$DAYS" -extfile "$2.ext" 2>/dev/null
  rm -f "$2.csr" "$2.ext"
}

ca api-ca
ca peer-ca
for spec in "${NODES[@]}"; do
  n=${spec%%=*}
  own=""
  [ "$n" != "$spec" ] && own=${spec#*=}
  sans="DNS:$n,DNS:$n.grackle-peers,DNS:$n.grackle-peers.default.svc.cluster.local,DNS:grackle,DNS:localhost,IP:127.0.0.1"
  [ -n "${EXTRA_SANS:-}" ] && sans="$sans,$EXTRA_SANS"
  [ -n "$own" ] && sans="$sans,$own"
  leaf api-ca "$n-api" "$sans"
  leaf peer-ca "$n-peer" "$sans"
  NAMES+=("$n")
done
leaf api-ca client "DNS:client"
rm -f ./*.srl

# Everything here stays the caller's, keys mode 0600: the CA keys above all
# (whoever holds one can mint a node or a client). Each node gets a
# directory of its own with only its files; the container runs as uid
# 65532, so as root those copies are handed to it (otherwise run the
# containers with your uid, or copy the files into a Secret).
chmod 600 ./*.key
for n in "${NAMES[@]}"; do
  rm -rf "$n" && mkdir -m 700 "$n"
  cp -p "$n-api.crt" "$n-api.key" "$n-peer.crt" "$n-peer.key" api-ca.crt peer-ca.crt "$n/"
  if [ "$(id -u)" = 0 ]; then
    chown -R 65532:65532 "$n"
  fi
done
echo "certificates in $OUT: api-ca.crt peer-ca.crt ${NAMES[*]/%/-api.crt} ${NAMES[*]/%/-peer.crt} client.crt (+ keys)"
