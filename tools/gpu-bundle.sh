#!/bin/bash
# Packs what tools/gpu-check.sh runs on a GPU machine into .gpu/bundle.tar.xz (it builds
# nothing there): bin/ the test, bench and fuzz binaries built here, lib/ the shared
# libraries they load but the ones that machine has (glibc, libstdc++, libgcc, libcuda
# and the CUDA toolkit's), plugins/ Halide's autoscheduler plugins. Build first:
#   tools/build.sh device_tests e2e_tests lower_tests runtime_tests braze_bench_gpu braze-fuzz
#   (which builds braze-opencl-probe, a dependency of every target linking braze_device)
#   tools/gpu-bundle.sh        # then carry .gpu/ (and bench/, tools/) to the GPU machine
# Fails, naming it, on a binary not built; warns when the bundle passes 64 MiB (the
# most a device run carries).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BRAZE_BUILD_DIR:-$root/build}"
# braze-opencl-probe too: the test binaries find it beside them (src/device/opencl_probe.h);
# without it, OpenCL would be unavailable there for want of the probe.
bins=(test/device_tests test/e2e_tests test/lower_tests test/runtime_tests
      bench/braze_bench_gpu tools/braze-fuzz braze-opencl-probe)
# TUNE=1: braze-tune too, for tuning the GPU heuristic there (docs/CUDA.md, "GPU
# schedule tuning"; build it first: tools/build.sh braze-tune).
if [ "${TUNE:-0}" = 1 ]; then bins+=(tools/braze-tune); fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/plugins"
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || { echo "gpu-bundle: $build/$b is not built" >&2; exit 1; }
  cp "$build/$b" "$stage/bin/"
done
# Symbols are not needed there, and the bundle and the working tree share 64 MiB.
strip --strip-unneeded "$stage"/bin/*
# Every library ldd resolves for them, but the system's C/C++ runtime and CUDA's own.
skip='/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcublas[A-Za-z]*|libcudart)\.so'
for b in "$stage"/bin/*; do
  ldd "$b" | awk '/=> \//{print $3}'
done | sort -u | grep -Ev "$skip" | while read -r lib; do cp -L "$lib" "$stage/lib/"; done
cp -L /usr/lib/x86_64-linux-gnu/halide14/libautoschedule_*.so "$stage/plugins/"
mkdir -p "$root/.gpu"
XZ_OPT=${XZ_OPT:--9e -T0} tar -cJf "$root/.gpu/bundle.tar.xz" -C "$stage" bin lib plugins
size=$(stat -c %s "$root/.gpu/bundle.tar.xz")
echo "gpu-bundle: $root/.gpu/bundle.tar.xz, $((size / 1048576)) MiB," \
  "$(ls "$stage/lib" | wc -l) libraries"
((size <= 64 * 1048576)) || echo "gpu-bundle: WARNING: over 64 MiB, too big to carry" >&2
