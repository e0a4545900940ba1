#!/bin/sh
# call 23 (x1) on main + fwd8 (sm90w1g opt-in) + the reduce in one batch: build, the backward
# sweep on the default, w1g's forward sweep against ref64 and sm90w1c (lse 1e-5), sanitizers,
# the op bench (w1g columns), the encoder and the B4 L2048 train step with w1g forced and not,
# the bwd bench, pytest -k cuda.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/check $O/bench
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-44s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $S; }
st build 240 make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib tests-build
st "test_cuda_bwd (default tc3f)" 120 build/tests/test_cuda_bwd
st "test_cuda_fwd --path sm90w1g --same-as sm90w1c --lse-tol 1e-5" 150 build/tests/test_cuda_fwd --path sm90w1g --same-as sm90w1c --lse-tol 1e-5 --seed 7
for tool in racecheck synccheck memcheck; do
  st "san-$tool(fwd --path sm90w1g --quick)" 90 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_fwd --path sm90w1g --quick --seed 7
done
for tool in memcheck initcheck racecheck; do
  st "san-$tool(bwd --quick)" 90 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 7
done
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
b bench_op 150 python3 bench/gpu_bench.py --op-only --json $O/bench/bench_op.json
b encoder_w1g 90 env DATTN_CUDA_FWD=sm90w1g python3 bench/gpu_bench.py --encoder-only --json $O/bench/encoder_w1g.json
b train_w1c 60 python3 bench/gpu_train_bench.py --cases 4x2048 --no-compile --no-floor --top 12 --json $O/bench/train_w1c.json
b train_w1g 60 env DATTN_CUDA_FWD=sm90w1g python3 bench/gpu_train_bench.py --cases 4x2048 --no-compile --no-floor --top 12 --json $O/bench/train_w1g.json
b bwd_bench 60 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
st "pytest(cuda)" 100 python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
echo "done at $(( $(date +%s) - t0 ))s"
cat $S
tail -22 $O/bench/bench_op.log | grep -v Warn
tail -8 $O/bench/encoder_w1g.log
grep -E "B=4 L=2048 dattn  |ratio" $O/bench/train_w1c.log $O/bench/train_w1g.log
grep -E "^B=" $O/bench/bwd_bench.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
