#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite: installs
# what is missing, builds everything, runs every test with ctest. GPU tests
# (label `gpu`) report themselves skipped where no GPU is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 900 -j"$(nproc)" "$@"
