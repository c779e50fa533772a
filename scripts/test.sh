#!/usr/bin/env bash
# Every test: install what is missing, build, run all suites with ctest (its summary is printed),
# then a second stage: every non-CUDA suite under ASan + UBSan (scripts/test-sanitizers.sh,
# its own build folder build-asan; skip it with STATETRACK_SANITIZERS=0).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${STATETRACK_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
cd "$build"
ctest_status=0
ctest --output-on-failure -j "${STATETRACK_JOBS:-$(nproc)}" --timeout 1200 2>&1 | tee "$build/ctest.log" || ctest_status=$?
if [ "$ctest_status" -ne 0 ] || [ "${STATETRACK_SANITIZERS:-1}" = 0 ]; then exit "$ctest_status"; fi
echo
echo "== stage 2: sanitizers (ASan + UBSan) =="
sanitizer_status=0
"$root/scripts/test-sanitizers.sh" || sanitizer_status=$?
# The ctest summary of stage 1 again, last, where readers of the log look for it.
echo
echo "== stage 1 (ctest) summary =="
grep -E "tests passed|tests failed|Total Test time" "$build/ctest.log" || true
exit "$sanitizer_status"
