#!/usr/bin/env bash
# Installs what Braze needs to build and test on Debian 12 (bookworm). Idempotent: only
# missing packages are installed, and `apt-get update` runs only when something is
# missing, so a second run takes well under a second.
#
#   tools/setup.sh            # as root, or as a user with sudo
set -euo pipefail

packages=(
  cmake ninja-build gcc g++    # toolchain (project(braze C CXX) needs a C compiler too)
  ccache                       # rebuilds on a 2-core machine: CMake uses it when present
  libhalide14-0-dev            # Halide 14: lowering, scheduling, JIT
  llvm-14-dev                  # Halide's CMake config runs find_dependency(LLVM 14)
  libabsl-dev                  # absl::Status and friends
  libgtest-dev libgmock-dev    # tests (gmock matchers are a separate package)
  libbenchmark-dev             # bench/
  zlib1g-dev                   # the .gz IDX reader, checksums
  nlohmann-json3-dev           # JSON: safetensors headers, checkpoint manifests
  dataset-fashion-mnist        # /usr/share/datasets/fashion-mnist (demo and data tests)
  graphviz                     # dot, for graph and cluster dumps
  pocl-opencl-icd              # OpenCL on the CPU: the GPU schedules run here (opencl:0)
  ocl-icd-libopencl1           # the OpenCL ICD loader (libOpenCL.so.1)
  libdnnl-dev                  # CPU matmuls call oneDNN (docs/CPU_GEMM.md); also a peer
  libeigen3-dev                # bench peers: braze_bench runs the workloads with Eigen,
  libopenblas-dev              #   oneDNN and OpenBLAS too (each skipped when absent)
  libtorch-dev                 # bench peer: libtorch (PyTorch's C++ API), what a C++ user
                               #   would pick instead of Braze (bench/peers_torch.cc)
  fortunes                     # /usr/share/games/fortunes: the char_lm example's text
  python3-matplotlib           # tools/braze-plot (benchmark JSON -> PNG) and its test
  openmpi-bin libopenmpi-dev   # data parallelism: mpirun and MPI (docs/DISTRIBUTED.md)
)

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup.sh: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if ((EUID != 0)); then
  if ! command -v sudo >/dev/null; then
    echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi

echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
# No recommends: they add fonts and docs, not anything the build or tests use.
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
