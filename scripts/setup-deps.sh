#!/usr/bin/env bash
# Installs what ttrace needs to build, test and run on Debian 12 (bookworm): Debian's packages
# for the C++ side, and the project's Python environment at ./.venv (torch 2.13.0 CPU, h5py,
# numpy, and the capture package itself, installed from ./python as a user would).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
packages=(
    build-essential cmake ninja-build pkg-config clang-format
    clang libclang-rt-14-dev
    qt6-base-dev libqcustomplot-dev libhdf5-dev libsqlite3-dev zlib1g-dev libopenmpi-dev openmpi-bin
    dpkg-dev desktop-file-utils appstream
    python3 python3-venv
    xvfb xauth
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
scripts/setup-venv.sh
