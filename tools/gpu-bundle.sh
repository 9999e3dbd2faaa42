#!/bin/bash
# Packs what tools/gpu-check.sh runs on a GPU machine into .gpu/bundle.tar.xz (it builds
# nothing there): bin/ the test, bench and fuzz binaries built here, lib/ the shared
# libraries they load but the ones that machine has (glibc, libstdc++, libgcc, libcuda
# and the CUDA toolkit's), plugins/ Halide's autoscheduler plugins. Build first:
#   tools/build.sh device_tests e2e_tests lower_tests runtime_tests braze_bench_gpu braze-fuzz
#   (which builds braze-opencl-probe, a dependency of every target linking braze_device)
#   tools/gpu-bundle.sh        # then carry .gpu/ (and bench/, tools/) to the GPU machine
#
#   QUICK=1   the binaries a QUICK gpu-check runs: no e2e_tests (E2E=1 keeps it)
#   TUNE=1    braze-tune too, for gpu-check's TUNE=1 (build it first: tools/build.sh
#             braze-tune; docs/CUDA.md, "GPU schedule tuning")
#   STUBS=0   the real libz3 and libicudata (below) instead of stand-ins
#
# A device run carries the working tree (tracked and untracked-not-ignored files) and
# .gpu/, 64 MiB in all: the script adds them up and fails, naming each part, when they
# pass it (LIMIT_MIB, default 60: see below). Fails, naming it, on a binary not built.
#
# Two libraries are carried as stand-ins (STUBS=1, the default), 14.5 of the bundle's
# 52 MB (xz) on 2026-11-30: Debian's libLLVM-14 links libz3 (23 MB, used by clang's
# static analyzer alone) and, through libxml2 (LLVM's Windows manifest tool), ICU's
# libicudata (31 MB of locale tables). Halide calls neither, but the loader needs both
# present. The stand-in libz3 defines every Z3_ function the bundle's binaries and
# libraries import, each printing its name and aborting if ever called (never silent);
# libicudata's is an ICU data package with an empty table of contents (ICU's own
# "stubdata" idea), so an ICU lookup fails with ICU's error status instead of crashing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BRAZE_BUILD_DIR:-$root/build}"
# 60, not 64: on 2026-11-30 the tool refused a call that carried 63.8 MiB counted this
# way (bytes of the files), so its own count is larger (disk blocks, or 10^6-byte MB).
limit_mib=${LIMIT_MIB:-60}
# braze-opencl-probe too: the test binaries find it beside them (src/device/opencl_probe.h);
# without it, OpenCL would be unavailable there for want of the probe.
bins=(test/device_tests test/lower_tests test/runtime_tests bench/braze_bench_gpu
      tools/braze-fuzz braze-opencl-probe)
# e2e_tests: the full run's, and QUICK's with E2E_TESTS.
if [ "${QUICK:-0}" != 1 ] || [ "${E2E:-0}" = 1 ]; then bins+=(test/e2e_tests); fi
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
cp -L /usr/lib/x86_64-linux-gnu/halide14/libautoschedule_*.so "$stage/plugins/"
# A library ldd cannot find would fail only on the GPU machine, in device time: fail here.
for b in "$stage"/bin/* "$stage"/plugins/*; do
  if ldd "$b" | grep -q 'not found'; then
    echo "gpu-bundle: $(basename "$b") needs libraries this machine lacks:" >&2
    ldd "$b" | grep 'not found' >&2
    exit 1
  fi
done
for b in "$stage"/bin/* "$stage"/plugins/*; do
  ldd "$b" | awk '/=> \//{print $3}'
done | sort -u | grep -Ev "$skip" | while read -r lib; do cp -L "$lib" "$stage/lib/"; done

# The stand-ins (see the top). Each replaces the library under its own soname.
stub_z3() {
  local lib=$1 c=$stage/z3_stub.c syms
  syms=$(nm -D --undefined-only "$stage"/bin/* "$stage"/lib/*.so* "$stage"/plugins/*.so 2>/dev/null |
    awk '$2 ~ /^Z3_/ {sub(/@.*/, "", $2); print $2}' | sort -u)
  [ -n "$syms" ] || { echo "gpu-bundle: nothing imports Z3_ functions from $lib" >&2; exit 1; }
  cat >"$c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
