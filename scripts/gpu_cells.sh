#!/bin/sh
# The issues' timed cells in one GPU call, for when the card matters (issue 5's and 6's targets
# are H200 figures, and the device tool hands out H100s too). Run on the GPU machine from the
# repository root:
#
#   sh scripts/gpu_cells.sh [--h200-only] [--dry-run]
#
# Builds the library for sm_90a, then within GPU_CELLS_BUDGET seconds (default 400; each step
# is cut to what is left): bwd-bench (issue 5's fwd+bwd cells), the op trace (kernels, host lead
# and the device's wait before each launch), bwd-bench again (its L512 cell moves between
# calls: 1.856 and 1.559 ms ten minutes apart on one H100, gpu-2026-12-07-s42), finetune-e2e
# (issue 5's fine-tune criterion, ~35 s), the forward bench's op level (issue 6), train-bench
# if 150 s are left.
# --h200-only: on any other card, write card.txt and stop (the start is the only cost).
# --dry-run: print the steps, run nothing. Everything goes under $OUT/cells (default
# gpu-out/cells), eight files at most, so that a run cut by the tool's limit still comes back
# whole: card.txt, log.txt (each step's exit status, time and output tail), bwd1.json,
# op_trace.json, bwd2.json, finetune_e2e.json, fwd.json, train_bench.json. Set
# DATTN_GIT_COMMIT as for gpu_check.sh (the device has no .git).
set -u
OUT=${OUT:-gpu-out}
D=$OUT/cells
H200=0 DRY=0
while [ $# -gt 0 ]; do
  case $1 in
    --h200-only) H200=1 ;;
    --dry-run) DRY=1 ;;
    *) echo "gpu_cells.sh: unknown argument $1 (see the header)" >&2; exit 2 ;;
  esac
  shift
done
BUDGET=${GPU_CELLS_BUDGET:-400}
T0=$(date +%s)
mkdir -p "$D"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv >"$D/card.txt" 2>&1 ||
  echo "nvidia-smi failed" >>"$D/card.txt"
cat "$D/card.txt"
if [ $H200 -eq 1 ] && ! grep -q "H200" "$D/card.txt"; then
  echo "gpu_cells.sh: not an H200 (--h200-only): nothing run" | tee -a "$D/card.txt"
  exit 0
fi
E="env PYTHONUNBUFFERED=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python"
# step NAME LIMIT TAIL CMD...: run CMD under min(LIMIT, the budget left) seconds, its output in
# a temporary file whose last TAIL lines go to log.txt with the status and the time
step() {
  name=$1 lim=$2 tl=$3
  shift 3
  left=$((BUDGET - ($(date +%s) - T0)))
  [ "$lim" -gt "$left" ] && lim=$left
  if [ $DRY -eq 1 ]; then
    echo "step $name (<= ${lim}s): $*"
    return 0
  fi
  if [ "$lim" -lt 10 ]; then
    echo "== $name: not run (budget spent)" >>"$D/log.txt"
    return 0
  fi
  tmp=$(mktemp)
  timeout "$lim" "$@" >"$tmp" 2>&1
  rc=$?
  echo "== $name rc=$rc at $(($(date +%s) - T0))s" >>"$D/log.txt"
  tail -n "$tl" "$tmp" >>"$D/log.txt"
  rm -f "$tmp"
}
step build 240 3 make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib
step bwd-bench 120 8 $E python3 bench/gpu_bwd_bench.py --json "$D/bwd1.json"
step op-trace 60 40 $E python3 bench/gpu_op_trace.py --json "$D/op_trace.json"
step bwd-bench-2 120 8 $E python3 bench/gpu_bwd_bench.py --json "$D/bwd2.json"
step finetune-e2e 90 3 $E python3 scripts/finetune_e2e.py --device cuda \
  --json "$D/finetune_e2e.json"
step fwd-bench 150 30 $E python3 bench/gpu_bench.py --op-only --json "$D/fwd.json"
if [ $DRY -eq 1 ] || [ $((BUDGET - ($(date +%s) - T0))) -ge 150 ]; then
  step train-bench 170 16 $E python3 bench/gpu_train_bench.py --json "$D/train_bench.json"
fi
[ $DRY -eq 1 ] || cat "$D/log.txt"
