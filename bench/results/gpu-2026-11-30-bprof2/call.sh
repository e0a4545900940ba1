#!/bin/sh
# call 32 (x1): ncu profiles of the current defaults (forward sm90w1h / sm90w1g, backward tc3g)
# against SDPA flash, with and without position terms, at the band-heavy shapes.
set -u
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
t0=$(date +%s)
OUT0=$OUT
OUT=$OUT0/fwd KERNELS="dattn_fwd|flash_fwd" timeout 280 sh scripts/gpu_prof.sh --no-bwd --nopos --shapes 32x512,8x2048 ; echo "fwd rc=$? $(( $(date +%s) - t0 ))s"
OUT=$OUT0/bwd KERNELS="dattn_bwd|flash_bwd" timeout 250 sh scripts/gpu_prof.sh --nopos --shapes 32x512,8x2048 ; echo "bwd rc=$? $(( $(date +%s) - t0 ))s"
cd $OUT0 && for d in fwd bwd; do [ -f $d/details.txt ] && gzip -f $d/details.txt; [ -f $d/source.csv ] && gzip -f $d/source.csv; rm -f $d/prof.ncu-rep; done
ls -la $OUT0/*
