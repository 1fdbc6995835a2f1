#!/bin/bash
# ctest PackageExamples: installs lockstep from the build tree into a temporary prefix, builds
# each example in examples/ out of tree against that installed copy only (find_package, and
# once through pkg-config), and runs them: on 2 threads and on 2 MPI processes, the loss below
# a stated bound, a checkpoint resumed (across backends), the --deterministic weights hash the
# same at 1 and 2 workers, bad input exit 2.
# Usage: examples_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$(realpath "$1")
BUILD=$(realpath "$2")
WORK=$(mktemp -d /tmp/lockstep-package.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $*" >&2; exit 1; }

PREFIX=$WORK/prefix
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
[ -f "$PREFIX/include/lockstep/lockstep.h" ] && [ -x "$PREFIX/bin/lockstep" ] || fail "install incomplete"
[ ! -e "$PREFIX/include/lockstep/comm" ] || fail "internal headers (comm/) were installed"
"$PREFIX/bin/lockstep" --version | grep -q "^lockstep [0-9]" || fail "installed lockstep --version"

# Configure and build both examples at once (the two cores are used by one each).
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
build_example() {
  cmake -S "$SRC/examples/$1" -B "$WORK/build-$1" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/$1.build.log" 2>&1 &&
    cmake --build "$WORK/build-$1" >>"$WORK/$1.build.log" 2>&1
}
build_example mlp_regression & a=$!
build_example custom_data & b=$!
wait $a || { cat "$WORK/mlp_regression.build.log"; fail "mlp_regression does not build"; }
wait $b || { cat "$WORK/custom_data.build.log"; fail "custom_data does not build"; }
cd "$WORK"

# run NAME ARGS...: runs an example, expects exit 0, prints its last line (the done line).
run() {
  local name=$1
  shift
  "$WORK/build-$name/$name" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || {
    cat "$WORK/err.txt"
    fail "$name $* exited $?"
  }
  tail -n 1 "$WORK/out.txt"
}
val_loss() { sed -n 's/.*val_loss \([0-9.]*\).*/\1/p' <<<"$1"; }
hash_of() { sed -n 's/.*weights_xxh64 \([0-9a-f]*\).*/\1/p' <<<"$1"; }
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a < b) }' || fail "$3: loss '$1' is not below $2"; }

echo "== mlp_regression (bound: val_loss < 0.05)"
line=$(run mlp_regression --nproc 2 --out threads)
echo "threads x2: $line"
below "$(val_loss "$line")" 0.05 "mlp_regression on 2 threads"
line=$(run mlp_regression --nproc 2 --backend mpi --out mpi)
echo "mpi x2:     $line"
below "$(val_loss "$line")" 0.05 "mlp_regression on 2 MPI processes"
det1=$(hash_of "$(run mlp_regression --nproc 1 --deterministic --out det1)")
det2=$(hash_of "$(run mlp_regression --nproc 2 --deterministic --out det2)")
echo "deterministic hash: 1 worker $det1, 2 workers $det2"
[ -n "$det1" ] && [ "$det1" = "$det2" ] || fail "deterministic hash differs: $det1 vs $det2"
# Half the run on 2 threads, the rest resumed from its checkpoint on 2 MPI processes.
run mlp_regression --nproc 2 --deterministic --steps 150 --out resumed >/dev/null
line=$(run mlp_regression --nproc 2 --backend mpi --deterministic --out resumed --resume auto)
grep -q "resumed from .*step-00000150 at step 150" "$WORK/err.txt" || fail "the MPI run did not resume at step 150"
echo "resumed at 150 on mpi: $line"
[ "$(hash_of "$line")" = "$det1" ] || fail "resumed run's hash $(hash_of "$line") != $det1"

echo "== custom_data: the built-in CNN on CSV files (bound: val_loss < 0.9)"
python3 "$SRC/tests/package/fashion_csv.py" /usr/share/datasets/fashion-mnist train 3000 train.csv
python3 "$SRC/tests/package/fashion_csv.py" /usr/share/datasets/fashion-mnist t10k 1000 val.csv
csv=(--set csv.train=train.csv --set csv.val=val.csv)
line=$(run custom_data --nproc 2 "${csv[@]}" --out cnn-threads)
echo "threads x2: $line"
below "$(val_loss "$line")" 0.9 "custom_data on 2 threads"
c1=$(hash_of "$(run custom_data --nproc 1 --deterministic "${csv[@]}" --steps 40 --out cnn-det1)")
line=$(run custom_data --nproc 2 --backend mpi --deterministic "${csv[@]}" --steps 40 --out cnn-mpi)
echo "mpi x2 deterministic: $line"
[ -n "$c1" ] && [ "$(hash_of "$line")" = "$c1" ] || fail "custom_data: deterministic hash differs at 1 and 2 workers"
set +e
"$WORK/build-custom_data/custom_data" --set csv.train=missing.csv >/dev/null 2>"$WORK/err.txt"
code=$?
set -e
[ $code = 2 ] && grep -q "cannot open 'missing.csv'" "$WORK/err.txt" || fail "a missing CSV: exit $code, $(cat "$WORK/err.txt")"

echo "== pkg-config"
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
# shellcheck disable=SC2046
c++ -O1 "$SRC/examples/mlp_regression/main.cc" -o mlp_pc $(pkg-config --cflags --libs lockstep) ||
  fail "mlp_regression does not build with pkg-config"
line=$(./mlp_pc --steps 20 --out pc | tail -n 1)
echo "pkg-config build: $line"
[ -n "$(hash_of "$line")" ] || fail "the pkg-config build did not train"
echo "PASS"
