#!/bin/sh
# Issue 7 on a GPU machine, from a clean clone: builds the library, installs the peers'
# wheels from .whl (if there), runs `python -m dattn bench` (the encoder protocol) and
# `python -m dattn mnli` (the MNLI-shaped end-to-end run), and writes under $OUT:
#   bench.json bench_latency.png bench_memory.png mnli.json bench7.log env.txt
# (6 files, one level: within the device tool's 8 files / 2 folders).
#
#   sh scripts/gpu_bench7.sh [all|bench|mnli] [extra args for `dattn bench`...]
#
# Peers: put disentangled_flash-1.1.1-py3-none-any.whl and flashdeberta-0.0.8-py3-none-any.whl
# in .whl/ (their other needs -- torch, transformers, triton, einops -- are on the H200 image);
# a peer that is missing or fails is skipped with one line, the rest still runs.
# Time: everything fits one 10-minute device call; GPU_BENCH7_BUDGET (default 570 s) is cut
# between the bench (at most 290 s of cases) and the MNLI run.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
LOG=$OUT/bench7.log
WHAT=${1:-all}
[ $# -gt 0 ] && shift
JOBS=${JOBS:-16}
ARCHS=${CUDA_ARCHS:--gencode=arch=compute_90a,code=sm_90a}
t0=$(date +%s)
BUDGET=${GPU_BENCH7_BUDGET:-570}
left() { echo $((BUDGET - ($(date +%s) - t0))); }
: >"$LOG"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: sh scripts/gpu_bench7.sh $WHAT $*"
  echo "git: ${DATTN_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || cat GIT_COMMIT 2>/dev/null || echo none)}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt" | tee -a "$LOG"

if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >>"$LOG" 2>&1 && export PYTHONPATH=/tmp/site
  echo "installed from .whl: $(ls .whl | tr '\n' ' ')" | tee -a "$LOG"
else
  echo "no .whl/: the peers will be reported as skipped" | tee -a "$LOG"
fi
export PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}"
export DATTN_LIBRARY="$(pwd)/build/libdattn.so" PYTHONUNBUFFERED=1
# Triton's JIT cache on local disk (cold: the peers compile their kernels in the warm-up)
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}

echo "==== build" | tee -a "$LOG"
make -j"$JOBS" CUDA=1 CUDA_ARCHS="$ARCHS" lib >>"$LOG" 2>&1 || { echo "build FAILED" | tee -a "$LOG"; exit 1; }
rc=0
if [ "$WHAT" = all ] || [ "$WHAT" = bench ]; then
  b=$(( $(left) - 230 )); [ "$WHAT" = bench ] && b=$(( $(left) - 40 ))
  [ $b -gt 290 ] && b=290
  echo "==== bench (case budget ${b}s)" | tee -a "$LOG"
  { timeout -k 10 $(( b + 120 )) python3 -m dattn bench --device cuda --budget "$b" \
      --out "$OUT" "$@" 2>&1; echo $? >/tmp/bench7.rc; } | tee -a "$LOG"
  r=$(cat /tmp/bench7.rc); [ "$r" -ne 0 ] && rc=$r
fi
if [ "$WHAT" = all ] || [ "$WHAT" = mnli ]; then
  m=$(( $(left) - 50 ))
  echo "==== mnli ($(left)s left; no implementation starts after ${m}s)" | tee -a "$LOG"
  { timeout -k 10 $(( $(left) > 30 ? $(left) : 30 )) python3 -m dattn mnli --device cuda \
      --budget "$m" --out "$OUT" 2>&1; echo $? >/tmp/bench7.rc; } | tee -a "$LOG"
  r=$(cat /tmp/bench7.rc); [ "$r" -ne 0 ] && rc=$r
fi
echo "==== done in $(( $(date +%s) - t0 ))s, rc=$rc" | tee -a "$LOG"
exit $rc
