# Sourced by the shell tests here: `check "what" command...` prints ok/FAIL and counts failures
# in $failures; `missing "what"` skips the test, or fails it under LOCKSTEP_CI=1, where every
# prerequisite must be there (tests/test_env.h does the same for the C++ tests).
failures=0
check() {
  local what=$1
  shift
  if "$@"; then echo "ok    $what"; else echo "FAIL  $what"; failures=$((failures + 1)); fi
}
missing() {
  if [ "${LOCKSTEP_CI:-}" = 1 ]; then echo "FAIL  LOCKSTEP_CI=1 and this test needs $1"; exit 1; fi
  echo "skip: needs $1"
  exit 0
}
# The emulated-cluster tests need root and network namespaces: `missing` otherwise. $1 names a
# throwaway namespace for the probe.
need_namespaces() {
  [ "$(id -u)" -eq 0 ] || missing "root"
  ip netns add "$1" 2>/dev/null || missing "network namespaces (ip netns add)"
  ip netns del "$1"
}
