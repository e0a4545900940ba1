#!/bin/sh
# DDP check on a multi-GPU machine (device kind nvidia-h200-x2): builds libdattn for the
# GPU if needed, then runs scripts/ddp_check.py with NCCL on 2 GPUs once per autocast mode
# of MODES (default "none bf16": fp32, then bf16 autocast, where the backward takes the
# tensor-core kernels). Output under $OUT (default gpu-out/): ddp_check.log (build and
# machine info), and per mode ddp_check_<mode>.json / ddp_check_<mode>.log. Exit status:
# 0 when every mode passed, else 1.
#
#   sh scripts/gpu_ddp.sh [extra ddp_check.py arguments, passed to every mode]
#   MODES="none bf16 fp16"  (any of none, bf16, fp16), CUDA_ARCHS="-gencode=..."
#   (default: sm_90a), JOBS=16
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
# NCCL's NVLink multicast stays off (device README); the workers inherit these.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
JOBS=${JOBS:-16}
ARCHS=${CUDA_ARCHS:--gencode=arch=compute_90a,code=sm_90a}
MODES=${MODES:-none bf16}
LOG=$OUT/ddp_check.log
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: ${DATTN_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || cat GIT_COMMIT 2>/dev/null || echo none)}"
  echo "modes: $MODES"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -5
} >"$LOG" 2>&1
echo "== building libdattn with CUDA ($ARCHS; a no-op when already built so)" | tee -a "$LOG"
timeout 400 make -j"$JOBS" CUDA=1 CUDA_ARCHS="$ARCHS" lib >>"$LOG" 2>&1 || { echo "build failed (see $LOG)"; tail -20 "$LOG"; exit 1; }
rc=0
summary=""
for mode in $MODES; do
  case $mode in none|bf16|fp16) ;; *) echo "gpu_ddp: unknown mode '$mode' in MODES (none, bf16, fp16)"; exit 2;; esac
  MLOG=$OUT/ddp_check_$mode.log
  echo "== ddp_check --autocast $mode" | tee -a "$LOG"
  PYTHONUNBUFFERED=1 DATTN_LIBRARY="$(pwd)/build/libdattn.so" PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" \
    timeout 300 python3 scripts/ddp_check.py --backend nccl --nproc 2 --autocast "$mode" \
    --json "$OUT/ddp_check_$mode.json" "$@" >"$MLOG" 2>&1
  cat "$MLOG"
  if tail -1 "$MLOG" | grep -q "ddp_check: PASS"; then
    summary="$summary $mode=PASS"
  else
    summary="$summary $mode=FAIL"
    rc=1
  fi
done
echo "gpu_ddp:$summary" | tee -a "$LOG"
exit $rc
