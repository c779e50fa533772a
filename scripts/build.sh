#!/usr/bin/env bash
# Configures and builds statetrack into build/ (or $STATETRACK_BUILD_DIR). Incremental: a second
# run rebuilds only what changed, and ccache makes a fresh build after a first one cheap.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${STATETRACK_BUILD_DIR:-$root/build}
jobs=${STATETRACK_JOBS:-$(nproc)}
"$root/scripts/install-deps.sh"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${STATETRACK_CMAKE_ARGS:-} >&2
fi
cmake --build "$build" -j "$jobs" >&2
