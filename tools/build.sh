#!/usr/bin/env bash
# Configures and builds Braze (Release, Ninja) into build/ at the repository root.
#
#   tools/build.sh [ninja targets...]      # default: everything
#
# Environment: BRAZE_BUILD_DIR (default build), BRAZE_BUILD_JOBS (default: all cores).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BRAZE_BUILD_DIR:-$root/build}"
jobs="${BRAZE_BUILD_JOBS:-$(nproc)}"

cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
targets=()
if (($# > 0)); then targets=(--target "$@"); fi
cmake --build "$build_dir" --parallel "$jobs" "${targets[@]}"
