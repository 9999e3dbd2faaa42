#!/usr/bin/env bash
# Configures and builds Braze (Release, Ninja) into build/ at the repository root.
#
#   tools/build.sh [ninja targets...]      # default: everything
#
# Environment: BRAZE_BUILD_DIR (default build), BRAZE_BUILD_JOBS (default: all cores),
# BRAZE_SANITIZE (address,undefined | address | undefined | thread: a sanitized build, in
# build-asan or build-tsan unless BRAZE_BUILD_DIR says otherwise).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitize="${BRAZE_SANITIZE:-}"
default_dir="$root/build"
case "$sanitize" in
  "") ;;
  thread) default_dir="$root/build-tsan" ;;
  *) default_dir="$root/build-asan" ;;
esac
build_dir="${BRAZE_BUILD_DIR:-$default_dir}"
jobs="${BRAZE_BUILD_JOBS:-$(nproc)}"

cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRAZE_SANITIZE="$sanitize"
targets=()
if (($# > 0)); then targets=(--target "$@"); fi
cmake --build "$build_dir" --parallel "$jobs" "${targets[@]}"
