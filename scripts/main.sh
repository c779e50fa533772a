#!/usr/bin/env bash
# The main job: install what is missing, build, and run statetrack's report on the built-in
# languages. Extra arguments go to the report (for example: -o DIR).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${STATETRACK_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
# The report prints its progress on stderr and a summary table on stdout; exit 1 if a check fails.
"$build/cli/statetrack" report -o "${STATETRACK_REPORT_DIR:-report}" "$@"
