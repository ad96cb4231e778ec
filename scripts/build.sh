#!/usr/bin/env bash
# Configures and builds Arbiter into build/ (binaries in build/bin/). The CUDA
# backend and kernels are built when nvcc is found (/usr/local/cuda), else CPU only.
# run-daemon.sh and test.sh both build here with one build type, so whichever
# runs second reuses what the first built. RelWithDebInfo: optimized, with the
# symbols a crash report needs (the CPU kernel sets its own -O3).
set -euo pipefail
cd "$(dirname "$0")/.."
build_type=${ARBITER_BUILD_TYPE:-RelWithDebInfo}
cmake -S . -B build -DCMAKE_BUILD_TYPE="$build_type" ${ARBITER_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)" "$@"
