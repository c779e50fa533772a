#!/usr/bin/env bash
# The learnability study's GPU batch (issue 9): one call on a machine with one or more GPUs, running
# the CUDA-enabled `statetrack` carried in .devdeps/ (scripts/device-deps.sh BUILD_DIR). Steps run in
# the order given, each under its own time limit inside one overall budget, so that one slow step
# cannot take the others' results with it:
#   speedup  results/specs/gpu-speedup.json once with CUDA_VISIBLE_DEVICES=0, once on every GPU
#   paper    gpu-parity, gpu-mod3, gpu-modarith (the reproduction, in that order of priority)
#   ext      gpu-word-problems, gpu-mlregtest (the extension)
#   long     gpu-mod3-long, gpu-parity-long, gpu-modarith-long (5000 steps)
#   more     gpu-parity-lrs, gpu-mod3-lrs (the paper's other learning rates), gpu-word-problems-long (S3, A5, 5000 steps)
#   jobs     gpu-jobs-per-device with --jobs-per-device 1, 2 and 4 on the first GPU (the sweep's throughput)
# GPU use is sampled every second (nvidia-smi) for the whole call. Run folders live in STUDY_WORK
# (default /tmp/study), so a later call on the same warm machine resumes them (finished runs are
# skipped). At the end every run's JSON and logs, without checkpoints, are packed into
# $OUT/study.tar.gz, the logs and GPU samples into $OUT/logs.tar.gz.
#   scripts/study-device.sh [STEP...]        (default: speedup paper ext)
# Environment: STUDY_BUDGET_S seconds for the whole script [560]; STUDY_DEVICE [cuda] (cpu for a dry
# run without a GPU); STUDY_SPECS folder of the specs [results/specs]; STUDY_BIN [.devdeps/bin/statetrack];
# FUZZ_CMD a command to run in the background meanwhile (CPU only), FUZZ_OUT the folder it writes,
# packed into $OUT/fuzz.tar.gz.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${OUT:-$root/device-out}
work=${STUDY_WORK:-/tmp/study}
specs=${STUDY_SPECS:-$root/results/specs}
bin=${STUDY_BIN:-$root/.devdeps/bin/statetrack}
device=${STUDY_DEVICE:-cuda}
budget=${STUDY_BUDGET_S:-560}
reserve=25  # seconds kept for packing the results
logs=$work/logs
mkdir -p "$out" "$logs"
export LD_LIBRARY_PATH=$root/.devdeps/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(speedup paper ext)
start=$SECONDS

note() { echo "== $* (t=$((SECONDS - start)) s, $(date -u +%T))" | tee -a "$logs/run.log"; }
left() { echo $((budget - reserve - (SECONDS - start))); }
now() { date +%s.%N; }

# sweep NAME SPEC CAP [ENV...]: one `statetrack sweep` into $work/NAME under min(CAP, time left),
# with $sweep_args (e.g. --jobs-per-device 2) where set.
sweep() {
  local name=$1 spec=$2 cap=$3 limit
  shift 3
  limit=$(left)
  [ "$cap" -lt "$limit" ] && limit=$cap
  if [ "$limit" -lt 10 ]; then
    note "$name: skipped, $(left) s left"
    return 0
  fi
  note "$name: $spec, limit $limit s"
  local t0 t1 rc
  t0=$(now)
  env "$@" timeout "$limit" "$bin" sweep "$spec" --device "$device" ${sweep_args:-} --out "$work/$name" >"$logs/$name.log" 2>&1
  rc=$?
  t1=$(now)
  echo "$name: exit $rc, wall $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s" | tee -a "$logs/run.log"
  echo "$name $rc $t0 $t1" >>"$logs/walls.txt"
  tail -3 "$logs/$name.log" >>"$logs/run.log"
}

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$logs/run.log" 2>&1
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,power.draw --format=csv,noheader -lms 1000 \
    >"$logs/gpu-samples.csv" 2>&1 &
  sampler=$!
fi
if [ -n "${FUZZ_CMD:-}" ]; then
  note "fuzz campaign in the background: $FUZZ_CMD"
  timeout $((budget - 10)) bash -c "$FUZZ_CMD" >"$logs/fuzz.log" 2>&1 &
  fuzzer=$!
fi

for step in "${steps[@]}"; do
  case $step in
    speedup)
      sweep speedup-1gpu "$specs/gpu-speedup.json" 120 CUDA_VISIBLE_DEVICES=0
      sweep speedup-all "$specs/gpu-speedup.json" 90
      ;;
    paper)
      sweep parity "$specs/gpu-parity.json" 200
      sweep mod3 "$specs/gpu-mod3.json" 240
      sweep modarith "$specs/gpu-modarith.json" 200
      ;;
    ext)
      sweep mlregtest "$specs/gpu-mlregtest.json" 120
      sweep word-problems "$specs/gpu-word-problems.json" 160
      ;;
    long)
      sweep mod3-long "$specs/gpu-mod3-long.json" 200
      sweep parity-long "$specs/gpu-parity-long.json" 220
      sweep modarith-long "$specs/gpu-modarith-long.json" 260
      ;;
    more)
      sweep parity-lrs "$specs/gpu-parity-lrs.json" 150
      sweep mod3-lrs "$specs/gpu-mod3-lrs.json" 150
      sweep word-problems-long "$specs/gpu-word-problems-long.json" 200
      ;;
    jobs)
      for k in 1 2 4; do
        sweep_args="--jobs-per-device $k" sweep jobs-$k "$specs/gpu-jobs-per-device.json" 200 CUDA_VISIBLE_DEVICES=0
      done
      ;;
    *) note "unknown step $step" ;;
  esac
done

note "summaries"
for d in "$work"/*/; do
  [ -f "$d/sweep.json" ] || continue
  "$bin" sweep --summarize "$d" -o "$d/table.md" >>"$logs/run.log" 2>&1
  "$bin" sweep --summarize "$d" --json >"$d/table.json" 2>>"$logs/run.log"
done
if [ -n "${fuzzer:-}" ]; then
  note "waiting for the fuzz campaign"
  wait "$fuzzer"
  echo "fuzz exit $?" >>"$logs/run.log"
  [ -d "${FUZZ_OUT:-/nonexistent}" ] && tar czf "$out/fuzz.tar.gz" -C "$FUZZ_OUT" .
fi
[ -n "${sampler:-}" ] && kill "$sampler" 2>/dev/null
note "packing"
tar czf "$out/study.tar.gz" -C "$work" --exclude=checkpoint.bin --exclude=best.bin --exclude=logs .
cp "$logs/run.log" "$out/run.log"
tar czf "$out/logs.tar.gz" -C "$work" logs
ls -la "$out" >>"$out/run.log"
