#!/bin/sh
# call 14 (x1): tc3c (tc3s + tc3k) as the default backward: build, the full backward sweep on
# it, sanitizers, bwd bench, parity, pytest -k cuda, train bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
S=$O/summary.txt; L=$O/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-40s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
st build 120 make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" lib tests-build
grep -A4 "Compiling entry function 'dattn_bwd_tc3c" $L | grep -o "'dattn_bwd_tc3c[a-z0-9_]*'\|[0-9]* bytes spill stores\|Used [0-9]* registers" > $O/tc3c_resources.txt
st "test_cuda_bwd (default tc3c)" 90 build/tests/test_cuda_bwd
st "test_cuda_bwd --path tc3 --same-as tc3b --quick" 30 build/tests/test_cuda_bwd --path tc3 --same-as tc3b --quick
for tool in memcheck racecheck synccheck initcheck; do
  st "san-$tool(bwd)" 40 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 7
done
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
st bwd_bench 60 python3 bench/gpu_bwd_bench.py --json $O/bwd_bench.json
st parity 45 python3 bench/gpu_parity.py --json $O/parity.json
st "pytest(cuda)" 60 python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
st train_bench 110 python3 bench/gpu_train_bench.py --json $O/train_bench.json
cat $S; cat $O/tc3c_resources.txt | paste - - - 
grep -E "B=|tc3|kind" $L | grep -v "^====" | head -40
grep -E "ratio|vs SDPA" $L | tail -6
