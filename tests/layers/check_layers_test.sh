#!/bin/bash
# Tests scripts/check_layers.py on tiny source trees built in a temporary folder: a cycle
# between two top-level folders, the same tree without it, a cycle one level down reached
# through a relative include, and an include that its folder's CMake target does not link.
# Usage: tests/layers/check_layers_test.sh   (python3 only; no build needed)
set -euo pipefail
check="$(cd "$(dirname "$0")/../.." && pwd)/scripts/check_layers.py"
tmp=$(mktemp -d /tmp/check-layers-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect RC PATTERN ARGS...: check_layers.py ARGS exits RC and prints a line matching PATTERN.
expect() {
  local want=$1 pattern=$2 rc=0
  shift 2
  python3 "$check" "$@" >"$tmp/out" 2>&1 || rc=$?
  if [[ $rc != "$want" ]] || ! grep -qE -- "$pattern" "$tmp/out"; then
    echo "FAIL: check_layers.py $* exited $rc (want $want), output should match '$pattern':"
    sed 's/^/  | /' "$tmp/out"
    failures=$((failures + 1))
  fi
}
# file PATH LINES...: writes a source file under the fake tree.
file() { mkdir -p "$(dirname "$tmp/$1")"; local path=$1; shift; printf '%s\n' "$@" >"$tmp/$path"; }

root=$tmp/src/lockstep
file src/lockstep/a/x.h '#pragma once' '#include "lockstep/b/y.h"'
file src/lockstep/a/z.h '#pragma once'
file src/lockstep/b/y.h '#pragma once' '#include <vector>' '#include "lockstep/a/z.h"'
file src/lockstep/umbrella.h '#include "lockstep/a/x.h"' '#include "lockstep/b/y.h"'
expect 1 '^cycle in .*/src/lockstep/: a -> b -> a$' "$root"
expect 1 '^  a -> b: .*/src/lockstep/a/x.h:2 -> lockstep/b/y.h$' "$root"
expect 1 '^  b -> a: .*/src/lockstep/b/y.h:3 -> lockstep/a/z.h$' "$root"

file src/lockstep/b/y.h '#pragma once' '#include <vector>'
expect 0 '^layers: 2 folders, 1 include edges, no cycle$' "$root"

# One level down, through an include relative to the file's own folder: a cycle inside a/.
file src/lockstep/a/p/u.cc '#include "lockstep/a/q/v.h"'
file src/lockstep/a/q/v.h '#pragma once' '#include "../p/w.h"'
file src/lockstep/a/p/w.h '#pragma once'
expect 1 '^cycle in .*/src/lockstep/a: p -> q -> p$' "$root"
expect 1 '^  q -> p: .*/src/lockstep/a/q/v.h:2 -> \.\./p/w.h$' "$root"
rm "$root/a/q/v.h" && file src/lockstep/a/q/v.h '#pragma once'

# The link check: a links b, which links d; b links nothing else, so b may not include e.
file CMakeLists.txt '# A layer links only the layers below it.' 'lockstep_layer(d)' 'lockstep_layer(e)' \
  'lockstep_layer(b DEPS lockstep_d Threads::Threads)' 'lockstep_layer(a' '  DEPS lockstep_b)'
file src/lockstep/d/f.h '#pragma once'
file src/lockstep/e/g.h '#pragma once'
file src/lockstep/a/z.h '#pragma once' '#include "lockstep/d/f.h"'
expect 0 'no cycle, every include within its CMake links$' "$root" --cmake "$tmp/CMakeLists.txt"
file src/lockstep/b/y.cc '#include "lockstep/b/y.h"' '#include "lockstep/e/g.h"'
expect 1 '^b/ includes e/ but b/ does not link e/ in ' "$root" --cmake "$tmp/CMakeLists.txt"
expect 1 '^  .*/src/lockstep/b/y.cc:2 -> lockstep/e/g.h$' "$root" --cmake "$tmp/CMakeLists.txt"
expect 1 ', 0 cycles, 1 unlinked$' "$root" --cmake "$tmp/CMakeLists.txt"
file src/lockstep/c/k.h '#include "lockstep/b/y.h"'
expect 1 '^c/ includes b/ but c/ is built by no target in ' "$root" --cmake "$tmp/CMakeLists.txt"

if ((failures)); then
  echo "check_layers_test: $failures failed"
  exit 1
fi
echo "check_layers_test: all passed"