static void gone(const char* f) {
  fprintf(stderr, "%s called: libz3 was left out of the GPU bundle (tools/gpu-bundle.sh, STUBS=0 keeps it)\n", f);
  abort();
}
EOF
  for s in $syms; do echo "void $s(void) { gone(\"$s\"); }"; done >>"$c"
  cc -shared -fPIC -O1 -o "$stage/lib/$(basename "$lib")" -Wl,-soname,"$(basename "$lib")" "$c"
  echo "gpu-bundle: $(basename "$lib") is a stand-in ($(wc -w <<<"$syms") functions that abort)"
}
stub_icudata() {
  local lib=$1 c=$stage/icudata_stub.c entry
  entry=$(nm -D --defined-only "$lib" | awk '$3 ~ /^icudt[0-9]+_dat$/ {print $3}')
  [ -n "$entry" ] || { echo "gpu-bundle: no icudt*_dat in $lib" >&2; exit 1; }
  # ICU's common-data header: headerSize 32, magic 0xda 0x27, a UDataInfo (size 20,
  # little-endian, ASCII, 2-byte UChar, format "CmnD" 1.0), then a table of contents
  # with no entries: every lookup misses.
  cat >"$c" <<EOF
const struct {
  unsigned short header_size;
  unsigned char magic1, magic2;
  unsigned short info_size, reserved;
  unsigned char big_endian, charset_family, sizeof_uchar, reserved2;
  unsigned char format[4], format_version[4], data_version[4];
  unsigned char padding[8];
  unsigned int count, reserved3;
} $entry = {32, 0xda, 0x27, 20, 0, 0, 0, 2, 0, {'C', 'm', 'n', 'D'}, {1, 0, 0, 0},
            {0, 0, 0, 0}, {0}, 0, 0};
EOF
  cc -shared -fPIC -O1 -o "$stage/lib/$(basename "$lib")" -Wl,-soname,"$(basename "$lib")" "$c"
  echo "gpu-bundle: $(basename "$lib") is a stand-in (ICU data with no entries)"
}
if [ "${STUBS:-1}" = 1 ]; then
  for lib in "$stage"/lib/libz3.so.*; do [ -e "$lib" ] && stub_z3 "$lib"; done
  for lib in "$stage"/lib/libicudata.so.*; do [ -e "$lib" ] && stub_icudata "$lib"; done
  rm -f "$stage"/*.c
fi

mkdir -p "$root/.gpu"
XZ_OPT=${XZ_OPT:--9e -T0} tar -cJf "$root/.gpu/bundle.tar.xz" -C "$stage" bin lib plugins
size=$(stat -c %s "$root/.gpu/bundle.tar.xz")
echo "gpu-bundle: $root/.gpu/bundle.tar.xz, $((size / 1048576)) MiB ($size bytes)," \
  "$(find "$stage/bin" -type f | wc -l) binaries, $(find "$stage/lib" -type f | wc -l) libraries"

# What a device run carries: the working tree as git sees it (tracked files and
# untracked ones not ignored, as they are on disk) plus .gpu/ (the bundle, carried).
# (A tracked file deleted on disk is not carried: stat's failure for it is not an error.)
tree=$(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  { xargs -0 -r stat -c %s 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')
gpu=$(du -sb "$root/.gpu" | cut -f1)
total=$((tree + gpu))
limit=$((limit_mib * 1048576))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
if ((total > limit)); then
  echo "gpu-bundle: FAILED: a device run would carry $(mib "$total"), over the $limit_mib MiB" \
    "it may (the working tree $(mib "$tree") + .gpu/ $(mib "$gpu")): pack less (QUICK=1," \
    "no TUNE, STUBS=1, the default XZ_OPT) or leave untracked files out of the tree" >&2
  exit 1
fi
echo "gpu-bundle: a device run carries $(mib "$total"): the working tree $(mib "$tree")" \
  "and .gpu/ $(mib "$gpu"), of $limit_mib MiB; $(mib $((limit - total))) to spare"
