#!/bin/sh
# call 46 (x1): ncu profile (source counters) of tc3t "C" at B2 L8192 (working tree): what is
# left of its cost against tc3g (gpu-2026-12-01-bprof3)?
set -u
export PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
OUT=$O/bwd DATTN_CUDA_BWD=tc3t KERNELS="dattn_bwd_tc3t" timeout 400 sh scripts/gpu_prof.sh --shapes 2x8192 --no-flash > $O/prof.log 2>&1
echo "prof rc=$? $(( $(date +%s) - t0 ))s" > $O/summary.txt
rm -f $O/bwd/prof.ncu-rep; gzip $O/bwd/details.txt $O/bwd/source.csv
cp build/src/cuda/bwd_tc3t_d64.o $O/
cat $O/summary.txt $O/bwd/summary.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
