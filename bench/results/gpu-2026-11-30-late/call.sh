#!/bin/sh
# call 30 (x1 alone) on main with the session's final defaults (forward sm90w1g / sm90w1h at
# L <= 512, backward tc3g, lean projections): the full op / memory / encoder bench and the
# training-step bench twice (no compile sides).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > $O/build.log 2>&1 || { tail -5 $O/build.log; exit 1; }
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
timeout 150 python3 bench/gpu_bench.py --json $O/bench.json > $O/bench.log 2>&1; echo "bench rc=$? $(( $(date +%s) - t0 ))s"
for i in 1 2; do
  timeout 120 python3 bench/gpu_train_bench.py --no-compile --json $O/train_bench_$i.json > $O/train_bench_$i.log 2>&1; echo "train $i rc=$? $(( $(date +%s) - t0 ))s"
done
python3 -c "
import json;d=json.load(open('$O/bench.json'))
for r in d['op']: print(r['B'], r['L'], round(r['dattn_ms'],3), round(r['sdpa_flash_ms'],3), round(r['ratio_vs_flash'],3))
print('memory', d['memory']['ratio'])
for k,r in d['encoder'].items(): print(k, r.get('dattn_ms'), r.get('sdpa_floor_ms'), r.get('ratio_vs_floor'), r.get('dattn_graphs_ms'))
" 2>&1 | head -12
grep -hE "ratio" $O/train_bench_*.log | head -8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/env.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
