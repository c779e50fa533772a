#!/usr/bin/env bash
# Installs the Debian packages statetrack needs, only those that are missing (seconds when all
# are present). Run as root on Debian 12; CUDA is used from /usr/local/cuda when it exists.
set -euo pipefail
packages=(
  cmake ninja-build g++ ccache pkg-config git
  libeigen3-dev libboost-dev libgmp-dev libmpfr-dev libmpfi-dev
  libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev libcli11-dev
  graphviz python3 python3-nbconvert python3-ipykernel python3-matplotlib python3-numpy
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "statetrack: installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
