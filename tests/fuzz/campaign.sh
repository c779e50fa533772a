#!/usr/bin/env bash
# A fuzz campaign from a bundle made by `scripts/fuzz.sh bundle` (run.sh in the bundle is this
# file): every target at once, each as libFuzzer -fork with PROCS processes, for SECONDS; needs no
# clang, only the bundle's binaries (bin/), the shared libraries a plain x86-64 Linux lacks (lib/)
# and the seed + regression corpora (corpus/).
#   run.sh SECONDS PROCS_PER_TARGET OUTDIR [TARGET...]
# Writes to OUTDIR: summary.txt and summary.json (inputs, seconds, processes, findings per target),
# findings/TARGET/ (crash-*, leak-*, timeout-*, oom-*: the inputs, to replay where clang is),
# logs/TARGET.log (the last 200 lines of libFuzzer's output), logs/TARGET.errors (every ERROR line of
# the failed jobs). Exit 0 when nothing was found: no input in findings/ and no failed job.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 SECONDS PROCS_PER_TARGET OUTDIR [TARGET...]" >&2
  exit 2
fi
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
seconds=$1 procs=$2 out=$3
shift 3
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(dfa_json att lrnn word checkpoint sweep)
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out/logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/statetrack-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

run_target() {
  local t=$1
  mkdir -p "$work/$t" "$out/findings/$t"
  cp -r "$bundle/corpus/$t" "$work/$t/corpus"
  # The limits of scripts/fuzz.sh: more than 2 GiB or 10 s for an input of at most 64 KiB is a
  # finding; -fork goes on after one (-ignore_*), so one finding does not end the campaign.
  timeout $((seconds + 120)) "$bundle/bin/fuzz_$t" -fork="$procs" -ignore_crashes=1 -ignore_ooms=1 \
    -ignore_timeouts=1 -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/findings/$t/" "$work/$t/corpus" > "$work/$t/log.txt" 2>&1 || true
  tail -n 200 "$work/$t/log.txt" > "$out/logs/$t.log"
  # A job that exits with an error but leaves no input behind (an exit-time leak report, a signal
  # from outside) shows only here: -fork prints the job's "ERROR:" lines and counts it as a crash.
  grep -E 'ERROR:|SUMMARY:' "$work/$t/log.txt" > "$out/logs/$t.errors" || true
}

start=$(date +%s)
for t in "${targets[@]}"; do run_target "$t" & done
wait
wall=$(( $(date +%s) - start ))

# Fork mode's status lines: "#INPUTS: cov: ... exec/s: ... time: SECONDSs ..."; the last one has the totals.
printf '%-11s %12s %8s %6s %9s %17s %8s\n' target inputs seconds procs findings oom/timeout/crash corpus | tee "$out/summary.txt"
json="{\"seconds_requested\":$seconds,\"procs_per_target\":$procs,\"wall_seconds\":$wall,\"host_cores\":$(nproc),\"targets\":["
found_any=0
for t in "${targets[@]}"; do
  log="$work/$t/log.txt"
  runs=$(grep -o '^#[0-9]*:' "$log" | tail -1 | tr -d '#:' || true)
  secs=$(grep -o 'time: [0-9]*s' "$log" | tail -1 | tr -dc '0-9' || true)
  found=$(find "$out/findings/$t" -type f | wc -l)
  corpus=$(find "$work/$t/corpus" -type f | wc -l)
  # libFuzzer's own count of failed jobs, "oom/timeout/crash: A/B/C", whether or not they left an input
  failed=$(grep -o 'oom/timeout/crash: [0-9]*/[0-9]*/[0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  failed=${failed:-0/0/0}
  [ "$found" -gt 0 ] || [ "$failed" != 0/0/0 ] && found_any=1
  printf '%-11s %12s %8s %6s %9s %17s %8s\n' "$t" "${runs:-?}" "${secs:-?}" "$procs" "$found" "$failed" "$corpus" | tee -a "$out/summary.txt"
  json+="{\"target\":\"$t\",\"inputs\":${runs:-null},\"seconds\":${secs:-null},\"procs\":$procs,\"findings\":$found,\"failed_jobs_oom_timeout_crash\":\"$failed\",\"corpus\":$corpus},"
done
echo "${json%,}]}" > "$out/summary.json"
echo "campaign: ${wall} s wall on $(nproc) cores; findings in $out/findings/" | tee -a "$out/summary.txt"
exit $found_any
