#!/bin/bash
# Installs the Debian packages lockstep needs (only those missing), then configures and
# builds Release into build/. Idempotent: a second run with nothing changed is a no-op build.
# Usage: scripts/setup.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ pkg-config
  libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev libcli11-dev libtomlplusplus-dev libxxhash-dev zlib1g-dev
  libpcre2-dev  # the tokenizer's regexes (\p{L}, lookahead: src/lockstep/text/)
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  fortunes dataset-fashion-mnist
  python3 iproute2
  slurmctld slurmd slurm-client munge  # a real Slurm on the emulated cluster (tests/scripts/slurm_test.sh)
  chromium  # the `lockstep report` browser test renders a report headless (tests/cli/report_test.cc)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUILD_DIR=${LOCKSTEP_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
cmake --build "$BUILD_DIR" -- -j"$(nproc)" | grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' || true
test "${PIPESTATUS[0]}" -eq 0
