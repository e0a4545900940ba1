#!/bin/sh
# call 28 (x1) on main b8abea6: the B8 L512 train step, the lean projections node (default)
# against DATTN_HF_LEAN=0 (the module calls), five interleaved pairs, nothing else running.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > $O/build.log 2>&1 || { tail -5 $O/build.log; exit 1; }
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
for i in 1 2 3 4 5; do
  timeout 60 python3 bench/gpu_train_bench.py --cases 8x512 --no-compile --no-floor --no-profile --json $O/lean_$i.json > $O/lean_$i.log 2>&1
  timeout 60 env DATTN_HF_LEAN=0 python3 bench/gpu_train_bench.py --cases 8x512 --no-compile --no-floor --no-profile --json $O/old_$i.json > $O/old_$i.log 2>&1
  echo "pair $i"; grep -E "(transformers|dattn) *:|ratio" $O/lean_$i.log $O/old_$i.log | sed 's/.*res.//'
done
echo "done at $(( $(date +%s) - t0 ))s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/env.txt; nproc >> $O/env.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
