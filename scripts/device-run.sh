#!/usr/bin/env bash
# One call on the GPU machine, with binaries built elsewhere and carried in .devdeps/
# (scripts/device-deps.sh BUILD_DIR): device tests, compute-sanitizer memcheck, an ncu profile of
# one training step, the benchmarks (with bench_step_timeline's account of one step's wall time),
# the PyTorch reference, and parity time-to-learn runs through the CLI. Logs go to $OUT (the device tool's output folder) or ./device-out; each step has its own
# time limit so that one slow step cannot take the others' results with it.
#   scripts/device-run.sh [tests] [sanitizer] [profile] [bench] [torch] [learn]   (default: all)
# .devdeps/bin/bench_train_step.NAME (an earlier build, if carried) is benchmarked after the current one.
# Environment: LEARN_STEPS (18000: ~29 s a run on an H100), LEARN_LRS ("1e-2"), LEARN_SEEDS ("1 2"),
# LEARN_EIGS ("-1,1 0,1"), LEARN_MATMUL (tf32), LEARN_MODEL (deltanet), LEARN_ARGS (more train options, e.g.
# "--cuda-recurrences steps"),
# NCU_METRICS (ncu --metrics). The learning defaults are those of docs/training.md's latest time to learn.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/device-out}
bin=$root/.devdeps/bin
mkdir -p "$out"
export LD_LIBRARY_PATH=$root/.devdeps/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests sanitizer profile bench learn torch)
want() { local s; for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
note() { echo "== $* ($(date +%T))" | tee -a "$out/run.log"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >>"$out/run.log" 2>&1

if want tests; then
  note "device tests"
  timeout 300 "$bin/test_gpu" --gtest_filter='CudaBackend*:CudaKernels*:Trainer*' >"$out/tests.log" 2>&1
  echo "test_gpu exit $?" | tee -a "$out/run.log"
  grep -E '^(tf32|bf16|chunks:|packed:) |FAILED|PASSED' "$out/tests.log" | tee -a "$out/run.log"
fi

if want sanitizer; then
  note "compute-sanitizer memcheck"
  timeout 180 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
    "$bin/test_gpu" --gtest_filter='CudaBackend.AdamW*:CudaBackend.BadInput*:CudaBackend.Fp32MatchesCpuReferenceInChunks:CudaBackend.Pipelined*:CudaBackend.*PackedWords:CudaBackend.Bf16FusedProducts*:CudaKernels.*' >"$out/sanitizer.log" 2>&1
  echo "memcheck exit $?" | tee -a "$out/run.log"
  tail -3 "$out/sanitizer.log" | tee -a "$out/run.log"
  # the recurrences share shared-memory tiles within a warp, the fused products across a block's
  # warps: racecheck them (head dims 8 and 16; the products' kernel tests)
  note "compute-sanitizer racecheck"
  timeout 420 compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$bin/test_gpu" --gtest_filter='CudaBackend.ComparisonCatches*:CudaBackend.Fp32MatchesCpuReferenceInChunks:CudaBackend.Fp32*PackedWords:CudaKernels.*' >"$out/racecheck.log" 2>&1
  echo "racecheck exit $?" | tee -a "$out/run.log"
  tail -2 "$out/racecheck.log" | tee -a "$out/run.log"
fi

if want profile; then
  note "ncu: one deltanet step at T = 40 and T = 256 (no graph)"
  timeout 240 ncu --clock-control none --csv \
    --metrics "${NCU_METRICS:-gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed}" \
    "$bin/bench_train_step" --profile >"$out/ncu.csv" 2>"$out/ncu.err"
  echo "ncu exit $?" | tee -a "$out/run.log"
  tail -2 "$out/ncu.err" >>"$out/run.log"
fi

if want bench; then
  note "bench_train_step"
  timeout 180 "$bin/bench_train_step" --steps 30 --out "$out/bench.json" 2>&1 | tee -a "$out/run.log"
  # earlier versions carried beside it (bench_train_step.NAME), timed in the same call for comparison
  for variant in "$bin"/bench_train_step.*; do
    [ -x "$variant" ] || continue
    note "bench variant ${variant##*/}"
    timeout 120 "$variant" --steps 30 --out "$out/${variant##*/}.json" 2>&1 | tee -a "$out/run.log"
  done
  # the FP64 tensor-core shapes and conversions the chunked delta rule is built on
  [ -x "$bin/bench_fp64_mma" ] && timeout 60 "$bin/bench_fp64_mma" --out "$out/fp64_mma.json" 2>&1 | tee -a "$out/run.log"
  # where the step's wall time goes as training runs it (CUPTI): busy and idle time, one step's kernels
  [ -x "$bin/bench_step_timeline" ] && timeout 120 "$bin/bench_step_timeline" --list --out "$out/timeline.json" \
    >"$out/timeline.txt" 2>&1 && grep period "$out/timeline.txt" | tee -a "$out/run.log"
fi

if want learn; then
  note "parity time to learn (statetrack train --device cuda)"
  learn_steps=${LEARN_STEPS:-18000}
  lrs=(${LEARN_LRS:-1e-2})
  for eig in ${LEARN_EIGS:--1,1 0,1}; do
    for lr in "${lrs[@]}"; do
      for seed in ${LEARN_SEEDS:-1 2}; do
        # [0,1] is the control: the first learning rate is enough to show it stays at chance
        [ "$eig" = 0,1 ] && [ "$lr" != "${lrs[0]}" ] && continue
        dir=/tmp/learn/eig$eig-lr$lr-seed$seed
        timeout 180 "$bin/statetrack" train --task zoo:parity --model "${LEARN_MODEL:-deltanet}" --eig "$eig" --layers 2 \
          --d-model 128 --heads 4 --batch 1024 --lr "$lr" --steps "$learn_steps" --seed "$seed" --train-len 3:40 \
          --test-len 40:256 --eval-every 200 --eval-words 8 --device cuda --matmul "${LEARN_MATMUL:-tf32}" \
          ${LEARN_ARGS:-} --quiet --out "$dir" >>"$out/learn.log" 2>&1
        echo "eig $eig lr $lr seed $seed: exit $?" >>"$out/learn.log"
        python3 - "$dir" "$eig" "$lr" "$seed" <<'EOF' | tee -a "$out/run.log" >>"$out/learn.log"
import json, sys
d, eig, lr, seed = sys.argv[1:]
try:
    rows = [json.loads(l) for l in open(d + "/metrics.jsonl")]
    summary = json.load(open(d + "/summary.json"))
except OSError as e:
    print(f"eig {eig} lr {lr} seed {seed}: no result ({e})"); sys.exit()
solved = next((r for r in rows if r["eval"]["scaled_accuracy"] >= 1.0), None)
best = max(r["eval"]["scaled_accuracy"] for r in rows)
print(f"eig {eig} lr {lr} seed {seed}: best scaled {best:.4f}; " +
      (f"1.0 first at step {solved['step']} after {solved['elapsed_s']:.1f} s" if solved else "never 1.0") +
      f"; run {summary['wall_s']:.1f} s (evaluations {summary.get('evaluation_s', 0):.2f} s, files {summary.get('checkpoint_s', 0):.2f} s), "
      f"{summary['tokens_per_s']:.3g} tok/s; final {summary['final']['scaled_accuracy']:.4f}")
EOF
      done
    done
  done
  # a checkpoint of a CUDA run evaluates on either device (the same words: the accuracies agree up to
  # TF32 rounding of near-ties)
  first=/tmp/learn/eig-1,1-lr${lrs[0]}-seed${LEARN_SEEDS%% *}
  [ -n "${LEARN_SEEDS:-}" ] || first=/tmp/learn/eig-1,1-lr${lrs[0]}-seed1
  for device in cuda cpu; do
    timeout 120 "$bin/statetrack" eval "$first/checkpoint.bin" --test-len 40:80 --eval-words 8 --device $device \
      2>&1 | tail -1 | sed "s/^/eval --device $device: /" | tee -a "$out/run.log"
  done
  # best.bin: the weights of the run's best evaluation, on the whole test range
  timeout 120 "$bin/statetrack" eval "$first/best.bin" --test-len 40:256 --eval-words 8 --device cuda \
    2>&1 | tail -1 | sed "s/^/eval best.bin --device cuda: /" | tee -a "$out/run.log"
fi
if want torch; then
  note "PyTorch reference"
  PYTHONUNBUFFERED=1 timeout 150 python3 "$root/bench/reference_torch.py" --steps 10 --ours "$out/bench.json" \
    --out "$out/torch.json" 2>&1 | tee -a "$out/run.log"
fi

note "done"
