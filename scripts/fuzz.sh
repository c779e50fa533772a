#!/usr/bin/env bash
# A libFuzzer campaign over the loaders (tests/fuzz). Usage:
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default: 60 s each, every target)
#   scripts/fuzz.sh bundle [DIR]     (default DIR: .fuzzbundle, ignored by git) builds every target
#     and puts into DIR what a campaign needs on an x86-64 Linux without clang: bin/ (the targets),
#     lib/ (the shared libraries they need beyond glibc and libstdc++: fmt, GMP, MPFR, MPFI), corpus/
#     (seeds + regressions) and run.sh (tests/fuzz/campaign.sh): DIR/run.sh SECONDS PROCS OUTDIR.
# Targets: dfa_json att lrnn word checkpoint sweep. Environment: FUZZ_RUNS=N stops each target after N
# inputs instead; FUZZ_PARALLEL=N runs N targets at once (default 1); FUZZ_FORK=N gives each target
# N processes (libFuzzer -fork, which also goes on after a finding); STATETRACK_FUZZ_DIR picks the
# build folder (default build-fuzz, configured here with clang); FUZZ_PREBUILT=1 skips the build
# (binaries already in $STATETRACK_FUZZ_DIR/tests/fuzz, e.g. carried to another machine). Findings land in
# build-fuzz/findings/TARGET/ (crash-*, leak-*, timeout-*, oom-*); after the fix, copy each into
# tests/fuzz/regressions/TARGET/ so that test_robustness replays it. A summary table is printed
# and written to build-fuzz/campaign.json.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${STATETRACK_FUZZ_DIR:-$root/build-fuzz}
all_targets=(dfa_json att lrnn word checkpoint sweep)

configure() {
  [ -f "$build/build.ninja" ] && return
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
        -DSTATETRACK_FUZZ=ON -DSTATETRACK_WITH_CUDA=OFF -DSTATETRACK_BUILD_BENCH=OFF >&2
}

if [ "${1:-}" = bundle ]; then
  dest=${2:-$root/.fuzzbundle}
  if [ -z "${FUZZ_PREBUILT:-}" ]; then
    configure
    cmake --build "$build" -j "${STATETRACK_JOBS:-2}" --target $(printf 'fuzz_%s ' "${all_targets[@]}") >&2
  fi
  if [ "$dest" = "$root/.fuzzbundle" ]; then
    exclude=$(git -C "$root" rev-parse --path-format=absolute --git-path info/exclude)
    mkdir -p "$(dirname "$exclude")"  # a fresh clone may have no .git/info
    grep -qx '/.fuzzbundle/' "$exclude" 2>/dev/null || echo '/.fuzzbundle/' >>"$exclude"
  fi
  rm -rf "$dest"
  mkdir -p "$dest/bin" "$dest/lib" "$dest/corpus"
  for t in "${all_targets[@]}"; do
    cp "$build/tests/fuzz/fuzz_$t" "$dest/bin/"
    mkdir -p "$dest/corpus/$t"
    cp "$root/tests/fuzz/corpus/$t/"* "$root/tests/fuzz/regressions/$t/"* "$dest/corpus/$t/" 2>/dev/null || true
    rm -f "$dest/corpus/$t/README.md"
    # Every shared library but the C runtime and libstdc++, which the target machine has (newer).
    ldd "$build/tests/fuzz/fuzz_$t" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
      case $(basename "$lib") in
        libc.so* | libm.so* | libstdc++.so* | libgcc_s.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux*) ;;
        *) cp -L "$lib" "$dest/lib/" ;;
      esac
    done
  done
  cp "$root/tests/fuzz/campaign.sh" "$dest/run.sh"
  chmod +x "$dest/run.sh"
  echo "bundle: $dest ($(du -sh "$dest" | cut -f1)); run: $dest/run.sh SECONDS PROCS_PER_TARGET OUTDIR" >&2
  exit 0
fi

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
parallel=${FUZZ_PARALLEL:-1}

[ -n "${FUZZ_PREBUILT:-}" ] || configure
[ -n "${FUZZ_PREBUILT:-}" ] || cmake --build "$build" -j "${STATETRACK_JOBS:-2}" --target $(printf 'fuzz_%s ' "${targets[@]}") >&2

run_target() {
  local t=$1 work="$build/campaign/$1" findings="$build/findings/$1"
  mkdir -p "$work/corpus" "$findings"
  # The seeds and every past finding start the corpus; what the campaign adds stays in $work.
  cp -n "$root/tests/fuzz/corpus/$t/"* "$work/corpus/" 2>/dev/null || true
  cp -n "$root/tests/fuzz/regressions/$t/"* "$work/corpus/" 2>/dev/null || true
  rm -f "$work/corpus/README.md"
  local limit=(-max_total_time="$seconds")
  [ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS")
  [ -n "${FUZZ_FORK:-}" ] && limit+=(-fork="$FUZZ_FORK" -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  # -rss_limit_mb: a loader that needs more than 2 GiB for an input of at most 64 KiB is a finding.
  "$build/tests/fuzz/fuzz_$t" "${limit[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$work/corpus" > "$work/log.txt" 2>&1 || true
}

start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

printf '%-11s %12s %8s %10s %9s\n' target inputs seconds corpus findings
json="["
for t in "${targets[@]}"; do
  log="$build/campaign/$t/log.txt"
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 | awk '{print $5}' || true)
  # Fork mode prints no final stats: its last "#RUNS: ... time: Ss" status line has the totals.
  [ -z "$runs" ] && runs=$(grep -o '^#[0-9]*:' "$log" | tail -1 | tr -d '#:' || true)
  [ -z "$secs" ] && secs=$(grep -o 'time: [0-9]*s' "$log" | tail -1 | tr -dc '0-9' || true)
  corpus=$(ls "$build/campaign/$t/corpus" | wc -l)
  found=$(ls "$build/findings/$t" 2>/dev/null | wc -l)
  printf '%-11s %12s %8s %10s %9s\n' "$t" "${runs:-?}" "${secs:-?}" "$corpus" "$found"
  json+="{\"target\":\"$t\",\"inputs\":${runs:-null},\"seconds\":${secs:-null},\"corpus\":$corpus,\"findings\":$found},"
done
echo "${json%,}]" > "$build/campaign.json"
echo "campaign: $(( $(date +%s) - start )) s wall; logs in $build/campaign/*/log.txt" >&2
[ "$(cat "$build"/findings/*/* 2>/dev/null | wc -c)" -eq 0 ]
