#!/bin/sh
# call 65 (x1): same-call A/B of the ws backward: 84a5b87 (no masks, setmaxnreg 40 / 232) against
# 0220174 (masks, 56 / 224), gpu_bwd_bench's default-path rows, twice each, alternating
set -u
export PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
A=$(pwd)/.gpu/old
( make -j8 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > $O/build_new.log 2>&1 ) &
( cd $A && make -j8 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > $O/build_old.log 2>&1 ) &
wait
echo "builds $(($(date +%s)-t0))s $(ls build/libdattn.so $A/build/libdattn.so)" | tee $O/summary.txt
for r in 1 2; do
  for v in old new; do
    if [ $v = old ]; then L=$A/build/libdattn.so; else L=$(pwd)/build/libdattn.so; fi
    timeout 60 env DATTN_LIBRARY=$L PYTHONPATH=python python3 bench/gpu_bwd_bench.py --json $O/bwd_bench_${v}_$r.json > $O/bwd_bench_${v}_$r.log 2>&1
    echo "$v run $r rc=$? $(($(date +%s)-t0))s" | tee -a $O/summary.txt
    grep -E "^B= *[0-9]+ L=" $O/bwd_bench_${v}_$r.log | tee -a $O/summary.txt
  done
done
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
