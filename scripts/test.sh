#!/usr/bin/env bash
# Every test: install what is missing, build, run all suites with ctest (its summary is printed).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${STATETRACK_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${STATETRACK_JOBS:-$(nproc)}" --timeout 1200
