#!/usr/bin/env bash
# Installs the Debian 12 packages Arbiter builds, runs and tests with. Idempotent:
# packages already present are left alone, and apt is only touched when one is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev libabsl-dev
  libspdlog-dev prometheus-cpp-dev libgtest-dev libsqlite3-dev libopenblas-dev libpq-dev
  postgresql
  prometheus python3-grpcio python3-grpc-tools yamllint curl
  # The Python client (client/python): stubs by protoc + grpc_python_plugin, an offline
  # pip build, its pytest suite. python3-torch brings ~170 packages (about a minute here).
  protobuf-compiler python3-protobuf python3-numpy python3-pip python3-setuptools python3-wheel
  python3-pytest python3-tqdm python3-torch
  # Sanitizer builds and libFuzzer targets (scripts/sanitize.sh, scripts/fuzz.sh).
  clang-14 libclang-rt-14-dev libfuzzer-14-dev
  # bench/plot.py draws arbiter-bench's plots from its CSV.
  python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
