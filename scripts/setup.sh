#!/usr/bin/env bash
# Installs what copytask needs to build and test on Debian, only what is missing.
# Extra arguments are further packages, e.g. `scripts/setup.sh python3-torch` (the
# baseline of scripts/bench.sh). Safe to run any number of times. Uses sudo when not root.
set -euo pipefail

packages=(
  cmake g++ make ninja-build git  # the toolchain
  libtorch-dev                    # LibTorch 1.13 (CPU)
  libopenblas0-pthread            # a fast BLAS for LibTorch; the reference BLAS is several times slower
  libcli11-dev nlohmann-json3-dev libspdlog-dev libgtest-dev
  zlib1g-dev                      # reads and writes an experiment's gzipped study files
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup: missing packages (${missing[*]}) and not root, and sudo is not installed." >&2
    echo "       Install them as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
