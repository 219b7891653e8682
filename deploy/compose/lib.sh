# Sourced by the compose tests (test.sh, test-secure.sh): with P (the
# compose project) and F (its file) set, dc runs compose on them, the
# cluster is torn down on exit (its last logs shown on failure), and
# retry / retry_quiet wait for a command to succeed.
G=${GRACKLE:-bin/grackle}
COMPOSE=${COMPOSE:-docker-compose}
IMAGE=${IMAGE:-grackle:dev}
dc() { GRACKLE_IMAGE=$IMAGE $COMPOSE -p "$P" -f "$F" "$@"; }
cleanup() {
  rc=$?
  [ $rc = 0 ] || dc logs --no-color --tail=40 >&2 2>/dev/null || true
  dc down -v >/dev/null 2>&1 || true
  exit $rc
}
trap cleanup EXIT
say() { printf '== %s\n' "$*"; }
# retry CMD...: up to 60 s; the successful attempt's output is kept (for $(...)).
retry() {
  for _ in $(seq 120); do "$@" && return 0; sleep 0.5; done
  "$@"
}
# retry_quiet CMD...: the same, silent but for the last attempt.
retry_quiet() { for _ in $(seq 120); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done; "$@"; }
