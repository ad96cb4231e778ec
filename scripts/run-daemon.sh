#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running daemon: installs what
# is missing, builds, and starts arbiterd in the foreground (Ctrl-C stops it).
# The backend is the GPU when one is visible, else the CPU; verdicts persist in
# ./arbiter.db. Extra arguments go to arbiterd (see `build/bin/arbiterd --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --target arbiterd arbiterctl
exec build/bin/arbiterd --listen 127.0.0.1:50051 --store ./arbiter.db --backend auto "$@"
