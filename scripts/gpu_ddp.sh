#!/bin/sh
# DDP check on a multi-GPU machine (device kind nvidia-h200-x2): builds libdattn for the
# GPU if needed, then runs scripts/ddp_check.py with NCCL on 2 GPUs. Output under $OUT
# (default gpu-out/): ddp_check.json, ddp_check.log. Exit status: the check's.
#
#   sh scripts/gpu_ddp.sh [extra ddp_check.py arguments]
#   CUDA_ARCHS="-gencode=..."  (default: sm_90a), JOBS=16
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
# NCCL's NVLink multicast stays off (device README); the workers inherit these.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
JOBS=${JOBS:-16}
ARCHS=${CUDA_ARCHS:--gencode=arch=compute_90a,code=sm_90a}
LOG=$OUT/ddp_check.log
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: ${DATTN_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || cat GIT_COMMIT 2>/dev/null || echo none)}"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -5
} >"$LOG" 2>&1
echo "== building libdattn with CUDA ($ARCHS; a no-op when already built so)" | tee -a "$LOG"
timeout 400 make -j"$JOBS" CUDA=1 CUDA_ARCHS="$ARCHS" lib >>"$LOG" 2>&1 || { echo "build failed (see $LOG)"; tail -20 "$LOG"; exit 1; }
PYTHONUNBUFFERED=1 DATTN_LIBRARY="$(pwd)/build/libdattn.so" PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" \
  timeout 300 python3 scripts/ddp_check.py --backend nccl --nproc 2 --json "$OUT/ddp_check.json" "$@" 2>&1 | tee -a "$LOG"
rc=$(tail -1 "$LOG" | grep -q "ddp_check: PASS" && echo 0 || echo 1)
exit $rc
