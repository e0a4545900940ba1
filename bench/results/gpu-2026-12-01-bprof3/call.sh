#!/bin/sh
# call 37 (x1): ncu profiles at B2 L8192 on main 46a8308 (kernel code b6c1452): backward (tc3g,
# with and without position terms, and SDPA flash) and forward (sm90w1g, nopos, flash), with
# SourceCounters; everything packed into one tar.
set -u
export DATTN_GIT_COMMIT=46a8308 PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
OUT=$O/bwd KERNELS="dattn_bwd_tc3|flash_bwd_dq" timeout 200 sh scripts/gpu_prof.sh --nopos --shapes 2x8192 ; echo "bwd rc=$? $(( $(date +%s) - t0 ))s"
OUT=$O/fwd KERNELS="dattn_fwd_sm90|flash_fwd" timeout 120 sh scripts/gpu_prof.sh --no-bwd --nopos --shapes 2x8192 ; echo "fwd rc=$? $(( $(date +%s) - t0 ))s"
for d in fwd bwd; do [ -f $O/$d/details.txt ] && gzip -f $O/$d/details.txt; [ -f $O/$d/source.csv ] && gzip -f $O/$d/source.csv; rm -f $O/$d/prof.ncu-rep; done
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
