#!/usr/bin/env bash
# Configures and builds Arbiter into build/ (binaries in build/bin/). The CUDA
# backend and kernels are built when nvcc is found (/usr/local/cuda), else CPU only.
set -euo pipefail
cd "$(dirname "$0")/.."
build_type=${ARBITER_BUILD_TYPE:-Release}
cmake -S . -B build -DCMAKE_BUILD_TYPE="$build_type" ${ARBITER_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)" "$@"
