#!/bin/sh
# call 19 (x1, alone): the host-bound train-step cell B8 L512 three times in one call (no
# compile / floor / profile sides), for a median instead of one reading.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > $O/build.log 2>&1 || { tail -5 $O/build.log; exit 1; }
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
for i in 1 2 3; do
  timeout 100 python3 bench/gpu_train_bench.py --cases 8x512 --no-compile --no-floor --no-profile --json $O/train_b8l512_$i.json > $O/train_b8l512_$i.log 2>&1
  echo "rep $i rc=$?"; grep -E "transformers:|dattn       :|ratio" $O/train_b8l512_$i.log
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $O/env.txt; nproc >> $O/env.txt
