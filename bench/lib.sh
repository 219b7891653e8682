# Sourced by compare.sh and profile.sh: the PIDs of the servers a script
# starts go into PIDS, and every one is stopped (and waited for) when the
# script ends, also on Ctrl-C.
PIDS=()
stop_all() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap stop_all EXIT
trap 'stop_all; exit 130' INT TERM
