#!/bin/sh
# call 25 (x1) on main + drop16 (16-bit keep test, 8 keys per Philox call): build, the dropout
# C test, the forward quick and full backward sweeps, two quick sanitizers, pytest (dropout /
# train, cuda), the bwd bench (dropout keys), the B4 L2048 train step.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/check $O/bench
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-44s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $S; }
st build 120 make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib tests-build
st "test_dropout" 30 build/tests/test_dropout
st "test_cuda_fwd --quick" 40 build/tests/test_cuda_fwd --quick --seed 3
st "test_cuda_bwd (default)" 70 build/tests/test_cuda_bwd
st "test_cuda_bwd --sweep dropout (fwd sm80)" 40 env DATTN_CUDA_FWD=sm80 build/tests/test_cuda_bwd --sweep dropout
st "san-synccheck(bwd --quick)" 30 compute-sanitizer --tool synccheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 7
st "san-memcheck(fwd --quick)" 30 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_cuda_fwd --quick --seed 7
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
st "pytest(cuda, drop|train)" 60 python3 -m pytest -q -rfEs -k "cuda and (drop or train)" -p no:cacheprovider tests/python
b bwd_bench 40 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
b train_b4 40 python3 bench/gpu_train_bench.py --cases 4x2048 --no-compile --no-floor --top 12 --json $O/bench/train_b4.json
echo "done at $(( $(date +%s) - t0 ))s"
cat $S
grep -E "^B=|drop" $O/bench/bwd_bench.log | head -9
grep -E "B=4 L=2048 (transformers|dattn) *:|ratio" $O/bench/train_b4.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
