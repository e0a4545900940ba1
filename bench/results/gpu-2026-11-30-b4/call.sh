#!/bin/sh
# call 31 (x1 alone) on main dd4c043: the B4 L2048 train step, three readings (no floor side,
# no profile), nothing else running.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > $O/build.log 2>&1 || { tail -5 $O/build.log; exit 1; }
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
for i in 1 2 3; do
  timeout 90 python3 bench/gpu_train_bench.py --cases 4x2048 --no-compile --no-floor --no-profile --json $O/b4_$i.json > $O/b4_$i.log 2>&1
  echo "rep $i rc=$?"; grep -E "(transformers|dattn) *:|ratio" $O/b4_$i.log
done
echo "done at $(( $(date +%s) - t0 ))s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/env.txt; rm -f $O/build.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
