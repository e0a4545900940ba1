#!/bin/sh
# call 8 (x1): the final tree's forward default (sm90w1b) through the user-facing steps of the
# runner: test_cuda_fwd (default), parity vs transformers, pytest -k cuda, bench, finetune-e2e, demo.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O; L=$O/log.txt
t0=$(date +%s)
s() { n=$1; lim=$2; shift 2; echo "==== $n" >>$L; t=$(date +%s); timeout $lim "$@" >>$L 2>&1; r=$?; echo "$n rc=$r $(( $(date +%s) - t ))s" | tee -a $O/summary.txt; }
s build 120 make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib tests-build
export DATTN_LIBRARY=$(pwd)/build/libdattn.so
s test_cuda_fwd 60 build/tests/test_cuda_fwd
grep -E "^[0-9]+ passed, [0-9]+ failed" $L | tail -1 | tee -a $O/summary.txt
s parity 60 python3 bench/gpu_parity.py --json $O/parity.json
grep -E "^[0-9]+ passed, [0-9]+ failed" $L | tail -1 | tee -a $O/summary.txt
s pytest 60 env PYTHONPATH=python:$PYTHONPATH python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
grep -E "^[0-9]+ (passed|failed)" $L | tail -1 | tee -a $O/summary.txt
s finetune 80 env PYTHONPATH=python:$PYTHONPATH python3 scripts/finetune_e2e.py --device cuda --json $O/finetune_e2e.json
grep -E "^finetune_e2e: initial" $L | tail -1 | tee -a $O/summary.txt
s demo 40 env PYTHONPATH=python:$PYTHONPATH python3 -m dattn demo --device cuda --quiet
s bench 70 python3 bench/gpu_bench.py --json $O/bench.json
echo "total $(( $(date +%s) - t0 ))s" | tee -a $O/summary.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
